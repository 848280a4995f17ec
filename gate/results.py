"""The gate's verdict: per compared output, one ``OutputVerdict`` row built from the comparator's
``AccuracyResults``. Reporters (``gate.report``, ``gate.github``) render a ``GateResult``; they never
look at arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from gate.comparator.struct import AccuracyResult
from gate.dtype_rules import dtype_error, dtypes_differ, iteration_error

PASSED, REGRESSED, ERROR = "passed", "regressed", "error"
EXIT_CODES = {PASSED: 0, REGRESSED: 1, ERROR: 2}


@dataclass
class OutputVerdict:
    """One output of one runner pair, over every iteration.

    ``abs_value`` is the checked statistic's absolute error (``stat``; for elemwise the max) of the
    worst iteration (``worst_iteration``: the largest among failed iterations, else among all),
    ``rel_value`` its relative error in the iteration where that is largest (``rel_iteration``),
    or both the average over iterations with ``check_average``. ``worst_index`` is the worst element
    of ``worst_iteration`` (the largest absolute difference, among the elements out of tolerance
    for elemwise; the first differing element when ``exact``), with its values in both runners
    (``worst_values``) and its own ``worst_absdiff`` / ``worst_reldiff``. ``exact``: every element
    must be equal (integer, bool and string outputs without a tolerance of their own); ``stat`` is
    then ``"exact"`` and the values are the max differences.
    ``nan_counts``: in the worst iteration, elements NaN on both sides and on one side only.
    ``error`` is set when the output could not be compared (shape mismatch, missing on one side).
    """

    pair: tuple[str, str]
    output: str
    passed: bool
    stat: str | None = None
    quantile: float | None = None  # stat "quantile": which one (error_quantile), shown beside it
    atol: float | None = None
    rtol: float | None = None
    abs_value: float | None = None
    rel_value: float | None = None
    iterations: int = 0
    failed_iterations: int = 0
    worst_iteration: int | None = None
    worst_index: tuple | None = None
    mismatch_count: int | None = None
    num_elements: int | None = None
    zero_reference_count: int | None = None
    averaged: bool = False
    error: str | None = None
    dtypes: tuple | None = None
    exact: bool = False
    rel_iteration: int | None = None
    worst_values: tuple | None = None
    worst_absdiff: float | None = None
    worst_reldiff: float | None = None
    nan_counts: tuple | None = None
    # Against a baseline (gate.baseline): its values of the same statistic, and the verdict in
    # ``fail_on = "regression"`` mode. ``passed`` is then the gate's verdict for the row;
    # ``known_failure`` marks a row out of tolerance exactly as on the baseline (passed, with a caveat).
    baseline_found: bool = False
    baseline_abs: float | None = None
    baseline_rel: float | None = None
    baseline_passed: bool | None = None
    within_tolerance: bool | None = None  # the tolerances' verdict, when ``passed`` is the baseline's
    regressed: bool | None = None
    regression: str | None = None  # why it regressed, in words
    known_failure: bool = False
    # Compare functions (gate.compare_funcs): ``func`` checked this row; for the single-metric ones
    # ``abs_value`` is the metric and ``threshold`` its bound, for ``indices`` ``abs_value`` is the share
    # of iterations that agree. ``verdict`` False: reported only (``passed`` True, the function's own
    # outcome in ``within``). ``allowed_failures``: iterations that may fail (max_failed_iterations).
    func: str = "simple"
    threshold: float | None = None
    verdict: bool = True
    within: bool | None = None
    allowed_failures: int = 0
    reference: float | None = None  # a task metric's value for the golden outputs (gate.task_metrics)
    criterion: str | None = None  # a task metric's criteria, in words
    # The checked statistic's absolute error per iteration, in iteration order (None where an
    # iteration lacks the output or has no statistic), for charts; not part of row equality.
    values: list | None = field(default=None, compare=False, repr=False)
    baseline_values: list | None = field(default=None, compare=False, repr=False)
    # The worst iteration's error statistics when it failed (gate.comparator.details.error_details),
    # for the terminal; not part of row equality nor of any file.
    details: dict | None = field(default=None, compare=False, repr=False)
    # The iterations that failed, in order (None where unknown: read from a file); for no file.
    failed_indices: list | None = field(default=None, compare=False, repr=False)
    # Seconds spent comparing this output over every iteration (None: not measured, e.g. read from
    # a file that does not record it); the JUnit testcase's time. Not part of row equality.
    time_s: float | None = field(default=None, compare=False, repr=False)

    @property
    def dtypes_differ(self) -> bool:
        """The output's and the reference's dtypes differ, byte order aside (``>f4`` is float32)."""
        return dtypes_differ(self.dtypes)

    @property
    def delta_abs(self) -> float | None:
        """The checked statistic's absolute error minus the baseline's (None without both)."""
        return _delta(self.abs_value, self.baseline_abs)

    @property
    def delta_rel(self) -> float | None:
        return _delta(self.rel_value, self.baseline_rel)

    def message(self) -> str:
        """One line: the verdict and, for a failure, the worst statistic and where it is."""
        if self.error:
            return f"could not compare: '{self.output}' {self.error}"
        text = self._statistics()
        if self.regressed:
            why = f" ({self.regression})" if self.regression else ""
            return f"REGRESSED against the baseline{why}: {text}"
        if self.known_failure:
            return f"passed as on the baseline (out of tolerance there too, not worse by more than the margin): {text}"
        if not self.verdict:
            return f"reported only ({'passed' if self.within else 'FAILED'}), not the verdict: {text}"
        return ("FAILED: " if not self.passed else "passed: ") + text

    def failed_text(self) -> str:
        """``1/8 iterations failed``, or with an allowance ``1 of 200 (0.5%) iterations failed, allowed 2``."""
        if not self.allowed_failures:
            return f"{self.failed_iterations}/{self.iterations} iterations failed"
        share = 100 * self.failed_iterations / self.iterations if self.iterations else 0.0
        return (
            f"{self.failed_iterations} of {self.iterations} ({share:.3g}%) iterations failed, "
            f"allowed {self.allowed_failures}"
        )

    def on_average_only(self) -> bool:
        """Passes with ``check_average`` although some iteration is out of tolerance."""
        return self.passed and self.averaged and bool(self.failed_iterations)

    def _func_statistics(self) -> str:
        if self.func == "task":
            delta = 100 * (self.abs_value - self.reference)
            return (f"{self.stat} {fmt(100 * self.abs_value)}% against the labels, reference (golden outputs) "
                    f"{fmt(100 * self.reference)}%, {delta:+.4g} points; criterion {self.criterion}")  # fmt: skip
        if self.func == "indices":
            text = f"{self.stat} agreement {fmt(100 * self.abs_value)}% of iterations"
            if self.mismatch_count:
                text += f"; worst iteration {self.worst_iteration}: {self.mismatch_count} positions differ"
            return f"{text}; {self.failed_text()}"
        bound = "min" if self.func in ("cosine", "psnr", "snr") else "max"
        scope = "average over iterations of" if self.averaged else "worst"
        value = fmt_func_value(self.func, self.abs_value)
        text = f"{scope} {self.stat} {value} ({bound} {fmt_threshold(self.threshold)})"
        if not self.averaged:
            text += f" at iteration {self.worst_iteration}; {self.failed_text()}"
        return text

    def _element(self) -> str:
        """`` (onnxrt 1.5 vs golden -inf, abs error inf, rel error nan)``: the worst element's values
        and its own differences, or ""."""
        if self.worst_values is None:
            return ""
        values = f"{self.pair[0]} {fmt_value(self.worst_values[0])} vs {self.pair[1]} {fmt_value(self.worst_values[1])}"
        if self.exact:
            return f" ({values})"
        return f" ({values}, abs error {fmt(self.worst_absdiff)}, rel error {fmt(self.worst_reldiff)})"

    def _exact_statistics(self) -> str:
        if self.passed and not self.regressed:
            return f"exact: every element equal in {plural(self.iterations, 'iteration')}"
        text = "exact: "
        if self.worst_iteration is not None and self.worst_index is not None:
            text += f"element {list(self.worst_index)} of iteration {self.worst_iteration} differs{self._element()}"
        else:
            text += f"elements differ (max abs error {fmt(self.abs_value)})"
        if self.mismatch_count:
            text += f"; {self.mismatch_count} of {self.num_elements} elements differ"
        return text

    def _statistics(self) -> str:
        if self.func != "simple":
            return self._func_statistics()
        stat = "max" if self.stat == "elemwise" else self.stat
        scope = "average over iterations of the" if self.averaged else "worst"
        same_iteration = self.rel_iteration in (None, self.worst_iteration)
        if self.exact:
            text = self._exact_statistics()
        elif self.averaged or same_iteration:
            text = (
                f"{scope} {stat} abs error {fmt(self.abs_value)} (atol {fmt_threshold(self.atol)}), "
                f"rel error {fmt(self.rel_value)} (rtol {fmt_threshold(self.rtol)})"
            )
        else:
            text = (
                f"{scope} {stat} abs error {fmt(self.abs_value)} (atol {fmt_threshold(self.atol)}) at iteration "
                f"{self.worst_iteration}, {scope} {stat} rel error {fmt(self.rel_value)} "
                f"(rtol {fmt_threshold(self.rtol)}) "
                f"at iteration {self.rel_iteration}"
            )
        if self.worst_iteration is not None and not self.averaged and not self.exact:
            if same_iteration:
                text += f" at iteration {self.worst_iteration}"
                if self.worst_index is not None:
                    text += f", element {list(self.worst_index)}{self._element()}"
            elif self.worst_index is not None:
                text += f"; worst element {list(self.worst_index)} of iteration {self.worst_iteration}{self._element()}"
        if self.stat == "elemwise" and self.mismatch_count and not self.exact:
            text += f"; {self.mismatch_count} of {self.num_elements} elements out of tolerance"
        if self.nan_counts and self.nan_counts[0] and not self.passed:
            both, one_side = self.nan_counts
            if one_side:
                text += f"; NaN on both sides at {plural(both, 'element')}, on one side only at {one_side}"
            else:
                text += (
                    f"; NaN on both sides at the same {plural(both, 'element')} (NaN never equals NaN: "
                    "nan_compare_equal = true, --nan-compare-equal, treats them as equal)"
                )
        if not self.averaged:
            text += f"; {self.failed_text()}"
        if self.dtypes_differ:
            text += f"; dtypes differ ({self.dtypes[0]} vs reference {self.dtypes[1]}), compared in the wider type"
        if self.zero_reference_count and not self.exact and (not self.passed or self.known_failure):
            text += (
                f"; {self.zero_reference_count} reference elements are 0 (relative error there is "
                "measured against 2.2e-16)"
            )
        if self.baseline_found:
            text += (
                f"; baseline abs error {fmt(self.baseline_abs)} ({fmt_delta(self.delta_abs)}), "
                f"rel error {fmt(self.baseline_rel)} ({fmt_delta(self.delta_rel)})"
            )
        return text


@dataclass
class GateResult:
    """Everything the reporters need. ``status`` is passed / regressed / error (exit 0 / 1 / 2)."""

    model: str
    status: str
    message: str
    rows: list[OutputVerdict] = field(default_factory=list)
    iterations: int = 0
    duration_s: float = 0.0
    facts: dict = field(default_factory=dict)
    title: str = ""
    stopped_at: int | None = None  # the iteration at which evaluation stopped with an error, if any
    scope: str = ""  # e.g. "shard 2/3 (3 of 8 iterations)" or "merged from 3 shards"; empty for a plain run
    baseline: str | None = None  # what the rows were compared with (gate.baseline), if anything
    fail_on: str = "threshold"  # or "regression" (gate.baseline)
    inputs: str = ""  # accuracy-gate run: the inputs fed, e.g. "synthetic inputs, --seed 1: x float32 [1,3,48,192]"
    # What was compared, for a partial result file (gate.compared_run.ComparedRun); not part of equality.
    run: object | None = field(default=None, compare=False, repr=False)
    # The gate.toml the run was configured by (as given), for the JUnit file's ``file`` attribute.
    config_path: str = field(default="", compare=False)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def nothing_compared(self) -> bool:
        """``accuracy-gate run`` with one runner and no --load-outputs: it ran and exits 0 (as
        ``polygraphy run``), but no output was compared, so no report calls it passed."""
        return self.status == PASSED and not self.rows

    @property
    def failed_outputs(self) -> list[str]:
        failed = dict.fromkeys((row.pair, row.output) for row in self.rows if not row.passed)
        return [output for _, output in failed]  # once per runner pair, however many functions failed


def _delta(value, baseline):
    if value is None or baseline is None:
        return None
    if math.isnan(value) or math.isnan(baseline):
        return math.nan
    if value == baseline:  # also equal infinities, which would give NaN
        return 0.0
    return value - baseline


def fmt_delta(value) -> str:
    """A signed difference for reports: ``+1.2e-05``, ``-3e-07``, ``0``, ``n/a`` for None."""
    if value is None:
        return "n/a"
    if math.isnan(value):
        return "nan"
    if value == 0:
        return "0"
    if math.isinf(value):
        return "+inf" if value > 0 else "-inf"
    return f"{value:+.5g}"


def fmt_value(value) -> str:
    """An element's value for reports: numbers as ``fmt`` but integers in full, text quoted."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57]) + "..."
    if isinstance(value, bool) or isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return str(value)
        with np.errstate(over="ignore"):
            single = np.float32(value)
        # The shortest text that reads back as the value: float32's when the value is a float32
        # (most outputs; 0.16998725, not 0.1699872463941574), else float64's.
        text = str(single) if float(single) == value else repr(value)
        return text[:-2] if text.endswith(".0") else text
    return fmt(value)


