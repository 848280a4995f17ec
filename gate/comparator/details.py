"""Error statistics of a failed comparison, as ``polygraphy run`` prints them per output: mean,
median, max and standard deviation of the absolute and relative error, and a histogram of the
absolute error (Polygraphy 0.53.6 ``comparator/util.py``: ``str_histogram`` with 10 equal bins from
the smallest to the largest value).

``DetailsOnFailure`` wraps a compare function: for each output that fails an iteration it computes
these statistics from the two arrays (``kernels.reference_diffs``: the comparator's own absdiff and
reldiff), so a passing run costs nothing extra.

An output compared exactly (integers, bools and strings without a tolerance, ``gate.dtype_rules``)
has no tolerance to advise on and no meaningful relative error: its details are the differing
elements (how many, the largest difference with both values) and, for integers, the statistics and
histogram of the absolute difference over the differing elements only."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from gate.comparator.kernels import reference_diffs

BINS = 10


def _stats(values: np.ndarray) -> dict:
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return {"mean": float("nan"), "median": float("nan"), "max": float(np.max(values)), "std": float("nan")}
    return {
        "mean": float(np.mean(finite)),
        "median": float(np.median(finite)),
        "max": float(np.max(values)),
        "std": float(np.std(finite)),
        "non_finite": int(values.size - finite.size),
    }


def histogram(values: np.ndarray, bins: int = BINS) -> list[tuple[float, float, int]]:
    """``(low, high, count)`` per bin over the finite values, ``bins`` equal bins from min to max; one
    bin ``(value, value, count)`` when every finite value is the same (Polygraphy's ``np.histogram``
    would spread them over [value - 0.5, value + 0.5])."""
    finite = values[np.isfinite(values)].astype(np.float64, copy=False)
    if finite.size == 0:
        return []
    low, high = float(finite.min()), float(finite.max())
    if not high > low:
        return [(low, low, int(finite.size))]
    counts, edges = np.histogram(finite, bins=bins, range=(low, high))
    return [(float(edges[i]), float(edges[i + 1]), int(counts[i])) for i in range(len(counts))]


def _scalar(value):
    item = np.asarray(value).item()
    return item.decode("utf-8", "backslashreplace") if isinstance(item, bytes) else item


def exact_details(a, b) -> dict | None:
    """``{"exact": True, "elements": n, "differing": k, "largest": (index, value_a, value_b, absdiff) | None,
    "abs": stats | None, "histogram": [...]}`` of an output compared exactly (same shape): ``largest``
    is the element with the largest absolute difference (the first differing one for bools and text,
    ``absdiff`` None there); ``abs`` and ``histogram`` cover the differing integer elements only (None
    and [] for bools and text). None where the shapes differ or nothing differs."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.size == 0:
        return None
    differs = np.not_equal(a, b).reshape(-1)
    count = int(np.count_nonzero(differs))
    if count == 0:
        return None
    found = {"exact": True, "elements": a.size, "differing": count, "abs": None, "histogram": []}
    numeric = a.dtype.kind in "iu" or b.dtype.kind in "iu"
    flat = int(np.argmax(differs))
    absdiff = None
    if numeric and a.dtype.kind not in "OSUb" and b.dtype.kind not in "OSUb":
        with np.errstate(invalid="ignore", over="ignore"):
            diffs = np.asarray(reference_diffs(a, b)[0], dtype=np.float64).reshape(-1)
        flat = int(np.argmax(np.where(differs, diffs, -1.0)))
        absdiff = float(diffs[flat])
        differences = diffs[differs]
        spread = float(differences.max() - differences.min())  # whole numbers: bins of whole width
        bins = BINS if not spread < BINS else max(1, int(spread))
        found["abs"], found["histogram"] = _stats(differences), histogram(differences, bins)
    index = tuple(int(i) for i in np.unravel_index(flat, a.shape))
    found["largest"] = (index, _scalar(a.reshape(-1)[flat]), _scalar(b.reshape(-1)[flat]), absdiff)
    return found


def error_details(a, b, infinities_compare_equal=True, nans_compare_equal=False, exact=False) -> dict | None:
    """``{"abs": stats, "rel": stats, "histogram": [(low, high, count), ...], "elements": n}`` of
    output ``a`` against reference ``b`` (same shape), or None where they cannot be compared
    element by element (shapes differ, strings). With ``exact`` (the output is compared exactly),
    :func:`exact_details`.

    stats: ``mean``, ``median``, ``max``, ``std`` (over the finite errors; ``max`` over all) and
    ``non_finite`` (how many errors are NaN or Inf)."""
    if exact:
        return exact_details(a, b)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype.kind in "OSU" or b.dtype.kind in "OSU" or a.size == 0:
        return None
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        absdiff, reldiff, _ = reference_diffs(a, b, infinities_compare_equal, nans_compare_equal)
        absdiff = np.asarray(absdiff, dtype=np.float64).ravel()
        reldiff = np.asarray(reldiff, dtype=np.float64).ravel()
        return {"abs": _stats(absdiff), "rel": _stats(reldiff), "histogram": histogram(absdiff), "elements": a.size}


class DetailsOnFailure:
    """A compare function (``func``) that also keeps :func:`error_details` of each output that
    fails an iteration: ``details[(runner, reference, output, position)]``, ``position`` counting
    the iterations compared for that pair from 0."""

    def __init__(self, func, infinities_compare_equal=True, nans_compare_equal=False):
        self.func = func
        self.thresholds_for = func.thresholds_for
        self.flags = (infinities_compare_equal, nans_compare_equal)
        self.details: dict = {}
        self.positions: dict = {}

    def __call__(self, result0, result1):
        results = self.func(result0, result1)
        pair = (result0.runner_name, result1.runner_name)
        position = self.positions[pair] = self.positions.get(pair, -1) + 1
        for name, result in (results or OrderedDict()).items():
            if bool(result) or getattr(result, "error", None) is not None:
                continue
            name0 = getattr(result, "output0_name", None) or name
            name1 = getattr(result, "output1_name", None) or name
            if name0 in result0 and name1 in result1:
                exact = bool(getattr(getattr(result, "thresholds", None), "exact", False))
                found = error_details(result0[name0], result1[name1], *self.flags, exact=exact)
                if found is not None:
                    self.details[(*pair, name, position)] = found
        return results

    def attach(self, rows, indices) -> None:
        """Sets ``row.details`` of each verdict row (``gate.results.OutputVerdict``) whose worst
        iteration failed; ``indices[position]`` is an iteration's index in the golden set."""
        for (runner, reference, output, position), found in self.details.items():
            index = indices[position] if position < len(indices) else None
            for row in rows:
                if row.pair == (runner, reference) and row.output == output and row.worst_iteration == index:
                    row.details = found


__all__ = ["DetailsOnFailure", "error_details", "exact_details", "histogram"]
