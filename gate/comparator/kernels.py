"""The array kernel of ``SimpleCompareFunc``: every statistic of ``absdiff`` and ``reldiff`` in one
pass over blocks of the two arrays, with bounded memory.

Definitions (``reference_diffs``, the formulas of ``shared/spec/polygraphy-0.53.6.md`` 3.4 with our
deviations D1-D3 and D17 of ``shared/spec/README.md``): ``absdiff = |cast_up(a) - cast_up(b)|``,
exact for integers (``abs_difference``: an unsigned dtype, no wraparound) (bool:
``a XOR b``; strings: ``a != b``), ``reldiff = absdiff / |reference|`` with the reference ``b``
(float zeros get 2.220446049250313e-16 added; integer and bool zeros give 0 where equal and inf
where not, D2). Same-sign infinities on both sides (D1, ``infinities_compare_equal``) and NaN on
both sides (``nans_compare_equal``) have both differences set to 0.

``diff_statistics`` walks the arrays in blocks of ``CHUNK`` elements (C order), so temporaries stay
in cache and extra memory stays at a few blocks whatever the size of the outputs; the inputs are
never copied whole nor modified. Each block's differences are bit for bit the slice of the
whole-array ones: every formula is element-wise, blocks of equal-dtype float or integer inputs
take a shortcut that skips only steps that are no-ops there (no NaN in the block's absdiff, so no
equal specials; no zero in the reference), and any other block is computed by ``reference_diffs``
itself. Over the blocks:

- max: exact (the maximum of the block maxima; NaN propagates as with ``np.amax``).
- mean: float64 sums of each block, added (D3); it can differ from one float64 sum over the whole
  array only by rounding in the last bits.
- mismatch count (elemwise) and ``worst_index``: the index of the largest absdiff among mismatched
  elements (the first NaN first, then the first maximum), else of the largest absdiff overall, as
  ``np.argmax`` orders them.
- median / quantile (only when the check needs them; ``gate.comparator.kernels_select``): exact
  order statistics. A sample of the differences brackets the wanted ranks; the pass counts the
  elements below and at the bracket's ends and keeps the (few) values strictly inside, and the
  ranks are then selected among those.
  The values are passed through ``np.median`` / ``np.quantile`` on a one- or two-element array of
  the same dtype, which performs the same final arithmetic as on the whole array. If the sample
  misjudged the bracket (structured data, heavy ties), a second pass materialises that difference
  and calls ``np.median`` / ``np.quantile`` on it: the result is the same, only slower.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from gate.comparator.dtypes import ML_WIDENING, abs_difference, cast_up, cast_up_dtype, unsigned_dtype
from gate.comparator.kernels_select import (
    Bracket,
    direct_order_stats,
    median_ranks,
    quantile_plan,
    sample_positions,
    select_order_stats,
)

EPSILON = 2.220446049250313e-16
CHUNK = 1 << 18  # elements per block: 1 MiB of float32 per temporary
# (The sample sizes of the order statistics: gate.comparator.kernels_select.SAMPLE_MIN, SAMPLE_MAX.)

_FLOAT16 = np.dtype(np.float16)  # native byte order only (``view(np.uint16)`` reads native bits)
_FLOAT16_TABLE = []


def _float16_table() -> np.ndarray:
    if not _FLOAT16_TABLE:
        _FLOAT16_TABLE.append(np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32))
    return _FLOAT16_TABLE[0]


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


_SCRATCH = _Scratch()


def _flat(x: np.ndarray):
    """The elements of ``x`` in C order, sliceable without copying ``x`` whole."""
    return x.reshape(-1) if x.flags.c_contiguous else x.flat


# ----------------------------------------------------------------------------------- the blocks


class _BlockDiffs:
    """``absdiff``, ``reldiff``, the zero-reference count and ``max(absdiff)`` of one block, element
    for element equal to ``reference_diffs`` of that block. Returned arrays may be scratch buffers,
    valid until the next call."""

    def __init__(self, a, b, infinities_compare_equal, nans_compare_equal):
        self.inf_eq = infinities_compare_equal
        self.nan_eq = nans_compare_equal
        self.mode = "reference"
        if a.dtype == b.dtype and a.dtype.kind in "fiu" and a.dtype.itemsize <= 8 and a.dtype not in ML_WIDENING:
            self.mode = "float" if a.dtype.kind == "f" else "int"
            self.work = cast_up_dtype(a.dtype)
            self.cast = self.work != a.dtype
            if self.mode == "int":
                self.absdiff_dtype = unsigned_dtype(self.work)  # as abs_difference gives it
            if self.mode == "float":
                # What ``reference + EPSILON`` gives at a zero of the reference, in its dtype.
                self.eps = (np.zeros(1, self.work) + EPSILON)[0]

    def __call__(self, ac, bc):
        self.absdiff64 = None  # set by the integer path: absdiff converted to float64
        if self.mode == "float":
            return self._float(ac, bc)
        if self.mode == "int":
            return self._int(ac, bc)
        return self._reference(ac, bc)

    def _reference(self, ac, bc):
        absdiff, reldiff, zero_count = reference_diffs(ac, bc, self.inf_eq, self.nan_eq)
        return absdiff, reldiff, zero_count, np.maximum.reduce(absdiff)

    def _operands(self, ac, bc):
        if not self.cast:
            return ac, bc
        k = ac.size
        a_work = _SCRATCH.get("a", self.work, k)
        b_work = _SCRATCH.get("b", self.work, k)
        if ac.dtype == _FLOAT16:
            # float16 -> float32 through a table of numpy's own conversion of all 65536 bit
            # patterns: the same bits, about twice as fast as numpy's cast here.
            table = _float16_table()
            np.take(table, ac.view(np.uint16), out=a_work, mode="clip")
            np.take(table, bc.view(np.uint16), out=b_work, mode="clip")
        else:
            np.copyto(a_work, ac)
            np.copyto(b_work, bc)
        return a_work, b_work

    def _float(self, ac, bc):
        k = ac.size
        a_work, b_work = self._operands(ac, bc)
        absdiff = _SCRATCH.get("abs", self.work, k)
        np.subtract(a_work, b_work, out=absdiff)
        np.abs(absdiff, out=absdiff)
        top = np.maximum.reduce(absdiff)
        if top != top:
            # NaN in the block: NaN or infinities on both sides (D1, nans_compare_equal) need the
            # full definition.
            return self._reference(ac, bc)
        reldiff = _SCRATCH.get("rel", self.work, k)
        np.abs(b_work, out=reldiff)
        zero_count = 0
        if not np.minimum.reduce(reldiff) > 0:
            zeros = _SCRATCH.get("zero", np.bool_, k)
            np.equal(reldiff, 0, out=zeros)
            zero_count = int(np.count_nonzero(zeros))
            # |reference| + (eps where it is 0, else 0): x + 0 == x, so this is the definition's
            # where(), without a masked store (slow on irregular masks such as a ReLU's zeros).
            eps = _SCRATCH.get("eps", self.work, k)
            np.multiply(zeros, self.eps, out=eps)
            np.add(reldiff, eps, out=reldiff)
        np.divide(absdiff, reldiff, out=reldiff)
        return absdiff, reldiff, zero_count, top

    def _int(self, ac, bc):
        k = ac.size
        a_work, b_work = self._operands(ac, bc)
        absdiff = _SCRATCH.get("abs", self.absdiff_dtype, k)
        if self.cast:
            # Widened 8/16-bit values (uint32 in int64): every difference fits the work dtype.
            signed = absdiff.view(self.work)
            np.subtract(a_work, b_work, out=signed)
            np.abs(signed, out=signed)
        else:
            # int32, int64, uint64: max - min in the unsigned dtype of that width, exact (D17).
            high = _SCRATCH.get("high", self.work, k)
            low = _SCRATCH.get("low", self.work, k)
            np.maximum(a_work, b_work, out=high)
            np.minimum(a_work, b_work, out=low)
            np.subtract(high.view(self.absdiff_dtype), low.view(self.absdiff_dtype), out=absdiff)
        magnitude = _SCRATCH.get("mag", np.float64, k)
        np.copyto(magnitude, b_work)
        np.abs(magnitude, out=magnitude)
        zero_count = 0
        if not np.minimum.reduce(magnitude) > 0:
            zeros = _SCRATCH.get("zero", np.bool_, k)
            np.equal(magnitude, 0, out=zeros)
            zero_count = int(np.count_nonzero(zeros))
        # absdiff in float64 once (exact below 2**53, and what numpy converts it to anyway for
        # the division, the float64 sum and comparisons with float tolerances).
        absdiff64 = _SCRATCH.get("abs64", np.float64, k)
        np.copyto(absdiff64, absdiff)
        self.absdiff64 = absdiff64
        reldiff = _SCRATCH.get("rel", np.float64, k)
        np.divide(absdiff64, magnitude, out=reldiff)
        if zero_count:
            # D2 at the zeros of the reference: x / 0 is inf for x > 0 and NaN for x == 0, which
            # becomes 0. Elsewhere the quotient is >= 0 and not NaN, so fmax(q, 0) == q.
            np.fmax(reldiff, 0.0, out=reldiff)
        return absdiff, reldiff, zero_count, np.maximum.reduce(absdiff)


def _beats(value, best) -> bool:
    """``np.argmax`` order: the first NaN wins, then the first largest value."""
    if best is None:
        return True
    if best != best:
        return False
    return value != value or value > best


# ------------------------------------------------------------------------------------ the pass


def diff_statistics(
    a: np.ndarray,
    b: np.ndarray,
    *,
    check_error_stat: str,
    atol: float,
    rtol: float,
    infinities_compare_equal: bool = True,
    nans_compare_equal: bool = False,
    quantile: float = 0.99,
) -> dict:
    """Statistics of two non-empty arrays of equal shape for one check (call it under
    ``np.errstate(invalid/over/divide="ignore")``); ``a`` and ``b`` are only read.

    Returns a dict with ``max_absdiff``, ``max_reldiff``, ``mean_absdiff``, ``mean_reldiff``
    (Python numbers), ``median_absdiff``/``median_reldiff`` (only for ``median``; else None),
    ``quantile_absdiff``/``quantile_reldiff`` (only for ``quantile``; else None),
    ``zero_reference_count``, ``mismatch_count`` (elemwise; else None) and ``worst_index`` (a flat
    C-order index).
    """
    n = a.size
    flat_a, flat_b = _flat(a), _flat(b)
    diffs = _BlockDiffs(a, b, infinities_compare_equal, nans_compare_equal)
    elemwise = check_error_stat == "elemwise"
    if diffs.mode != "reference":
        identical = _identical_statistics(flat_a, flat_b, n, diffs, check_error_stat, quantile)
        if identical is not None:
            return identical
    ranks = None
    quantile_q2 = None
    if check_error_stat == "median":
        ranks = median_ranks(n)
    elif check_error_stat == "quantile":
        plan = quantile_plan(n, quantile)
        if plan is not None:
            ranks, quantile_q2 = plan
    order_stats = check_error_stat in ("median", "quantile")
    single_block = n <= CHUNK

    brackets = None
    if order_stats and not single_block and ranks is not None:
        brackets = _sample_brackets(flat_a, flat_b, n, ranks, infinities_compare_equal, nans_compare_equal)

    top_abs = top_rel = None
    sums_abs, sums_rel = [], []  # float64 sum of each block, added with math.fsum
    zero_count = 0
    mismatch_count = 0
    worst_value = worst_index = None
    worst_mismatch = worst_mismatch_index = None
    direct = {}
    dtypes = None
    for start in range(0, n, CHUNK):
        ac = flat_a[start : start + CHUNK]
        bc = flat_b[start : start + CHUNK]
        absdiff, reldiff, block_zeros, block_top = diffs(ac, bc)
        block_top_rel = np.maximum.reduce(reldiff)
        dtypes = (absdiff.dtype, reldiff.dtype)
        zero_count += block_zeros
        absdiff64 = diffs.absdiff64 if diffs.absdiff64 is not None else absdiff
        sums_abs.append(float(np.add.reduce(absdiff64, dtype=np.float64)))
        sums_rel.append(float(np.add.reduce(reldiff, dtype=np.float64)))
        top_abs = block_top if top_abs is None else np.maximum(top_abs, block_top)
        top_rel = block_top_rel if top_rel is None else np.maximum(top_rel, block_top_rel)
        if _beats(block_top, worst_value):
            worst_value = block_top
            worst_index = start + int(np.argmax(absdiff))
        if elemwise and not (block_top <= atol or block_top_rel <= rtol):
            count, value, local = _mismatches(
                absdiff, absdiff64, reldiff, block_top, block_top_rel, atol, rtol, worst_mismatch
            )
            mismatch_count += count
            if local is not None:
                worst_mismatch, worst_mismatch_index = value, start + local
        if order_stats:
            if single_block:
                direct = direct_order_stats(absdiff, reldiff, check_error_stat, quantile)
            elif brackets is not None:
                for bracket, d in zip(brackets, (absdiff, reldiff)):
                    if bracket is not None:
                        bracket.update(d.view(np.uint8) if d.dtype == np.bool_ else d)

    stats = {
        "max_absdiff": top_abs.item(),
        "max_reldiff": top_rel.item(),
        "mean_absdiff": _total(sums_abs) / n,
        "mean_reldiff": _total(sums_rel) / n,
        "zero_reference_count": zero_count,
        "mismatch_count": mismatch_count if elemwise else None,
        "worst_index": worst_mismatch_index if elemwise and mismatch_count else worst_index,
    }
    if order_stats:
        if single_block:
            stats.update(direct)
        else:
            stats.update(
                select_order_stats(
                    brackets,
                    dtypes,
                    (top_abs, top_rel),
                    check_error_stat,
                    quantile,
                    quantile_q2,
                    lambda i, dtype: _materialise(diffs, i, dtype, flat_a, flat_b, n),
                )
            )
    return stats


def _identical_statistics(flat_a, flat_b, n, diffs, check_error_stat, quantile) -> dict | None:
    """The statistics of two numeric arrays of one dtype that are equal element for element and
    finite (a deterministic backend against its own golden outputs), else None.

    There every ``absdiff`` is 0 and so is every ``reldiff`` (0 / (|b| + eps) for floats; 0 where
    equal for integers, D2), which fixes every statistic without computing a difference: maxima,
    means, medians and quantiles are numpy's zero of the dtype the full pass would reduce (the
    same Python numbers), ``worst_index`` is 0 (``np.argmax`` of zeros), nothing mismatches, and
    only ``zero_reference_count`` is counted. One pass of comparisons instead of the full one;
    it stops at the first block that differs (or holds an infinity or a NaN), and the caller then
    makes the full pass."""
    floating = diffs.mode == "float"
    zeros = 0
    for start in range(0, n, CHUNK):
        ac = flat_a[start : start + CHUNK]
        bc = flat_b[start : start + CHUNK]
        equal = _SCRATCH.get("equal", np.bool_, ac.size)
        np.equal(ac, bc, out=equal)
        if not np.logical_and.reduce(equal):
            return None
        low, high = np.minimum.reduce(bc), np.maximum.reduce(bc)
        if floating and not (-np.inf < low and high < np.inf):
            return None
        if not (low > 0 or high < 0):
            np.equal(bc, 0, out=equal)
            zeros += int(np.count_nonzero(equal))
    abs_zero = np.zeros(1, diffs.work if floating else diffs.absdiff_dtype)
    rel_zero = np.zeros(1, diffs.work if floating else np.float64)
    stats = {
        "max_absdiff": abs_zero[0].item(),
        "max_reldiff": rel_zero[0].item(),
        "mean_absdiff": 0.0,
        "mean_reldiff": 0.0,
        "zero_reference_count": zeros,
        "mismatch_count": 0 if check_error_stat == "elemwise" else None,
        "worst_index": 0,
    }
    if check_error_stat in ("median", "quantile"):
        stats.update(direct_order_stats(abs_zero, rel_zero, check_error_stat, quantile))
    return stats


def _total(sums) -> float:
    if len(sums) == 1:
        return sums[0]
    total = sum(sums)  # inf and NaN as IEEE addition gives them (math.fsum raises on inf - inf)
    if not math.isfinite(total):
        return total
    try:
        return math.fsum(sums)  # exactly rounded: the blocks add no error of their own
    except OverflowError:
        return total


def _mismatches(absdiff, absdiff64, reldiff, top_abs, top_rel, atol, rtol, worst):
    """``(count, value, local index)`` of the block's elements outside both tolerances; value and
    index of the worst of them when it beats ``worst`` (else index None). ``absdiff64`` is
    ``absdiff`` itself or, for integers, its float64 conversion: numpy compares an integer array
    with a float tolerance in float64 anyway."""
    k = absdiff.size
    over_abs = _SCRATCH.get("over_abs", np.bool_, k)
    np.greater(absdiff64, atol, out=over_abs)
    if top_abs != top_abs:
        over_abs |= np.isnan(absdiff)
    over_rel = _SCRATCH.get("over_rel", np.bool_, k)
    np.greater(reldiff, rtol, out=over_rel)
    if top_rel != top_rel:
        over_rel |= np.isnan(reldiff)
    np.logical_and(over_abs, over_rel, out=over_abs)
    count = int(np.count_nonzero(over_abs))
    if not count:
        return 0, None, None
    if absdiff.dtype == np.bool_:
        masked = over_abs
    elif absdiff.dtype.kind in "iu" or (absdiff.dtype.kind == "f" and np.isfinite(top_abs)):
        # Mismatched values are > atol >= 0; the others become 0 (x * False), below all of them.
        # Same argmax as the where() below, without its slow masked selection.
        masked = _SCRATCH.get("masked", absdiff.dtype, k)
        np.multiply(absdiff, over_abs, out=masked)
    else:
        # Below every mismatched value (those are > atol >= 0, or NaN); 0 for unsigned integers,
        # where -1 would wrap around to the largest value.
        masked = np.where(over_abs, absdiff, 0 if absdiff.dtype.kind == "u" else -1)
    value = np.maximum.reduce(masked)
    if not _beats(value, worst):
        return count, None, None
    return count, value, int(np.argmax(masked))


def _sample_brackets(flat_a, flat_b, n, ranks, infinities_compare_equal, nans_compare_equal):
    """One ``Bracket`` per difference (abs, rel), from the differences at a stratified random
    sample of positions; None for a difference whose sample holds NaN (its order statistics are
    NaN)."""
    positions = sample_positions(n)
    sample_abs, sample_rel, _ = reference_diffs(
        np.asarray(flat_a[positions]), np.asarray(flat_b[positions]), infinities_compare_equal, nans_compare_equal
    )
    brackets = []
    for sample in (sample_abs, sample_rel):
        if sample.dtype == np.bool_:
            sample = sample.view(np.uint8)
        if sample.dtype.kind == "f" and np.isnan(np.maximum.reduce(sample)):
            brackets.append(None)
        else:
            brackets.append(Bracket(np.array(sample, copy=True), n, ranks, CHUNK, _SCRATCH))
    return brackets


def _materialise(diffs, i, dtype, flat_a, flat_b, n) -> np.ndarray:
    """The whole difference ``i`` (0: absdiff, 1: reldiff) of ``dtype``, block by block."""
    full = np.empty(n, dtype)
    for start in range(0, n, CHUNK):
        full[start : start + CHUNK] = diffs(flat_a[start : start + CHUNK], flat_b[start : start + CHUNK])[i]
    return full
