"""Stored non-tensor values (``gate.structured``): ONNX's protos in the model-zoo layout, and a
flattened key scheme in npz files.

Model zoo (as ONNX's backend tests store them, ``onnx/backend/test/runner``): a file holds the
proto that the model declares for that input or output (``onnx.TypeProto``): a ``TensorProto`` for
``tensor(...)``, a ``SequenceProto`` for ``seq(...)``, a ``MapProto`` for ``map(...)``, an
``OptionalProto`` for ``optional(...)``. A serialized proto does not say which message it is, so the
model's type decides, as ONNX's own test runner does; a file that parses as another message is one
line naming the file, the value and both kinds. Tensors go through ``onnx.numpy_helper.to_array`` /
``from_array``; the containers are walked here because ``numpy_helper.to_list`` refuses an empty
sequence (``elem_type`` UNDEFINED), ``to_dict`` gives string keys as bytes and drops repeated keys,
and ``from_dict`` cannot take ``str`` keys (onnx 1.23); string tensors are decoded here too, as
``to_array`` drops a string's trailing NULs. What is written here reads back with
``numpy_helper.to_list`` / ``to_optional`` to the same values.

npz (no pickles): a tensor output is stored under its name, a string tensor as a fixed-width
unicode array (read back as ``object``, ONNX's string dtype). When an iteration holds a non-tensor
value, every tensor inside it is stored under its leaf name (``gate.structured``: ``probs[0]{setosa}``)
and the member ``accuracy-gate:structure`` holds a 0-d unicode array with the JSON document
``{"version": 1, "outputs": [[name, skeleton], ...]}`` (``gate.structured.skeleton``: ``"tensor"``,
``null`` for an empty optional, a list for a sequence, ``{"keys": [...], "values": [...]}`` for a
map), in output order, from which the values are rebuilt.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from gate.errors import GateError
from gate.structured import is_structured, item_name, key_name, kind_of, leaves, skeleton

STRUCTURE_KEY = "accuracy-gate:structure"
_PROTOS = {
    "tensor_type": onnx.TensorProto,
    "sequence_type": onnx.SequenceProto,
    "map_type": onnx.MapProto,
    "optional_type": onnx.OptionalProto,
}
_ELEM = {  # SequenceProto / OptionalProto elem_type for a declared element kind
    "tensor_type": 1,
    "sequence_type": 3,
    "map_type": 4,
    "optional_type": 5,
}
_ELEM_FIELD = {1: "tensor", 3: "sequence", 4: "map", 5: "optional"}


def type_text(value_type) -> str:
    """``onnx.TypeProto`` in onnxruntime's words: ``tensor(float)``, ``seq(map(int64,tensor(float)))``."""
    if value_type is None:
        return "unknown"
    kind = value_type.WhichOneof("value")
    if kind == "tensor_type":
        return f"tensor({_dtype_text(value_type.tensor_type.elem_type)})"
    if kind == "sequence_type":
        return f"seq({type_text(value_type.sequence_type.elem_type)})"
    if kind == "map_type":
        return f"map({_dtype_text(value_type.map_type.key_type)},{type_text(value_type.map_type.value_type)})"
    if kind == "optional_type":
        return f"optional({type_text(value_type.optional_type.elem_type)})"
    return kind or "unknown"


def _dtype_text(elem_type: int) -> str:
    text = onnx.helper.tensor_dtype_to_string(elem_type)  # "TensorProto.FLOAT"
    return text.split(".")[-1].lower()


def _kind(value_type) -> str:
    kind = value_type.WhichOneof("value") if value_type is not None else None
    return kind if kind in _PROTOS else "tensor_type"


def _clean(proto) -> bool:
    """The parsed message used no field its type lacks (protobuf keeps those as unknown fields)."""
    size = proto.ByteSize()
    proto.DiscardUnknownFields()
    return proto.ByteSize() == size


def _parse(cls, data: bytes):
    proto = cls()
    proto.ParseFromString(data)
    return proto


def _other_kind(data: bytes, tried: str) -> str | None:
    """The proto message the bytes parse as without unknown fields, other than ``tried``, named as
    ONNX names it (``SequenceProto``), or None."""
    for kind, cls in _PROTOS.items():
        if kind == tried:
            continue
        try:
            proto = _parse(cls, data)
        except Exception:  # protobuf's DecodeError: not that message either
            continue
        marked = getattr(proto, "elem_type", 0) or getattr(proto, "key_type", 0) or proto.name
        if proto.ByteSize() and _clean(proto) and (kind == "tensor_type" or marked):
            return cls.__name__
    return None


