"""Strict JSON, as the gate's own files use it (the results file, the partial result file): no NaN or
infinity literals (``json.loads`` accepts them, other readers do not); a non-finite float is written as
the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, every other float as Python's shortest repr
(which reads back to the same float)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from gate.errors import GateError


def json_number(value) -> float | str | None:
    """A float for strict JSON: itself (``repr`` round-trips exactly), or ``"NaN"`` / ``"Infinity"`` /
    ``"-Infinity"``, or None. Shared by the results file and the partial-result file."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def number_from_json(value) -> float | None:
    """The inverse of ``json_number``: a JSON number, ``"NaN"``/``"Infinity"``/``"-Infinity"`` or null.

    Raises:
        TypeError: anything else (callers turn it into their one-line error naming the file).
    """
    if value is None:
        return None
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value.replace("Infinity", "inf"))
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(value)
    return float(value)


def json_int(value) -> int | None:
    return None if value is None else int(value)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def load_json(path, what: str) -> dict:
    """A JSON object from ``path``; a missing, unreadable or corrupt file is a one-line GateError."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise GateError(f"{source}: cannot read the {what} ({err.strerror or err}).") from err
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        detail = (
            f"line {err.lineno}, column {err.colno}" if isinstance(err, json.JSONDecodeError) else type(err).__name__
        )
        raise GateError(f"{source}: the {what} is not valid JSON ({detail}); it is corrupt or truncated.") from err
    if not isinstance(data, dict):
        raise GateError(f"{source}: the {what} is not a JSON object.")
    return data
