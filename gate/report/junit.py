"""JUnit XML through ``junit-xml``: one flat ``<testsuite>`` per compared runner pair, one
``<testcase>`` per output named ``<model>/<output>``. A failed output is a ``<failure>`` whose
one-line message gives the worst statistic and the element index; an output that could not be
compared is an ``<error>``; a run that could not evaluate anything is one ``<error>`` testcase.

The file is valid against the Jenkins xunit plugin's ``junit-10.xsd`` (tests/data/junit-10.xsd):
no ``disabled`` or ``skipped`` counts on ``<testsuites>``, times in seconds with three decimals, and
the gate.toml path (workspace-relative) as each ``<testsuite>``'s ``file`` (the schema has no
``file`` on ``<testcase>``). A testcase's ``time`` is the time spent comparing that output; an error
testcase for a run that stopped part-way (or never started comparing) gets the rest of the run's time.
"""

from __future__ import annotations

import re
import xml.dom.minidom
import xml.etree.ElementTree as ET
from pathlib import Path

from junit_xml import TestCase, TestSuite

from gate.paths import workspace_relative, write_atomic
from gate.report.escape import unique_names, visible
from gate.results import GateResult, OutputVerdict, fmt, fmt_delta, fmt_func_value, fmt_threshold

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


def _error_case(name: str, classname: str, message: str) -> TestCase:
    """An ``<error>`` testcase for the run itself; its time is what the outputs' times leave (_times)."""
    case = TestCase(name, classname=classname)
    case.elapsed_sec = None
    case.add_error_info(message=_clean(message), output=_clean(message), error_type="could-not-evaluate")
    return case


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
            visible(f"{result.model}/{row.output}" + ("" if row.func == "simple" else f" [{row.func}]")),
            classname=f"accuracy-gate.{pair}",
            elapsed_sec=row.time_s or 0.0,
            stdout=_clean(
                f"stat={row.stat}"
                + ("" if row.quantile is None else f" quantile={fmt_threshold(row.quantile)}")
                + f" atol={fmt_threshold(row.atol)} rtol={fmt_threshold(row.rtol)} "
                f"abs={fmt_func_value(row.func, row.abs_value)} "
                f"rel={fmt(row.rel_value)} iterations={row.iterations} failed_iterations={row.failed_iterations}"
                + _baseline_text(row, result)
                + ("" if row.func == "simple" else f" func={row.func} value={fmt_func_value(row.func, row.abs_value)}")
                + ("" if row.threshold is None else f" bound={fmt_threshold(row.threshold)}")
                + (f" allowed_failed_iterations={row.allowed_failures}" if row.allowed_failures else "")
                + ("" if row.verdict else " verdict=false")
            ),
        )
        if row.error:
            message = _clean(row.message())
            case.add_error_info(message=message, output=message, error_type="could-not-evaluate")
        elif not row.passed:
            case.add_failure_info(message=_clean(row.message()), output=_clean(row.message()), failure_type="accuracy")
        suite.test_cases.append(case)
    if result.stopped_at is not None and suites:
        # Evaluation stopped part-way: what was compared stays above; this says where and why it stopped.
        first = next(iter(suites.values()))
        name = f"{result.model}/iteration {result.stopped_at}"
        first.test_cases.append(_error_case(name, first.test_cases[0].classname, result.message))
    if not suites:
        if result.status == "passed":  # accuracy-gate run with one runner: it ran, nothing was compared
            case = TestCase(f"{result.model}/(no outputs)", classname="accuracy-gate")
            case.add_skipped_info(message=_clean(result.message))
        else:
            case = _error_case(f"{result.model}/(no outputs)", "accuracy-gate", result.message)
        suites["accuracy-gate"] = TestSuite("accuracy-gate", [case], properties=properties, package=result.model)
    for suite in suites.values():  # names that render alike (or a name like "iteration 3") stay apart
        for case, name in zip(suite.test_cases, unique_names(case.name for case in suite.test_cases)):
            case.name = name
    _times(result, suites)
    return list(suites.values())


def _times(result: GateResult, suites: dict) -> None:
    """Each output's testcase gets its comparison time; an error testcase without an output (the run
    stopped, or nothing was compared) gets what is left of the run's duration."""
    cases = [case for suite in suites.values() for case in suite.test_cases]
    measured = sum(case.elapsed_sec or 0.0 for case in cases)
    for case in cases:
        if case.elapsed_sec is None:
            case.elapsed_sec = max(0.0, (result.duration_s or 0.0) - measured)


def seconds(value: float | None) -> str:
    """A JUnit time: seconds rounded to milliseconds, ``0.265``."""
    return f"{max(0.0, value or 0.0):.3f}"


def _document(result: GateResult, suites: list[TestSuite], environ=None) -> ET.Element:
    """``<testsuites>`` with only the attributes junit-10.xsd allows, times in milliseconds."""
    root = ET.Element("testsuites")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    total_time = 0.0
    config = workspace_relative(result.config_path, environ)
    for suite in suites:
        element = suite.build_xml_doc(encoding="utf-8")
        for name in ("disabled", "skipped"):  # counts junit-xml adds; always 0 here
            element.attrib.pop(name, None)
        suite_time = 0.0
        for case, case_element in zip(suite.test_cases, element.iter("testcase")):
            case_element.set("time", seconds(case.elapsed_sec))
            suite_time += float(seconds(case.elapsed_sec))
        element.set("time", seconds(suite_time))
        if config:
            element.set("file", config)
        for key in totals:
            totals[key] += int(element.get(key))
        total_time += suite_time
        root.append(element)
    root.set("name", "accuracy-gate")
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", seconds(total_time))
    return root


def write_junit(result: GateResult, path, environ=None) -> Path:
    """Writes the JUnit XML file (UTF-8) atomically (``gate.paths.write_atomic``: all or nothing,
    never through a symlink) and returns its path; parent folders are created. ``environ`` (default
    ``os.environ``) gives ``GITHUB_WORKSPACE`` for the suites' ``file``.

    Raises:
        GateError: ``path`` is a symbolic link. OSError: the file cannot be written (an old one stays)."""
    raw = ET.tostring(_document(result, build_suites(result), environ), encoding="utf-8")
    xml_text = xml.dom.minidom.parseString(raw).toprettyxml(encoding="utf-8").decode("utf-8")
    return write_atomic(path, xml_text, "JUnit report")
