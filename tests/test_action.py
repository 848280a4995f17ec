"""End to end: ``gate.action.main(environ)`` on the shipped ppocr-cls example, with the environment a
GitHub Actions runner gives a Docker action (every declared input set, to its action.yml default or
empty), and a real HTTP server on 127.0.0.1 speaking GitHub's REST endpoints
(``fake_github.FakeGitHub``): comments, pull-request lookups, rate limits and read-only tokens."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import pytest
import yaml
from junitparser import Error, Failure, JUnitXml
from onnx import numpy_helper

from gate.action import FORK_NOTICE, INPUTS, annotate_outputs, main
from gate.github import actions as gh_actions
from gate.github.comments import COMMENT_TRUNCATE_AT, DIGEST_PREFIX, MARKER_PREFIX, GitHubClient, marker
from gate.report.markdown import md_code
from gate.results import GateResult, OutputVerdict
from gate.results_file import SCHEMA, write_report

from fake_github import BODY_LIMIT, TOKEN, FakeGitHub, json_response, parse_github_output, recorded_calls

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ppocr-cls"
ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
OUTPUT = "save_infer_model/scale_0.tmp_1"
OUTPUT_MD = r"save\_infer\_model/scale\_0.tmp\_1"  # as free text in Markdown, escaped
REPO = "octo/repo"
FORK = "forker/repo"
PR_NUMBER = 7
HEAD_SHA = "4f1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5"
PUSH_SHA = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
WORKFLOW = "accuracy"
TABLE_HEADER = "| result | output | abs error / atol | rel error / rtol | failed iters |"
PASS, FAIL = "✅\u00a0pass", "❌\u00a0FAIL"  # a table row's first cell
NOW = 1_700_000_000.0
_TIME_ATTR = re.compile(r'\stime="[^"]*"')


@pytest.fixture(autouse=True)
def sleeps(monkeypatch):
    """The REST client's retry waits, recorded instead of slept, and a fixed clock (the action builds
    the client itself)."""
    waits: list[float] = []
    monkeypatch.setitem(GitHubClient.__init__.__kwdefaults__, "sleep", waits.append)
    monkeypatch.setitem(GitHubClient.__init__.__kwdefaults__, "clock", lambda: NOW)
    return waits


def junit_results(path) -> list[tuple[str, list]]:
    """``(testcase name, [Failure/Error results])`` for every testcase of a JUnit file."""
    return [(case.name, list(case.result)) for suite in JUnitXml.fromfile(str(path)) for case in suite]


def golden_file(workspace: Path, iteration: int) -> Path:
    return workspace / "ppocr-cls" / "data" / f"test_data_set_{iteration}" / "output_0.pb"


def perturb_golden(workspace: Path, iteration: int = 5, delta: float = 0.01) -> None:
    """Add ``delta`` to the first element of the stored golden output of ``iteration``."""
    path = golden_file(workspace, iteration)
    tensor = onnx.load_tensor(str(path))
    array = numpy_helper.to_array(tensor).copy()
    array.flat[0] += delta
    onnx.save_tensor(numpy_helper.from_array(array, name=tensor.name), str(path))


def table_row(markdown: str, output: str = OUTPUT) -> list[str]:
    """The cells of ``output``'s row in a Markdown table (the name is a code span)."""
    [row] = [line for line in markdown.splitlines() if f" | {md_code(output, in_table=True)} | " in line]
    return [cell.strip() for cell in row.strip("|").split("|")]


def runner_inputs() -> dict[str, str]:
    """``INPUT_*`` as the runner sets them for a Docker action: every declared input, with its
    action.yml default (expressions such as ``${{ github.token }}`` evaluated by the caller) or empty."""
    env = {}
    for name, spec in ACTION["inputs"].items():
        default = str(spec.get("default", ""))
        env[f"INPUT_{name.upper()}"] = "" if "${{" in default else default
    return env


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    junit: Path
    report: dict | None

    def lines(self, prefix: str) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith(prefix)]

    @property
    def final(self) -> str:
        return self.stdout.rstrip().splitlines()[-1]


