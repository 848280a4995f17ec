"""Outputs in a non-native byte order (a golden .npy written big-endian) are compared as the same
values in native order (deviation D22: Polygraphy 0.53.6 does not recognise such a dtype, so a
big-endian float16 output raised AttributeError there and narrow integers were not widened). Before
the fix, big-endian float16 stayed in float16 arithmetic: ``0 + 2.22e-16`` rounds to 0 there, so the
relative error at a zero of the reference was 0/0 = NaN, except through the equal-outputs shortcut,
which reported 0."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest
from polygraphy.comparator import compare as pg_compare
from polygraphy.comparator import struct as pg_struct
from polygraphy.logger import G_LOGGER

from gate.comparator import IterationResult, SimpleCompareFunc
from gate.comparator.kernels import diff_statistics


def _stats(a, b, stat):
    with np.errstate(all="ignore"):
        return diff_statistics(a, b, check_error_stat=stat, atol=1e-3, rtol=1e-3, quantile=0.9)


@pytest.mark.parametrize("dtype", ["f2", "f4", "f8", "i2", "u2", "i4", "u4", "i8"])
@pytest.mark.parametrize("equal", [True, False])
@pytest.mark.parametrize("stat", ["elemwise", "mean", "median", "max", "quantile"])
def test_a_big_endian_output_gives_the_native_numbers(dtype, equal, stat):
    rng = np.random.default_rng(7)
    a = (rng.integers(0, 5, 3000) * 0.5).astype("<" + dtype)
    b = a.copy()
    b[::10] = 0  # zeros of the reference, where the relative error needs the epsilon
    a[::10] = 0
    if not equal:
        b[1::7] += 1
    native = _stats(a, b, stat)
    for x, y in ((a.astype(">" + dtype), b.astype(">" + dtype)), (a, b.astype(">" + dtype))):
        swapped = _stats(x, y, stat)
        assert swapped.keys() == native.keys()
        for key, value in native.items():
            other = swapped[key]
            assert type(other) is type(value) and (other == value or (other != other and value != value)), key


def test_equal_big_endian_float16_with_zeros_reads_zero_relative_error_either_way():
    a = np.array([0.0, 1.0, 2.0], dtype=">f2")
    func = SimpleCompareFunc(check_error_stat="median")
    for b in (a.copy(), np.array([0.0, 1.0, 2.5], dtype=">f2")):
        result = func(
            IterationResult(OrderedDict(y=a), runner_name="x"), IterationResult(OrderedDict(y=b), runner_name="y")
        )
        assert result["y"].max_reldiff == pytest.approx(0.0 if b[2] == 2.0 else 0.5 / 2.5)
        assert result["y"].median_reldiff == 0.0


def test_polygraphy_does_not_compare_a_big_endian_float16_output():
    """The reference oracle's side of D22."""
    a = np.array([0.0, 1.0, 2.0], dtype=">f2")
    G_LOGGER.module_severity = G_LOGGER.CRITICAL
    func = pg_compare.SimpleCompareFunc()
    with pytest.raises(AttributeError, match="is_floating"), np.errstate(all="ignore"):
        func(
            pg_struct.IterationResult(OrderedDict(y=a), runner_name="x"),
            pg_struct.IterationResult(OrderedDict(y=a.copy()), runner_name="y"),
        )


@pytest.mark.parametrize(
    ("dtype", "x", "y"),
    [
        ("i4", 2**31 - 1, -(2**31)),
        ("i8", 2**63 - 1, -(2**63)),
        ("u8", 0, 2**64 - 1),
        ("u8", 2, 3),
        ("u4", 0, 2**32 - 1),
    ],
)
def test_big_endian_integers_keep_the_exact_difference(dtype, x, y):
    """D17 in another byte order. Failed before: both sides '>i4' (or '>i8', '>u8') were subtracted in
    the signed dtype as if widened, so INT32_MAX vs INT32_MIN had abs error 1 and passed at rtol 1e-5,
    and '>u8' 2 vs 3 read 1.8e19."""
    a, b = np.array([x], ">" + dtype), np.array([y], ">" + dtype)
    func = SimpleCompareFunc(atol=0.0, rtol=1e-5, check_error_stat="max")
    for pair in ((a, b), (a.astype("<" + dtype), b.astype("<" + dtype))):
        result = func(
            IterationResult({"y": pair[0]}, runner_name="a"), IterationResult({"y": pair[1]}, runner_name="b")
        )
        assert result["y"].max_absdiff == float(abs(x - y)) and not result["y"]
