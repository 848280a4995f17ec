"""GitHub Actions runner conventions: inputs, workflow commands and file commands. No HTTP.

References: GitHub docs "Workflow commands for GitHub Actions"
(https://docs.github.com/actions/reference/workflow-commands-for-github-actions), the escaping rules of
actions/toolkit (``packages/core/src/command.ts``) and the runner's ``Handler.AddInputsToEnvironment``.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from gate.errors import GateError
from gate.paths import drop_report_link, relative_paths, workspace_roots

STEP_SUMMARY_LIMIT = 1024 * 1024
"""GitHub's per-step job-summary limit in bytes; above it the upload is aborted."""
ANNOTATION_LIMIT = 10
"""The Actions UI shows at most 10 ``::error`` and 10 ``::warning`` annotations per step (GitHub
docs, "Workflow commands": annotations); later ones are dropped silently."""

_TRUNCATED_NOTE = (
    "\n> **Note:** the accuracy-gate report was truncated here to stay within GitHub's 1 MiB job-summary limit.\n"
)


def read_input(name: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """Return the value of action input ``name``, or None when it is unset or empty.

    The runner exports input ``golden-dir`` as ``INPUT_GOLDEN-DIR`` (spaces become ``_``, hyphens stay),
    so both ``INPUT_GOLDEN_DIR`` and ``INPUT_GOLDEN-DIR`` are tried. Only when no ``INPUT_`` variable of
    that name exists at all (a composite action or a local run) is the bare ``GOLDEN_DIR`` read: the runner
    sets every declared input of a Docker action (empty by default), so an unrelated job-level variable
    such as ``MODEL`` never overrides an input left empty. Surrounding whitespace is stripped, as
    actions/toolkit does.
    """
    base = name.strip().replace(" ", "_").upper()
    underscored, hyphenated = base.replace("-", "_"), base.replace("_", "-")
    declared = [
        var for var in dict.fromkeys([f"INPUT_{base}", f"INPUT_{underscored}", f"INPUT_{hyphenated}"]) if var in environ
    ]
    for var in declared or [underscored]:
        value = environ.get(var)
        if value is not None and value.strip():
            return value.strip()
    return None


def parse_bool(name: str, value: str) -> bool:
    """Return True for ``true`` and False for ``false`` (any case, surrounding spaces ignored).

    Raises:
        GateError: for any other value, naming input ``name``.
    """
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise GateError(f"Input `{name}` must be `true` or `false`, got {value!r}.")


def parse_positive_int(name: str, value: str) -> int:
    """Return ``value`` as a positive integer (ASCII digits only, surrounding spaces ignored).

    Raises:
        GateError: for anything else, naming input ``name``.
    """
    text = str(value).strip()
    if text.isascii() and text.isdigit() and int(text) > 0:
        return int(text)
    raise GateError(f"Input `{name}` must be a positive integer, got {value!r}.")


def parse_choice(name: str, value: str, choices: Sequence[str]) -> str:
    """Return ``value`` (surrounding spaces stripped, lower-cased) when it is one of ``choices``.

    Raises:
        GateError: for any other value, naming input ``name`` and listing the choices.
    """
    text = str(value).strip().lower()
    if text in choices:
        return text
    listed = ", ".join(f"`{c}`" for c in choices)
    raise GateError(f"Input `{name}` must be one of {listed}, got {value!r}.")


def workspace_default(value: str, environ: Mapping[str, str] = os.environ) -> Path:
    """The absolute, normalized path of a default report path ``value`` under the workspace (the
    working directory outside Actions), never raising: the fallback of an input whose value (or the
    default itself, e.g. a symlink committed there) :func:`workspace_path` refused. What is written
    there is written atomically and never through a symlink (``gate.paths.write_atomic``)."""
    workspace = environ.get("GITHUB_WORKSPACE")
    base = Path(workspace) if workspace else Path.cwd()
    return Path(os.path.normpath(base.absolute() / value))


def report_workspace_path(name: str, value: str, environ: Mapping[str, str] = os.environ) -> Path:
    """:func:`workspace_path` of an input naming a file the action WRITES (``junit_path``,
    ``report_path``, ``mode: check``'s ``partial_path``): a symbolic link there, in a folder inside
    the workspace, is removed first (``gate.paths.drop_report_link``; the link only, never what it
    leads to), so the report replaces it and no earlier report stays readable through it."""
    drop_report_link(workspace_default(os.path.expanduser(value), environ), workspace_default(".", environ))
    return workspace_path(name, value, environ)


def workspace_path(name: str, value: str, environ: Mapping[str, str] = os.environ) -> Path:
    """Return the path that input ``name`` names, resolved inside the workspace.

    A relative ``value`` is relative to ``GITHUB_WORKSPACE`` (the container's working directory).
    When ``GITHUB_WORKSPACE`` is set, the path (after ``..``, absolute paths and symbolic links are
    resolved; the file need not exist yet) must lie inside it: a Docker action sees nothing else of
    the runner, and an input must not make the action read or write outside the checkout. Without
    ``GITHUB_WORKSPACE`` (a local run) the path is relative to the working directory and not confined.

    Returns:
        The absolute, normalized path (symbolic links inside the workspace are kept as named).
    Raises:
        GateError: when the path escapes the workspace, naming the input, the value and the workspace.
    """
    workspace = environ.get("GITHUB_WORKSPACE")
    base = Path(workspace) if workspace else Path.cwd()
    candidate = Path(os.path.normpath(base.absolute() / Path(value).expanduser()))
    if not workspace:
        return candidate
    root = os.path.realpath(workspace)
    real = os.path.realpath(candidate)
    if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
        raise GateError(
            f"Input `{name}` names {value!r}, which resolves to {real}, outside the workspace {workspace}; "
            "expected a path inside the repository checkout."
        )
    return candidate


def escape_data(s: object) -> str:
    """Return ``s`` escaped as a workflow-command message: ``%``, CR and LF become ``%25``, ``%0D``, ``%0A``."""
    return str(s).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(s: object) -> str:
    """Return ``s`` escaped as a workflow-command property value: as :func:`escape_data`, plus
    ``:`` -> ``%3A`` and ``,`` -> ``%2C``."""
    return escape_data(s).replace(":", "%3A").replace(",", "%2C")


def workflow_command(cmd: str, message: object = "", **props: object) -> str:
    """Return the stdout line ``::cmd k=v,...::message`` with message and property values escaped.

    Properties whose value is None are left out; property order is kept.
    """
    given = ",".join(f"{k}={escape_property(v)}" for k, v in props.items() if v is not None)
    head = f"::{cmd} {given}" if given else f"::{cmd}"
    return f"{head}::{escape_data(message)}"


def _annotate(cmd: str, message: object, title: str | None, file: str | None, line: int | None) -> None:
    # Paths in an annotation read relative to the workspace, as in the job summary (gate.paths).
    message = relative_paths(message, workspace_roots()) if isinstance(message, str) else message
    print(workflow_command(cmd, message, file=file, line=line, title=title), flush=True)


def error(message: object, title: str | None = None, file: str | None = None, line: int | None = None) -> None:
    """Print an ``::error`` annotation (shown on the run and, with ``file``, on the diff)."""
    _annotate("error", message, title, file, line)


def warning(message: object, title: str | None = None, file: str | None = None, line: int | None = None) -> None:
    """Print a ``::warning`` annotation."""
    _annotate("warning", message, title, file, line)


def notice(message: object, title: str | None = None, file: str | None = None, line: int | None = None) -> None:
    """Print a ``::notice`` annotation."""
    _annotate("notice", message, title, file, line)


def secret_parts(secret: str) -> list[str]:
    """The pieces of ``secret`` to hide: the whole value and each of its lines (surrounding spaces
    stripped), longest first. The runner and our messages treat text line by line, so a secret
    holding a line break would otherwise show in pieces."""
    parts = {secret, *(line.strip() for line in secret.splitlines())}
    return sorted((part for part in parts if part), key=len, reverse=True)


def redact(text: str, secret: str | None) -> str:
    """``text`` with every piece of ``secret`` (:func:`secret_parts`) replaced by ``***``."""
    for part in secret_parts(secret) if secret else ():
        text = text.replace(part, "***")
    return text


def add_mask(value: object) -> None:
    """Print ``::add-mask::`` so the runner hides ``value`` in all later log output: one command for
    the whole value and one per line of it (:func:`secret_parts`)."""
    for part in secret_parts(str(value)):
        print(workflow_command("add-mask", part), flush=True)


def annotate_capped(cmd: str, annotations: Iterable[tuple[str, str]], limit: int, more: str) -> int:
    """Print ``::cmd title=T::message`` for each ``(title, message)`` of ``annotations``, at most
    ``limit`` lines in all: when there are more, the first ``limit - 1`` are printed and then one line,
    ``more`` formatted with ``{count}`` (how many were left out).

    Returns:
        The number of lines printed.
    """
    items = list(annotations)
    if len(items) > limit:
        shown, left = items[: max(limit - 1, 0)], len(items) - max(limit - 1, 0)
    else:
        shown, left = items, 0
    for title, message in shown:
        print(workflow_command(cmd, message, title=title), flush=True)
    if left:
        print(workflow_command(cmd, more.format(count=left), title="accuracy-gate"), flush=True)
    return len(shown) + (1 if left else 0)


@contextlib.contextmanager
def stop_commands() -> Iterator[None]:
    """Stop the runner from reading workflow commands in everything printed inside the ``with`` block.

    For echoing untrusted text (a report from another run): a line such as ``::add-mask::`` or
    ``::error::`` in it is then printed as plain text. The resume token is random, so the text
    cannot guess it (GitHub docs, "Stopping and starting workflow commands").
    """
    token = f"accuracy-gate-{uuid.uuid4().hex}"
    print(f"::stop-commands::{token}", flush=True)
    STOPPED.append(token)
    try:
        yield
    finally:
        if token in STOPPED:  # else resume_commands() ended it
            STOPPED.remove(token)
            print(f"::{token}::", flush=True)


STOPPED: list = []
"""The resume tokens of the :func:`stop_commands` blocks now open (innermost last)."""


def resume_commands() -> None:
    """Ends every open :func:`stop_commands` block at once (a process about to exit from a signal
    handler, whose ``with`` blocks never finish), so that the runner reads the next command."""
    while STOPPED:
        print(f"::{STOPPED.pop()}::", flush=True)


@contextlib.contextmanager
def group(title: str) -> Iterator[None]:
    """Fold everything printed inside the ``with`` block into a collapsible log group named ``title``."""
    print(workflow_command("group", title), flush=True)
    try:
        yield
    finally:
        print("::endgroup::", flush=True)


def _output_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def set_outputs(mapping: Mapping[str, object], environ: Mapping[str, str] = os.environ) -> bool:
    """Append each ``name=value`` of ``mapping`` to the file named by ``GITHUB_OUTPUT``.

    Booleans are written as ``true``/``false`` and None as an empty string. A value containing a line
    break is written in the ``name<<DELIM`` ... ``DELIM`` form with a random delimiter.

    Returns:
        True when written, False when ``GITHUB_OUTPUT`` is unset (not running in Actions).
    Raises:
        GateError: for an output name that is empty or contains ``=``, ``<<`` or a line break.
    """
    path = environ.get("GITHUB_OUTPUT")
    if not path:
        return False
    lines = []
    for name, raw in mapping.items():
        if not name or any(bad in name for bad in ("=", "<<", "\n", "\r")):
            raise GateError(f"Output name {name!r} is invalid; expected a name without '=', '<<' or line breaks.")
        value = _output_value(raw)
        if "\n" in value or "\r" in value:
            delimiter = f"ghadelimiter_{uuid.uuid4()}"
            lines.append(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
        else:
            lines.append(f"{name}={value}\n")
    with open(path, "a", encoding="utf-8", newline="\n") as f:
        f.write("".join(lines))
    return True


def _fit_step_summary(text: str, budget: int) -> str | None:
    """Return ``text`` cut at a line boundary plus the truncation note, within ``budget`` bytes."""
    note = _TRUNCATED_NOTE.encode("utf-8")
    room = budget - len(note)
    if room < 0:
        return None
    head = text.encode("utf-8")[:room]
    cut = head.rfind(b"\n") + 1  # keeps whole lines only; 0 when the first line does not fit
    return (head[:cut] + note).decode("utf-8")


def step_summary_room(environ: Mapping[str, str] = os.environ) -> int:
    """Bytes that can still be appended to the job summary before GitHub's 1 MiB limit (0 when full
    or when ``GITHUB_STEP_SUMMARY`` is unset)."""
    path = environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return 0
    existing = os.path.getsize(path) if os.path.exists(path) else 0
    return max(STEP_SUMMARY_LIMIT - existing, 0)


def append_step_summary(markdown: str, environ: Mapping[str, str] = os.environ) -> bool:
    """Append GitHub-flavoured ``markdown`` to the job summary file named by ``GITHUB_STEP_SUMMARY``.

    GitHub aborts the upload of a step summary over 1 MiB (1,048,576 bytes, UTF-8), so when the file
    would grow past that, the new text is cut at a line boundary and a one-line note says so.
    A trailing newline is added so that later appends start on a new line.

    Returns:
        True when something was written; False when ``GITHUB_STEP_SUMMARY`` is unset or the file is
        already too full to take even the note.
    """
    path = environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    text = markdown if markdown.endswith("\n") else markdown + "\n"
    existing = os.path.getsize(path) if os.path.exists(path) else 0
    budget = STEP_SUMMARY_LIMIT - existing
    if len(text.encode("utf-8")) > budget:
        fitted = _fit_step_summary(text, budget)
        if fitted is None:
            return False
        text = fitted
    with open(path, "a", encoding="utf-8", newline="\n") as f:
        f.write(text)
    return True
