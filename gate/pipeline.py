"""The one pipeline behind the CLI and the action: ``execute(request) -> Outcome``.

A front end (``gate.cli``, ``gate.action``) parses its flags or inputs into a frozen :class:`Request`,
calls :func:`execute`, prints the result, writes the report files with :func:`write_reports` and
publishes. Everything between is here, once: reading gate.toml, the report-path policy
(``gate.report_files``: confinement, never over what the gate reads, where an early error goes),
the baseline, the job (``check``, ``record``, ``run`` or ``merge``), the partial result file, and
the exit code.

``execute`` never raises a ``GateError``: a user mistake becomes an ``Outcome`` whose result is an
error (exit 2) with the report paths an error may use. Any other exception is a bug and propagates.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gate import report_files
from gate.errors import GateError
from gate.report_files import ReportPaths
from gate.results import ERROR, GateResult

EXIT_ERROR = 2
COMMANDS = ("check", "record", "run", "merge")


@dataclass(frozen=True)
class RunOptions:
    """``accuracy-gate run``'s own settings (``gate.run``)."""

    model: Path
    runners: tuple = ("onnxrt",)
    load_inputs: Path | None = None
    load_outputs: Path | None = None
    iterations: int | None = None
    seed: int | None = None  # None: 1, as Polygraphy
    val_range: tuple | None = None  # the --val-range entries as given
    input_shapes: tuple | None = None  # the --input-shapes entries as given
    mark_all: bool = False
    save_inputs: Path | None = None
    # --onnx-outputs / --trt-outputs: "*" (mark all), a tuple of names or patterns, or None (the model's
    # outputs); and the patterns --onnx-exclude-outputs / --trt-exclude-outputs leave out of "*"
    onnx_outputs: object = None
    onnx_exclude_outputs: tuple = ()
    trt_outputs: object = None
    trt_exclude_outputs: tuple = ()

    @property
    def layered(self) -> bool:
        """Tensors besides the model's outputs are compared (diagnostics beside the verdict)."""
        return self.mark_all or self.onnx_outputs is not None or self.trt_outputs is not None
    save_outputs: Path | None = None


@dataclass(frozen=True)
class Request:
    """What a front end asks for, parsed and validated as far as it can be without reading files.

    ``overrides`` are ``gate.config.load_config``'s flat override keys (``check``, ``record``; for
    ``run`` the comparison settings), ``sources`` the flag that set each (for errors). ``names``
    gives the flag or input that names each report file (``junit``, ``markdown``, ``report``,
    ``partial``, ``baseline``), so that a refused path names where it came from; ``defaults`` the
    path each report file takes when none is given (the JUnit file's is ``gate.paths.DEFAULT_JUNIT``):
    a default path in the working directory is allowed wherever the confinement root is.
    """

    command: str
    config: Path | None = None
    overrides: Mapping = field(default_factory=dict)
    sources: Mapping = field(default_factory=dict)
    root: str | None = None
    junit: Path | None = None
    markdown: Path | None = None
    report: Path | None = None
    partial: Path | None = None
    defaults: Mapping = field(default_factory=dict)  # kind -> its default path in the working directory
    names: Mapping = field(default_factory=dict)
    baseline: tuple = ()
    fail_on: str = "threshold"
    margins: object = None
    shard: object = None  # gate.shards.Shard
    devices: str | None = None  # check --devices (gate.parallel)
    jobs: int | None = None  # check --jobs
    preview_precision: str | None = None  # check --preview-precision (gate.preview)
    title: str | None = None  # merge: replaces the shards' title
    partials: tuple = ()  # merge
    run: RunOptions | None = None
    force: bool = False  # record
    layout: str | None = None  # record
    error_junit_fallback: bool = False  # a refused [report] junit sends an error to the default path
    model_name: str = "model"  # names the error testcase until the model is known

    @property
    def shard_leg(self) -> bool:
        """A matrix leg that runs one of several shards: it reports its part, the merge the verdict."""
        return self.shard is not None and self.shard.count > 1