class Workspace:
    """The runner's side of a Docker action step: a copy of examples/ppocr-cls, the event file, fresh
    ``GITHUB_OUTPUT``/``GITHUB_STEP_SUMMARY`` files per step, and ``INPUT_*`` for every declared input."""

    def __init__(self, root: Path, api_url: str, capsys) -> None:
        self.root = root
        self.capsys = capsys
        self.steps = 0
        shutil.copytree(EXAMPLE, root / "ppocr-cls")
        self.config = str(root / "ppocr-cls" / "gate.toml")
        self.junit = root / "reports" / "accuracy-junit.xml"
        self.event = root.parent / f"{root.name}-event.json"  # the runner keeps it outside the workspace
        self.write_event(
            {"pull_request": {"number": PR_NUMBER, "head": {"sha": HEAD_SHA, "repo": {"full_name": REPO}}}}
        )
        self.env = runner_inputs()
        self.env.update(
            {
                "INPUT_CONFIG": self.config,
                "INPUT_GITHUB_TOKEN": TOKEN,
                "INPUT_JUNIT_PATH": str(self.junit),
                "GITHUB_ACTIONS": "true",
                "CI": "true",
                "GITHUB_API_URL": api_url.rstrip("/"),
                "GITHUB_SERVER_URL": "https://github.com",
                "GITHUB_REPOSITORY": REPO,
                "GITHUB_EVENT_NAME": "pull_request",
                "GITHUB_EVENT_PATH": str(self.event),
                "GITHUB_SHA": "9999999999999999999999999999999999999999",  # the test merge commit
                "GITHUB_WORKFLOW": WORKFLOW,
                "GITHUB_RUN_ID": "123456",
                "GITHUB_WORKSPACE": str(root),
            }
        )

    @property
    def comment_marker(self) -> str:
        """The marker of the action's comment with the default key, ``<workflow>/<config input>``."""
        return marker(f"{WORKFLOW}/{self.config}")

    @property
    def report_file(self) -> Path:
        return self.root / "accuracy-gate-report.json"

    def write_event(self, payload: dict, number: int | None = PR_NUMBER) -> None:
        if number is not None:
            payload = {**payload, "number": number}
        self.event.write_text(json.dumps(payload), encoding="utf-8")

    def write_fork_event(self) -> None:
        self.write_event(
            {"pull_request": {"number": PR_NUMBER, "head": {"sha": HEAD_SHA, "repo": {"full_name": FORK}}}}
        )

    def run(self, **changes: str | None) -> Run:
        """Run the action in-process with the base environment updated by ``changes`` (None unsets)."""
        self.steps += 1
        output = self.root.parent / f"{self.root.name}-github_output_{self.steps}"
        summary = self.root.parent / f"{self.root.name}-step_summary_{self.steps}"
        output.touch()
        summary.touch()
        environ = {**self.env, "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary), **changes}
        environ = {k: v for k, v in environ.items() if v is not None}
        self.capsys.readouterr()
        code = main(environ)
        out, err = self.capsys.readouterr()
        report_file = self.root / (environ.get("INPUT_REPORT_PATH") or "accuracy-gate-report.json")
        run = Run(
            code,
            out,
            err,
            parse_github_output(output.read_text(encoding="utf-8")),
            summary.read_text(encoding="utf-8"),
            Path(environ.get("INPUT_JUNIT_PATH") or self.root / "accuracy-gate-junit.xml"),
            json.loads(report_file.read_text(encoding="utf-8")) if report_file.is_file() else None,
        )
        token = environ.get("INPUT_GITHUB_TOKEN")
        if token:  # the token is masked before anything else is printed and never shown again
            assert out.splitlines()[0] == f"::add-mask::{token}"
            assert out.count(token) == 1 and token not in err
            assert token not in run.summary and token not in output.read_text(encoding="utf-8")
            for written in (run.junit, report_file):
                if written.is_file():
                    assert token not in written.read_text(encoding="utf-8")
        if environ.get("RUNNER_DEBUG") != "1":
            assert "Traceback" not in out + err
        return run


@pytest.fixture
def workspace(tmp_path, httpserver, monkeypatch, capsys):
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.chdir(root)
    return Workspace(root, httpserver.url_for("/"), capsys)


# --- the pull_request path -----------------------------------------------------------------------


def test_first_run_comments_and_reports_a_pass(workspace, fake):
    run = workspace.run()

    assert run.code == 0
    [comment] = fake.on_pr(PR_NUMBER)
    assert comment["user"]["login"] == "github-actions[bot]"
    body = comment["body"]
    assert body.splitlines()[0] == workspace.comment_marker and body.startswith(MARKER_PREFIX)
    assert OUTPUT in body and table_row(body)[0] == PASS
    assert "**passed**: 1 of 1 outputs within tolerance over 8 iterations" in body
    assert f"commit {HEAD_SHA[:12]}" in body  # the PR head, not the test merge commit
    assert "[workflow run](https://github.com/octo/repo/actions/runs/123456)" in body
    assert [(c.method, c.path) for c in fake.calls] == [  # no GET /user: a GITHUB_TOKEN always gets 403 there
        ("GET", f"/repos/{REPO}/issues/{PR_NUMBER}/comments"),
        ("POST", f"/repos/{REPO}/issues/{PR_NUMBER}/comments"),
        ("GET", f"/repos/{REPO}/issues/{PR_NUMBER}/comments"),  # no concurrent run's comment of this key
    ]
    assert fake.calls[1].body == {"body": body}

    report = json.loads(run.outputs.pop("report_json"))
    assert run.outputs == {
        "passed": "true",
        "regressed": "false",
        "failed_outputs": "[]",
        "junit_path": "reports/accuracy-junit.xml",
        "report_path": "accuracy-gate-report.json",
    }
    assert report == run.report  # the one-line output is the results file
    assert (report["schema"], report["version"], report["status"]) == (SCHEMA, 1, "passed")
    assert (report["commit"], report["comment_key"]) == (HEAD_SHA, f"{WORKFLOW}/{workspace.config}")
    [row] = report["rows"]
    assert (row["output"], row["passed"], row["stat"], row["atol"], row["iterations"]) == (
        OUTPUT,
        True,
        "elemwise",
        1e-5,
        8,
    )
    assert TABLE_HEADER in run.summary and table_row(run.summary) == [
        PASS,
        md_code(OUTPUT, in_table=True),
        "0\u00a0/\u00a01e\u221205",
        "0\u00a0/\u00a00.0001",
        "0/8",
    ]
    assert "8 iterations" not in run.summary.split("\n")[4] and "checked statistic: elemwise" in run.summary
    assert run.summary.rstrip() in body  # the comment is the job summary under the marker
    assert junit_results(run.junit) == [(f"model.onnx/{OUTPUT}", [])]
    assert run.final == "::notice title=accuracy-gate::passed: 1 of 1 outputs within tolerance over 8 iterations"
    assert not run.lines("::error") and not run.lines("::warning")
    assert f"PR comment created: https://github.com/{REPO}/pull/{PR_NUMBER}#issuecomment-{comment['id']}" in run.stdout


def test_long_phases_are_folded_into_groups_and_the_verdict_is_last(workspace, fake):
    run = workspace.run()

    lines = run.stdout.splitlines()
    groups = [line for line in lines if line.startswith(("::group::", "::endgroup::"))]
    assert groups == [
        "::group::Accuracy gate: run the model and compare with the golden outputs",
        "::endgroup::",
        "::group::Accuracy gate: reports",
        "::endgroup::",
    ]
    table = lines.index(next(line for line in lines if line.startswith("accuracy-gate: model.onnx")))
    assert lines.index(groups[1]) < table < lines.index(groups[2])  # the result table is outside the folds
    assert lines[-1].startswith("::notice title=accuracy-gate::passed: ")


def test_second_run_updates_the_same_comment_with_the_failure(workspace, fake):
    for i in range(130):  # a busy pull request: the comment list needs two pages
        fake.add(f"review comment {i}", author="reviewer", number=PR_NUMBER)
    first = workspace.run()
    [ours] = [c for c in fake.on_pr(PR_NUMBER) if MARKER_PREFIX in c["body"]]
    first_calls = len(fake.calls)

    perturb_golden(workspace.root, iteration=5)
    second = workspace.run()

    assert (first.code, second.code) == (0, 1)
    assert len(fake.on_pr(PR_NUMBER)) == 131 and len(fake.calls_to("POST")) == 1
    [patch] = fake.calls_to("PATCH")
    assert patch.path == f"/repos/{REPO}/issues/comments/{ours['id']}" and patch.status == 200
    later = fake.calls[first_calls:]
    pages = [c.query for c in later if c.method == "GET" and c.path.endswith("/comments")]
    assert pages == ["per_page=100", "per_page=100&page=2"]
    body = fake.comments[ours["id"]]["body"]
    assert body == patch.body["body"] and body.splitlines()[0] == workspace.comment_marker
    assert f"**regressed**: 1 of 1 outputs out of tolerance: '{OUTPUT_MD}'" in body
    assert [table_row(body)[0], table_row(body)[-1]] == [FAIL, "1/8"]
    assert f"- `{OUTPUT}`: FAILED:" in body and "at iteration 5" in body

    assert (second.outputs["passed"], second.outputs["regressed"]) == ("false", "true")
    assert json.loads(second.outputs["failed_outputs"]) == [OUTPUT]
    assert second.outputs["junit_path"] == "reports/accuracy-junit.xml"  # relative to the workspace
    assert second.report["status"] == "regressed" and second.report["failed_outputs"] == [OUTPUT]
    assert second.report["rows"][0]["abs_value"] == pytest.approx(0.01, rel=1e-4)
    xml = JUnitXml.fromfile(str(workspace.junit))
    assert (xml.tests, xml.failures, xml.errors) == (1, 1, 0)
    [(name, [failure])] = junit_results(workspace.junit)
    assert name == f"model.onnx/{OUTPUT}" and isinstance(failure, Failure)
    assert "at iteration 5" in failure.message and "1/8 iterations failed" in failure.message
    assert "abs error 0.01 " in failure.message
    # One annotation for the failing output, then the verdict as the last line.
    annotation, final = second.lines("::error")
    assert annotation == gh_actions.workflow_command("error", failure.message, title=f"accuracy-gate: {OUTPUT}")
    assert annotation.startswith("::error title=accuracy-gate%3A save_infer_model/scale_0.tmp_1::FAILED: ")
    assert final == second.final
    assert final.startswith("::error title=accuracy-gate::accuracy regressed: 1 of 1 outputs out of tolerance")
    assert "PR comment updated" in second.stdout


def test_unchanged_report_sends_no_patch(workspace, fake):
    workspace.run()
    again = workspace.run()

    assert again.code == 0 and len(fake.on_pr(PR_NUMBER)) == 1
    assert fake.calls_to("PATCH") == [] and len(fake.calls_to("POST")) == 1
    assert "PR comment unchanged" in again.stdout


def test_comment_by_another_author_with_our_marker_is_never_modified(workspace, fake):
    quoted = f"{workspace.comment_marker}\nQuoting the bot: it said PASS, are we sure?"
    theirs = fake.add(quoted, author="someone-else", number=PR_NUMBER)
    before = dict(theirs)

    first = workspace.run()
    newer = fake.add(quoted, author="someone-else", number=PR_NUMBER)  # a newer foreign copy must not win
    newer_before = dict(newer)
    perturb_golden(workspace.root)
    second = workspace.run()

    assert (first.code, second.code) == (0, 1)
    ours = [c for c in fake.on_pr(PR_NUMBER) if c["user"]["login"] == "github-actions[bot]"]
    assert len(ours) == 1 and ours[0]["id"] not in (theirs["id"], newer["id"])
    assert fake.comments[theirs["id"]] == before and fake.comments[newer["id"]] == newer_before
    assert [c.path for c in fake.calls_to("PATCH")] == [f"/repos/{REPO}/issues/comments/{ours[0]['id']}"]
    assert "FAIL" in ours[0]["body"] and ours[0]["updated_at"] != ours[0]["created_at"]


def _normalized_junit(path: Path) -> str:
    return _TIME_ATTR.sub("", path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "scenario, code",
    [("unchanged", 0), ("perturbed", 1), ("golden-missing", 2)],
)
def test_server_errors_change_nothing_but_a_warning(tmp_path, httpserver, monkeypatch, capsys, scenario, code):
    def workspace_for(name):
        root = tmp_path / name
        root.mkdir()
        monkeypatch.chdir(root)
        ws = Workspace(root, httpserver.url_for("/"), capsys)
        if scenario == "perturbed":
            perturb_golden(root)
        elif scenario == "golden-missing":
            golden_file(root, 3).unlink()
        return ws

    fake = FakeGitHub(httpserver)
    working = workspace_for("working").run()
    assert len(fake.on_pr(PR_NUMBER)) == 1

    httpserver.clear()
    httpserver.expect_request(re.compile(".*")).respond_with_json({"message": "Server Error"}, status=500)
    broken = workspace_for("broken").run()

    assert working.code == broken.code == code
    assert _normalized_junit(broken.junit) == _normalized_junit(working.junit).replace("/working/", "/broken/")

    def comparable(outputs):  # the results differ in the run's duration only
        report = json.loads(outputs["report_json"])
        report.pop("duration_s")
        return {**outputs, "report_json": json.dumps(report)}

    assert comparable(broken.outputs) == {
        k: v.replace("/working/", "/broken/") for k, v in comparable(working.outputs).items()
    }
    assert broken.summary == working.summary.replace("/working/", "/broken/")
    calls = recorded_calls(httpserver)
    assert calls and all(c.status == 500 for c in calls)
    assert {c.method for c in calls} == {"GET"}  # nothing was created or changed
    [warning] = broken.lines("::warning")
    assert "PR comment" in warning and "HTTP 500" in warning
    assert broken.lines("::error") == [
        line.replace("/working/", "/broken/") for line in working.lines("::error")
    ] and broken.lines("::notice") == working.lines("::notice")
    assert not working.lines("::warning")


def test_token_is_masked_first_and_redacted_from_errors(workspace, httpserver, sleeps):
    def echo(request):  # a misbehaving proxy that echoes the credentials into its error message
        return json_response({"message": f"upstream failed for {request.headers.get('Authorization')}"}, 502)

    httpserver.expect_request(re.compile(".*")).respond_with_handler(echo)
    run = workspace.run(RUNNER_DEBUG="1")  # debug: tracebacks of reporting failures are printed too

    assert run.code == 0
    assert run.stdout.splitlines()[0] == f"::add-mask::{TOKEN}"
    assert TOKEN not in run.stdout.split("\n", 1)[1] and TOKEN not in run.stderr
    [warning] = run.lines("::warning")
    assert "PR comment" in warning and "Bearer ***" in warning
    assert f"GitHubError: GitHub API GET /repos/{REPO}/issues/{PR_NUMBER}/comments failed with HTTP 502" in run.stderr
    assert sleeps == [1.0, 2.0, 4.0]  # the GET was retried with backoff, without sleeping for real


def test_rate_limited_list_waits_for_retry_after_then_comments(workspace, fake, sleeps):
    fake.script("GET", "/comments$", (429, {"Retry-After": "17"}), (500,))

    run = workspace.run()

    assert run.code == 0 and len(fake.on_pr(PR_NUMBER)) == 1
    assert sleeps == [17.0, 2.0]  # Retry-After, then the backoff of the second attempt
    assert [c.status for c in fake.calls_to("GET", "/comments$")] == [429, 500, 200, 200]  # + the list after POST
    assert not run.lines("::warning")


def test_exhausted_primary_rate_limit_waits_until_the_reset(workspace, fake, sleeps):
    reset = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 42)}
    fake.script("POST", "/comments$", (403, reset, "API rate limit exceeded for installation"))

    run = workspace.run()

    assert run.code == 0 and len(fake.on_pr(PR_NUMBER)) == 1
    assert sleeps == [43.0]  # until x-ratelimit-reset (on the injected clock), plus a second
    assert [c.status for c in fake.calls_to("POST")] == [403, 201]


