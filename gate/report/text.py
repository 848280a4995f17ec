"""A plain-text result table for terminals and CI logs."""

from __future__ import annotations

from gate.report.escape import visible
from gate.results import GateResult, fmt, fmt_delta, fmt_func_value, fmt_threshold, plural

MIN_FUNCS = ("cosine", "psnr", "snr")


def fmt_metric(row) -> str:
    """A metric's value; cosine similarities with 9 digits (0.99999 and 1 differ)."""
    return fmt_func_value(row.func, row.abs_value)


VERDICTS = {"passed": "PASSED", "regressed": "REGRESSED", "error": "ERROR (could not evaluate)"}
RAN = "RAN"
"""The verdict word of a run that compared nothing (one runner, no --load-outputs; exit 0): not PASSED."""


def verdict_word(result: GateResult) -> str:
    return RAN if result.nothing_compared else VERDICTS[result.status]


def nothing_ran(result: GateResult) -> bool:
    """An error found before any iteration was compared (a bad input, a session that could not be
    made): no rows and no iterations, so the reports show the error alone, without an empty table or
    a "0 iterations" count."""
    return result.status == "error" and not result.rows and not result.iterations


HEADERS = ("output", "stat", "abs error", "atol", "rel error", "rtol", "failed iters", "result")
BASELINE_HEADERS = ("Δ abs", "Δ rel")
"""With a baseline: this run's abs / rel error minus the baseline's (``new`` for an output it lacks)."""


FUNC_HEADERS = {"abs error": "abs error / value", "atol": "atol / bound"}
"""With rows of other compare functions (``gate.compare_funcs``): their value and bound share the
abs error and atol columns."""


def headers_of(result: GateResult) -> tuple[str, ...]:
    """The table's column names: HEADERS (renamed by FUNC_HEADERS when other compare functions have
    rows), plus the delta columns when there is a baseline."""
    headers = HEADERS
    if any(row.func != "simple" for row in result.rows):
        headers = tuple(FUNC_HEADERS.get(name, name) for name in headers)
    return headers + BASELINE_HEADERS if result.baseline else headers


def _verdict_cell(row) -> str:
    if not row.verdict:
        return f"{'pass' if row.within else 'FAIL'} (report only)"
    if row.regressed:
        return "REGRESSED"
    if row.known_failure:
        return "FAIL (as baseline)"
    if row.on_average_only():  # some iteration is out of tolerance: a caveat, as the action's warning
        return "pass (avg)"
    return "pass" if row.passed else "FAIL"


def average_note(row) -> str:
    """For a row that passes on average only (``OutputVerdict.on_average_only``): ``; passes on
    average only: 2 of 4 iterations out of tolerance (iterations 1, 3)``, naming at most 5 (the worst
    one where the row does not know them: merged from partial files); else ""."""
    if not row.on_average_only():
        return ""
    names = row.failed_indices or ([row.worst_iteration] if row.failed_iterations == 1 else [])
    if names:
        shown = ", ".join(str(i) for i in names[:5]) + (", ..." if len(names) > 5 else "")
        where = f"iteration{'s' if len(names) > 1 else ''} {shown}"
    else:
        where = f"the worst: iteration {row.worst_iteration}"
    over = f"{row.failed_iterations} of {row.iterations} iterations out of tolerance"
    return f"; passes on average only: {over} ({where})"


