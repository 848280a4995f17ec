"""Strict JSON, as the gate's own files use it (the results file, the partial result file): no NaN or
infinity literals (``json.loads`` accepts them, other readers do not); a non-finite float is written as
the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, every other float as Python's shortest repr
(which reads back to the same float)."""

from __future__ import annotations

import json
import math

from gate.errors import GateError
from gate.paths import read_regular


class DuplicateKey(ValueError):
    """A JSON object names one key twice (``json.loads`` would keep the last value in silence)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def unique_object(pairs) -> dict:
    """``object_pairs_hook`` for ``json.loads``: the object as a dict, or DuplicateKey."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def parse_json(text: str, source: str, what: str, strict: bool = True):
    """``json.loads(text)`` with every key once per object and, ``strict``, no NaN or infinity
    literals (the gate's own files; Polygraphy's JSON has them).

    Raises:
        GateError: a key named twice in one object, naming ``source`` and ``what`` the text is.
        ValueError, RecursionError: whatever else ``json.loads`` raises (the caller words it).
    """
    constants = {"parse_constant": _reject_constant} if strict else {}
    try:
        return json.loads(text, object_pairs_hook=unique_object, **constants)
    except DuplicateKey as err:  # json.loads would keep the last value in silence
        raise GateError(f"{source}: the {what} names {err.key!r} twice in one object; expected each once.") from None


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


def element_json(worst_values, worst_absdiff, worst_reldiff, nan_counts) -> dict | None:
    """The worst element of a result or row for JSON files (results file, partial result file):
    ``{"values": [v0, v1], "absdiff": num, "reldiff": num, "nan_counts": [both, one side] | null}``
    (a text value is ``{"text": "..."}``, so that it is never read back as the number "NaN"), or
    None when there is no element."""
    if worst_values is None:
        return None
    return {
        "values": [_json_value(v) for v in worst_values],
        "absdiff": json_number(worst_absdiff),
        "reldiff": json_number(worst_reldiff),
        "nan_counts": None if nan_counts is None else [int(n) for n in nan_counts],
    }


def element_from_json(data, limit: int = 4096) -> dict:
    """The inverse of ``element_json``: keyword arguments ``worst_values``, ``worst_absdiff``,
    ``worst_reldiff``, ``nan_counts`` (all None for null).

    Raises:
        TypeError: a malformed entry (callers turn it into their one-line error naming the file).
    """
    if data is None:
        return {"worst_values": None, "worst_absdiff": None, "worst_reldiff": None, "nan_counts": None}
    if not isinstance(data, dict) or not isinstance(data.get("values"), list) or len(data["values"]) != 2:
        raise TypeError(data)
    counts = data.get("nan_counts")
    if counts is not None and not (
        isinstance(counts, list) and len(counts) == 2 and all(type(n) is int and n >= 0 for n in counts)
    ):
        raise TypeError(counts)
    return {
        "worst_values": tuple(_value_from_json(v, limit) for v in data["values"]),
        "worst_absdiff": number_from_json(data.get("absdiff")),
        "worst_reldiff": number_from_json(data.get("reldiff")),
        "nan_counts": None if counts is None else tuple(counts),
    }


def _json_value(value):
    if isinstance(value, str):
        return {"text": value}
    if isinstance(value, (bool, int)):
        return value
    return json_number(value)


def _value_from_json(value, limit):
    if isinstance(value, dict):
        text = value.get("text")
        if set(value) != {"text"} or not isinstance(text, str) or len(text) > limit:
            raise TypeError(value)
        return text
    if isinstance(value, (bool, int)):
        return value
    return number_from_json(value)


def json_int(value) -> int | None:
    return None if value is None else int(value)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def load_json(path, what: str) -> dict:
    """A JSON object from ``path``; a missing, unreadable or corrupt file is a one-line GateError."""
    source = str(path)
    try:
        raw = read_regular(path, f"the {what}")
    except OSError as err:
        raise GateError(f"{source}: cannot read the {what} ({err.strerror or err}).") from err
    try:
        data = parse_json(raw.decode("utf-8"), source, what)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        detail = (
            f"line {err.lineno}, column {err.colno}" if isinstance(err, json.JSONDecodeError) else type(err).__name__
        )
        raise GateError(f"{source}: the {what} is not valid JSON ({detail}); it is corrupt or truncated.") from err
    if not isinstance(data, dict):
        raise GateError(f"{source}: the {what} is not a JSON object.")
    return data
