"""Compare functions: ``SimpleCompareFunc`` and the result and threshold types it produces.

Formulas follow Polygraphy 0.53.6 ``polygraphy/comparator/compare.py`` (``shared/spec/
polygraphy-0.53.6.md`` section 3): ``absdiff = |cast_up(a) - cast_up(b)|`` and ``reldiff = absdiff /
|b|``, with ``b`` (the second runner, e.g. the golden outputs) as the reference and
2.220446049250313e-16 added to float zeros in the reference. Where Polygraphy is wrong we differ on
purpose (``shared/spec/README.md``): same-sign infinities match by default (D1), integer and bool
relative errors are 0 where equal and inf where not (D2), means are accumulated in float64 (D3),
empty tensors pass with statistics reported as n/a (D4), outputs are paired by exact name (D5), and
a shape mismatch is a failed result that carries the reason (D8).
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

# The bases of thresholds, results and compare functions live in gate.comparator.bases; they stay
# importable from here.
from gate.comparator.bases import BaseCompareFunc as BaseCompareFunc
from gate.comparator.bases import CompareResult as CompareResult
from gate.comparator.bases import Threshold as Threshold
from gate.comparator.bases import metric_value as metric_value
from gate.comparator.bases import value_or_from_dict as value_or_from_dict
from gate.comparator.dtypes import ML_WIDENING, widened_dtype

# EPSILON and cast_up live with the kernel; they stay importable from here.
from gate.comparator.kernels import EPSILON as EPSILON
from gate.comparator.kernels import cast_up as cast_up
from gate.comparator.kernels import diff_statistics, reference_diffs
from gate.comparator.struct import IterationResult
from gate.comparator.util import try_match_shape
from gate.errors import GateError
from gate.limits import exact_mean
from gate.structured import leaf_pairs

DEFAULT_TOLERANCE = 1e-5
CHECK_ERROR_STATS = ("max", "mean", "median", "elemwise", "quantile")
METRIC_FIELDS = (
    "max_absdiff",
    "max_reldiff",
    "mean_absdiff",
    "mean_reldiff",
    "median_absdiff",
    "median_reldiff",
    "quantile_absdiff",
    "quantile_reldiff",
)


def _failed(value, tolerance):
    # NaN fails; None (an empty tensor, deviation D4) passes.
    return value is not None and (math.isnan(value) or value > tolerance)


@dataclass(frozen=True)
class SimpleThreshold(Threshold):
    """The criterion of one output: ``check_error_stat`` in max / mean / median / quantile /
    elemwise, with absolute and relative tolerances (inclusive). A scalar statistic fails only when
    it exceeds both tolerances (Polygraphy).

    ``exact`` (our extension, default False; ``EXACT``): every element must be equal, whatever the
    statistic (the first differing element is reported); used by the gate for integer, bool and
    string outputs. Summary statistics re-check it through the max difference, which is 0 exactly
    when every element is equal."""

    check_error_stat: str
    atol: float
    rtol: float
    METRIC_FIELDS = METRIC_FIELDS
    exact: bool = False

    def passed(self, metric_values) -> bool:
        """The verdict for ``metric_values`` (a ``field -> value`` mapping or a result).

        Raises:
            GateError: for ``elemwise``, which cannot be re-checked from summary statistics."""
        stat = "max" if self.exact else self.check_error_stat
        if stat == "elemwise":
            raise GateError("Cannot re-threshold an 'elemwise' comparison; use max, mean, median or quantile.")
        abs_val = metric_value(metric_values, f"{stat}_absdiff")
        rel_val = metric_value(metric_values, f"{stat}_reldiff")
        return not (_failed(abs_val, self.atol) and _failed(rel_val, self.rtol))


EXACT = SimpleThreshold("elemwise", 0.0, 0.0, exact=True)
"""Every element equal: an element fails when its absolute and its relative difference are both
above 0 (for integers, bools and strings: when it differs). ``dataclasses.replace(EXACT,
check_error_stat=...)`` keeps another statistic's name (and its statistics) with the same verdict."""


