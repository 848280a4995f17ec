"""Readers and writers of the two stored tensor layouts (see ``gate.data``)."""

from __future__ import annotations

import os
import re
import zipfile
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np

from gate.data.npz import read_npz
from gate.data.onnx_values import from_npz_members, parse_value, to_npz_members, write_value_file
from gate.data.polygraphy_codec import raw_bytes_dtype
from gate.errors import GateError
from gate.paths import read_regular, require_inside
from gate.structured import all_leaves

MODEL_ZOO = "onnx-zoo"
NPZ = "npz"
POLYGRAPHY_JSON = "polygraphy-json"  # read only: gate.data.polygraphy_json
LAYOUTS = (MODEL_ZOO, NPZ)

_ZOO_DIR = re.compile(r"^test_data_set_(\d+)$")
_NPZ_FILE = re.compile(r"^(\d+)\.npz$")


def zoo_position(name: str, kind: str) -> int | None:
    """``K`` of a model-zoo file name ``<kind>_<K>.pb`` (``kind``: ``input`` or ``output``), else None:
    the only names the model-zoo reader takes."""
    prefix = f"{kind}_"
    if name.startswith(prefix) and name.endswith(".pb") and name[len(prefix) : -3].isdigit():
        return int(name[len(prefix) : -3])
    return None


LAYOUTS = (
    "a folder of <N>.npz files, a folder of test_data_set_<N>/ folders (ONNX model-zoo layout), "
    "or a Polygraphy JSON file or folder"
)
"""The layouts stored inputs and golden outputs are read from, for messages (the README's list)."""

_WHAT = {"input": "stored inputs", "output": "golden outputs"}


def detect_layout(directory: Path, kind: str | None = None) -> str:
    """Returns ``"onnx-zoo"`` or ``"npz"`` for an existing directory, or ``"polygraphy-json"`` for a
    ``.json`` file or a directory of ``*.json`` files (``gate.data.polygraphy_json``). ``kind``
    (``input`` / ``output``) only words the messages.

    Raises:
        GateError: the path is missing, is a file other than a ``.json`` one, or is a directory that
            holds none of the layouts (naming the layouts accepted).
    """
    directory = Path(directory)
    what = _WHAT.get(kind, "stored inputs or golden outputs")
    if directory.suffix.lower() == ".json" and not directory.is_dir():
        if not directory.is_file():
            raise GateError(f"{directory}: file not found; expected a Polygraphy JSON file of {what}.")
        return POLYGRAPHY_JSON
    if not directory.is_dir():
        if directory.exists():
            raise GateError(f"{directory}: is a file, not a folder; {what} are read from {LAYOUTS} (.json).")
        raise GateError(f"{directory}: not found; expected {what} there: {LAYOUTS}.")
    names = os.listdir(directory)
    found = [
        layout
        for layout, present in (
            (MODEL_ZOO, any(_ZOO_DIR.match(n) for n in names)),
            (NPZ, any(_NPZ_FILE.match(n) for n in names)),
            (POLYGRAPHY_JSON, any(n.endswith(".json") for n in names)),
        )
        if present
    ]
    if len(found) > 1:
        raise GateError(f"{directory}: holds several layouts at once ({', '.join(found)}); keep one per folder.")
    if found:
        return found[0]
    raise GateError(
        f"{directory}: holds neither test_data_set_<N>/ folders (ONNX model-zoo layout), <N>.npz files, "
        "nor Polygraphy *.json files."
    )


def _entries(directory: Path) -> list[os.DirEntry]:
    with os.scandir(directory) as scan:
        return list(scan)


def _confined(directory: Path, entry: os.DirEntry, what: str) -> Path:
    """The entry's path; a symlink must resolve inside the folder (``require_inside``). Only symlinks
    need the check: any other entry lies in the folder by construction."""
    path = directory / entry.name
    if entry.is_symlink():
        require_inside(path, directory, what)
    return path


def _indexed_entries(directory: Path, pattern: re.Pattern) -> list[Path]:
    found: dict[int, Path] = {}
    for entry in _entries(directory):
        name = entry.name
        match = pattern.match(name)
        if not match:
            continue
        _confined(directory, entry, "a stored iteration")
        index = int(match.group(1))
        if index in found:
            raise GateError(f"{directory}: iteration {index} is stored twice ({found[index].name} and {name}).")
        if pattern is _ZOO_DIR and not entry.is_dir():
            raise GateError(
                f"{directory / name}: expected a folder of input_<K>.pb / output_<K>.pb files, found a file."
            )
        found[index] = directory / name
    for expected in range(len(found)):
        if expected not in found:
            raise GateError(_gap_message(directory, pattern, found, expected))
    return [found[i] for i in range(len(found))]