def test_github_enterprise_api_url_is_used(workspace, fake, httpserver):
    run = workspace.run(GITHUB_API_URL=httpserver.url_for("/api/v3"))

    assert run.code == 0 and len(fake.on_pr(PR_NUMBER)) == 1
    assert {c.path.split("/repos/")[0] for c in fake.calls if "/repos/" in c.path} == {"/api/v3"}
    assert [c.path for c in fake.calls if "/repos/" not in c.path] == []  # no GET /user for a GITHUB_TOKEN


def test_comment_false_is_the_deprecated_comment_mode_off(workspace, fake, httpserver):
    run = workspace.run(INPUT_COMMENT="false")

    assert run.code == 0 and run.outputs["passed"] == "true"
    assert httpserver.log == [] and fake.calls == []
    assert "PR comment" not in run.stdout
    assert run.report["status"] == "passed"  # the results file is written all the same


def test_push_event_comments_on_the_open_pull_request_whose_head_is_the_commit(workspace, fake):
    workspace.write_event({"ref": "refs/heads/feature", "after": PUSH_SHA}, number=None)
    fake.add_pull(3, PUSH_SHA, state="closed", repo=REPO)  # closed: never
    fake.add_pull(5, "e" * 40, branch="other", commits=[PUSH_SHA], repo=REPO)  # contains the commit, head moved on
    fake.add_pull(9, PUSH_SHA, branch="feature", repo=REPO)

    run = workspace.run(GITHUB_EVENT_NAME="push", GITHUB_SHA=PUSH_SHA)

    assert run.code == 0
    [lookup] = fake.calls_to("GET", "/pulls$")
    assert lookup.path == f"/repos/{REPO}/commits/{PUSH_SHA}/pulls"
    assert fake.on_pr(3) == fake.on_pr(5) == []
    [comment] = fake.on_pr(9)
    assert f"commit {PUSH_SHA[:12]}" in comment["body"]
    assert f"Pull request #9, found from commit {PUSH_SHA[:12]}." in run.stdout


