"""Comparing a run with a baseline: the results of the same gate on the base branch.

A baseline is a results file (``accuracy-gate-report`` v1, e.g. the artifact of the last run on
``main``) or partial result files (``accuracy-gate-partial`` v1: one complete file, or every shard of
a split, merged first). Each row of this run gets the baseline's value of the same statistic and the
delta (this run minus the baseline). A partial baseline also gives the per-iteration distribution,
which the Markdown chart shows as a second series.

``fail_on = "regression"`` judges rows against the baseline instead of only the tolerances: a row
fails when its checked statistic's absolute error got worse than the baseline's by more than the
margin, when it is out of tolerance now but was within it on the baseline, or when it failed in
more iterations than on the baseline (a larger share, where the runs have different numbers of
iterations). A row out of tolerance on both, not worse by more than the margin and failing in no
more iterations, passes as a known failure. An output the
baseline does not have is judged by its tolerances alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from gate.errors import GateError
from gate.per_output import output_lineage, value_for_output
from gate.results import ERROR, PASSED, REGRESSED, GateResult, OutputVerdict, fmt, fmt_threshold

FAIL_ON = ("threshold", "regression")


@dataclass(frozen=True)
class Margin:
    """How much worse than the baseline a statistic may get: ``value`` in the statistic's own units
    (like atol), or, when ``relative``, as a fraction of the baseline's value (``"5%"`` -> 0.05)."""

    value: float = 0.0
    relative: bool = False

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g}"

    def allows(self, current: float, base: float) -> bool:
        """Whether ``current`` is at most the baseline ``base`` plus this margin. NaN is worse than any
        number; equal values (infinities included) are never worse."""
        if math.isnan(current):
            return math.isnan(base)
        if math.isnan(base) or current <= base:
            return True
        limit = base * (1.0 + self.value) if self.relative else base + self.value
        return current <= limit


def parse_margin(raw: str) -> Margin:
    """``"0.001"`` or ``"5%"`` -> Margin.

    Raises:
        ValueError: not a non-negative finite number (or percentage).
    """
    text = str(raw).strip()
    relative = text.endswith("%")
    value = float(text[:-1] if relative else text)
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{raw!r} is not a non-negative number")
    return Margin(value / 100.0 if relative else value, relative)


def parse_margins(values, setting: str):
    """``polygraphy run``-style per-output margins (``[<output>:]<margin>``): a Margin, or a dict
    whose ``""`` entry is the default.

    Raises:
        GateError: a value that is not a non-negative number or percentage, naming the setting.
    """
    from gate.per_output import parse_per_output

    return parse_per_output(values, parse_margin, setting, "an abs error margin such as 1e-4 or a share such as 5%")


def margin_for(margins, output: str) -> Margin:
    if isinstance(margins, dict):
        return value_for_output(margins, output, Margin())  # a structured output's leaf: its output's
    return margins if isinstance(margins, Margin) else Margin()


def describe_margins(margins) -> str:
    if isinstance(margins, dict):
        return ", ".join(f"{name}: {m}" if name else str(m) for name, m in margins.items())
    return str(margin_for(margins, ""))


@dataclass
class Baseline:
    """The baseline's rows by ``(runner pair, output)``, its model, and where it came from."""

    source: str
    model: str
    rows: dict
    description: str
    task_rows: dict = field(default_factory=dict)  # task metrics by (runner pair, output, metric)