class OutputCompareResult(CompareResult):
    """Statistics of the comparison of one output between two runners.

    The eight metric fields are Python floats, or None: quantiles when the stat is not
    ``quantile``, medians when neither the stat is ``median`` nor medians were asked for
    (``SimpleCompareFunc(compute_medians=True)``, the default, computes them as Polygraphy does),
    and every statistic of an empty tensor. Extra fields beyond Polygraphy's:
    ``num_elements``; ``zero_reference_count`` (reference elements equal to 0, whose relative error
    is inflated by the epsilon); ``mismatch_count`` (elements outside tolerance, elemwise only);
    ``worst_index`` (index tuple of the largest absolute difference, NaN first: among the elements
    out of tolerance for elemwise; the first differing element for an ``exact`` threshold), and,
    for a failed result, of that one element: ``worst_values`` (its value in the output and in the
    reference, Python scalars), ``worst_absdiff`` and ``worst_reldiff`` (its own differences,
    floats), else None; ``nan_counts`` (for a failed float output holding NaN: elements that are
    NaN on both sides, and on one side only);
    ``dtypes`` and ``shapes`` of both sides; ``error`` (why no statistics could be computed, e.g. a
    shape mismatch: the result is then a failure).
    """

    _THRESHOLD_CLASS = SimpleThreshold

    def __init__(self, *metrics, thresholds=None, passed=None, error=None, **extra):
        values = dict(zip(METRIC_FIELDS, metrics))
        for field in METRIC_FIELDS:
            value = values.get(field, extra.pop(field, None))
            setattr(self, field, None if value is None else float(value))
        self.thresholds = thresholds
        self.passed = passed
        self.error = error
        self.num_elements = extra.pop("num_elements", None)
        self.zero_reference_count = extra.pop("zero_reference_count", None)
        self.mismatch_count = extra.pop("mismatch_count", None)
        self.worst_index = extra.pop("worst_index", None)
        self.worst_values = extra.pop("worst_values", None)
        self.worst_absdiff = extra.pop("worst_absdiff", None)
        self.worst_reldiff = extra.pop("worst_reldiff", None)
        self.nan_counts = extra.pop("nan_counts", None)
        self.dtypes = extra.pop("dtypes", None)
        self.shapes = extra.pop("shapes", None)
        self.output0_name = extra.pop("output0_name", None)
        self.output1_name = extra.pop("output1_name", None)
        self.time_s = extra.pop("time_s", None)  # seconds this comparison took (set by SimpleCompareFunc)
        if extra:
            raise TypeError(f"Unknown OutputCompareResult fields: {sorted(extra)}")

    def __bool__(self):
        if self.error is not None:
            return False
        if self.passed is not None:
            return bool(self.passed)
        return self.thresholds.passed(self)

    def set_thresholds(self, thresholds):
        """Re-checks this result against ``thresholds`` (drops a stored elemwise verdict)."""
        self.thresholds = thresholds
        self.passed = None

    def __str__(self):
        return f"(atol={self.max_absdiff}, rtol={self.max_reldiff})"

    __repr__ = __str__

    @classmethod
    def averaged(cls, results):
        """The average of each metric field over ``results`` (values that are None are skipped, NaN
        propagates), judged by the first result's thresholds (Polygraphy's ``average_results``)."""
        metrics = {}
        for field in METRIC_FIELDS:
            values = [getattr(r, field) for r in results if getattr(r, field) is not None]
            metrics[field] = exact_mean(values) if values else None  # fsum would overflow near 1e308
        first = results[0]
        return cls(
            thresholds=first.thresholds,
            num_elements=sum(r.num_elements or 0 for r in results),
            zero_reference_count=sum(r.zero_reference_count or 0 for r in results),
            dtypes=first.dtypes,
            shapes=first.shapes,
            output0_name=first.output0_name,
            output1_name=first.output1_name,
            **metrics,
        )


