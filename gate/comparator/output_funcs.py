"""Compare functions the gate adds to Polygraphy's: the mean squared error (``MseCompareFunc``), top-k
agreement of a scores output along an axis (``TopKCompareFunc``), and ``SelectedOutputs``, which
restricts any compare function to some outputs (so that each output is checked by its own set).

``mean_squared_error`` is PSNR's and SNR's noise power (``gate.comparator.metrics``, Polygraphy 0.53.6's
``PsnrCompareFunc``): ``mean((a - b)**2)``, the difference in the cast-up input dtype, the squares and
their mean in float64.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from gate.comparator.compare import value_or_from_dict
from gate.comparator.distances import _difference, _squared
from gate.comparator.indices import IndicesCompareResult, compare_indices, vacuous_tolerance
from gate.comparator.metrics import (
    MetricResult,
    MetricThreshold,
    SingleMetricCompareFunc,
    compare_outputs,
    shape_mismatch_error,
)
from gate.comparator.postprocess import top_k_indices
from gate.comparator.struct import IterationResult
from gate.structured import is_structured


def mean_squared_error(a, b) -> float:
    """``mean((a - b)**2)`` of two arrays of equal shape (any real dtype; integers and bools in
    float64); the squares and their mean in float64, as PSNR's MSE. NaN and inf propagate."""
    with np.errstate(all="ignore"):
        return float(np.mean(_squared(_difference(a, b))))


@dataclass(frozen=True)
class MseThreshold(MetricThreshold):
    """Maximum allowed mean squared error."""

    metric: ClassVar[str] = "mse"
    label: ClassVar[str] = "MSE"


class MseResult(MetricResult):
    """``mse``: the mean squared error (float, or None for empty outputs)."""

    threshold_type = MseThreshold

    def __init__(self, mse=None, thresholds=None, **extra):
        super().__init__(mse, thresholds, **extra)


class MseCompareFunc(SingleMetricCompareFunc):
    """Passes an output when its mean squared error (``mse``) is <= ``mse_threshold`` (float or
    per-output dict, default 1e-5). Arguments, return value and errors: ``SingleMetricCompareFunc``."""

    metric = staticmethod(mean_squared_error)
    result_type = MseResult
    default_threshold = 1e-5
    threshold_arg = "mse_threshold"

    def __init__(self, mse_threshold=1e-5, check_shapes=True, fail_fast=False, find_output_func=None):
        super().__init__(mse_threshold, check_shapes, fail_fast, find_output_func)


