"""``polygraphy run``'s per-output syntax, ``[<output>:]<value>`` entries, for tolerances, statistics
and regression margins alike (a lower layer: the config, the option readers and the baseline use it)."""

from __future__ import annotations

import re

from gate.errors import GateError


def parse_per_output(values, cast, setting: str, expected: str = "a value"):
    """Parses ``polygraphy run``-style per-output values: each entry is ``[<output>:]<value>``, split
    on the last ``:`` so names may contain ``:``. A lone default entry gives a plain value, anything
    else a dict whose ``""`` key is the default. ``expected`` words a value for the error, e.g.
    ``"a count such as 2 or a share such as 0.5%"``.

    Raises:
        GateError: a value that ``cast`` rejects (ValueError), naming the setting, the entry and what
            is expected (never Python's own ``int()`` / ``float()`` text).
    """
    if isinstance(values, str):
        values = values.replace(",", " ").split()
    else:
        values = [part for value in values for part in str(value).replace(",", " ").split()]
    parsed = {}
    for entry in values:
        name, sep, raw = str(entry).rpartition(":")
        if not sep:
            name, raw = "", entry
        if name in parsed:
            what = f"output '{name}'" if name else "the default (an entry without a name)"
            raise GateError(f"{setting}: {what} is given twice.")
        try:
            parsed[name] = cast(raw)
        except ValueError as err:
            raise GateError(
                f"{setting}: cannot read {entry!r}; expected {expected} (NAME:VALUE for one output)."
            ) from err
    if not parsed:
        raise GateError(f"{setting}: no value given.")
    if list(parsed) == [""]:
        return parsed[""]
    return parsed


_LEAF_SUFFIX = re.compile(r'(\[\d+\]|\{(?:-?\d+|"(?:[^"\\]|\\.)*"|[^{}\[\]"\x00-\x1f]+)\})$')
"""One level of a structured output's leaf name (``gate.structured``: ``[i]`` for a sequence item,
``{key}`` for a map key, a JSON string where the key is not bare)."""


def output_lineage(name: str) -> list[str]:
    """``name``, then each structured parent it is a leaf of, innermost first: ``"out[0]{a}"`` gives
    ``["out[0]{a}", "out[0]", "out"]`` (README D18 names leaves ``out[i]`` / ``out{key}``)."""
    names = [name]
    while (match := _LEAF_SUFFIX.search(names[-1])) and match.start() > 0:
        names.append(names[-1][: match.start()])
    return names


def value_for_output(obj, name: str, default=None):
    """Polygraphy's ``value_or_from_dict`` for the gate's rows: a non-dict is the value for every
    output; a dict gives the entry of ``name``, else of the structured output it is a leaf of
    (``output_lineage``), else the ``""`` default entry, else ``default``."""
    if not isinstance(obj, dict):
        return obj
    for candidate in output_lineage(name):
        if candidate in obj:
            return obj[candidate]
    return obj.get("", default)