def parse_value(data: bytes, path, value_type=None, what: str = "value") -> tuple[str, object]:
    """Parses one model-zoo file's bytes (read from ``path``, named in errors) as the proto
    ``value_type`` (an ``onnx.TypeProto``; None: a tensor) declares; returns ``(proto name, value)``
    with the value as ``gate.structured`` holds it.

    Raises:
        GateError: not that proto (naming the kind it holds when another parses), tensor values kept
            in external data, or values the type rules out.
    """
    kind = _kind(value_type)
    cls = _PROTOS[kind]
    declared = f"{what} is {type_text(value_type)}" if value_type is not None else f"{what} is read as a tensor"
    try:
        proto = _parse(cls, data)
    except Exception as err:  # protobuf's DecodeError
        other = _other_kind(data, kind)
        if other:
            raise GateError(f"{path}: holds an ONNX {other}, but the {declared}.") from err
        raise GateError(f"{path}: not a valid ONNX {cls.__name__} ({type(err).__name__}: {err}).") from err
    if not _clean(proto) or (kind == "tensor_type" and proto.HasField("segment")):
        other = _other_kind(data, kind)
        if other:
            raise GateError(f"{path}: holds an ONNX {other}, but the {declared}.")
        if kind != "tensor_type":
            raise GateError(f"{path}: not a valid ONNX {cls.__name__} (it holds fields that message does not have).")
    return proto.name, _value(proto, value_type, path)


_TYPED_FIELDS = ("float_data", "int32_data", "string_data", "int64_data", "double_data", "uint64_data")


def _tensor(tensor, path) -> np.ndarray:
    if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
        raise GateError(
            f"{path}: tensor '{tensor.name}' keeps its values in external data; stored tensors must hold their "
            "values (a stored file never makes the gate read another file)."
        )
    if any(dim < 0 for dim in tensor.dims):  # numpy would take a negative reshape dim as "unknown"
        raise GateError(
            f"{path}: tensor '{tensor.name}' has dims {list(tensor.dims)}; a stored tensor's dims must be non-negative."
        )
    typed = [field for field in _TYPED_FIELDS if len(getattr(tensor, field))]
    if typed and tensor.HasField("raw_data"):  # numpy_helper.to_array would read raw_data and drop the rest
        raise GateError(
            f"{path}: tensor '{tensor.name}' holds values both in raw_data and in {typed[0]}; a stored tensor keeps "
            "its values in one of them."
        )
    if tensor.data_type == onnx.TensorProto.STRING:  # numpy_helper.to_array drops a string's trailing NULs
        try:
            values = [value.decode("utf-8") for value in tensor.string_data]
            return np.array(values, dtype=object).reshape(tuple(tensor.dims))
        except (UnicodeDecodeError, ValueError) as err:
            raise GateError(
                f"{path}: string tensor '{tensor.name}' cannot be read ({type(err).__name__}: {err})."
            ) from err
    try:
        return numpy_helper.to_array(tensor)
    except Exception as err:  # protobuf's DecodeError and numpy_helper's ValueError/TypeError
        raise GateError(f"{path}: not a valid ONNX TensorProto ({type(err).__name__}: {err}).") from err


def _inner(value_type, field: str):
    if value_type is None or value_type.WhichOneof("value") is None:
        return None
    return getattr(getattr(value_type, value_type.WhichOneof("value")), field)


def _value(proto, value_type, path):
    if isinstance(proto, onnx.TensorProto):
        return _tensor(proto, path)
    if isinstance(proto, onnx.SequenceProto):
        return _items(proto, _inner(value_type, "elem_type") if _kind(value_type) == "sequence_type" else None, path)
    if isinstance(proto, onnx.MapProto):
        return _map(proto, value_type if _kind(value_type) == "map_type" else None, path)
    return _optional(proto, _inner(value_type, "elem_type") if _kind(value_type) == "optional_type" else None, path)


def _elem_values(proto, elem_type: int, path):
    field = _ELEM_FIELD.get(elem_type)
    if field is None:
        raise GateError(f"{path}: holds an element type ({elem_type}) the gate cannot compare (sparse tensors?).")
    return getattr(proto, f"{field}_values" if isinstance(proto, onnx.SequenceProto) else f"{field}_value")


