"""Data loaders over stored inputs and the cache of inputs shared by the runners of a materialized run
(Polygraphy 0.53.6 ``comparator/data_loader.py``: ``StreamingDataLoader``, ``DataLoaderCache``,
``check_feed_dict``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Mapping

from gate.comparator.coerce import coerce_feed_dict
from gate.comparator.struct import RunResults
from gate.errors import GateError

log = logging.getLogger("gate.comparator")


def check_feed_dict(obj, source="data loader") -> None:
    """Checks that ``obj`` is a feed_dict (a mapping of str input names to arrays), as Polygraphy's
    ``check_feed_dict`` does before feeding a runner.

    Raises:
        GateError: Polygraphy's wording, with its hint for a ``RunResults`` (saved outputs, not inputs).
    """
    if not isinstance(obj, RunResults) and isinstance(obj, Mapping) and all(isinstance(k, str) for k in obj):
        return
    hint = (
        " Hint: This is a `RunResults` object (e.g. generated with `--save-outputs`). Use the "
        "`data merge` tool to convert it to a feed_dict-compatible format."
        if isinstance(obj, RunResults)
        else ""
    )
    raise GateError(
        f"The {source} returned an object that cannot be recognized as a feed_dict "
        f"(Dict[str, np.ndarray]): Note: The object was a {type(obj).__name__}.{hint}"
    )


class StreamingDataLoader:
    """Yields saved feed_dicts (Polygraphy's JSON, ``Comparator.run(save_inputs_path=...)`` or
    ``polygraphy run --save-inputs``) one iteration at a time; usable wherever a data loader is.

    Args:
        paths: a path or a list of paths; each a file (a JSON list: one iteration per element; else
            the whole file is one iteration) or a directory of per-iteration ``*.json`` files read one
            at a time in sorted order (constant memory).
        allow_dirs: whether a directory is accepted (default True).

    Raises:
        GateError: (while iterating) a missing or unreadable path, a directory with
            ``allow_dirs=False``, a file that does not hold feed_dicts.
    """

    def __init__(self, paths, allow_dirs=True):
        self.paths = paths
        self.allow_dirs = allow_dirs

    def __repr__(self):
        return f"StreamingDataLoader({self.paths!r}, allow_dirs={self.allow_dirs})"

    def __iter__(self):
        from gate.comparator import serde

        paths = [self.paths] if isinstance(self.paths, (str, os.PathLike)) else list(self.paths)
        if not self.allow_dirs:
            for path in paths:
                if os.path.isdir(path):
                    raise GateError(f"{path}: is a directory, and directories are not allowed here (allow_dirs=False).")
        yield from serde.load_inputs_streaming(paths)


class DataLoaderCache:
    """The feed_dicts of a data loader, read once and served to every runner of a materialized run,
    each adapted to that runner's inputs (Polygraphy's ``DataLoaderCache``).

    ``set_input_metadata(meta)`` sets the runner's inputs (also on the data loader, when it has an
    ``input_metadata`` attribute) and, the first time, reads the whole loader. ``cache[i]`` is
    iteration ``i`` coerced to those inputs (``coerce_feed_dict``: exact names, lossless casts, shapes
    checked); an input the cached array cannot serve is reloaded from ``data_loader[i]`` (this needs a
    loader with random access, e.g. ``DataLoader``). Extra cached inputs are dropped.

    Raises:
        IndexError: ``i`` past the cached iterations.
        GateError: an input that neither the cache nor the data loader can serve; the loader yields
            something that is not a feed_dict.
    """

    def __init__(self, data_loader):
        self.data_loader = data_loader
        self.cache = []
        self.input_metadata = None

    def __len__(self):
        return len(self.cache)

    def __getitem__(self, iteration):
        if iteration >= len(self.cache):
            raise IndexError()
        reloaded = {}

        def reload_input(name):
            if "feed_dict" not in reloaded:
                try:
                    reloaded["feed_dict"] = self.data_loader[iteration]
                except Exception as err:
                    raise GateError(
                        f"Input tensor: {name} | Could not use the provided input and could not reload a replacement "
                        f"from the data loader ({err})."
                    ) from err
            if name not in reloaded["feed_dict"]:
                raise GateError(f"Input tensor: {name} | Does not exist in the provided input data.")
            return reloaded["feed_dict"][name]

        return coerce_feed_dict(self.cache[iteration], self.input_metadata, fallback=reload_input)

    def set_input_metadata(self, input_metadata):
        """Sets the inputs the cached feed_dicts are adapted to; reads the loader on the first call."""
        self.input_metadata = input_metadata
        with contextlib.suppress(AttributeError):
            self.data_loader.input_metadata = input_metadata
        if not self.cache:
            self.cache = list(self.data_loader)
            if not self.cache:
                log.warning("Data loader did not yield any input data.")
            else:
                check_feed_dict(self.cache[0])
