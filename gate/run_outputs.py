"""``accuracy-gate run``'s outputs besides the verdict: what one runner ran when there is nothing to
compare with (``polygraphy run model.onnx --onnxrt``), and Polygraphy's JSON files of the inputs
and outputs (``--save-inputs`` / ``--save-outputs``, read back by ``polygraphy run --load-inputs``
/ ``--load-outputs`` and by ``accuracy-gate run``)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from gate.comparator import Comparator
from gate.comparator.struct import IterationResult, RunResults
from gate.comparator.writer import IterationWriter
from gate.errors import GateError
from gate.results import PASSED, GateResult, plural
from gate.structured import describe, is_structured


def tensor_summary(feed_or_outputs) -> str:
    """``name dtype [d,...]`` per tensor, comma separated (Polygraphy's ``{x [dtype=..., shape=...]}``)."""
    parts = []
    for name, value in feed_or_outputs.items():
        if is_structured(value):  # a sequence, map or optional (gate.structured)
            parts.append(f"{name} {describe(value)}")
            continue
        array = np.asarray(value)
        parts.append(f"{name} {array.dtype} [{','.join(str(d) for d in array.shape)}]")
    return ", ".join(parts)


def save_feed_dicts(tensor_set, path) -> None:
    """Writes every feed_dict of ``tensor_set`` (a ``gate.data`` tensor set) as ``polygraphy run
    --save-inputs`` does: one JSON list (a path with an extension) or a folder of per-iteration files.

    Raises:
        GateError: the folder is not empty; a file cannot be written (naming ``--save-inputs``).
    """
    try:
        with IterationWriter(path, description="inputs") as writer:
            for index in range(len(tensor_set)):
                writer.append(OrderedDict(tensor_set[index]))
    except GateError as err:
        raise GateError(f"--save-inputs: {err}") from err


class OutputsWriter:
    """``--save-outputs``: each iteration's RunResults of the live runners (``exclude``: the loaded
    golden set's runner name), as Polygraphy's single RunResults file or a folder of per-iteration
    files, each runner under its name in the report (``onnxrt (reference)``). ``path`` None writes nothing."""

    def __init__(self, path, exclude: str | None = None):
        self.exclude = exclude
        try:
            self.writer = IterationWriter(path, combine=RunResults.concat, description="outputs")
        except GateError as err:
            raise GateError(f"--save-outputs: {err}") from err

    def append(self, run_results: RunResults) -> None:
        kept = RunResults()
        for name, iterations in run_results.items():
            if name != self.exclude:
                kept[name] = iterations
        self.writer.append(kept)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if exc[0] is None:
            try:
                self.writer.flush()
            except GateError as err:
                raise GateError(f"--save-outputs: {err}") from err


def inference_result(cfg, runner: str, outputs, writer: OutputsWriter) -> GateResult:
    """What one runner ran, with nothing to compare it with (``polygraphy run model.onnx --onnxrt``
    runs and passes): ``outputs`` is its recorded tensor set, one iteration per stored or synthetic
    input. The result passes with no rows (``GateResult.nothing_compared``, exit 0): every report says
    ``RAN``, never passed; its JUnit file holds a skipped test case.

    Raises:
        GateError: with ``cfg.validate``, an output holding NaN or Inf (as ``--validate``).
    """
    summary = ""
    for index in range(len(outputs)):
        iteration = OrderedDict(outputs[index])
        run_results = RunResults([(runner, [IterationResult(iteration, runner_name=runner)])])
        if cfg.validate:
            for _ in Comparator.validate(iter([run_results]), check_inf=True, check_nan=True):
                pass
        writer.append(run_results)
        summary = summary or tensor_summary(iteration)
    count = len(outputs)
    return GateResult(
        model=cfg.model.name,
        status=PASSED,
        message=(
            f"{runner}, {plural(count, 'iteration')} (outputs: {summary}); nothing compared (one runner, no "
            "--load-outputs): give --load-outputs GOLDEN or a second runner (e.g. --onnxrt --onnxrt) to compare"
        ),
        iterations=count,
    )


__all__ = ["OutputsWriter", "inference_result", "save_feed_dicts", "tensor_summary"]
