"""Readers and writers of the two stored tensor layouts (see ``gate.data``)."""

from __future__ import annotations

import os
import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from gate.data.npz import read_npz
from gate.errors import GateError
from gate.paths import read_regular, require_inside

MODEL_ZOO = "onnx-zoo"
NPZ = "npz"
POLYGRAPHY_JSON = "polygraphy-json"  # read only: gate.data.polygraphy_json
LAYOUTS = (MODEL_ZOO, NPZ)

_ZOO_DIR = re.compile(r"^test_data_set_(\d+)$")
_NPZ_FILE = re.compile(r"^(\d+)\.npz$")


def detect_layout(directory: Path) -> str:
    """Returns ``"onnx-zoo"`` or ``"npz"`` for an existing directory, or ``"polygraphy-json"`` for a
    ``.json`` file or a directory of ``*.json`` files (``gate.data.polygraphy_json``).

    Raises:
        GateError: the directory (or ``.json`` file) is missing or holds none of the layouts.
    """
    directory = Path(directory)
    if directory.suffix.lower() == ".json" and not directory.is_dir():
        if not directory.is_file():
            raise GateError(f"{directory}: file not found; expected Polygraphy JSON inputs or golden outputs.")
        return POLYGRAPHY_JSON
    if not directory.is_dir():
        raise GateError(f"{directory}: directory not found; expected stored inputs or golden outputs there.")
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
            raise GateError(
                f"{directory}: iteration {expected} is missing; iterations must be numbered 0..{len(found) - 1} "
                "without gaps."
            )
    return [found[i] for i in range(len(found))]


class TensorSet:
    """A lazily read sequence of iterations, each an ``OrderedDict[name, numpy.ndarray]``.

    Args:
        directory: the stored data.
        kind: ``"input"`` or ``"output"`` (which files of the model-zoo layout, and the word used in
            error messages).
        names: the model's input (output) names, in order, used for model-zoo TensorProtos whose
            ``name`` is empty.

    ``len()`` is the number of iterations; ``set[i]`` reads iteration ``i`` from disk (nothing is
    cached, so iterating keeps one iteration in memory).

    Raises:
        GateError: a missing, corrupt or unreadable file, naming it.
    """

    def __init__(self, directory, kind: str, names: Sequence[str] = ()):
        self.directory = Path(directory)
        self.kind = kind
        self.names = list(names)
        self.layout = detect_layout(self.directory)
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
        return _read_npz(self.entries[index])

    def _read_zoo(self, folder: Path) -> OrderedDict:
        prefix = f"{self.kind}_"
        files = {}
        for entry in _entries(folder):
            name = entry.name
            if name.startswith(prefix) and name.endswith(".pb") and name[len(prefix) : -3].isdigit():
                _confined(folder, entry, f"{self.kind} file")
                position = int(name[len(prefix) : -3])
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
            name, array = read_tensor_proto(files[position])
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


def read_tensor_proto(path: Path) -> tuple[str, np.ndarray]:
    """Reads one serialized ``onnx.TensorProto`` file; returns ``(name, array)``.

    Raises:
        GateError: the file is missing, truncated or not a TensorProto.
    """
    try:
        data = read_regular(path, f"the {Path(path).parent.name} tensor file")
    except OSError as err:
        raise GateError(f"{path}: cannot read ({err.strerror}).") from err
    tensor = onnx.TensorProto()
    try:
        tensor.ParseFromString(data)
    except Exception as err:  # protobuf's DecodeError
        raise GateError(f"{path}: not a valid ONNX TensorProto ({type(err).__name__}: {err}).") from err
    if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
        raise GateError(
            f"{path}: tensor '{tensor.name}' keeps its values in external data; stored tensors must hold their "
            "values (a stored file never makes the gate read another file)."
        )
    try:
        array = numpy_helper.to_array(tensor)
    except Exception as err:  # protobuf's DecodeError and numpy_helper's ValueError/TypeError
        raise GateError(f"{path}: not a valid ONNX TensorProto ({type(err).__name__}: {err}).") from err
    return tensor.name, array


def _read_npz(path: Path) -> OrderedDict:
    try:
        return read_npz(path)
    except GateError:
        raise
    except Exception as err:  # zipfile, zlib, numpy header and OS errors alike: a file we cannot read
        raise GateError(f"{path}: not a readable .npz file ({type(err).__name__}: {err}).") from err


def open_tensor_set(directory, kind: str, names: Sequence[str] = (), runner: str | None = None) -> TensorSet:
    """Opens stored inputs (``kind="input"``) or golden outputs (``kind="output"``); see
    ``TensorSet``. A ``.json`` file or a directory of ``*.json`` files is Polygraphy's JSON
    (``gate.data.polygraphy_json.PolygraphyJsonSet``, same interface); ``runner`` picks the golden
    runner there when the saved RunResults holds several, and is ignored by the other layouts."""
    if detect_layout(directory) == POLYGRAPHY_JSON:
        from gate.data.polygraphy_json import PolygraphyJsonSet

        return PolygraphyJsonSet(directory, kind, names, runner)
    return TensorSet(directory, kind, names)


def write_iteration(directory, layout: str, kind: str, index: int, tensors: OrderedDict[str, np.ndarray]) -> list[Path]:
    """Writes one iteration's tensors in ``layout`` and returns the files written.

    Model zoo: ``<dir>/test_data_set_<index>/<kind>_<K>.pb`` (K = position, TensorProto named after
    the tensor). npz: ``<dir>/<index:06d>.npz`` (uncompressed; compressed files are read too).
    """
    directory = Path(directory)
    if layout == MODEL_ZOO:
        folder = directory / f"test_data_set_{index}"
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for position, (name, array) in enumerate(tensors.items()):
            path = folder / f"{kind}_{position}.pb"
            path.write_bytes(numpy_helper.from_array(np.asarray(array), name=name).SerializeToString())
            written.append(path)
        return written
    if layout == NPZ:
        for name, array in tensors.items():
            if np.asarray(array).dtype.kind == "V":  # ml_dtypes (bfloat16, float8, int4): .npy keeps raw bytes
                raise GateError(
                    f"{kind} '{name}' is {np.asarray(array).dtype}, which the npz layout cannot store (numpy "
                    "writes it as raw bytes); record it in the ONNX model-zoo layout (--layout onnx-zoo)."
                )
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{index:06d}.npz"
        # Uncompressed: model outputs are mostly float mantissas, which zlib shrinks by ~6% (ppocr_v4_rec),
        # while decompressing them costs about a quarter of the inference time on reading.
        np.savez(path, **{name: np.asarray(a) for name, a in tensors.items()})
        return [path]
    raise GateError(f"Unknown layout '{layout}'; expected one of {', '.join(LAYOUTS)}.")
