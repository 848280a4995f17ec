"""The early claim: before the heavy imports (numpy, onnx, ONNX Runtime, the comparator), each report
file an earlier run left at a report path of this run is replaced by this run's "running / could not
evaluate" claim, so that a run killed during its start-up never leaves an earlier run's passing
report behind for a later CI step (a JUnit publisher with ``if: always()``) to read as green.

This module imports the standard library only (and ``gate.paths``, which does too); it runs right
after the CLI's flags are parsed (``gate.cli.main``) and first thing in the action's entry point
(``entrypoint.py``), tens of milliseconds after the interpreter starts instead of the ~200 ms the
full claim (``gate.report_files.claim``, after gate.toml is read and the report paths are checked)
comes at. That claim still follows and covers every report path; this one only ever replaces a file
that is already a report of the same kind (``gate.paths.replaceable``: never the model, the config or
any other file of the user's), at a path inside the confinement root (or the default path in the
working directory), outside every file and folder the flags, inputs or gate.toml name for reading.
It creates no file and no folder. All replacement files are written first, then renamed over the old
ones one right after the other, so that an earlier passing file and a claim coexist for the time of a
few renames. The early claim is not flushed to disk (no fsync): it guards against a killed process, not
a crash of the machine; the full claim that follows is. Any failure is silent: the full claim then
reports it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
from pathlib import Path

import tomllib

from gate.paths import DEFAULT_JUNIT, REPORT_STARTS

UNFINISHED = (
    "running: accuracy-gate has not finished (still running, or stopped before it wrote its verdict); "
    "could not evaluate"
)
"""The message of the report files a run claims before any model runs."""
UNFINISHED_PARTIAL = {"schema": "accuracy-gate-unfinished-run", "status": "running", "message": UNFINISHED}
"""The partial result file's claim: ``merge`` refuses it (not a partial result file), never counts it."""
STARTS = {**REPORT_STARTS, "partial": b'{"schema":"accuracy-gate-partial"'}
"""How each report file an earlier run may have left begins (the partial result file's too)."""
DEFAULT_REPORT = "accuracy-gate-report.json"
"""The action's ``report_path`` default (``gate.options``' table; tests/test_early_claim.py checks they agree)."""
_SAFE_NAME = re.compile(r"[A-Za-z0-9.-]{1,200}")  # written as is by every writer (no escaping)
_CONFIG_LIMIT = 1 << 20  # a larger gate.toml is left to the full claim

_JUNIT = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<testsuites name="accuracy-gate" tests="1" failures="0" errors="1" time="0.000">\n'
    '\t<testsuite errors="1" failures="0" name="accuracy-gate" tests="1" time="0.000" package="{model}">\n'
    "\t\t<properties>\n"
    '\t\t\t<property name="iterations" value="0"/>\n'
    "\t\t</properties>\n"
    '\t\t<testcase name="{model}/(no outputs)" classname="accuracy-gate" time="0.000">\n'
    '\t\t\t<error type="could-not-evaluate" message="{message}">{message}</error>\n'
    "\t\t</testcase>\n"
    "\t</testsuite>\n"
    "</testsuites>\n"
)


