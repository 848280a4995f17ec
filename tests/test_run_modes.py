"""``Comparator.run`` save paths (spec 1.1, 1.2.7, 1.3, 1.5 and conformance case 35), the empty
loader and zero runners (1.2.5, 1.2.8, case 36), and ``use_subprocess``. Where we agree with
Polygraphy 0.53.6, its own ``Comparator.run`` is run as the oracle and the files compared byte for
byte."""

from __future__ import annotations

import json
import logging
import os
import time
from collections import OrderedDict

import numpy as np
import pytest
from polygraphy.backend.base import BaseRunner as PgBaseRunner
from polygraphy.common import TensorMetadata as PgTensorMetadata
from polygraphy.comparator import Comparator as PgComparator
from polygraphy.comparator import RunResults as PgRunResults
from polygraphy.exception import PolygraphyException

from gate.backend.base import BaseRunner, TensorMetadata
from gate.comparator import Comparator, RunResults
from gate.comparator.serde import load_inputs_streaming, load_run_results, load_run_results_streaming
from gate.comparator.writer import is_single_file
from gate.errors import GateError

F32 = np.float32


class ScaleRunner(BaseRunner):
    """y = x * scale, written into one reused buffer (as TensorRT's runner does). Picklable."""

    def __init__(self, name, scale=1.0):
        super().__init__(name)
        self.scale = scale
        self.buffer = np.zeros(2, F32)
        self.activations = 0
        self.calls = 0

    def activate_impl(self):
        self.activations += 1

    def get_input_metadata_impl(self):
        return TensorMetadata().add("x", F32, (2,))

    def infer_impl(self, feed_dict):
        self.calls += 1
        self.buffer[...] = feed_dict["x"] * self.scale
        self.inference_time = 0.0
        return OrderedDict(y=self.buffer)


class PgScaleRunner(PgBaseRunner):
    """The same runner for Polygraphy's ``Comparator.run``."""

    def __init__(self, name, scale=1.0):
        super().__init__(name=name)
        self.scale = scale
        self.buffer = np.zeros(2, F32)

    def get_input_metadata_impl(self):
        return PgTensorMetadata().add("x", F32, (2,))

    def infer_impl(self, feed_dict):
        self.buffer[...] = feed_dict["x"] * self.scale
        self.inference_time = 0.0
        return OrderedDict(y=self.buffer)


class LenientRunner(ScaleRunner):
    """Accepts any feed_dict (extra entries, other dtypes), to see what is saved."""

    def _check_inputs(self, feed_dict):
        pass


class SleepingRunner(ScaleRunner):
    def infer_impl(self, feed_dict):
        time.sleep(3600)


class CrashingRunner(ScaleRunner):
    def infer_impl(self, feed_dict):
        os._exit(3)


class FailingRunner(ScaleRunner):
    def infer_impl(self, feed_dict):
        raise GateError("fake backend: input 'x' is out of range.")


class MetadataLoader:
    """A picklable loader with ``input_metadata`` (like Polygraphy's DataLoader) that counts reads."""

    def __init__(self, n):
        self.n = n
        self.input_metadata = None
        self.reads = 0

    def __iter__(self):
        self.reads += 1
        return iter(feeds(self.n))


def feeds(n):
    return [OrderedDict(x=np.full(2, i, F32)) for i in range(n)]


def files(folder):
    return sorted(p.name for p in folder.iterdir())


def run_both(tmp_path, streaming, inputs_name, outputs_name, n=3):
    """Runs ours and Polygraphy's Comparator.run on the same data; returns the two folders."""
    out = {}
    for which, comparator, runner_type in (("ours", Comparator, ScaleRunner), ("pg", PgComparator, PgScaleRunner)):
        folder = tmp_path / which
        folder.mkdir()
        result = comparator.run(
            [runner_type("A"), runner_type("B", scale=2.0)],
            feeds(n),
            save_inputs_path=str(folder / inputs_name),
            save_outputs_path=str(folder / outputs_name),
            streaming=streaming,
        )
        if streaming:
            for _ in result:
                pass
        out[which] = folder
    return out["ours"], out["pg"]


def same_tree(a, b):
    names = sorted(str(p.relative_to(a)) for p in a.rglob("*"))
    assert names == sorted(str(p.relative_to(b)) for p in b.rglob("*"))
    for name in names:
        if (a / name).is_file():
            assert (a / name).read_bytes() == (b / name).read_bytes(), name


