"""GitHub-flavoured Markdown for the job summary and the pull-request comment: one renderer, two size
budgets (the job summary's 1 MiB, a comment's ~60 kB).

Everything that comes from the model, the data or a results file is escaped: names are rendered as
code spans (no HTML, links or @mentions inside), free text has Markdown's inline syntax, HTML, ``$``
math, @mentions and bare URLs defused, and control and bidi-override characters are removed. So a
report read from an untrusted results file renders as text and cannot ping people or add links.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote

from gate.report.chart import caption, chart, has_baseline_series
from gate.report.escape import unlinked, visible
from gate.report.json_report import largest_fitting
from gate.report.text import headers_of, rows_of, scope_line
from gate.results import PASSED, REGRESSED, GateResult, plural

MAX_CHARTS = 6
"""Outputs that get a distribution chart (failing ones first); the others are counted in a note."""

_ICONS = {PASSED: "✅", REGRESSED: "❌"}
_LABELS = {PASSED: "passed", REGRESSED: "regressed", "error": "error (could not evaluate)"}

_SPACE = re.compile(r"\s+")
_INLINE = re.compile(r"([\\`*_\[\]<>|~$])")
_WORD_JOINER = "\u2060"


def _plain(text: object) -> str:
    """One line: whitespace runs to one space; control, zero-width, bidi-override and other invisible
    characters shown escaped (``gate.report.escape.visible``), so they neither act nor vanish."""
    return _SPACE.sub(" ", visible(text, keep=" \t\n\r\x0b\x0c")).strip()


def md_text(text: object) -> str:
    """``text`` as inert Markdown: one line; ``\\ ` * _ [ ] < > | ~ $`` backslash-escaped (no emphasis,
    links, images, HTML, table cells or math), ``&`` as ``&amp;`` (no entities), and a word joiner
    after ``@`` and inside ``://`` and ``www.`` so that no one is mentioned and nothing is auto-linked."""
    text = _INLINE.sub(r"\\\1", _plain(text).replace("&", "&amp;"))
    text = unlinked(re.sub(r"@(?=\w)", "@" + _WORD_JOINER, text))  # no @mention, no #1 / GH-3 reference
    text = re.sub(r"(?i)(?<=[a-z]):(?=//)", ":" + _WORD_JOINER, text)
    return re.sub(r"(?i)\bwww\.", "www" + _WORD_JOINER + ".", text)


def md_code(text: object, in_table: bool = False) -> str:
    """``text`` as a code span, fenced with more backticks than it contains, so nothing inside renders.
    In a table cell ``|`` is escaped as ``\\|`` (GFM splits cells before reading code spans). Line
    breaks and invisible characters are shown escaped (``\\n``, ``\\u200b``: names differing only by
    them stay distinct); spaces are kept."""
    text = visible(text)
    if not text:
        return "(empty)"
    if in_table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith(("`", " ")) or text.endswith(("`", " ")) else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _url(url: str) -> str:
    """A link target with spaces, parentheses, angle brackets and quotes percent-encoded."""
    return quote(_plain(url), safe=":/?&=#%~.-_+@,;!*'$")


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8"))


@dataclass
class _Parts:
    head: list[str]
    message: str
    where: str
    table_header: list[str]
    rows: list[str]
    row_failing: list[bool]
    failures: list[str]
    runtime: list[str]
    charts: list[list[str]]
    charts_note: str


def _parts(result: GateResult, run_url: str | None, commit: str | None) -> _Parts:
    icon = _ICONS.get(result.status, "⚠️")
    title = md_text(result.title or f"Accuracy gate: {result.model}")
    where = plural(result.iterations, "iteration")
    scope = scope_line(result)
    if scope:
        where += f" · {md_text(scope)}"
    if commit:
        where += f" · commit {md_text(commit[:12])}"
    if run_url:
        where += f" · [workflow run]({_url(run_url)})"
    rows, failing = [], []
    for row, cells in zip(result.rows, rows_of(result)):
        rendered = [md_code(cells[0], in_table=True)] + [md_text(c) for c in cells[1:]]
        rows.append("| " + " | ".join(rendered) + " |")
        failing.append(not row.passed)
    charts, charts_note = _charts(result)
    headers = headers_of(result)
    return _Parts(
        head=[f"## {icon} {title}", ""],
        message=f"**{_LABELS[result.status]}**: {md_text(result.message)}",
        where=where,
        table_header=["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"],
        rows=rows,
        row_failing=failing,
        failures=[f"- {md_code(row.output)}: {md_text(row.message())}" for row in result.rows if not row.passed],
        runtime=[f"- {md_text(key)}: {md_code(value)}" for key, value in result.facts.items()],
        charts=charts,
        charts_note=charts_note,
    )


def _charts(result: GateResult) -> tuple[list[list[str]], str]:
    """One block per charted output (a caption, then a Mermaid chart or a one-line note), failing
    outputs first, at most MAX_CHARTS; and a note counting those left out."""
    rows = [row for row in result.rows if row.values is not None and not row.error]
    rows = [row for row in rows if not row.passed] + [row for row in rows if row.passed]
    blocks = []
    for row in rows[:MAX_CHARTS]:
        lines, note = chart(row)
        pair = md_text(f"{row.pair[0]} vs {row.pair[1]}")
        if note is not None:
            blocks.append([f"- {md_code(row.output)} ({pair}): {md_text(note)}", ""])
        else:
            words = md_text(caption(row, has_baseline_series(row)))
            blocks.append([f"{md_code(row.output)} ({pair}): {words}", "", *lines, ""])
    note = ""
    if len(rows) > MAX_CHARTS:
        note = f"Distributions of {MAX_CHARTS} of {len(rows)} outputs are shown (failing outputs first)."
    return blocks, note


def _details(summary: str, items: list[str]) -> list[str]:
    return [f"<details><summary>{summary}</summary>", "", *items, "", "</details>", ""] if items else []


def _assemble(
    parts: _Parts, message: str, kept_rows: list[int], failures: int, runtime: bool, note: str, charts: int = 0
) -> str:
    lines = [*parts.head, message, "", parts.where, ""]
    if kept_rows:
        lines += parts.table_header + [parts.rows[i] for i in kept_rows] + [""]
    if charts:
        lines += ["**Per-iteration distribution** of each output's checked statistic:", ""]
        for block in parts.charts[:charts]:
            lines += block
        if parts.charts_note and charts == len(parts.charts):
            lines += [parts.charts_note, ""]
    lines += _details("Failures", parts.failures[:failures])
    if runtime:
        lines += _details("Runtime", parts.runtime)
    if note:
        lines += [note, ""]
    return "\n".join(lines)


def _note(
    parts: _Parts, kept_rows: int, failures: int, runtime: bool, message_cut: bool, more_at: str, charts: int = 0
) -> str:
    left_out = []
    if charts < len(parts.charts):
        left_out.append(
            f"{charts} of {len(parts.charts)} distribution charts are shown" if charts else "the charts are left out"
        )
    if message_cut:
        left_out.append("the end of the verdict message")
    if kept_rows < len(parts.rows):
        shown = f"{kept_rows} of {len(parts.rows)} table rows are shown"
        hidden_failing = sum(parts.row_failing) - min(kept_rows, sum(parts.row_failing))
        if hidden_failing:
            shown += f" ({hidden_failing} failing rows left out)"
        left_out.append(shown)
    if failures < len(parts.failures):
        shown = f"{failures} of {len(parts.failures)} failure details are shown"
        left_out.append(shown if failures else "the failure details are left out")
    if parts.runtime and not runtime:
        left_out.append("the runtime facts are left out")
    return f"> **Shortened** to fit GitHub's size limit: {'; '.join(left_out)}. The full report is in {more_at}."


def render_markdown(
    result: GateResult,
    run_url: str | None = None,
    commit: str | None = None,
    *,
    budget: int | None = None,
    more_at: str | None = None,
) -> str:
    """The verdict, a table of every output, failure details and the runtime facts.

    Args:
        result: the verdict to render; every string in it is escaped.
        run_url: the workflow run whose job summary holds the full report (linked twice).
        commit: the commit the results are for (its first 12 characters are shown).
        budget: at most this many UTF-8 bytes (None: no limit). A report that does not fit is shortened
            section by section, in this order, until it fits: distribution charts are dropped from the
            last, then the runtime facts, then failure details from the last, then table rows
            (passing rows before failing ones, each from the last); then the verdict message is cut.
            The heading and verdict line always stay, and a final note says what was left out and
            where the full report is.
        more_at: Markdown naming where the full report is, for that note; default: the job summary of
            ``run_url``.
    """
    parts = _parts(result, run_url, commit)
    everything = list(range(len(parts.rows)))
    full = _assemble(parts, parts.message, everything, len(parts.failures), True, "", len(parts.charts))
    if budget is None or _utf8_len(full) <= budget:
        return full
    if more_at is None:
        more_at = f"the [job summary]({_url(run_url)}) of the workflow run" if run_url else "the job summary"

    def text(message, rows, failures, runtime, cut=False, charts=0):
        note = _note(parts, len(rows), failures, runtime, cut, more_at, charts)
        return _assemble(parts, message, rows, failures, runtime, note, charts)

    def fits(candidate: str) -> bool:
        return _utf8_len(candidate) <= budget

    if parts.charts and fits(text(parts.message, everything, len(parts.failures), True, charts=0)):
        kept = largest_fitting(
            0, len(parts.charts), lambda n: fits(text(parts.message, everything, len(parts.failures), True, charts=n))
        )
        return text(parts.message, everything, len(parts.failures), True, charts=kept)

    candidate = text(parts.message, everything, len(parts.failures), False)
    if fits(candidate):
        return candidate
    if fits(text(parts.message, everything, 0, False)):
        kept = largest_fitting(0, len(parts.failures), lambda n: fits(text(parts.message, everything, n, False)))
        return text(parts.message, everything, kept, False)
    # Table rows: failing rows are kept longest; the table stays in its original order.
    priority = [i for i in everything if parts.row_failing[i]] + [i for i in everything if not parts.row_failing[i]]

    def rows(n: int) -> list[int]:
        return sorted(priority[:n])

    if fits(text(parts.message, [], 0, False)):
        kept = largest_fitting(0, len(priority), lambda n: fits(text(parts.message, rows(n), 0, False)))
        return text(parts.message, rows(kept), 0, False)
    # Even the verdict alone is too long (a huge message): cut the message, never the verdict label.
    label, _, words = parts.message.partition(": ")

    def cut_message(n: int) -> str:
        return f"{label}: {words[:n].rstrip(chr(92))}…"

    if fits(text(cut_message(0), [], 0, False, cut=True)):
        n = largest_fitting(0, len(words), lambda n: fits(text(cut_message(n), [], 0, False, cut=True)))
        return text(cut_message(n), [], 0, False, cut=True)
    return full.encode("utf-8")[: max(budget, 0)].decode("utf-8", "ignore")
