"""Polygraphy's JSON, both ways: Polygraphy 0.53.6 (the oracle, installed) loads what we write and we
load what it writes, byte for byte where we write; golden sets made by the real ``polygraphy run``
CLI are read through ``open_tensor_set`` and checked with ``python -m gate check``."""

from __future__ import annotations

import base64
import io
import json
import shutil
import subprocess
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from polygraphy.comparator import IterationResult as PgIterationResult
from polygraphy.comparator import RunResults as PgRunResults
from polygraphy.comparator.data_loader import StreamingDataLoader
from polygraphy.json import from_json as pg_from_json
from polygraphy.json import save_json as pg_save_json
from polygraphy.json import to_json as pg_to_json

from gate.comparator import IterationResult, RunResults, serde
from gate.data import open_tensor_set
from gate.errors import GateError

from conftest import make_small_model, run_cli, write_gate_toml


def arrays(i=0):
    return OrderedDict(
        [
            ("y", np.array([1.0 + i, np.nan, np.inf, -np.inf], np.float32)),
            ("a/b:0", (np.arange(6, dtype=np.int64) + i).reshape(2, 3)),
            ("flag", np.array(True)),
            ("empty", np.zeros((0, 3), np.float16)),
            ("fortran", np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3))),
            ("big_endian", np.arange(3, dtype=">i4")),
        ]
    )


def ours_run():
    return RunResults(
        [
            ("ort", [IterationResult(arrays(0), 0.25, "ort"), IterationResult(arrays(1), float("nan"), "ort")]),
            ("trt", [IterationResult(arrays(0), None, "trt"), IterationResult(arrays(1), float("inf"), "trt")]),
        ]
    )


def pg_run():
    return PgRunResults(
        [
            ("ort", [PgIterationResult(arrays(0), 0.25, "ort"), PgIterationResult(arrays(1), float("nan"), "ort")]),
            ("trt", [PgIterationResult(arrays(0), None, "trt"), PgIterationResult(arrays(1), float("inf"), "trt")]),
        ]
    )


def same_runtime(a, b):
    return a == b or (a is not None and b is not None and np.isnan(a) and np.isnan(b))


def assert_same_run(ours: RunResults, theirs: PgRunResults):
    assert [name for name, _ in ours.lst] == [name for name, _ in theirs.lst]
    for (_, ours_its), (_, their_its) in zip(ours.lst, theirs.lst):
        assert len(ours_its) == len(their_its)
        for mine, other in zip(ours_its, their_its):
            assert mine.runner_name == other.runner_name and same_runtime(mine.runtime, other.runtime)
            assert list(mine.keys()) == list(other.keys())
            for name, value in other.items():
                assert mine[name].dtype == value.dtype and mine[name].shape == value.shape, name
                np.testing.assert_array_equal(mine[name], value)


