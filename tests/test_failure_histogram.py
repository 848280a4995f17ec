"""The terminal's failure histogram when every value is the same: one line ("all 4 abs errors equal
0.5"), not ten bins from 0.5 to 1.5 of which nine are empty and lie above every error."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto
from test_exact_details import identity_gate

from gate.comparator.details import error_details, histogram

from conftest import run_cli


def test_equal_abs_errors_are_one_line(tmp_path):
    x = np.zeros((1, 4), np.float32)
    proc = run_cli("check", identity_gate(tmp_path, TensorProto.FLOAT, [x], [x + 0.5]))
    assert proc.returncode == 1, proc.stderr
    assert "    abs error histogram: all 4 abs errors equal 0.5\n" in proc.stdout
    assert "1.5]" not in proc.stdout


def test_equal_integer_differences_are_one_line(tmp_path):
    x = np.arange(4, dtype=np.int32).reshape(1, 4)
    golden = x.copy()
    golden[0, 1:3] += 1
    proc = run_cli("check", identity_gate(tmp_path, TensorProto.INT32, [x], [golden]))
    assert proc.returncode == 1, proc.stderr
    assert "    abs difference histogram (differing elements): all 2 differences equal 1\n" in proc.stdout


def test_histogram_of_equal_values_is_one_bin():
    assert histogram(np.array([2.0, 2.0, np.nan, 2.0])) == [(2.0, 2.0, 3)]
    assert histogram(np.array([0.0, 1.0]), bins=2) == [(0.0, 0.5, 1), (0.5, 1.0, 1)]
    found = error_details(np.zeros(3, np.float32), np.zeros(3, np.float32))
    assert found["histogram"] == [(0.0, 0.0, 3)]


def _edges(stdout: str) -> list[tuple[str, str]]:
    rows = [line.strip() for line in stdout.splitlines() if line.strip().startswith("[")]
    return [tuple(part.strip() for part in row[1 : row.index("]")].split(",")) for row in rows]


def test_nearly_equal_abs_errors_have_edges_that_differ(tmp_path):
    """Abs errors 1.1908e-3 .. 1.19083e-3 (2e-8 apart): each bin's edges differ as printed, and each
    bin starts where the one before it ends; 5 significant digits printed "0.0011908" for all 20."""
    x = np.zeros((1, 4), np.float32)
    golden = np.array([[0.0011908, 0.00119081, 0.00119082, 0.00119083]], np.float32)
    proc = run_cli("check", identity_gate(tmp_path, TensorProto.FLOAT, [x], [golden]))
    assert proc.returncode == 1, proc.stderr
    edges = _edges(proc.stdout)
    assert len(edges) == 10, proc.stdout
    assert all(low != high for low, high in edges), proc.stdout
    assert all(edges[i][1] == edges[i + 1][0] for i in range(9)), proc.stdout
    assert float(edges[0][0]) == pytest.approx(float(golden.min()), rel=1e-7)
    assert float(edges[-1][1]) == pytest.approx(float(golden.max()), rel=1e-7)


def test_spread_below_the_printed_precision_is_one_line():
    from gate.report.details import _histogram

    low = 1.0
    high = float(np.nextafter(low, 2.0))  # 2.2e-16 apart: 17 digits would be needed per edge
    bins = [(low + (high - low) * i / 10, low + (high - low) * (i + 1) / 10, 1) for i in range(10)]
    assert _histogram(bins) == ["    abs error histogram: all 10 abs errors within [1, 1.0000000000000002]"]
    assert _histogram([]) == ["    abs error histogram:"]  # no finite error: as before, no bins
    # a spread that 9 digits tell apart stays a chart
    lines = _histogram([(0.5, 0.50000001, 3), (0.50000001, 0.50000002, 1)])
    assert lines[1:] == [
        "      [       0.5, 0.50000001]         3 ##############################",
        "      [0.50000001, 0.50000002]         1 ##########",
    ]
