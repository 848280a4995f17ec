"""``polygraphy run``'s per-output syntax, ``[<output>:]<value>`` entries, for tolerances, statistics
and regression margins alike (a lower layer: the config, the option readers and the baseline use it)."""

from __future__ import annotations

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