class TestRunResultsBothWays:
    def test_our_file_is_polygraphys_bytes_and_polygraphy_loads_it(self, tmp_path):
        serde.save_run_results(ours_run(), tmp_path / "ours.json")
        pg_run().save(str(tmp_path / "pg.json"))
        assert (tmp_path / "ours.json").read_bytes() == (tmp_path / "pg.json").read_bytes()
        assert_same_run(serde.load_run_results(tmp_path / "pg.json"), PgRunResults.load(str(tmp_path / "ours.json")))

    def test_we_load_polygraphys_save(self, tmp_path):
        pg_run().save(str(tmp_path / "pg.json"))
        loaded = serde.load_run_results(tmp_path / "pg.json")
        assert isinstance(loaded, RunResults) and isinstance(loaded["ort"][0], IterationResult)
        assert_same_run(loaded, pg_run())
        assert loaded["ort"][1].runtime != loaded["ort"][1].runtime  # NaN runtime survives
        assert loaded["trt"][1].runtime == float("inf") and loaded["trt"][0].runtime is None

    def test_nan_and_infinity_are_bare_tokens(self):
        text = serde.to_json(RunResults([("r", [IterationResult({}, float("nan"), "r")])]))
        assert '"runtime": NaN' in text
        assert '"runtime": Infinity' in serde.to_json(IterationResult({}, float("inf"), "r"))

    def test_empty_run_results(self, tmp_path):
        serde.save_run_results(RunResults(), tmp_path / "e.json")
        PgRunResults().save(str(tmp_path / "pg.json"))
        assert (tmp_path / "e.json").read_bytes() == (tmp_path / "pg.json").read_bytes()
        assert json.loads((tmp_path / "e.json").read_text()) == {"lst": [], "polygraphy_class": "RunResults"}
        assert len(serde.load_run_results(tmp_path / "pg.json")) == 0

    def test_duplicate_runner_names_are_kept(self, tmp_path):
        run = RunResults([("R", [IterationResult({"y": np.zeros(1)}, 0.0, "R")])] * 2)
        serde.save_run_results(run, tmp_path / "d.json")
        assert [name for name, _ in PgRunResults.load(str(tmp_path / "d.json")).lst] == ["R", "R"]

    def test_load_streaming_splits_files_and_reads_directories_in_order(self, tmp_path):
        folder = tmp_path / "dir"
        folder.mkdir()
        for index, single in enumerate(pg_run().split()):
            single.save(str(folder / f"{index:010d}.json"))
        pg_run().save(str(tmp_path / "whole.json"))
        from_dir = list(serde.load_run_results_streaming(folder))
        from_file = list(serde.load_run_results_streaming(str(tmp_path / "whole.json")))
        chained = list(serde.load_run_results_streaming([folder, tmp_path / "whole.json"]))
        assert len(from_dir) == len(from_file) == 2 and len(chained) == 4
        for ours, theirs in zip(from_dir + from_file, list(PgRunResults.load_streaming(str(folder))) * 2):
            assert_same_run(ours, theirs)
        assert from_dir[1]["ort"][0]["y"][0] == 2.0

    def test_polygraphy_streams_our_directory(self, tmp_path):
        folder = tmp_path / "dir"
        folder.mkdir()
        for index, single in enumerate(ours_run().split()):
            serde.save_run_results(single, folder / f"{index:010d}.json")
        merged = PgRunResults.concat(PgRunResults.load_streaming(str(folder)))
        assert_same_run(ours_run(), merged)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        array=hnp.arrays(
            dtype=st.sampled_from(
                [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int32, np.uint64, np.bool_, np.complex64]
            ),
            shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
        )
    )
    def test_any_array_round_trips_identically(self, array):
        ours = serde.to_json(RunResults([("r", [IterationResult({"t": array}, 0.5, "r")])]))
        theirs = PgRunResults([("r", [PgIterationResult({"t": array}, 0.5, "r")])]).to_json()
        assert ours == theirs
        back = serde.from_json(theirs)["r"][0]["t"]
        assert back.dtype == array.dtype and back.shape == array.shape
        np.testing.assert_array_equal(back, array)
        np.testing.assert_array_equal(PgRunResults.from_json(ours)["r"][0]["t"], array)


class TestInputs:
    def feeds(self):
        return [OrderedDict(x=np.full((2, 3), i, np.float32), ids=np.arange(3) + i) for i in range(3)]

    def test_single_file_is_a_plain_list_polygraphy_reads(self, tmp_path):
        serde.save_inputs(self.feeds(), tmp_path / "in.json")
        pg_save_json(self.feeds(), str(tmp_path / "pg.json"))
        assert (tmp_path / "in.json").read_bytes() == (tmp_path / "pg.json").read_bytes()
        assert isinstance(json.loads((tmp_path / "in.json").read_text()), list)
        for ours, theirs in zip(
            serde.load_inputs_streaming(tmp_path / "pg.json"), StreamingDataLoader(str(tmp_path / "in.json"))
        ):
            assert list(ours) == list(theirs) == ["x", "ids"]
            for name in ours:
                np.testing.assert_array_equal(ours[name], theirs[name])
                assert ours[name].dtype == theirs[name].dtype

    def test_directory_holds_one_feed_dict_per_file(self, tmp_path):
        serde.save_inputs(self.feeds(), tmp_path / "inputs")
        files = sorted(p.name for p in (tmp_path / "inputs").iterdir())
        assert files == ["0000000000.json", "0000000001.json", "0000000002.json"]
        assert isinstance(json.loads((tmp_path / "inputs" / files[0]).read_text()), dict)
        theirs = list(StreamingDataLoader(str(tmp_path / "inputs")))
        ours = list(serde.load_inputs_streaming(tmp_path / "inputs"))
        assert len(ours) == len(theirs) == 3
        assert ours[2]["x"][0, 0] == theirs[2]["x"][0, 0] == 2.0

    def test_a_file_holding_one_feed_dict_is_one_iteration(self, tmp_path):
        pg_save_json(self.feeds()[1], str(tmp_path / "one.json"))
        (only,) = serde.load_inputs_streaming(tmp_path / "one.json")
        assert only["x"][0, 0] == 1.0

    def test_outputs_given_as_inputs_are_refused(self, tmp_path):
        pg_run().save(str(tmp_path / "golden.json"))
        with pytest.raises(GateError, match=r"golden\.json: holds inference results \(a RunResults\), expected inputs"):
            list(serde.load_inputs_streaming(tmp_path / "golden.json"))


