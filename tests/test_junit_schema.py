"""JUnit files that the Jenkins xunit schema accepts and that every consumer reads alike: each kind
the gate writes (pass, fail, a run stopped by a NaN, no outputs, baseline, shards merged) is checked
against junit-10.xsd's rules (tests/junit_schema.py; conftest.py also checks every JUnit file any test
leaves in its tmp_path), and read back the way junitparser, EnricoMi/publish-unit-test-result-action
(the testcase's result element), mikepenz/action-junit-report (``file``: the testcase's, else its
suite's) and dorny/test-reporter (``parseFloat(time)``) read it."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from junitparser import Error, Failure, JUnitXml

from gate import cli
from gate.report.junit import seconds, workspace_relative, write_junit
from gate.results import ERROR, GateResult, OutputVerdict

from conftest import make_nan_gate, make_small_model, perturb_golden, run_cli, write_gate_toml
from junit_schema import schema_errors

MILLISECONDS = re.compile(r"\d+\.\d{3}")


def read(path: Path) -> dict:
    """What the consumers take from each testcase: result, time (dorny: a float, never NaN), file."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    cases = {}
    for suite in root.iter("testsuite"):
        for case in suite.iter("testcase"):
            kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
            time = case.get("time")
            assert time is not None and MILLISECONDS.fullmatch(time), time
            assert not math.isnan(float(time))
            cases[case.get("name")] = {
                "result": kinds[0] if kinds else "passed",
                "time": time,
                "file": case.get("file") or suite.get("file"),  # mikepenz's order
            }
    return cases


def valid(path: Path) -> Path:
    errors = schema_errors(path.read_bytes())
    assert errors == [], errors
    return path


def test_the_checker_rejects_what_the_schema_rejects():
    ok = (
        '<testsuites><testsuite name="a" tests="1" failures="0" errors="0" time="1.5">'
        '<testcase name="c" time="0.001"/></testsuite></testsuites>'
    )
    assert schema_errors(ok) == []
    assert schema_errors(ok.replace('tests="1"', 'tests="1" disabled="0"')) == [
        "/testsuites/testsuite[0]: attribute 'disabled' is not allowed"
    ]
    assert schema_errors(ok.replace('<testcase name="c"', '<testcase file="gate.toml" name="c"')) == [
        "/testsuites/testsuite[0]/testcase[0]: attribute 'file' is not allowed"
    ]
    assert schema_errors(ok.replace(' errors="0"', "")) == ["/testsuites/testsuite[0]: attribute 'errors' is required"]
    assert schema_errors(ok.replace('time="1.5"', 'time="1e-3"')) == [
        "/testsuites/testsuite[0]: time='1e-3' is not a SUREFIRE_TIME"
    ]
    assert schema_errors(ok.replace("<testcase", "<case/><testcase")) == [
        "/testsuites/testsuite[0]/case[0]: element <case> is not allowed in <testsuite>"
    ]


def test_times_are_each_outputs_comparison_time_in_milliseconds(tmp_path):
    rows = [
        OutputVerdict(("onnxrt", "golden"), "y", True, "max", 1e-5, 1e-5, 0.0, 0.0, 8, time_s=0.26547299399999247),
        OutputVerdict(("onnxrt", "golden"), "s", True, "max", 1e-5, 1e-5, 0.0, 0.0, 8, time_s=0.0004),
    ]
    result = GateResult("m.onnx", "passed", "2 of 2 outputs", rows, 8, duration_s=3.0, config_path="gate.toml")
    path = valid(write_junit(result, tmp_path / "j.xml"))
    cases = read(path)
    assert cases == {
        "m.onnx/y": {"result": "passed", "time": "0.265", "file": "gate.toml"},
        "m.onnx/s": {"result": "passed", "time": "0.000", "file": "gate.toml"},
    }
    root = ET.parse(path).getroot()
    assert root.attrib == {"name": "accuracy-gate", "tests": "2", "failures": "0", "errors": "0", "time": "0.265"}
    assert "disabled" not in root[0].attrib and root[0].get("time") == "0.265"
    # A run that stopped part-way: its error testcase gets the rest of the run's time.
    result.status, result.stopped_at, result.message = ERROR, 8, "stopped after 8 of 9 iterations: boom"
    cases = read(valid(write_junit(result, tmp_path / "j.xml")))
    assert cases["m.onnx/iteration 8"] == {"result": "error", "time": "2.734", "file": "gate.toml"}
    assert seconds(None) == "0.000" and seconds(1.0005) == "1.000" and seconds(-0.1) == "0.000"


