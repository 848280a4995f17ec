"""Polygraphy's JSON object format, encoded and decoded without pickle and without the comparator.

The format is Polygraphy 0.53.6 ``polygraphy/json/serde.py`` with the encoders registered in
``polygraphy/comparator/struct.py`` (``shared/spec/polygraphy-0.53.6.md`` sections 4.2 and 4.3):
Python ``json`` with an indent of 4 and bare ``NaN``/``Infinity`` tokens; a custom object is a
dict whose last key is ``"polygraphy_class": "<TypeName>"``:

- ``numpy.ndarray`` -> ``{"array": base64(<complete .npy stream, np.save(allow_pickle=False)>),
  "polygraphy_class": "ndarray"}``;
- ``LazyArray`` (Polygraphy's wrapper of each output array) -> ``{"values": <ndarray>,
  "polygraphy_class": "LazyArray"}`` (``"LazyNumpyArray"`` is read too);
- ``IterationResult`` -> ``{"outputs": {name: <LazyArray>}, "runtime": float|null, "runner_name":
  str, "polygraphy_class": "IterationResult"}``;
- ``RunResults`` -> ``{"lst": [[runner_name, [<IterationResult>, ...]], ...], "polygraphy_class":
  "RunResults"}``;
- inputs: a plain JSON list of feed_dicts ``{name: <ndarray>}`` (one file), or one feed_dict per
  file (a directory of ``<index:010d>.json``); the feed_dict itself carries no class tag.

This module is the codec shared by the stored-data reader (``gate.data.polygraphy_json``) and the
comparator (``gate.comparator.serde``, which adds the accuracy result types). What a decoded
IterationResult and RunResults become is a ``Codec``'s choice: here ``SavedIteration`` and
``SavedRun``, plain records of what the file holds; the comparator's ``IterationResult`` and
``RunResults`` there. Reading accepts the old form too, in which a dict holds the key
``"__polygraphy_encoded_<Type>"`` with the value ``"polygraphy_serialized_json_type"``, and array
payloads stored as latin-1 text or as an ``.npz`` archive (its first array), as Polygraphy does.
Nothing is ever unpickled: ``torch.Tensor`` payloads (a ``torch.save`` pickle) and ``.npy`` payloads
of object arrays are refused with a GateError naming the file and the tensor.
"""

from __future__ import annotations

import base64
import binascii
import glob
import io
import json
import os
from collections import OrderedDict
from collections.abc import Callable, Mapping
from functools import partial
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from gate.errors import GateError
from gate.limits import JSON_DEPTH, parse_nested
from gate.paths import read_regular
from gate.strict_json import parse_json
from gate.structured import describe, is_structured

TYPE_MARKER = "polygraphy_class"
LEGACY_TYPE_MARKER = "polygraphy_serialized_json_type"
LEGACY_PREFIX = "__polygraphy_encoded_"
INDENT = 4  # polygraphy.constants.TAB

KNOWN_TYPES = ("ndarray", "LazyArray", "LazyNumpyArray", "IterationResult", "RunResults")


class SavedIteration(OrderedDict):
    """A decoded ``IterationResult``: its outputs (``name -> numpy.ndarray``, in file order), with the
    ``runtime`` (seconds or None) and ``runner_name`` the file holds."""

    def __init__(self, outputs=None, runtime=None, runner_name=None):
        super().__init__(outputs or {})
        self.runtime = runtime
        self.runner_name = runner_name


class SavedRun:
    """A decoded ``RunResults``: ``lst``, its ``(runner_name, [SavedIteration, ...])`` pairs in file
    order (a runner name may repeat, as in Polygraphy)."""

    def __init__(self, lst=None):
        self.lst = list(lst) if lst is not None else []


class Codec(NamedTuple):
    """The Python side of the format: the classes a decoded IterationResult and RunResults become
    (built as ``iteration(outputs, runtime, runner_name)`` and ``run(pairs)``; objects of these
    classes are encoded as those types: ``iteration`` a mapping with ``runtime`` and
    ``runner_name``, ``run`` with ``lst``), and extra types: ``encoders`` (type -> encode(obj) ->
    dict of fields without the class tag, or a value to encode instead) and ``decoders`` (class
    name -> decode(decoded fields) -> object)."""

    iteration: type = SavedIteration
    run: type = SavedRun
    encoders: Mapping[type, Callable] = MappingProxyType({})
    decoders: Mapping[str, Callable] = MappingProxyType({})


PLAIN = Codec()


