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


def test_identical_outputs_shortcut_reports_what_the_full_pass_reports():
    """Equal, finite outputs (a CPU backend against its own golden data) skip the differences
    (kernels._identical_statistics); every field, down to its Python type, must be the full pass's.
    Multi-block sizes, zeros, -0.0 against 0.0, integers, and the cases that must not take the
    shortcut (an infinity, a NaN, one differing element in the last block)."""
    import numpy as np

    from gate.comparator import kernels

    def statistics(a, b, stat, shortcut):
        saved = kernels._identical_statistics
        if not shortcut:
            kernels._identical_statistics = lambda *args: None
        try:
            with np.errstate(all="ignore"):
                return kernels.diff_statistics(a, b, check_error_stat=stat, atol=1e-5, rtol=1e-5)
        finally:
            kernels._identical_statistics = saved

    rng = np.random.default_rng(3)
    cases = 0
    for dtype in (np.float32, np.float16, np.float64, np.int8, np.uint8, np.int32, np.int64, np.uint64):
        for n in (1, 1000, kernels.CHUNK + 5):
            a = (rng.standard_normal(n) * 50).astype(dtype)
            a[::3] = 0
            variants = [a.copy()]
            if np.dtype(dtype).kind == "f":
                b = a.copy()
                b[b == 0] = -0.0
                variants.append(b)
                if n > 1:
                    for special in (np.inf, np.nan):
                        a_special = a.copy()
                        a_special[-1] = special
                        variants.append((a_special, a_special.copy()))
            if n > 1:
                b = a.copy()
                b[-1] += 1
                variants.append(b)
            for variant in variants:
                x, y = variant if isinstance(variant, tuple) else (a, variant)
                for stat in ("elemwise", "mean", "median", "max", "quantile"):
                    fast, full = statistics(x, y, stat, True), statistics(x, y, stat, False)
                    assert fast.keys() == full.keys()
                    for field, value in full.items():
                        assert type(fast[field]) is type(value), (dtype, n, stat, field)
                        assert fast[field] == value or (value != value and fast[field] != fast[field])
                    cases += 1
    assert cases == 305
