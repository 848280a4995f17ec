"""Post-processing functions for ``Comparator.postprocess`` (Polygraphy 0.53.6
``comparator/postprocess.py``; spec section 2.1)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gate.comparator.compare import value_or_from_dict
from gate.comparator.struct import IterationResult


def top_k_indices(array: np.ndarray, k: int, axis: int = -1) -> np.ndarray:
    """Indices of the ``k`` largest values along ``axis``, largest first, ties in index order (a
    stable sort of ``-array``, as Polygraphy's numpy ``topk``); ``k`` is clamped to the axis length.
    Returns an int64 array whose ``axis`` has length ``min(k, array.shape[axis])``."""
    array = np.asarray(array)
    order = np.argsort(-array, axis=axis, kind="stable")
    return np.take(order, np.arange(min(k, order.shape[axis])), axis=axis)


class BasePostprocessFunc:
    """Base of the post-processing functions (Polygraphy's ``BasePostprocessFunc``):
    ``__call__(IterationResult) -> IterationResult``, used with ``Comparator.postprocess``."""

    def __call__(self, iter_result: IterationResult) -> IterationResult:
        raise NotImplementedError


class TopKPostprocessFunc(BasePostprocessFunc):
    """Replaces each output with the indices of its top-k values.

    Args:
        k: an int, or ``(k, axis)``, or a per-output dict of either; the ``""`` entry is the default,
            and without one, outputs not listed are left unchanged. Default 10 on the last axis.

    Calling it with an IterationResult modifies it in place and returns it.
    """

    def __init__(self, k=None):
        self.k = 10 if k is None else k

    def __call__(self, iter_result: IterationResult) -> IterationResult:
        for name, output in list(iter_result.items()):
            k_val = value_or_from_dict(self.k, name)
            if not k_val:
                continue
            axis = -1
            if isinstance(k_val, Sequence):
                k_val, axis = k_val
            iter_result[name] = top_k_indices(output, int(k_val), int(axis))
        return iter_result
