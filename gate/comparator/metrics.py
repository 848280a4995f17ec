"""Single-metric compare functions: L2 norm, cosine similarity, PSNR and SNR, with their result and
threshold types.

Formulas follow Polygraphy 0.53.6 ``polygraphy/comparator/compare.py`` (``L2CompareFunc``,
``CosineSimilarityCompareFunc``, ``PsnrCompareFunc``, ``SnrCompareFunc``; ``shared/spec/
polygraphy-0.53.6.md`` section 3.8), number for number on floating-point outputs, including its
precision: Polygraphy's ``util.array.power`` turns the exponent 2 into a 0-d int64 array, so under
numpy 2 promotion every square (and every sum or mean of squares) is taken in float64, while the
difference ``a - b`` and cosine's dot product ``sum(a * b)`` stay in the (cast-up) input dtype, e.g.
float32. We reproduce that explicitly, so the numbers do not depend on the numpy version, except
where cosine's dot product (or a float64 square) overflows on finite data: Polygraphy's inf clamps
to 1.0, ours is computed in float64 on scaled vectors (D21).

Deliberate differences (``shared/spec/README.md``): empty outputs pass with the metric reported as
None (D4); outputs are paired by exact name (D5); a shape mismatch is a failed result that names both
shapes (D8); integer and bool outputs are computed in float64 (D9; differences exact before that
rounding, D17), where Polygraphy's int32 arithmetic wraps around (a difference of 2**31 or more, a
cosine product of 2**31 or more) and its bool subtraction raises TypeError; wherever Polygraphy's
integer arithmetic does not overflow, the two agree to rounding (relative 1e-15).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from gate.comparator.bases import BaseCompareFunc, CompareResult, Threshold, metric_value, value_or_from_dict
from gate.comparator.compare import missing_output_result, pair_outputs
from gate.comparator.distances import cosine_similarity, l2_norm, psnr, snr
from gate.comparator.struct import IterationResult
from gate.errors import GateError
from gate.structured import is_structured, leaf_pairs

# -- thresholds and results ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MetricThreshold(Threshold):
    """The criterion for one metric: ``value <= threshold`` (L2) or ``value >= threshold`` (the
    others), inclusive. A None or NaN metric fails (Polygraphy's ``_MetricThreshold``)."""

    threshold: float
    metric: ClassVar[str] = ""
    higher_is_better: ClassVar[bool] = False

    @classmethod
    def metric_fields(cls) -> list[str]:
        return [cls.metric]

    label: ClassVar[str] = ""
    unit: ClassVar[str] = ""

    def passed(self, metric_values) -> bool:
        """The verdict for ``metric_values`` (a ``field -> value`` mapping or a result)."""
        value = metric_value(metric_values, self.metric)
        if value is None:
            return False
        return bool(value >= self.threshold if self.higher_is_better else value <= self.threshold)

    def describe(self, metric_values):
        """``(line, passed)``, e.g. ``("L2 Norm: 0.5 (tolerance: 1) | PASSED", True)`` (Polygraphy's
        wording), or None when the metric is None."""
        value = metric_value(metric_values, self.metric)
        if value is None:
            return None
        passed = self.passed(metric_values)
        value_str, threshold_str = _format_pair(value, self.threshold)
        label = "min required" if self.higher_is_better else "tolerance"
        line = (
            f"{self.label}: {value_str}{self.unit} ({label}: {threshold_str}{self.unit}) | "
            f"{'PASSED' if passed else 'FAILED'}"
        )
        return line, passed


def _format_pair(value, threshold):
    # Polygraphy's: 5 significant figures, more only where the two would print alike but differ.
    for precision in range(5, 18):
        value_str, threshold_str = f"{value:.{precision}g}", f"{threshold:.{precision}g}"
        if value == threshold or value_str != threshold_str:
            return value_str, threshold_str
    return f"{value:.17g}", f"{threshold:.17g}"


@dataclass(frozen=True)
class L2Threshold(MetricThreshold):
    """Maximum allowed L2 norm."""

    metric: ClassVar[str] = "l2_norm"
    label: ClassVar[str] = "L2 Norm"


@dataclass(frozen=True)
class CosineSimilarityThreshold(MetricThreshold):
    """Minimum required cosine similarity."""

    metric: ClassVar[str] = "cosine_similarity"
    higher_is_better: ClassVar[bool] = True
    label: ClassVar[str] = "Cosine Similarity"


@dataclass(frozen=True)
class PsnrThreshold(MetricThreshold):
    """Minimum required PSNR in dB."""

    metric: ClassVar[str] = "psnr"
    higher_is_better: ClassVar[bool] = True
    label: ClassVar[str] = "PSNR"
    unit: ClassVar[str] = " dB"


@dataclass(frozen=True)
class SnrThreshold(MetricThreshold):
    """Minimum required SNR in dB."""

    metric: ClassVar[str] = "snr"
    higher_is_better: ClassVar[bool] = True
    label: ClassVar[str] = "SNR"
    unit: ClassVar[str] = " dB"


class MetricResult(CompareResult):
    """The comparison of one output by one metric. The metric is a Python float, or None when the
    outputs are empty (deviation D4: the result passes) or could not be compared (``error`` is set,
    e.g. a shape mismatch: the result fails). Extra fields: ``num_elements``, ``dtypes`` and
    ``shapes`` of both sides, ``output0_name``, ``output1_name``."""

    threshold_type: ClassVar[type[MetricThreshold]] = MetricThreshold

    def __init__(
        self,
        value=None,
        thresholds=None,
        *,
        error=None,
        num_elements=None,
        dtypes=None,
        shapes=None,
        output0_name=None,
        output1_name=None,
    ):
        setattr(self, self.threshold_type.metric, None if value is None else float(value))
        self.thresholds = thresholds
        self.error = error
        self.num_elements = num_elements
        self.dtypes = dtypes
        self.shapes = shapes
        self.output0_name = output0_name
        self.output1_name = output1_name

    @classmethod
    def metric_fields(cls) -> list[str]:
        return [cls.threshold_type.metric]

    @property
    def value(self):
        """The metric (float or None), whatever its field name."""
        return getattr(self, self.threshold_type.metric)

    def __bool__(self):
        if self.error is not None:
            return False
        if self.value is None and self.num_elements == 0:
            return True
        return self.thresholds.passed(self)

    def __repr__(self):
        if self.error is not None:
            return f"{type(self).__name__}(error={self.error!r})"
        return f"{type(self).__name__}({self.threshold_type.metric}={self.value!r})"

    __str__ = __repr__

    @classmethod
    def averaged(cls, results):
        """The mean of the metric over ``results`` (``sum / len`` as Polygraphy's
        ``average_results``; None values, i.e. empty outputs, are skipped; NaN and inf propagate),
        judged by the first result's thresholds."""
        values = [r.value for r in results if r.value is not None]
        counts = [r.num_elements for r in results]
        first = results[0]
        return cls(
            sum(values) / len(values) if values else None,
            first.thresholds,
            num_elements=None if None in counts else sum(counts),
            dtypes=first.dtypes,
            shapes=first.shapes,
            output0_name=first.output0_name,
            output1_name=first.output1_name,
        )


class L2Result(MetricResult):
    """``l2_norm``: the L2 norm of the difference (float, or None)."""

    threshold_type = L2Threshold

    def __init__(self, l2_norm=None, thresholds=None, **extra):
        super().__init__(l2_norm, thresholds, **extra)


class CosineSimilarityResult(MetricResult):
    """``cosine_similarity``: in [-1, 1], or NaN, or None."""

    threshold_type = CosineSimilarityThreshold

    def __init__(self, cosine_similarity=None, thresholds=None, **extra):
        super().__init__(cosine_similarity, thresholds, **extra)


class PsnrResult(MetricResult):
    """``psnr``: the PSNR in dB (float, +inf for identical outputs, or None)."""

    threshold_type = PsnrThreshold

    def __init__(self, psnr=None, thresholds=None, **extra):
        super().__init__(psnr, thresholds, **extra)


class SnrResult(MetricResult):
    """``snr``: the SNR in dB (float, +inf for identical outputs, -inf for a zero signal, or None)."""

    threshold_type = SnrThreshold

    def __init__(self, snr=None, thresholds=None, **extra):
        super().__init__(snr, thresholds, **extra)


# -- the shared driver and the compare functions ------------------------------------------------------


def shape_mismatch_error(shape0, shape1, runner0, runner1) -> str:
    """The ``error`` text of a result whose outputs differ in shape (deviation D8)."""
    return f"has shape {tuple(shape0)} in '{runner0}' but {tuple(shape1)} in '{runner1}'"


def compare_outputs(
    iter_result0: IterationResult,
    iter_result1: IterationResult,
    compare_output,
    *,
    find_output_func=None,
    fail_fast=False,
) -> OrderedDict:
    """Pairs the outputs of two IterationResults (``pair_outputs``: exact names unless
    ``find_output_func``), calls ``compare_output(name0, array0, name1, array1) -> result`` on each
    pair, and records outputs only one side has as ``missing_output_result``. Returns
    ``OrderedDict[name, result]`` keyed by the first runner's name (the second's for outputs only it
    has); ``fail_fast`` stops after the first falsy result.

    Raises:
        GateError: both sides have outputs but none could be paired.
    """
    results = OrderedDict()
    for name0, name1 in pair_outputs(iter_result0, iter_result1, find_output_func):
        if name1 is None:
            key, result = name0, missing_output_result(name0, iter_result1.runner_name)
        elif name0 is None:
            key, result = name1, missing_output_result(name1, iter_result0.runner_name)
        else:
            key, result = name0, compare_output(name0, iter_result0[name0], name1, iter_result1[name1])
            result.output0_name, result.output1_name = name0, name1
        results[key] = result
        if fail_fast and not result:
            break
    return results


def _flattened_leaves(live, reference):
    """``(a, b, error)``: the leaves of two structured values (``leaf_pairs``) raveled and
    concatenated, or ``error`` naming the first structural difference or leaf shape mismatch."""
    parts = []
    for leaf in leaf_pairs(live, reference):
        where = f"item {leaf.suffix} " if leaf.suffix else ""
        if leaf.difference:
            return None, None, f"{where}{leaf.difference}"
        if leaf.live is not None:
            if leaf.live.shape != leaf.reference.shape:
                return None, None, f"{where}has shape {leaf.live.shape} but the reference has {leaf.reference.shape}"
            parts.append((np.ravel(leaf.live), np.ravel(leaf.reference)))
    if not parts:
        return np.zeros(0, np.float32), np.zeros(0, np.float32), None
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), None


