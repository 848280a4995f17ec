"""A row that passes only on average (``check_average``, some iteration out of tolerance): the
terminal table and the job summary mark it ``pass (avg)`` (it had a plain ``pass`` while the action
warned), and the warning names the iteration(s) over tolerance. Real ONNX Runtime runs of an
Identity model; iteration 2's golden output differs by 3e-5 at one element (atol 1e-5), so its max
abs error is 3e-5 and the average over 4 iterations 7.5e-6."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto
from test_exact_details import identity_gate
from test_front_ends import run_action

from conftest import run_cli

FLAGS = ("--check-error-stat", "max", "--check-average")


def _gate(folder, bad=(2,)):
    x = np.zeros((1, 4), np.float32)
    goldens = [x.copy() for _ in range(4)]
    for index in bad:
        goldens[index][0, 1] = 3e-5 if len(bad) == 1 else 1.5e-5
    return identity_gate(folder, TensorProto.FLOAT, [x] * 4, goldens)


def _row(stdout: str) -> list[str]:
    return next(line for line in stdout.splitlines() if line.startswith("y ")).split()


def test_the_table_marks_a_row_that_passes_on_average_only(tmp_path):
    proc = run_cli("check", _gate(tmp_path), *FLAGS, "--markdown", tmp_path / "s.md")
    assert proc.returncode == 0, proc.stderr
    assert _row(proc.stdout)[-2:] == ["pass", "(avg)"], proc.stdout
    assert "| 🟡\u00a0pass (avg) | `y` |" in (tmp_path / "s.md").read_text()
    (tmp_path / "x").mkdir()
    same = run_cli("check", _gate(tmp_path / "x", bad=()), *FLAGS)
    assert same.returncode == 0 and _row(same.stdout)[-1] == "pass", same.stdout  # no iteration over: plain pass


def test_the_warning_names_the_iterations_over_tolerance(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "ws"
    folder.mkdir()
    monkeypatch.chdir(folder)
    _gate(folder, bad=(1, 3))
    assert run_action(folder, tmp_path, check_error_stat="max", check_average="true") == 0
    out = capsys.readouterr().out
    [warning] = [line for line in out.splitlines() if line.startswith("::warning")]
    assert warning.endswith(
        "; passes on average only: 2 of 4 iterations out of tolerance (iterations 1, 3)"
    ), warning
    assert _row(out)[-2:] == ["pass", "(avg)"]
    assert "🟡\u00a0pass (avg)" in (tmp_path / "step_summary").read_text()


def test_the_note_falls_back_to_the_worst_iteration_where_the_failed_ones_are_unknown():
    """A row merged from partial files does not know which iterations failed (``failed_indices``)."""
    from gate.report.text import average_note
    from gate.results import OutputVerdict

    row = OutputVerdict(("onnxrt", "golden"), "y", True, averaged=True, iterations=8, failed_iterations=2)
    row.worst_iteration = 6
    assert average_note(row) == "; passes on average only: 2 of 8 iterations out of tolerance (the worst: iteration 6)"
    row.failed_iterations = 1
    assert average_note(row) == "; passes on average only: 1 of 8 iterations out of tolerance (iteration 6)"
    row.failed_indices = list(range(7))
    row.failed_iterations = 7
    assert average_note(row).endswith("(iterations 0, 1, 2, 3, 4, ...)")
    row.failed_iterations = 0
    assert average_note(row) == ""