def test_push_event_without_an_open_pull_request_comments_nowhere(workspace, fake):
    workspace.write_event({"ref": "refs/heads/main", "after": PUSH_SHA}, number=None)
    fake.add_pull(4, PUSH_SHA, state="closed", repo=REPO)

    run = workspace.run(GITHUB_EVENT_NAME="push", GITHUB_SHA=PUSH_SHA)

    assert run.code == 0 and run.outputs["passed"] == "true"
    assert fake.comments == {} and fake.calls_to("POST") == []
    assert [c.path for c in fake.calls] == [f"/repos/{REPO}/commits/{PUSH_SHA}/pulls"]
    assert f"No open pull request of {REPO} has commit {PUSH_SHA[:12]} as its head. Skipping the PR comment." in (
        run.stdout
    )
    assert f"commit {PUSH_SHA[:12]}" in run.summary
    assert not run.lines("::warning")


def test_push_event_with_pr_number_comments_on_that_pr(workspace, fake):
    workspace.write_event({"ref": "refs/heads/main", "after": PUSH_SHA}, number=None)
    run = workspace.run(GITHUB_EVENT_NAME="push", GITHUB_SHA=PUSH_SHA, INPUT_PR_NUMBER="9")

    assert run.code == 0
    assert fake.on_pr(PR_NUMBER) == []
    [comment] = fake.on_pr(9)
    assert comment["body"].splitlines()[0] == workspace.comment_marker
    assert f"commit {PUSH_SHA[:12]}" in comment["body"]
    assert [c.path for c in fake.calls_to("POST")] == [f"/repos/{REPO}/issues/9/comments"]
    assert fake.calls_to("GET", "/pulls$") == []  # no lookup when the number is given


def test_missing_golden_file_is_an_error_that_is_still_reported(workspace, fake):
    missing = golden_file(workspace.root, 3)
    missing.unlink()

    run = workspace.run()

    assert run.code == 2
    assert workspace.junit.is_file()
    # Nothing lost: iterations 0-2 were compared and are reported; the stop is an error testcase.
    [(compared, compared_results), (name, [error])] = junit_results(workspace.junit)
    assert compared.endswith(OUTPUT) and compared_results == []
    assert isinstance(error, Error) and error.type == "could-not-evaluate"
    assert str(missing) in error.message and name.endswith("/iteration 3")
    assert "stopped after 3 of 8 iterations" in error.message
    assert run.final.startswith("::error title=accuracy-gate::could not evaluate: ")
    # the annotation names the file relative to the workspace, as the job summary does
    assert " ppocr-cls/data/test_data_set_3/output_0.pb: file not found" in run.final and str(missing) not in run.final
    assert [run.outputs[k] for k in ("passed", "regressed", "failed_outputs", "junit_path")] == [
        "false",
        "false",
        "[]",
        "reports/accuracy-junit.xml",
    ]
    assert run.report["status"] == "error" and [r["output"] for r in run.report["rows"]] == [OUTPUT]
    [comment] = fake.on_pr(PR_NUMBER)
    assert comment["body"].splitlines()[0] == workspace.comment_marker
    assert "**error (could not evaluate)**" in comment["body"]
    assert "ERROR (could not evaluate)" in run.stdout


@pytest.mark.parametrize("config", [None, "", "   "], ids=["unset", "empty", "blank"])
def test_missing_config_input_is_a_one_line_error(workspace, fake, config):
    run = workspace.run(INPUT_CONFIG=config)

    assert run.code == 2
    [error] = run.lines("::error")
    assert "config" in error and "required" in error
    assert "%0A" not in error  # one line, even once the runner decodes it
    assert run.outputs["passed"] == "false"
    [(name, [junit_error])] = junit_results(workspace.junit)
    assert isinstance(junit_error, Error) and "config" in junit_error.message


def test_unreadable_event_file_only_loses_the_comment(workspace, fake):
    workspace.event.write_text("{not json", encoding="utf-8")

    run = workspace.run()

    assert run.code == 0 and run.outputs["passed"] == "true"
    assert any("PR comment" in line for line in run.lines("::warning"))
    assert fake.comments == {}


def test_perturbation_helper_changes_one_value_only(tmp_path):
    shutil.copytree(EXAMPLE, tmp_path / "ppocr-cls")
    before = numpy_helper.to_array(onnx.load_tensor(str(golden_file(tmp_path, 5))))
    perturb_golden(tmp_path, 5)
    after = numpy_helper.to_array(onnx.load_tensor(str(golden_file(tmp_path, 5))))

    assert after.shape == before.shape and after.dtype == before.dtype
    assert np.count_nonzero(after != before) == 1
    np.testing.assert_allclose((after - before).flat[0], 0.01, rtol=1e-5)


def test_files_written_into_the_workspace_belong_to_its_owner(workspace, fake):
    # The container runs as root; what it leaves in the workspace must belong to the workspace's owner
    # (root-owned files break the next actions/checkout on self-hosted runners, actions/runner#434).
    if os.geteuid() != 0:
        pytest.skip("needs root to chown")
    os.chown(workspace.root, 1234, 1234)

    run = workspace.run(INPUT_REPORT_PATH="out/results/report.json")

    assert run.code == 0
    assert (run.junit.stat().st_uid, run.junit.stat().st_gid) == (1234, 1234)
    assert run.junit.parent.stat().st_uid == 1234  # the reports/ folder we created too
    report = workspace.root / "out" / "results" / "report.json"
    assert run.outputs["report_path"] == "out/results/report.json"
    assert [p.stat().st_uid for p in (report, report.parent, report.parent.parent)] == [1234, 1234, 1234]


# --- forks and read-only tokens ------------------------------------------------------------------


def test_fork_pull_request_skips_the_comment_with_one_notice_and_still_reports(workspace, fake, httpserver):
    workspace.write_fork_event()
    perturb_golden(workspace.root)

    run = workspace.run()

    assert run.code == 1
    assert httpserver.log == []  # not even a lookup: the fork's token could not write anyway
    notice, final = run.lines("::notice"), run.lines("::error")[-1]
    assert notice == [
        gh_actions.workflow_command(
            "notice", FORK_NOTICE.format(report="accuracy-gate-report.json"), title="accuracy-gate"
        )
    ]
    assert not run.lines("::warning")
    assert final == run.final and "accuracy regressed" in final
    # Everything else is still written.
    [(_, [failure])] = junit_results(run.junit)
    assert isinstance(failure, Failure)
    assert table_row(run.summary)[0] == FAIL
    assert (run.outputs["passed"], run.outputs["regressed"]) == ("false", "true")
    assert run.outputs["report_path"] == "accuracy-gate-report.json"
    assert run.report["status"] == "regressed" and run.report["rows"][0]["output"] == OUTPUT
    assert run.report["commit"] == HEAD_SHA


def test_deleted_fork_counts_as_a_fork(workspace, fake, httpserver):
    workspace.write_event({"pull_request": {"number": PR_NUMBER, "head": {"sha": HEAD_SHA, "repo": None}}})

    run = workspace.run()

    assert run.code == 0 and httpserver.log == [] and len(run.lines("::notice")) == 2  # fork notice + verdict