def _check_number(label, value):
    values = value.values() if isinstance(value, dict) else [value]
    for v in values:
        if not isinstance(v, (int, float)) or isinstance(v, bool) or math.isnan(v):
            raise GateError(f"{label} must be a number, got {v!r}.")


class SingleMetricCompareFunc(BaseCompareFunc):
    """The base of the compare functions that judge each output pair by one scalar metric
    (``metric(a, b) -> float``) against a per-output threshold. Subclasses set the metric, the result
    type and the default threshold.

    Args:
        threshold: a float, or a per-output dict (keyed by the first runner's output name) whose
            ``""`` entry is the default.
        check_shapes: kept for API compatibility; a shape mismatch is always a failed result whose
            ``error`` names both shapes (deviation D8; Polygraphy's reshape/transpose under
            ``check_shapes=False`` is not supported).
        fail_fast: stop at the first failing output.
        find_output_func: opt-in fuzzy pairing ``(name0, index, iter_result1) -> list[str] | None``
            (default: exact names, deviation D5).

    Calling it with two IterationResults (outputs of any real dtype, each pair of equal shape)
    returns ``OrderedDict[output name, result]``; an output that only one side has gives a failed
    ``OutputCompareResult`` with ``error`` set.

    Raises:
        GateError: (construction) a threshold that is not a number; (call) no output could be paired.
    """

    metric = None
    result_type: ClassVar[type[MetricResult]] = MetricResult
    default_threshold: ClassVar[float] = 0.0
    threshold_arg: ClassVar[str] = "threshold"

    def __init__(self, threshold=None, check_shapes=True, fail_fast=False, find_output_func=None):
        self.threshold = self.default_threshold if threshold is None else threshold
        _check_number(self.threshold_arg, self.threshold)
        self.check_shapes = check_shapes
        self.fail_fast = bool(fail_fast)
        self.find_output_func = find_output_func

    def thresholds_for(self, output_name: str) -> MetricThreshold:
        """The threshold for output ``output_name`` (a dict's ``""`` entry is the default)."""
        value = value_or_from_dict(self.threshold, output_name, self.default_threshold)
        return self.result_type.threshold_type(float(value))

    def compare(self, a, b, threshold: MetricThreshold, runner0="runner 0", runner1="runner 1") -> MetricResult:
        """Compares array ``a`` (first runner) with ``b`` (any real dtypes) under ``threshold``; never
        modifies them. Different shapes give a failed result with ``error``; empty ones a passing
        result whose metric is None. A sequence, map or optional (``gate.structured``) is one vector:
        its leaves raveled and concatenated in the reference's order; a structural difference, or
        leaves of different shapes, give a failed result with ``error``."""
        if is_structured(a) or is_structured(b):
            a, b, error = _flattened_leaves(a, b)
            if error:
                return self.result_type(error=error, thresholds=threshold, num_elements=0)
        a, b = np.asarray(a), np.asarray(b)
        common = {
            "thresholds": threshold,
            "num_elements": int(a.size),
            "dtypes": (str(a.dtype), str(b.dtype)),
            "shapes": (tuple(a.shape), tuple(b.shape)),
        }
        if a.shape != b.shape:
            return self.result_type(error=shape_mismatch_error(a.shape, b.shape, runner0, runner1), **common)
        if a.size == 0:
            return self.result_type(None, **common)
        return self.result_type(type(self).metric(a, b), **common)

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        def compare_output(name0, array0, name1, array1):
            return self.compare(
                array0, array1, self.thresholds_for(name0), iter_result0.runner_name, iter_result1.runner_name
            )

        return compare_outputs(
            iter_result0, iter_result1, compare_output, find_output_func=self.find_output_func, fail_fast=self.fail_fast
        )


