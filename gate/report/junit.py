"""JUnit XML through ``junit-xml``: one flat ``<testsuite>`` per compared runner pair, one
``<testcase>`` per output named ``<model>/<output>``. A failed output is a ``<failure>`` whose
one-line message gives the worst statistic and the element index; an output that could not be
compared is an ``<error>``; a run that could not evaluate anything is one ``<error>`` testcase."""

from __future__ import annotations

import re
from pathlib import Path

from junit_xml import TestCase, TestSuite, to_xml_report_string

from gate.results import GateResult, OutputVerdict, fmt, fmt_delta

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _clean(text: str) -> str:
    return _CONTROL.sub("", text)


def _baseline_text(row: OutputVerdict, result: GateResult) -> str:
    """The delta columns of the table, for the testcase's stdout: `` baseline_abs=... delta_abs=...``."""
    if not result.baseline:
        return ""
    if not row.baseline_found:
        return " baseline=none"
    text = (
        f" baseline_abs={fmt(row.baseline_abs)} delta_abs={fmt_delta(row.delta_abs)}"
        f" baseline_rel={fmt(row.baseline_rel)} delta_rel={fmt_delta(row.delta_rel)}"
    )
    return text + (" known_failure=true" if row.known_failure else "")


def build_suites(result: GateResult) -> list[TestSuite]:
    properties = {k: str(v) for k, v in result.facts.items()}
    properties["iterations"] = str(result.iterations)
    if result.scope:
        properties["scope"] = result.scope
    if result.baseline:
        properties["baseline"] = result.baseline
        properties["fail_on"] = result.fail_on
    suites = {}
    for row in result.rows:
        pair = f"{row.pair[0]} vs {row.pair[1]}"
        suite = suites.setdefault(pair, TestSuite(pair, [], properties=properties, package=result.model))
        case = TestCase(
            f"{result.model}/{row.output}",
            classname=f"accuracy-gate.{pair}",
            elapsed_sec=0.0,
            stdout=_clean(
                f"stat={row.stat} atol={fmt(row.atol)} rtol={fmt(row.rtol)} abs={fmt(row.abs_value)} "
                f"rel={fmt(row.rel_value)} iterations={row.iterations} failed_iterations={row.failed_iterations}"
                + _baseline_text(row, result)
            ),
        )
        if row.error:
            case.add_error_info(message=_clean(row.message()), error_type="could-not-evaluate")
        elif not row.passed:
            case.add_failure_info(message=_clean(row.message()), output=_clean(row.message()), failure_type="accuracy")
        suite.test_cases.append(case)
    if result.stopped_at is not None and suites:
        # Evaluation stopped part-way: what was compared stays above; this says where and why it stopped.
        first = next(iter(suites.values()))
        case = TestCase(f"{result.model}/iteration {result.stopped_at}", classname=first.test_cases[0].classname)
        case.add_error_info(message=_clean(result.message), error_type="could-not-evaluate")
        first.test_cases.append(case)
    if not suites:
        case = TestCase(f"{result.model}/(no outputs)", classname="accuracy-gate")
        if result.status == "passed":  # accuracy-gate run with one runner: it ran, nothing was compared
            case.add_skipped_info(message=_clean(result.message))
        else:
            case.add_error_info(message=_clean(result.message), error_type="could-not-evaluate")
        suites["accuracy-gate"] = TestSuite("accuracy-gate", [case], properties=properties, package=result.model)
    if result.duration_s and suites:
        first = next(iter(suites.values()))
        share = result.duration_s / max(1, len(first.test_cases))
        for case in first.test_cases:
            case.elapsed_sec = share
    return list(suites.values())


def write_junit(result: GateResult, path) -> Path:
    """Writes the JUnit XML file (UTF-8) and returns its path; parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    xml = to_xml_report_string(build_suites(result), prettyprint=True, encoding="utf-8")
    path.write_text(xml, encoding="utf-8")
    return path
