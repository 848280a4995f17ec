"""The blocked compare kernel (gate/comparator/kernels.py) against the whole-array definition.

``bench/compare_kernel.py --self-check N`` runs N random cases (11 dtypes; NaN, inf, -0, ties,
zeros; non-contiguous and big-endian inputs; every check_error_stat) through ``compare_arrays`` with
tiny blocks and samples, so the multi-block, bracket, tie, miss and overflow paths all run, and
compares every field with numpy on whole arrays. The 300 conformance cases against Polygraphy are
all smaller than one block, so this is what covers the blocked paths."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_blocked_kernel_equals_the_whole_array_definition():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compare_kernel.py"), "--self-check", "400", "--seed", "7"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "self-check: 400 random cases, 0 differ from the whole-array computation" in proc.stdout