def compare_arrays(
    a: np.ndarray,
    b: np.ndarray,
    threshold: SimpleThreshold,
    *,
    infinities_compare_equal: bool = True,
    nans_compare_equal: bool = False,
    quantile: float = 0.99,
    medians: bool = False,
) -> OutputCompareResult:
    """Compares output ``a`` with reference ``b`` (same shape, any numeric or bool dtype).

    Returns an OutputCompareResult; it never modifies ``a`` or ``b``, and never copies them whole
    (``gate.comparator.kernels``: one pass over blocks, every reported number as numpy computes it
    on the whole arrays). Medians are computed for ``check_error_stat="median"`` or ``medians=True``
    (a second pass over the arrays), quantiles only for ``"quantile"``; the other statistics always.
    A shape mismatch is never broadcast: it gives a failed result whose ``error`` names both shapes
    (D8).
    """
    a = np.asarray(a)
    b = np.asarray(b)
    common = {
        "thresholds": threshold,
        "dtypes": (str(a.dtype), str(b.dtype)),
        "shapes": (tuple(a.shape), tuple(b.shape)),
        "num_elements": int(a.size),
    }
    if a.shape != b.shape:
        return OutputCompareResult(
            error=f"has shape {tuple(a.shape)} but the reference has shape {tuple(b.shape)}",
            passed=False,
            **common,
        )
    if (a.dtype.kind in "OSU") != (b.dtype.kind in "OSU"):
        return OutputCompareResult(
            error=f"holds {a.dtype} values but the reference holds {b.dtype}: text cannot be compared with numbers",
            passed=False,
            **common,
        )
    raw = [str(x.dtype) for x in (a, b) if x.dtype.kind == "V" and widened_dtype(x.dtype) == x.dtype]
    if raw:
        return OutputCompareResult(
            error=f"holds {raw[0]} values (raw bytes of a type numpy does not know), which cannot be compared",
            passed=False,
            **common,
        )
    stat = threshold.check_error_stat
    if stat not in CHECK_ERROR_STATS:
        raise GateError(invalid_stat_message(stat))
    if a.size == 0:
        return OutputCompareResult(passed=True, zero_reference_count=0, mismatch_count=0, **common)

    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        stats = diff_statistics(
            a,
            b,
            check_error_stat=stat,
            atol=threshold.atol,
            rtol=threshold.rtol,
            infinities_compare_equal=infinities_compare_equal,
            nans_compare_equal=nans_compare_equal,
            quantile=quantile,
        )
        if medians and stats.get("median_absdiff") is None:
            extra = diff_statistics(
                a,
                b,
                check_error_stat="median",
                atol=threshold.atol,
                rtol=threshold.rtol,
                infinities_compare_equal=infinities_compare_equal,
                nans_compare_equal=nans_compare_equal,
            )
            stats["median_absdiff"], stats["median_reldiff"] = extra["median_absdiff"], extra["median_reldiff"]
    flat_index = stats.pop("worst_index")
    nan_counts = stats.pop("nan_counts")  # counted in the same pass, block by block
    mismatch_count = stats["mismatch_count"]
    passed = None if mismatch_count is None else mismatch_count == 0
    if threshold.exact and not (passed if passed is not None else threshold.passed(_Statistics(stats))):
        # Every element must be equal, whatever the statistic: the first differing element, and
        # how many differ (for the exact outputs' dtypes that is absdiff > 0, the elemwise count).
        differs = np.not_equal(a, b).reshape(-1)
        flat_index = int(np.argmax(differs))
        stats["mismatch_count"] = int(np.count_nonzero(differs))
        passed = False
    worst_index = tuple(int(i) for i in np.unravel_index(flat_index, a.shape))
    result = OutputCompareResult(passed=passed, worst_index=worst_index, **stats, **common)
    if not result:  # what a failure line shows (a passing output costs nothing more)
        for key, value in _element(a, b, worst_index, infinities_compare_equal, nans_compare_equal).items():
            setattr(result, key, value)
        if "f" in (widened_dtype(a.dtype).kind, widened_dtype(b.dtype).kind):
            result.nan_counts = nan_counts if any(nan_counts) else None
    return result


def _scalar(value):
    """A Python scalar for reports: numbers as int / float (ml_dtypes widened), text as str."""
    value = np.asarray(value)
    if value.dtype.kind in "biuf" or value.dtype in ML_WIDENING:
        return cast_up(value).item()
    item = value.item()
    if isinstance(item, bytes):
        return item.decode("utf-8", "backslashreplace")
    return item if isinstance(item, str) else repr(item)


def _element(a, b, index, infinities_compare_equal, nans_compare_equal) -> dict:
    """``worst_values``, ``worst_absdiff`` and ``worst_reldiff`` of the element at ``index``: the
    definition (``reference_diffs``) on that one element, so the same numbers as the full pass."""
    x, y = a[index], b[index]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        absdiff, reldiff, _ = reference_diffs(
            np.asarray(x).reshape(1), np.asarray(y).reshape(1), infinities_compare_equal, nans_compare_equal
        )
    return {
        "worst_values": (_scalar(x), _scalar(y)),
        "worst_absdiff": float(absdiff[0]),
        "worst_reldiff": float(reldiff[0]),
    }


class _Statistics:
    """Attribute access to a ``diff_statistics`` dict (for ``SimpleThreshold.passed``)."""

    def __init__(self, stats: dict):
        self.__dict__.update(stats)


def missing_output_result(name: str, missing_from: str) -> OutputCompareResult:
    """A failed result for an output that only one side produced (deviation D5)."""
    return OutputCompareResult(passed=False, error=f"is missing from '{missing_from}'", output0_name=name)