def fmt_threshold(value) -> str:
    """A tolerance or bound as it was set, for reports: the shortest text that reads back as the same
    float (Python's ``repr``; ``1e-05``, ``0.9999999``, ``30``), never rounded (``fmt`` would show a
    cosine minimum of 0.9999999 as 1); ``n/a`` for None."""
    if value is None:
        return "n/a"
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def fmt_func_value(func: str, value) -> str:
    """A compare function's value: a cosine similarity with 9 digits (0.99999 and 1 differ), else ``fmt``."""
    return f"{value:.9g}" if func == "cosine" and value is not None else fmt(value)


def fmt(value) -> str:
    """Numbers for reports: 5 significant digits, ``n/a`` for None."""
    if value is None:
        return "n/a"
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return str(value)
    return f"{value:.5g}"


def _stat_values(result, stat):
    stat = "max" if stat == "elemwise" else stat
    return getattr(result, f"{stat}_absdiff", None), getattr(result, f"{stat}_reldiff", None)


def _severity(value):
    if value is None:
        return -math.inf
    return math.inf if math.isnan(value) else value


def verdicts(accuracy: AccuracyResult, indices=None) -> list[OutputVerdict]:
    """One OutputVerdict per (runner pair, output), in order of first appearance.

    ``indices`` maps the position of an iteration in ``accuracy`` to its index in the golden set
    (a shard compares every n-th iteration); ``worst_iteration`` is reported as that index. Default:
    positions are indices. Each row also gets ``values``, the checked statistic's absolute error per
    iteration (for charts).

    Raises:
        GateError: ``check_average`` over an output that has no statistics in some iteration.
    """
    rows = []
    for pair, iterations in accuracy.items():
        averages = accuracy.average_results(pair) if accuracy.aggregation == "average" else {}
        for name in accuracy.output_names(pair):
            samples = [(i, it[name]) for i, it in enumerate(iterations) if name in it]
            row = _verdict(pair, name, samples, averages.get(name))
            if row.stat is not None:
                stat = "max" if row.exact else row.stat
                row.values = [_stat_values(result, stat)[0] for _, result in samples]
            times = [getattr(result, "time_s", None) for _, result in samples]
            if samples and None not in times:
                row.time_s = float(sum(times))
            if indices is not None and row.worst_iteration is not None:
                row.worst_iteration = indices[row.worst_iteration]
            if indices is not None and row.rel_iteration is not None:
                row.rel_iteration = indices[row.rel_iteration]
            rows.append(row)
    return rows