def rows_of(result: GateResult) -> list[tuple[str, ...]]:
    """The table's cells, shared by the text and Markdown renderers."""
    cells = []
    for row in result.rows:
        if row.error:
            # A long reason (a dtype advice with both file paths, ~230 characters) would stretch the table;
            # the verdict line below the table names every output that could not be compared, with why.
            reason = f"ERROR: {row.error}" if len(row.error) <= 60 else "ERROR (the reason is below the table)"
            cell = (visible(row.output), "-", "-", "-", "-", "-", "-", reason)
        else:
            stat = row.stat if row.quantile is None else f"{row.stat} {fmt_threshold(row.quantile)}"
            stat = f"{stat} (avg)" if row.averaged and row.func != "task" else stat
            failed = "-" if row.averaged else f"{row.failed_iterations}/{row.iterations}"
            if row.allowed_failures and not row.averaged:
                failed += f" (allowed {row.allowed_failures})"
            if row.func != "simple":
                side = "min " if row.func in MIN_FUNCS else "max "
                bound = "-" if row.func == "indices" else side + fmt_threshold(row.threshold)
                value = f"{fmt(100 * row.abs_value)}% agree" if row.func == "indices" else fmt_metric(row)
                if row.func == "task":
                    delta = 100 * (row.abs_value - row.reference)
                    value = f"{fmt(100 * row.abs_value)}% (ref {fmt(100 * row.reference)}%, {delta:+.3g} pts)"
                    bound = row.criterion
                cells.append((row.output, stat, value, bound, "-", "-", failed, _verdict_cell(row)))
                task_delta = "new" if row.baseline_abs is None else f"{fmt_delta(100 * row.delta_abs)} pts"
                cells[-1] += ((task_delta if row.func == "task" else "-"), "-") if result.baseline else ()
                continue
            cell = (
                visible(row.output),  # a line break or zero-width character shows, escaped
                stat,
                fmt(row.abs_value),
                "-" if row.exact else fmt_threshold(row.atol),
                fmt(row.rel_value),
                "-" if row.exact else fmt_threshold(row.rtol),
                failed,
                _verdict_cell(row),
            )
        if result.baseline:
            if row.error:
                cell += ("-", "-")
            elif not row.baseline_found:
                cell += ("new", "new")
            else:
                cell += (fmt_delta(row.delta_abs), fmt_delta(row.delta_rel))
        cells.append(cell)
    return cells


def scope_line(result: GateResult) -> str:
    """What the rows cover besides the iteration count: shard, baseline and failure mode, or ""."""
    parts = [result.scope] if result.scope else []
    if result.baseline:
        parts.append(f"baseline {result.baseline}")
    if result.fail_on == "regression":
        parts.append("fails only on regression against the baseline")
    return "; ".join(parts)


def render_text(result: GateResult, details: bool = False) -> str:
    """An aligned table, one row per output, and the final verdict line; with ``details`` (the CLI:
    on failure, and with -v; never with -q) each compared output's statistics below the table
    (``gate.report.details``)."""
    headers = headers_of(result)
    table = [headers, *rows_of(result)]
    widths = [max(len(r[i]) for r in table) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in table]
    lines.insert(1, "  ".join("-" * w for w in widths))
    pairs = sorted({f"{row.pair[0]} vs {row.pair[1]}" for row in result.rows})
    header = f"accuracy-gate: {result.model}, {plural(result.iterations, 'iteration')}" + (
        f", {', '.join(pairs)}" if pairs else ""
    )
    scope = scope_line(result)
    header_lines = [header] + ([scope] if scope else []) + ([f"inputs: {result.inputs}"] if result.inputs else [])
    if not result.rows and result.status == "passed":  # accuracy-gate run with one runner: nothing compared
        lines = []
    if nothing_ran(result):
        header_lines, lines = [], []
    if details:
        from gate.report.details import render_details

        lines += render_details(result)
    above = [*header_lines, *lines, *runtime_lines(result)]
    return "\n".join(
        [*above, "", f"{verdict_word(result)}: {result.message}"]
        if above
        else [f"{verdict_word(result)}: {result.message}"]
    )


GPU_FACTS = (
    ("gpu_name", "GPU {}"),
    ("gpu_compute_capability", "compute capability {}"),
    ("gpu_driver", "driver {}"),
    ("cuda_runtime_version", "CUDA runtime {}"),
    ("cudnn_version", "cuDNN {}"),
    ("tensorrt_version", "TensorRT {}"),
)


def runtime_lines(result: GateResult) -> list[str]:
    """The GPU and execution providers a run used, and any note on its precision (``gate.backend.
    gpu_facts``), for the terminal; the other reports list every fact."""
    facts = result.facts
    gpu = ", ".join(text.format(facts[key]) for key, text in GPU_FACTS if facts.get(key))
    lines = [f"runtime: {gpu}"] if gpu else []
    if facts.get("onnxrt_providers") and (gpu or "(" in facts["onnxrt_providers"]):
        lines.append(f"execution providers: {facts['onnxrt_providers']}")
    if facts.get("note"):
        lines.append(f"note: {facts['note']}")
    return [""] + lines if lines else []