class TestSavePaths:
    @pytest.mark.parametrize(
        ("path", "single"),
        [
            ("x.json", True),
            ("x.npy", True),
            ("x.tar.gz", True),
            ("x", False),
            (".hidden", False),
            ("d.v2/x", False),
            ("x.json/", False),
        ],
    )
    def test_file_or_directory_from_the_string_alone(self, path, single):
        assert is_single_file(path) is single

    @pytest.mark.parametrize("streaming", [False, True], ids=["materialized", "streaming"])
    @pytest.mark.parametrize(("inputs", "outputs"), [("in.json", "out.json"), ("in", "out")], ids=["file", "directory"])
    def test_case35_files_match_polygraphy_byte_for_byte(self, tmp_path, streaming, inputs, outputs):
        ours, pg = run_both(tmp_path, streaming, inputs, outputs)
        same_tree(ours, pg)
        if inputs == "in":
            assert files(ours / "in") == files(ours / "out") == [f"{i:010d}.json" for i in range(3)]
            single = load_run_results(ours / "out" / "0000000002.json")
            assert single.keys() == ["A", "B"] and single["B"][0]["y"].tolist() == [4.0, 4.0]
        else:
            run = load_run_results(ours / "out.json")
            # Deep copies were kept although the runners reuse one buffer.
            assert [it["y"][0] for it in run["B"]] == [0.0, 2.0, 4.0]
            assert [f["x"][0] for f in load_inputs_streaming(ours / "in.json")] == [0.0, 1.0, 2.0]
        assert len(list(PgRunResults.load_streaming(str(ours / outputs)))) == 3

    @pytest.mark.parametrize("streaming", [False, True], ids=["materialized", "streaming"])
    def test_same_real_path_is_refused_at_call_time(self, tmp_path, streaming):
        loader = MetadataLoader(2)
        runner = ScaleRunner("A")
        (tmp_path / "real").mkdir()
        (tmp_path / "link").symlink_to(tmp_path / "real")
        for a, b in ((tmp_path / "o.json", tmp_path / "o.json"), (tmp_path / "real", tmp_path / "link")):
            same = "Two of save_inputs_path, save_outputs_path, and save_input_blob_path resolve to the same path"
            with pytest.raises(GateError, match=same):
                Comparator.run([runner], loader, save_inputs_path=str(a), save_outputs_path=str(b), streaming=streaming)
        assert loader.reads == 0 and runner.activations == 0
        with pytest.raises(PolygraphyException, match="resolve to the same path"):
            PgComparator.run([PgScaleRunner("A")], feeds(1), save_inputs_path="o.json", save_outputs_path="o.json")

    def test_non_empty_directory_materialized_fails_after_inference(self, tmp_path):
        (tmp_path / "o").mkdir()
        (tmp_path / "o" / "keep.txt").write_text("x")
        runner = ScaleRunner("A")
        with pytest.raises(GateError, match=r"Cannot save outputs to '.*o': the directory is not empty"):
            Comparator.run([runner], feeds(2), save_outputs_path=str(tmp_path / "o"))
        assert runner.calls == 2 and files(tmp_path / "o") == ["keep.txt"]
        with pytest.raises(PolygraphyException, match="not empty"):
            PgComparator.run([PgScaleRunner("A")], feeds(2), save_outputs_path=str(tmp_path / "o"))

    def test_non_empty_directory_streaming_fails_at_first_next(self, tmp_path):
        (tmp_path / "i").mkdir()
        (tmp_path / "i" / "0000000000.json").write_text("[]")
        runner = ScaleRunner("A")
        stream = Comparator.run([runner], feeds(2), save_inputs_path=str(tmp_path / "i"), streaming=True)
        assert runner.activations == 0
        with pytest.raises(GateError, match="Cannot save inputs to .*the directory is not empty"):
            next(stream)
        assert runner.activations == 1 and not runner.is_active and runner.calls == 0

    @pytest.mark.parametrize("streaming", [False, True], ids=["materialized", "streaming"])
    def test_existing_file_where_a_directory_is_expected(self, tmp_path, streaming):
        (tmp_path / "o").write_text("a file")
        with pytest.raises(GateError, match="a file already exists there, but a path without an extension is a dir"):
            result = Comparator.run(
                [ScaleRunner("A")], feeds(1), save_outputs_path=str(tmp_path / "o"), streaming=streaming
            )
            list(result) if streaming else None
        with pytest.raises(PolygraphyException, match="a file already exists"):
            PgComparator.run([PgScaleRunner("A")], feeds(1), save_outputs_path=str(tmp_path / "o"))

    def test_existing_single_file_is_overwritten(self, tmp_path):
        (tmp_path / "o.json").write_text("old")
        Comparator.run([ScaleRunner("A")], feeds(1), save_outputs_path=str(tmp_path / "o.json"))
        assert load_run_results(tmp_path / "o.json").keys() == ["A"]

    def test_streaming_directory_is_written_as_each_iteration_comes(self, tmp_path):
        stream = Comparator.run(
            [ScaleRunner("A")],
            feeds(3),
            save_outputs_path=str(tmp_path / "o"),
            save_inputs_path=str(tmp_path / "i"),
            streaming=True,
        )
        next(stream)
        assert files(tmp_path / "o") == files(tmp_path / "i") == ["0000000000.json"]
        next(stream)
        assert files(tmp_path / "o") == ["0000000000.json", "0000000001.json"]
        stream.close()

    def test_streaming_single_file_written_on_early_close_with_one_warning(self, tmp_path, caplog):
        a, b = ScaleRunner("A"), ScaleRunner("B", scale=3.0)
        stream = Comparator.run(
            [a, b],
            feeds(5),
            save_inputs_path=str(tmp_path / "in.json"),
            save_outputs_path=str(tmp_path / "out.json"),
            streaming=True,
        )
        with caplog.at_level(logging.WARNING, logger="gate.comparator"):
            next(stream), next(stream), next(stream)
            assert not (tmp_path / "out.json").exists()
            stream.close()
        warnings = [r for r in caplog.records if "accumulates every iteration in memory" in r.getMessage()]
        assert len(warnings) == 1
        assert not a.is_active and not b.is_active
        run = load_run_results(tmp_path / "out.json")
        assert run.keys() == ["A", "B"] and [it["y"][0] for it in run["B"]] == [0.0, 3.0, 6.0]
        assert [f["x"][0] for f in load_inputs_streaming(tmp_path / "in.json")] == [0.0, 1.0, 2.0]
        assert len(PgRunResults.load(str(tmp_path / "out.json"))["A"]) == 3

    def test_streaming_single_file_written_when_a_runner_fails(self, tmp_path):
        class Boom(ScaleRunner):
            def infer_impl(self, feed_dict):
                if feed_dict["x"][0] == 2:
                    raise GateError("boom")
                return super().infer_impl(feed_dict)

        stream = Comparator.run([Boom("A")], feeds(4), save_outputs_path=str(tmp_path / "o.json"), streaming=True)
        with pytest.raises(GateError, match="boom"):
            list(stream)
        assert len(load_run_results(tmp_path / "o.json")["A"]) == 2

    @pytest.mark.parametrize("streaming", [False, True], ids=["materialized", "streaming"])
    def test_inputs_are_saved_as_the_loader_gave_them(self, tmp_path, streaming):
        loader = [OrderedDict(x=np.arange(2, dtype=np.float64), extra=np.array([7], np.int8))]
        result = Comparator.run(
            [LenientRunner("A")], loader, save_inputs_path=str(tmp_path / "in.json"), streaming=streaming
        )
        list(result) if streaming else None
        (saved,) = load_inputs_streaming(tmp_path / "in.json")
        assert list(saved) == ["x", "extra"] and saved["x"].dtype == np.float64 and saved["extra"].dtype == np.int8

    def test_materialized_directory_holds_single_iteration_run_results(self, tmp_path):
        result = Comparator.run([ScaleRunner("A"), ScaleRunner("B")], feeds(2), save_outputs_path=str(tmp_path / "o"))
        back = RunResults.concat(load_run_results_streaming(tmp_path / "o"))
        assert back.keys() == result.keys() and [len(v) for v in back.values()] == [2, 2]


