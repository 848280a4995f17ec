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

from gate.paths import relative_paths
from gate.report.chart import ATOL_MARK, blocks, caption, histogram, mermaid
from gate.report.escape import unlinked, visible
from gate.report.text import nothing_ran, rows_of, scope_line
from gate.results import PASSED, REGRESSED, GateResult, fmt, fmt_delta, fmt_threshold, plural
from gate.results_file import largest_fitting

MAX_CHARTS = 6
"""Outputs that get a distribution chart (failing ones first); the others are counted in a note."""

_ICONS = {PASSED: "✅", REGRESSED: "❌"}
_ROW_ICONS = {"pass": "✅", "FAIL": "❌", "REGRESSED": "❌", "FAIL (as baseline)": "🟡", "ERROR": "⚠️"}
_ROW_ICONS["pass (avg)"] = "🟡"  # passes on average only: some iteration is out of tolerance
"""The first cell of each table row: its verdict as a symbol, then the word."""
MINUS = "\u2212"
"""Numbers in tables use the minus sign: ``1e−05`` does not wrap at its sign (a hyphen lets browsers
break ``1e-`` / ``05`` in a narrow column)."""
_NUMBER = re.compile(r"[+-]?(?:\d[\d.]*(?:e[+-]\d+)?|inf|nan)")
_NBSP = "\u00a0"
TABLE_HEADERS = ("result", "output", "stat", "abs error / atol", "rel error / rtol", "failed iters")
"""The columns of the Markdown table (``stat`` only when the outputs' statistics differ)."""
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


def md_number(text: str) -> str:
    """A number formatted by ``gate.results.fmt``/``fmt_delta`` for a table cell: ``-`` as the minus
    sign (U+2212) so that the cell never wraps inside it; anything else is escaped text."""
    return text.replace("-", MINUS) if _NUMBER.fullmatch(text) else md_text(text)


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
    errors: list[str | None]  # per table row: its error line below the table, if any
    delta_header: list[str]
    delta_rows: list[str]
    failures: list[str]
    runtime: list[str]
    charts: list[list[str]]
    charts_head: list[str]
    charts_note: str


def _row_cells(row, cells: tuple[str, ...]) -> list[str]:
    """A Markdown table row: the verdict (symbol and word), the output, the statistic, each error with
    its tolerance (``0.01 / 1e−05``, no-break spaces), the failed iterations."""
    verdict = "ERROR" if row.error else cells[7]
    pairs = [f"{md_number(cells[i])}{_NBSP}/{_NBSP}{md_number(cells[i + 1])}" for i in (2, 4)]
    if row.error:
        pairs = ["-", "-"]
    symbol = f"{_ROW_ICONS.get(verdict, '')}{_NBSP}{verdict}".strip(_NBSP)
    return [symbol, md_code(cells[0], in_table=True), md_text(cells[1]), *pairs, md_text(cells[6])]


def _delta_cells(row) -> list[str]:
    if row.error:
        return [md_code(row.output, in_table=True), "-", "-", "-", "-"]
    if not row.baseline_found:
        return [md_code(row.output, in_table=True), "new", "new", "new", "new"]
    values = (fmt(row.baseline_abs), fmt_delta(row.delta_abs), fmt(row.baseline_rel), fmt_delta(row.delta_rel))
    return [md_code(row.output, in_table=True), *(md_number(v) for v in values)]


def _table(headers, cells: list[list[str]], numeric_from: int) -> tuple[list[str], list[str]]:
    align = "|" + "|".join("---" if i < numeric_from else "--:" for i in range(len(headers))) + "|"
    return ["| " + " | ".join(headers) + " |", align], ["| " + " | ".join(c) + " |" for c in cells]


def _parts(result: GateResult, run_url: str | None, commit: str | None, roots=None) -> _Parts:
    icon = "ℹ️" if result.nothing_compared else _ICONS.get(result.status, "⚠️")
    title = md_text(result.title or f"Accuracy gate: {result.model}")
    message = relative_paths(result.message, roots)
    counted = plural(result.iterations, "iteration")
    where = [] if counted in message or nothing_ran(result) else [counted]  # the verdict line says it already
    if scope_line(result):
        where.append(md_text(scope_line(result)))
    cells = [_row_cells(row, c) for row, c in zip(result.rows, rows_of(result))]
    headers = TABLE_HEADERS
    if any(row.func != "simple" for row in result.rows):  # other compare functions: value / bound there too
        headers = (*headers[:3], "abs error or value / atol or bound", *headers[4:])
    stats = {c[1] for row, c in zip(result.rows, rows_of(result)) if not row.error}
    if len(stats) == 1:  # one statistic for every output: said once, and the table is narrower
        where.append(f"checked statistic: {md_text(stats.pop())}")
        headers, cells = headers[:2] + headers[3:], [c[:2] + c[3:] for c in cells]
    if commit:
        where.append(f"commit {md_text(commit[:12])}")
    if run_url:
        where.append(f"[workflow run]({_url(run_url)})")
    table_header, rows = _table(headers, cells, len(headers) - 3)
    delta_header, delta_rows = [], []
    if result.baseline:
        heads = ("output", "baseline abs", "Δ abs", "baseline rel", "Δ rel")
        delta_header, delta_rows = _table(heads, [_delta_cells(row) for row in result.rows], 1)
        delta_header = [f"Against the baseline {md_text(result.baseline)}:", "", *delta_header]
    errors = [
        f"- {md_code(row.output)}: {md_text(relative_paths(row.error, roots))}" if row.error else None
        for row in result.rows
    ]
    charts, charts_head, charts_note = _charts(result)
    return _Parts(
        head=[f"## {icon} {title}", ""],
        message=f"**{'ran' if result.nothing_compared else _LABELS[result.status]}**: {md_text(message)}",
        where=" · ".join(where),
        table_header=table_header,
        rows=rows,
        row_failing=[not row.passed for row in result.rows],
        errors=errors,
        delta_header=delta_header,
        delta_rows=delta_rows,
        failures=[
            f"- {md_code(row.output)}: {md_text(relative_paths(row.message(), roots))}"
            for row in result.rows
            if not row.passed and not row.error
        ],
        runtime=[f"- {md_text(key)}: {md_code(value)}" for key, value in result.facts.items()],
        charts=charts,
        charts_head=charts_head,
        charts_note=charts_note,
    )