def top_k_agreement(a, b, k=1, axis=-1, index_tolerance=0, tie_atol=None) -> IndicesCompareResult:
    """Compares the top-``k`` indices of scores ``a`` (first runner) and ``b`` (the reference) along
    ``axis`` (``top_k_indices``: largest first, ties in index order) with ``compare_indices``; integer
    outputs already hold indices and are compared as they are (Polygraphy's ``IndicesCompareFunc``).
    Every position along the other axes is one batch. With ``tie_atol`` (not None), position ``i``
    whose indices differ still passes when the reference scores both indices within ``tie_atol``:
    ``|b[a's index] - b[b's index]| <= tie_atol``, a tie the two backends broke differently.
    ``mismatch_count`` counts the positions that disagree, over every batch.

    A batch whose scores hold NaN on either side disagrees at every checked position: a sort puts NaN
    last, so an all-NaN row would rank index 0 first and "agree" with a reference whose top-1 is 0
    (Polygraphy's ``argsort(-x)`` top-k does; deviation D19)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return compare_indices(a, b, index_tolerance)
    if error := vacuous_tolerance(a.shape[axis] if a.ndim else 1, index_tolerance, f"its class axis {axis}"):  # D20
        return IndicesCompareResult(passed=False, error=error, index_tolerance=index_tolerance)
    ia = np.moveaxis(top_k_indices(a, k + index_tolerance, axis), axis, -1)
    ib = np.moveaxis(top_k_indices(b, k + index_tolerance, axis), axis, -1)
    nan = nan_rows(a, axis) | nan_rows(b, axis)
    if nan.any():  # judged apart below; equal indices here so that compare_indices skips them
        ia, ib = ia.copy(), ib.copy()
        ia[nan] = ib[nan]
    scores = None
    if tie_atol is not None:
        ref = np.moveaxis(np.asarray(b), axis, -1)
        scores = (np.take_along_axis(ref, ia, -1), np.take_along_axis(ref, ib, -1))
    result = compare_indices(ia, ib, index_tolerance, scores=scores, tie_atol=tie_atol or 0.0)
    if nan.any():
        result.passed = False
        result.mismatch_count += int(nan.sum()) * max(ia.shape[-1] - index_tolerance, 1)
        first = tuple(int(i) for i in np.argwhere(nan)[0])
        result.first_mismatch = min(result.first_mismatch or (first, 0), (first, 0))
    return result


def nan_rows(scores, axis=-1) -> np.ndarray:
    """``scores.any(NaN)`` along ``axis``: a bool array of the other axes' shape (all False for
    integer and bool scores)."""
    scores = np.asarray(scores)
    if scores.dtype.kind in "iub":
        return np.zeros(np.delete(scores.shape, axis % max(scores.ndim, 1)) if scores.ndim else (), bool)
    with np.errstate(invalid="ignore"):
        return np.isnan(scores).any(axis=axis)


STRUCTURED_ERROR = ("is a sequence, map or optional, but indices and task metrics need a tensor of scores or "
                    "classes; check it with simple (item by item) or a metric")  # fmt: skip


def axis_error(scores: np.ndarray, axis: int) -> str | None:
    """Why ``top_k_axis`` ``axis`` cannot be the class axis of ``scores``, or None."""
    if scores.ndim and -scores.ndim <= axis < scores.ndim:
        return None
    return f"has {scores.ndim} dimension(s) (shape {scores.shape}), so top_k_axis {axis} is not one of its axes"


class TopKCompareFunc:
    """Top-k agreement of each output with the reference (``top_k_agreement``).

    Args:
        k, axis, index_tolerance: ints, or per-output dicts whose ``""`` entry is the default
            (defaults 1, -1, 0).
        ties_compare_equal: accept differently broken ties (``tie_atol``, float or per-output dict,
            default 0).

    Calling it with two IterationResults returns ``OrderedDict[output name, IndicesCompareResult]``;
    a shape mismatch or an output only one side has gives a failed result with ``error``.
    ``thresholds_for`` raises NotImplementedError: agreement is judged per iteration, never averaged.
    """

    def __init__(self, k=1, axis=-1, index_tolerance=0, ties_compare_equal=False, tie_atol=0.0):
        self.k, self.axis, self.index_tolerance = k, axis, index_tolerance
        self.ties_compare_equal, self.tie_atol = bool(ties_compare_equal), tie_atol

    def thresholds_for(self, name):
        raise NotImplementedError("top-k agreement has no averageable metric")

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        def compare_output(name0, array0, name1, array1):
            tol = int(value_or_from_dict(self.index_tolerance, name0, 0))
            if is_structured(array0) or is_structured(array1):
                return IndicesCompareResult(passed=False, index_tolerance=tol, error=STRUCTURED_ERROR)
            a, b = np.asarray(array0), np.asarray(array1)
            info = {"shapes": (a.shape, b.shape), "dtypes": (str(a.dtype), str(b.dtype)), "index_tolerance": tol}
            axis = int(value_or_from_dict(self.axis, name0, -1))
            if error := axis_error(a, axis) if a.dtype.kind not in "iu" else None:
                return IndicesCompareResult(passed=False, error=error, **info)
            if a.shape != b.shape:
                error = shape_mismatch_error(a.shape, b.shape, iter_result0.runner_name, iter_result1.runner_name)
                return IndicesCompareResult(passed=False, error=error, **info)
            tie = float(value_or_from_dict(self.tie_atol, name0, 0.0)) if self.ties_compare_equal else None
            k = int(value_or_from_dict(self.k, name0, 1))
            result = top_k_agreement(a, b, k, axis, tol, tie)
            result.shapes, result.dtypes = info["shapes"], info["dtypes"]
            return result

        return compare_outputs(iter_result0, iter_result1, compare_output)


class SelectedOutputs:
    """``func`` restricted to the outputs ``selected(name)`` accepts (by the first runner's name, or the
    reference's for an output only it has); the others are left out of its results."""

    def __init__(self, func, selected):
        self.func = func
        self.selected = selected
        self.thresholds_for = getattr(func, "thresholds_for", None)

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        def kept(it):
            names = [name for name in it if self.selected(name)]
            if len(names) == len(it):
                return it
            return IterationResult(OrderedDict((n, it[n]) for n in names), it.runtime, it.runner_name)

        first, second = kept(iter_result0), kept(iter_result1)
        if not first and not second:
            return OrderedDict()
        return self.func(first, second)
