"""`accuracy-gate run` on a model whose output is a ragged sequence: the single-runner summary and
`--save-outputs` (Polygraphy's JSON, which holds tensors only) end in a verdict or one line, never a
traceback; and an unexpected exception (a bug of ours) exits 2, never 1 ("regressed")."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from gate import cli

from conftest import run_cli


def _ragged_model(path):
    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [5])
    s = helper.make_tensor_sequence_value_info("S", TensorProto.FLOAT, None)
    split = helper.make_tensor("split", TensorProto.INT64, [2], [2, 3])
    node = helper.make_node("SplitToSequence", ["X", "split"], ["S"])
    graph = helper.make_graph([node], "ragged", [x], [s], initializer=[split])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_single_runner_summary_of_a_ragged_sequence(tmp_path):
    # Before: ValueError (inhomogeneous shape) in the summary line, a traceback and exit 1.
    model = _ragged_model(tmp_path / "rag.onnx")
    proc = run_cli("run", model, "--onnxrt", "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "S a sequence of 2 items" in proc.stdout and "Traceback" not in proc.stderr


def test_save_outputs_of_a_ragged_sequence_is_one_line(tmp_path):
    # Before: ValueError from numpy in serde, a traceback and exit 1.
    model = _ragged_model(tmp_path / "rag.onnx")
    for runners in (["--onnxrt"], ["--onnxrt", "--onnxrt"]):
        proc = run_cli("run", model, *runners, "--save-outputs", tmp_path / "o.json", "--junit", tmp_path / "j.xml",
                       cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "output 'S' is a sequence of 2 items: Polygraphy's JSON holds tensors only" in lines[0]


def test_an_internal_error_exits_2_not_1(tmp_path, monkeypatch, capsys, example):
    # Before: an unexpected exception escaped main() and Python exited 1, which reads as "regressed".
    import gate.pipeline

    def broken(request):
        raise RuntimeError("boom")

    junit = example / "j.xml"  # inside the root (the config's folder)
    assert cli.main(["check", str(example / "gate.toml"), "--junit", str(junit)]) == 0  # a green file first
    assert 'errors="0"' in junit.read_text() and 'failures="0"' in junit.read_text()
    capsys.readouterr()
    monkeypatch.setattr(gate.pipeline, "execute", broken)
    assert cli.main(["check", str(example / "gate.toml"), "--junit", str(junit)]) == 2
    assert 'errors="1"' in junit.read_text()  # the green file of an earlier run is replaced by the error
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "accuracy-gate: error: internal error: RuntimeError: boom (a bug in accuracy-gate: please report it with "
        "the traceback that --verbose prints)"
    ]