def _charts(result: GateResult) -> tuple[list[list[str]], list[str], str]:
    """Per charted output (failing outputs first, at most MAX_CHARTS): ``[table row or note, Mermaid
    lines...]``; the table's head; and a note counting those left out. No output with a drawable
    distribution: no charts at all (no heading over notes alone)."""
    rows = [row for row in result.rows if row.values is not None and not row.error]
    rows = [row for row in rows if not row.passed] + [row for row in rows if row.passed]
    shown = [(row, *histogram(row)) for row in rows[:MAX_CHARTS]]
    if not any(hist for _, hist, _ in shown):
        return [], [], ""
    with_baseline = any(hist and hist.baseline for _, hist, _ in shown)
    with_pair = len({row.pair for row in result.rows}) > 1
    blocks_ = []
    for row, hist, note in shown:
        name = md_code(row.output, in_table=True) + (f" ({md_text(' vs '.join(row.pair))})" if with_pair else "")
        if hist is None:
            blocks_.append([f"- {name}: {md_text(note)}"])
            continue
        cells = [name, f"`{blocks(hist, hist.counts)}`"]
        if with_baseline:
            cells.append(f"`{blocks(hist, hist.baseline)}`" if hist.baseline else "-")
        cells += [md_number(fmt(hist.edges[0])), md_number(fmt(hist.edges[-1])), md_number(fmt_threshold(row.atol))]
        words = md_text(caption(row, bool(hist.baseline)))
        pair = md_text(" vs ".join(row.pair))
        blocks_.append(
            [
                "| " + " | ".join(cells) + " |",
                f"{md_code(row.output)} ({pair}): {words}",
                "",
                *mermaid(hist, row.atol),
                "",
            ]
        )
    heads = ["output", "distribution", *(["baseline"] if with_baseline else []), "from", "to", "atol"]
    header, _ = _table(heads, [], len(heads) - 3)
    intro = (
        "**Distribution** of each output's checked statistic (abs error) over the iterations, in bins "
        f"from lowest to highest; `{ATOL_MARK}` marks atol:"
    )
    note = ""
    if len(rows) > MAX_CHARTS:
        note = f"Distributions of {MAX_CHARTS} of {len(rows)} outputs are shown (failing outputs first)."
    return blocks_, [intro, "", *header], note


def _details(summary: str, items: list[str]) -> list[str]:
    return [f"<details><summary>{summary}</summary>", "", *items, "", "</details>", ""] if items else []


def _assemble(
    parts: _Parts, message: str, kept_rows: list[int], failures: int, runtime: bool, note: str, charts: int = 0
) -> str:
    lines = [*parts.head, message, ""] + ([parts.where, ""] if parts.where else [])
    if kept_rows:
        lines += parts.table_header + [parts.rows[i] for i in kept_rows] + [""]
        errors = [parts.errors[i] for i in kept_rows if parts.errors[i]]
        if errors:
            lines += ["**Could not compare:**", "", *errors, ""]
        if parts.delta_rows:
            lines += parts.delta_header + [parts.delta_rows[i] for i in kept_rows] + [""]
    if charts:
        kept = parts.charts[:charts]
        table = [block[0] for block in kept if block[0].startswith("|")]
        notes = [block[0] for block in kept if not block[0].startswith("|")]
        lines += (parts.charts_head + table + [""] if table else []) + (notes + [""] if notes else [])
        if parts.charts_note and charts == len(parts.charts):
            lines += [parts.charts_note, ""]
        mermaid_blocks = [line for block in parts.charts[:charts] for line in block[1:]]
        if mermaid_blocks:
            lines += _details("Charts (Mermaid)", mermaid_blocks[:-1])
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
    roots=None,
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
        roots: folders whose absolute prefix is removed from paths in messages (default: the workspace,
            ``GITHUB_WORKSPACE``, and the working directory), so that they read as in the repository.
    """
    parts = _parts(result, run_url, commit, roots)
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
