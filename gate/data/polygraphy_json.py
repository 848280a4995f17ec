"""The third stored layout: Polygraphy's JSON, as ``polygraphy run`` writes it.

- Golden outputs: ``polygraphy run model.onnx --onnxrt --save-outputs golden.json`` (one RunResults
  file) or ``--save-outputs golden`` (a directory of ``0000000000.json``..., one single-iteration
  RunResults each).
- Inputs: ``--save-inputs inputs.json`` (one file holding a JSON list of feed_dicts) or
  ``--save-inputs inputs`` (a directory, one feed_dict per file).

The format is ``gate.data.polygraphy_codec`` (Polygraphy 0.53.6, ``shared/spec/polygraphy-0.53.6.md``
sections 1.5, 4.2 and 4.3), decoded into its plain records (``SavedRun``, ``SavedIteration``), not
the comparator's. A single JSON file has no random access, so it is parsed whole when opened and its
arrays stay in memory; a directory is read one file per iteration, on demand, so memory stays at one
iteration. Saved outputs name their runner (``onnxrt-runner-N0-...``): a golden
set must hold exactly one runner, or the runner to take must be named.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path

from gate.data.polygraphy_codec import (
    SavedIteration,
    SavedRun,
    check_inputs,
    list_iteration_files,
    load_json,
    load_run,
    save_json,
)
from gate.errors import GateError
from gate.paths import require_inside

POLYGRAPHY_JSON = "polygraphy-json"


def is_polygraphy_json(path) -> bool:
    """True for a ``.json`` file, or a directory holding ``*.json`` files."""
    path = Path(path)
    if path.is_dir():
        return bool(list_iteration_files(path))
    return path.suffix.lower() == ".json"


class SeveralRunners(GateError):
    """Golden outputs saved from several runners and no runner picked. ``runners``: their names in
    file order. The front end that opened the set words how to pick one (``golden_runner`` in
    gate.toml, ``--golden-runner``): ``str(err)`` says only what the file holds."""

    def __init__(self, message: str, runners: list[str]):
        super().__init__(message)
        self.runners = runners

    def picked_by(self, how: str) -> GateError:
        """The one-line error with the front end's way to pick a runner, e.g. ``--golden-runner trt``."""
        return GateError(f"{self}; say which one is the golden: {how}.")


class PolygraphyJsonSet:
    """Stored inputs or golden outputs in Polygraphy's JSON: a sequence of iterations, each an
    ``OrderedDict[name, numpy.ndarray]``, with the interface of ``gate.data.TensorSet``.

    Args:
        path: a ``.json`` file, or a directory of per-iteration ``*.json`` files (read in
            ``sorted(glob("*.json"))`` order, as Polygraphy reads them).
        kind: ``"input"`` (feed_dicts) or ``"output"`` (a RunResults).
        names: the model's input (output) names; unused (JSON always names its tensors), kept for the
            interface.
        runner: for golden outputs, the runner whose outputs to take; needed only when the saved
            RunResults holds several runners.

    A file is parsed whole at construction; a directory reads iteration ``i`` from its ``i``-th
    file each time ``set[i]`` is asked (nothing is cached), so each file must hold one iteration,
    as Polygraphy's per-iteration writer makes them.

    Raises:
        GateError: a file that is not Polygraphy JSON (see ``gate.data.polygraphy_codec``); inputs that
            are a RunResults or outputs that are not one; a golden RunResults with several runners
            and no ``runner`` (or a ``runner`` it does not hold); a directory file holding more than
            one iteration.
    """

    layout = POLYGRAPHY_JSON

    def __init__(self, path, kind: str, names: Sequence[str] = (), runner: str | None = None):
        self.path = Path(path)
        self.directory = self.path  # the name TensorSet uses
        self.kind = kind
        self.names = list(names)
        self.runner = runner
        self._loaded = None
        if self.path.is_dir():
            self.entries = [
                require_inside(Path(p), self.path, "a stored iteration") for p in list_iteration_files(self.path)
            ]
            if self.entries and kind == "output":
                # Fail at open time, not at the first iteration, if the runner is ambiguous.
                self.runner = self._select_runner(load_run(self.entries[0]), self.entries[0])
        elif not self.path.exists():
            raise GateError(f"{self.path}: file not found; expected Polygraphy JSON {self._what()}.")
        else:
            self.entries = []
            self._loaded = self._read_file(self.path)

    def _what(self) -> str:
        return "inputs (--save-inputs)" if self.kind == "input" else "golden outputs (--save-outputs)"

    def __len__(self) -> int:
        return len(self._loaded) if self._loaded is not None else len(self.entries)

    def __iter__(self) -> Iterator[OrderedDict]:
        for index in range(len(self)):
            yield self[index]

    def location(self, index: int) -> Path:
        """The file that holds iteration ``index``."""
        return self.path if self._loaded is not None else self.entries[index]

    def __getitem__(self, index: int) -> OrderedDict:
        if index < 0 or index >= len(self):
            raise IndexError(index)
        if self._loaded is not None:
            return self._loaded[index]
        file = self.entries[index]
        iterations = self._read_file(file)
        if len(iterations) != 1:
            raise GateError(
                f"{file}: holds {len(iterations)} iterations; each file of a directory must hold one (as "
                "'polygraphy run --save-inputs/--save-outputs <directory>' writes them), or pass the file itself."
            )
        return iterations[0]

    def _read_file(self, file: Path) -> list[OrderedDict]:
        if self.kind == "input":
            obj = load_json(file)
            feed_dicts = obj if isinstance(obj, list) else [obj]
            for index, feed_dict in enumerate(feed_dicts):
                check_inputs(feed_dict, file, index)
            return [OrderedDict(feed_dict) for feed_dict in feed_dicts]
        run = load_run(file)
        name = self._select_runner(run, file)
        # The first runner of that name, as RunResults[name] gives it.
        iterations = next(iterations for runner, iterations in run.lst if runner == name)
        return [OrderedDict(it) for it in iterations]

    def _select_runner(self, run: SavedRun, file) -> str:
        names = [name for name, _ in run.lst]
        if self.runner is not None:
            if self.runner not in names:
                raise GateError(
                    f"{file}: holds no results of runner '{self.runner}' (golden_runner); it holds {names}."
                )
            return self.runner
        if not names:
            raise GateError(f"{file}: the saved RunResults holds no runners; expected the golden runner's outputs.")
        if len(names) > 1:
            raise SeveralRunners(f"{file}: the saved RunResults holds several runners {names}", names)
        return names[0]


def open_polygraphy_json(path, kind: str, names: Sequence[str] = (), runner: str | None = None) -> PolygraphyJsonSet:
    """Opens Polygraphy JSON inputs or golden outputs; see ``PolygraphyJsonSet``."""
    return PolygraphyJsonSet(os.fspath(path), kind, names, runner)


def write_json_iteration(directory, kind: str, index: int, tensors, runner: str = "onnxrt") -> Path:
    """Writes iteration ``index`` as ``<directory>/<index:010d>.json``, as ``polygraphy run
    --save-outputs DIR`` (a single-iteration RunResults of ``runner``, for ``kind="output"``) or
    ``--save-inputs DIR`` (a feed_dict) does; returns the file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{index:010d}.json"  # gate.comparator.writer.iteration_file_name
    tensors = OrderedDict(tensors)
    obj = SavedRun([(runner, [SavedIteration(tensors, runner_name=runner)])]) if kind == "output" else tensors
    save_json(obj, path)
    return path
