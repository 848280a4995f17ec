"""Polygraphy 0.53.6's factory classes and the perceptual compare function.

- ``CompareFunc.simple / indices / perceptual_metrics`` and ``PostprocessFunc.top_k``: deprecated in
  Polygraphy 0.53.6 (to be removed in 0.60.0) and still there; each call issues Polygraphy's
  ``DeprecationWarning`` and returns the class it names.
- ``PerceptualMetricsCompareFunc`` (LPIPS, ``PerceptualMetricsResult``, ``LpipsThreshold``): as in
  Polygraphy, the LPIPS model (torch + ``lpips``) is loaded lazily at the first comparison. Without
  torch or lpips that is an error, as it is in Polygraphy 0.53.6 (its lazy import raises before its
  "LPIPS check will be skipped" fallback); where the model cannot be built or the outputs are not
  images of rank >= 3, the metric is None and the output passes with a warning that its accuracy was
  NOT verified (Polygraphy's behaviour).
"""

from __future__ import annotations

import logging
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from gate.comparator.compare import SimpleCompareFunc, fuzzy_find_output, metric_value
from gate.comparator.indices import IndicesCompareFunc
from gate.comparator.kernels import cast_up
from gate.comparator.metrics import MetricResult, MetricThreshold, SingleMetricCompareFunc
from gate.comparator.postprocess import BasePostprocessFunc, TopKPostprocessFunc
from gate.errors import GateError

log = logging.getLogger("gate.comparator")

__all__ = [
    "CompareFunc",
    "LpipsThreshold",
    "PerceptualMetricsCompareFunc",
    "PerceptualMetricsResult",
    "PostprocessFunc",
    "BasePostprocessFunc",
    "default_find_output_func",
    "metric_fields_for_func",
    "run_comparison",
]


def warn_deprecated(name: str, use_instead: str, remove_in: str = "0.60.0") -> None:
    """Polygraphy's ``mod.warn_deprecated`` message, as a ``DeprecationWarning`` for the caller."""
    warnings.warn(
        f"{name} is deprecated and will be removed in Polygraphy {remove_in}. Use {use_instead} instead.",
        DeprecationWarning,
        stacklevel=3,
    )


@dataclass(frozen=True)
class LpipsThreshold(MetricThreshold):
    """Maximum allowed LPIPS. A None LPIPS (it could not be computed) passes (Polygraphy)."""

    metric: ClassVar[str] = "lpips"
    label: ClassVar[str] = "LPIPS"

    def passed(self, metric_values) -> bool:
        value = metric_value(metric_values, "lpips")
        return value is None or bool(value <= self.threshold)


class PerceptualMetricsResult(MetricResult):
    """``lpips``: the LPIPS distance (float, lower is more similar), or None when it could not be
    computed (the result then passes, as in Polygraphy)."""

    threshold_type = LpipsThreshold

    def __init__(self, lpips=None, thresholds=None, **extra):
        super().__init__(lpips, thresholds, **extra)

    def __bool__(self):
        if self.error is not None:
            return False
        return self.thresholds.passed(self)


