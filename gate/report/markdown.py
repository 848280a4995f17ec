"""GitHub-flavoured Markdown for the job summary and the pull-request comment."""

from __future__ import annotations

from gate.report.text import HEADERS, rows_of
from gate.results import PASSED, REGRESSED, GateResult

_ICONS = {PASSED: "✅", REGRESSED: "❌"}
_LABELS = {PASSED: "passed", REGRESSED: "regressed", "error": "error (could not evaluate)"}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(result: GateResult, run_url: str | None = None, commit: str | None = None) -> str:
    """The verdict, a table of every output, failure details and the runtime facts."""
    icon = _ICONS.get(result.status, "⚠️")
    title = result.title or f"Accuracy gate: {result.model}"
    lines = [f"## {icon} {title}", "", f"**{_LABELS[result.status]}**: {_cell(result.message)}", ""]
    where = f"{result.iterations} iterations"
    if commit:
        where += f" · commit {commit[:12]}"
    if run_url:
        where += f" · [workflow run]({run_url})"
    lines += [where, ""]
    if result.rows:
        lines.append("| " + " | ".join(HEADERS) + " |")
        lines.append("|" + "|".join("---" for _ in HEADERS) + "|")
        for cells in rows_of(result):
            lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
        lines.append("")
    failures = [row for row in result.rows if not row.passed]
    if failures:
        lines += ["<details><summary>Failures</summary>", ""]
        lines += [f"- `{_cell(row.output)}`: {_cell(row.message())}" for row in failures]
        lines += ["", "</details>", ""]
    if result.facts:
        lines += ["<details><summary>Runtime</summary>", ""]
        lines += [f"- {key}: `{_cell(str(value))}`" for key, value in result.facts.items()]
        lines += ["", "</details>", ""]
    return "\n".join(lines)
