"""Differential tests of the Polygraphy 0.53.6 API names added for data loading and the ONNX Runtime
runner (issue 15): data loaders, the input cache, coercion, raw input blobs, ``SessionFromOnnx`` /
``OnnxrtRunner``, runner errors; and the two tools, ``bench/api_surface.py`` and
``bench/polygraphy_tests.py``."""

from __future__ import annotations

import subprocess
import sys
from collections import OrderedDict

import numpy as np
import onnx
import polygraphy.comparator as pg
import polygraphy.comparator.data_loader as pg_data_loader
import pytest
from onnx import TensorProto, helper
from polygraphy.backend.common import BytesFromPath
from polygraphy.backend.onnxrt import OnnxrtRunner as PgOnnxrtRunner
from polygraphy.backend.onnxrt import SessionFromOnnx as PgSessionFromOnnx
from polygraphy.common import TensorMetadata as PgTensorMetadata
from polygraphy.datatype import DataType
from polygraphy.exception import PolygraphyException

import gate.comparator as ours
import gate.comparator.data_loader as our_data_loader
from gate.backend.base import TensorMetadata
from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx, session_from_onnx
from gate.errors import GateError

from conftest import ROOT

F32 = np.float32


def identity_model(path, shape=("batch", 3)):
    """x (float32, ``shape``) -> Identity -> y."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return str(path)


def same_feed_dicts(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert list(x) == list(y)
        for name in x:
            np.testing.assert_array_equal(np.asarray(x[name]), np.asarray(y[name]), strict=True)


class TestDataLoader:
    @pytest.mark.parametrize("min_shape, max_shape", [((2, 3), (4, 3)), ((2, 3), None), (None, (4, 3)), (None, None)])
    def test_min_max_shapes(self, min_shape, max_shape):
        loaders = []
        for module, meta in ((ours, TensorMetadata()), (pg, PgTensorMetadata())):
            loader = module.DataLoader()
            loader.input_metadata = meta.add("x", np.float32, (-1, 3), min_shape=min_shape, max_shape=max_shape)
            loaders.append([loader[0]])
        same_feed_dicts(*loaders)

    @pytest.mark.parametrize("dtype", [DataType.FLOAT16, DataType.INT32, DataType.BOOL, DataType.FLOAT64])
    def test_polygraphy_datatypes(self, dtype):
        mine = ours.DataLoader(input_metadata=TensorMetadata().add("x", dtype, (2, 3)))
        theirs = pg.DataLoader(input_metadata=PgTensorMetadata().add("x", dtype, (2, 3)))
        same_feed_dicts([mine[0]], [theirs[0]])

    def test_bfloat16_needs_a_custom_loader(self):
        loader = ours.DataLoader()
        loader.input_metadata = TensorMetadata().add("x", DataType.BFLOAT16, (3,))
        with pytest.raises(GateError, match="Please use a custom data loader to provide inputs."):
            loader[0]

    def test_backend_module(self):
        meta = TensorMetadata().add("x", np.float32, (2,))
        same_feed_dicts(
            [ours.DataLoader(input_metadata=meta, data_loader_backend_module="numpy")[0]],
            [ours.DataLoader(input_metadata=meta)[0]],
        )
        with pytest.raises(GateError, match="Invalid `data_loader_backend_module`"):
            ours.DataLoader(data_loader_backend_module="jax")
        sampler = our_data_loader.ArraySampler("numpy", 5)
        theirs = pg_data_loader.ArraySampler("numpy", 5)
        np.testing.assert_array_equal(
            sampler.sample_float((3,), np.float32, -1.0, 2.0),
            theirs.sample_float((3,), np.float32, -1.0, 2.0),
            strict=True,
        )
        np.testing.assert_array_equal(
            sampler.sample_integer((4,), np.int64, 0, 9), theirs.sample_integer((4,), np.int64, 0, 9), strict=True
        )

    def test_user_metadata_override_survives_comparator_run(self, tmp_path):
        path = identity_model(tmp_path / "m.onnx")
        user = {"ours": TensorMetadata().add("x", None, (4, 3)), "pg": PgTensorMetadata().add("x", None, (4, 3))}
        mine = ours.Comparator.run(
            [OnnxrtRunner(SessionFromOnnx(path), name="r")], ours.DataLoader(input_metadata=user["ours"], iterations=2)
        )
        theirs = pg.Comparator.run(
            [PgOnnxrtRunner(PgSessionFromOnnx(path), name="r")], pg.DataLoader(input_metadata=user["pg"], iterations=2)
        )
        assert mine["r"][0]["y"].shape == (4, 3)
        same_feed_dicts([dict(it) for it in mine["r"]], [dict(it) for it in theirs["r"]])


class TestStoredInputs:
    def feeds(self):
        return [OrderedDict(x=np.full((2, 3), i, F32), ids=np.arange(3, dtype=np.int64) + i) for i in range(3)]

    def test_streaming_data_loader_reads_what_polygraphy_wrote(self, tmp_path):
        from polygraphy.json import save_json

        save_json(self.feeds(), str(tmp_path / "inputs.json"))
        folder = tmp_path / "inputs"
        folder.mkdir()
        for i, feed in enumerate(self.feeds()):
            save_json(feed, str(folder / f"{i:010d}.json"))
        for source in (
            tmp_path / "inputs.json",
            folder,
            [str(folder / "0000000000.json"), str(tmp_path / "inputs.json")],
        ):
            paths = source if isinstance(source, list) else str(source)
            same_feed_dicts(list(ours.StreamingDataLoader(paths)), list(pg.StreamingDataLoader(paths)))
        with pytest.raises(GateError, match="allow_dirs=False"):
            list(ours.StreamingDataLoader(str(folder), allow_dirs=False))
        assert repr(ours.StreamingDataLoader("a.json")) == "StreamingDataLoader('a.json', allow_dirs=True)"

    def test_data_loader_cache(self):
        shape = (4, 4)
        results = []
        for module, meta_type in ((our_data_loader, TensorMetadata), (pg_data_loader, PgTensorMetadata)):
            data = [OrderedDict(X=np.zeros(shape, np.int64), Y=np.zeros(shape, np.int64), Z=np.ones(1, F32))]
            cache = module.DataLoaderCache(data)
            cache.set_input_metadata(meta_type().add("X", DataType.INT64, shape).add("Y", DataType.INT64, shape))
            cache.cache[0] = OrderedDict(X=np.ones((8, 8), np.int64), Y=np.ones(shape, np.int64))
            first = cache[0]  # X cannot be reused (shape): reloaded from the loader; Y comes from the cache
            cache.set_input_metadata(meta_type().add("Y", DataType.FLOAT64, shape))
            results.append([first, cache[0]])
        same_feed_dicts(*results)
        assert results[0][1]["Y"].dtype == np.float64 and list(results[0][0]) == ["X", "Y"]

    def test_check_feed_dict_and_coerce_buffer(self):
        for bad in (ours.RunResults(), [1, 2], {1: np.ones(1)}):
            with pytest.raises(GateError, match="cannot be recognized as a feed_dict"):
                our_data_loader.check_feed_dict(bad)
            with pytest.raises(PolygraphyException, match="cannot be recognized as a feed_dict"):
                pg_data_loader.check_feed_dict(bad if not isinstance(bad, ours.RunResults) else pg.RunResults())
        with pytest.raises(GateError, match="Hint: This is a `RunResults`"):
            our_data_loader.check_feed_dict(ours.RunResults())
        x = np.arange(4, dtype=F32).reshape(2, 2)
        mine = our_data_loader.coerce_buffer(x, "x", DataType.FLOAT64, (2, -1))
        theirs = pg_data_loader.coerce_buffer(x, "x", DataType.FLOAT64, (2, -1))
        np.testing.assert_array_equal(mine, theirs, strict=True)
        assert our_data_loader.coerce_buffer(x, "x", np.float32, (2, 2)) is x
        with pytest.raises(GateError, match="casting would change"):
            our_data_loader.coerce_buffer(x + 0.5, "x", DataType.INT32, (2, 2))  # D11: Polygraphy truncates

    def test_save_input_blob_path_same_files(self, tmp_path):
        path = identity_model(tmp_path / "m.onnx", shape=(2, 3))
        for streaming in (False, True):
            out = {}
            for label, module, runner in (
                ("ours", ours, OnnxrtRunner(SessionFromOnnx(path), name="r")),
                ("pg", pg, PgOnnxrtRunner(PgSessionFromOnnx(path), name="r")),
            ):
                blob = tmp_path / f"{label}-{streaming}"
                run = module.Comparator.run(
                    [runner], module.DataLoader(iterations=2), save_input_blob_path=str(blob), streaming=streaming
                )
                if streaming:
                    list(run)
                out[label] = sorted((p.relative_to(blob).as_posix(), p.read_bytes()) for p in blob.rglob("*.bin"))
            assert [name for name, _ in out["ours"]] == ["0000000000/x.bin", "0000000001/x.bin"]
            assert out["ours"] == out["pg"]
        with pytest.raises(GateError, match="Two of save_inputs_path, save_outputs_path, and save_input_blob_path"):
            ours.Comparator.run([], save_inputs_path=str(tmp_path / "a"), save_input_blob_path=str(tmp_path / "a"))


class TestOnnxrt:
    def test_session_from_path_bytes_and_loader(self, tmp_path):
        path = identity_model(tmp_path / "m.onnx")
        for model in (path, open(path, "rb").read(), BytesFromPath(path)):
            for providers in (None, ["cpu"], ["CPU"], ["CPUExecutionProvider"]):
                mine, theirs = SessionFromOnnx(model, providers=providers)(), PgSessionFromOnnx(model, providers)()
                assert mine.get_providers() == theirs.get_providers() == ["CPUExecutionProvider"]
        assert session_from_onnx(path, ["cpu"]).get_providers() == ["CPUExecutionProvider"]
        with pytest.raises(GateError, match="Could not find specified ONNX-Runtime execution provider"):
            SessionFromOnnx(path, providers=["cpu", "not_a_real_provider"])()

    def test_metadata_dims_are_lists(self, tmp_path):
        path = identity_model(tmp_path / "m.onnx", shape=("dim0", 16))
        with OnnxrtRunner(SessionFromOnnx(path)) as mine, PgOnnxrtRunner(PgSessionFromOnnx(path)) as theirs:
            for use_numpy in (None, False):
                ours_meta, their_meta = mine.get_input_metadata(use_numpy), theirs.get_input_metadata(use_numpy)
                assert ours_meta["x"].shape == their_meta["x"].shape == ["dim0", 16]
                assert isinstance(ours_meta["x"].shape, list)
            assert mine.get_input_metadata()["x"].dtype == theirs.get_input_metadata()["x"].dtype == np.float32

    @pytest.mark.parametrize(
        "feed, message",
        [
            ({"x": np.ones((1, 3), F32), "fake": np.ones(1, F32)}, "Extra inputs in input data"),
            ({"fake": np.ones(1, F32)}, "The following inputs were not found in input data"),
            ({"x": np.ones((1, 3), np.int32)}, "Input tensor: x \\| Received unexpected dtype: int32"),
            ({"x": np.ones((1, 4), F32)}, "Input tensor: x \\| Received incompatible shape: \\(1, 4\\)"),
        ],
    )
    def test_input_errors_worded_as_polygraphy(self, tmp_path, feed, message):
        path = identity_model(tmp_path / "m.onnx")
        with OnnxrtRunner(SessionFromOnnx(path)) as mine, PgOnnxrtRunner(PgSessionFromOnnx(path)) as theirs:
            with pytest.raises(GateError, match=message):
                mine.infer(feed)
            with pytest.raises(PolygraphyException, match=message):
                theirs.infer(feed)
        with pytest.raises(GateError, match="Must be activated prior to calling infer"):
            OnnxrtRunner(SessionFromOnnx(path), name="r").infer(feed)


def test_api_surface_lists_nothing_missing():
    """Every public name of polygraphy.comparator / backend.base / backend.onnxrt is ours (or not
    applicable, with the reason), with Polygraphy's parameter names."""
    proc = subprocess.run(
        [sys.executable, "bench/api_surface.py"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 missing" in proc.stdout and "MISSING" not in proc.stdout
    assert "n/a       polygraphy.backend.base.util" in proc.stdout
    table = subprocess.run(
        [sys.executable, "bench/api_surface.py", "--table"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    readme = (ROOT / "README.md").read_text()
    for line in table.stdout.splitlines()[2:]:
        assert line in readme, f"README's API surface table lacks: {line}"


def test_polygraphy_tests_harness_on_a_small_tests_folder(tmp_path):
    """bench/polygraphy_tests.py copies a Polygraphy-style tests folder, changes only the imports of
    the three modules for the gate run, and counts: a test that passes on both, one that passes on
    polygraphy only (unexplained: exit 1), one that fails on both (not counted)."""
    tests = tmp_path / "tests"
    for folder in ("models", "comparator", "backend/base", "backend/onnxrt"):
        (tests / folder).mkdir(parents=True)
        (tests / folder / "__init__.py").write_text("")
    for name in ("__init__.py", "conftest.py", "helper.py", "backend/__init__.py"):
        (tests / name).write_text("")
    (tests / "pytest.ini").write_text("[pytest]\n")
    (tests / "comparator" / "test_x.py").write_text(
        "import numpy as np\n"
        "import pytest\n"
        "from polygraphy.comparator import RunResults\n"
        "from polygraphy.exception import PolygraphyException\n\n"
        "def test_both():\n"
        "    with pytest.raises(PolygraphyException):\n"
        "        RunResults()['missing']\n\n"
        "def test_polygraphy_only():\n"
        "    assert RunResults.__module__.startswith('polygraphy')\n\n"
        "def test_neither():\n"
        "    assert False\n"
    )
    proc = subprocess.run(
        [sys.executable, "bench/polygraphy_tests.py", str(tests), "--keep", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "passing on polygraphy: 2; of those passing on gate: 1 (50.0 %); unexplained: 1" in proc.stdout
    assert "test_polygraphy_only: failed -- UNEXPLAINED" in proc.stdout
    rewritten = (tmp_path / "runs" / "gate" / "tests" / "comparator" / "test_x.py").read_text()
    assert "from gate.comparator import RunResults" in rewritten
    assert "from gate.errors import GateError as PolygraphyException" in rewritten


def test_runner_metadata_may_hold_polygraphy_datatypes():
    """A custom runner may describe its inputs with Polygraphy DataTypes (Polygraphy allows it): the
    metadata handed out holds numpy dtypes and the input check compares them as such."""
    from gate.backend.base import BaseRunner

    class Runner(BaseRunner):
        def get_input_metadata_impl(self):
            return {"x": (DataType.FLOAT32, [2])}

        def infer_impl(self, feed_dict):
            return OrderedDict(y=feed_dict["x"] * 2)

    with Runner(name="custom") as runner:
        assert runner.get_input_metadata()["x"].dtype == np.float32
        np.testing.assert_array_equal(runner.infer({"x": np.ones(2, F32)})["y"], [2, 2])
        with pytest.raises(GateError, match="Received unexpected dtype: float64"):
            runner.infer({"x": np.ones(2)})
