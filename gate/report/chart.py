"""Charts that GitHub draws itself: a Mermaid ``xychart-beta`` block in the Markdown, rendered in the
job summary and the PR comment with no image host.

Per output, a histogram of the checked statistic's absolute error over the iterations (bars), and
the baseline's histogram over the same bins (a line), when the baseline has per-iteration values. A
distribution that cannot be drawn (no values, a NaN or infinity, one iteration, all values equal,
e.g. all zero) gives a one-line note instead.

Nothing from the model or the data goes into the Mermaid block: names are in the Markdown caption
(escaped there), and the block holds only numbers formatted here.
"""

from __future__ import annotations

import math

from gate.results import OutputVerdict, fmt

MAX_BINS = 10


def _finite(values) -> tuple[list[float], int]:
    present = [float(v) for v in values or [] if v is not None]
    finite = [v for v in present if math.isfinite(v)]
    return finite, len(present) - len(finite)


def _labels(edges: list[float]) -> list[str]:
    """Upper bin edges with as few significant digits as keep them distinct."""
    for digits in range(2, 10):
        labels = [f"{edge:.{digits}g}" for edge in edges]
        if len(set(labels)) == len(labels):
            return labels
    return [repr(edge) for edge in edges]


def _histogram(values: list[float], low: float, width: float, bins: int) -> list[int]:
    counts = [0] * bins
    for value in values:
        counts[min(max(int((value - low) / width), 0), bins - 1)] += 1
    return counts


def stat_name(row: OutputVerdict) -> str:
    """The statistic charted (elemwise is judged by its max); a name from a file that is not one of
    ours reads as "checked", so that it cannot reach the Mermaid block."""
    if row.stat == "elemwise":
        return "max"
    return row.stat if row.stat in ("max", "mean", "median", "quantile") else "checked"


def chart(row: OutputVerdict) -> tuple[list[str], str | None]:
    """``(mermaid block lines, None)`` for the row's per-iteration distribution, or ``([], note)``
    when it cannot be drawn. Never raises for any values (None, NaN, inf, one, all equal)."""
    stat = stat_name(row)
    values, bad = _finite(row.values)
    count = len(values) + bad
    if count == 0:
        return [], f"no {stat} abs error to chart (no iteration has statistics, e.g. empty outputs)"
    if bad:
        return [], f"{bad} of {count} iterations have a NaN or infinite {stat} abs error; no chart"
    if count == 1:
        extra = f" (baseline {fmt(row.baseline_abs)})" if row.baseline_found else ""
        return [], f"one iteration: {stat} abs error {fmt(values[0])}{extra}; no chart"
    if min(values) == max(values):
        base, _ = _finite(row.baseline_values)
        extra = ""
        if base:
            extra = f"; the baseline's range from {fmt(min(base))} to {fmt(max(base))}"
        return [], f"all {count} iterations have {stat} abs error {fmt(values[0])}{extra}; no chart"
    base = row.baseline_values if has_baseline_series(row) else []
    base = [float(v) for v in base if v is not None]
    low, high = min(values + base), max(values + base)
    width = (high - low) / MAX_BINS
    if not math.isfinite(width) or width <= 0 or low + width == low:  # a range too narrow for floats
        return [], f"{stat} abs error ranges from {fmt(low)} to {fmt(high)} over {count} iterations; no chart"
    bins = MAX_BINS
    edges = [low + width * (k + 1) for k in range(bins)]
    edges[-1] = high
    counts = _histogram(values, low, width, bins)
    labels = ", ".join(f'"{label}"' for label in _labels(edges))
    lines = ["```mermaid", "xychart-beta", f'    x-axis "{stat} abs error (bin upper edge)" [{labels}]']
    series = [counts]
    if base:
        series.append(_histogram(base, low, width, bins))
    top = max(max(s) for s in series)
    lines.append(f'    y-axis "iterations" 0 --> {top}')
    lines.append(f"    bar [{', '.join(str(c) for c in counts)}]")
    if len(series) > 1:
        lines.append(f"    line [{', '.join(str(c) for c in series[1])}]")
    lines.append("```")
    return lines, None


def caption(row: OutputVerdict, with_baseline: bool) -> str:
    """What the chart shows, in words (the output's name is added by the caller, escaped)."""
    stat = stat_name(row)
    text = f"{stat} abs error per iteration ({len([v for v in row.values or [] if v is not None])} iterations)"
    if with_baseline:
        text += "; bars: this run, line: baseline"
    return text


def has_baseline_series(row: OutputVerdict) -> bool:
    base, bad = _finite(row.baseline_values)
    return bool(base) and not bad
