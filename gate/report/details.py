"""Per-output details for the terminal (``accuracy-gate check|run`` on failure, and with -v): what
``polygraphy run`` prints for each compared output, from the verdict rows (``gate.results``)."""

from __future__ import annotations

from gate.results import GateResult


def render_details(result: GateResult) -> list[str]:
    """Lines below the table: one block per compared output (errors have none)."""
    lines = []
    for row in result.rows:
        if row.error:
            continue
        lines += ["", f"{row.output} ({row.pair[0]} vs {row.pair[1]}): {row.message()}"]
    return lines


__all__ = ["render_details"]
