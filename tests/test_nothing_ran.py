"""An error found before any iteration ran (a bad action input, a session ONNX Runtime cannot make)
prints no empty table and no "0 iterations" header, in the CLI, the action's log and the job
summary; an error while the session is made reads "could not start: ...", not "stopped after 0 of N
iterations: ..."; the CLI says the error once (on stderr; README: "one line on stderr"). Real ONNX
Runtime CPU sessions; the CUDA provider is requested where this onnxruntime build lacks it."""

from __future__ import annotations

import onnxruntime as ort
import pytest
import test_front_ends
from test_front_ends import run_action

from gate import cli

project = test_front_ends.project  # the fixture

NO_CUDA = pytest.mark.skipif(
    "CUDAExecutionProvider" in ort.get_available_providers(), reason="needs an onnxruntime build without CUDA"
)
TABLE_HEAD = "failed iters"


@NO_CUDA
def test_cli_session_error_is_one_line_could_not_start(project, capsys):
    code = cli.main(["check", str(project / "gate.toml"), "--execution-providers", "CUDAExecutionProvider"])
    out, err = capsys.readouterr()
    assert code == 2
    assert err.splitlines() == [err.strip()] and err.startswith("accuracy-gate: error: could not start: "), err
    assert "execution provider CUDAExecutionProvider is not active" in err and "stopped after" not in err
    assert "0 iterations" not in out and TABLE_HEAD not in out and "not active" not in out, out
    assert out.strip() == "JUnit: accuracy-gate-junit.xml"


@NO_CUDA
def test_action_session_error_has_no_table_and_says_could_not_start(project, tmp_path, capsys):
    assert run_action(project, tmp_path, execution_providers="CUDAExecutionProvider") == 2
    out = capsys.readouterr().out
    summary = (tmp_path / "step_summary").read_text()
    assert "0 iterations" not in out and TABLE_HEAD not in out, out
    assert "\nERROR (could not evaluate): could not start: m.onnx: execution provider CUDAExecutionProvider" in out
    assert "::error title=accuracy-gate::could not evaluate: could not start: " in out
    assert "0 iterations" not in summary and "could not start: " in summary, summary


def test_action_input_error_has_no_table_and_no_iteration_count(project, tmp_path, capsys):
    assert run_action(project, tmp_path, validate="yes") == 2
    out = capsys.readouterr().out
    summary = (tmp_path / "step_summary").read_text()
    assert "0 iterations" not in out and TABLE_HEAD not in out and "accuracy-gate: gate.toml" not in out, out
    assert "\nERROR (could not evaluate): Input `validate` must be `true` or `false`, got 'yes'.\n" in out
    assert "0 iterations" not in summary and "Input \\`validate\\` must be" in summary, summary


def test_an_error_part_way_keeps_the_table_and_stopped_after(project, capsys):
    (project / "golden" / "1.npz").write_bytes(b"not an npz")
    code = cli.main(["check", str(project / "gate.toml")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "accuracy-gate: m.onnx, 1 iteration, onnxrt vs golden" in out and TABLE_HEAD in out, out
    assert err.startswith("accuracy-gate: error: stopped after 1 of 2 iterations: iteration 1 ("), err


@NO_CUDA
def test_a_shard_that_could_not_start_names_the_shard(project, capsys):
    code = cli.main(
        ["check", str(project / "gate.toml"), "--execution-providers", "CUDAExecutionProvider", "--shard", "1/2"]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("accuracy-gate: error: could not start shard 1/2: "), err
