"""The Polygraphy JSON codec at the data layer (gate/data/polygraphy_codec.py): the stored-data reader
decodes without the comparator, and both sides write the same bytes."""

from __future__ import annotations

import subprocess
import sys
from collections import OrderedDict

import numpy as np
import pytest

from gate.comparator import Comparator, IterationResult, RunResults, SimpleCompareFunc, serde
from gate.comparator.struct import AccuracyResults
from gate.data import polygraphy_codec as codec
from gate.data.polygraphy_json import open_polygraphy_json, write_json_iteration
from gate.errors import GateError


def tensors():
    return OrderedDict(
        y=np.arange(6, dtype=np.float32).reshape(2, 3), n=np.array([1, -2], np.int64), s=np.array(["a", "bc"])
    )


def test_the_reader_imports_no_comparator(tmp_path):
    serde.save_inputs([tensors()], tmp_path / "in.json")
    RunResults([("ort", [IterationResult(tensors(), 0.5, "ort")])]).save(str(tmp_path / "golden.json"))
    code = (
        "import sys\n"
        "from gate.data import open_tensor_set\n"
        f"x = open_tensor_set({str(tmp_path / 'in.json')!r}, 'input')[0]\n"
        f"y = open_tensor_set({str(tmp_path / 'golden.json')!r}, 'output')[0]\n"
        "print(type(x).__name__, type(y).__name__, list(y), y['n'].tolist())\n"
        "print(sorted(m for m in sys.modules if m.startswith('gate.comparator')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["OrderedDict OrderedDict ['y', 'n', 's'] [1, -2]", "[]"]


def test_plain_and_comparator_records_encode_to_the_same_bytes(tmp_path):
    run = RunResults([("r1", [IterationResult(tensors(), None, "r1")])])
    saved = codec.SavedRun([("r1", [codec.SavedIteration(tensors(), None, "r1")])])
    assert codec.to_json(saved) == serde.to_json(run)
    written = write_json_iteration(tmp_path / "golden", "output", 0, tensors(), runner="r1")
    run.save(str(tmp_path / "ours.json"))
    assert written.read_bytes() == (tmp_path / "ours.json").read_bytes()


def test_decoded_types_follow_the_codec(tmp_path):
    text = serde.to_json(RunResults([("r", [IterationResult({"x": np.ones(2)}, 0.25, "r")])]))
    plain, ours = codec.from_json(text), serde.from_json(text)
    assert type(plain) is codec.SavedRun and type(ours) is RunResults
    ((name, (iteration,)),) = plain.lst
    assert (name, iteration.runtime, iteration.runner_name, iteration["x"].tolist()) == ("r", 0.25, "r", [1.0, 1.0])
    assert type(iteration) is codec.SavedIteration and type(ours["r"][0]) is IterationResult


def test_the_reader_refuses_an_accuracy_results_file(tmp_path):
    # The reader knows inputs and RunResults only: the comparator's result types are not decoded there.
    run = RunResults([(n, [IterationResult({"y": np.ones(3, np.float32)}, None, n)]) for n in ("a", "b")])
    AccuracyResults([Comparator.compare_accuracy(run, compare_func=SimpleCompareFunc())]).save(
        str(tmp_path / "acc.json")
    )
    expected = (
        r"acc\.json: Could not decode serialized type: AccuracyResults; this reader knows "
        r"ndarray, LazyArray, LazyNumpyArray, IterationResult, RunResults\.$"
    )
    for kind in ("input", "output"):
        with pytest.raises(GateError, match=expected):
            open_polygraphy_json(tmp_path / "acc.json", kind)
    with pytest.raises(GateError, match=r"acc\.json: holds a AccuracyResults, expected inference results"):
        serde.load_run_results(tmp_path / "acc.json")
