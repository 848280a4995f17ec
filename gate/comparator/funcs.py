"""Polygraphy 0.53.6's factory classes and the perceptual compare function.

- ``CompareFunc.simple / indices / perceptual_metrics`` and ``PostprocessFunc.top_k``: deprecated in
  Polygraphy 0.53.6 (to be removed in 0.60.0) and still there; each call issues Polygraphy's
  ``DeprecationWarning`` and returns the class it names.
- ``PerceptualMetricsCompareFunc`` (LPIPS, ``PerceptualMetricsResult``, ``LpipsThreshold``): as in
  Polygraphy, the LPIPS model (torch + ``lpips``) is loaded lazily at the first comparison; where it
  cannot be (not installed here, or the outputs are not images of rank >= 3), the metric is None and
  the output passes with a warning that its accuracy was NOT verified (Polygraphy's behaviour).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from gate.comparator.compare import SimpleCompareFunc
from gate.comparator.indices import IndicesCompareFunc
from gate.comparator.kernels import cast_up
from gate.comparator.metrics import MetricResult, MetricThreshold, SingleMetricCompareFunc
from gate.comparator.postprocess import BasePostprocessFunc, TopKPostprocessFunc

log = logging.getLogger("gate.comparator")

__all__ = [
    "CompareFunc",
    "LpipsThreshold",
    "PerceptualMetricsCompareFunc",
    "PerceptualMetricsResult",
    "PostprocessFunc",
    "BasePostprocessFunc",
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

    def passed(self, result) -> bool:
        value = getattr(result, "lpips", None)
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

    LPIPS needs ``torch`` and ``lpips`` (imported at the first comparison, AlexNet weights); outputs
    need rank >= 3 (``(C, H, W)`` or ``(N, C, H, W)``, values scaled to [-1, 1] by their range).
    Without them the metric is None and the output passes, with a warning.
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
            import lpips
            import torch
        except ImportError:
            log.warning(
                "LPIPS comparison requested but torch or lpips module not found. "
                "Install with: pip install torch lpips. LPIPS check will be skipped."
            )
            return
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
