"""bench/claim_window.py still runs end to end (one run; no timing is asserted: see bench/README.md)."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT


def test_claim_window_prints_a_row_per_front_end():
    proc = subprocess.run(
        [sys.executable, "bench/claim_window.py", "--runs", "1"], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = re.findall(r"^\S+\s+(cli|action)" + r"\s+([\d.]+)" * 5 + "$", proc.stdout, re.M)
    assert sorted(row[0] for row in rows) == ["action", "cli"], proc.stdout
    for _, first, last, spread, end, ratio in rows:
        assert 0 < float(first) <= float(last) <= float(end) and float(spread) >= 0 and float(ratio) > 0