def _check_elem(proto, elem_type, path):
    """The proto's element kind must be the declared one (an empty container may leave it UNDEFINED)."""
    if elem_type is None or proto.elem_type == 0:
        return
    expected = _ELEM.get(_kind(elem_type))
    if proto.elem_type != expected:
        raise GateError(
            f"{path}: '{proto.name}' holds {_ELEM_FIELD.get(proto.elem_type, proto.elem_type)} elements but the "
            f"model declares {type_text(elem_type)} there."
        )


def _items(proto, elem_type, path) -> list:
    _check_elem(proto, elem_type, path)
    if proto.elem_type == 0:
        if any(len(getattr(proto, f"{f}_values")) for f in _ELEM_FIELD.values()):
            raise GateError(f"{path}: sequence '{proto.name}' holds values but no element type.")
        return []
    return [_value(item, elem_type, path) for item in _elem_values(proto, proto.elem_type, path)]


def _map(proto, value_type, path) -> dict:
    if proto.key_type == onnx.TensorProto.STRING:
        try:
            keys = [key.decode("utf-8") for key in proto.string_keys]
        except UnicodeDecodeError as err:
            raise GateError(f"{path}: map '{proto.name}' has a string key that is not UTF-8 ({err}).") from err
    else:
        keys = [int(key) for key in proto.keys]
    values = _items(proto.values, _inner(value_type, "value_type"), path)
    if len(keys) != len(values):
        raise GateError(f"{path}: map '{proto.name}' has {len(keys)} keys but {len(values)} values.")
    if len(set(keys)) != len(keys):
        repeated = next(k for k in keys if keys.count(k) > 1)
        raise GateError(f"{path}: map '{proto.name}' holds key {repeated!r} more than once.")
    return dict(zip(keys, values))


def _optional(proto, elem_type, path):
    if proto.elem_type == 0:
        return None
    _check_elem(proto, elem_type, path)
    return _value(_elem_values(proto, proto.elem_type, path), elem_type, path)


def value_proto(name: str, value, value_type=None):
    """The proto that stores ``value`` as ``value_type`` declares it (None: as ``value`` looks),
    named ``name``: what ``write_value_file`` writes.

    Raises:
        GateError: the value is not of the declared kind (naming the value and both kinds).
    """
    kind = _kind(value_type) if value_type is not None else _KIND_OF_VALUE[kind_of(value)]
    if kind == "optional_type":
        proto = onnx.OptionalProto(name=name)
        if value is not None:
            elem_type = _inner(value_type, "elem_type")
            elem_kind = _kind(elem_type) if elem_type is not None else _KIND_OF_VALUE[kind_of(value)]
            proto.elem_type = _ELEM[elem_kind]
            getattr(proto, f"{_ELEM_FIELD[proto.elem_type]}_value").CopyFrom(value_proto("", value, elem_type))
        return proto
    if (
        value is None
        or kind_of(value) != {"tensor_type": "tensor", "sequence_type": "sequence", "map_type": "map"}[kind]
    ):
        raise GateError(f"'{name}' is {kind_of(value)} but the model declares {type_text(value_type)}.")
    if kind == "tensor_type":
        return numpy_helper.from_array(np.asarray(value), name=name)
    if kind == "sequence_type":
        return _sequence_proto(name, list(value), _inner(value_type, "elem_type"))
    proto = onnx.MapProto(name=name)
    keys = list(value)
    declared_key = _inner(value_type, "key_type") if value_type is not None else None
    proto.key_type = declared_key or (
        onnx.TensorProto.STRING if keys and isinstance(keys[0], str) else onnx.TensorProto.INT64
    )
    if proto.key_type == onnx.TensorProto.STRING:
        proto.string_keys.extend(str(k).encode("utf-8") for k in keys)
    else:
        proto.keys.extend(int(k) for k in keys)
    proto.values.CopyFrom(_sequence_proto("", list(value.values()), _inner(value_type, "value_type")))
    return proto


_KIND_OF_VALUE = {
    "tensor": "tensor_type",
    "sequence": "sequence_type",
    "map": "map_type",
    "empty optional": "optional_type",
}


