"""Polygraphy's JSON format for saved inputs and inference results, read and written without pickle,
in the comparator's types.

The format and its codec are ``gate.data.polygraphy_codec`` (Polygraphy 0.53.6
``polygraphy/json/serde.py`` with the encoders registered in ``polygraphy/comparator/struct.py``;
``shared/spec/polygraphy-0.53.6.md`` sections 4.2 and 4.3), shared with the stored-data reader
(``gate.data.polygraphy_json``). Here a decoded ``IterationResult`` or ``RunResults`` is the
comparator's (``gate.comparator.struct``), and the accuracy result types registered in
``ENCODERS`` / ``DECODERS`` (by ``gate.comparator.serde_results``) are known both ways.

Files written here are byte-identical to Polygraphy's ``RunResults.save`` / ``save_json`` of the same
data, and Polygraphy loads them. Reading also accepts the old form, in which a dict holds the key
``"__polygraphy_encoded_<Type>"`` with the value ``"polygraphy_serialized_json_type"``, and array
payloads stored as latin-1 text or as an ``.npz`` archive (its first array), as Polygraphy does.

Unlike Polygraphy nothing is ever unpickled: ``torch.Tensor`` payloads (a ``torch.save`` pickle) and
``.npy`` payloads of object arrays are refused with a GateError naming the file and the tensor.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

from gate.comparator.struct import IterationResult, RunResults
from gate.data import polygraphy_codec as codec
from gate.data.polygraphy_codec import INDENT, LEGACY_PREFIX, LEGACY_TYPE_MARKER, TYPE_MARKER, list_iteration_files
from gate.errors import GateError

__all__ = [
    "DECODERS",
    "ENCODERS",
    "INDENT",
    "LEGACY_PREFIX",
    "LEGACY_TYPE_MARKER",
    "TYPE_MARKER",
    "check_inputs",
    "from_json",
    "list_iteration_files",
    "load_inputs_streaming",
    "load_json",
    "load_run_results",
    "load_run_results_streaming",
    "save_inputs",
    "save_json",
    "save_run_results",
    "to_json",
]

# Extra types (the accuracy results, ``gate.comparator.serde_results``): type -> encode(obj) -> dict
# (without the class tag), and class name -> decode(decoded fields) -> object.
ENCODERS: dict[type, object] = {}
DECODERS: dict[str, object] = {}

COMPARATOR = codec.Codec(IterationResult, RunResults, ENCODERS, DECODERS)
"""The comparator's side of the format: RunResults, IterationResults and the registered types."""


# --------------------------------------------------------------------------------------- encoding


def to_json(obj) -> str:
    """Encodes ``obj`` (a RunResults, an IterationResult, a feed_dict ``{name: ndarray}``, or a list
    of these) as Polygraphy's JSON text (``polygraphy.json.to_json``).

    Raises:
        GateError: an array that ``np.save(allow_pickle=False)`` refuses (object dtype).
        TypeError: a value that is neither one of these, an array, nor plain JSON.
    """
    return codec.to_json(obj, COMPARATOR)


def save_json(obj, path) -> None:
    """Writes ``to_json(obj)`` to ``path`` (parent folders are created; an existing file is
    overwritten), streaming one array at a time (``polygraphy.json.save_json``).

    Raises:
        GateError: the file cannot be written; an object-dtype array.
    """
    codec.save_json(obj, path, COMPARATOR)


def save_run_results(run: RunResults, path) -> None:
    """Saves ``run`` as one Polygraphy ``RunResults`` JSON file (``RunResults.save``), which
    ``polygraphy run --load-outputs`` and ``RunResults.load`` read. An empty RunResults is written as
    ``{"lst": [], "polygraphy_class": "RunResults"}``.

    Raises:
        GateError: ``run`` is not a RunResults; the file cannot be written.
    """
    if not isinstance(run, RunResults):
        raise GateError(f"{path}: save_run_results needs a RunResults, got {type(run).__name__}.")
    save_json(run, path)