class TestEmptyRuns:
    def test_case36_empty_loader_materialized_gives_zero_iterations(self, tmp_path, caplog):
        with caplog.at_level(logging.WARNING, logger="gate.comparator"):
            result = Comparator.run(
                [ScaleRunner("A"), ScaleRunner("B")],
                [],
                save_inputs_path=str(tmp_path / "in.json"),
                save_outputs_path=str(tmp_path / "out.json"),
            )
        assert result.keys() == ["A", "B"] and [len(v) for v in result.values()] == [0, 0]
        assert "Data loader did not yield any input data." in caplog.text
        assert json.loads((tmp_path / "in.json").read_text()) == []
        assert [len(v) for _, v in PgRunResults.load(str(tmp_path / "out.json")).lst] == [0, 0]
        # Polygraphy 0.53.6 crashes here (spec 1.2.5).
        with pytest.raises(UnboundLocalError):
            PgComparator.run([PgScaleRunner("A")], [])

    def test_case36_empty_loader_streaming_yields_nothing(self, tmp_path):
        stream = Comparator.run([ScaleRunner("A")], [], save_outputs_path=str(tmp_path / "o.json"), streaming=True)
        assert list(stream) == []
        assert load_run_results(tmp_path / "o.json").lst == []

    def test_zero_runners_still_write_outputs_like_polygraphy(self, tmp_path):
        result = Comparator.run(
            [], None, save_inputs_path=str(tmp_path / "in.json"), save_outputs_path=str(tmp_path / "out.json")
        )
        assert isinstance(result, RunResults) and len(result) == 0
        assert not (tmp_path / "in.json").exists()
        PgComparator.run([], feeds(1), save_outputs_path=str(tmp_path / "pg.json"))
        assert (tmp_path / "out.json").read_bytes() == (tmp_path / "pg.json").read_bytes()
        assert json.loads((tmp_path / "out.json").read_text()) == {"lst": [], "polygraphy_class": "RunResults"}

    def test_zero_runners_streaming_writes_nothing(self, tmp_path):
        assert list(Comparator.run([], feeds(1), save_outputs_path=str(tmp_path / "o.json"), streaming=True)) == []
        assert not (tmp_path / "o.json").exists()


