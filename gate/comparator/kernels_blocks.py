"""The differences of one block of the compare kernel (``gate.comparator.kernels``): the
definition (``reference_diffs``) and ``BlockDiffs``, which computes a block's differences through
per-thread scratch buffers, element for element equal to that definition (see the docstring of
``gate.comparator.kernels``)."""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from gate.comparator import kernels_fused
from gate.comparator.dtypes import ML_WIDENING, abs_difference, cast_up, cast_up_dtype, unsigned_dtype
from gate.comparator.kernels_float16 import FLOAT16, float16_to_float32

EPSILON = 2.220446049250313e-16
F32 = np.dtype(np.float32)


def reference_diffs(a: np.ndarray, b: np.ndarray, infinities_compare_equal=True, nans_compare_equal=False):
    """``(absdiff, reldiff, zero_reference_count)`` of two arrays of equal shape: the definition
    (see the module docstring). Call it under ``np.errstate(invalid/over/divide="ignore")``."""
    if a.dtype in ML_WIDENING or b.dtype in ML_WIDENING:
        a, b = cast_up(a), cast_up(b)  # exact values in float32 / int32; the formulas below then apply
    textual = a.dtype.kind in "OSU" or b.dtype.kind in "OSU"
    if textual:
        # Strings (ONNX tensor(string)) compare by equality: the difference is a mismatch indicator.
        absdiff = np.not_equal(a, b)
        b = np.ones(b.shape, np.bool_)  # the indicator's reference: relative error = indicator
    elif a.dtype == np.bool_ and b.dtype == np.bool_:
        absdiff = np.logical_xor(a, b)
    else:
        absdiff = abs_difference(a, b)
    equal_specials = None
    if infinities_compare_equal and np.issubdtype(absdiff.dtype, np.floating):
        equal_specials = np.isinf(a) & (a == b)
    if nans_compare_equal and np.issubdtype(absdiff.dtype, np.floating):
        both_nan = np.isnan(a) & np.isnan(b)
        equal_specials = both_nan if equal_specials is None else equal_specials | both_nan
    if equal_specials is not None and equal_specials.any():
        absdiff = np.where(equal_specials, 0, absdiff)

    reference = cast_up(b)
    zero_reference = reference == 0
    zero_count = int(np.count_nonzero(zero_reference))
    if np.issubdtype(reference.dtype, np.floating):
        reference = np.where(zero_reference, reference + EPSILON, reference)
        reldiff = absdiff / np.abs(reference)
        if equal_specials is not None:
            reldiff = np.where(equal_specials, 0, reldiff)
    else:
        # D2: integer and bool references have no epsilon; 0 where equal, inf where not.
        magnitude = np.abs(reference.astype(np.float64))
        reldiff = np.divide(absdiff, magnitude, out=np.where(absdiff == 0, 0.0, np.inf), where=~zero_reference)
    return absdiff, reldiff, zero_count


# ------------------------------------------------------------------------------------- scratch


class _Scratch(threading.local):
    """Per-thread temporaries of at most CHUNK elements, reused across calls (no page faults per
    call; a few MiB per thread in all)."""

    def __init__(self):
        self.buffers = {}

    def get(self, key: str, dtype, size: int) -> np.ndarray:
        dtype = np.dtype(dtype)
        buf = self.buffers.get((key, dtype))
        if buf is None or buf.size < size:
            buf = np.empty(size, dtype)
            self.buffers[(key, dtype)] = buf
        return buf[:size]


SCRATCH = _Scratch()


# ----------------------------------------------------------------------------------- the blocks


class Block(NamedTuple):
    """The differences of one block. ``absdiff64`` is ``absdiff`` itself or, for integers, its
    float64 conversion (numpy compares an integer array with a float tolerance in float64 anyway);
    ``nan_counts``: (NaN on both sides, NaN on one side only) among the block's inputs."""

    absdiff: np.ndarray
    absdiff64: np.ndarray
    reldiff: np.ndarray
    zero_count: int
    top: object  # max(absdiff), a numpy scalar
    top_rel: object  # max(reldiff)
    nan_counts: tuple
    # From the compiled block (kernels_fused) only: (argmax(absdiff), the mismatches as
    # ``kernels._mismatches`` gives them or None where it must compute them, the float64 sums of
    # absdiff and reldiff as ``block_sum`` gives them, the brackets' counts (int64[8]) or None).
    fused: tuple | None = None