def test_read_only_token_403_is_one_notice_and_the_rest_is_reported(workspace, httpserver):
    # A same-repository pull request whose token is read-only all the same (Dependabot, or a workflow
    # without `pull-requests: write`): GitHub answers the POST with 403.
    fake = FakeGitHub(httpserver, read_only=True)

    run = workspace.run()

    assert run.code == 0
    [post] = fake.calls_to("POST")  # a 403 that is not a rate limit is never retried
    assert post.status == 403 and fake.comments == {}
    [notice, final] = run.lines("::notice")
    assert "HTTP 403 Resource not accessible by integration" in notice and f"#{PR_NUMBER}" in notice
    assert "accuracy-gate-report.json" in notice
    assert final == run.final and final.startswith("::notice title=accuracy-gate::passed")
    assert not run.lines("::warning") and not run.lines("::error")
    assert run.outputs["passed"] == "true" and run.report["status"] == "passed"
    assert table_row(run.summary)[0] == PASS


# --- comment modes and keys ----------------------------------------------------------------------


def test_comment_mode_off_sends_no_request(workspace, fake, httpserver):
    run = workspace.run(INPUT_COMMENT_MODE="off")

    assert run.code == 0 and httpserver.log == [] and "PR comment" not in run.stdout


def test_comment_mode_on_change_skips_a_new_run_with_the_same_results(workspace, fake):
    first = workspace.run(INPUT_COMMENT_MODE="on-change")
    [comment] = fake.on_pr(PR_NUMBER)
    body = comment["body"]
    assert body.splitlines()[1].startswith(DIGEST_PREFIX)

    # A new commit and a new run, same results: the comment stays as it is.
    workspace.write_event(
        {"pull_request": {"number": PR_NUMBER, "head": {"sha": PUSH_SHA, "repo": {"full_name": REPO}}}}
    )
    again = workspace.run(INPUT_COMMENT_MODE="on-change", GITHUB_RUN_ID="123457")
    assert fake.calls_to("PATCH") == [] and fake.comments[comment["id"]]["body"] == body
    assert "PR comment unchanged" in again.stdout

    # The results change: the comment is updated.
    perturb_golden(workspace.root)
    changed = workspace.run(INPUT_COMMENT_MODE="on-change", GITHUB_RUN_ID="123458")
    [patch] = fake.calls_to("PATCH")
    assert patch.path.endswith(f"/comments/{comment['id']}")
    new_body = fake.comments[comment["id"]]["body"]
    assert new_body.splitlines()[1] != body.splitlines()[1] and "FAIL" in new_body
    assert f"commit {PUSH_SHA[:12]}" in new_body and "runs/123458" in new_body
    assert (first.code, again.code, changed.code) == (0, 0, 1)


def test_comment_mode_on_failure_creates_only_for_failures_and_clears_them(workspace, fake):
    passing = workspace.run(INPUT_COMMENT_MODE="on-failure")
    assert fake.calls_to("POST") == [] and fake.comments == {}
    assert f"PR comment skipped: comment_mode on-failure and pull request #{PR_NUMBER} has none to update." in (
        passing.stdout
    )

    golden = golden_file(workspace.root, 5)
    original = golden.read_bytes()
    perturb_golden(workspace.root)
    failing = workspace.run(INPUT_COMMENT_MODE="on-failure")
    [comment] = fake.on_pr(PR_NUMBER)
    assert "FAIL" in comment["body"]

    golden.write_bytes(original)  # fixed: the failure comment must not stay behind, it is updated
    fixed = workspace.run(INPUT_COMMENT_MODE="on-failure")
    assert len(fake.calls_to("POST")) == 1 and len(fake.calls_to("PATCH")) == 1
    assert "**passed**" in fake.comments[comment["id"]]["body"]
    assert (passing.code, failing.code, fixed.code) == (0, 1, 0)


def test_comment_keys_keep_one_comment_per_matrix_leg(workspace, fake):
    workspace.run(INPUT_COMMENT_KEY="ppocr-cls/cpu")
    workspace.run(INPUT_COMMENT_KEY="ppocr-cls/cuda")
    perturb_golden(workspace.root)
    workspace.run(INPUT_COMMENT_KEY="ppocr-cls/cpu")

    cpu, cuda = fake.on_pr(PR_NUMBER)
    assert cpu["body"].splitlines()[0] == marker("ppocr-cls/cpu") and "FAIL" in cpu["body"]
    assert cuda["body"].splitlines()[0] == marker("ppocr-cls/cuda") and "FAIL" not in cuda["body"]
    assert [c.path for c in fake.calls_to("PATCH")] == [f"/repos/{REPO}/issues/comments/{cpu['id']}"]


# --- inputs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, value, expected",
    [
        ("check_average", "yes", "Input `check_average` must be `true` or `false`, got 'yes'."),
        ("infinities_compare_equal", "1", "Input `infinities_compare_equal` must be `true` or `false`, got '1'."),
        ("comment", "maybe", "Input `comment` must be `true` or `false`, got 'maybe'."),
        ("pr_number", "7.5", "Input `pr_number` must be a positive integer, got '7.5'."),
        ("pr_number", "0", "Input `pr_number` must be a positive integer, got '0'."),
        ("comment_mode", "sometimes", "Input `comment_mode` must be one of `always`, `on-change`, `on-failure`, `off`"),
        ("mode", "post", "Input `mode` must be one of `check`, `comment`, `merge`, got 'post'."),
        ("atol", "-1", "Input `atol` must be a non-negative finite number, got -1.0."),
        ("rtol", "logits:nan", "Input `rtol` must be a non-negative finite number, got nan (output 'logits')."),
        ("atol", "abc", "Input `atol`: cannot read 'abc'"),
        ("check_error_stat", "p99", "Input `check_error_stat` must be one of"),
        ("graph_optimization_level", "max", "Input `graph_optimization_level` must be one of `disable`, `basic`"),
        ("runners", "onnxrt tensorrt", "Input `runners` names unknown runner 'tensorrt'; available: onnxrt, trt."),
        ("comment_author", "not a login", "Input `comment_author` must be a GitHub login"),
    ],
)
def test_invalid_input_is_a_one_line_error_naming_it(workspace, fake, name, value, expected):
    run = workspace.run(**{f"INPUT_{name.upper()}": value})

    assert run.code == 2
    assert run.final.startswith("::error title=accuracy-gate::could not evaluate: " + expected)
    assert "%0A" not in run.final
    [(_, [junit_error])] = junit_results(workspace.junit)
    assert isinstance(junit_error, Error) and junit_error.message.startswith(expected)
    assert run.outputs["passed"] == "false" and run.report["status"] == "error"


@pytest.mark.parametrize("name", ["config", "model", "inputs", "golden", "junit_path", "report_path"])
@pytest.mark.parametrize("how", ["dotdot", "absolute", "symlink"])
def test_path_inputs_escaping_the_workspace_are_refused(workspace, fake, tmp_path, name, how):
    outside = tmp_path / "outside"
    shutil.copytree(EXAMPLE, outside)
    target = {"config": "gate.toml", "model": "model.onnx", "inputs": "data", "golden": "data"}.get(name, "out.xml")
    if how == "dotdot":
        value = f"ppocr-cls/../../outside/{target}"
    elif how == "absolute":
        value = str(outside / target)
    else:
        (workspace.root / "innocent").symlink_to(outside, target_is_directory=True)
        value = f"innocent/{target}"
    changes = {f"INPUT_{name.upper()}": value}
    if name == "junit_path":
        changes["INPUT_JUNIT_PATH"] = value  # the JUnit file then goes to the default path
    before = sorted(p.name for p in outside.iterdir())

    run = workspace.run(**changes)

    assert run.code == 2
    expected = f"Input `{name}` names {value!r}, which resolves to {outside / target}, outside the workspace"
    assert expected in run.final
    assert sorted(p.name for p in outside.iterdir()) == before  # nothing was written outside
    assert fake.calls_to("POST")  # the error is still reported on the pull request


