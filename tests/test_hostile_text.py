"""Text a fork or a model controls, as it reaches the PR comment, the job summary, the log and JUnit
(issue 14): issue references defused, invisible characters shown escaped so that names differing only
by them render distinctly, JUnit testcase names unique."""

from __future__ import annotations

import re

import pytest
from junitparser import JUnitXml

from gate.report import render_text, write_junit
from gate.report.escape import WORD_JOINER, unique_names, unlinked, visible
from gate.report.markdown import md_code, md_text, render_markdown
from gate.results import GateResult, OutputVerdict
from gate.results_file import read_untrusted_report, write_report

REFERENCE = re.compile(r"(?i)(#|\bGH-)\d")


def _outside_code(markdown: str) -> str:
    """The Markdown with code spans and fenced blocks removed (GitHub links no reference there)."""
    markdown = re.sub(r"```.*?```", "", markdown, flags=re.S)
    return re.sub(r"(`+).*?\1", "", markdown)


def _row(output: str, passed: bool = True) -> OutputVerdict:
    return OutputVerdict(
        pair=("onnxrt", "golden"), output=output, passed=passed, stat="max", atol=1e-5, rtol=1e-5,
        abs_value=0.5 if not passed else 0.0, rel_value=0.5 if not passed else 0.0, iterations=8,
        failed_iterations=0 if passed else 1, worst_iteration=None if passed else 3,
    )  # fmt: skip


def test_md_text_defuses_issue_and_pull_request_references():
    text = md_text("fixes #1, see owner/repo#2 and GH-3; keep #a, GH-x, C#")
    assert text == f"fixes #{WORD_JOINER}1, see owner/repo#{WORD_JOINER}2 and GH-{WORD_JOINER}3; keep #a, GH-x, C#"
    assert not REFERENCE.search(text)
    assert unlinked("gh-12 and #0") == f"gh-{WORD_JOINER}12 and #{WORD_JOINER}0"


def test_references_from_a_forks_results_file_never_reach_the_comment_as_links(tmp_path):
    """A results file as a fork's workflow would write it: output names, the message, the title and
    the runtime facts carry references; read back as untrusted and rendered as the comment."""
    result = GateResult(
        model="model#4.onnx",
        status="regressed",
        message="closes #1 and owner/repo#2, GH-3",
        rows=[_row("logits#5", passed=False), _row("GH-6"), _row("owner/repo#7")],
        iterations=8,
        facts={"fixes #8": "GH-9"},
        title="Accuracy #10",
    )
    path = write_report(result, tmp_path / "fork-results.json", None, "key")
    body = render_markdown(read_untrusted_report(path).result, "https://github.com/o/r/actions/runs/1", None)
    assert "closes #" in body and "GH-" in body  # the text is still there ...
    assert not REFERENCE.search(_outside_code(body)), _outside_code(body)  # ... but links nothing (on main: it did)


@pytest.mark.parametrize("twin", ["out\nput", "out\u200bput", "out\u202eput", "out\u00a0put", "out\x1bput"])
def test_names_differing_only_by_an_invisible_character_render_distinctly(tmp_path, twin):
    result = GateResult(
        model="model.onnx", status="passed", message="passed", rows=[_row("output"), _row(twin)], iterations=8
    )
    assert md_code("output") != md_code(twin)  # on main both were `output` (or `out put`)
    assert visible(twin).isprintable() and "\n" not in visible(twin)
    table = render_text(result).splitlines()
    assert len(table) == 7  # the header, two rule lines... no line broken by the name
    assert any(visible(twin) in line for line in table)
    markdown = render_markdown(result, None, None)
    assert md_code(visible(twin), in_table=True) in markdown
    junit = write_junit(result, tmp_path / "j.xml")
    names = [case.name for suite in JUnitXml.fromfile(str(junit)) for case in suite]
    assert len(names) == len(set(names)) == 2, names  # on main: two testcases "model.onnx/output"
    assert f"model.onnx/{visible(twin)}" in names


def test_junit_testcase_names_are_unique_even_for_names_that_are_the_same_text(tmp_path):
    """An output named like the stopped-iteration testcase, and two rows of one name, stay apart."""
    result = GateResult(
        model="m", status="error", message="stopped", rows=[_row("iteration 3"), _row("x"), _row("x")], iterations=3,
        stopped_at=3,
    )  # fmt: skip
    names = [case.name for suite in JUnitXml.fromfile(str(write_junit(result, tmp_path / "j.xml"))) for case in suite]
    assert names == ["m/iteration 3", "m/x", "m/x (2)", "m/iteration 3 (2)"]


def test_unique_names_skips_suffixes_already_taken():
    assert unique_names(["a", "a", "a (2)", "b", "a"]) == ["a", "a (3)", "a (2)", "b", "a (4)"]
    assert unique_names([]) == []


def test_visible_escapes_only_what_does_not_show():
    assert visible("résumé 日本 tab\there") == "résumé 日本 tab\\there"
    assert visible("a\u2028b\ufeffc\U000e0001") == "a\\u2028b\\ufeffc\\U000e0001"
    assert visible("a\nb", keep="\n") == "a\nb"
    assert visible(visible("x\u200by")) == visible("x\u200by")  # idempotent
