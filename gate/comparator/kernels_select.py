"""Exact order statistics (medians, quantiles) of a difference seen block by block, for the compare
kernel (``gate.comparator.kernels``; the method is described in its module docstring).

A stratified random sample of the difference gives a bracket around the wanted ranks
(``Bracket``); each block adds its counts below and at the bracket's ends and keeps the values
inside it; the ranks are then selected among those, and the final arithmetic is numpy's own
(``np.median`` / ``np.quantile`` of a one- or two-element array of the same dtype). A difference
whose bracket missed is materialised by the kernel and handed to numpy.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from gate.comparator import kernels_fused

SAMPLE_MIN = 1 << 14  # sampled elements for the order-statistics bracket: n / 256 within these
SAMPLE_MAX = 1 << 20  # (1 Mi elements: 16 Ki; 16 Mi: 64 Ki; 256 Mi: 1 Mi)
_SAMPLE_SIGMAS = 4.0  # half-width of the bracket, in standard deviations of a sampled rank


def _dtype_bounds(dtype: np.dtype):
    """The lowest and highest value of a float, integer or uint8 (viewed bool) dtype."""
    if dtype.kind == "f":
        return dtype.type(-np.inf), dtype.type(np.inf)
    info = np.iinfo(dtype)
    return dtype.type(info.min), dtype.type(info.max)


class Bracket:
    """Exact order statistics (given ranks) of a quantity seen block by block.

    A sorted sample of the quantity gives ``lo <= hi`` around the wanted ranks. Each block adds its
    counts of elements below the bracket and at its ends, and keeps the values inside it;
    afterwards every rank that falls within the bracket is known exactly. Values equal to ``lo``
    or ``hi`` are kept too, unless the sample shows ties there (heavy ties, e.g. exact zeros,
    would make the kept set large): then only their counts are. ``values()`` is None when a rank
    fell outside the bracket, or when too many values fell inside (the caller then recomputes
    from the whole quantity)."""

    def __init__(self, sample: np.ndarray, n: int, ranks, chunk: int, scratch):
        """``sample``: the quantity at ``m`` random positions, no NaN (reordered in place);
        ``chunk``: the kernel's block size (the kept values may always fill two blocks);
        ``scratch``: the kernel's per-thread buffers (``get(key, dtype, size)``)."""
        m = sample.size
        half_width = int(math.ceil(_SAMPLE_SIGMAS * 0.5 * math.sqrt(m))) + 2
        i_lo = int(ranks[0] * m // n) - half_width
        i_hi = int(-(-ranks[-1] * m // n)) + half_width
        select_in_place(sample, [i for i in (i_lo, i_hi) if 0 < i < m - 1])
        lo_edge, hi_edge = _dtype_bounds(sample.dtype)
        # (i_lo < m - 1 and i_hi > 0 always: half_width >= 2.) Past the sample's ends, the dtype's.
        self.lo = sample[i_lo] if i_lo > 0 else lo_edge
        self.hi = sample[i_hi] if i_hi < m - 1 else hi_edge
        if self.lo == self.hi:
            self.mode = "point"
        else:
            ties = max(np.count_nonzero(sample == self.lo), np.count_nonzero(sample == self.hi))
            self.mode = "exclusive" if ties > 1 else "inclusive"
        self.ranks = ranks
        self.below = self.at_or_below_lo = self.at_or_below_hi = 0
        self.inside = []
        self.inside_count = 0
        self.cap = max(4 * (min(i_hi, m - 1) - max(i_lo, 0) + 1) * n // m, 2 * chunk)
        self.scratch = scratch
        self.overflow = False
        self._lock = threading.Lock()
        self._compiled = None  # compiled_thresholds()

    def update(self, d: np.ndarray, counts=None) -> None:
        """Adds one block of the quantity (callable from several threads at once). ``counts``: for a
        float32 difference of the compiled kernel (non-negative, no NaN), the elements below each
        of ``compiled_thresholds()`` that its pass counted; the compiled kernel then copies the kept
        values."""
        if counts is not None:
            return self._update_compiled(d, counts)
        k = d.size
        mask0 = self.scratch.get("bracket0", np.bool_, k)
        mask1 = self.scratch.get("bracket1", np.bool_, k)
        np.less(d, self.lo, out=mask0)
        below = int(np.count_nonzero(mask0))
        at_lo = at_hi = 0
        values = None
        if self.mode == "point":
            np.less_equal(d, self.lo, out=mask0)
            at_lo = int(np.count_nonzero(mask0))
        else:
            if self.mode == "inclusive":
                # count(d <= hi) is below + the kept values: known in values().
                np.less_equal(d, self.hi, out=mask1)
                np.logical_xor(mask0, mask1, out=mask0)  # (d < lo) implies (d <= hi): lo <= d <= hi
            else:
                np.less_equal(d, self.lo, out=mask0)
                at_lo = int(np.count_nonzero(mask0))
                np.less_equal(d, self.hi, out=mask1)
                at_hi = int(np.count_nonzero(mask1))
                np.less(d, self.hi, out=mask1)
                np.logical_xor(mask0, mask1, out=mask0)  # (d <= lo) implies (d < hi): lo < d < hi
            if not self.overflow:
                values = np.compress(mask0, d)  # (twice as fast as d[mask0] here)
        self._add(below, at_lo, at_hi, values)

    def compiled_thresholds(self):
        """``(thresholds, keep)`` of the compiled kernel for this bracket (computed once): uint32[4]
        on the bits counted by the pass (``counts[j]``: elements with ``bits < thresholds[j]``;
        unused ones 0, which count nothing and cost nothing) and the bit range ``[low, high)`` of
        the kept values, which ``bracket_block`` copies and counts. point: d < lo, d <= lo;
        inclusive: d < lo (kept: lo <= d <= hi); exclusive: d < lo, d <= lo, d <= hi (kept:
        lo < d < hi)."""
        if self._compiled is None:
            below, at_or_below = kernels_fused.bits_below, kernels_fused.bits_at_or_below
            thresholds = np.zeros(4, np.uint32)
            keep = (0, 0)
            if self.mode == "point":
                thresholds[:2] = (below(self.lo), at_or_below(self.lo))
            elif self.mode == "inclusive":
                thresholds[0] = below(self.lo)
                keep = (below(self.lo), at_or_below(self.hi))
            else:
                thresholds[:3] = (below(self.lo), at_or_below(self.lo), at_or_below(self.hi))
                keep = (at_or_below(self.lo), below(self.hi))
            self._compiled = (thresholds, keep)
        return self._compiled

    def _update_compiled(self, d: np.ndarray, counts) -> None:
        """``update`` of a block of the compiled kernel: ``counts`` from its pass, the kept values
        copied (and counted) by ``kernels_fused.bracket_block``."""
        _, (low, high) = self.compiled_thresholds()
        at_lo = at_hi = 0
        if self.mode == "point":
            at_lo = int(counts[1])
        elif self.mode == "exclusive":
            at_lo, at_hi = int(counts[1]), int(counts[2])
        values = None
        if self.mode != "point" and not self.overflow:
            out = self.scratch.get("bracket_out", np.uint32, d.size)
            values = out[: kernels_fused.bracket_block(d, low, high, out)].view(np.float32).copy()
        self._add(int(counts[0]), at_lo, at_hi, values)

    def _add(self, below, at_lo, at_hi, values) -> None:
        with self._lock:
            self.below += below
            self.at_or_below_lo += at_lo
            self.at_or_below_hi += at_hi
            if values is not None and not self.overflow:
                self.inside_count += values.size
                if self.inside_count > self.cap:
                    self.overflow = True
                    self.inside = []
                elif values.size:
                    self.inside.append(values)  # in any order: values() selects by rank

    def values(self):
        """The values at ``ranks`` (numpy scalars), or None."""
        if self.overflow:
            return None
        # Rank ranges [start, end) that are lo, the kept values, and hi.
        if self.mode == "point":
            ranges = ((self.below, self.at_or_below_lo), (0, 0), (0, 0))
        elif self.mode == "inclusive":
            ranges = ((0, 0), (self.below, self.below + self.inside_count), (0, 0))
        else:
            inside_end = self.at_or_below_lo + self.inside_count
            ranges = (
                (self.below, self.at_or_below_lo),
                (self.at_or_below_lo, inside_end),
                (inside_end, self.at_or_below_hi),
            )
        (lo_start, lo_end), (in_start, in_end), (hi_start, hi_end) = ranges
        wanted = [r - in_start for r in self.ranks if in_start <= r < in_end]
        inside = None
        if wanted:
            inside = np.concatenate(self.inside) if len(self.inside) > 1 else self.inside[0]
            select_in_place(inside, wanted)
        out = []
        for r in self.ranks:
            if lo_start <= r < lo_end:
                out.append(self.lo)
            elif in_start <= r < in_end:
                out.append(inside[r - in_start])
            elif hi_start <= r < hi_end:
                out.append(self.hi)
            else:
                return None
        return out


_SIMD_SORT = int(np.__version__.split(".")[0]) >= 2


def select_in_place(x: np.ndarray, kth) -> None:
    """Reorders the 1-D ``x`` so that ``x[k]`` is its ``k``-th smallest element for each ``k`` of
    ``kth`` (as ``x.partition(kth)``). With numpy >= 2 by sorting ``x``: its vectorised sort
    (x86-simd-sort, Highway) is fast whatever the values, while ``partition`` is slow either on
    continuous values (a list of kth: its generic introselect) or on heavy ties (a single kth:
    the vectorised quickselect). For 263,000 float32 on the dev VM (numpy 2.4.6, AVX-512): sort
    0.11-0.14 ms; partition with two kth 0.46-2.5 ms, with one kth 0.05-0.68 ms."""
    if _SIMD_SORT:
        x.sort()
    elif len(kth):
        x.partition(list(kth))


def median_ranks(n: int):
    return [n // 2 - 1, n // 2] if n % 2 == 0 else [(n - 1) // 2]


def quantile_plan(n: int, q):
    """``(ranks, q2)`` such that ``np.quantile(x, q) == np.quantile([x_(r0), x_(r1)], q2)`` for the
    sorted ``x`` of ``n`` elements (numpy's linear method: ``virtual = (n - 1) * q``, the
    interpolation weight its fractional part), or None where that shortcut is not exact."""
    if type(q) is not float or not 0.0 <= q <= 1.0 or n < 2:
        return None
    virtual = (n - 1) * np.asanyarray(q)
    if not virtual < n - 1:
        return None
    previous = int(np.floor(virtual))
    gamma = float(virtual - np.intp(previous))
    return [previous, previous + 1], gamma


def _median_value(values, dtype):
    return np.median(np.array(values, dtype=dtype)).item()


def _quantile_value(values, dtype, q2):
    return np.quantile(np.array(values, dtype=dtype), q2).item()


def direct_order_stats(absdiff, reldiff, stat, q) -> dict:
    if stat == "median":
        return {"median_absdiff": np.median(absdiff).item(), "median_reldiff": np.median(reldiff).item()}
    # Polygraphy 0.53.6 raises TypeError here for bool outputs (numpy cannot subtract bools).
    numeric = absdiff.view(np.uint8) if absdiff.dtype == np.bool_ else absdiff
    return {"quantile_absdiff": np.quantile(numeric, q).item(), "quantile_reldiff": np.quantile(reldiff, q).item()}


_POSITIONS = {}  # n -> sample positions (a few cached sizes)


def sample_positions(n: int) -> np.ndarray:
    """Stratified random positions (one per stratum of n / m elements), fixed for a given n."""
    positions = _POSITIONS.get(n)
    if positions is None:
        m = min(n, max(SAMPLE_MIN, n >> 8), SAMPLE_MAX)
        stride = n / m
        rng = np.random.default_rng(0x5EED)
        positions = (np.arange(m) * stride).astype(np.intp) + rng.integers(0, max(1, int(stride)), m)
        np.minimum(positions, n - 1, out=positions)
        if len(_POSITIONS) >= 8:
            _POSITIONS.clear()
        _POSITIONS[n] = positions
    return positions


def select_order_stats(brackets, dtypes, tops, stat, q, q2, materialise) -> dict:
    """Medians or quantiles of absdiff and reldiff from the brackets; a difference whose bracket
    missed is materialised (``materialise(i, dtype)``: the whole difference ``i``, 0 abs and 1 rel,
    in one more pass) and handed to numpy."""
    out = {}
    for i, (kind, dtype, top) in enumerate(zip(("absdiff", "reldiff"), dtypes, tops)):
        if top != top:  # NaN anywhere: numpy's median and quantile are NaN
            out[f"{stat}_{kind}"] = float("nan")
            continue
        values = brackets[i].values() if brackets is not None and brackets[i] is not None else None
        select_dtype = np.dtype(np.uint8) if dtype == np.bool_ else dtype
        if values is not None:
            if stat == "median":
                array = np.array(values, dtype=select_dtype)
                out[f"{stat}_{kind}"] = _median_value(array.view(dtype) if dtype == np.bool_ else array, dtype)
            else:
                out[f"{stat}_{kind}"] = _quantile_value(values, select_dtype, q2)
            continue
        full = materialise(i, dtype)
        if stat == "median":
            out[f"{stat}_{kind}"] = np.median(full, overwrite_input=True).item()
        else:
            numeric = full.view(np.uint8) if dtype == np.bool_ else full
            out[f"{stat}_{kind}"] = np.quantile(numeric, q, overwrite_input=True).item()
    return out
