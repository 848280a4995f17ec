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

import contextlib
import errno
import json
import os
import secrets
import stat as stat_module
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gate.config import ReportScope, report_scope
from gate.early_claim import UNFINISHED, UNFINISHED_PARTIAL, guessed_junit
from gate.errors import GateError
from gate.paths import DEFAULT_JUNIT, confinement_root, replaceable, require_output
from gate.results import ERROR, GateResult

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
        if not scope.known and request.junit is None:
            scope = _guessed_junit_scope(request.config, scope)
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


def _guessed_junit_scope(config, scope: ReportScope) -> ReportScope:
    """For gate.toml that is not valid TOML: ``scope`` with its ``[report] junit`` as a line scan finds
    it (``gate.early_claim.guess_report_junit``), where that path passes the report-path checks and
    holds no file yet or a JUnit file, so that the error replaces an earlier run's JUnit file there
    (else the error goes to the default path, as before)."""
    guess = guessed_junit(config)
    if guess is None:
        return scope
    try:
        path = require_output(Path(guess), scope.root, "'report.junit'", scope.protected, default=DEFAULT_JUNIT)
    except GateError:
        return scope
    if not replaceable(path, "junit"):
        return scope
    return ReportScope(scope.root, scope.protected, scope.known, path, scope.junit_error)


READS = {"baseline": "the baseline", "partials": "a partial result file being merged"}


def check_reads(request, scope: ReportScope) -> None:
    """The one rule for what ``run``, ``merge`` and a baseline read (gate.toml's own paths are checked
    as it loads): every path given that exists, and every file found in a folder given, resolves
    inside the confinement root (``gate.paths.require_inside``: also through symlinks), as the report paths do.

    Raises:
        GateError: a path that leads outside, naming the flag or input that gave it.
    """
    from gate.merge import partial_files
    from gate.paths import require_inside

    names = {**{"baseline": "--baseline", "partials": "merge's partial result files"}, **request.names}
    given = [(p, "baseline") for p in request.baseline] + [(p, "partials") for p in request.partials]
    for path, kind in given:
        if not os.path.lexists(path):
            continue  # its reader says that it is missing
        require_inside(Path(path), scope.root, f"{names.get(kind, kind)} ({READS[kind]})")
        if Path(path).is_dir():
            for found in partial_files([path]):
                require_inside(found, scope.root, f"{names.get(kind, kind)} ({READS[kind]})")
    if request.run is not None:
        run = request.run
        for value, what in (
            (run.model, "the model"),
            (run.load_inputs, "--load-inputs"),
            (run.load_outputs, "--load-outputs"),
        ):
            if value and os.path.lexists(value):
                require_inside(Path(value), scope.root, what)


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
    _refuse_shared_paths(request, paths)
    return ReportPaths(**paths)


def _refuse_shared_paths(request, paths: dict) -> None:
    """Two report files at one path would overwrite each other (``--junit r.xml --markdown r.xml``).

    Raises:
        GateError: one line naming both flags (or inputs) and the path.
    """
    seen: dict = {}
    for kind, path in paths.items():
        if path is None:
            continue
        real = os.path.realpath(path)
        if real in seen:
            first = seen[real]
            raise GateError(
                f"{_named(request, first)} and {_named(request, kind)} are the same file {path}: the {WHAT[kind]} "
                f"would overwrite the {WHAT[first]}; give each report its own path."
            )
        seen[real] = kind


def _named(request, kind: str) -> str:
    if getattr(request, kind, None) is not None and request.names.get(kind):
        return request.names[kind]
    return f"the {WHAT[kind]} path"


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
        if path is not None and any(
            p is not None and os.path.realpath(p) == os.path.realpath(path) for p in paths.values()
        ):
            path = None  # the same file as an earlier kind's (_refuse_shared_paths): that one gets the error
        paths[kind] = path
    return ReportPaths(**paths, refused=tuple(refused))


@dataclass
class _Folder:
    """A report file's folder, opened once without following a symlink (``fd``), with the resolved
    path and the ``(st_dev, st_ino)`` it had then."""

    path: Path
    fd: int
    identity: tuple


_claims: dict = {}  # kind -> (path, _Folder): the report files this process claimed (:func:`claim`)
_folders: dict = {}  # resolved folder -> _Folder
_model: list = []  # the model name the claims were written for
_rendered: dict = {}  # (kind, message) -> the error report's bytes, rendered at claim time