def legacy_array(array):
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return {
        "array": base64.b64encode(buffer.getvalue()).decode(),
        "__polygraphy_encoded_ndarray": "polygraphy_serialized_json_type",
    }


class TestOldAndHostileFiles:
    def test_legacy_type_markers(self, tmp_path):
        doc = {
            "lst": [
                [
                    "old",
                    [
                        {
                            "outputs": {
                                "y": {
                                    "values": legacy_array(np.arange(3.0)),
                                    "__polygraphy_encoded_LazyArray": "polygraphy_serialized_json_type",
                                }
                            },
                            "runtime": 0.1,
                            "runner_name": "old",
                            "__polygraphy_encoded_IterationResult": "polygraphy_serialized_json_type",
                        }
                    ],
                ]
            ],
            "__polygraphy_encoded_RunResults": "polygraphy_serialized_json_type",
        }
        text = json.dumps(doc)
        ours = serde.from_json(text)
        assert_same_run(ours, pg_from_json(text))
        assert ours["old"][0]["y"].tolist() == [0.0, 1.0, 2.0]

    def test_lazy_numpy_array_alias_latin1_and_npz_payloads(self):
        buffer = io.BytesIO()
        np.save(buffer, np.array([7, 8], np.int16), allow_pickle=False)
        latin1 = {"array": buffer.getvalue().decode("latin-1"), "polygraphy_class": "ndarray"}
        npz = io.BytesIO()
        np.savez(npz, first=np.array([1.5]), second=np.array([2.5]))
        npz_doc = {"array": base64.b64encode(npz.getvalue()).decode(), "polygraphy_class": "ndarray"}
        doc = {"a": {"values": latin1, "polygraphy_class": "LazyNumpyArray"}, "b": npz_doc}
        text = json.dumps(doc)
        ours, theirs = serde.from_json(text), pg_from_json(text)
        assert ours["a"].tolist() == theirs["a"].load().tolist() == [7, 8]
        assert ours["b"].tolist() == theirs["b"].tolist() == [1.5]

    def test_unknown_class_names_the_file(self, tmp_path):
        path = tmp_path / "odd.json"
        path.write_text(json.dumps({"x": 1, "polygraphy_class": "FancyThing"}))
        with pytest.raises(GateError, match=r"odd\.json: Could not decode serialized type: FancyThing"):
            serde.load_json(path)
        with pytest.raises(Exception, match="Could not decode serialized type"):
            pg_from_json(path.read_text())

    @pytest.mark.parametrize(
        "payload",
        [
            lambda: np.array([{"a": 1}, None], dtype=object),  # object array: .npy with a pickle inside
            lambda: b"\x80\x04\x95" + b"\x00" * 16,  # bare pickle bytes
        ],
        ids=["object-array", "pickle-bytes"],
    )
    def test_payloads_needing_pickle_are_refused_naming_file_and_tensor(self, tmp_path, payload):
        value = payload()
        if isinstance(value, np.ndarray):
            buffer = io.BytesIO()
            np.save(buffer, value, allow_pickle=True)
            value = buffer.getvalue()
        doc = [{"tokens": {"array": base64.b64encode(value).decode(), "polygraphy_class": "ndarray"}}]
        path = tmp_path / "evil.json"
        path.write_text(json.dumps(doc))
        with pytest.raises(GateError, match=r"evil\.json: tensor 'tokens': the array payload needs pickle"):
            list(serde.load_inputs_streaming(path))

    def test_torch_payload_is_refused(self, tmp_path):
        path = tmp_path / "t.json"
        path.write_text(json.dumps({"x": {"tensor": "AAAA", "polygraphy_class": "Tensor"}}))
        with pytest.raises(GateError, match=r"t\.json: tensor 'x': a torch\.Tensor payload is a pickle"):
            serde.load_json(path)

    def test_not_json_and_wrong_content(self, tmp_path):
        (tmp_path / "bad.json").write_text("{nope")
        with pytest.raises(GateError, match=r"bad\.json: not a JSON file"):
            serde.load_run_results(tmp_path / "bad.json")
        pg_save_json([{"x": np.zeros(1)}], str(tmp_path / "in.json"))
        with pytest.raises(GateError, match=r"in\.json: holds a JSON list, expected inference results"):
            serde.load_run_results(tmp_path / "in.json")
        with pytest.raises(GateError, match="is a directory"):
            serde.load_run_results(tmp_path)

    def test_object_arrays_are_not_written(self, tmp_path):
        with pytest.raises(GateError, match="dtype object"):
            serde.save_inputs([{"x": np.array([None], dtype=object)}], tmp_path / "x.json")


