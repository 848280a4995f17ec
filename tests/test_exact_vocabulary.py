"""One word for an exactly compared output in every report: the table, the Markdown summary, the JUnit
testcase's properties line and the results file all say ``exact`` (the results file used to say
``"stat": "elemwise", "exact": true``). A results file of the older layout still serves as a baseline."""

from __future__ import annotations

import json

from junitparser import JUnitXml
from test_exact_details import int_gate

from gate.results_file import read_untrusted_report

from conftest import run_cli


def test_every_report_says_exact(tmp_path):
    config = int_gate(tmp_path)
    report, junit, markdown = tmp_path / "r.json", tmp_path / "j.xml", tmp_path / "s.md"
    proc = run_cli("check", config, "--check-error-stat", "median", "--report", report, "--junit", junit,
                   "--markdown", markdown, "-q")  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.splitlines()[3].split()[1] == "exact"
    row = json.loads(report.read_text())["rows"][0]
    assert (row["stat"], row["exact"]) == ("exact", True)
    case = next(iter(next(iter(JUnitXml.fromfile(str(junit))))))
    assert case.system_out.startswith("stat=exact ")
    assert "checked statistic: exact" in markdown.read_text()
    assert read_untrusted_report(report).result.rows[0].stat == "exact"


def test_an_older_results_file_with_the_configured_statistic_is_a_baseline_of_the_same_gate(tmp_path):
    config = int_gate(tmp_path)
    args = ("--check-error-stat", "mean", "--check-average")
    report = tmp_path / "r.json"
    assert run_cli("check", config, *args, "--report", report, "-q").returncode == 1
    old = json.loads(report.read_text())
    old["rows"][0].update(stat="mean", averaged=True)  # what earlier versions wrote for this row
    (tmp_path / "old.json").write_text(json.dumps(old))
    assert read_untrusted_report(tmp_path / "old.json").result.rows[0].stat == "exact"
    proc = run_cli("check", config, *args, "--baseline", tmp_path / "old.json", "-q")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.splitlines()[4].split()[-2:] == ["0", "0"]  # the deltas against the same numbers
