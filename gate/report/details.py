"""Per-output details for the terminal (``accuracy-gate check|run`` on failure, and with -v), at
least what ``polygraphy run`` prints for each compared output: the minimum tolerance that would
pass, the worst element with both values, the mismatch count and share, and for a failed output
the mean / median / max / std of the absolute and relative error with a compact histogram of the
absolute error (``OutputVerdict.details``, from ``gate.comparator.details``). An output compared
exactly (``row.exact``) shows what means something there: how many elements differ and their share,
the largest difference with both values, and for integers the differences' statistics."""

from __future__ import annotations

from gate.results import GateResult, OutputVerdict, fmt, fmt_value

BAR = 30  # the histogram's widest bar, in characters


def _stats_line(label: str, stats: dict) -> str:
    text = f"    {label}: mean {fmt(stats['mean'])}, median {fmt(stats['median'])}, max {fmt(stats['max'])}, "
    text += f"std {fmt(stats['std'])}"
    if stats.get("non_finite"):
        text += f" ({stats['non_finite']} NaN or Inf left out)"
    return text


EDGE_DIGITS = 9  # the most significant digits a bin edge is printed with; a finer spread is one line


def _digits(values: list[float], most: int = 17) -> int:
    """The fewest significant digits (5 at least, ``most`` at most) that print every two consecutive
    ``values`` differently (``most`` where none does)."""
    for digits in range(5, most + 1):
        texts = [f"{value:.{digits}g}" for value in values]
        if all(a != b for a, b in zip(texts, texts[1:])):
            return digits
    return most


def _histogram(bins, title: str = "abs error histogram", noun: str = "abs errors") -> list[str]:
    if len(bins) == 1 and bins[0][0] == bins[0][1]:  # every value the same: no chart to draw
        low, _, count = bins[0]
        return [f"    {title}: all {count} {noun} equal {fmt(low)}"]
    if not bins:  # no finite value to chart (every error NaN or Inf: the stats line counts them)
        return [f"    {title}:"]
    edges = [bins[0][0], *(high for _, high, _ in bins)]
    digits = _digits(edges)
    if digits > EDGE_DIGITS:  # bins finer than the printed edges: say where the values lie instead
        low, high = edges[0], edges[-1]
        span = _digits([low, high])
        total = sum(count for _, _, count in bins)
        return [f"    {title}: all {total} {noun} within [{low:.{span}g}, {high:.{span}g}]"]
    texts = [f"{edge:.{digits}g}" for edge in edges]
    width = max(10, *(len(text) for text in texts))
    top = max((count for _, _, count in bins), default=0) or 1
    lines = [f"    {title}:"]
    for i, (_, _, count) in enumerate(bins):
        lines.append(
            f"      [{texts[i]:>{width}}, {texts[i + 1]:>{width}}] {count:>9} {'#' * round(BAR * count / top)}"
        )
    return lines


def minimum_tolerance(row: OutputVerdict) -> str:
    """The tolerance that would pass this row, as Polygraphy's "Minimum Required Tolerance"."""
    stat = "elemwise" if row.stat == "elemwise" else f"{row.stat} error"
    return (
        f"    minimum tolerance to pass ({stat}): atol >= {fmt(row.abs_value)} or rtol >= {fmt(row.rel_value)} "
        "(less may do with both set)"
    )


def _exact_lines(row: OutputVerdict) -> list[str]:
    """An exactly compared output: no tolerance applies, so the differing elements only."""
    if row.passed or not row.mismatch_count or not row.num_elements:
        return []
    share = 100.0 * row.mismatch_count / row.num_elements
    where = "" if row.worst_iteration is None else f" in iteration {row.worst_iteration}"
    lines = [f"    differing elements: {row.mismatch_count} of {row.num_elements} ({share:.3g}%){where}"]
    found = row.details if row.details and row.details.get("exact") else None
    if found and found.get("largest"):
        index, value0, value1, absdiff = found["largest"]
        label = "largest difference" if absdiff is not None else "first differing element"
        size = f"{fmt(absdiff)} at " if absdiff is not None else ""
        lines.append(
            f"    {label}: {size}element {list(index)} ({row.pair[0]} {fmt_value(value0)} vs {row.pair[1]} "
            f"{fmt_value(value1)})"
        )
    if found and found.get("abs"):
        lines.append(_stats_line("abs difference of the differing elements", found["abs"]))
        lines += _histogram(found["histogram"], "abs difference histogram (differing elements)", "differences")
    return lines


def render_row(row: OutputVerdict) -> list[str]:
    """One output's block: its verdict line (the worst element with both values, where it failed),
    then what is known of it."""
    lines = [f"{row.output} ({row.pair[0]} vs {row.pair[1]}): {row.message()}"]
    if row.exact and not row.error:
        return lines + _exact_lines(row)
    if row.error or row.abs_value is None or row.func != "simple":  # a compare function has no atol/rtol
        return lines
    lines.append(minimum_tolerance(row))
    # The lines below describe one iteration, the worst (its rel error may be below the worst rel error
    # of another iteration, named in the verdict line).
    at = "" if row.worst_iteration is None else f" in iteration {row.worst_iteration}"
    if row.mismatch_count is not None and row.num_elements:
        share = 100.0 * row.mismatch_count / row.num_elements
        lines.append(f"    out of tolerance{at}: {row.mismatch_count} of {row.num_elements} elements ({share:.3g}%)")
    if row.details:
        lines += [_stats_line(f"abs error{at}", row.details["abs"]), _stats_line(f"rel error{at}", row.details["rel"])]
        lines += _histogram(row.details["histogram"])
    return lines


def render_details(result: GateResult) -> list[str]:
    """Lines below the table: one block per output (failed ones first)."""
    lines = []
    for row in sorted(result.rows, key=lambda row: row.passed):
        lines += ["", *render_row(row)]
    return lines


__all__ = ["minimum_tolerance", "render_details", "render_row"]