def finish_rows(rows: list[OutputVerdict], where) -> None:
    """The gate's own checks on top of the comparator's verdicts, in place: an output whose golden
    dtype differs from what the runner produces is an error (re-record the golden outputs), and an
    error names the iteration and, through ``where(index) -> str | None``, its files."""
    for row in rows:
        if not row.error and row.dtypes_differ:
            row.error = dtype_error(row.pair, row.dtypes)
        if row.error and row.worst_iteration is not None:  # say where it could not be compared
            place = where(row.worst_iteration)
            row.error += f" at iteration {row.worst_iteration}" + (f" ({place})" if place else "")


def mark_stopping_output(result: GateResult, stopped: dict) -> None:
    """After a run stopped part-way (``stopped``: ``{"iteration", "message", "output"?}``), the rows of
    the output that stopped it (e.g. its golden values hold NaN under ``validate``) are errors, so that
    no report reads that output as passed over the iterations compared before the stop."""
    output = stopped.get("output")
    for row in result.rows:
        if output is not None and row.output == output and not row.error:
            row.passed = False
            row.error = f"stopped the run at iteration {stopped.get('iteration')} (see the error message)"


def gate_result(model, title, rows, iterations, duration, facts) -> GateResult:
    """The verdict over ``rows``: error when nothing was compared or an output could not be compared,
    regressed when an output is out of tolerance, else passed; the message names the outputs."""
    common = {
        "model": model,
        "rows": rows,
        "iterations": iterations,
        "duration_s": duration,
        "facts": facts,
        "title": title,
    }
    if not rows:
        return GateResult(status=ERROR, message="zero outputs were compared", **common)
    errors = [row for row in rows if row.error]
    if errors:
        names = ", ".join(f"'{row.output}' ({row.error})" for row in errors)
        return GateResult(status=ERROR, message=f"could not compare {names}", **common)
    failed = list(dict.fromkeys((row.pair, row.output) for row in rows if not row.passed))
    outputs = len({(row.pair, row.output) for row in rows})  # an output checked by several compare functions
    if failed:
        names = ", ".join(f"'{output}'" for _, output in failed)
        return GateResult(
            status=REGRESSED,
            message=f"{len(failed)} of {outputs} outputs out of tolerance: {names}",
            **common,
        )
    return GateResult(
        status=PASSED,
        message=f"{outputs} of {outputs} outputs within tolerance over {plural(iterations, 'iteration')}",
        **common,
    )