@pytest.mark.parametrize("how", ["dotdot", "absolute"])
def test_report_junit_of_gate_toml_cannot_leave_the_workspace(workspace, fake, tmp_path, how):
    outside = tmp_path / "outside"
    outside.mkdir()
    junit = "../outside/escape.xml" if how == "dotdot" else str(outside / "escape.xml")
    config = Path(workspace.config)
    config.write_text(
        config.read_text(encoding="utf-8").replace('junit = "accuracy-gate-junit.xml"', f'junit = "{junit}"')
    )

    run = workspace.run(INPUT_JUNIT_PATH=None)  # the JUnit path comes from gate.toml's [report] junit

    assert run.code == 2
    expected = f"{junit}: 'report.junit' resolves outside {workspace.root}; paths must stay inside it."
    assert run.final == f"::error title=accuracy-gate::could not evaluate: {expected}"
    assert list(outside.iterdir()) == []  # nothing was written outside
    # The error is reported in the default JUnit file, inside the workspace.
    [(name, [error])] = junit_results(workspace.root / "accuracy-gate-junit.xml")
    assert isinstance(error, Error) and error.message == expected
    assert run.outputs["junit_path"] == "accuracy-gate-junit.xml" and run.report["message"] == expected


def test_relative_path_inputs_are_relative_to_the_workspace(workspace, fake, tmp_path, monkeypatch):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    run = workspace.run(
        INPUT_CONFIG="ppocr-cls/gate.toml",
        INPUT_MODEL="ppocr-cls/../ppocr-cls/model.onnx",  # `..` that stays inside is fine
        INPUT_JUNIT_PATH="out/junit.xml",
        INPUT_REPORT_PATH="out/report.json",
    )

    assert run.code == 0, run.final
    assert (workspace.root / "out" / "junit.xml").is_file() and (workspace.root / "out" / "report.json").is_file()
    assert (run.outputs["junit_path"], run.outputs["report_path"]) == ("out/junit.xml", "out/report.json")
    assert list(elsewhere.iterdir()) == []


def test_every_declared_input_is_read(workspace, fake, monkeypatch, tmp_path):
    read: set[str] = set()
    original = gh_actions.read_input

    def spy(name, environ=os.environ):
        read.add(name)
        return original(name, environ)

    monkeypatch.setattr(gh_actions, "read_input", spy)
    workspace.run(INPUT_RUNNERS="onnxrt", INPUT_ATOL="1e-5", INPUT_CHECK_ERROR_STAT="elemwise")
    workspace.run(**companion_env(workspace, tmp_path, fork=False))

    assert set(INPUTS) <= read, f"never read: {sorted(set(INPUTS) - read)}"


# --- annotations -----------------------------------------------------------------------------------


def _row(name: str, passed: bool, **extra) -> OutputVerdict:
    return OutputVerdict(
        ("onnxrt", "golden"),
        name,
        passed,
        stat="elemwise",
        atol=1e-5,
        rtol=1e-5,
        abs_value=0.5,
        rel_value=0.25,
        iterations=4,
        failed_iterations=0 if passed else 1,
        worst_iteration=2,
        **extra,
    )


def test_annotations_are_escaped_and_capped_at_ten_per_kind(capsys):
    rows = [_row(f"out,{i}:x%\nnext", False) for i in range(25)]
    rows += [_row(f"avg{i}", True, averaged=True) for i in range(3)]
    rows[-1].failed_iterations = 3  # passes on average only: a warning
    rows.append(_row("half", True, dtypes=("float16", "float32")))
    result = GateResult("m.onnx", "regressed", "25 of 29 outputs out of tolerance", rows=rows, iterations=4)

    annotate_outputs(result)

    lines = capsys.readouterr().out.splitlines()
    errors = [line for line in lines if line.startswith("::error")]
    warnings = [line for line in lines if line.startswith("::warning")]
    assert len(errors) == 9  # and the final verdict makes 10, what the Actions UI shows per step
    assert errors[0] == (
        "::error title=accuracy-gate%3A out%2C0%3Ax%25%0Anext::" + gh_actions.escape_data(rows[0].message())
    )
    assert "\n" not in "".join(errors) and errors[0].count("::") == 2
    assert errors[-1] == (
        "::error title=accuracy-gate::17 more outputs failed; every output is in the job summary and the JUnit report."
    )
    assert [w.split("::")[1] for w in warnings] == [
        "warning title=accuracy-gate%3A avg2",
        "warning title=accuracy-gate%3A half",
    ]
    assert "dtypes differ (float16 vs reference float32)" in warnings[1]


def test_ten_failures_leave_room_for_the_verdict_line(capsys):
    rows = [_row(f"o{i}", False) for i in range(10)]
    annotate_outputs(GateResult("m.onnx", "regressed", "10 failed", rows=rows, iterations=4))

    errors = capsys.readouterr().out.splitlines()
    assert len(errors) == 9 and errors[-1].endswith(
        "::2 more outputs failed; every output is in the job summary and the JUnit report."
    )


# --- the fork-safe workflow_run commenter (mode: comment) -----------------------------------------


def workflow_run_event(sha=HEAD_SHA, owner="forker", branch="feature", pull_requests=(), run_id=999):
    return {
        "action": "completed",
        "workflow_run": {
            "id": run_id,
            "name": WORKFLOW,
            "event": "pull_request",
            "status": "completed",
            "conclusion": "failure",
            "head_sha": sha,
            "head_branch": branch,
            "head_repository": {"full_name": f"{owner}/repo", "owner": {"login": owner}},
            "pull_requests": list(pull_requests),
            "html_url": f"https://github.com/{REPO}/actions/runs/{run_id}",
        },
    }


def companion_env(workspace: Workspace, tmp_path: Path, fork=True, report_path="artifact") -> dict:
    """A ``workflow_run`` step in ``mode: comment``: no config, the PR run's results file downloaded
    into ``artifact/``, the event of the PR's run."""
    event = tmp_path / "workflow_run-event.json"
    listed = [] if fork else [{"number": PR_NUMBER, "head": {"sha": HEAD_SHA, "ref": "feature"}}]
    event.write_text(json.dumps(workflow_run_event(pull_requests=listed)), encoding="utf-8")
    artifact = workspace.root / "artifact"
    if workspace.report_file.is_file() and not artifact.exists():
        artifact.mkdir()
        shutil.copy(workspace.report_file, artifact / "accuracy-gate-report.json")
    return {
        "INPUT_MODE": "comment",
        "INPUT_CONFIG": "",
        "INPUT_JUNIT_PATH": "",
        "INPUT_REPORT_PATH": report_path,
        "GITHUB_EVENT_NAME": "workflow_run",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_SHA": "1111111111111111111111111111111111111111",  # the default branch's head
        "GITHUB_WORKFLOW": "accuracy-gate comment",
        "GITHUB_RUN_ID": "1000",
    }