@dataclass
class Outcome:
    """What :func:`execute` did: ``result`` (None for ``record``), the checked ``paths`` of the report
    files, the ``config`` read (None where none was), and, for an error, ``error`` (the exception;
    ``early`` when it came before any result)."""

    request: Request
    result: GateResult | None
    paths: ReportPaths
    config: object = None
    error: BaseException | None = None
    early: bool = False
    partial: Path | None = None  # the partial result file written
    recorded: list = field(default_factory=list)  # record: the golden files written

    @property
    def exit_code(self) -> int:
        """0 pass, 1 accuracy regressed, 2 could not evaluate; a shard leg that was evaluated is 0 (the
        verdict over every shard is ``merge``'s)."""
        if self.result is None:
            return EXIT_ERROR if self.error is not None else 0
        if self.request.shard_leg and self.result.status != ERROR:
            return 0
        return self.result.exit_code


def failed(request: Request, message: str, error: BaseException | None = None, config=None) -> Outcome:
    """The outcome of an error before any result: an error result, and the report paths it may use."""
    name = config.model.name if config is not None and getattr(config, "model", None) else request.model_name
    result = GateResult(model=name, status=ERROR, message=message)
    paths = report_files.error_paths(request, report_files.scope_of(request))
    return Outcome(request, result, paths, config=config, error=error, early=True)


def execute(request: Request) -> Outcome:
    """Runs ``request`` (see the module docstring); a GateError becomes an error outcome. Before any
    model runs, its report files are claimed (``gate.report_files.claim``: a not-passed state)."""
    state: dict = {}
    report_files.release()
    _running[:] = [request]
    try:
        return _execute(request, state)
    except GateError as err:
        if request.command == "record":
            return Outcome(request, None, ReportPaths(), config=state.get("config"), error=err, early=True)
        return failed(request, str(err), err, state.get("config"))


def _execute(request: Request, state: dict) -> Outcome:
    if request.command == "record":
        return _record(request, state)
    scope = report_files.scope_of(request)
    config = None
    if request.command == "check":
        from gate.config import load_config

        config = load_config(request.config, {**request.overrides, "root": request.root}, request.sources)
        state["config"] = config
    paths = report_files.report_paths(request, scope)
    report_files.check_reads(request, scope)
    report_files.claim(
        paths,
        config.model.name if config is not None else request.model_name,
        [interrupted_message(s) for s in HANDLED],
    )
    baseline = _load_baseline(request)
    if request.command == "check":
        from gate.parallel import check_with  # plain, in parallel (--devices / --jobs) or a precision preview

        partial = request.partial is not None
        result = check_with(config, request.shard, partial, request.devices, request.jobs, request.preview_precision)
    elif request.command == "merge":
        result = _merge(request)
    else:
        config, result = _run(request)
        state["config"] = config
    state["result"] = result
    written = None
    if request.partial is not None:
        written = report_files.write("partial", request.partial, result)
    if baseline is not None:
        _apply_baseline(request, result, baseline)
    return Outcome(request, result, paths, config=config, partial=written)


def _record(request: Request, state: dict) -> Outcome:
    from gate.config import load_config
    from gate.job import record

    config = load_config(request.config, {**request.overrides, "root": request.root}, request.sources)
    state["config"] = config
    written = record(config, force=request.force, layout=request.layout)
    return Outcome(request, None, ReportPaths(), config=config, recorded=written)


def _merge(request: Request) -> GateResult:
    from gate.compared_run import result_of
    from gate.merge import merge_files

    run = merge_files(list(request.partials))
    if request.title:
        run.title = request.title
    return result_of(run)


def _run(request: Request):
    """``accuracy-gate run``: the comparison settings without a gate.toml, then ``gate.run.run``."""
    from gate.run import run, run_config, synthetic_settings

    options = request.run
    config = run_config(options, request.overrides)
    seed, val_range, input_shapes = synthetic_settings(options)
    result = run(
        config,
        load_inputs=options.load_inputs,
        load_outputs=options.load_outputs,
        iterations=options.iterations,
        seed=seed,
        val_range=val_range,
        input_shapes=input_shapes,
        save_inputs=options.save_inputs,
        save_outputs=options.save_outputs,
    )
    return config, result


def _baseline_error(request: Request, err: GateError) -> GateError:
    name = request.names.get("baseline")
    return GateError(f"{name}: {err}") if name else err


