"""A plain-text result table for terminals and CI logs."""

from __future__ import annotations

from gate.results import GateResult, fmt

VERDICTS = {"passed": "PASSED", "regressed": "REGRESSED", "error": "ERROR (could not evaluate)"}
HEADERS = ("output", "stat", "abs error", "atol", "rel error", "rtol", "failed iters", "result")


def rows_of(result: GateResult) -> list[tuple[str, ...]]:
    """The table's cells, shared by the text and Markdown renderers."""
    cells = []
    for row in result.rows:
        if row.error:
            cells.append((row.output, "-", "-", "-", "-", "-", "-", f"ERROR: {row.error}"))
            continue
        stat = f"{row.stat} (avg)" if row.averaged else row.stat
        failed = "-" if row.averaged else f"{row.failed_iterations}/{row.iterations}"
        cells.append(
            (
                row.output,
                stat,
                fmt(row.abs_value),
                fmt(row.atol),
                fmt(row.rel_value),
                fmt(row.rtol),
                failed,
                "pass" if row.passed else "FAIL",
            )
        )
    return cells


def render_text(result: GateResult) -> str:
    """An aligned table, one row per output, and the final verdict line."""
    table = [HEADERS, *rows_of(result)]
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADERS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    pairs = sorted({f"{row.pair[0]} vs {row.pair[1]}" for row in result.rows})
    header = f"accuracy-gate: {result.model}, {result.iterations} iterations" + (
        f", {', '.join(pairs)}" if pairs else ""
    )
    return "\n".join([header, *lines, "", f"{VERDICTS[result.status]}: {result.message}"])