def _open_folder(path: Path) -> _Folder:
    """``path``'s folder, created where missing, opened component by component from ``/`` with
    ``O_NOFOLLOW`` on its resolved path (a component that is, or becomes, a symlink is refused)."""
    folder = Path(os.path.realpath(Path(path).parent))
    if folder in _folders:
        return _folders[folder]
    # O_PATH (Linux) needs no read permission on the folders above (a 0711 home); with O_DIRECTORY
    # and O_NOFOLLOW a symlink fails (ENOTDIR, or ELOOP without O_PATH)
    access = getattr(os, "O_PATH", os.O_RDONLY)
    flags = access | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open("/", access | os.O_DIRECTORY)
    try:
        for part in folder.parts[1:]:
            try:
                child = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(part, 0o777, dir_fd=fd)
                _inherit_owner(fd, part)
                child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError as err:
        os.close(fd)
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            raise GateError(
                f"{path}: its folder {folder} holds a symbolic link; the gate never writes through one."
            ) from err
        raise
    stat = os.fstat(fd)
    opened = _Folder(folder, fd, (stat.st_dev, stat.st_ino))
    _folders[folder] = opened
    return opened


def _inherit_owner(folder_fd: int, name: str | None = None, fd: int | None = None) -> None:
    """As root (the action's container), a folder or file the gate creates gets the owner of the folder
    it is in (the workspace's), so that no root-owned file is left behind, not even a claim that a
    killed run leaves (root-owned files break the next ``actions/checkout`` on self-hosted runners)."""
    if os.geteuid() != 0:
        return
    owner = os.fstat(folder_fd)
    with contextlib.suppress(OSError):
        if fd is not None:
            os.fchown(fd, owner.st_uid, owner.st_gid)
        else:
            os.chown(name, owner.st_uid, owner.st_gid, dir_fd=folder_fd, follow_symlinks=False)


def _still_there(folder: _Folder, path: Path, what: str) -> None:
    """Right before a rename: ``path``'s folder still resolves to the folder opened (not replaced by a
    symlink or another folder while the run went on).

    Raises:
        GateError: it was replaced, naming it.
    """
    try:
        now = os.stat(os.path.realpath(Path(path).parent))
        same = Path(os.path.realpath(Path(path).parent)) == folder.path
    except OSError:
        same = False
    if not same or (now.st_dev, now.st_ino) != folder.identity:
        raise GateError(
            f"{path}: the folder of the {what} was replaced while the gate ran (a symbolic link or another "
            "folder); not writing through it."
        )


def place(path, data: bytes, what: str) -> Path:
    """Writes ``data`` as ``path`` all at once or not at all, never through a symlink: into a temporary
    file in the same folder (opened by its descriptor, ``O_NOFOLLOW``), flushed, then renamed over
    ``path`` within that folder after checking it was not replaced (:func:`_still_there`). A symlink
    at ``path`` is refused; a killed process leaves the old file or the new one, never a part.

    Raises:
        GateError: ``path`` or its folder is or became a symlink.
        OSError: the file cannot be written (the old one is intact).
    """
    _commit(_stage(path, data, what))
    return Path(path)


def _stage(path, data: bytes, what: str) -> tuple:
    """:func:`place`'s first half: ``data`` written and flushed to a temporary file beside ``path``;
    returns what :func:`_commit` renames (``(folder, temporary, path, what)``)."""
    path = Path(path)
    claimed = _claims.get(next((k for k, (p, _) in _claims.items() if p == path), None))
    folder = claimed[1] if claimed is not None else _open_folder(path)
    name = path.name
    try:
        if stat_module.S_ISLNK(os.stat(name, dir_fd=folder.fd, follow_symlinks=False).st_mode):
            raise GateError(f"{path}: the {what} path is a symbolic link; the gate never writes through one.")
    except FileNotFoundError:
        pass
    temporary = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666, dir_fd=folder.fd)
    try:
        _inherit_owner(folder.fd, fd=fd)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        _discard((folder, temporary, path, what))
        raise
    return folder, temporary, path, what


def _discard(staged: tuple) -> None:
    folder, temporary = staged[:2]
    with contextlib.suppress(OSError):
        os.unlink(temporary, dir_fd=folder.fd)


def _commit(staged: tuple) -> None:
    """:func:`place`'s second half: the temporary file renamed over its path (the folder checked first).

    Raises:
        GateError: the folder was replaced (the temporary file is removed).
    """
    folder, temporary, path, what = staged
    try:
        _still_there(folder, path, what)
        os.replace(temporary, path.name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd)
    except BaseException:
        _discard(staged)
        raise