def _verdict(pair, name, samples, averaged) -> OutputVerdict:
    failed = [(i, r) for i, r in samples if not bool(r)]
    if (stopped := iteration_error(pair, samples)) is not None:
        index, error, dtypes = stopped
        return OutputVerdict(
            pair,
            name,
            False,
            iterations=len(samples),
            failed_iterations=len(failed),
            worst_iteration=index,
            error=error,
            dtypes=dtypes,
        )
    first = samples[0][1]
    threshold = first.thresholds
    exact = bool(getattr(threshold, "exact", False))
    # An exact output's verdict is its max difference (every element equal), whatever the configured
    # statistic: its row shows that and is judged per iteration (the average of the maxima is 0 exactly
    # when every iteration is equal, so check_average gives the same verdict).
    stat = "max" if exact else threshold.check_error_stat
    candidates = failed or samples
    worst_iteration, worst = max(candidates, key=lambda item: _severity(_stat_values(item[1], stat)[0]))
    rel_iteration, rel_worst = max(candidates, key=lambda item: _severity(_stat_values(item[1], stat)[1]))
    row = OutputVerdict(
        pair,
        name,
        passed=not failed,
        stat="exact" if exact else threshold.check_error_stat,  # one word in every report and file
        atol=threshold.atol,
        rtol=threshold.rtol,
        iterations=len(samples),
        failed_iterations=len(failed),
        worst_iteration=worst_iteration,
        worst_index=worst.worst_index,
        mismatch_count=worst.mismatch_count,
        num_elements=worst.num_elements,
        zero_reference_count=worst.zero_reference_count,
        dtypes=worst.dtypes,
        exact=exact,
        rel_iteration=rel_iteration,
        worst_values=getattr(worst, "worst_values", None),
        worst_absdiff=getattr(worst, "worst_absdiff", None),
        worst_reldiff=getattr(worst, "worst_reldiff", None),
        nan_counts=getattr(worst, "nan_counts", None),
        failed_indices=[index for index, _ in failed],
    )
    row.abs_value = _stat_values(worst, stat)[0]
    row.rel_value = _stat_values(rel_worst, stat)[1]
    if averaged is not None and not exact:
        row.averaged = True
        row.passed = bool(averaged)
        row.abs_value, row.rel_value = _stat_values(averaged, threshold.check_error_stat)
    return row


def plural(count: int, noun: str) -> str:
    """``1 iteration``, ``8 iterations``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