def _gap_message(directory: Path, pattern: re.Pattern, found: dict, missing: int) -> str:
    """``<dir>/1.npz is missing (found 0, 2, 3: iterations are numbered from 0 without gaps)``: the
    first missing iteration named as its file would be (zero-padded as the others are), and the
    indices found (the first 10 and the last, for a large set)."""
    if pattern is _ZOO_DIR:
        name = f"test_data_set_{missing}"
    else:
        digits = [_NPZ_FILE.match(path.name).group(1) for path in found.values()]
        width = len(digits[0]) if digits[0].startswith("0") and len({len(d) for d in digits}) == 1 else 1
        name = f"{missing:0{width}d}.npz"
    indices = sorted(found)
    shown = [str(i) for i in indices] if len(indices) <= 11 else [*map(str, indices[:10]), "...", str(indices[-1])]
    return f"{directory / name} is missing (found {', '.join(shown)}: iterations are numbered from 0 without gaps)."


class TensorSet:
    """A lazily read sequence of iterations, each an ``OrderedDict[name, numpy.ndarray]``.

    Args:
        directory: the stored data.
        kind: ``"input"`` or ``"output"`` (which files of the model-zoo layout, and the word used in
            error messages).
        names: the model's input (output) names, in order, used for model-zoo TensorProtos whose
            ``name`` is empty.
        types: ``name -> onnx.TypeProto`` of the model's inputs (outputs): which proto a model-zoo
            file at that position holds (``gate.data.onnx_values``); a tensor where not given.

    ``len()`` is the number of iterations; ``set[i]`` reads iteration ``i`` from disk (nothing is
    cached, so iterating keeps one iteration in memory).

    Raises:
        GateError: a missing, corrupt or unreadable file, naming it.
    """

    def __init__(self, directory, kind: str, names: Sequence[str] = (), types: Mapping | None = None):
        self.directory = Path(directory)
        self.kind = kind
        self.names = list(names)
        self.types = dict(types or {})
        self.layout = detect_layout(self.directory, kind)
        pattern = _ZOO_DIR if self.layout == MODEL_ZOO else _NPZ_FILE
        self.entries = _indexed_entries(self.directory, pattern)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[OrderedDict]:
        for index in range(len(self)):
            yield self[index]

    def location(self, index: int) -> Path:
        """The folder or file that holds iteration ``index``."""
        return self.entries[index]

    def __getitem__(self, index: int) -> OrderedDict:
        if index < 0 or index >= len(self):
            raise IndexError(index)
        if self.layout == MODEL_ZOO:
            return self._read_zoo(self.entries[index])
        return from_npz_members(_read_npz(self.entries[index]), self.entries[index])

    def _read_zoo(self, folder: Path) -> OrderedDict:
        prefix = f"{self.kind}_"
        files = {}
        for entry in _entries(folder):
            name = entry.name
            position = zoo_position(name, self.kind)
            if position is not None:
                _confined(folder, entry, f"{self.kind} file")
                if position in files:
                    raise GateError(
                        f"{folder}: {self.kind} {position} is stored twice ({files[position].name} and {name})."
                    )
                files[position] = folder / name
        expected = max(len(self.names), max(files) + 1 if files else 0)
        for position in range(expected):
            if position not in files:
                what = f" ({self.kind} '{self.names[position]}')" if position < len(self.names) else ""
                raise GateError(f"{folder / f'{prefix}{position}.pb'}: file not found{what}.")
        tensors = OrderedDict()
        for position in range(expected):
            declared = self.names[position] if position < len(self.names) else None
            what = f"model's {self.kind} '{declared}'" if declared is not None else f"{self.kind} {position}"
            name, array = read_tensor_proto(files[position], self.types.get(declared), what)
            if not name:
                if position >= len(self.names):
                    raise GateError(
                        f"{files[position]}: the tensor has no name and the model has only "
                        f"{len(self.names)} {self.kind}(s) to take it from."
                    )
                name = self.names[position]
            if name in tensors:
                raise GateError(f"{files[position]}: tensor '{name}' is already stored in another {self.kind} file.")
            tensors[name] = array
        return tensors


def read_tensor_proto(path: Path, value_type=None, what: str = "value") -> tuple[str, object]:
    """Reads one serialized ``onnx.TensorProto`` file, or the ``SequenceProto``, ``MapProto`` or
    ``OptionalProto`` that ``value_type`` (an ``onnx.TypeProto``) declares
    (``gate.data.onnx_values.parse_value``); returns ``(name, value)``.

    Raises:
        GateError: the file is missing, truncated or not a TensorProto.
    """
    try:
        data = read_regular(path, f"the {Path(path).parent.name} tensor file")
    except OSError as err:
        raise GateError(f"{path}: cannot read ({err.strerror}).") from err
    return parse_value(data, path, value_type, what)


def _npz_reason(err: Exception) -> str:
    """Why ``read_npz`` refused a file, in words (not numpy's pickle advice)."""
    text = str(err).strip() or type(err).__name__
    if isinstance(err, zipfile.BadZipFile):
        return f"a damaged or truncated zip archive: {text}"
    if isinstance(err, EOFError):
        return f"truncated: {text}"
    if isinstance(err, ValueError) and ("allow_pickle" in text or "pickled" in text):
        return "it holds pickled Python objects, an object array"
    if isinstance(err, ValueError) and "magic string" in text:
        return f"a member is not a .npy array: {text}"
    if isinstance(err, OSError) and err.strerror:
        return f"cannot read it: {err.strerror}"
    return text if isinstance(err, ValueError) else f"{type(err).__name__}: {text}"


