"""The single metrics of Polygraphy 0.53.6's ``L2CompareFunc``, ``CosineSimilarityCompareFunc``,
``PsnrCompareFunc`` and ``SnrCompareFunc``: pure functions over two arrays of equal shape, with
Polygraphy's precision (see ``gate.comparator.metrics``' docstring: squares in float64, differences
and cosine's dot product in the cast-up input dtype; integers and bools in float64, exact, D9/D17)."""

from __future__ import annotations

import math

import numpy as np

from gate.comparator.dtypes import abs_difference
from gate.comparator.kernels import cast_up


def _operand(array) -> np.ndarray:
    array = cast_up(np.asarray(array))
    # Integers and bools in float64: exact up to 2**53, and never wraps (see the module docstring).
    return array.astype(np.float64) if array.dtype.kind in "biu" else array


def _difference(a, b) -> np.ndarray:
    """``a - b`` for the metrics: floats in the promoted input dtype (Polygraphy); integers and
    bools as the exact ``|a - b|`` (D17: no wraparound; int64 values beyond 2**53 that differ by 1
    still differ) rounded to float64 (the metrics only square it)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        if a.dtype == np.bool_ and b.dtype == np.bool_:
            return np.logical_xor(a, b).astype(np.float64)
        return abs_difference(a, b).astype(np.float64)
    return np.subtract(_operand(a), _operand(b))


def _squared(array: np.ndarray) -> np.ndarray:
    # Polygraphy squares through a 0-d int64 exponent: float32 data is promoted to float64.
    return np.power(array.astype(np.promote_types(array.dtype, np.float64), copy=False), 2)


def l2_norm(a, b) -> float:
    """``sqrt(sum((a - b)**2))`` over all elements of two arrays of equal shape (any real dtype).
    The difference is taken in the promoted input dtype, the squares and their sum in float64.
    Empty arrays give 0.0. NaN and inf propagate."""
    with np.errstate(all="ignore"):
        return float(np.sqrt(np.sum(_squared(_difference(a, b)))))


def cosine_similarity(a, b) -> float:
    """``sum(a * b) / (|a| |b|)`` over the flattened arrays, clamped to [-1, 1] (rounding only); 1.0
    when both norms are 0 and 0.0 when one is; NaN (e.g. from inf) is returned as is. As in
    Polygraphy, the dot product is accumulated in the promoted input dtype (float32 for float32 or
    float16 data) and the norms in float64, except where that overflows on finite data (float32
    products beyond 3.4e38, float64 squares beyond 1.8e308): then both vectors are scaled by their
    largest magnitude and everything is computed in float64 (D21; Polygraphy gives inf clamped to
    1.0, or NaN)."""
    x, y = np.ravel(_operand(a)), np.ravel(_operand(b))
    with np.errstate(all="ignore"):
        dot = np.sum(np.multiply(x, y))
        norm0 = np.sqrt(np.sum(_squared(x)))
        norm1 = np.sqrt(np.sum(_squared(y)))
        if norm0 == 0 and norm1 == 0:
            return 1.0
        if norm0 == 0 or norm1 == 0:
            return 0.0
        if not np.isfinite([dot, norm0, norm1]).all() and np.isfinite(x).all() and np.isfinite(y).all():
            return _scaled_cosine(x, y)
        value = float(dot / (norm0 * norm1))
    return value if math.isnan(value) else max(-1.0, min(1.0, value))


def _scaled_cosine(x, y) -> float:
    """Cosine similarity of finite, nonzero vectors in float64, each divided by its largest magnitude
    first, so no product or square overflows."""
    x, y = x.astype(np.float64), y.astype(np.float64)
    x, y = x / np.max(np.abs(x)), y / np.max(np.abs(y))
    value = float(np.dot(x, y) / (np.sqrt(np.dot(x, x)) * np.sqrt(np.dot(y, y))))
    return max(-1.0, min(1.0, value))


def psnr(a, b) -> float:
    """Peak signal-to-noise ratio in dB, with ``a`` (the FIRST runner) as the reference signal:
    ``20 log10(max(a)) - 10 log10(mean((a - b)**2))``; +inf when the mean squared error is 0; a
    peak ``max(a) <= 0`` is replaced by 1.0. The MSE is computed in float64."""
    x = _operand(a)
    with np.errstate(all="ignore"):
        mse = np.mean(_squared(_difference(a, b)))
        if mse == 0:
            return math.inf
        peak = float(np.amax(x))
        if peak <= 0:
            peak = 1.0
        return float(20 * np.log10(peak) - 10 * np.log10(float(mse)))


def snr(a, b) -> float:
    """Signal-to-noise ratio in dB, with ``a`` (the FIRST runner) as the signal:
    ``10 log10(mean(a**2) / mean((a - b)**2))``; +inf when the noise power is 0, else -inf when the
    signal power is 0. Powers are computed in float64."""
    x = _operand(a)
    with np.errstate(all="ignore"):
        signal = np.mean(_squared(x))
        noise = np.mean(_squared(_difference(a, b)))
        if noise == 0:
            return math.inf
        if signal == 0:
            return -math.inf
        return float(10 * np.log10(float(signal / noise)))