def test_workspace_relative_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert workspace_relative(str(tmp_path / "gates" / "gate.toml"), {}) == "gates/gate.toml"
    assert workspace_relative("gate.toml", {}) == "gate.toml"
    env = {"GITHUB_WORKSPACE": str(tmp_path / "gates")}
    assert workspace_relative(str(tmp_path / "gates" / "a" / "gate.toml"), env) == "a/gate.toml"
    assert workspace_relative("/elsewhere/gate.toml", env) == "/elsewhere/gate.toml"
    assert workspace_relative("", env) == ""


def test_pass_and_fail_through_the_cli(example, tmp_path):
    proc = run_cli("check", example / "gate.toml", "--junit", example / "pass.xml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (name,) = read(valid(example / "pass.xml"))
    assert read(example / "pass.xml")[name]["result"] == "passed"
    assert read(example / "pass.xml")[name]["file"] == "ppocr-cls/gate.toml"
    perturb_golden(example / "data" / "test_data_set_5" / "output_0.pb")
    proc = run_cli("check", example / "gate.toml", "--junit", example / "fail.xml", cwd=tmp_path)
    assert proc.returncode == 1
    case = read(valid(example / "fail.xml"))[name]
    assert case["result"] == "failure" and case["file"] == "ppocr-cls/gate.toml"
    suite = next(iter(JUnitXml.fromfile(str(example / "fail.xml"))))
    assert suite.failures == 1 and suite.errors == 0


@pytest.fixture
def nan_gate(tmp_path) -> Path:
    """A small model whose stored input 1 is NaN after recording: with --validate the run stops there."""
    return make_nan_gate(tmp_path)


def test_the_output_that_stopped_the_run_reads_as_an_error_in_every_consumer(nan_gate, tmp_path, capsys):
    markdown = tmp_path / "m.md"
    args = ["check", str(nan_gate), "--validate", "--junit", str(tmp_path / "j.xml"), "--markdown", str(markdown)]
    code = cli.main(args)
    assert code == 2
    cases = read(valid(tmp_path / "j.xml"))
    # y held the NaN: an error, not "passed over the one iteration before the stop"; s was fine.
    assert {name: case["result"] for name, case in cases.items()} == {
        "m.onnx/y": "error",
        "m.onnx/s": "passed",
        "m.onnx/iteration 1": "error",
    }
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / "j.xml"))))
    assert suite.tests == 3 and suite.errors == 2 and suite.failures == 0
    (y,) = [case for case in suite if case.name == "m.onnx/y"]
    assert isinstance(y.result[0], Error) and "stopped the run at iteration 1" in y.result[0].message
    assert not [r for case in suite for r in case.result if isinstance(r, Failure)]
    assert "| ⚠️\u00a0ERROR | `y` | - | - | - |" in markdown.read_text()


def test_no_outputs_compared_has_a_time(tmp_path):
    result = GateResult("m.onnx", ERROR, "zero outputs were compared", duration_s=0.5)
    cases = read(valid(write_junit(result, tmp_path / "j.xml")))
    assert cases == {"m.onnx/(no outputs)": {"result": "error", "time": "0.500", "file": None}}


def test_shards_merged_and_a_baseline(tmp_path, capsys):
    folder = tmp_path / "g"
    folder.mkdir()
    make_small_model(folder / "m.onnx")
    (folder / "inputs").mkdir()
    rng = np.random.default_rng(0)
    for i in range(4):
        np.savez(folder / "inputs" / f"{i}.npz", x=rng.standard_normal((1, 64)).astype(np.float32))
    config = write_gate_toml(folder, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    assert cli.main(["record", str(config)]) == 0
    for shard in (1, 2):
        part = folder / f"p{shard}.json"
        junit = folder / f"shard{shard}.xml"
        args = ["check", str(config), "--shard", f"{shard}/2", "--write-partial", str(part), "--junit", str(junit)]
        assert cli.main(args) == 0
        valid(junit)
    merged = folder / "merged.xml"
    report = folder / "report.json"
    merge = ["merge", str(folder / "p1.json"), str(folder / "p2.json"), "--junit", str(merged), "--report", str(report)]
    assert cli.main([*merge, "--root", str(folder)]) == 0
    cases = read(valid(merged))
    assert {name: case["result"] for name, case in cases.items()} == {"m.onnx/y": "passed", "m.onnx/s": "passed"}
    assert {case["file"] for case in cases.values()} == {workspace_relative(str(config))}  # kept in the partials
    baseline = folder / "baseline.xml"
    args = ["check", str(config), "--baseline", str(report), "--junit", str(baseline)]
    assert cli.main(args) == 0
    assert {name: case["result"] for name, case in read(valid(baseline)).items()} == {
        "m.onnx/y": "passed",
        "m.onnx/s": "passed",
    }
    suite = next(iter(JUnitXml.fromfile(str(baseline))))
    assert {p.name: p.value for p in suite.properties()}["fail_on"] == "threshold"