def test_companion_posts_the_fork_run_results_on_its_pull_request(workspace, fake, tmp_path):
    workspace.write_fork_event()
    perturb_golden(workspace.root)
    pr_run = workspace.run()
    assert pr_run.code == 1 and fake.comments == {}
    fake.add_pull(PR_NUMBER, HEAD_SHA, branch="feature", head_repo=FORK, repo=REPO)
    fake.add_pull(8, "f" * 40, branch="feature", head_owner="someone", head_repo="someone/repo", repo=REPO)

    run = workspace.run(**companion_env(workspace, tmp_path))

    assert run.code == 0
    assert "Accuracy gate: run the model" not in run.stdout  # no model runs in comment mode
    [lookup] = fake.calls_to("GET", "/pulls$")
    assert (lookup.path, lookup.query) == (f"/repos/{REPO}/pulls", "per_page=100&head=forker%3Afeature&state=open")
    [comment] = fake.on_pr(PR_NUMBER)
    body = comment["body"]
    assert body.splitlines()[0] == workspace.comment_marker  # the PR run's key, so one comment per gate
    assert [table_row(body)[0], table_row(body)[-1]] == [FAIL, "1/8"]
    assert "**regressed**: 1 of 1 outputs out of tolerance" in body
    assert f"commit {HEAD_SHA[:12]}" in body
    assert f"[workflow run](https://github.com/{REPO}/actions/runs/999)" in body  # the PR run, with its summary
    assert table_row(run.summary)[0] == FAIL
    assert (run.outputs["passed"], run.outputs["regressed"]) == ("false", "true")
    assert json.loads(run.outputs["report_json"])["rows"][0]["output"] == OUTPUT
    assert run.final.startswith("::notice title=accuracy-gate::comment mode: 1 results file(s) for pull request #7")
    assert f"Pull request #{PR_NUMBER}, found from its head forker:feature." in run.stdout

    # The rerun of the same results (on-change) leaves the comment alone.
    again = workspace.run(**companion_env(workspace, tmp_path), INPUT_COMMENT_MODE="on-change")
    assert again.code == 0 and len(fake.calls_to("PATCH")) == 1  # once, to add the digest line
    third = workspace.run(**companion_env(workspace, tmp_path), INPUT_COMMENT_MODE="on-change")
    assert third.code == 0 and len(fake.calls_to("PATCH")) == 1 and "PR comment unchanged" in third.stdout


def test_companion_requires_the_pull_request_head_to_be_the_run_commit(workspace, fake, tmp_path):
    workspace.write_fork_event()
    workspace.run()
    fake.add_pull(PR_NUMBER, "c" * 40, branch="feature", head_repo=FORK, repo=REPO)  # pushed again since

    run = workspace.run(**companion_env(workspace, tmp_path))

    assert run.code == 0 and fake.comments == {}
    assert f"No open pull request of {REPO} has head forker:feature at commit {HEAD_SHA}. Nothing to comment on." in (
        run.stdout
    )


def test_companion_uses_the_listed_pull_request_of_a_same_repo_run(workspace, fake, tmp_path):
    workspace.run(INPUT_COMMENT_MODE="off")

    run = workspace.run(**companion_env(workspace, tmp_path, fork=False))

    assert run.code == 0 and fake.calls_to("GET", "/pulls$") == []
    [comment] = fake.on_pr(PR_NUMBER)
    assert "**passed**" in comment["body"]


def test_companion_posts_each_results_file_of_a_matrix(workspace, fake, tmp_path):
    fake.add_pull(PR_NUMBER, HEAD_SHA, branch="feature", head_repo=FORK, repo=REPO)
    for leg, perturb in (("cpu", False), ("cuda", True)):
        if perturb:
            perturb_golden(workspace.root)
        workspace.run(INPUT_COMMENT_MODE="off", INPUT_COMMENT_KEY=f"ppocr/{leg}", INPUT_REPORT_PATH=f"{leg}.json")
        (workspace.root / "artifacts" / f"accuracy-gate-{leg}").mkdir(parents=True)
        shutil.move(workspace.root / f"{leg}.json", workspace.root / "artifacts" / f"accuracy-gate-{leg}" / "r.json")

    run = workspace.run(**companion_env(workspace, tmp_path, report_path="artifacts"))

    assert run.code == 0
    cpu, cuda = fake.on_pr(PR_NUMBER)
    assert cpu["body"].splitlines()[0] == marker("ppocr/cpu") and "**passed**" in cpu["body"]
    assert cuda["body"].splitlines()[0] == marker("ppocr/cuda") and "**regressed**" in cuda["body"]
    assert [d["status"] for d in json.loads(run.outputs["report_json"])] == ["passed", "regressed"]
    assert (run.outputs["passed"], run.outputs["regressed"]) == ("false", "true")


def _hostile_report(path: Path) -> None:
    rows = [
        _row("@octocat [click](https://evil.example) <img src=x onerror=alert(1)>", False),
        _row("`::add-mask::x`|</details><script>alert(1)</script>", True),
    ]
    result = GateResult(
        "<b>model</b>.onnx",
        "regressed",
        "all fine\n::error::forged annotation\n::add-mask::secret @everyone $$\\LaTeX$$ www.evil.example",
        rows=rows,
        iterations=4,
        facts={"</summary>": "<a href=javascript:alert(1)>x</a>"},
        title="## fake heading ![img](https://evil.example/x.png)",
    )
    write_report(result, path, comment_key="a -->\n<!-- b")


def test_companion_renders_a_hostile_results_file_as_inert_text(workspace, fake, tmp_path):
    fake.add_pull(PR_NUMBER, HEAD_SHA, branch="feature", head_repo=FORK, repo=REPO)
    (workspace.root / "artifact").mkdir()
    _hostile_report(workspace.root / "artifact" / "accuracy-gate-report.json")

    run = workspace.run(**companion_env(workspace, tmp_path))

    assert run.code == 0
    [comment] = fake.on_pr(PR_NUMBER)
    body = comment["body"]
    lines = body.splitlines()
    assert lines[0] == marker("a -->\n<!-- b") and lines[0].count("-->") == 1
    assert lines[1].startswith("## ❌ ")
    for forbidden in ("<img", "<script", "<b>", "<a href", "](https://evil", "![", "@octocat", "@everyone", "$$"):
        outside_code = re.sub(r"(`+).*?\1", "", body)  # code spans render literally
        assert forbidden not in outside_code, forbidden
    assert "www.evil" not in body.replace("www\u2060.", "")
    assert "\n::error::" not in body  # one line: nothing of it can start a line of its own
    # The log shows the file's text only between stop-commands markers, so the runner ignores it.
    out = run.stdout.splitlines()
    start = next(i for i, line in enumerate(out) if line.startswith("::stop-commands::"))
    token = out[start].split("::")[2]
    end = out.index(f"::{token}::")
    assert all("forged annotation" not in line for line in out[:start] + out[end + 1 :])
    assert any("forged annotation" in line for line in out[start:end])
    assert [line for line in out[:start] + out[end + 1 :] if line.startswith("::add-mask::")] == [
        f"::add-mask::{TOKEN}"
    ]


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"{not json", "the results file is not valid UTF-8 JSON"),
        (b'{"schema": "something-else", "version": 1}', "'schema' must be \"accuracy-gate-report\""),
        (b'{"schema": "accuracy-gate-report", "version": 2}', "results file version '2' is not supported"),
        (b'{"schema": "accuracy-gate-report", "version": 1, "status": "great"}', "'status' must be"),
        (
            b'{"schema": "accuracy-gate-report", "version": 1, "status": "passed", "rows": [], "message": NaN}',
            "not valid UTF-8 JSON",
        ),
        (b"\xff\xfe", "not valid UTF-8 JSON"),
        (b"x" * 5000, "larger than 4096 bytes"),
    ],
)
def test_companion_refuses_an_invalid_results_file(workspace, fake, tmp_path, monkeypatch, content, expected):
    monkeypatch.setattr("gate.results_file.MAX_FILE_BYTES", 4096)
    fake.add_pull(PR_NUMBER, HEAD_SHA, branch="feature", head_repo=FORK, repo=REPO)
    (workspace.root / "artifact").mkdir()
    (workspace.root / "artifact" / "report.json").write_bytes(content)

    run = workspace.run(**companion_env(workspace, tmp_path))

    assert run.code == 2 and fake.calls == []
    assert run.final.startswith("::error title=accuracy-gate::could not post the accuracy report: ")
    assert expected in run.final and "artifact/report.json" in run.final