class PerceptualMetricsCompareFunc(SingleMetricCompareFunc):
    """Compares image-like outputs by LPIPS (Polygraphy's ``PerceptualMetricsCompareFunc``).

    Args:
        lpips_threshold: the largest LPIPS that passes, a float or a per-output dict (``""`` the
            default). Default 0.1.
        check_shapes, fail_fast, find_output_func: as for ``L2CompareFunc``.

    LPIPS needs ``torch`` and ``lpips`` (imported at the first comparison, AlexNet weights; without
    them: GateError, as Polygraphy raises); outputs need rank >= 3 (``(C, H, W)`` or ``(N, C, H, W)``,
    values scaled to [-1, 1] by their range), else the metric is None and the output passes, with a
    warning.
    """

    result_type = PerceptualMetricsResult
    default_threshold = 0.1
    threshold_arg = "lpips_threshold"

    def __init__(self, lpips_threshold=None, check_shapes=None, fail_fast=None, find_output_func=None):
        super().__init__(
            threshold=lpips_threshold,
            check_shapes=True if check_shapes is None else check_shapes,
            fail_fast=bool(fail_fast),
            find_output_func=find_output_func,
        )
        self._lpips_initialized = False
        self._torch = None
        self._lpips_model = None

    def _ensure_lpips_model(self):
        if self._lpips_initialized:
            return
        self._lpips_initialized = True
        try:
            import torch
        except ImportError:
            raise GateError("Module: 'torch' is required but could not be imported.") from None
        try:
            import lpips
        except ImportError:
            raise GateError("Module: 'lpips' is required but could not be imported.") from None
        try:
            self._lpips_model = lpips.LPIPS(net="alex", version="0.1").to(torch.device("cpu"))
            self._torch = torch
        except Exception as err:  # lpips downloads / loads weights: any failure skips the check
            log.warning("Failed to initialize the LPIPS model (%s). LPIPS check will be skipped.", err)

    def lpips(self, a, b):
        """LPIPS of ``a`` against ``b`` (float), or None where it cannot be computed."""
        self._ensure_lpips_model()
        if self._lpips_model is None:
            return None
        a, b = cast_up(np.asarray(a)).astype(np.float32), cast_up(np.asarray(b)).astype(np.float32)
        if a.ndim < 3:
            log.warning(
                "LPIPS requires at least 3D arrays, got shapes %s and %s. LPIPS check will be skipped.",
                a.shape,
                b.shape,
            )
            return None
        if a.ndim == 3:
            a, b = a[None], b[None]

        def scaled(x):
            low, high = float(x.min()), float(x.max())
            return (x - low) / (high - low) * 2 - 1 if high > low else np.zeros_like(x)

        torch = self._torch
        with torch.no_grad():
            value = self._lpips_model(torch.from_numpy(scaled(a)), torch.from_numpy(scaled(b)))
        return float(value.mean().item())

    def compare(self, a, b, threshold, runner0="runner 0", runner1="runner 1"):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.size == 0:
            return super().compare(a, b, threshold, runner0, runner1)
        value = self.lpips(a, b)
        if value is None:
            log.warning(
                "LPIPS could not be computed (see the warning above); "
                "this output is being treated as a PASS, so its accuracy was NOT verified."
            )
        return self.result_type(
            value,
            threshold,
            num_elements=int(a.size),
            dtypes=(str(a.dtype), str(b.dtype)),
            shapes=(tuple(a.shape), tuple(b.shape)),
        )


def default_find_output_func(output_name, index, iter_result, base_iter_result=None):
    """Polygraphy's default output matching, for ``run_comparison`` (our compare functions pair by
    exact name unless given a ``find_output_func``, D5): ``[name]`` for the exact name, else the first
    output of ``iter_result`` whose name contains ``output_name`` or is contained in it
    (case-insensitive), else the one at ``index``; None when nothing matches, or when the fuzzy match
    has an exact match of its own in ``base_iter_result``."""
    found = fuzzy_find_output(output_name, index, iter_result)
    if not found:
        return None
    if found[0] != output_name and base_iter_result is not None and found[0] in base_iter_result:
        return None
    if found[0] != output_name:
        log.warning(
            "Output names did not match exactly. Assuming %s output: %s corresponds to output: %s",
            getattr(iter_result, "runner_name", "?"),
            found[0],
            output_name,
        )
    return found