def claim_bytes(kind: str, model: str = "model") -> bytes:
    """The claim of report file ``kind`` (``junit``, ``markdown``, ``report``, ``partial``) for the model
    file name ``model``: the same bytes as the writers of ``gate.report`` / ``gate.results_file`` give
    the error result :data:`UNFINISHED` (tests/test_early_claim.py compares them); a name that a
    writer would escape is written as ``model``."""
    model = model if _SAFE_NAME.fullmatch(model) else "model"
    if kind == "junit":
        return _JUNIT.format(model=model, message=UNFINISHED).encode()
    if kind == "markdown":
        heading = f"## \u26a0\ufe0f Accuracy gate: {model}\n\n"
        return f"{heading}**error (could not evaluate)**: {UNFINISHED}\n".encode()
    if kind == "report":
        document = {
            "schema": "accuracy-gate-report", "version": 1, "status": "error", "passed": False,
            "regressed": False, "message": UNFINISHED, "model": model, "title": "", "iterations": 0,
            "duration_s": 0.0, "commit": None, "comment_key": None, "failed_outputs": [], "failed_total": 0,
            "rows_total": 0, "rows_truncated": False, "rows": [], "facts": {},
        }  # fmt: skip
        return (json.dumps(document, separators=(",", ":")) + "\n").encode()
    return (json.dumps(UNFINISHED_PARTIAL) + "\n").encode()


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _open_folder(real: str) -> int:
    """The folder ``real`` (a resolved path) opened component by component from ``/`` without following
    a symlink (one that appeared since it was resolved is refused: OSError), as ``gate.report_files``."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open("/", flags)
    try:
        for part in Path(real).parts[1:]:
            child = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _stage(kind: str, path: str, root: str, protected: list, model: str):
    """``(folder_fd, temporary, name)`` with the claim written to ``temporary`` beside ``path``, when
    ``path`` holds a report of ``kind`` that may be replaced (module docstring), else None."""
    real = os.path.realpath(path)
    default = os.path.abspath(path) == os.path.abspath(DEFAULT_JUNIT) and kind == "junit"
    if not (default or _inside(real, root)) or any(_inside(real, p) for p in protected):
        return None
    folder = _open_folder(os.path.dirname(real))
    try:
        name = os.path.basename(real)
        old = os.stat(name, dir_fd=folder, follow_symlinks=False)
        if not stat.S_ISREG(old.st_mode) or os.path.islink(path):
            raise OSError("not a regular file")
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
        with os.fdopen(fd, "rb") as file:
            if not file.read(64).startswith(STARTS[kind]):
                raise OSError("not a report of this kind")
        temporary = f".{name}.{os.getpid()}.early.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=folder)
        with os.fdopen(fd, "wb") as file:
            with contextlib.suppress(OSError):  # the earlier file's owner and mode (the container runs as root)
                os.fchmod(file.fileno(), stat.S_IMODE(old.st_mode))
                if os.geteuid() == 0:
                    os.fchown(file.fileno(), old.st_uid, old.st_gid)
            file.write(claim_bytes(kind, model))
        return folder, temporary, name
    except OSError:
        os.close(folder)
        return None


def claim_stale(reports, root, protected=(), model: str = "model") -> list[str]:
    """Replaces each report file of ``reports`` (``(kind, path)``) that an earlier run left by its
    claim (the module docstring says which ones); ``root``: the confinement root, ``protected``: the
    paths the run reads. Returns the paths replaced; never raises."""
    replaced, staged = [], []
    try:
        root = os.path.realpath(root)
        protected = [os.path.realpath(p) for p in protected if p]
        seen = set()
        for kind, path in reports:
            if path and os.path.abspath(path) not in seen:
                seen.add(os.path.abspath(path))
                with contextlib.suppress(Exception):
                    if (done := _stage(kind, str(path), root, protected, model)) is not None:
                        staged.append((done, str(path)))
        for (folder, temporary, name), path in staged:  # the renames, one right after the other
            with contextlib.suppress(OSError):
                os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
                replaced.append(path)
    except Exception:  # noqa: BLE001 - the full claim follows and reports any trouble
        pass
    finally:
        for (folder, temporary, _), _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
            with contextlib.suppress(OSError):
                os.close(folder)
    return replaced


def _read_text(path) -> str | None:
    """gate.toml's text (None where it is not a small regular UTF-8 file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                return None
            raw = file.read(_CONFIG_LIMIT + 1)
        if len(raw) > _CONFIG_LIMIT:
            return None
        return raw.removeprefix(b"\xef\xbb\xbf").decode("utf-8")
    except (OSError, ValueError):
        return None


def read_toml(path) -> dict:
    """gate.toml's table for the early claim ({} where it is not a small regular UTF-8 TOML file)."""
    try:
        text = _read_text(path)
        return {} if text is None else tomllib.loads(text)
    except Exception:  # noqa: BLE001 - RecursionError too: the full claim reports a bad gate.toml
        return {}


def guess_report_junit(text: str) -> str | None:
    """``[report] junit`` of a gate.toml that is not valid TOML (a syntax error elsewhere in it), found
    line by line: each line is read as TOML on its own (``tomllib``: quoted keys, escapes, inline
    tables such as ``report = { junit = "..." }`` and dotted keys such as ``"report".junit = "..."``
    alike), a table header sets the table the next lines belong to; a ``junit`` string in the
    ``[report]`` table, or a ``report.junit`` before any table, is the guess, else None. A guess: the
    early claim only replaces a JUnit file there, and the full claim only a path with no file yet or a
    JUnit file (``gate.report_files``), so a wrong guess touches nothing else."""
    table: tuple | None = ()
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            data = tomllib.loads(line)
        except Exception:  # noqa: BLE001 - a line that is not TOML alone (the error, a multi-line value)
            if stripped.startswith("["):
                table = None  # a header we cannot read: no line below it counts
            continue
        if stripped.startswith("[["):
            table = None  # an array of tables: never [report]
            continue
        if stripped.startswith("["):
            table = _header(data)
            continue
        if table == ("report",):
            value = data.get("junit")
        elif table == ():
            report = data.get("report")
            value = report.get("junit") if isinstance(report, dict) else None
        else:
            continue
        if isinstance(value, str) and value:
            return value
    return None


def _header(data: dict) -> tuple:
    """The key path of a table header read alone (``[a.b]`` -> ``{"a": {"b": {}}}`` -> ``("a", "b")``)."""
    path: list = []
    while isinstance(data, dict) and len(data) == 1:
        key, data = next(iter(data.items()))
        path.append(key)
    return tuple(path)


