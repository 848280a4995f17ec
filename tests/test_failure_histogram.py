"""The terminal's failure histogram when every value is the same: one line ("all 4 abs errors equal
0.5"), not ten bins from 0.5 to 1.5 of which nine are empty and lie above every error."""

from __future__ import annotations

import numpy as np
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