class TestOpenTensorSet:
    def test_single_file_and_directory_read_like_the_other_layouts(self, tmp_path):
        pg_run().save(str(tmp_path / "golden.json"))
        folder = tmp_path / "golden"
        folder.mkdir()
        for index, single in enumerate(pg_run().split()):
            single.save(str(folder / f"{index:010d}.json"))
        for path in (tmp_path / "golden.json", folder):
            stored = open_tensor_set(path, "output", runner="trt")
            assert stored.layout == "polygraphy-json" and len(stored) == 2
            assert list(stored[1]) == list(arrays(1)) and stored[1]["y"][0] == 2.0
        assert open_tensor_set(folder, "output", runner="ort").location(1) == folder / "0000000001.json"

    def test_several_runners_need_a_choice(self, tmp_path):
        pg_run().save(str(tmp_path / "golden.json"))
        with pytest.raises(
            GateError, match=r"golden\.json: the saved RunResults holds several runners \['ort', 'trt'\]"
        ):
            open_tensor_set(tmp_path / "golden.json", "output")
        with pytest.raises(GateError, match=r"holds no results of runner 'tensorrt' \(golden_runner\); it holds"):
            open_tensor_set(tmp_path / "golden.json", "output", runner="tensorrt")

    def test_directory_is_read_one_file_at_a_time(self, tmp_path, monkeypatch):
        folder = tmp_path / "inputs"
        serde.save_inputs([OrderedDict(x=np.full(2, i, np.float32)) for i in range(4)], folder)
        stored = open_tensor_set(folder, "input")
        read = []
        original = serde.load_json
        monkeypatch.setattr("gate.data.polygraphy_json.load_json", lambda p: read.append(p.name) or original(p))
        assert stored[2]["x"].tolist() == [2.0, 2.0] and read == ["0000000002.json"]

    def test_a_directory_file_with_several_iterations_is_an_error(self, tmp_path):
        folder = tmp_path / "golden"
        folder.mkdir()
        PgRunResults([("r", [PgIterationResult({"y": np.zeros(1)}, 0.0, "r")] * 2)]).save(
            str(folder / "0000000000.json")
        )
        with pytest.raises(
            GateError, match=r"0000000000\.json: holds 2 iterations; each file of a directory must hold one"
        ):
            open_tensor_set(folder, "output")[0]

    def test_kind_mismatch_and_missing_file(self, tmp_path):
        pg_save_json([{"x": np.zeros(1)}], str(tmp_path / "inputs.json"))
        with pytest.raises(GateError, match=r"inputs\.json: holds a JSON list, expected inference results"):
            open_tensor_set(tmp_path / "inputs.json", "output")
        with pytest.raises(GateError, match=r"nope\.json: file not found"):
            open_tensor_set(tmp_path / "nope.json", "input")