def test_companion_needs_a_token(workspace, fake, tmp_path):
    workspace.run(INPUT_COMMENT_MODE="off")

    run = workspace.run(**companion_env(workspace, tmp_path), INPUT_GITHUB_TOKEN="")

    assert run.code == 2 and fake.calls == []
    assert run.final == (
        "::error title=accuracy-gate::could not post the accuracy report: "
        "Input 'github_token' is required: a token that may comment."
    )


def test_companion_with_a_read_only_token_fails_naming_the_permission(workspace, httpserver, tmp_path):
    fake = FakeGitHub(httpserver, read_only=True)
    fake.add_pull(PR_NUMBER, HEAD_SHA, branch="feature", head_repo=FORK, repo=REPO)
    workspace.write_fork_event()
    workspace.run()

    run = workspace.run(**companion_env(workspace, tmp_path))

    assert run.code == 2 and fake.comments == {}
    [error] = [line for line in run.lines("::error") if "Could not write the PR comment" in line]
    assert "HTTP 403" in error and "permissions: pull-requests: write" in error


def test_huge_report_fits_the_comment_and_github_never_answers_422(workspace, fake, tmp_path):
    rows = [_row(f"detection/head_{i:05d}/boxes", i % 10 != 0) for i in range(6000)]
    failed = [r.output for r in rows if not r.passed]
    result = GateResult(
        "detector.onnx",
        "regressed",
        f"{len(failed)} of {len(rows)} outputs out of tolerance: " + ", ".join(f"'{n}'" for n in failed),
        rows=rows,
        iterations=4,
        facts={f"fact_{i}": "x" * 100 for i in range(50)},
    )
    (workspace.root / "artifact").mkdir()
    write_report(result, workspace.root / "artifact" / "accuracy-gate-report.json", comment_key="detector")
    fake.add_pull(PR_NUMBER, HEAD_SHA, branch="feature", head_repo=FORK, repo=REPO)

    run = workspace.run(**companion_env(workspace, tmp_path))

    assert run.code == 0
    [post] = fake.calls_to("POST")
    body = post.body["body"]
    assert post.status == 201 and all(c.status < 400 for c in fake.calls if c.path != "/user")
    assert len(body.encode("utf-8")) <= COMMENT_TRUNCATE_AT < BODY_LIMIT
    assert body.splitlines()[1] == "## ❌ Accuracy gate: detector.onnx"  # right under the marker
    assert "**regressed**: 600 of 6000 outputs out of tolerance" in body
    assert f"in the [job summary](https://github.com/{REPO}/actions/runs/999) of the workflow run." in body
    shown = [line for line in body.splitlines() if " | `detection/" in line]
    assert shown and all(line.startswith(f"| {FAIL} |") for line in shown)  # failing rows are kept first
    # The job summary (1 MiB) holds every row.
    assert len(run.summary.encode("utf-8")) <= gh_actions.STEP_SUMMARY_LIMIT
    assert sum(" | `detection/" in line for line in run.summary.splitlines()) == 6000


@pytest.mark.parametrize("name, value", [("shard", "1/2"), ("atol", "1"), ("runners", "trt")])
def test_check_only_inputs_in_merge_mode_are_an_error(workspace, fake, name, value):
    # A merge job copied from a matrix leg with `shard` still set must not turn a regression green.
    run = workspace.run(INPUT_MODE="merge", INPUT_PARTIAL_PATH="parts", **{f"INPUT_{name.upper()}": value})
    assert run.code == 2
    assert any(
        f"Input `{name}` applies only to `mode: check`, not `mode: merge`" in line for line in run.lines("::error")
    )


def test_an_unwritable_junit_path_is_not_a_pass(workspace, fake):
    (workspace.root / "reports_dir").mkdir()
    run = workspace.run(INPUT_JUNIT_PATH=str(workspace.root / "reports_dir"))
    assert run.code == 2
    assert any("Could not write the JUnit report" in line for line in run.lines("::warning"))
    # the JUnit file is claimed before the model runs (issue 14): an unwritable path stops the run there
    assert run.final.startswith("::error title=accuracy-gate::could not evaluate: ")
    assert "reports_dir: cannot write the JUnit file (Is a directory)" in run.final


def test_model_text_in_the_log_cannot_issue_workflow_commands(workspace):
    """A model's output names are the model author's text: in the log they stand between
    stop-commands markers (with the table, the verdict and any message), so a name such as
    ``::error::`` or one holding a newline cannot forge an annotation or a mask."""
    from onnx import TensorProto, helper

    project = workspace.root / "hostile"
    (project / "inputs").mkdir(parents=True)
    names = ["::error::forged annotation", "line\n::add-mask::forged"]
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], [name]) for name in names],
        "hostile",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2]) for name in names],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), project / "m.onnx")
    np.savez(project / "inputs" / "0.npz", x=np.array([1.0, 2.0], np.float32))
    (project / "golden").mkdir()
    np.savez(
        project / "golden" / "0.npz", **{names[0]: np.array([1.0, 2.0], np.float32), names[1]: np.ones(2, np.float32)}
    )
    (project / "gate.toml").write_text('model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n', encoding="utf-8")

    run = workspace.run(INPUT_CONFIG=str(project / "gate.toml"), INPUT_COMMENT_MODE="off")

    assert run.code == 1  # the second output differs from its golden values
    out = run.stdout.splitlines()
    outside, inside = [], []  # every line between a ::stop-commands::<token> and its ::<token>::
    token = None
    for line in out:
        if token is None and line.startswith("::stop-commands::"):
            token = line.split("::")[2]
        elif token is not None and line == f"::{token}::":
            token = None
        else:
            (outside if token is None else inside).append(line)
    assert token is None
    assert any("::error::forged annotation" in line for line in inside)
    assert not any(line.startswith("::add-mask::forged") or "::error::forged" in line for line in outside)
    # Our own annotations come after the markers, escaped: the name's "::" and newline as %3A / %0A.
    assert any(line.startswith("::error ") and "line%0A%3A%3Aadd-mask%3A%3Aforged" in line for line in outside)


def test_a_junit_path_input_naming_the_config_never_overwrites_it(workspace):
    """The config refuses a report path over the files the gate reads; the error's own JUnit file then
    goes nowhere rather than over the config (or the model: the same check)."""
    config = Path(workspace.config)
    before = config.read_bytes()

    run = workspace.run(INPUT_JUNIT_PATH=str(config), INPUT_COMMENT_MODE="off")

    assert run.code == 2
    assert config.read_bytes() == before
    refusal = "ppocr-cls/gate.toml: input `junit_path` would overwrite the config file"  # workspace-relative
    assert any(refusal in line for line in run.stdout.splitlines())
    assert any(line.startswith(f"::warning::Could not write the JUnit report: {refusal}") for line in run.lines("::"))