def guessed_junit(config) -> str | None:
    """:func:`guess_report_junit` of gate.toml ``config`` when it is not valid TOML, else None."""
    text = _read_text(config)
    if text is None:
        return None
    try:
        tomllib.loads(text)
        return None  # valid TOML: gate.config reads [report] junit itself
    except Exception:  # noqa: BLE001 - RecursionError too
        return guess_report_junit(text)


def config_names(config) -> tuple[str | None, list, str]:
    """``([report] junit, the paths gate.toml names for reading, the model's file name)`` of gate.toml
    ``config`` as far as it can be read (paths relative to its folder, as ``gate.config`` reads them);
    of a gate.toml that is not valid TOML, only its guessed ``[report] junit`` (:func:`guess_report_junit`)."""
    data = read_toml(config) if config else {}
    if config and not data:
        return guessed_junit(config), [], "model"
    base = os.path.dirname(os.path.abspath(config)) if config else "."
    report = data.get("report") if isinstance(data.get("report"), dict) else {}
    trt = data.get("trt") if isinstance(data.get("trt"), dict) else {}
    values = [data.get(key) for key in ("model", "inputs", "golden", "labels")] + [trt.get("engine")]
    reads = [os.path.join(base, value) for value in values if isinstance(value, str)]
    junit = report.get("junit") if isinstance(report.get("junit"), str) else None
    model = data.get("model") if isinstance(data.get("model"), str) else "model"
    return junit, reads, os.path.basename(model)


def _shard_partial(shard) -> str | None:
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", shard or "")
    if match is None or int(match[2]) < 2:
        return None
    return f"accuracy-gate-partial-{int(match[1])}-of-{int(match[2])}.json"


def claim_for_cli(args) -> list[str]:
    """The early claim of ``accuracy-gate check|run|merge`` (``args``: the parsed flags); ``record``
    writes no report. Returns the paths replaced; never raises."""
    with contextlib.suppress(Exception):
        command = args.command
        if command not in ("check", "run", "merge"):
            return []
        config = args.config if command == "check" else None
        junit, reads, model = config_names(config)
        if command == "run":
            model = os.path.basename(args.model)
        partial = getattr(args, "write_partial", None) or (_shard_partial(args.shard) if command == "check" else None)
        reports = [
            ("junit", args.junit or junit or DEFAULT_JUNIT),
            ("markdown", args.markdown),
            ("report", args.report),
            ("partial", partial),
        ]
        names = ("config", "model", "inputs", "golden", "labels", "trt_engine", "load_inputs", "load_outputs")
        reads += [getattr(args, name, None) for name in names]
        reads += list(getattr(args, "baseline", None) or ()) + list(getattr(args, "partials", None) or ())
        if getattr(args, "log_file", None):
            reads.append(args.log_file)
        workspace = os.environ.get("GITHUB_WORKSPACE")
        root = args.root or workspace or (os.path.dirname(os.path.abspath(config)) if config else os.getcwd())
        return claim_stale(reports, root, [r for r in reads if isinstance(r, str)], model)
    return []


def claim_for_action(environ=None) -> list[str]:
    """The early claim of the action (``mode: check`` and ``mode: merge``; ``mode: comment`` reads the
    results files and writes none): its ``junit_path`` (else gate.toml's ``[report] junit``, else the
    default), ``report_path`` and, for a shard of ``mode: check``, ``partial_path`` (all relative to
    ``GITHUB_WORKSPACE``). Returns the paths replaced; never raises."""
    with contextlib.suppress(Exception):
        from gate.github.actions import read_input as _input  # stdlib only, as this module

        environ = os.environ if environ is None else environ
        mode = _input("mode", environ) or "check"
        if mode not in ("check", "merge"):
            return []
        workspace = environ.get("GITHUB_WORKSPACE") or os.getcwd()

        def at(value):
            return os.path.join(workspace, os.path.expanduser(value)) if value else None

        config = at(_input("config", environ)) if mode == "check" else None
        junit, reads, model = config_names(config)
        model = os.path.basename(_input("model", environ) or model)
        partial = None
        if mode == "check":
            partial = at(_input("partial_path", environ) or _shard_partial(_input("shard", environ)))
        reports = [
            ("junit", at(_input("junit_path", environ)) or junit or DEFAULT_JUNIT),
            ("report", at(_input("report_path", environ) or DEFAULT_REPORT)),
            ("partial", partial),
        ]
        reads += [at(_input(name, environ)) for name in ("config", "model", "inputs", "golden", "baseline")]
        if mode == "merge":
            reads.append(at(_input("partial_path", environ)))
        return claim_stale(reports, workspace, reads, model)
    return []
