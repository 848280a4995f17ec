"""Distribution charts that read everywhere: per output, a histogram of the checked statistic's
absolute error over the iterations, drawn first as Unicode block characters in a Markdown table (any
Markdown renderer shows it) and, as an extra, as a Mermaid ``xychart-beta`` block (GitHub draws it;
older renderers, GHES and preview tools may show its source instead, so it is folded away).

The bins are right-closed, ``(lower, upper]``, of equal width between the smallest and the largest
value (of this run and, with a partial baseline, of the baseline's per-iteration values too). When
``atol`` lies inside that range, the bins are laid out so that ``atol`` is a bin edge (the first and
last bins may then be narrower, as they end at the smallest and largest values): every bin is
then wholly at or below ``atol`` or wholly above it, shown as ``┃`` in the block characters and in the
Mermaid chart's axis label. The baseline's values, binned the same way, are a second row of blocks and a
line in Mermaid. A distribution that cannot be drawn (no values, a NaN or infinity, one iteration,
all values equal, e.g. all zero) gives a one-line note instead.

Nothing from the model or the data goes into the Mermaid block: names are in the Markdown caption
(escaped by the caller), and the block holds only numbers formatted here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gate.results import OutputVerdict, fmt, fmt_threshold

MAX_BINS = 10
BLOCKS = "▁▂▃▄▅▆▇█"
EMPTY_BIN = "·"
ATOL_MARK = "┃"
COLOURS = ("#0969da", "#bc4c00")
"""Mermaid series colours (GitHub's Primer blue and orange): this run's bars, the baseline's line."""


@dataclass
class Histogram:
    """``counts[k]`` values in bin ``k`` = ``(edges[k], edges[k + 1]]`` (the first bin also holds its
    lower edge); ``above[k]``: the bin lies above ``atol``; ``baseline``: the baseline's counts."""

    stat: str
    edges: list[float]
    counts: list[int]
    above: list[bool]
    baseline: list[int] | None

    @property
    def top(self) -> int:
        return max(self.counts + (self.baseline or []))


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


def _counts(values: list[float], low: float, width: float, bins: int) -> list[int]:
    counts = [0] * bins
    for value in values:
        counts[min(max(math.ceil((value - low) / width) - 1, 0), bins - 1)] += 1
    return counts


def stat_name(row: OutputVerdict) -> str:
    """The statistic charted (elemwise is judged by its max); a name from a file that is not one of
    ours reads as "checked", so that it cannot reach the Mermaid block."""
    if row.stat == "elemwise" or row.exact:  # an exact output is judged by its max difference
        return "max"
    return row.stat if row.stat in ("max", "mean", "median", "quantile") else "checked"


def histogram(row: OutputVerdict) -> tuple[Histogram | None, str | None]:
    """``(histogram, None)`` for the row's per-iteration distribution, or ``(None, note)`` when it cannot
    be drawn. Never raises for any values (None, NaN, inf, one, all equal)."""
    stat = stat_name(row)
    values, bad = _finite(row.values)
    count = len(values) + bad
    if count == 0:
        return None, f"no {stat} abs error to chart (no iteration has statistics, e.g. empty outputs)"
    if bad:
        return None, f"{bad} of {count} iterations have a NaN or infinite {stat} abs error; no chart"
    if count == 1:
        extra = f" (baseline {fmt(row.baseline_abs)})" if row.baseline_found else ""
        return None, f"one iteration: {stat} abs error {fmt(values[0])}{extra}; no chart"
    if min(values) == max(values):
        base, _ = _finite(row.baseline_values)
        extra = f"; the baseline's range from {fmt(min(base))} to {fmt(max(base))}" if base else ""
        return None, f"all {count} iterations have {stat} abs error {fmt(values[0])}{extra}; no chart"
    base = [float(v) for v in row.baseline_values if v is not None] if has_baseline_series(row) else []
    low, high = min(values + base), max(values + base)
    width = (high - low) / MAX_BINS
    if not math.isfinite(width) or width <= 0 or low + width == low:  # a range too narrow for floats
        return None, f"{stat} abs error ranges from {fmt(low)} to {fmt(high)} over {count} iterations; no chart"
    atol = row.atol if row.atol is not None and math.isfinite(row.atol) else None
    bins = MAX_BINS
    start = low
    if atol is not None and low < atol < high:  # whole bins on each side of atol: MAX_BINS or one more
        below = math.ceil((atol - low) / width)
        start, bins = atol - below * width, below + math.ceil((high - atol) / width)
    edges = [start + width * k for k in range(bins + 1)]
    edges[0], edges[-1] = low, high  # the first and last bins may be narrower: they end at the values
    above = [atol is not None and edges[k] >= atol * (1 - 1e-12) for k in range(bins)]
    if atol is not None and atol >= high:
        above = [False] * bins
    baseline = _counts(base, start, width, bins) if base else None
    return Histogram(stat, edges, _counts(values, start, width, bins), above, baseline), None


def blocks(hist: Histogram, counts: list[int]) -> str:
    """The bins as block characters scaled to the tallest bin of ``counts`` (each series shows its own
    shape; the counts are in the Mermaid chart), ``·`` for an empty bin and ``┃`` at atol, e.g.
    ``▁▃█▅▂┃··▂``."""
    top = max(max(counts), 1)
    cells = [EMPTY_BIN if c == 0 else BLOCKS[max(math.ceil(c / top * len(BLOCKS)), 1) - 1] for c in counts]
    for k in range(1, len(cells)):
        if hist.above[k] and not hist.above[k - 1]:
            cells.insert(k, ATOL_MARK)
            break
    return "".join(cells)


def mermaid(hist: Histogram, atol: float | None = None) -> list[str]:
    """A Mermaid ``xychart-beta`` block: bars for this run, a line for the baseline, in GitHub's blue
    and orange; the bin edge that is atol is labelled ``atol`` (the axis title gives its value), or the
    title says where atol lies; the y axis runs from 0 to 10 or more, so its ticks are whole counts.

    (Two bar series, green at or below atol and red above, would draw every empty bin as a stub of
    the last series' colour: xychart lifts 0 above the axis line.)"""
    labels = _labels(hist.edges[1:])
    title = f"{hist.stat} abs error (bin upper edge)"
    marked = [k for k in range(1, len(hist.above)) if hist.above[k] and not hist.above[k - 1]]
    if marked:  # the edge that is atol reads "atol" (a longer label would collide with its neighbours)
        labels[marked[0] - 1] = "atol"
        title += f", atol {fmt_threshold(atol)}"
    elif atol is not None:
        title += f", atol {fmt_threshold(atol)} {'above' if not any(hist.above) else 'below'} every bin"
    lines = [
        "```mermaid",
        f'%%{{init: {{"themeVariables": {{"xyChart": {{"plotColorPalette": "{", ".join(COLOURS)}"}}}}}}}}%%',
        "xychart-beta",
        f'    x-axis "{title}" [{", ".join(f"{chr(34)}{label}{chr(34)}" for label in labels)}]',
        f'    y-axis "iterations" 0 --> {max(10, hist.top)}',
        f"    bar [{', '.join(map(str, hist.counts))}]",
    ]
    if hist.baseline:
        lines.append(f"    line [{', '.join(map(str, hist.baseline))}]")
    return [*lines, "```"]


def chart(row: OutputVerdict) -> tuple[list[str], str | None]:
    """``(mermaid block lines, None)``, or ``([], note)`` when the distribution cannot be drawn."""
    hist, note = histogram(row)
    return (mermaid(hist, row.atol), None) if hist else ([], note)


def caption(row: OutputVerdict, with_baseline: bool) -> str:
    """What the Mermaid chart shows, in words (the output's name is added by the caller, escaped)."""
    stat = stat_name(row)
    text = f"{stat} abs error per iteration ({len([v for v in row.values or [] if v is not None])} iterations)"
    text += f", atol {fmt_threshold(row.atol)}"
    if with_baseline:
        text += "; bars: this run, line: baseline"
    return text


def has_baseline_series(row: OutputVerdict) -> bool:
    base, bad = _finite(row.baseline_values)
    return bool(base) and not bad