class L2CompareFunc(SingleMetricCompareFunc):
    """Passes an output when the L2 norm of the difference, ``sqrt(sum((a - b)**2))`` (``l2_norm``),
    is <= ``l2_threshold`` (Polygraphy 0.53.6 ``L2CompareFunc``). Results: ``L2Result``.

    Args:
        l2_threshold: float or per-output dict, default 1e-5. The other arguments, the return value
            and the errors are those of ``SingleMetricCompareFunc``.
    """

    metric = staticmethod(l2_norm)
    result_type = L2Result
    default_threshold = 1e-5
    threshold_arg = "l2_threshold"

    def __init__(self, l2_threshold=1e-5, check_shapes=True, fail_fast=False, find_output_func=None):
        super().__init__(l2_threshold, check_shapes, fail_fast, find_output_func)


class CosineSimilarityCompareFunc(SingleMetricCompareFunc):
    """Passes an output when the cosine similarity of the flattened outputs (``cosine_similarity``)
    is >= ``cosine_similarity_threshold`` (Polygraphy 0.53.6 ``CosineSimilarityCompareFunc``).
    Results: ``CosineSimilarityResult``.

    Args:
        cosine_similarity_threshold: float or per-output dict, default 0.997. The other arguments,
            the return value and the errors are those of ``SingleMetricCompareFunc``.
    """

    metric = staticmethod(cosine_similarity)
    result_type = CosineSimilarityResult
    default_threshold = 0.997
    threshold_arg = "cosine_similarity_threshold"

    def __init__(self, cosine_similarity_threshold=0.997, check_shapes=True, fail_fast=False, find_output_func=None):
        super().__init__(cosine_similarity_threshold, check_shapes, fail_fast, find_output_func)


