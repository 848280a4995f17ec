"""The ONNX model file as the gate reads it before any runner: its graph inputs and outputs, its
sha256, the input metadata synthetic inputs are made from, and the external-data files it names
(which must sit beside it)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx

from gate.common import TensorMetadata
from gate.errors import GateError


def model_io_names(model_path: Path) -> tuple[list[str], list[str]]:
    """The ONNX model's graph input names (initializers excluded) and output names, in order.

    Raises:
        GateError: the file is missing or not an ONNX model.
    """
    return model_io_names_and_sha256(model_path)[:2]


def model_io_names_and_sha256(model_path: Path) -> tuple[list[str], list[str], str]:
    """``model_io_names`` and the SHA-256 of the model file (hex), from one read of the file."""
    return model_io(model_path)[:3]


def model_io(model_path: Path) -> tuple[list[str], list[str], str, dict]:
    """``model_io_names_and_sha256`` and the ``onnx.TypeProto`` of each graph input and output by
    name (which proto a stored model-zoo file holds: tensor, sequence, map or optional), from one
    read of the file."""
    if not model_path.is_file():
        raise GateError(f"{model_path}: model file not found.")
    try:
        data = model_path.read_bytes()
    except OSError as err:
        raise GateError(f"{model_path}: cannot read the model ({err.strerror}).") from err
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)  # what onnx.load(path, load_external_data=False) does
    except Exception as err:  # protobuf DecodeError and friends
        raise GateError(f"{model_path}: not an ONNX model ({type(err).__name__}: {err}).") from err
    _check_external_data(model_path, model)
    initializers = {init.name for init in model.graph.initializer}
    inputs = [i.name for i in model.graph.input if i.name not in initializers]
    outputs = [o.name for o in model.graph.output]
    if not outputs:
        raise GateError(f"{model_path}: the model has no graph outputs.")
    types = {value.name: value.type for value in (*model.graph.input, *model.graph.output)}
    return inputs, outputs, hashlib.sha256(data).hexdigest(), types


def _check_external_data(model_path: Path, model) -> None:
    """Every external-data file the model names, dense or sparse, must exist beside it and stay
    inside its folder (``gate.data.external.check_external_data``)."""
    from gate.data.external import check_external_data

    check_external_data(model_path, model)


def model_input_metadata(model_path: Path) -> TensorMetadata:
    """The graph inputs of an ONNX model (initializers excluded): name -> (numpy dtype, shape), a
    dynamic dim being its ``dim_param`` string (or None)."""
    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    metadata = TensorMetadata()
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type) if tensor.elem_type else None
        shape = None
        if tensor.HasField("shape"):
            shape = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tensor.shape.dim]
        metadata.add(value.name, dtype, shape)
    return metadata


def output_dtypes(types: dict, output_names) -> dict:
    """The graph outputs' element types from ``model_io``'s ``types`` (no second read of the model):
    name -> numpy dtype, or None where it is not a tensor (a sequence, map or optional) or declares
    no element type; in ``output_names`` order."""
    dtypes = {}
    for name in output_names:
        value_type = types[name]
        elem = value_type.tensor_type.elem_type if value_type.HasField("tensor_type") else 0
        dtypes[name] = onnx.helper.tensor_dtype_to_np_dtype(elem) if elem else None
    return dtypes
