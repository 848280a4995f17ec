"""One PR comment per comment key when several results files share the key (``mode: comment`` over
a folder of downloaded artifacts, e.g. the legs of a matrix that each wrote a results file): the
comment shows the worst of them, so a passing file can never overwrite a regressed one's comment,
and it agrees with the step outputs (``passed`` only when all passed, ``regressed`` when any did)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from gate.results import ERROR, PASSED, REGRESSED, GateResult

SEVERITY = {PASSED: 0, ERROR: 1, REGRESSED: 2}
"""How bad a verdict is for a comment standing for several files: regressed is a measured failure,
so it outranks could-not-evaluate, which outranks passed (``regressed`` is any file regressed,
``passed`` all files passed: the worst verdict then reads as the outputs do)."""


def worst_per_key(keyed: Iterable[tuple[str, GateResult]]) -> list[tuple[str, GateResult]]:
    """``(key, result)`` pairs, one per key in first-seen order, from ``(key, result)`` of every
    results file: the result with the worst status (:data:`SEVERITY`; the first file of it), and
    when several files share the key, its message says so and counts their verdicts.

    Raises:
        KeyError: a result whose status is not passed, regressed or error.
    """
    groups: dict[str, list[GateResult]] = {}
    for key, result in keyed:
        groups.setdefault(key, []).append(result)
    chosen = []
    for key, results in groups.items():
        worst = max(results, key=lambda r: SEVERITY[r.status])  # max keeps the first of equals
        if len(results) > 1:
            counts = ", ".join(
                f"{sum(r.status == status for r in results)} {status}"
                for status in (REGRESSED, ERROR, PASSED)
                if any(r.status == status for r in results)
            )
            note = f" (the worst of {len(results)} results files for this comment key: {counts})"
            worst = dataclasses.replace(worst, message=worst.message + note)
        chosen.append((key, worst))
    return chosen
