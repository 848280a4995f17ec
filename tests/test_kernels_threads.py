"""The compare kernel on several threads (gate/comparator/kernels_threads.py): every reported number
is the one-thread number, whatever the thread count; and the NaN counts of a failing output come
from the same pass (no whole-array temporaries)."""

from __future__ import annotations

import os
import signal
import time
import tracemalloc

import numpy as np
import pytest

from gate.comparator import kernels
from gate.comparator.compare import SimpleThreshold, compare_arrays
from gate.comparator.kernels_threads import THREADS_ENV, compare_threads
from gate.errors import GateError

STATS = ("elemwise", "mean", "median", "max", "quantile")


def _inputs(rng, dtype, n, style):
    if np.dtype(dtype) == np.bool_:
        a = rng.random(n) < 0.5
        b = a.copy()
        b[rng.integers(0, n, n // 50)] ^= True
        return a, b
    if np.dtype(dtype).kind in "iu":
        a = rng.integers(0, 50, n).astype(dtype)
        b = a.copy()
        b[rng.integers(0, n, n // 20)] += 1
        return a, b
    if style == "ties":  # the same largest difference in every block: the first must win
        a = rng.integers(0, 4, n).astype(dtype)
        b = a.copy()
        b[::97] += 1
        return a, b
    a = rng.standard_normal(n).astype(dtype)
    b = (a + rng.standard_normal(n) * 1e-3).astype(dtype)
    b[rng.integers(0, n, 40)] = 0
    if style == "special":
        for x in (a, b):
            x[rng.integers(0, n, 30)] = rng.choice([np.nan, np.inf, -np.inf], 30)
    return a, b


def _compare(a, b, stat, threads, monkeypatch):
    monkeypatch.setenv(THREADS_ENV, str(threads))
    result = compare_arrays(a, b, SimpleThreshold(stat, 1e-3, 1e-3), quantile=0.9)
    return {key: value for key, value in vars(result).items() if key != "thresholds"}


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.uint8, np.bool_])
def test_every_thread_count_reports_the_one_thread_numbers(dtype, monkeypatch):
    monkeypatch.setattr(kernels, "CHUNK", 1000)  # 37 blocks
    rng = np.random.default_rng(11)
    styles = ("normal", "ties", "special") if np.dtype(dtype).kind == "f" else ("normal",)
    for style in styles:
        a, b = _inputs(rng, dtype, 36_503, style)
        for stat in STATS:
            one = _compare(a, b, stat, 1, monkeypatch)
            assert one["max_absdiff"] != 0 and one["worst_index"] is not None  # no shortcut taken
            for threads in (2, 3, 4):
                many = _compare(a, b, stat, threads, monkeypatch)
                assert many.keys() == one.keys()
                for field, value in one.items():  # repr: exact for floats, NaN equal to NaN
                    assert repr(many[field]) == repr(value), (dtype, style, stat, threads, field)


def test_the_first_of_equal_worst_blocks_wins_on_every_thread_count(monkeypatch):
    monkeypatch.setattr(kernels, "CHUNK", 100)
    a = np.zeros(10_000, np.float32)
    b = a.copy()
    b[150::100] = 1  # one difference of 1 per block from the second block on
    for threads in (1, 2, 4):
        for stat in ("elemwise", "max"):
            result = _compare(a, b, stat, threads, monkeypatch)
            assert result["worst_index"] == (150,), (threads, stat)
            assert result["max_absdiff"] == 1.0 and result["mean_absdiff"] == 99 / 10_000


def test_nan_counts_of_a_failing_output_are_the_whole_array_counts(monkeypatch):
    monkeypatch.setattr(kernels, "CHUNK", 1000)
    rng = np.random.default_rng(5)
    a, b = _inputs(rng, np.float16, 20_000, "special")
    a[:7], b[:7] = np.nan, np.nan
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    expected = (int(np.count_nonzero(nan_a & nan_b)), int(np.count_nonzero(nan_a ^ nan_b)))
    assert expected[0] >= 7 and expected[1] > 0
    for threads in (1, 3):
        assert _compare(a, b, "elemwise", threads, monkeypatch)["nan_counts"] == expected


def test_a_failing_comparison_allocates_no_whole_array_temporaries(monkeypatch):
    """It used to count NaNs over float32 copies of both whole arrays (16 MiB here, 20 with its
    masks) once a comparison failed; now it allocates nothing of the arrays' size (at most one
    thread's block buffers, ~5 MiB, if the warm-up call happened not to use that thread)."""
    rng = np.random.default_rng(2)
    n = 2 << 20
    a = rng.standard_normal(n).astype(np.float16)
    b = (a + np.float16(0.01)).astype(np.float16)
    for threads in (1, 2):
        monkeypatch.setenv(THREADS_ENV, str(threads))
        threshold = SimpleThreshold("elemwise", 1e-5, 1e-5)
        assert not compare_arrays(a, b, threshold)  # the blocks' buffers now exist on every thread
        tracemalloc.start()
        try:
            result = compare_arrays(a, b, threshold)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert not result and result.nan_counts is None and result.mismatch_count > n // 2
        assert peak < 8 << 20, peak


def test_thread_count_setting(monkeypatch):
    monkeypatch.delenv(THREADS_ENV, raising=False)
    assert 1 <= compare_threads() <= 4
    monkeypatch.setenv(THREADS_ENV, "3")
    assert compare_threads() == 3
    for bad in ("0", "-2", "two", "1.5"):
        monkeypatch.setenv(THREADS_ENV, bad)
        with pytest.raises(GateError, match=f"{THREADS_ENV}='{bad}': expected a whole number of threads >= 1"):
            compare_threads()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_compares_on_its_own_threads(monkeypatch):
    """The parent's pool threads do not exist in a forked child; reusing that pool would hang."""
    monkeypatch.setattr(kernels, "CHUNK", 1000)
    monkeypatch.setenv(THREADS_ENV, "2")
    rng = np.random.default_rng(8)
    a, b = _inputs(rng, np.float32, 10_000, "normal")
    threshold = SimpleThreshold("max", 1e-3, 1e-3)
    expected = compare_arrays(a, b, threshold).max_absdiff  # the pool and its threads exist now
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if it got the same number
        ok = False
        try:
            ok = compare_arrays(a, b, threshold).max_absdiff == expected
        finally:
            os._exit(0 if ok else 1)
    deadline = time.monotonic() + 30
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung on the parent's thread pool")
        time.sleep(0.05)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