def fuzzy_find_output(name0: str, index: int, iter_result1) -> list[str]:
    """Polygraphy's default output matching, offered opt-in as a ``find_output_func`` (we pair by
    exact name by default, deviation D5): the exact name, else the first output of ``iter_result1``
    whose name contains ``name0`` or is contained in it (case-insensitive), else the output at the
    same position. Returns a list of at most one name (Polygraphy 0.53.6 ``compare.py``)."""
    names = list(iter_result1)
    if name0 in iter_result1:
        return [name0]
    lowered = name0.lower()
    for name1 in names:
        if lowered in name1.lower() or name1.lower() in lowered:
            return [name1]
    return [names[index]] if index < len(names) else []


def pair_outputs(iter_result0: IterationResult, iter_result1: IterationResult, find_output_func=None):
    """Yields ``(name0, name1)`` for every output to compare, then ``(name, None)`` / ``(None,
    name)`` for outputs only one side has. Pairing is by exact name unless a Polygraphy-style
    ``find_output_func(name0, index, iter_result1) -> list[str] | None`` is given.

    Raises:
        GateError: both sides have outputs but none could be paired.
    """
    paired1 = set()
    pairs = []
    for index, name0 in enumerate(iter_result0):
        if find_output_func is not None:
            names1 = [n for n in (find_output_func(name0, index, iter_result1) or []) if n in iter_result1]
        else:
            names1 = [name0] if name0 in iter_result1 else []
        pairs.extend((name0, name1) for name1 in names1)
        paired1.update(names1)
        if not names1:
            pairs.append((name0, None))
    pairs.extend((None, name1) for name1 in iter_result1 if name1 not in paired1)
    if iter_result0 and iter_result1 and all(n0 is None or n1 is None for n0, n1 in pairs):
        raise GateError(
            f"No common outputs: '{iter_result0.runner_name}' has {list(iter_result0)} and "
            f"'{iter_result1.runner_name}' has {list(iter_result1)}."
        )
    return pairs