def save_inputs(feed_dicts: Iterable[Mapping], path) -> None:
    """Saves feed_dicts (``{input name: ndarray}``) as Polygraphy writes ``--save-inputs``.

    A path with an extension (``os.path.splitext(path)[1] != ""``) is one file holding a JSON list of
    feed_dicts; any other path is a directory (absent or empty) of ``<index:010d>.json`` files, one
    feed_dict each. Both are read by ``load_inputs_streaming`` and by ``polygraphy run
    --load-inputs``.

    Raises:
        GateError: the directory is not empty or is an existing file; a file cannot be written.
    """
    from gate.comparator.writer import IterationWriter

    with IterationWriter(path, description="inputs") as writer:
        for feed_dict in feed_dicts:
            writer.append(feed_dict)


# --------------------------------------------------------------------------------------- decoding


def from_json(text: str, source: str = "<string>"):
    """Decodes Polygraphy JSON text (``polygraphy.json.from_json``) into RunResults,
    IterationResults, feed_dicts (``OrderedDict[str, ndarray]``) and plain values. ``source`` names
    the file in error messages.

    Raises:
        GateError: text that is not JSON; an unknown ``polygraphy_class`` ("Could not decode serialized
            type"); a payload that would need pickle (names the tensor); a malformed object.
    """
    return codec.from_json(text, source, COMPARATOR)


def load_json(path):
    """Reads and decodes one Polygraphy JSON file (see ``from_json``). The whole file is parsed at
    once: JSON has no random access.

    Raises:
        GateError: the path is missing, a directory or unreadable; see ``from_json``.
    """
    return codec.load_json(path, COMPARATOR)


def load_run_results(path) -> RunResults:
    """Loads one ``RunResults`` JSON file (``RunResults.load``; ``polygraphy run --save-outputs
    file.json``).

    Raises:
        GateError: a directory (Polygraphy raises IsADirectoryError; use
            ``load_run_results_streaming``); a file that does not hold a RunResults; see
            ``load_json``.
    """
    return codec.load_run(path, COMPARATOR)


def _paths(paths) -> list:
    if isinstance(paths, (str, os.PathLike)):
        return [paths]
    return list(paths)


def load_run_results_streaming(paths) -> Iterator[RunResults]:
    """Yields single-iteration ``RunResults`` (every runner of that iteration) from a file, a
    directory of per-iteration files, or a list of either (``RunResults.load_streaming``). A
    directory is read one file at a time, in ``sorted(glob("*.json"))`` order; a file holding several
    iterations is split.

    Raises:
        GateError: a path that is missing or does not hold a RunResults; see ``load_json``.
    """
    for path in _paths(paths):
        files = list_iteration_files(path) if os.path.isdir(path) else [path]
        for file in files:
            yield from load_run_results(file).split()


def load_inputs_streaming(paths) -> Iterator[OrderedDict]:
    """Yields feed_dicts (``OrderedDict[name, ndarray]``) from a file, a directory of per-iteration
    files, or a list of either (Polygraphy's ``StreamingDataLoader``). A file holding a JSON list
    gives one feed_dict per element, any other file one feed_dict; a directory gives its files in
    ``sorted(glob("*.json"))`` order, read one at a time.

    Raises:
        GateError: an element that is not a feed_dict (e.g. saved outputs: a RunResults); see
            ``load_json``.
    """
    for path in _paths(paths):
        files = list_iteration_files(path) if os.path.isdir(path) else [path]
        for file in files:
            obj = load_json(file)
            for index, feed_dict in enumerate(obj if isinstance(obj, list) else [obj]):
                check_inputs(feed_dict, file, index)
                yield feed_dict


def check_inputs(feed_dict, source, index=0) -> None:
    """Raises GateError naming ``source`` unless ``feed_dict`` is a map of str to ndarray."""
    codec.check_inputs(feed_dict, source, index, COMPARATOR)
