"""The report-path policy: where ``check``, ``run`` and ``merge`` may write their report files, for
the CLI and the action alike (one rule, ``gate.pipeline`` applies it).

Report files are the JUnit file, the Markdown report, the results file and the partial result file.
Each may be written only inside the confinement root (``gate.paths.require_inside``; the default
JUnit and partial paths in the working directory always) and never over, or inside, a file or
folder the gate reads (the config, model, stored inputs, golden outputs, TensorRT engine, baseline,
loaded inputs/outputs of ``run``, partial files being merged): ``gate.paths.require_output``.

When the gate stops with an error before it has a result, the JUnit file and the Markdown and
results files asked for still get the error, so that no file of an earlier passing run is left to
read as green (:func:`error_paths`). The JUnit path is then the one the run would have used:
``--junit`` / input ``junit_path``, else gate.toml's ``[report] junit`` when gate.toml can be read
(even when an input or flag was wrong), else the default. Where gate.toml cannot be read (its model
and data paths are unknown), only a path with no file yet or with a report of the same kind is
replaced (``gate.paths.replaceable``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gate.config import ReportScope, report_scope
from gate.errors import GateError
from gate.paths import DEFAULT_JUNIT, confinement_root, replaceable, require_output

KINDS = ("junit", "markdown", "report")
"""The report files an error is written to (the partial result file never holds one)."""
WHAT = {
    "junit": "JUnit file",
    "markdown": "Markdown report",
    "report": "results file",
    "partial": "partial result file",
}


@dataclass(frozen=True)
class ReportPaths:
    """The checked paths of each report file (None: not asked for, or refused for an error report);
    ``refused`` gives why an error report could not go where the run would have written it."""

    junit: Path | None = None
    markdown: Path | None = None
    report: Path | None = None
    partial: Path | None = None
    refused: tuple = ()  # (kind, reason)

    def get(self, kind: str) -> Path | None:
        return getattr(self, kind)


def scope_of(request) -> ReportScope:
    """The confinement root and what the gate reads, for ``request`` (a ``gate.pipeline.Request``):
    gate.toml's (``check``) as far as it can be read, plus the baseline and the files named by the
    command's own flags."""
    if request.command == "check" and request.config is not None:
        scope = report_scope(request.config, {**request.overrides, "root": request.root}, request.sources)
    else:  # run and merge read no gate.toml; a check without one knows nothing of its files
        scope = ReportScope(root=confinement_root(None, request.root), known=request.command != "check")
    reads = [(Path(p), "the baseline") for p in request.baseline]
    reads += [(Path(p), "the partial result files being merged") for p in request.partials]
    if request.run is not None:
        run = request.run
        reads += [(Path(run.model), "the model")]
        reads += [
            (Path(p), what)
            for p, what in ((run.load_inputs, "the loaded inputs"), (run.load_outputs, "the loaded golden outputs"))
            if p
        ]
    return ReportScope(scope.root, scope.protected + tuple(reads), scope.known, scope.junit, scope.junit_error)


def _junit(request, scope: ReportScope) -> Path:
    """``check``: the JUnit path gate.toml's loading checked; ``run``/``merge``: the flag's, else the default.

    Raises:
        GateError: the path leads outside the root or over what the gate reads.
    """
    if request.command == "check":
        if scope.junit_error is not None:
            raise scope.junit_error
        if scope.junit is not None:
            return scope.junit
    if request.junit is not None:
        return require_output(request.junit, scope.root, request.names["junit"], scope.protected, default=DEFAULT_JUNIT)
    return require_output(Path(DEFAULT_JUNIT), scope.root, "the default JUnit path", default=DEFAULT_JUNIT)


def report_paths(request, scope: ReportScope) -> ReportPaths:
    """The report paths of a run that goes ahead (every one checked).

    Raises:
        GateError: a path outside the root or over what the gate reads, naming the flag or input.
    """
    paths = {"junit": _junit(request, scope)}
    for kind in ("markdown", "report", "partial"):
        value = getattr(request, kind)
        default = request.defaults.get(kind)
        paths[kind] = (
            require_output(value, scope.root, request.names[kind], scope.protected, default) if value else None
        )
    return ReportPaths(**paths)


def error_paths(request, scope: ReportScope) -> ReportPaths:
    """Where an error that stopped the run before its report paths were checked goes: each path the
    run would have used that passes the checks (see the module docstring)."""
    paths, refused = {}, []
    for kind in KINDS:
        try:
            path = _junit(request, scope) if kind == "junit" else None
            if kind != "junit" and getattr(request, kind):
                value, default = getattr(request, kind), request.defaults.get(kind)
                path = require_output(value, scope.root, request.names[kind], scope.protected, default)
        except GateError as err:
            path = None
            if kind == "junit" and request.junit is None and request.error_junit_fallback:
                path = Path(DEFAULT_JUNIT)  # gate.toml's path was refused: the default one gets the error
            else:
                refused.append((kind, str(err)))
        if path is not None and not scope.known and not replaceable(path, kind):
            refused.append((kind, f"{path} is not a {WHAT[kind]}; not overwriting it"))
            path = None
        paths[kind] = path
    return ReportPaths(**paths, refused=tuple(refused))


def write(kind: str, path, result, commit: str | None = None, key: str | None = None, environ=None) -> Path:
    """Writes ``result`` as the report file ``kind`` (a key of :data:`WHAT`) at ``path``, parent folders
    created; returns the path. ``environ`` (default ``os.environ``) gives the JUnit file's
    ``GITHUB_WORKSPACE``.

    Raises:
        GateError: the file cannot be written (one line naming it).
    """
    from gate.report import render_markdown, write_junit
    from gate.results_file import write_report

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "junit":
            write_junit(result, path, environ)
        elif kind == "markdown":
            path.write_text(render_markdown(result), "utf-8")
        elif kind == "report":
            write_report(result, path, commit, key)
        else:
            from gate.partial_file import write_partial

            write_partial(result.run, path)
    except OSError as err:
        raise GateError(f"{path}: cannot write the {WHAT[kind]} ({err.strerror or err}).") from err
    return path
