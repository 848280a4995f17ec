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
in cache and extra memory stays at a few blocks per thread whatever the size of the outputs; the
inputs are never copied whole nor modified. Each block's differences are bit for bit the slice of
the whole-array ones (``gate.comparator.kernels_blocks``): every formula is element-wise, blocks of
equal-dtype float or integer inputs take a shortcut that skips only steps that are no-ops there
(no NaN in the block's absdiff, so no equal specials; no zero in the reference), and any other
block is computed by ``reference_diffs`` itself. The blocks run on a few threads
(``gate.comparator.kernels_threads``, ``ACCURACY_GATE_COMPARE_THREADS``); each block is summarised
on its thread and the summaries are combined in block order, so every number below is the same
for any thread count. Over the blocks:

- max: exact (the maximum of the block maxima; NaN propagates as with ``np.amax``).
- mean: float64 sums of each block, added (D3); it can differ from one float64 sum over the whole
  array only by rounding in the last bits.
- mismatch count (elemwise) and ``worst_index``: the index of the largest absdiff among mismatched
  elements (the first NaN first, then the first maximum), else of the largest absdiff overall, as
  ``np.argmax`` orders them.
- NaN counts (NaN on both sides, on one side only): 0 in a block whose absdiff holds no NaN (so
  neither input does), else counted in that block.
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

import numpy as np

from gate.comparator import kernels_fused
from gate.comparator.dtypes import cast_up
from gate.comparator.kernels_blocks import EPSILON, SCRATCH, Block, BlockDiffs, block_sum, reference_diffs
from gate.comparator.kernels_float16 import FLOAT16, identical_zero_count
from gate.comparator.kernels_select import (
    Bracket,
    direct_order_stats,
    median_ranks,
    quantile_plan,
    sample_positions,
    select_order_stats,
)
from gate.comparator.kernels_threads import Leader, block_map, compare_threads

__all__ = ["CHUNK", "EPSILON", "cast_up", "diff_statistics", "reference_diffs"]

CHUNK = 1 << 18  # elements per block: 1 MiB of float32 per temporary
# (The sample sizes of the order statistics: gate.comparator.kernels_select.SAMPLE_MIN, SAMPLE_MAX.)


def _flat(x: np.ndarray):
    """The elements of ``x`` in C order, indexable without copying ``x`` whole."""
    return x.reshape(-1) if x.flags.c_contiguous else x.flat


def _block(x: np.ndarray, start: int) -> np.ndarray:
    """Elements ``[start, start + CHUNK)`` of ``x`` in C order, without copying ``x`` whole (a new
    flat iterator per call for a non-contiguous ``x``: the blocks may be read on several threads)."""
    return np.asarray(_flat(x)[start : start + CHUNK])


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
    ``zero_reference_count``, ``mismatch_count`` (elemwise; else None), ``worst_index`` (a flat
    C-order index) and ``nan_counts`` (NaN on both sides, NaN on one side only).

    Raises:
        GateError: ``ACCURACY_GATE_COMPARE_THREADS`` is not a whole number >= 1.
    """
    threads = compare_threads()  # checked for every output, not only those of several blocks
    n = a.size
    elemwise = check_error_stat == "elemwise"
    diffs = BlockDiffs(a, b, infinities_compare_equal, nans_compare_equal, (atol, rtol) if elemwise else None)
    if diffs.mode != "reference":
        identical = _identical_statistics(a, b, n, diffs, check_error_stat, quantile)
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
        brackets = _sample_brackets(diffs, a, b, n, ranks)
        if diffs.compiled:  # their counts taken in the compiled pass itself (per block: below 2**32)
            diffs.bracket_bits = np.zeros(8, np.uint32)
            for i, bracket in enumerate(brackets):
                if bracket is not None:
                    diffs.bracket_bits[4 * i : 4 * i + 4] = bracket.compiled_thresholds()[0]
    leaders = (Leader(), Leader())  # the worst absdiff, the worst mismatch

    def summarise(start: int) -> dict:
        """What the statistics need of one block (its arrays are this thread's scratch)."""
        block = diffs(_block(a, start), _block(b, start))
        fused = block.fused or (None,) * 5  # the compiled block's argmax, mismatches, sums, bracket counts
        summary = {
            "top": block.top,
            "top_rel": block.top_rel,
            "zeros": block.zero_count,
            "nan_counts": block.nan_counts,
            "sum_abs": block_sum(block.absdiff64) if fused[2] is None else fused[2],
            "sum_rel": block_sum(block.reldiff) if fused[3] is None else fused[3],
            "dtypes": (block.absdiff.dtype, block.reldiff.dtype),
            "first_max": fused[0],
            "mismatches": (0, None, None),
        }
        if fused[0] is not None or leaders[0].may_win(block.top, start):
            if fused[0] is None:
                summary["first_max"] = int(np.argmax(block.absdiff))
            leaders[0].offer(block.top, start)
        if elemwise and not (block.top <= atol or block.top_rel <= rtol):
            if fused[1] is None:
                summary["mismatches"] = _mismatches(block, atol, rtol, leaders[1], start, summary["first_max"])
            else:
                summary["mismatches"] = fused[1]
                if fused[1][0]:
                    leaders[1].offer(fused[1][1], start)
        if order_stats and single_block:
            summary["direct"] = direct_order_stats(block.absdiff, block.reldiff, check_error_stat, quantile)
        elif brackets is not None:
            for i, (bracket, d) in enumerate(zip(brackets, (block.absdiff, block.reldiff))):
                if bracket is not None:
                    counts = None if fused[4] is None else fused[4][4 * i : 4 * i + 4]
                    bracket.update(d.view(np.uint8) if d.dtype == np.bool_ else d, counts)
        return summary

    starts = range(0, n, CHUNK)
    # Threads only for outputs of several whole blocks: a block and a tail (ppocr_v4_rec's 265,000
    # elements) gain nothing but hand-offs, which cost a GPU run's inference thread (bench/gpu_job.py).
    summaries = block_map(summarise, starts, 1 if single_block else min(threads, n // CHUNK))
    stats, tops = _combine(summaries, starts, n, elemwise)
    if order_stats:
        if single_block:
            stats.update(summaries[0]["direct"])
        else:
            stats.update(
                select_order_stats(
                    brackets,
                    summaries[-1]["dtypes"],
                    tops,
                    check_error_stat,
                    quantile,
                    quantile_q2,
                    lambda i, dtype: _materialise(diffs, i, dtype, a, b, n),
                )
            )
    return stats


def _combine(summaries, starts, n, elemwise) -> tuple[dict, tuple]:
    """The statistics of the whole arrays from the blocks' summaries, in block order (so the same
    whatever thread computed which block), and the maxima (numpy scalars) of absdiff and reldiff."""
    top_abs = top_rel = None
    zero_count = mismatch_count = 0
    nan_both = nan_one = 0
    worst = worst_mismatch = None  # (value, start, local index)
    for start, summary in zip(starts, summaries):
        top_abs = summary["top"] if top_abs is None else np.maximum(top_abs, summary["top"])
        top_rel = summary["top_rel"] if top_rel is None else np.maximum(top_rel, summary["top_rel"])
        zero_count += summary["zeros"]
        nan_both += summary["nan_counts"][0]
        nan_one += summary["nan_counts"][1]
        if _beats(summary["top"], None if worst is None else worst[0]):
            worst = (summary["top"], start, summary["first_max"])
        count, value, local = summary["mismatches"]
        mismatch_count += count
        if count and _beats(value, None if worst_mismatch is None else worst_mismatch[0]):
            worst_mismatch = (value, start, local)
    # A block that could not win skipped its argmax (kernels_threads.Leader); the winner never does.
    winner = worst_mismatch if elemwise and mismatch_count else worst
    assert winner[2] is not None, "the winning block computed its argmax"
    return {
        "max_absdiff": top_abs.item(),
        "max_reldiff": top_rel.item(),
        "mean_absdiff": _total([s["sum_abs"] for s in summaries]) / n,
        "mean_reldiff": _total([s["sum_rel"] for s in summaries]) / n,
        "zero_reference_count": zero_count,
        "mismatch_count": mismatch_count if elemwise else None,
        "worst_index": winner[1] + winner[2],
        "nan_counts": (nan_both, nan_one),
    }, (top_abs, top_rel)


def _identical_statistics(a, b, n, diffs, check_error_stat, quantile) -> dict | None:
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
        ac, bc = _block(a, start), _block(b, start)
        equal = SCRATCH.get("equal", np.bool_, ac.size)
        if ac.dtype == FLOAT16:
            block_zeros = identical_zero_count(ac, bc, equal, SCRATCH.get("magnitude", np.uint16, ac.size))
            if block_zeros is None:
                return None
            zeros += block_zeros
            continue
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
        "nan_counts": (0, 0),
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


def _mismatches(block: Block, atol, rtol, leader: Leader, start: int, first_max):
    """``(count, value, local index)`` of the block's elements outside both tolerances: their
    number, the worst of them (``np.argmax`` order) and its index, None where ``leader`` shows it
    cannot be the worst overall. ``first_max``: ``argmax(absdiff)`` if already known."""
    absdiff, top_abs, top_rel = block.absdiff, block.top, block.top_rel
    k = absdiff.size
    over_abs = SCRATCH.get("over_abs", np.bool_, k)
    np.greater(block.absdiff64, atol, out=over_abs)
    if top_abs != top_abs:
        over_abs |= np.isnan(absdiff)
    over_rel = SCRATCH.get("over_rel", np.bool_, k)
    np.greater(block.reldiff, rtol, out=over_rel)
    if top_rel != top_rel:
        over_rel |= np.isnan(block.reldiff)
    np.logical_and(over_abs, over_rel, out=over_abs)
    count = int(np.count_nonzero(over_abs))
    if not count:
        return 0, None, None
    if first_max is None:
        first_max = int(np.argmax(absdiff))
    if over_abs[first_max]:
        # The first largest difference (or first NaN) is a mismatch: the worst mismatch, too.
        value, local = absdiff[first_max], first_max
    else:
        masked = _masked(absdiff, over_abs, top_abs)
        value, local = np.maximum.reduce(masked), None
        if leader.may_win(value, start):
            local = int(np.argmax(masked))
    if local is not None:
        leader.offer(value, start)
    return count, value, local


def _masked(absdiff, mismatched, top_abs):
    """``absdiff`` where ``mismatched``, elsewhere a value below every mismatched one: the same
    ``argmax`` as ``where(mismatched, absdiff, -1)``."""
    if absdiff.dtype == np.bool_:
        return mismatched
    if absdiff.dtype.kind in "iu" or (absdiff.dtype.kind == "f" and np.isfinite(top_abs)):
        # Mismatched values are > atol >= 0; the others become 0 (x * False), below all of them.
        # Same argmax as the where() below, without its slow masked selection.
        masked = SCRATCH.get("masked", absdiff.dtype, absdiff.size)
        np.multiply(absdiff, mismatched, out=masked)
        return masked
    # Below every mismatched value (those are > atol >= 0, or NaN); 0 for unsigned integers,
    # where -1 would wrap around to the largest value.
    return np.where(mismatched, absdiff, 0 if absdiff.dtype.kind == "u" else -1)


def _sample_brackets(diffs, a, b, n, ranks):
    """One ``Bracket`` per difference (abs, rel), from the differences at a stratified random
    sample of positions; None for a difference whose sample holds NaN (its order statistics are
    NaN)."""
    positions = sample_positions(n)
    gathered = kernels_fused.gather(a, b, positions)
    sample_a, sample_b = gathered if gathered is not None else (_flat(a)[positions], _flat(b)[positions])
    samples = None
    for start in range(0, positions.size, CHUNK):  # the kernel's own blocks: the same values, faster
        block = diffs(sample_a[start : start + CHUNK], sample_b[start : start + CHUNK])
        if samples is None:
            samples = [np.empty(positions.size, d.dtype) for d in (block.absdiff, block.reldiff)]
        samples[0][start : start + CHUNK] = block.absdiff
        samples[1][start : start + CHUNK] = block.reldiff
    brackets = []
    for sample in samples:
        if sample.dtype == np.bool_:
            sample = sample.view(np.uint8)
        if sample.dtype.kind == "f" and np.isnan(np.maximum.reduce(sample)):
            brackets.append(None)
        else:
            brackets.append(Bracket(sample, n, ranks, CHUNK, SCRATCH))
    return brackets


def _materialise(diffs, i, dtype, a, b, n) -> np.ndarray:
    """The whole difference ``i`` (0: absdiff, 1: reldiff) of ``dtype``, block by block."""
    full = np.empty(n, dtype)
    for start in range(0, n, CHUNK):
        block = diffs(_block(a, start), _block(b, start))
        full[start : start + CHUNK] = block.absdiff if i == 0 else block.reldiff
    return full
