"""Tolerances and bounds are shown as they were set, in every report: a cosine minimum of 0.9999999
is not ``min 1`` (5 significant digits), an atol of 1.234567e-05 not 1.2346e-05 (``fmt_threshold``:
the shortest text that reads back as the same float)."""

from __future__ import annotations

import numpy as np
from junitparser import JUnitXml
from onnx import TensorProto
from test_exact_details import identity_gate

from gate.results import fmt_threshold

from conftest import run_cli


def float_gate(folder):
    inputs = [np.array([[1, 2, 3, 4]], np.float32) + i for i in range(3)]
    goldens = [x.copy() for x in inputs]
    for i, golden in enumerate(goldens):
        golden[0, 0] += 1e-3 * i
    return identity_gate(folder, TensorProto.FLOAT, inputs, goldens)


def reports(folder, *args):
    junit, markdown = folder / "j.xml", folder / "s.md"
    proc = run_cli("check", float_gate(folder), *args, "--junit", junit, "--markdown", markdown, "-q")
    case = next(iter(next(iter(JUnitXml.fromfile(str(junit))))))
    message = case.result[0].message if case.result else ""
    return proc, case.system_out, message, markdown.read_text()


def test_a_cosine_minimum_keeps_its_digits(tmp_path):
    proc, properties, _, markdown = reports(
        tmp_path, "--compare-func", "cosine", "--cosine-similarity-threshold", "0.99999999"
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[3].split()[2:5] == ["0.999999938", "min", "0.99999999"]
    assert "value=0.999999938 bound=0.99999999" in properties
    assert "| 0.999999938\u00a0/\u00a0min 0.99999999 |" in markdown  # the cell's non-breaking spaces
    assert "worst cosine 0.999999938 (min 0.99999999)" in markdown


def test_an_atol_keeps_its_digits(tmp_path):
    proc, properties, message, markdown = reports(tmp_path, "--atol", "1.234567e-5", "--rtol", "0")
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[3].split()[3] == "1.234567e-05"
    assert "atol=1.234567e-05 rtol=0 " in properties
    assert "(atol 1.234567e-05)" in message
    assert "atol 1.234567e-05" in markdown  # the chart's caption


def test_fmt_threshold_round_trips():
    for value in (1e-5, 0.9999999, 0.1 + 0.2, 30.0, 1e300, 5e-324, 0.0, 123456789.0):
        assert float(fmt_threshold(value)) == value
    assert (fmt_threshold(30.0), fmt_threshold(1e-5), fmt_threshold(None)) == ("30", "1e-05", "n/a")


def test_task_criteria_keep_their_digits():
    from gate.task_metrics import task_passed

    settings = {"task_min": 0.9999999, "task_min_relative": 0.99999, "task_max_drop": 0.25}
    passed, criterion = task_passed(1.0, 1.0, settings, "y")
    assert passed and criterion == "min 0.9999999, min_relative 0.99999 (>= 1), max_drop 0.25 points"
