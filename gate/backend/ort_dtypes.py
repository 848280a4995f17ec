"""ONNX Runtime outputs of the narrow ONNX types (float8, bfloat16, int4, float4) as ml_dtypes arrays.

onnxruntime's Python ``InferenceSession.run`` returns float8e4m3fn outputs as uint8 bit patterns
and refuses the others ("No corresponding Numpy type for Tensor Type. bfloat16"). The golden
files of such outputs (``onnx.numpy_helper.to_array``) are ml_dtypes arrays, compared by value
(``gate.comparator.kernels.cast_up``: float32 / int32). Here the runner's outputs become the same
ml_dtypes arrays: uint8 bit patterns are viewed as the declared type, and outputs that ``run``
refuses are read from ``run_with_ort_values``' CPU buffers (int4 / uint4 / float4 are packed two
per byte, the first element in the low nibble, as ONNX stores them). Stored inputs of those types
(which ``run`` refuses too) are fed the same way.
"""

from __future__ import annotations

import ctypes

import numpy as np

from gate.errors import GateError

try:
    import ml_dtypes
except ImportError:  # pragma: no cover - onnx depends on it
    ml_dtypes = None

_NAMES = {
    "tensor(bfloat16)": "bfloat16",
    "tensor(float8e4m3fn)": "float8_e4m3fn",
    "tensor(float8e4m3fnuz)": "float8_e4m3fnuz",
    "tensor(float8e5m2)": "float8_e5m2",
    "tensor(float8e5m2fnuz)": "float8_e5m2fnuz",
    "tensor(float8e8m0)": "float8_e8m0fnu",
    "tensor(int4)": "int4",
    "tensor(uint4)": "uint4",
    "tensor(float4e2m1)": "float4_e2m1fn",
    "tensor(int2)": "int2",
    "tensor(uint2)": "uint2",
}
_PACKED = {"tensor(int4)": 2, "tensor(uint4)": 2, "tensor(float4e2m1)": 2, "tensor(int2)": 4, "tensor(uint2)": 4}


def ml_dtype(onnx_type: str):
    """The ml_dtypes dtype of an onnxruntime type string such as ``tensor(bfloat16)``, else None."""
    name = _NAMES.get(onnx_type)
    if name is None or ml_dtypes is None or not hasattr(ml_dtypes, name):
        return None
    return np.dtype(getattr(ml_dtypes, name))


_ML_DTYPES = {dtype for dtype in map(ml_dtype, _NAMES) if dtype is not None}


def as_declared(array, onnx_type: str):
    """``array`` as its declared ONNX type: uint8 bit patterns of a float8 output viewed as that
    ml_dtypes type; anything else unchanged."""
    dtype = ml_dtype(onnx_type)
    if dtype is None or not isinstance(array, np.ndarray) or array.dtype != np.uint8 or dtype.itemsize != 1:
        return array
    if onnx_type in _PACKED:
        return array
    return array.view(dtype)


def refused_by_run(err: Exception) -> bool:
    """``InferenceSession.run`` failed only because an output's type has no numpy type, or an
    input's ml_dtypes type has no onnxruntime type ("Numpy_type 256 can't be converted")."""
    return "No corresponding Numpy type" in str(err) or "can't be converted to MLDataType" in str(err)


def _ort_value(onnxruntime, array: np.ndarray):
    """An OrtValue of ``array``; an ml_dtypes array with its ONNX type (int4 / uint4 / float4
    packed two per byte, the first element in the low nibble)."""
    array = np.ascontiguousarray(array)
    if array.dtype not in _ML_DTYPES:  # (float8_e5m2 has numpy kind "f", the others "V")
        return onnxruntime.OrtValue.ortvalue_from_numpy(array)
    import onnx

    onnx_type = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    bits = array.view(np.uint8)
    if onnx_type in (onnx.TensorProto.INT4, onnx.TensorProto.UINT4, onnx.TensorProto.FLOAT4E2M1):
        nibbles = bits.reshape(-1) & 0xF
        if nibbles.size % 2:
            nibbles = np.append(nibbles, np.uint8(0))
        packed = (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8)
        bits = np.zeros(array.shape, np.uint8)  # onnxruntime reads ceil(n / 2) bytes of it
        bits.reshape(-1)[: packed.size] = packed
    elif array.dtype.itemsize == 2:
        bits = array.view(np.uint16)
    return onnxruntime.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, onnx_type)


def run_with_ml_dtypes(sess, feed_dict, output_names, output_types, runner_name):
    """The outputs of one ``sess`` run (a list in ``output_names`` order) when ``run`` refused a
    narrow type: the run is repeated with ``run_with_ort_values`` (ml_dtypes inputs given their
    ONNX type) and each narrow output is copied out of its CPU buffer as its ml_dtypes type.

    Raises:
        GateError: an output of a type that cannot be read this way (not on the CPU, or unknown to
            ml_dtypes), naming the output and its type.
    """
    import onnxruntime

    feeds = {name: _ort_value(onnxruntime, np.asarray(v)) for name, v in feed_dict.items()}
    values = sess.run_with_ort_values(list(output_names), feeds)
    outputs = []
    for name, onnx_type, value in zip(output_names, output_types, values):
        dtype = ml_dtype(onnx_type)
        if dtype is None:
            try:
                outputs.append(value.numpy())
            except Exception as err:
                raise GateError(
                    f"{runner_name}: output '{name}' is {onnx_type}, which onnxruntime cannot return to Python "
                    "and accuracy-gate cannot read; compare an output cast to float32 instead."
                ) from err
            continue
        if value.device_name().lower() != "cpu":
            raise GateError(
                f"{runner_name}: output '{name}' is {onnx_type} on {value.device_name()}, which onnxruntime "
                "cannot return to Python; run it on the CPU execution provider."
            )
        outputs.append(_read_cpu(value, dtype, _PACKED.get(onnx_type, 1)))
    return outputs


def _read_cpu(value, dtype: np.dtype, per_byte: int) -> np.ndarray:
    shape = tuple(int(d) for d in value.shape())
    count = int(np.prod(shape)) if shape else 1
    nbytes = -(-count // per_byte) if per_byte > 1 else count * dtype.itemsize
    raw = np.frombuffer((ctypes.c_uint8 * nbytes).from_address(value.data_ptr()), np.uint8).copy() if nbytes else None
    if raw is None:
        return np.zeros(shape, dtype)
    if per_byte == 1:
        return raw.view(dtype).reshape(shape)
    bits = 8 // per_byte
    mask = (1 << bits) - 1
    fields = np.stack([(raw >> (bits * i)) & mask for i in range(per_byte)], axis=-1).reshape(-1)[:count]
    if dtype.name.startswith("int"):  # two's complement in ``bits`` bits
        signed = fields.astype(np.int8)
        signed[signed >= 1 << (bits - 1)] -= 1 << bits
        return signed.astype(dtype).reshape(shape)
    if dtype.name.startswith("uint"):
        return fields.astype(dtype).reshape(shape)
    return fields.view(dtype).reshape(shape)  # float4: the nibble is the bit pattern
