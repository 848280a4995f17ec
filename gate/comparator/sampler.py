"""``ArraySampler``: the random arrays of the synthetic ``DataLoader`` (Polygraphy 0.53.6
``comparator/data_loader.py`` ``ArraySampler``, numpy backend): one ``np.random.RandomState(seed)``
per item, the same draws in the same order, so the same seed gives Polygraphy's values."""

from __future__ import annotations

import math

import numpy as np

from gate.errors import GateError


class ArraySampler:
    """Draws arrays from one seeded ``np.random.RandomState``.

    Args:
        data_loader_backend_module: ``"numpy"`` (``"torch"`` is served by ``DataLoader``, which turns
            numpy's arrays into tensors).
        seed: the RandomState seed.

    Raises:
        GateError: another backend module."""

    def __init__(self, data_loader_backend_module, seed):
        if data_loader_backend_module not in ("numpy", "torch"):
            raise GateError(
                f"Invalid `data_loader_backend_module`. Note: got: {data_loader_backend_module} but valid modules "
                "are: ['numpy', 'torch']"
            )
        self.data_loader_backend_module = data_loader_backend_module
        self.rng = np.random.RandomState(seed)

    def sample_integer(self, shape, dtype, low, high):
        """Integers (or bools, for a bool dtype) in [low, high], inclusive:
        ``randint(low, high + 1, size=shape, dtype=dtype)``."""
        return np.array(self.rng.randint(low=low, high=high + 1, size=shape, dtype=dtype))

    def sample_float(self, shape, dtype, fmin, fmax):
        """Floats in [fmin, fmax): ``(random_sample(shape) * (fmax - fmin) + fmin).astype(dtype)``; an
        infinite bound is the scale (and the shift 0 for an infinite fmin), as in Polygraphy, so that
        two infinite bounds do not collapse into NaN."""
        scale, shift = fmax - fmin, fmin
        if math.isinf(fmin):
            scale, shift = fmin, 0
        if math.isinf(fmax):
            scale = fmax
        return np.array((self.rng.random_sample(size=shape) * scale + shift).astype(dtype))

    def constant_array(self, shape, dtype):
        """``np.array(shape, dtype)``: a shape tensor's values."""
        return np.array(shape, dtype=dtype)
