"""The benchmark scripts still run end to end (tiny sizes; no timing is asserted: speed is shown
by running them, see bench/README.md)."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT


def test_golden_job_takes_turns_and_prints_its_table(tmp_path):
    """Two N of 3 and 4 iterations, turns every iteration: the pure-inference and the check process
    hand over 3 + 4 times each way and both report; the table has one row per N and every ratio."""
    proc = subprocess.run(
        [sys.executable, "bench/golden_job.py", "--n", "3", "4", "--repeat", "2", "--segment", "1", "--keep", tmp_path],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    number = r"\s+([\d.]+)"
    rows = re.findall(r"^\s+(\d+)" + number * 5 + r"  ([\d.]+) ([\d.]+)$", proc.stdout, re.M)
    assert [row[0] for row in rows] == ["3", "4"], proc.stdout
    for _, pure, check, ratio, _, _, lower, upper in rows:
        assert float(pure) > 0 and float(check) > 0
        assert float(lower) <= float(upper) and ratio == upper  # of two runs, the upper median
    assert "turns every 1 iterations" in proc.stdout
    assert len(list((tmp_path / "n4" / "golden").glob("*.npz"))) == 4
