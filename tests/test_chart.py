"""The distribution charts in the Markdown report: per output a row of Unicode blocks (any renderer)
and, folded away, a Mermaid ``xychart-beta``; bins laid out on atol; a one-line note for a distribution
that cannot be drawn and no chart heading over notes alone; escaping; the size budget (charts go first)."""

from __future__ import annotations

import math
import re

import pytest

from gate.report.chart import MAX_BINS, blocks, chart, histogram
from gate.report.markdown import MAX_CHARTS, render_markdown
from gate.results import GateResult, OutputVerdict, gate_result


def row(values, name="logits", passed=True, stat="max", baseline=None, atol=10.0, **extra) -> OutputVerdict:
    """atol above every value by default (bins of equal width from the lowest value)."""
    verdict = OutputVerdict(("onnxrt", "golden"), name, passed, stat=stat, atol=atol, rtol=1e-3, **extra)
    verdict.values = values
    if baseline is not None:
        verdict.baseline_found = True
        verdict.baseline_values = baseline
        verdict.baseline_abs = max((v for v in baseline if v is not None), default=None)
    return verdict


def result_of(rows) -> GateResult:
    return gate_result("model.onnx", "", rows, max(len(r.values or []) for r in rows), 0.0, {"k": "v"})


def parse(lines: list[str]) -> dict:
    """The Mermaid block's axis labels and series."""
    assert lines[0] == "```mermaid" and lines[2] == "xychart-beta" and lines[-1] == "```"
    assert lines[1] == '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "#0969da, #bc4c00"}}}}%%'
    body = "\n".join(lines)
    labels = re.search(r'x-axis "[^"]*" \[(.*)\]', body).group(1)
    return {
        "labels": [label.strip().strip('"') for label in labels.split(",")],
        "top": int(re.search(r"y-axis \"iterations\" 0 --> (\d+)", body).group(1)),
        "bar": [int(v) for v in re.search(r"bar \[(.*)\]", body).group(1).split(", ")],
        "line": [int(v) for v in m.group(1).split(", ")] if (m := re.search(r"line \[(.*)\]", body)) else None,
    }


def test_a_histogram_of_every_iteration_with_the_baseline_on_the_same_bins():
    values = [0.0, 0.1, 0.1, 0.25, 0.5, 0.95, 1.0]
    lines, note = chart(row(values, baseline=[0.0, 0.0, 0.5, 2.0]))
    assert note is None
    chart_data = parse(lines)
    assert len(chart_data["labels"]) == MAX_BINS == len(set(chart_data["labels"]))
    assert chart_data["labels"][-1] == "2"  # bins span both series: 0 .. 2
    assert sum(chart_data["bar"]) == len(values) and sum(chart_data["line"]) == 4
    # bins [0, .2], (.2, .4], ... (1.8, 2]: right-closed, as the labels (upper edges) say
    assert chart_data["bar"] == [3, 1, 1, 0, 2, 0, 0, 0, 0, 0]
    assert chart_data["line"] == [2, 0, 1, 0, 0, 0, 0, 0, 0, 1]
    assert chart_data["top"] == 10  # at least 10: the y axis ticks are whole iteration counts


def test_without_a_baseline_there_is_one_series_and_missing_iterations_are_skipped():
    lines, note = chart(row([1e-7, None, 3e-7, 2e-7]))
    data = parse(lines)
    assert note is None and data["line"] is None and sum(data["bar"]) == 3
    assert data["labels"][0] == "1.2e-07" and data["labels"][-1] == "3e-07"


def test_labels_get_the_digits_they_need_to_stay_distinct():
    lines, _ = chart(row([1.00001, 1.00002]))
    labels = parse(lines)["labels"]
    assert len(set(labels)) == MAX_BINS and labels[-1] == "1.00002"


@pytest.mark.parametrize(
    ("values", "note"),
    [
        ([0.0] * 8, "all 8 iterations have max abs error 0; no chart"),
        ([1e-3] * 3, "all 3 iterations have max abs error 0.001; no chart"),
        ([0.5], "one iteration: max abs error 0.5; no chart"),
        ([None, 0.25], "one iteration: max abs error 0.25; no chart"),
        ([math.nan, 0.1, 0.2], "1 of 3 iterations have a NaN or infinite max abs error; no chart"),
        ([0.1, math.inf, -math.inf], "2 of 3 iterations have a NaN or infinite max abs error; no chart"),
        ([None, None], "no max abs error to chart (no iteration has statistics, e.g. empty outputs)"),
        ([], "no max abs error to chart (no iteration has statistics, e.g. empty outputs)"),
        ([5e-324, 1e-323], "max abs error ranges from 4.9407e-324 to 9.8813e-324 over 2 iterations; no chart"),
    ],
)
def test_a_degenerate_distribution_is_a_one_line_note(values, note):
    assert chart(row(values)) == ([], note)
    markdown = render_markdown(result_of([row(values or [None])]))
    assert "```mermaid" not in markdown


def test_degenerate_notes_mention_the_baseline():
    assert chart(row([0.0, 0.0], baseline=[0.0, 0.5]))[1] == (
        "all 2 iterations have max abs error 0; the baseline's range from 0 to 0.5; no chart"
    )
    lines, note = chart(row([0.1, 0.2], baseline=[math.nan, 0.1]))  # a NaN baseline is left out
    assert note is None and parse(lines)["line"] is None