def render(kind: str, result, commit: str | None = None, key: str | None = None, environ=None) -> bytes:
    """The bytes of report file ``kind`` for ``result``, written by that kind's own writer into a
    private scratch folder (so that every writer's format stays its own) and read back. ``environ``
    (default ``os.environ``) gives the JUnit file's ``GITHUB_WORKSPACE``."""
    from gate.report import render_markdown, write_junit
    from gate.results_file import write_report

    if kind == "markdown":
        return render_markdown(result).encode("utf-8")
    with tempfile.TemporaryDirectory(prefix="accuracy-gate-") as scratch:
        path = Path(scratch) / f"report.{kind}"
        if kind == "junit":
            write_junit(result, path, environ)
        elif kind == "report":
            write_report(result, path, commit, key)
        else:
            from gate.partial_file import write_partial

            write_partial(result.run, path)
        return path.read_bytes()


def _unfinished_bytes(kind: str, model: str, message: str = UNFINISHED) -> bytes:
    if kind == "partial":
        return (json.dumps({**UNFINISHED_PARTIAL, "message": message}) + "\n").encode()
    return render(kind, GateResult(model=model, status=ERROR, message=message))


def claim(paths: ReportPaths, model: str, messages=()) -> None:
    """Before any model runs: each report file of ``paths`` gets a not-passed state (an error
    result, :data:`UNFINISHED`; the partial file :data:`UNFINISHED_PARTIAL`), written atomically, and
    its folder is held open so that the final file goes to the same folder (:func:`place`). So a run
    that is killed, even by SIGKILL, never leaves an earlier run's passing file behind. The error
    reports of ``messages`` (a signal's) are rendered now, for :func:`write_unfinished`.

    Raises:
        GateError: a file cannot be written (one line naming it).
    """
    _model[:] = [model]
    staged = []
    try:  # every file written first, then the renames one right after the other: an earlier run's
        for kind in (*KINDS, "partial"):  # files and the claims coexist only for the time of a few renames
            path = paths.get(kind)
            if path is None:
                continue
            try:
                _claims[kind] = (Path(path), _open_folder(Path(path)))
                for message in messages:
                    _rendered[kind, message] = _unfinished_bytes(kind, model, message)
                staged.append(_stage(path, _unfinished_bytes(kind, model), WHAT[kind]))
            except OSError as err:
                raise GateError(f"{path}: cannot write the {WHAT[kind]} ({err.strerror or err}).") from err
        while staged:
            try:
                _commit(staged[0])
            except OSError as err:
                raise GateError(f"{staged[0][2]}: cannot write the {staged[0][3]} ({err.strerror or err}).") from err
            staged.pop(0)
    finally:
        for rest in staged:
            _discard(rest)


def claimed() -> dict:
    """``kind -> path`` of the report files claimed by this process and not yet released."""
    return {kind: path for kind, (path, _) in _claims.items()}


def write_unfinished(message: str, model: str | None = None) -> list:
    """After a signal: every claimed report file gets the error ``message`` (the partial file its
    claim again, whatever was written since; bytes rendered by :func:`claim` where it was given the
    message); returns the paths written (a file that cannot be written is skipped)."""
    written = []
    model = model or (_model[0] if _model else "model")
    for kind, (path, _) in list(_claims.items()):
        with contextlib.suppress(GateError, OSError):
            data = _rendered.get((kind, message)) or _unfinished_bytes(kind, model, message)
            written.append(place(path, data, WHAT[kind]))
    return written


def release() -> None:
    """Forgets the claims and closes the folders held open."""
    _claims.clear()
    _model.clear()
    _rendered.clear()
    for folder in _folders.values():
        with contextlib.suppress(OSError):
            os.close(folder.fd)
    _folders.clear()


def write(kind: str, path, result, commit: str | None = None, key: str | None = None, environ=None) -> Path:
    """Writes ``result`` as the report file ``kind`` (a key of :data:`WHAT`) at ``path``, atomically and
    never through a symlink (:func:`place`), parent folders created; returns the path. ``environ``
    (default ``os.environ``) gives the JUnit file's ``GITHUB_WORKSPACE``.

    Raises:
        GateError: the file cannot be written (one line naming it).
    """
    path = Path(path)
    try:
        return place(path, render(kind, result, commit, key, environ), WHAT[kind])
    except OSError as err:
        raise GateError(f"{path}: cannot write the {WHAT[kind]} ({err.strerror or err}).") from err
