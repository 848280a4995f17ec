"""The gate's verdict: per compared output, one ``OutputVerdict`` row built from the comparator's
``AccuracyResults``. Reporters (``gate.report``, ``gate.github``) render a ``GateResult``; they never
look at arrays."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gate.comparator.struct import AccuracyResult

PASSED, REGRESSED, ERROR = "passed", "regressed", "error"
EXIT_CODES = {PASSED: 0, REGRESSED: 1, ERROR: 2}


@dataclass
class OutputVerdict:
    """One output of one runner pair, over every iteration.

    ``abs_value``/``rel_value`` are the checked statistic (``stat``; for elemwise the max) of the
    worst iteration, or the average over iterations with ``check_average``. ``worst_index`` is the
    element with the largest absolute difference in that iteration. ``error`` is set when the output
    could not be compared (shape mismatch, missing on one side).
    """

    pair: tuple[str, str]
    output: str
    passed: bool
    stat: str | None = None
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

    def message(self) -> str:
        """One line: the verdict and, for a failure, the worst statistic and where it is."""
        if self.error:
            return f"could not compare: '{self.output}' {self.error}"
        stat = "max" if self.stat == "elemwise" else self.stat
        scope = "average over iterations of the" if self.averaged else "worst"
        text = (
            f"{scope} {stat} abs error {fmt(self.abs_value)} (atol {fmt(self.atol)}), "
            f"rel error {fmt(self.rel_value)} (rtol {fmt(self.rtol)})"
        )
        if self.worst_iteration is not None and not self.averaged:
            text += f" at iteration {self.worst_iteration}"
            if self.worst_index is not None:
                text += f", element {list(self.worst_index)}"
        if self.stat == "elemwise" and self.mismatch_count:
            text += f"; {self.mismatch_count} of {self.num_elements} elements out of tolerance"
        if not self.averaged:
            text += f"; {self.failed_iterations}/{self.iterations} iterations failed"
        if self.dtypes and self.dtypes[0] != self.dtypes[1]:
            text += f"; dtypes differ ({self.dtypes[0]} vs reference {self.dtypes[1]}), compared in the wider type"
        if self.zero_reference_count and not self.passed:
            text += (
                f"; {self.zero_reference_count} reference elements are 0 (relative error there is "
                "measured against 2.2e-16)"
            )
        return ("FAILED: " if not self.passed else "passed: ") + text


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

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def failed_outputs(self) -> list[str]:
        return [row.output for row in self.rows if not row.passed]


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


def verdicts(accuracy: AccuracyResult) -> list[OutputVerdict]:
    """One OutputVerdict per (runner pair, output), in order of first appearance."""
    rows = []
    for pair, iterations in accuracy.items():
        averages = accuracy.average_results(pair) if accuracy.aggregation == "average" else {}
        for name in accuracy.output_names(pair):
            samples = [(i, it[name]) for i, it in enumerate(iterations) if name in it]
            rows.append(_verdict(pair, name, samples, averages.get(name)))
    return rows


def _verdict(pair, name, samples, averaged) -> OutputVerdict:
    failed = [(i, r) for i, r in samples if not bool(r)]
    errors = [(i, r) for i, r in samples if getattr(r, "error", None)]
    if errors:
        index, result = errors[0]
        return OutputVerdict(
            pair,
            name,
            False,
            iterations=len(samples),
            failed_iterations=len(failed),
            worst_iteration=index,
            error=result.error,
        )
    first = samples[0][1]
    threshold = first.thresholds
    candidates = failed or samples
    worst_iteration, worst = max(
        candidates, key=lambda item: _severity(_stat_values(item[1], threshold.check_error_stat)[0])
    )
    row = OutputVerdict(
        pair,
        name,
        passed=not failed,
        stat=threshold.check_error_stat,
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
    )
    row.abs_value, row.rel_value = _stat_values(worst, threshold.check_error_stat)
    if averaged is not None:
        row.averaged = True
        row.passed = bool(averaged)
        row.abs_value, row.rel_value = _stat_values(averaged, threshold.check_error_stat)
    return row