# --------------------------------------------------------------------------------------- encoding


class _Encoder(json.JSONEncoder):
    """Encodes arrays as they are reached, so a file is written one array at a time."""

    def default(self, o):
        if isinstance(o, np.ndarray):
            return _encode_array(o)
        if isinstance(o, np.generic):
            return _encode_array(np.asarray(o))
        return super().default(o)


def raw_bytes_dtype(dtype) -> bool:
    """Whether ``np.save`` writes ``dtype`` as raw bytes that read back as another type: ml_dtypes'
    bfloat16, float8 and int4 (``|V2``, ``|V1``; float8_e5m2 even as the invalid ``<f1``)."""
    return dtype.kind == "V" or dtype.type.__module__.startswith("ml_dtypes")


def _encode_array(array: np.ndarray) -> dict:
    if raw_bytes_dtype(array.dtype):
        raise GateError(
            f"Cannot save an array of dtype {array.dtype}: Polygraphy's JSON holds plain .npy payloads only, and "
            ".npy keeps it as raw bytes (Polygraphy writes such values as torch tensors)."
        )
    buffer = io.BytesIO()
    try:
        np.save(buffer, array, allow_pickle=False)
    except ValueError as err:
        raise GateError(
            f"Cannot save an array of dtype {array.dtype}: Polygraphy's JSON holds plain .npy payloads only ({err})."
        ) from err
    return {"array": base64.b64encode(buffer.getvalue()).decode(), TYPE_MARKER: "ndarray"}


def _lazy_array(value, name: str = "") -> dict:
    if is_structured(value):  # what Polygraphy itself cannot hold (deviation D18)
        raise GateError(
            f"output '{name}' is {describe(value)}: Polygraphy's JSON holds tensors only; store such outputs in the "
            "model-zoo or npz layout ('accuracy-gate record')."
        )
    return {"values": value if isinstance(value, np.ndarray) else np.asarray(value), TYPE_MARKER: "LazyArray"}


def _encodable(obj, codec: Codec):
    """Turns objects into the dicts and lists Polygraphy writes (arrays are left for
    ``_Encoder.default``). Key order matters for byte compatibility: the class tag comes last."""
    if isinstance(obj, codec.run):
        lst = [[name, [_encodable(it, codec) for it in iterations]] for name, iterations in obj.lst]
        return {"lst": lst, TYPE_MARKER: "RunResults"}
    if isinstance(obj, codec.iteration):
        return {
            "outputs": {name: _lazy_array(value, name) for name, value in obj.items()},
            "runtime": obj.runtime,
            "runner_name": obj.runner_name,
            TYPE_MARKER: "IterationResult",
        }
    if isinstance(obj, (np.ndarray, np.generic)):
        return obj
    encode = codec.encoders.get(type(obj))
    if encode is not None:
        encoded = encode(obj)
        if not isinstance(encoded, dict):
            return _encodable(encoded, codec)
        return {**{k: _encodable(v, codec) for k, v in encoded.items()}, TYPE_MARKER: type(obj).__name__}
    if isinstance(obj, Mapping):
        return {key: _encodable(value, codec) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encodable(value, codec) for value in obj]
    return obj


def to_json(obj, codec: Codec = PLAIN) -> str:
    """Encodes ``obj`` (a ``codec.run``, a ``codec.iteration``, a feed_dict ``{name: ndarray}``, one
    of ``codec.encoders``' types, or a list of these) as Polygraphy's JSON text
    (``polygraphy.json.to_json``).

    Raises:
        GateError: an array that ``np.save(allow_pickle=False)`` refuses (object dtype).
        TypeError: a value that is neither one of these, an array, nor plain JSON.
    """
    return json.dumps(_encodable(obj, codec), cls=_Encoder, indent=INDENT)


def save_json(obj, path, codec: Codec = PLAIN) -> None:
    """Writes ``to_json(obj, codec)`` to ``path`` (parent folders are created; an existing file is
    overwritten), streaming one array at a time (``polygraphy.json.save_json``).

    Raises:
        GateError: the file cannot be written; an object-dtype array.
    """
    path = os.fspath(path)
    parent = os.path.dirname(path)
    try:
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(_encodable(obj, codec), f, cls=_Encoder, indent=INDENT)
    except OSError as err:
        raise GateError(f"{path}: cannot write ({err.strerror}).") from err


# --------------------------------------------------------------------------------------- decoding


