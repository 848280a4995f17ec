"""An exactly compared output's row shows the exact verdict's numbers (its max difference in the worst
iteration, the failed iterations), whatever check_error_stat or check_average says for float outputs:
a median of 0 or an average beside FAIL would read as a contradiction."""

from __future__ import annotations

import json

import pytest
from test_exact_details import int_gate

from conftest import run_cli

SETTINGS = [
    ["--check-error-stat", "quantile"],
    ["--check-error-stat", "median"],
    ["--check-error-stat", "mean", "--check-average"],
]


@pytest.mark.parametrize("args", SETTINGS, ids=["quantile", "median", "mean-average"])
def test_an_exact_row_shows_the_max_difference_under_any_statistic(tmp_path, args):
    report = tmp_path / "r.json"
    proc = run_cli("check", int_gate(tmp_path), *args, "--report", report, "-q")
    assert proc.returncode == 1, proc.stderr
    row = proc.stdout.splitlines()[3].split()
    assert row == ["y", "exact", "5", "-", "0.83333", "-", "1/3", "FAIL"]
    data = json.loads(report.read_text())["rows"][0]
    assert (data["abs_value"], data["averaged"], data["failed_iterations"]) == (5.0, False, 1)