def _load_baseline(request: Request):
    """The baseline read before the model runs, so that a wrong one fails first (None without one)."""
    from gate.baseline import load_baseline

    if not request.baseline:
        return None
    try:
        return load_baseline(list(request.baseline))
    except GateError as err:
        raise _baseline_error(request, err) from err


def _apply_baseline(request: Request, result: GateResult, baseline) -> None:
    from gate.baseline import apply_baseline

    try:
        apply_baseline(result, baseline, request.fail_on, request.margins)
    except GateError as err:
        raise _baseline_error(request, err) from err


def write_reports(outcome: Outcome, kinds=report_files.KINDS, commit=None, key=None, environ=None) -> dict:
    """Writes ``outcome.result`` to each report file of ``kinds`` that has a checked path; returns
    ``kind -> path`` of those written (``environ``: the action's, for the JUnit file's workspace).

    Raises:
        GateError: a file cannot be written (the ones before it are written).
    """
    written = {}
    for kind in kinds:
        path = outcome.paths.get(kind)
        if path is not None:
            written[kind] = report_files.write(kind, path, outcome.result, commit, key, environ)
    return written


def layer_report(outcome: Outcome) -> str:
    """``run --mark-all`` / ``--onnx-outputs`` / ``--trt-outputs``: the marked tensors of the first and
    last runner compared on the first input, as text (diagnostics only)."""
    from gate.data import open_tensor_set
    from gate.data.onnx_model import model_io_names
    from gate.layerwise import compare_layers, render_layers
    from gate.run import synthetic_loader, synthetic_settings

    options, config = outcome.request.run, outcome.config
    if options.load_inputs:
        feed = open_tensor_set(Path(options.load_inputs).resolve(), "input", model_io_names(config.model)[0])[0]
    else:
        feed = synthetic_loader(config.model, 1, *synthetic_settings(options))[0]
    marked = {"onnxrt": (options.onnx_outputs, options.onnx_exclude_outputs),
              "trt": (options.trt_outputs, options.trt_exclude_outputs)}  # fmt: skip
    return render_layers(*compare_layers(config, feed, marked))


_running: list = []  # the request being executed
_say: list = []  # the front end's one-line error printer, while guarded
_hard_exit = os._exit  # how a signal ends the process (tests replace it)
HANDLED = (signal.SIGTERM, signal.SIGINT)


def interrupted_message(signum: int) -> str:
    return f"interrupted by {signal.Signals(signum).name}; could not evaluate"


def _on_signal(signum, frame):
    """SIGTERM / SIGINT while guarded: the error line, every claimed report file rewritten with the
    error (bytes rendered at claim time, so nothing is imported here), exit 2 at once. The process
    is ended from the handler, not by an exception: one raised into the middle of an import or an
    extension's call can abort the interpreter instead (measured: SIGABRT in protobuf's init)."""
    for handled in HANDLED:
        signal.signal(handled, signal.SIG_IGN)
    message = interrupted_message(signum)
    with contextlib.suppress(BaseException):
        if _say:
            _say[0](message)
    with contextlib.suppress(BaseException):
        report_files.write_unfinished(message)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(BaseException):
            stream.flush()
    _hard_exit(EXIT_ERROR)


def guarded(main: Callable[[], int], say: Callable[[str], None]) -> int:
    """Runs a front end's ``main`` with SIGTERM and SIGINT handled: ``say`` gets the one-line message
    (``interrupted by SIGTERM; could not evaluate``), every report file the run claimed
    (``gate.report_files.claim``) gets it as an error, and the process exits 2. Before the claim
    (reading flags and gate.toml) only the early claim (``gate.early_claim``, before this is called)
    has written; after SIGKILL at worst a claim remains."""
    main_thread = threading.current_thread() is threading.main_thread()
    previous = {s: signal.signal(s, _on_signal) for s in HANDLED} if main_thread else {}
    _say[:] = [say]
    try:
        return main()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _say.clear()
        report_files.release()
        _running.clear()


__all__ = [
    "Outcome",
    "Request",
    "RunOptions",
    "execute",
    "failed",
    "guarded",
    "layer_report",
    "write_reports",
]
