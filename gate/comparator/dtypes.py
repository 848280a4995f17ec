"""Dtypes of compared outputs: widening to the dtype of the arithmetic (``cast_up``, Polygraphy's
plus ml_dtypes' narrow types) and the exact absolute difference of integers (``abs_difference``,
deviation D17). Used by the compare kernel (``gate.comparator.kernels``) and the metrics."""

from __future__ import annotations

import numpy as np

_NARROW_INTS = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.uint16))


def _ml_dtypes_widening() -> dict:
    """ml_dtypes' narrow types (as ONNX's float8 / bfloat16 / int4 tensors read back) -> the dtype
    that holds each of their values exactly: float32 for the floats, int32 for the integers."""
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - onnx depends on it
        return {}
    floats = ["bfloat16", "float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e3m4", "float8_e4m3"]
    floats += ["float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"]
    floats += ["float8_e8m0fnu"]
    integers = ["int1", "int2", "int4", "uint1", "uint2", "uint4"]
    table = {}
    for names, wide in ((floats, np.float32), (integers, np.int32)):
        for name in names:
            if hasattr(ml_dtypes, name):  # (older ml_dtypes have fewer)
                table[np.dtype(getattr(ml_dtypes, name))] = np.dtype(wide)
    return table


ML_WIDENING = _ml_dtypes_widening()


def native_order(dtype: np.dtype) -> np.dtype:
    """``dtype`` in this machine's byte order (the same dtype where it has one byte or is native)."""
    return dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype


def widened_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an output of ``dtype`` is compared in: ``cast_up``'s result dtype (ml_dtypes'
    float8 / bfloat16 / float4 / float6 -> float32, int4 / uint4 / int2 ... -> int32; Polygraphy
    cannot compare them at all)."""
    dtype = np.dtype(dtype)
    return ML_WIDENING.get(native_order(dtype)) or cast_up_dtype(dtype)


def cast_up(array: np.ndarray) -> np.ndarray:
    """float16 -> float32; int8/uint8/int16/uint16 -> int32; uint32 -> int64; others unchanged
    (Polygraphy ``comparator/util.py``); ml_dtypes types -> float32 / int32 (exact values). Of any
    byte order (deviation D22: Polygraphy does not recognise a non-native one)."""
    dtype = array.dtype
    widened = ML_WIDENING.get(dtype)
    if widened is not None:
        return array.astype(widened)
    dtype = native_order(dtype)
    if dtype == np.float16:
        return array.astype(np.float32)
    if dtype in (np.int8, np.uint8, np.int16, np.uint16):
        return array.astype(np.int32)
    if dtype == np.uint32:
        return array.astype(np.int64)
    return array


def cast_up_dtype(dtype: np.dtype) -> np.dtype:
    dtype = native_order(dtype)
    if dtype == np.float16:
        return np.dtype(np.float32)
    if dtype in _NARROW_INTS:
        return np.dtype(np.int32)
    if dtype == np.uint32:
        return np.dtype(np.int64)
    return dtype


def unsigned_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


def abs_difference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``|cast_up(a) - cast_up(b)|`` of two numeric (or bool and numeric) arrays, exact for
    integers over the whole range of every integer dtype (deviation D17: Polygraphy subtracts in
    the integer dtype, which wraps around, so INT64_MAX vs -1 has abs error -2**63 there and passes).

    Integers (after ``cast_up``, in their common dtype ``R``): ``max(a, b) - min(a, b)`` in the
    unsigned dtype of ``R``'s width, which holds every difference of two ``R`` values exactly
    (e.g. INT64_MAX vs INT64_MIN is 2**64 - 1 as uint64). int64 against uint64, whose common
    dtype numpy makes float64 (rounding 2**53 + 1 to 2**53), is subtracted in Python integers and
    then rounded to float64, so a nonzero difference never becomes 0. Floats: ``np.abs(a - b)`` in
    their common dtype, as Polygraphy. Call it under ``np.errstate(over/invalid="ignore")``."""
    a, b = cast_up(a), cast_up(b)
    common = np.result_type(a, b)
    if common.kind in "iu":
        high, low = np.maximum(a, b), np.minimum(a, b)
        unsigned = unsigned_dtype(common)
        return np.subtract(high.view(unsigned), low.view(unsigned))
    if a.dtype.kind in "biu" and b.dtype.kind in "biu":
        exact = np.asarray(np.abs(a.astype(object) - b.astype(object))).astype(np.float64)  # 0-d: an int
        return exact.reshape(np.broadcast_shapes(a.shape, b.shape))
    return np.abs(np.subtract(a, b))