def _sequence_proto(name, items, elem_type):
    proto = onnx.SequenceProto(name=name)
    if elem_type is not None:
        proto.elem_type = _ELEM[_kind(elem_type)]
    elif items:
        proto.elem_type = _ELEM[_KIND_OF_VALUE[kind_of(items[0])]]
    else:
        proto.elem_type = onnx.SequenceProto.TENSOR  # numpy_helper.from_list's choice for an empty list
    values = getattr(proto, f"{_ELEM_FIELD[proto.elem_type]}_values")
    for item in items:
        values.append(value_proto("", item, elem_type))
    return proto


def write_value_file(path: Path, name: str, value, value_type=None) -> None:
    """Writes ``value`` as one model-zoo file (``value_proto``)."""
    Path(path).write_bytes(value_proto(name, value, value_type).SerializeToString())


# --- npz ---------------------------------------------------------------------------------------


def _npz_array(name: str, array) -> np.ndarray:
    """``array`` as npz can hold it without pickles: object arrays of ``str`` become unicode arrays."""
    array = np.asarray(array)
    if not array.dtype.hasobject:
        return array
    values = array.ravel().tolist()
    bad = next((v for v in values if not isinstance(v, str)), None)
    if bad is not None:
        raise GateError(
            f"output '{name}' holds {type(bad).__name__} objects, which an npz file cannot store without pickles; "
            "record it with --layout onnx-zoo."
        )
    if any(v.endswith("\0") for v in values):
        raise GateError(
            f"output '{name}' holds a string ending in NUL, which npz's fixed-width text drops; "
            "record it with --layout onnx-zoo."
        )
    return np.asarray(array, dtype=np.str_) if array.size else np.empty(array.shape, dtype="<U1")


def to_npz_members(tensors) -> OrderedDict:
    """The members of one npz iteration for ``tensors`` (``OrderedDict[name, value]``), see the
    module docstring.

    Raises:
        GateError: a value npz cannot hold without pickles (objects other than ``str``, a string
            ending in NUL), or two members that would share a name (an output named like another
            output's leaf, or like ``accuracy-gate:structure``).
    """
    members = OrderedDict()
    structured = any(is_structured(v) for v in tensors.values())
    for name, value in tensors.items():
        for leaf, array in leaves(name, value) if structured else [(name, value)]:
            if leaf in members or leaf == STRUCTURE_KEY:
                raise GateError(
                    f"output '{name}': its npz member '{leaf}' would clash with another; record with --layout onnx-zoo."
                )
            members[leaf] = _npz_array(leaf, array)
    if structured:
        document = {"version": 1, "outputs": [[name, skeleton(value)] for name, value in tensors.items()]}
        members[STRUCTURE_KEY] = np.array(json.dumps(document, ensure_ascii=False))
    return members


def from_npz_members(members: OrderedDict, path) -> OrderedDict:
    """The values of one npz iteration (the inverse of ``to_npz_members``); unicode arrays become
    ``object`` arrays of ``str``.

    Raises:
        GateError: a structure document that is not valid, or names members the file lacks or
            leaves members unused (naming the file).
    """
    arrays = OrderedDict((name, a.astype(object) if a.dtype.kind == "U" else a) for name, a in members.items())
    if STRUCTURE_KEY not in arrays:
        return arrays
    document = arrays.pop(STRUCTURE_KEY)
    try:
        outputs = json.loads(str(document[()]))["outputs"]
        values = OrderedDict((str(name), _rebuild(str(name), shape, arrays)) for name, shape in outputs)
    except GateError as err:
        raise GateError(f"{path}: {err}") from err
    except (ValueError, KeyError, TypeError, IndexError) as err:
        raise GateError(f"{path}: member '{STRUCTURE_KEY}' is not a valid structure document ({err}).") from err
    if arrays:
        raise GateError(f"{path}: member '{next(iter(arrays))}' belongs to no output of '{STRUCTURE_KEY}'.")
    return values


def _rebuild(name, shape, arrays):
    if shape == "tensor":
        if name not in arrays:
            raise GateError(f"'{STRUCTURE_KEY}' names '{name}', which the file lacks")
        return arrays.pop(name)
    if shape is None:
        return None
    if isinstance(shape, list):
        return [_rebuild(item_name(name, i), item, arrays) for i, item in enumerate(shape)]
    keys, values = shape["keys"], shape["values"]
    if len(keys) != len(values) or not all(isinstance(k, (int, str)) and not isinstance(k, bool) for k in keys):
        raise ValueError(f"map '{name}' needs as many int or str keys as values")
    return {key: _rebuild(key_name(name, key), item, arrays) for key, item in zip(keys, values)}
