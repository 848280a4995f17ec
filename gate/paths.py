"""Path confinement: a CI gate reads other people's files, so no path from a config, a CLI flag or
a stored-data folder may lead outside the folder it belongs to (by ``..``, an absolute path or a
symlink), and no report the gate writes may land outside it or over a file the gate reads."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from gate.errors import GateError

DEFAULT_JUNIT = "accuracy-gate-junit.xml"
"""Where the JUnit file goes when no path is given: the working directory."""


def workspace_roots(environ=None) -> list[str]:
    """The folders that paths in the action's reports are shown relative to: ``GITHUB_WORKSPACE``
    (from ``environ``, default ``os.environ``) when set, then the working directory."""
    environ = os.environ if environ is None else environ
    return [root for root in (environ.get("GITHUB_WORKSPACE"), os.getcwd()) if root]


def workspace_relative(path, environ=None) -> str:
    """``path`` relative to the first of :func:`workspace_roots` it lies inside, with forward slashes
    (``.`` for the root itself); else as given. The one rule for every path the action shows or hands
    on (annotations, links, JUnit's ``file``, step outputs): a later step and the repository know the
    workspace-relative path, not the container's absolute one."""
    if not path:
        return ""
    absolute = Path(path).absolute()
    for base in workspace_roots(environ):
        try:
            return absolute.relative_to(Path(base).absolute()).as_posix()
        except ValueError:
            continue
    return os.fspath(path)


def relative_paths(text: str, roots=None) -> str:
    """``text`` (a message) with the absolute prefixes of ``roots`` (default :func:`workspace_roots`)
    removed, so that the paths in it read as :func:`workspace_relative` gives them."""
    if roots is None:
        roots = workspace_roots()
    for root in sorted({r.rstrip("/") for r in roots if r and r.rstrip("/")}, key=len, reverse=True):
        text = text.replace(root + "/", "")
    return text


def confinement_root(config_path: Path | None, explicit=None) -> Path:
    """The folder every configured path must stay inside: ``explicit`` (``--root``) if given, else
    ``GITHUB_WORKSPACE`` in GitHub Actions, else the config file's folder (without a config file,
    as for ``run`` and ``merge``: the working directory)."""
    if explicit:
        return Path(explicit).resolve()
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace:
        return Path(workspace).resolve()
    if config_path is None:
        return Path.cwd().resolve()
    return Path(config_path).resolve().parent


def real_path(path, what: str) -> Path:
    """``os.path.realpath(path)`` as a Path.

    Raises:
        GateError: ``path`` holds a NUL character (no file system takes one), naming ``what`` it is.
    """
    if "\0" in os.fsdecode(path):
        raise GateError(f"{os.fsdecode(path)!r}: {what} holds a NUL character; a path cannot hold one.")
    return Path(os.path.realpath(path))


def require_inside(path: Path, root: Path, what: str) -> Path:
    """Returns ``path`` resolved (symlinks followed) when it lies inside ``root``.

    Raises:
        GateError: it resolves outside ``root``, naming both.
    """
    resolved = real_path(path, what)
    real_root = Path(os.path.realpath(root))
    if resolved != real_root and real_root not in resolved.parents:
        via = " (through a symlink)" if Path(os.path.abspath(path)) != resolved else ""
        raise GateError(f"{path}: {what} resolves outside {real_root}{via}; paths must stay inside it.")
    return resolved


def is_default_path(path, default) -> bool:
    """Whether ``path`` is the report's ``default`` path in the working directory (and not a symlink
    there, which could lead anywhere): the gate writes there without being told, so naming it
    explicitly (``[report] junit = "accuracy-gate-junit.xml"``) is allowed wherever the config is."""
    return default is not None and os.path.abspath(path) == os.path.abspath(default) and not os.path.islink(path)


def require_output(path, root: Path, what: str, protected=(), default=None) -> Path:
    """Returns ``path`` (as given) when a report may be written there: it lies inside ``root`` (or
    is the report's ``default`` path, see :func:`is_default_path`), and it is not one of the files
    the gate reads nor inside one of its folders. ``protected`` holds ``(path, description)`` of
    each, e.g. ``(model, "the model")``; ``what`` names the flag or key that gave the path.

    A symbolic link at ``path`` itself, in a folder inside ``root`` (or at the default path), is
    removed first: the report replaces the link, nothing is ever written where it leads (that file
    is left as it is), and no earlier report stays readable through it at this run's report path
    (a stale passing JUnit or partial file behind a link read green after a refused run).

    Raises:
        GateError: it resolves outside ``root``, or would overwrite or write among what the gate reads.
    """
    drop_report_link(path, root, default)
    if not is_default_path(path, default):
        require_inside(path, root, what)
    resolved = real_path(path, what)
    for source, description in protected:
        real = real_path(source, description)
        if resolved == real:
            where = f"would overwrite {description}"
        elif real in resolved.parents:
            where = f"lies inside {description} ({real})"
        else:
            continue
        raise GateError(f"{path}: {what} {where}; reports must stay out of the files and folders the gate reads.")
    return Path(path)


def drop_report_link(path, root: Path, default=None) -> None:
    """Removes a symbolic link at ``path`` (the link only) when its folder lies inside ``root`` or
    ``path`` is the ``default`` report path in the working directory; anything else is left alone."""
    if not os.path.islink(path):
        return
    folder = Path(os.path.realpath(Path(path).parent))
    real_root = Path(os.path.realpath(root))
    at_default = default is not None and os.path.abspath(path) == os.path.abspath(default)
    if at_default or folder == real_root or real_root in folder.parents:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


REPORT_STARTS = {"junit": b"<?xml", "markdown": b"## ", "report": b'{"schema":"accuracy-gate-report"'}
"""How each report file the gate writes begins."""


def replaceable(path, kind: str) -> bool:
    """Whether an error report of ``kind`` (a key of ``REPORT_STARTS``) may go to ``path`` when its
    other checks could not run: no file there yet, or one that already holds such a report (never
    the model, the config or any other file of the user's; an unreadable one is left alone)."""
    try:
        with open(path, "rb") as file:
            return file.read(64).startswith(REPORT_STARTS[kind])
    except FileNotFoundError:
        return True
    except OSError:
        return False


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def open_regular(path, what: str = "the file"):
    """``path`` opened for reading in binary (a buffered file object), only when it is a regular
    file: a FIFO, socket, device or directory is refused without blocking (the file is opened with
    ``O_NONBLOCK``, which makes opening a FIFO return at once, then checked with ``fstat``).

    Raises:
        GateError: ``path`` is not a regular file, naming it, ``what`` it should be and what it is.
        OSError: it cannot be opened (FileNotFoundError, PermissionError, ...), as ``open`` raises it.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "a device")
            raise GateError(f"{path}: {what} is {kind}, not a regular file; expected a file.")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, what: str = "the file", limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`open_regular`); with ``limit``, at most
    ``limit + 1`` bytes are read, so a caller can tell a file over its size bound.

    Raises:
        GateError: not a regular file. OSError: it cannot be opened or read.
    """
    with open_regular(path, what) as file:
        return file.read() if limit is None else file.read(limit + 1)


def refuse_symlinks(folder, what: str) -> None:
    """Refuses a folder the gate is about to replace files in (``record``'s golden folder) when
    anything below it is a symbolic link: deleting or writing "inside" it would then delete or write
    wherever the link leads. The folder itself is checked by the config (``require_inside``).
    Walked without following links; a missing folder passes.

    Raises:
        GateError: naming the first link found and ``what`` the folder is.
    """
    for parent, dirs, files in os.walk(folder, followlinks=False):
        for name in sorted(dirs + files):
            path = os.path.join(parent, name)
            if os.path.islink(path):
                raise GateError(
                    f"{path}: {what} holds a symbolic link (to {os.readlink(path)}); the gate never deletes or "
                    "writes through one. Replace it with a real file or folder."
                )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomic(path, data: str | bytes, what: str = "report") -> Path:
    """Writes ``data`` (text as UTF-8) to ``path`` all at once or not at all: into a temporary file
    in the same folder, flushed to disk, then renamed over ``path`` (``os.replace``, atomic on POSIX
    within one file system). A failed write (a full disk, a killed process) leaves the old file as it
    was, or no file, never a truncated one; the temporary file is removed. A symbolic link at
    ``path`` (dangling or not) is refused, never written through or replaced. Parent folders are
    created; the file gets the mode a plain ``open`` would give it (0666 less the umask).

    Returns:
        ``path`` as a Path.
    Raises:
        GateError: ``path`` is a symbolic link, naming ``what`` the file is and where the link leads.
        OSError: the folder cannot be created or the file written (the old file is intact).
    """
    path = Path(path)
    if os.path.islink(path):
        raise GateError(
            f"{path}: the {what} path is a symbolic link (to {os.readlink(path)}); the gate never writes through one."
        )
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o666 & ~_umask())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return path