class _Context:
    """Where in a file a value sits, for error messages, and the codec that decodes it."""

    def __init__(self, source, codec: Codec, tensor=None, runner=None):
        self.source = source
        self.codec = codec
        self.tensor = tensor
        self.runner = runner

    def with_(self, tensor=None, runner=None):
        return _Context(self.source, self.codec, tensor or self.tensor, runner or self.runner)

    def where(self) -> str:
        parts = []
        if self.runner is not None:
            parts.append(f"runner '{self.runner}'")
        if self.tensor is not None:
            parts.append(f"tensor '{self.tensor}'")
        return f"{self.source}: " + (", ".join(parts) + ": " if parts else "")


def _type_name(dct: Mapping) -> str | None:
    for key, value in dct.items():
        if isinstance(key, str) and key.startswith(LEGACY_PREFIX) and value == LEGACY_TYPE_MARKER:
            return key[len(LEGACY_PREFIX) :]
    name = dct.get(TYPE_MARKER)
    return name if name is None or isinstance(name, str) else str(name)


def _decode(node, ctx: _Context):
    if isinstance(node, list):
        return [_decode(value, ctx) for value in node]
    if not isinstance(node, dict):
        return node
    type_name = _type_name(node)
    if type_name is None:
        # A plain mapping (a feed_dict, or the outputs of an IterationResult): keys are tensor names.
        return OrderedDict((key, _decode(value, ctx.with_(tensor=key))) for key, value in node.items())
    fields = {
        k: v for k, v in node.items() if k != TYPE_MARKER and not (isinstance(k, str) and k.startswith(LEGACY_PREFIX))
    }
    codec = ctx.codec
    if type_name == "ndarray":
        return _decode_array(fields, ctx)
    if type_name in ("LazyArray", "LazyNumpyArray"):
        values = _decode(_field(fields, "values", type_name, ctx), ctx)
        if not isinstance(values, np.ndarray):
            raise GateError(f"{ctx.where()}a {type_name} holds a {type(values).__name__}, expected an ndarray.")
        return values
    if type_name == "IterationResult":
        runner = _field(fields, "runner_name", type_name, ctx)
        outputs = _decode(_field(fields, "outputs", type_name, ctx), ctx.with_(runner=runner))
        if not isinstance(outputs, Mapping):
            raise GateError(f"{ctx.where()}IterationResult outputs are a {type(outputs).__name__}, expected a map.")
        return codec.iteration(outputs, fields.get("runtime"), runner)
    if type_name == "RunResults":
        lst = _field(fields, "lst", type_name, ctx)
        pairs = []
        for entry in lst if isinstance(lst, list) else [None]:
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
                raise GateError(f"{ctx.where()}a RunResults entry is not [runner_name, [IterationResult, ...]].")
            iterations = _decode(entry[1], ctx.with_(runner=entry[0]))
            if not isinstance(iterations, list) or not all(isinstance(i, codec.iteration) for i in iterations):
                raise GateError(f"{ctx.where()}runner '{entry[0]}' does not hold a list of IterationResults.")
            pairs.append((entry[0], iterations))
        return codec.run(pairs)
    if type_name in codec.decoders:
        return codec.decoders[type_name]({k: _decode(v, ctx) for k, v in fields.items()})
    if type_name == "Tensor":
        raise GateError(
            f"{ctx.where()}a torch.Tensor payload is a pickle (torch.save), which is never loaded; "
            "save the data as numpy arrays instead."
        )
    shown = {"ndarray": "np.ndarray"}.get(type_name, type_name)
    raise GateError(
        f"{ctx.source}: Could not decode serialized type: {shown}; this reader knows "
        f"{', '.join(KNOWN_TYPES + tuple(codec.decoders))}."
    )


def _field(fields: Mapping, key: str, type_name: str, ctx: _Context):
    if key not in fields:
        raise GateError(f"{ctx.where()}a serialized {type_name} has no '{key}' field.")
    return fields[key]