class PsnrCompareFunc(SingleMetricCompareFunc):
    """Passes an output when its PSNR in dB (``psnr``) is >= ``psnr_threshold``; the FIRST runner is
    the reference signal (Polygraphy 0.53.6 ``PsnrCompareFunc``). Results: ``PsnrResult``.

    Args:
        psnr_threshold: float or per-output dict, default 30.0. The other arguments, the return
            value and the errors are those of ``SingleMetricCompareFunc``.
    """

    metric = staticmethod(psnr)
    result_type = PsnrResult
    default_threshold = 30.0
    threshold_arg = "psnr_threshold"

    def __init__(self, psnr_threshold=30.0, check_shapes=True, fail_fast=False, find_output_func=None):
        super().__init__(psnr_threshold, check_shapes, fail_fast, find_output_func)


class SnrCompareFunc(SingleMetricCompareFunc):
    """Passes an output when its SNR in dB (``snr``) is >= ``snr_threshold``; the FIRST runner is
    the signal (Polygraphy 0.53.6 ``SnrCompareFunc``). Results: ``SnrResult``.

    Args:
        snr_threshold: float or per-output dict, default 20.0. The other arguments, the return
            value and the errors are those of ``SingleMetricCompareFunc``.
    """

    metric = staticmethod(snr)
    result_type = SnrResult
    default_threshold = 20.0
    threshold_arg = "snr_threshold"

    def __init__(self, snr_threshold=20.0, check_shapes=True, fail_fast=False, find_output_func=None):
        super().__init__(snr_threshold, check_shapes, fail_fast, find_output_func)
