"""One-line errors for inputs that were accepted silently: two report paths that are one file (one
report overwrote the other), a stored TensorProto with negative dims (numpy took a negative reshape
dim as "unknown") or with values in raw_data and a typed field (raw_data was read, the rest dropped),
and ``ACCURACY_GATE_COMPARE_THREADS`` that only outputs of several blocks checked."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, numpy_helper
from test_action import workspace  # noqa: F401 (the action's workspace fixture)
from test_fail_fast import X, identity_gate

from gate import cli
from gate.data.storage import read_tensor_proto
from gate.errors import GateError


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--junit", "same.xml", "--markdown", "same.xml"),
         "--junit and --markdown are the same file same.xml: the Markdown report would overwrite the JUnit file"),
        (("--report", "p.json", "--write-partial", "./p.json"),
         "--report and --write-partial are the same file p.json: the partial result file would overwrite the "
         "results file"),
        (("--markdown", "accuracy-gate-junit.xml"),
         "the JUnit file path and --markdown are the same file accuracy-gate-junit.xml: the Markdown report would "
         "overwrite the JUnit file"),
    ],
)  # fmt: skip
def test_two_report_paths_of_one_file_are_one_line_before_the_model_runs(tmp_path, monkeypatch, capsys, flags, message):
    # Failed before: accepted, one report silently overwrote the other (exit 0).
    config = identity_gate(tmp_path / "g", [X], "")
    monkeypatch.chdir(config.parent)
    assert cli.main(["check", str(config), *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"accuracy-gate: error: {message}; give each report its own path."]
    if flags[0] == "--junit":  # the error goes to the JUnit file, not a Markdown report over it
        assert (config.parent / "same.xml").read_text().startswith("<?xml")


def test_the_action_refuses_two_report_paths_of_one_file(workspace, capsys):  # noqa: F811
    from gate.action import main

    environ = {**workspace.env, "INPUT_JUNIT_PATH": "out/r.xml", "INPUT_REPORT_PATH": "out/r.xml"}
    environ["INPUT_COMMENT_MODE"] = "off"
    capsys.readouterr()
    assert main(environ) == 2
    out = capsys.readouterr().out
    assert "input `junit_path` and input `report_path` are the same file" in out
    assert (workspace.root / "out" / "r.xml").read_text().startswith("<?xml")  # the JUnit file gets the error


def _tensor_file(tmp_path, tensor) -> object:
    path = tmp_path / "output_0.pb"
    path.write_bytes(tensor.SerializeToString())
    return path


@pytest.mark.parametrize("dims", [[-2], [-7, 3], [2, -1]])
def test_a_stored_tensor_with_negative_dims_is_one_line(tmp_path, dims):
    # Failed before: dims [-2] read as shape (2,), [-7, 3] as (2, 3) (numpy's "unknown" reshape dim).
    tensor = numpy_helper.from_array(np.arange(6, dtype=np.float32), "y")
    del tensor.dims[:]
    tensor.dims.extend(dims)
    path = _tensor_file(tmp_path, tensor)
    with pytest.raises(GateError) as err:
        read_tensor_proto(path)
    assert str(err.value) == f"{path}: tensor 'y' has dims {dims}; a stored tensor's dims must be non-negative."


def test_a_stored_tensor_with_raw_data_and_float_data_is_one_line(tmp_path):
    # Failed before: read from raw_data, float_data [5, 6] dropped silently.
    tensor = numpy_helper.from_array(X, "y")
    tensor.float_data.extend([5.0, 6.0])
    path = _tensor_file(tmp_path, tensor)
    with pytest.raises(GateError) as err:
        read_tensor_proto(path)
    assert str(err.value) == (
        f"{path}: tensor 'y' holds values both in raw_data and in float_data; a stored tensor keeps its values in "
        "one of them."
    )
    plain = TensorProto(name="y", data_type=TensorProto.FLOAT, dims=[2], float_data=[1.0, 2.0])
    assert read_tensor_proto(_tensor_file(tmp_path, plain))[1].tolist() == [1.0, 2.0]


def test_compare_threads_0_is_an_error_for_any_output(tmp_path, monkeypatch, capsys):
    # Failed before: an error only for outputs larger than one block; a 2-element output passed.
    from gate.comparator import SimpleCompareFunc
    from gate.comparator.struct import IterationResult

    monkeypatch.setenv("ACCURACY_GATE_COMPARE_THREADS", "0")
    with pytest.raises(GateError, match="ACCURACY_GATE_COMPARE_THREADS='0': expected a whole number of threads >= 1"):
        SimpleCompareFunc()(IterationResult({"y": X}, runner_name="a"), IterationResult({"y": X}, runner_name="b"))
    config = identity_gate(tmp_path / "g", [X], "")
    assert cli.main(["check", str(config), "--junit", str(config.parent / "j.xml")]) == 2
    assert "ACCURACY_GATE_COMPARE_THREADS='0'" in capsys.readouterr().err