def load_baseline(paths) -> Baseline:
    """Reads a baseline: one results file, or partial result files (files or folders; several are
    merged as the shards of one split).

    Raises:
        GateError: a missing or corrupt file, an unknown schema, an incomplete set of shards, or a
            baseline that could not be evaluated; one line naming the file.
    """
    from gate.compared_run import result_of
    from gate.merge import merge_runs, partial_files
    from gate.partial_file import SCHEMA as PARTIAL
    from gate.partial_file import read_partial
    from gate.results_file import SCHEMA as REPORT
    from gate.results_file import read_untrusted_report
    from gate.strict_json import load_json

    paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
    files = partial_files(paths)
    source = ", ".join(str(p) for p in paths)
    documents = [(path, load_json(path, "baseline file")) for path in files]
    schemas = {doc.get("schema") for _, doc in documents}
    if schemas == {REPORT} and len(documents) == 1:
        result = read_untrusted_report(files[0]).result
        if (result.scope or "").startswith("shard "):
            scope = result.scope[:80] if result.scope[:80].isprintable() else repr(result.scope[:80])  # untrusted
            raise GateError(
                f"{files[0]}: this results file covers only {scope}; use the merged run's results file "
                "(or every shard's partial result files) as the baseline."
            )
    elif schemas == {PARTIAL}:
        run = merge_runs([(str(path), read_partial(path, doc)) for path, doc in documents])
        result = result_of(run)
    elif REPORT in schemas:
        raise GateError(f"{source}: give one results file as the baseline, or the partial result files of one run.")
    else:
        path, doc = next((p, d) for p, d in documents if d.get("schema") not in (REPORT, PARTIAL))
        raise GateError(
            f"{path}: not a results file ({REPORT}) or partial result file ({PARTIAL}); cannot use it as a baseline."
        )
    if result.status == ERROR:
        raise GateError(
            f"{source}: the baseline run could not be evaluated ({result.message[:300]}); use a complete run."
        )
    commit = ""
    if len(documents) == 1 and isinstance(documents[0][1].get("commit"), str):
        commit = f", commit {documents[0][1]['commit'][:12]}"
    description = f"{Path(files[0]).name if len(files) == 1 else source} ({result.iterations} iterations{commit})"
    return Baseline(
        source=source,
        model=result.model,
        rows={(tuple(row.pair), row.output): row for row in result.rows if row.func == "simple"},
        description=description,
        task_rows={(tuple(r.pair), r.output, r.stat): r for r in result.rows if r.func == "task" and not r.error},
    )


def _tolerance_passed(row: OutputVerdict) -> bool:
    """The row's verdict under its tolerances alone (a known failure passed the gate, not them)."""
    return row.passed if row.within_tolerance is None else row.within_tolerance


def apply_baseline(result: GateResult, baseline: Baseline, fail_on: str = "threshold", margins=None) -> GateResult:
    """Adds the baseline's values to every row of ``result`` (in place, also returned) and, with
    ``fail_on="regression"``, re-judges the rows and the verdict against it (module docstring).

    Raises:
        GateError: the baseline is for another model, checks an output with another statistic, or has
            none of this run's outputs.
    """
    if fail_on not in FAIL_ON:
        raise GateError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {fail_on!r}.")
    result.baseline = baseline.description
    result.fail_on = fail_on
    if baseline.model != result.model:
        raise GateError(
            f"{baseline.source}: the baseline is for model {baseline.model}, this run is for {result.model}; "
            "use a baseline of the same gate."
        )
    if isinstance(margins, dict):
        outputs = {name for row in result.rows for name in output_lineage(row.output)}  # out[0]: out too
        unknown = [name for name in margins if name and name not in outputs]
        if unknown:
            raise GateError(
                f"regression_margin names output '{unknown[0]}', which this run does not have; its outputs are "
                f"{sorted(outputs)}."
            )
    matched = 0
    failed_before = {}  # id(row) -> the baseline's (failed iterations, iterations) of the row's output
    for row in result.rows:  # a task metric's delta is shown; the verdict stays its criteria's
        task = baseline.task_rows.get((tuple(row.pair), row.output, row.stat)) if row.func == "task" else None
        row.baseline_abs = task.abs_value if task is not None else row.baseline_abs
        matched += task is not None
    for row in result.rows:
        base = baseline.rows.get((tuple(row.pair), row.output))
        if base is None or row.error or row.func != "simple":  # deltas are SimpleCompareFunc's
            continue
        if base.error or base.stat is None:
            continue
        other_quantile = None not in (base.quantile, row.quantile) and base.quantile != row.quantile
        if (base.stat, base.averaged) != (row.stat, row.averaged) or other_quantile:

            def what(r, other_quantile=other_quantile):
                q = f" {fmt_threshold(r.quantile)}" if other_quantile else ""
                return f"{r.stat}{q}{' averaged over iterations' if r.averaged else ''}"

            raise GateError(
                f"{baseline.source}: output '{row.output}' is checked with {what(base)} on the baseline but "
                f"{what(row)} here; a delta between different statistics means nothing (use a baseline of the "
                "same configuration)."
            )
        matched += 1
        row.baseline_found = True
        row.baseline_abs, row.baseline_rel = base.abs_value, base.rel_value
        row.baseline_passed = _tolerance_passed(base)
        row.baseline_values = base.values
        failed_before[id(row)] = (base.failed_iterations, base.iterations)
    if result.rows and not matched and any(not row.error and row.func in ("simple", "task") for row in result.rows):
        have = sorted({f"{' vs '.join(pair)}: {output}" for pair, output in baseline.rows})[:5]
        raise GateError(
            f"{baseline.source}: the baseline has none of this run's outputs (it has {', '.join(have) or 'no rows'}); "
            "use a baseline of the same gate."
        )
    if fail_on == "regression" and result.status != ERROR:
        _judge_regressions(result, margins, failed_before)
    return result