def block_sum(x: np.ndarray) -> float:
    """``np.add.reduce`` of ``x`` converted to float64 first: numpy's pairwise summation over the
    whole block (a cast inside the reduction would sum in buffers of 8192 and give other last bits;
    the compiled block sums in this order)."""
    if x.dtype != np.float64:
        wide = SCRATCH.get("sum64", np.float64, x.size)
        np.copyto(wide, x)
        x = wide
    return float(np.add.reduce(x))


class BlockDiffs:
    """``absdiff``, ``reldiff``, the zero-reference count, their maxima and the NaN counts of one
    block (a ``Block``), element for element equal to ``reference_diffs`` of that block. Returned
    arrays may be the calling thread's scratch buffers, valid until its next call."""

    def __init__(self, a, b, infinities_compare_equal, nans_compare_equal, tolerances=None):
        """``tolerances``: ``(atol, rtol)`` of an elemwise check, whose mismatches the compiled block
        then counts, else None."""
        self.inf_eq = infinities_compare_equal
        self.nan_eq = nans_compare_equal
        self.mode = "reference"
        self.compiled = False
        self.bracket_bits = None  # uint32[8]: the brackets' thresholds, counted in the compiled pass
        if a.dtype == b.dtype and a.dtype.kind in "fiu" and a.dtype.itemsize <= 8 and a.dtype not in ML_WIDENING:
            self.mode = "float" if a.dtype.kind == "f" else "int"
            self.work = cast_up_dtype(a.dtype)
            self.cast = self.work != a.dtype  # widened, or in another byte order: copied to self.work
            self.widened = self.work.itemsize > a.dtype.itemsize
            if self.mode == "int":
                self.absdiff_dtype = unsigned_dtype(self.work)  # as abs_difference gives it
            if self.mode == "float":
                # What ``reference + EPSILON`` gives at a zero of the reference, in its dtype.
                self.eps = (np.zeros(1, self.work) + EPSILON)[0]
                self.compiled = (
                    a.dtype.isnative and b.dtype.isnative and a.dtype in (FLOAT16, F32) and kernels_fused.available()
                )
                self.thresholds = None
                if self.compiled and tolerances is not None and min(tolerances) >= 0:
                    # (With a negative tolerance, elements of absdiff 0 mismatch; _mismatches's
                    # argmax order among those is numpy's, not the compiled block's.)
                    self.thresholds = tuple(kernels_fused.threshold_bits(t) for t in tolerances)  # as numpy compares t

    def __call__(self, ac, bc) -> Block:
        if self.mode == "float":
            return self._float(ac, bc)
        if self.mode == "int":
            return self._int(ac, bc)
        return self._reference(ac, bc)

    def _reference(self, ac, bc) -> Block:
        absdiff, reldiff, zero_count = reference_diffs(ac, bc, self.inf_eq, self.nan_eq)
        nan_counts = (0, 0)
        x, y = cast_up(ac), cast_up(bc)
        if "f" in (x.dtype.kind, y.dtype.kind):
            nan_a, nan_b = np.isnan(x), np.isnan(y)
            nan_counts = (int(np.count_nonzero(nan_a & nan_b)), int(np.count_nonzero(nan_a ^ nan_b)))
        top, top_rel = np.maximum.reduce(absdiff), np.maximum.reduce(reldiff)
        return Block(absdiff, absdiff, reldiff, zero_count, top, top_rel, nan_counts)

    def _operands(self, ac, bc):
        if not self.cast:
            return ac, bc
        k = ac.size
        a_work = SCRATCH.get("a", self.work, k)
        b_work = SCRATCH.get("b", self.work, k)
        if ac.dtype == FLOAT16:
            float16_to_float32(ac, a_work)  # numpy's bits, faster (kernels_float16)
            float16_to_float32(bc, b_work)
        else:
            np.copyto(a_work, ac)
            np.copyto(b_work, bc)
        return a_work, b_work

    def _compiled(self, ac, bc) -> Block | None:
        """The block by the compiled kernel, or None (not contiguous, or a NaN in the differences)."""
        if not (ac.flags.c_contiguous and bc.flags.c_contiguous):
            return None
        k = ac.size
        absdiff, reldiff = SCRATCH.get("abs", F32, k), SCRATCH.get("rel", F32, k)
        u, idx, sums = (
            SCRATCH.get("u", np.uint32, 5),
            SCRATCH.get("idx", np.int64, 2),
            SCRATCH.get("sums", np.float64, 2),
        )
        lo_abs, lo_rel = self.thresholds or (kernels_fused.NO_THRESHOLD, kernels_fused.NO_THRESHOLD)
        brackets = None
        if self.bracket_bits is not None:
            brackets = (self.bracket_bits, SCRATCH.get("bracket_counts", np.int64, 8))
        if not kernels_fused.compare_block(ac, bc, self.eps, lo_abs, lo_rel, absdiff, reldiff, u, idx, sums, brackets):
            return None
        tops = u[:2].view(F32)
        mismatches = None
        if self.thresholds is not None:
            count = int(u[3])
            mismatches = (count, absdiff[idx[1]], int(idx[1])) if count else (0, None, None)
        counts = None if brackets is None else brackets[1].copy()
        fused = (int(idx[0]), mismatches, float(sums[0]), float(sums[1]), counts)
        return Block(absdiff, absdiff, reldiff, int(u[2]), tops[0], tops[1], (0, 0), fused)

    def _float(self, ac, bc) -> Block:
        if self.compiled:
            block = self._compiled(ac, bc)
            if block is not None:
                return block
        k = ac.size
        a_work, b_work = self._operands(ac, bc)
        absdiff = SCRATCH.get("abs", self.work, k)
        np.subtract(a_work, b_work, out=absdiff)
        np.abs(absdiff, out=absdiff)
        top = np.maximum.reduce(absdiff)
        if top != top:
            # NaN in the block: NaN or infinities on both sides (D1, nans_compare_equal) need the
            # full definition. Otherwise neither input holds a NaN.
            return self._reference(ac, bc)
        reldiff = SCRATCH.get("rel", self.work, k)
        # |absdiff / b| == absdiff / |b| (division rounds symmetrically about 0). A zero in the
        # reference gives inf or NaN (0 / 0) there, so a finite maximum proves there is none.
        np.divide(absdiff, b_work, out=reldiff)
        np.abs(reldiff, out=reldiff)
        top_rel = np.maximum.reduce(reldiff)
        zero_count = 0
        if not top_rel < np.inf:
            np.abs(b_work, out=reldiff)
            zeros = SCRATCH.get("zero", np.bool_, k)
            np.equal(reldiff, 0, out=zeros)
            zero_count = int(np.count_nonzero(zeros))
            if zero_count:
                # |reference| + (eps where it is 0, else 0): x + 0 == x, so this is the
                # definition's where(), without a masked store (slow on irregular masks such as
                # a ReLU's zeros).
                eps = SCRATCH.get("eps", self.work, k)
                np.multiply(zeros, self.eps, out=eps)
                np.add(reldiff, eps, out=reldiff)
            np.divide(absdiff, reldiff, out=reldiff)
            top_rel = np.maximum.reduce(reldiff)
        return Block(absdiff, absdiff, reldiff, zero_count, top, top_rel, (0, 0))

    def _int(self, ac, bc) -> Block:
        k = ac.size
        a_work, b_work = self._operands(ac, bc)
        absdiff = SCRATCH.get("abs", self.absdiff_dtype, k)
        if self.widened:
            # Widened 8/16-bit values (uint32 in int64): every difference fits the work dtype.
            signed = absdiff.view(self.work)
            np.subtract(a_work, b_work, out=signed)
            np.abs(signed, out=signed)
        else:
            # int32, int64, uint64: max - min in the unsigned dtype of that width, exact (D17).
            high = SCRATCH.get("high", self.work, k)
            low = SCRATCH.get("low", self.work, k)
            np.maximum(a_work, b_work, out=high)
            np.minimum(a_work, b_work, out=low)
            np.subtract(high.view(self.absdiff_dtype), low.view(self.absdiff_dtype), out=absdiff)
        magnitude = SCRATCH.get("mag", np.float64, k)
        np.copyto(magnitude, b_work)
        np.abs(magnitude, out=magnitude)
        zero_count = 0
        if not np.minimum.reduce(magnitude) > 0:
            zeros = SCRATCH.get("zero", np.bool_, k)
            np.equal(magnitude, 0, out=zeros)
            zero_count = int(np.count_nonzero(zeros))
        # absdiff in float64 once (exact below 2**53, and what numpy converts it to anyway for
        # the division, the float64 sum and comparisons with float tolerances).
        absdiff64 = SCRATCH.get("abs64", np.float64, k)
        np.copyto(absdiff64, absdiff)
        reldiff = SCRATCH.get("rel", np.float64, k)
        np.divide(absdiff64, magnitude, out=reldiff)
        if zero_count:
            # D2 at the zeros of the reference: x / 0 is inf for x > 0 and NaN for x == 0, which
            # becomes 0. Elsewhere the quotient is >= 0 and not NaN, so fmax(q, 0) == q.
            np.fmax(reldiff, 0.0, out=reldiff)
        top, top_rel = np.maximum.reduce(absdiff), np.maximum.reduce(reldiff)
        return Block(absdiff, absdiff64, reldiff, zero_count, top, top_rel, (0, 0))