class TestSubprocess:
    def test_results_match_in_process_and_nothing_of_the_callers_is_touched(self, tmp_path):
        a, b = ScaleRunner("A"), ScaleRunner("B", scale=2.0)
        loader = MetadataLoader(3)
        result = Comparator.run(
            [a, b],
            loader,
            use_subprocess=True,
            subprocess_timeout=120,
            save_inputs_path=str(tmp_path / "in"),
            save_outputs_path=str(tmp_path / "out.json"),
        )
        expected = Comparator.run([ScaleRunner("A"), ScaleRunner("B", scale=2.0)], feeds(3))
        assert result == expected and [it["y"][0] for it in result["B"]] == [0.0, 2.0, 4.0]
        assert a.activations == b.activations == 0 and a.calls == b.calls == 0
        assert not a.is_active and a.inference_time is None and float(a.buffer.sum()) == 0.0
        assert loader.reads == 0 and loader.input_metadata is None
        assert files(tmp_path / "in") == [f"{i:010d}.json" for i in range(3)]
        assert load_run_results(tmp_path / "out.json") == expected

    def test_in_process_run_sets_the_loader_metadata(self):
        loader = MetadataLoader(1)
        Comparator.run([ScaleRunner("A")], loader)
        assert loader.reads == 1 and list(loader.input_metadata) == ["x"]

    def test_hanging_runner_is_killed_at_the_timeout(self):
        start = time.monotonic()
        with pytest.raises(GateError, match=r"Runner 'sleeper' subprocess timed out after 3 s and was killed"):
            Comparator.run([SleepingRunner("sleeper")], feeds(1), use_subprocess=True, subprocess_timeout=3)
        assert time.monotonic() - start < 3 + 20

    @pytest.mark.parametrize("interval", [None, 0, 0.5])
    def test_crashing_runner_names_runner_and_exit_code(self, interval):
        start = time.monotonic()
        with pytest.raises(
            GateError, match=r"Runner 'crasher' subprocess exited with code 3 before sending its results"
        ):
            Comparator.run(
                [ScaleRunner("fine"), CrashingRunner("crasher")],
                feeds(2),
                use_subprocess=True,
                subprocess_polling_interval=interval,
            )
        # Noticed when the child dies, not at the next 30 s poll.
        assert time.monotonic() - start < 25

    def test_runner_error_in_the_child_is_reported(self):
        with pytest.raises(GateError, match=r"Runner 'bad' failed in its subprocess: fake backend: input 'x'"):
            Comparator.run([FailingRunner("bad")], feeds(1), use_subprocess=True)

    def test_unpicklable_loader_is_a_clear_error(self):
        with pytest.raises(
            GateError, match=r"Runner 'A' cannot run in a subprocess: it or the data loader cannot be pickled"
        ):
            Comparator.run([ScaleRunner("A")], (f for f in feeds(1)), use_subprocess=True)

    def test_streaming_rejects_subprocess_at_call_time(self):
        runner = ScaleRunner("A")
        with pytest.raises(GateError, match="use_subprocess is not supported with streaming=True"):
            Comparator.run([runner], feeds(1), use_subprocess=True, streaming=True)
        assert runner.activations == 0
        Comparator.run([runner], feeds(1), warm_up=0, streaming=True).close()  # warm_up=0 is accepted