def polygraphy_cli(*args, cwd):
    exe = shutil.which("polygraphy")
    assert exe, "the polygraphy CLI (pip install polygraphy==0.53.6) is needed"
    return subprocess.run([exe, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture
def polygraphy_golden(tmp_path):
    """A model plus inputs and golden outputs written by the real ``polygraphy run`` (ONNX Runtime),
    both as single files and as per-iteration directories."""
    make_small_model(tmp_path / "model.onnx", size=16)
    for suffix in (".json", ""):
        args = ["--iterations", "3", "--input-shapes", "x:[2,16]", "--val-range", "x:[-1,1]"]
        saves = ["--save-inputs", f"inputs{suffix}", "--save-outputs", f"golden{suffix}"]
        proc = polygraphy_cli("run", "model.onnx", "--onnxrt", *args, *saves, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    return tmp_path


class TestPolygraphyCliGolden:
    def test_open_tensor_set_reads_what_polygraphy_run_wrote(self, polygraphy_golden):
        folder = polygraphy_golden
        golden = PgRunResults.load(str(folder / "golden.json"))
        ((runner, iterations),) = golden.lst
        assert runner.startswith("onnxrt-runner-N0-")
        inputs = list(StreamingDataLoader(str(folder / "inputs.json")))
        for path in ("golden.json", "golden"):
            stored = open_tensor_set(folder / path, "output", ["y", "s"])
            assert len(stored) == 3
            for mine, theirs in zip(stored, iterations):
                assert list(mine) == ["y", "s"]
                np.testing.assert_array_equal(mine["y"], theirs["y"])
        for path in ("inputs.json", "inputs"):
            stored = open_tensor_set(folder / path, "input", ["x"])
            assert len(stored) == 3
            for mine, theirs in zip(stored, inputs):
                np.testing.assert_array_equal(mine["x"], theirs["x"])

    @pytest.mark.parametrize(("inputs", "golden"), [("inputs.json", "golden.json"), ("inputs", "golden")])
    def test_gate_check_passes_on_polygraphy_golden(self, polygraphy_golden, inputs, golden):
        folder = polygraphy_golden
        toml = write_gate_toml(folder, f'model = "model.onnx"\ninputs = "{inputs}"\ngolden = "{golden}"\n')
        proc = run_cli("check", toml, "--junit", folder / "junit.xml")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "PASSED: 2 of 2 outputs within tolerance over 3 iterations" in proc.stdout

    def test_a_golden_we_write_is_judged_alike_by_both(self, polygraphy_golden):
        folder = polygraphy_golden
        golden = serde.load_run_results(folder / "golden.json")
        golden.lst[0][1][1]["s"][0] += 0.5
        serde.save_run_results(golden, folder / "perturbed.json")
        toml = write_gate_toml(folder, 'model = "model.onnx"\ninputs = "inputs.json"\ngolden = "perturbed.json"\n')
        proc = run_cli("check", toml, "--junit", folder / "junit.xml")
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "REGRESSED: 1 of 2 outputs out of tolerance: 's'" in proc.stdout
        proc = polygraphy_cli(
            "run",
            "model.onnx",
            "--onnxrt",
            "--load-inputs",
            "inputs.json",
            "--load-outputs",
            "perturbed.json",
            cwd=folder,
        )
        assert proc.returncode == 1 and "FAILED" in proc.stdout + proc.stderr

    def test_golden_of_two_runners_is_one_line_error(self, polygraphy_golden):
        folder = polygraphy_golden
        proc = polygraphy_cli(
            "run",
            "model.onnx",
            "--onnxrt",
            "--onnxrt",
            "--load-inputs",
            "inputs.json",
            "--save-outputs",
            "two.json",
            cwd=folder,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        toml = write_gate_toml(folder, 'model = "model.onnx"\ninputs = "inputs.json"\ngolden = "two.json"\n')
        proc = run_cli("check", toml, "--junit", folder / "junit.xml")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        assert "two.json: the saved RunResults holds several runners" in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        names = PgRunResults.load(str(folder / "two.json")).lst
        assert len(open_tensor_set(folder / "two.json", "output", runner=names[1][0])) == 3


def test_pg_to_json_of_a_feed_dict_matches():
    feed = OrderedDict(x=np.arange(4, dtype=np.float32))
    assert serde.to_json(feed) == pg_to_json(feed)