def run_comparison(func, fail_fast, iter_result0, iter_result1, find_output_func, func_name=None):
    """Polygraphy's ``run_comparison``: for each output of ``iter_result0`` (in order) and each name
    ``find_output_func(name, index, iter_result1)`` returns that exists in ``iter_result1``,
    ``func(out0_name, output0, out1_name, output1)``; a result that is not a bool gets
    ``output0_name`` / ``output1_name``. Returns ``OrderedDict[out0_name, result]``; ``fail_fast``
    stops at the first falsy result. ``func_name`` labels the log line.

    Raises:
        GateError: both sides have outputs and none was compared (Polygraphy's wording)."""
    status = OrderedDict()
    for index, (name0, output0) in enumerate(iter_result0.items()):
        for name1 in find_output_func(name0, index, iter_result1) or []:
            if name1 is None or name1 not in iter_result1:
                log.warning(
                    "For output: '%s', skipping corresponding output: '%s', since it was not found", name0, name1
                )
                continue
            result = func(name0, output0, name1, iter_result1[name1])
            if not isinstance(result, bool):
                result.output0_name, result.output1_name = name0, name1
            status[name0] = result
            if fail_fast and not result:
                return status
    if not status and (len(iter_result0) or len(iter_result1)):
        raise GateError(
            "All outputs were skipped, no common outputs found! Note: "
            f"{getattr(iter_result0, 'runner_name', '?')} outputs: {list(iter_result0)}, "
            f"{getattr(iter_result1, 'runner_name', '?')} outputs: {list(iter_result1)}"
        )
    label = f"{func_name} | " if func_name else ""
    failed = [name for name, result in status.items() if not result]
    if failed:
        log.error("FAILED | %sMismatched outputs: %s", label, failed)
    return status


def metric_fields_for_func(func):
    """The metric fields ``func`` produces (via ``func.thresholds_for("")``), [] for a function with
    no averageable metric (``IndicesCompareFunc``), None for one without the protocol (a plain
    function) -- Polygraphy's ``metric_fields_for_func``."""
    thresholds_for = getattr(func, "thresholds_for", None)
    if thresholds_for is None:
        return None
    try:
        return list(thresholds_for("").metric_fields())
    except NotImplementedError:
        return []


class CompareFunc:
    """Polygraphy's (deprecated) factory of compare functions."""

    @staticmethod
    def simple(
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
    ):
        """A ``SimpleCompareFunc`` (deprecated: use it directly)."""
        warn_deprecated("CompareFunc.simple", "SimpleCompareFunc")
        return SimpleCompareFunc(
            check_shapes=check_shapes,
            rtol=rtol,
            atol=atol,
            fail_fast=fail_fast,
            find_output_func=find_output_func,
            check_error_stat=check_error_stat,
            infinities_compare_equal=infinities_compare_equal,
            save_heatmaps=save_heatmaps,
            show_heatmaps=show_heatmaps,
            save_error_metrics_plot=save_error_metrics_plot,
            show_error_metrics_plot=show_error_metrics_plot,
            error_quantile=error_quantile,
        )

    @staticmethod
    def indices(index_tolerance=None, fail_fast=None):
        """An ``IndicesCompareFunc`` (deprecated: use it directly)."""
        warn_deprecated("CompareFunc.indices", "IndicesCompareFunc")
        return IndicesCompareFunc(index_tolerance=index_tolerance, fail_fast=fail_fast)

    @staticmethod
    def perceptual_metrics(lpips_threshold=None, check_shapes=None, fail_fast=None, find_output_func=None):
        """A ``PerceptualMetricsCompareFunc`` (deprecated: use it directly)."""
        warn_deprecated("CompareFunc.perceptual_metrics", "PerceptualMetricsCompareFunc")
        return PerceptualMetricsCompareFunc(
            lpips_threshold=lpips_threshold,
            check_shapes=check_shapes,
            fail_fast=fail_fast,
            find_output_func=find_output_func,
        )


class PostprocessFunc:
    """Polygraphy's (deprecated) factory of post-processing functions."""

    @staticmethod
    def top_k(k=None):
        """A ``TopKPostprocessFunc`` (deprecated: use it directly)."""
        warn_deprecated("PostprocessFunc.top_k", "TopKPostprocessFunc")
        return TopKPostprocessFunc(k=k)
