"""ONNX Runtime execution-provider options (``[onnxrt] provider_options``) and the check that every
requested execution provider is active in the session ONNX Runtime made.

ONNX Runtime takes each provider's options as a table of strings (``{"device_id": "0", "use_tf32":
"0"}``, see https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html). When a
provider cannot be created (its libraries are missing, an option is unknown, the build lacks it) ONNX
Runtime falls back to the CPU silently: a warning, a line printed to stdout or one logged to stderr.
The gate refuses that: a check on the CPU would pass for a check on the GPU.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import logging
import os
import re
import sys
import tempfile
import warnings

from gate.errors import GateError

log = logging.getLogger("gate.backend")

OPTION_TYPES = (str, int, float, bool)


def option_text(value) -> str:
    """An option value as ONNX Runtime reads it: booleans as ``1`` / ``0``, the rest as ``str``."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def check_provider_options(options, execution_providers, where: str) -> dict[str, dict[str, str]]:
    """Validates ``provider_options``: ``{provider name: {option: str | int | float | bool}}``, every
    provider one of ``execution_providers`` (a name that is not would be ignored silently).

    Returns:
        The same table with every value as ONNX Runtime reads it (``option_text``).

    Raises:
        GateError: not a table of tables, a value of another type, or a provider not in
            ``execution_providers`` (prefixed with ``where``: the file or the flag).
    """
    if not isinstance(options, dict):
        raise GateError(f"{where}: provider_options must be a table of provider tables, got {options!r}.")
    checked = {}
    for provider, table in options.items():
        if provider not in execution_providers:
            raise GateError(
                f"{where}: provider_options names '{provider}', which is not one of the execution providers "
                f"{list(execution_providers)}."
            )
        if not isinstance(table, dict):
            raise GateError(
                f"{where}: provider_options.{provider} must be a table such as {{ device_id = 0 }}, got {table!r}."
            )
        for key, value in table.items():
            if not isinstance(value, OPTION_TYPES):
                raise GateError(
                    f"{where}: provider_options.{provider}.{key} must be a string, number or boolean, got {value!r}."
                )
        checked[provider] = {str(key): option_text(value) for key, value in table.items()}
    return checked


def parse_provider_options(values, where: str) -> dict[str, dict[str, str]]:
    """Parses ``PROVIDER:KEY=VALUE[,KEY=VALUE...]`` entries (a flag's or an action input's), e.g.
    ``CUDAExecutionProvider:device_id=0,use_tf32=0``; the same provider may be named again.

    Raises:
        GateError: an entry without ``PROVIDER:`` or an option without ``=`` (names ``where``).
    """
    if isinstance(values, str):
        values = values.split()
    parsed: dict[str, dict[str, str]] = {}
    for entry in values:
        provider, sep, rest = str(entry).partition(":")
        if not sep or not provider:
            raise GateError(
                f"{where}: {entry!r} is not PROVIDER:KEY=VALUE[,KEY=VALUE], e.g. CUDAExecutionProvider:use_tf32=0."
            )
        table = parsed.setdefault(provider, {})
        for pair in filter(None, rest.split(",")):
            key, eq, value = pair.partition("=")
            if not eq or not key.strip():
                raise GateError(f"{where}: option {pair!r} of {provider} is not KEY=VALUE.")
            table[key.strip()] = value.strip()
    if not parsed:
        raise GateError(f"{where}: no provider options given.")
    return parsed


def merge_provider_options(base: dict, override: dict) -> dict:
    """``override``'s options replace ``base``'s one by one (a flag's over gate.toml's)."""
    merged = {provider: dict(table) for provider, table in (base or {}).items()}
    for provider, table in (override or {}).items():
        merged.setdefault(provider, {}).update(table)
    return merged


@contextlib.contextmanager
def captured_messages(lines: list):
    """Collects what ONNX Runtime says while the block runs: Python warnings, lines printed to stdout
    (its fallback notice) and its C++ log on file descriptor 2. Appends them to ``lines``."""
    sys.stderr.flush()
    saved = None
    with tempfile.TemporaryFile() as err_file, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = io.StringIO()
        try:
            saved = os.dup(2)
            os.dup2(err_file.fileno(), 2)
        except OSError:  # no file descriptor 2 to redirect: the warnings and stdout are still caught
            saved = None
        try:
            with contextlib.redirect_stdout(out):
                yield lines
        finally:
            if saved is not None:
                os.dup2(saved, 2)
                os.close(saved)
            err_file.seek(0)
            text = err_file.read().decode("utf-8", "replace")
            lines.extend(str(w.message) for w in caught)
            lines.extend(out.getvalue().splitlines())
            lines.extend(text.splitlines())
            for line in lines:
                log.debug("onnxruntime: %s", line)