class SimpleCompareFunc(BaseCompareFunc):
    """Element-wise comparison under absolute and relative tolerances (Polygraphy's
    ``SimpleCompareFunc``; defaults and options as in ``shared/spec/polygraphy-0.53.6.md`` 3.3).

    Args:
        check_shapes: a shape mismatch is a failure (default True, deviation D8: the result carries
            both shapes). False: the second output is permuted / reshaped to the first's shape where
            it can be (Polygraphy's ``try_match_shape``) before comparing.
        rtol, atol: tolerances (inclusive), each a float or a per-output dict whose ``""`` entry is
            the default. Default 1e-5.
        fail_fast: stop at the first failing output.
        find_output_func: opt-in fuzzy output pairing (default: exact names, deviation D5).
        check_error_stat: ``elemwise`` (default), ``max``, ``mean``, ``median`` or ``quantile``;
            a str or a per-output dict.
        infinities_compare_equal: same-sign infinities match (default True, deviation D1).
        save_heatmaps, show_heatmaps, save_error_metrics_plot, show_error_metrics_plot: Polygraphy's
            experimental plots; not supported (they need matplotlib): a value other than None /
            False is a ``GateError``.
        error_quantile: the quantile for ``quantile`` (default 0.99), float or per-output dict.
        nans_compare_equal: NaN in both outputs matches (default False).
        compute_medians: fill ``median_absdiff``/``median_reldiff`` whatever the check (default
            True, as Polygraphy; a second pass over the arrays). The gate passes False.

    Calling it with two IterationResults returns ``OrderedDict[output name, OutputCompareResult]``.
    """

    _RESULT_CLASS = OutputCompareResult

    def __init__(
        self,
        check_shapes=None,
        rtol=None,
        atol=None,
        fail_fast=None,
        find_output_func=None,
        check_error_stat=None,
        infinities_compare_equal=None,
        save_heatmaps=None,
        show_heatmaps=None,
        save_error_metrics_plot=None,
        show_error_metrics_plot=None,
        error_quantile=None,
        nans_compare_equal=None,
        compute_medians=None,
    ):
        self.check_shapes = True if check_shapes is None else bool(check_shapes)
        self.rtol = DEFAULT_TOLERANCE if rtol is None else rtol
        self.atol = DEFAULT_TOLERANCE if atol is None else atol
        self.fail_fast = bool(fail_fast)
        self.find_output_func = find_output_func
        self.check_error_stat = "elemwise" if check_error_stat is None else check_error_stat
        self.infinities_compare_equal = True if infinities_compare_equal is None else infinities_compare_equal
        self.nans_compare_equal = bool(nans_compare_equal)
        self.error_quantile = 0.99 if error_quantile is None else error_quantile
        self.compute_medians = True if compute_medians is None else bool(compute_medians)
        plots = {
            "save_heatmaps": save_heatmaps,
            "show_heatmaps": show_heatmaps,
            "save_error_metrics_plot": save_error_metrics_plot,
            "show_error_metrics_plot": show_error_metrics_plot,
        }
        asked = [name for name, value in plots.items() if value not in (None, False)]
        if asked:
            raise GateError(f"SimpleCompareFunc: {', '.join(asked)} (Polygraphy's plots) are not supported here.")
        self.save_heatmaps = save_heatmaps
        self.show_heatmaps = bool(show_heatmaps)
        self.save_error_metrics_plot = save_error_metrics_plot
        self.show_error_metrics_plot = bool(show_error_metrics_plot)
        for label, value in (("atol", self.atol), ("rtol", self.rtol)):
            values = value.values() if isinstance(value, dict) else [value]
            for v in values:
                if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v) or v < 0:
                    raise GateError(f"{label} must be a non-negative number, got {v!r}.")
        stats = self.check_error_stat.values() if isinstance(self.check_error_stat, dict) else [self.check_error_stat]
        for stat in stats:
            if stat not in CHECK_ERROR_STATS:
                raise GateError(invalid_stat_message(stat))

    def thresholds_for(self, output_name: str) -> SimpleThreshold:
        """The threshold that applies to output ``output_name``."""
        return SimpleThreshold(
            value_or_from_dict(self.check_error_stat, output_name, "elemwise"),
            _tolerance(value_or_from_dict(self.atol, output_name, DEFAULT_TOLERANCE)),
            _tolerance(value_or_from_dict(self.rtol, output_name, DEFAULT_TOLERANCE)),
        )

    def threshold_for_output(self, name: str, array0, array1) -> SimpleThreshold:
        """The threshold that applies to output ``name`` with these arrays (``thresholds_for(name)``;
        a subclass may choose by dtype, as the gate does)."""
        return self.thresholds_for(name)

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        results = OrderedDict()
        done = 0  # results with their comparison time (a structured output adds one per leaf)
        for name0, name1 in pair_outputs(iter_result0, iter_result1, self.find_output_func):
            start = time.perf_counter()
            if name1 is None:
                results[name0] = missing_output_result(name0, iter_result1.runner_name)
            elif name0 is None:
                results[name1] = missing_output_result(name1, iter_result0.runner_name)
            else:
                # A sequence, map or optional is judged leaf by leaf under its output's settings.
                for leaf in leaf_pairs(iter_result0[name0], iter_result1[name1]):
                    if leaf.live is None:
                        result = OutputCompareResult(
                            thresholds=self.thresholds_for(name0),
                            passed=leaf.difference is None,
                            error=leaf.difference,
                            num_elements=0,
                        )
                    else:
                        array0, array1 = leaf.live, leaf.reference
                        if not self.check_shapes and array0.shape != array1.shape:
                            array1 = try_match_shape(array1, array0.shape)
                            if array1.size == array0.size:
                                array0 = array0.reshape(array1.shape)
                        result = compare_arrays(
                            array0,
                            array1,
                            self.threshold_for_output(name0, array0, array1),
                            infinities_compare_equal=self.infinities_compare_equal,
                            nans_compare_equal=self.nans_compare_equal,
                            quantile=float(value_or_from_dict(self.error_quantile, name0, 0.99)),
                            medians=self.compute_medians,
                        )
                    result.output0_name, result.output1_name = name0 + leaf.suffix, name1 + leaf.suffix
                    results[name0 + leaf.suffix] = result
            elapsed = time.perf_counter() - start
            for key in list(results)[done:]:
                results[key].time_s = elapsed / (len(results) - done)
            done = len(results)
            if self.fail_fast and not all(results.values()):
                break
        return results


def invalid_stat_message(stat) -> str:
    """Polygraphy's wording for an unknown ``check_error_stat``."""
    return f"Invalid choice for check_error_stat: {stat}. Note: Valid choices are: {list(CHECK_ERROR_STATS)}"


def _tolerance(value):
    """A tolerance as numpy will compare it: a numpy float scalar stays one (numpy 2 compares a
    float32 difference with a float64 scalar in float64, as Polygraphy, which keeps the value it is
    given, does); anything else becomes a Python float (compared in the difference's dtype)."""
    return value if isinstance(value, np.floating) else float(value)
