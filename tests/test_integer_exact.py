"""Deviation D17: integer differences are exact over the whole range of every integer dtype.

Polygraphy 0.53.6 subtracts integer outputs in their (cast-up) integer dtype, so a difference that
does not fit wraps around: INT64_MAX against -1 has abs error -2**63 there and passes. These tests state
the true errors and, differentially, show where Polygraphy wraps and where it agrees with us.
"""

from __future__ import annotations

import numpy as np
import pytest
from polygraphy.comparator import compare as pg_compare
from polygraphy.comparator import struct as pg_struct
from polygraphy.logger import G_LOGGER

from gate.comparator import IterationResult, L2CompareFunc, SimpleCompareFunc, kernels

G_LOGGER.module_severity = G_LOGGER.CRITICAL

I64, I32, U64 = np.iinfo(np.int64), np.iinfo(np.int32), np.iinfo(np.uint64)

# (dtype, live value, golden value, the true |live - golden|, Polygraphy's wrapped abs error)
WRAPPING = [
    (np.int64, I64.max, -1, 2**63, -(2**63)),  # wraps to INT64_MIN; np.abs keeps it negative
    (np.int64, I64.max, I64.min, 2**64 - 1, 1),
    (np.int32, I32.max, I32.min, 2**32 - 1, 1),
    (np.uint64, 0, U64.max, 2**64 - 1, 1),
    (np.uint64, 2**63, 0, 2**63, 2**63),  # fits: both agree
    (np.int32, I32.max, -1, 2**31, -(2**31)),
]


def _ours(a, b, **kwargs):
    return SimpleCompareFunc(**kwargs)(
        IterationResult({"y": a}, runner_name="live"), IterationResult({"y": b}, runner_name="golden")
    )["y"]


def _polygraphy(a, b, **kwargs):
    with np.errstate(all="ignore"):
        return pg_compare.SimpleCompareFunc(**kwargs)(
            pg_struct.IterationResult({"y": a}, runner_name="live"),
            pg_struct.IterationResult({"y": b}, runner_name="golden"),
        )["y"]


@pytest.mark.parametrize("n", [1, kernels.CHUNK + 3])  # one block, and the blocked kernel path
@pytest.mark.parametrize(("dtype", "live", "golden", "true", "wrapped"), WRAPPING)
def test_integer_abs_error_is_the_true_difference(dtype, live, golden, true, wrapped, n):
    a = np.full(n, golden, dtype)
    a[-1] = live
    b = np.full(n, golden, dtype)
    result = _ours(a, b, atol=0.0, rtol=0.0)
    assert result.max_absdiff == float(true)
    assert result.worst_index == (n - 1,)
    assert result.mismatch_count == 1
    assert not result
    # Under Polygraphy's default tolerances ours fails too: the true error dwarfs any tolerance.
    assert not _ours(a, b)


@pytest.mark.parametrize(("dtype", "live", "golden", "true", "wrapped"), WRAPPING)
def test_polygraphy_wraps_where_we_do_not(dtype, live, golden, true, wrapped):
    a, b = np.array([live], dtype), np.array([golden], dtype)
    theirs, ours = _polygraphy(a, b), _ours(a, b)
    assert float(theirs.max_absdiff) == float(wrapped)
    assert ours.max_absdiff == float(true)
    assert not bool(ours)
    if wrapped != true:
        # Polygraphy passes two outputs that differ by 2**31 or more under its default 1e-5.
        assert bool(theirs)


def test_agrees_with_polygraphy_where_it_does_not_wrap():
    rng = np.random.default_rng(12)
    for dtype in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64):
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -(2**20)), min(info.max, 2**20)
        a = rng.integers(lo, hi, 50).astype(dtype)
        b = rng.integers(lo, hi, 50).astype(dtype)
        b[b == 0] = 1  # D2 aside
        if info.min == 0:  # Polygraphy's uint64 - uint64 wraps whenever a < b; keep a >= b there
            a, b = np.maximum(a, b), np.minimum(a, b)
        for stat in ("elemwise", "max", "mean", "median"):
            ours, theirs = _ours(a, b, check_error_stat=stat), _polygraphy(a, b, check_error_stat=stat)
            assert ours.max_absdiff == float(theirs.max_absdiff), dtype
            assert ours.max_reldiff == pytest.approx(float(theirs.max_reldiff), rel=1e-12)
            assert bool(ours) == bool(theirs)


def test_int64_against_uint64_is_exact_beyond_2_to_the_53():
    # numpy's common dtype of int64 and uint64 is float64, where 2**53 + 1 rounds to 2**53.
    a, b = np.array([2**53 + 1, -1], np.int64), np.array([2**53, U64.max], np.uint64)
    result = _ours(a, b, atol=0.0, rtol=0.0)
    assert result.mismatch_count == 2
    assert result.max_absdiff == float(2**64)


def test_l2_of_integers_near_the_int64_limits():
    a, b = np.array([I64.max, I64.max], np.int64), np.array([I64.max - 1, I64.min], np.int64)
    result = L2CompareFunc(l2_threshold=0.5)(
        IterationResult({"y": a}, runner_name="live"), IterationResult({"y": b}, runner_name="golden")
    )["y"]
    assert result.l2_norm == pytest.approx(float(2**64 - 1), rel=1e-15)
    assert not result
    # One apart beyond 2**53: float64 operands would both be 2**63 and give 0.
    near = L2CompareFunc(l2_threshold=0.5)(
        IterationResult({"y": a[:1]}, runner_name="live"), IterationResult({"y": b[:1]}, runner_name="golden")
    )["y"]
    assert near.l2_norm == 1.0 and not near