def _decode_array(fields: Mapping, ctx: _Context) -> np.ndarray:
    text = _field(fields, "array", "ndarray", ctx)
    if not isinstance(text, str):
        raise GateError(f"{ctx.where()}the array payload is a {type(text).__name__}, expected base64 text.")
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        try:  # files from old Polygraphy versions hold the raw bytes as latin-1 text
            data = text.encode("latin-1")
        except UnicodeEncodeError as err:
            raise GateError(f"{ctx.where()}the array payload is neither base64 nor latin-1 text.") from err
    try:
        loaded = np.load(io.BytesIO(data), allow_pickle=False)
        if isinstance(loaded, np.ndarray):
            return loaded
        with loaded:  # an .npz archive, accepted for old files: its first array
            if not loaded.files:
                raise GateError(f"{ctx.where()}the array payload is an .npz archive that holds no arrays.")
            return loaded[loaded.files[0]]
    except ValueError as err:
        if "pickle" in str(err):
            raise GateError(
                f"{ctx.where()}the array payload needs pickle (an object array or pickled data), which is "
                "never loaded; save plain numeric arrays instead."
            ) from err
        raise GateError(f"{ctx.where()}the array payload is not a valid .npy stream ({err}).") from err
    except GateError:
        raise
    except Exception as err:  # numpy parses the .npy header with ast: SyntaxError, TokenError, zlib errors...
        raise GateError(f"{ctx.where()}the array payload is not a valid .npy stream ({type(err).__name__}).") from err


def from_json(text: str, source: str = "<string>", codec: Codec = PLAIN):
    """Decodes Polygraphy JSON text (``polygraphy.json.from_json``) into ``codec.run`` and
    ``codec.iteration`` objects, feed_dicts (``OrderedDict[str, ndarray]``), ``codec.decoders``'
    types and plain values. ``source`` names the file in error messages.

    Raises:
        GateError: text that is not JSON; an unknown ``polygraphy_class`` ("Could not decode serialized
            type"); a payload that would need pickle (names the tensor); a malformed object.
    """
    try:
        parse = partial(parse_json, source=source, what="JSON document", strict=False)  # a key twice: GateError
        raw = parse_nested(parse, text, JSON_DEPTH, source, "the JSON document")
    except json.JSONDecodeError as err:
        raise GateError(f"{source}: not a JSON file ({err}).") from err
    return _decode(raw, _Context(source, codec))


def load_json(path, codec: Codec = PLAIN):
    """Reads and decodes one Polygraphy JSON file (see ``from_json``). The whole file is parsed at
    once: JSON has no random access.

    Raises:
        GateError: the path is missing, a directory or unreadable; see ``from_json``.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        raise GateError(f"{path}: is a directory; expected a JSON file (read a directory with a streaming loader).")
    try:
        text = read_regular(path, "the JSON file").decode("utf-8")
    except FileNotFoundError as err:
        raise GateError(f"{path}: file not found.") from err
    except (OSError, UnicodeDecodeError) as err:
        raise GateError(f"{path}: cannot read ({getattr(err, 'strerror', None) or err}).") from err
    return from_json(text, source=path, codec=codec)


def load_run(path, codec: Codec = PLAIN):
    """Loads one file that holds a RunResults (``polygraphy run --save-outputs file.json``), as a
    ``codec.run``.

    Raises:
        GateError: a file that does not hold a RunResults; see ``load_json``.
    """
    run = load_json(path, codec)
    if not isinstance(run, codec.run):
        raise GateError(f"{os.fspath(path)}: holds a {_what(run, codec)}, expected inference results (a RunResults).")
    return run


def list_iteration_files(directory) -> list[str]:
    """``sorted(glob("<directory>/*.json"))``: the per-iteration files in index order (names are
    zero-padded, so lexical order is index order), as Polygraphy lists them."""
    return sorted(glob.glob(os.path.join(glob.escape(os.fspath(directory)), "*.json")))


def check_inputs(feed_dict, source, index=0, codec: Codec = PLAIN) -> None:
    """Raises GateError naming ``source`` unless ``feed_dict`` is a map of str to ndarray."""
    if isinstance(feed_dict, codec.run):
        raise GateError(
            f"{source}: holds inference results (a RunResults), expected inputs (feed_dicts of input name to array)."
        )
    if not isinstance(feed_dict, Mapping) or isinstance(feed_dict, codec.iteration):
        raise GateError(
            f"{source}: element {index} is a {_what(feed_dict, codec)}, expected a feed_dict of name to array."
        )
    for name, value in feed_dict.items():
        if not isinstance(value, np.ndarray):
            raise GateError(f"{source}: element {index}, input '{name}' is a {_what(value, codec)}, expected an array.")


def _what(obj, codec: Codec) -> str:
    if isinstance(obj, list):
        return "JSON list"
    if isinstance(obj, codec.iteration):
        return "IterationResult"
    if isinstance(obj, codec.run):
        return "RunResults"
    if isinstance(obj, (dict, OrderedDict)):
        return "JSON object"
    return type(obj).__name__