def test_elemwise_charts_the_max_and_a_foreign_statistic_name_never_reaches_mermaid():
    assert chart(row([0.0, 1.0], stat="elemwise"))[0][3].startswith('    x-axis "max abs error')
    lines, _ = chart(row([0.0, 1.0], stat='max"]\n```\n<img src=x>'))
    assert lines[3].startswith('    x-axis "checked abs error') and "<img" not in "\n".join(lines)


def test_markdown_shows_failing_outputs_first_and_at_most_max_charts():
    rows = [row([0.0, float(i + 1)], name=f"out_{i}", passed=i % 4 != 3) for i in range(MAX_CHARTS + 3)]
    markdown = render_markdown(result_of(rows))
    assert markdown.count("```mermaid") == MAX_CHARTS
    captions = re.findall(r"^`(out_\d+)` \(onnxrt vs golden\): max abs error per iteration", markdown, re.M)
    assert captions[:2] == ["out_3", "out_7"] and len(captions) == MAX_CHARTS
    assert f"Distributions of {MAX_CHARTS} of {MAX_CHARTS + 3} outputs are shown (failing outputs first)." in markdown
    assert markdown.index("| output |") < markdown.index("```mermaid") < markdown.index("<details><summary>Runtime")


def test_names_in_captions_are_escaped():
    markdown = render_markdown(result_of([row([0.0, 1.0], name="a`b|@team [x](http://e.vil)")]))
    caption = next(line for line in markdown.splitlines() if "max abs error per iteration" in line)
    assert caption.startswith("``a`b|@team [x](http://e.vil)`` (onnxrt vs golden)")


def test_charts_are_dropped_first_to_fit_the_budget():
    rows = [row([0.0, 0.5 * (i + 1), 0.25], name=f"o{i}") for i in range(4)]
    result = result_of(rows)
    full = render_markdown(result)
    without_charts = render_markdown(result, budget=len(full.encode()) - 1)
    assert "the runtime facts" not in without_charts  # runtime facts stay while charts go
    assert "charts are shown" in without_charts or "the charts are left out" in without_charts
    assert without_charts.count("```mermaid") < 4 and len(without_charts.encode()) < len(full.encode())
    tight = render_markdown(result, budget=900)
    assert len(tight.encode()) <= 900 and "```mermaid" not in tight
    assert "the charts are left out" in tight
    for budget in (300, 600, 1200, 2000, 4000):
        assert len(render_markdown(result, budget=budget).encode()) <= budget


def test_bins_are_laid_out_on_atol_and_the_blocks_mark_it():
    hist, note = histogram(row([0.0, 0.05, 0.1, 0.3, 0.35, 1.0], atol=0.31))
    assert note is None and hist.edges[0] == 0.0 and hist.edges[-1] == 1.0
    assert len(hist.counts) == MAX_BINS + 1 and sum(hist.counts) == 6
    k = hist.above.index(True)
    assert hist.edges[k] == pytest.approx(0.31) and not any(hist.above[:k]) and all(hist.above[k:])
    # [0, 0.01], (0.01, 0.11], ... (0.21, 0.31] | (0.31, 0.41], ... (0.91, 1]: 4 values at or below atol
    assert sum(hist.counts[:k]) == 4 and sum(hist.counts[k:]) == 2
    assert blocks(hist, hist.counts) == "▄█·▄┃▄·····▄"
    lines, _ = chart(row([0.0, 0.05, 0.1, 0.3, 0.35, 1.0], atol=0.31))
    assert parse(lines)["labels"][k - 1] == "atol" and '"max abs error (bin upper edge), atol 0.31"' in lines[3]


def test_atol_outside_the_range_is_said_in_the_axis_title():
    below, _ = chart(row([0.5, 1.0], atol=0.1))
    above, _ = chart(row([0.5, 1.0], atol=2.0))
    assert '"max abs error (bin upper edge), atol 0.1 below every bin"' in below[3]
    assert '"max abs error (bin upper edge), atol 2 above every bin"' in above[3]


def test_the_chart_section_renders_exactly():
    rows = [row([0.0, 0.05, 0.1, 0.3, 0.35, 1.0], name="y", passed=False, atol=0.31), row([0.0] * 6, name="s")]
    markdown = render_markdown(result_of(rows))
    section = markdown.split("**Distribution**", 1)[1].split("<details><summary>Failures", 1)[0]
    mermaid = "\n".join(chart(rows[0])[0])
    assert section == "\n".join(
        [
            " of each output's checked statistic (abs error) over the iterations, in bins from lowest to highest;"
            " `┃` marks atol:",
            "",
            "| output | distribution | from | to | atol |",
            "|---|---|--:|--:|--:|",
            "| `y` | `▄█·▄┃▄·····▄` | 0 | 1 | 0.31 |",
            "",
            "- `s`: all 6 iterations have max abs error 0; no chart",
            "",
            "<details><summary>Charts (Mermaid)</summary>",
            "",
            "`y` (onnxrt vs golden): max abs error per iteration (6 iterations), atol 0.31",
            "",
            mermaid,
            "",
            "</details>",
            "",
            "",
        ]
    )


def test_no_chart_heading_when_nothing_can_be_drawn():
    markdown = render_markdown(result_of([row([0.0] * 8, name="y"), row([0.0] * 8, name="s")]))
    assert "Distribution" not in markdown and "no chart" not in markdown and "mermaid" not in markdown