_EP_ERROR = re.compile(r"EP Error:? (?P<reason>.+?) (?:when )?using \[[^\]]*\]")
"""ONNX Runtime's fallback notice (onnxruntime_inference_collection.py): ``EP Error {e} when using
[providers]`` while the session is made, ``EP Error: {e} using [providers]`` when a run fails; ``{e}``
may span lines. Its banner (``*** EP Error ***``) and ``Falling back to ...`` carry no reason."""


def _is_banner(line: str) -> bool:
    return line.startswith("***") and line.endswith("***")


def _reason(provider: str, lines: list) -> str:
    """ONNX Runtime's reason for not creating ``provider``: the error quoted in its fallback notice
    (``_EP_ERROR``), else the first message naming the provider (or a provider library), else the
    first error message, else a statement that it gave none. Whitespace is collapsed to one line; a
    trailing full stop is dropped (the caller ends the sentence)."""
    cleaned = [" ".join(str(line).split()) for line in lines]
    cleaned = [line for line in cleaned if line and not _is_banner(line)]
    notice = _EP_ERROR.search(" ".join(line for line in cleaned if not line.startswith("Falling back to ")))
    if notice:
        return notice.group("reason").rstrip(". ")
    short = provider.removesuffix("ExecutionProvider").lower()
    for line in cleaned:
        low = line.lower()
        if provider.lower() in low or f"providers_{short}" in low:
            return line.rstrip(". ")
    for line in cleaned:
        if "error" in line.lower() or "fail" in line.lower():
            return line.rstrip(". ")
    return "ONNX Runtime gave no reason"


def require_active(session, requested, lines: list, where: str) -> None:
    """Every provider in ``requested`` must be in ``session.get_providers()``.

    Raises:
        GateError: one line naming the first inactive provider, the providers in use and ONNX
            Runtime's reason (``_reason``), prefixed with ``where`` (the model file).
    """
    active = session.get_providers()
    for provider in requested:
        if provider not in active:
            raise GateError(
                f"{where}: execution provider {provider} is not active in the ONNX Runtime session "
                f"(it runs on {', '.join(active)}); ONNX Runtime says: {_reason(provider, lines)}."
            )


def require_known_options(session, requested: dict, where: str) -> None:
    """Every option in ``requested`` (``{provider: {option: value}}``) must be one that ONNX Runtime
    reports for that provider in ``session.get_provider_options()``: ONNX Runtime ignores an option it
    does not know without a word (the CPU provider ignores every option; a typo such as ``use_tf23``
    would leave TF32 on). Call after ``require_active`` (every requested provider is in the session).

    Raises:
        GateError: one line naming the first unknown option, its provider and the options ONNX Runtime
            reports for it (or that it reports none), prefixed with ``where`` (the model file).
    """
    effective = session.get_provider_options()
    for provider, options in requested.items():
        known = effective.get(provider)
        if known is None:  # not in the session: require_active says so
            continue
        for key in options:
            if key in known:
                continue
            if not known:
                raise GateError(
                    f"{where}: provider_options.{provider}.{key} would be ignored: ONNX Runtime reports no "
                    f"options for {provider}, so none takes effect."
                )
            close = difflib.get_close_matches(key, list(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise GateError(
                f"{where}: provider_options.{provider}.{key} is not an option of {provider}{hint} and would be "
                f"ignored; ONNX Runtime reports {', '.join(sorted(known))}."
            )


FACT_OPTIONS = ("device_id", "use_tf32", "gpu_mem_limit", "cudnn_conv_algo_search", "trt_fp16_enable")
"""Options reported for a provider besides those set in gate.toml (when ONNX Runtime reports them)."""


def providers_in_use(session, requested_options: dict) -> dict[str, dict[str, str]]:
    """The session's providers, in order, each with its options in effect: those set in gate.toml
    and :data:`FACT_OPTIONS` (as ``session.get_provider_options()`` reports them)."""
    effective = session.get_provider_options()
    in_use = {}
    for provider in session.get_providers():
        options = effective.get(provider, {})
        keys = [*requested_options.get(provider, {}), *(k for k in FACT_OPTIONS if k in options)]
        in_use[provider] = {key: str(options.get(key, requested_options.get(provider, {}).get(key))) for key in keys}
    return in_use


def describe_providers(in_use: dict) -> str:
    """``CUDAExecutionProvider(device_id=0, use_tf32=1), CPUExecutionProvider`` for reports."""
    parts = []
    for provider, options in in_use.items():
        text = ", ".join(f"{key}={value}" for key, value in options.items())
        parts.append(f"{provider}({text})" if text else provider)
    return ", ".join(parts)