def _more_failed(row: OutputVerdict, before) -> bool:
    """Whether ``row`` failed in more iterations than the baseline's ``before`` (failed, iterations)
    did: a larger count, or a larger share where the runs have different numbers of iterations
    (a statistic checked on the average over iterations has no failed iterations)."""
    if before is None or row.averaged or not row.iterations or not before[1]:
        return False
    failed, iterations = before
    if iterations == row.iterations:
        return row.failed_iterations > failed
    return row.failed_iterations * iterations > failed * row.iterations


def _judge_regressions(result: GateResult, margins, failed_before=None) -> None:
    # --fail-fast stopped the run at its first failing iteration: what came after was not compared, so
    # the baseline cannot clear that failure (a known failure there may hide a regression later).
    stop = getattr(getattr(result, "run", None), "fail_fast_stop", None)
    for row in result.rows:
        within = row.passed
        row.within_tolerance = within
        margin = margin_for(margins, row.output)
        if stop is not None and not within:
            row.regressed, row.passed = True, False
            row.regression = (
                f"--fail-fast stopped the run at iteration {stop}; the iterations after it were not compared"
            )
            continue
        if not row.baseline_found:
            row.regressed = not within
            if row.regressed:
                row.regression = "out of tolerance; the baseline does not have this output"
            continue
        worse = (
            row.abs_value is not None
            and row.baseline_abs is not None
            and not margin.allows(row.abs_value, row.baseline_abs)
        )
        crossed = not within and row.baseline_passed
        before = (failed_before or {}).get(id(row))
        more_failed = _more_failed(row, before)
        row.regressed = bool(worse or crossed or more_failed)
        if worse:
            row.regression = (
                f"abs error {fmt(row.abs_value)} vs {fmt(row.baseline_abs)} on the baseline, worse by more than "
                f"the margin {margin}"
            )
        elif crossed:
            row.regression = "now out of tolerance, within it on the baseline"
        elif more_failed:
            row.regression = (
                f"failed in {row.failed_iterations}/{row.iterations} iterations, {before[0]}/{before[1]} on the "
                "baseline"
            )
        row.known_failure = not within and not row.regressed
        row.passed = not row.regressed
    regressed = [row for row in result.rows if row.regressed]
    known = [row for row in result.rows if row.known_failure]
    if regressed:
        result.status = REGRESSED
        names = ", ".join(f"'{row.output}' ({row.regression})" for row in regressed)
        result.message = f"{len(regressed)} of {len(result.rows)} outputs regressed against the baseline: {names}"
    else:
        result.status = PASSED
        result.message = (
            f"{len(result.rows)} of {len(result.rows)} outputs not worse than the baseline (margin "
            f"{describe_margins(margins)}) over {result.iterations} iterations"
        )
        if known:
            names = ", ".join(f"'{row.output}'" for row in known)
            result.message += f"; {len(known)} out of tolerance as on the baseline: {names}"
