"""``IterationWriter``: saves one object per iteration to a single JSON file or to a directory of
per-iteration files, with Polygraphy 0.53.6's rules (``polygraphy/json/serde.py``
``IterationWriter`` and ``is_single_file``; ``shared/spec/polygraphy-0.53.6.md`` section 1.5)."""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Callable

import numpy as np

from gate.comparator.serde import save_json
from gate.errors import GateError

log = logging.getLogger("gate.comparator")

# Zero-padded width of per-iteration file names (``0000000000.json``), so that lexical order is
# index order (Polygraphy's ``ITERATION_FILE_INDEX_WIDTH``).
ITERATION_FILE_INDEX_WIDTH = 10


def is_single_file(path) -> bool:
    """True when ``path`` names one file: it has an extension (``os.path.splitext(path)[1] != ""``).
    Decided from the string alone, never from the disk: ``x.json`` and ``x.tar.gz`` are files;
    ``x``, ``.hidden``, ``d.v2/x`` and ``x.json/`` are directories."""
    return path is not None and os.path.splitext(os.fspath(path))[1] != ""


def iteration_file_name(index: int) -> str:
    """``0000000000.json`` for index 0."""
    return f"{index:0{ITERATION_FILE_INDEX_WIDTH}d}.json"


class IterationWriter:
    """Writes a sequence of per-iteration objects (feed_dicts or single-iteration RunResults).

    Single file (``is_single_file(path)``): ``append`` keeps each object (a deep copy with
    ``copy_on_accumulate``, for runners and loaders that reuse their buffers) and ``flush`` writes
    ``combine(objects)`` (default: the list) to ``path``, overwriting it. Directory: ``path`` must
    not exist or be an empty directory; each ``append`` writes ``<index:010d>.json`` at once, so
    memory stays constant. ``path=None`` disables writing. Use as a context manager to flush.

    Args:
        path: the file or directory, or None.
        combine: ``list -> object`` written in single-file mode (e.g. ``RunResults.concat``).
        copy_on_accumulate: deep-copy what single-file mode keeps.
        description: what is saved, for log and error messages (e.g. ``"inputs"``).

    Raises:
        GateError: (at construction) a directory path that is an existing file or a non-empty
            directory; (on write) a file that cannot be written.
    """

    def __init__(
        self,
        path,
        combine: Callable | None = None,
        copy_on_accumulate: bool = False,
        description: str = "data",
    ):
        self.path = None if path is None else os.fspath(path)
        self.single_file = is_single_file(self.path)
        self.description = description
        self._combine = combine if combine is not None else list
        self._copy = copy_on_accumulate
        self._kept = []
        self._index = 0
        if self.path is None:
            return
        if self.single_file:
            log.info("Saving %s to a single file: %s", description, self.path)
            return
        log.info("Saving %s to a directory of per-iteration files: %s", description, self.path)
        if os.path.exists(self.path):
            if not os.path.isdir(self.path):
                raise GateError(
                    f"Cannot save {description} to '{self.path}': a file already exists there, but a path without "
                    "an extension is a directory of per-iteration files; use a path with an extension for one file."
                )
            if os.listdir(self.path):
                raise GateError(
                    f"Cannot save {description} to '{self.path}': the directory is not empty; per-iteration files "
                    "need an empty or new directory, so that nothing is overwritten."
                )
        try:
            os.makedirs(self.path, exist_ok=True)
        except OSError as err:
            raise GateError(f"Cannot save {description} to '{self.path}': {err.strerror}.") from err

    @property
    def count(self) -> int:
        """How many objects were appended."""
        return self._index

    def append(self, item) -> None:
        if self.path is None:
            return
        if self.single_file:
            self._kept.append(copy.deepcopy(item) if self._copy else item)
        else:
            save_json(item, os.path.join(self.path, iteration_file_name(self._index)))
        self._index += 1

    def flush(self) -> None:
        """Writes the single file (no-op for a directory or ``path=None``)."""
        if self.single_file:
            save_json(self._combine(self._kept), self.path)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.flush()


class InputBlobWriter:
    """Writes each input array of each feed_dict as raw bytes (``numpy.ndarray.tofile``) to
    ``<path>/<index:010d>/<input name>.bin`` (Polygraphy's ``_InputBlobWriter``, behind
    ``Comparator.run(save_input_blob_path=...)``); existing files are overwritten. ``path`` None: a
    no-op.

    Raises:
        GateError: ``path`` is an existing file; an input name that would lead outside its folder.
    """

    def __init__(self, path):
        self.path = None if path is None else os.fspath(path)
        self._index = 0
        if self.path is not None:
            if os.path.exists(self.path) and not os.path.isdir(self.path):
                raise GateError(
                    f"Cannot save raw inputs to '{self.path}': a file already exists there, but this "
                    "path is a directory of per-iteration subdirectories."
                )
            os.makedirs(self.path, exist_ok=True)

    def append(self, feed_dict) -> None:
        if self.path is None:
            return
        folder = os.path.join(self.path, iteration_file_name(self._index)[: -len(".json")])
        os.makedirs(folder, exist_ok=True)
        real = os.path.realpath(folder)
        for name, array in feed_dict.items():
            dest = os.path.realpath(os.path.join(folder, f"{name}.bin"))
            if os.path.commonpath([dest, real]) != real:
                raise GateError(
                    f"Cannot save raw input tensor named '{name}': the name resolves to a path outside of '{folder}'."
                )
            np.asarray(array).tofile(dest)
        self._index += 1