def _read_npz(path: Path) -> OrderedDict:
    try:
        return read_npz(path)
    except GateError:
        raise
    except Exception as err:  # zipfile, zlib, numpy header and OS errors alike: a file we cannot read
        raise GateError(
            f"{path}: not a readable .npz file ({_npz_reason(err)}); expected an .npz archive of .npy arrays "
            "as numpy.savez writes it, without pickled objects."
        ) from err


def open_tensor_set(
    directory, kind: str, names: Sequence[str] = (), runner: str | None = None, types: Mapping | None = None
) -> TensorSet:
    """Opens stored inputs (``kind="input"``) or golden outputs (``kind="output"``); see
    ``TensorSet``. A ``.json`` file or a directory of ``*.json`` files is Polygraphy's JSON
    (``gate.data.polygraphy_json.PolygraphyJsonSet``, same interface); ``runner`` picks the golden
    runner there when the saved RunResults holds several (the ``golden_runner`` setting);
    ``types`` (the model's ``onnx.TypeProto`` by name) only matters to the model-zoo layout.

    Raises:
        GateError: (besides the readers' errors) ``runner`` given for another layout, where it would
            have no effect.
    """
    layout = detect_layout(directory, kind)
    if layout == POLYGRAPHY_JSON:
        from gate.data.polygraphy_json import PolygraphyJsonSet

        return PolygraphyJsonSet(directory, kind, names, runner)
    if runner is not None:
        raise GateError(
            f"{directory}: golden_runner '{runner}' picks a runner of Polygraphy JSON golden outputs, but these "
            f"are in the {layout} layout, which holds one runner's outputs; leave golden_runner out."
        )
    return TensorSet(directory, kind, names, types)


def _refuse_raw_bytes(tensors, kind: str, cannot: str) -> None:
    """A one-line GateError for the first value of ``tensors`` of a :func:`raw_bytes_dtype`, before any
    file is written; ``cannot``: "<the layout> cannot store (<why>)"."""
    for name, array in all_leaves(tensors):
        if raw_bytes_dtype(array.dtype):
            raise GateError(
                f"{kind} '{name}' is {array.dtype}, which {cannot}; record it in the ONNX model-zoo layout "
                "(--layout onnx-zoo)."
            )


def write_iteration(
    directory,
    layout: str,
    kind: str,
    index: int,
    tensors: OrderedDict,
    types: Mapping | None = None,
    file_name: str | None = None,
) -> list[Path]:
    """Writes one iteration's values (tensors, or ``gate.structured`` values) in ``layout`` and returns
    the files written.

    Model zoo: ``<dir>/test_data_set_<index>/<kind>_<K>.pb`` (K = position), the proto that
    ``types[name]`` (an ``onnx.TypeProto``; else the value's own kind) declares, named after the
    value. npz: ``<dir>/<index:06d>.npz`` (uncompressed; compressed files are read too), with the
    flattened key scheme of ``gate.data.onnx_values`` for non-tensor values and strings.
    ``file_name`` replaces the folder's or file's default name (``record`` keeps the stored inputs'
    names, ``0.npz`` stays ``0.npz``). Polygraphy's JSON: ``<dir>/<index:010d>.json``
    (``gate.data.polygraphy_json.write_json_iteration``).

    Raises:
        GateError: a value the layout cannot store (npz: objects other than strings; a value that is
            not of its declared kind), before any file of the iteration is written.
    """
    directory = Path(directory)
    types = types or {}
    if layout == POLYGRAPHY_JSON:
        from gate.data.polygraphy_json import write_json_iteration

        _refuse_raw_bytes(
            tensors,
            kind,
            "Polygraphy's JSON cannot hold (np.save writes it as raw bytes; Polygraphy keeps such values as torch "
            "tensors only)",
        )
        return [write_json_iteration(directory, kind, index, tensors)]
    if layout == MODEL_ZOO:
        folder = directory / (file_name or f"test_data_set_{index}")
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for position, (name, value) in enumerate(tensors.items()):
            path = folder / f"{kind}_{position}.pb"
            write_value_file(path, name, value, types.get(name))
            written.append(path)
        return written
    if layout == NPZ:
        _refuse_raw_bytes(tensors, kind, "the npz layout cannot store (numpy writes it as raw bytes)")
        members = to_npz_members(tensors)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / (file_name or f"{index:06d}.npz")
        # Uncompressed: model outputs are mostly float mantissas, which zlib shrinks by ~6% (ppocr_v4_rec),
        # while decompressing them costs about a quarter of the inference time on reading.
        np.savez(path, allow_pickle=False, **members)
        return [path]
    raise GateError(f"Unknown layout '{layout}'; expected one of {', '.join((*LAYOUTS, POLYGRAPHY_JSON))}.")
