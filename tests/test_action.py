"""End to end: ``gate.action.main(environ)`` on the shipped ppocr-cls example, with the environment a
GitHub Actions runner gives a Docker action, and a real HTTP server on 127.0.0.1 speaking GitHub's
issue-comment endpoints (``fake_github.FakeGitHub``)."""

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
from junitparser import Error, Failure, JUnitXml
from onnx import numpy_helper

from gate.action import INPUTS, main
from gate.github.comments import MARKER_PREFIX, GitHubClient, marker

from fake_github import TOKEN, FakeGitHub, json_response, parse_github_output, recorded_calls

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "ppocr-cls"
OUTPUT = "save_infer_model/scale_0.tmp_1"
REPO = "octo/repo"
PR_NUMBER = 7
HEAD_SHA = "4f1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5"
PUSH_SHA = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
WORKFLOW = "accuracy"
TABLE_HEADER = "| output | stat | abs error | atol | rel error | rtol | failed iters | result |"
_TIME_ATTR = re.compile(r'\stime="[^"]*"')


@pytest.fixture
def httpserver(httpserver_ipv4):
    """pytest-httpserver's server, bound to 127.0.0.1 (the plain fixture may bind to 'localhost')."""
    return httpserver_ipv4


@pytest.fixture(autouse=True)
def sleeps(monkeypatch):
    """The REST client's retry waits, recorded instead of slept (the action builds the client itself)."""
    waits: list[float] = []
    monkeypatch.setitem(GitHubClient.__init__.__kwdefaults__, "sleep", waits.append)
    return waits


@pytest.fixture
def fake(httpserver):
    return FakeGitHub(httpserver)




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
    """The cells of ``output``'s row in a Markdown table."""
    [row] = [line for line in markdown.splitlines() if line.startswith(f"| {output} |")]
    return [cell.strip() for cell in row.strip("|").split("|")]


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    outputs: dict[str, str]
    summary: str
    junit: Path

    def lines(self, prefix: str) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.startswith(prefix)]


class Workspace:
    """The runner's side of a Docker action step: a copy of examples/ppocr-cls, the event file, fresh
    ``GITHUB_OUTPUT``/``GITHUB_STEP_SUMMARY`` files per step, and ``INPUT_*`` for every declared input
    (empty unless given, as the runner sets them)."""

    def __init__(self, root: Path, api_url: str, capsys) -> None:
        self.root = root
        self.capsys = capsys
        self.steps = 0
        shutil.copytree(EXAMPLE, root / "ppocr-cls")
        self.config = str(root / "ppocr-cls" / "gate.toml")
        self.junit = root / "reports" / "accuracy-junit.xml"
        self.event = root / "event.json"
        self.write_event(
            {"pull_request": {"number": PR_NUMBER, "head": {"sha": HEAD_SHA, "repo": {"full_name": REPO}}}}
        )
        self.env = {f"INPUT_{name.upper()}": "" for name in INPUTS}
        self.env.update(
            {
                "INPUT_CONFIG": self.config,
                "INPUT_GITHUB_TOKEN": TOKEN,
                "INPUT_COMMENT": "true",
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

    def write_event(self, payload: dict, number: int | None = PR_NUMBER) -> None:
        if number is not None:
            payload = {**payload, "number": number}
        self.event.write_text(json.dumps(payload), encoding="utf-8")

    def run(self, **changes: str | None) -> Run:
        """Run the action in-process with the base environment updated by ``changes`` (None unsets)."""
        self.steps += 1
        output = self.root / f"github_output_{self.steps}"
        summary = self.root / f"step_summary_{self.steps}"
        output.touch()
        summary.touch()
        environ = {**self.env, "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary), **changes}
        environ = {k: v for k, v in environ.items() if v is not None}
        self.capsys.readouterr()
        code = main(environ)
        out, err = self.capsys.readouterr()
        run = Run(
            code,
            out,
            err,
            parse_github_output(output.read_text(encoding="utf-8")),
            summary.read_text(encoding="utf-8"),
            Path(environ.get("INPUT_JUNIT_PATH") or self.root / "accuracy-gate-junit.xml"),
        )
        token = environ.get("INPUT_GITHUB_TOKEN")
        if token:  # the token is masked before anything else is printed and never shown again
            assert out.splitlines()[0] == f"::add-mask::{token}"
            assert out.count(token) == 1 and token not in err
            assert token not in run.summary and token not in output.read_text(encoding="utf-8")
            if run.junit.exists():
                assert token not in run.junit.read_text(encoding="utf-8")
        if environ.get("RUNNER_DEBUG") != "1":
            assert "Traceback" not in out + err
        return run


@pytest.fixture
def workspace(tmp_path, httpserver, monkeypatch, capsys):
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.chdir(root)
    return Workspace(root, httpserver.url_for("/"), capsys)


def test_first_run_comments_and_reports_a_pass(workspace, fake):
    run = workspace.run()

    assert run.code == 0
    [comment] = fake.on_pr(PR_NUMBER)
    assert comment["user"]["login"] == "github-actions[bot]"
    body = comment["body"]
    assert body.splitlines()[0] == workspace.comment_marker and body.startswith(MARKER_PREFIX)
    assert OUTPUT in body and table_row(body)[-1] == "pass"
    assert "**passed**: 1 of 1 outputs within tolerance over 8 iterations" in body
    assert f"commit {HEAD_SHA[:12]}" in body  # the PR head, not the test merge commit
    assert "[workflow run](https://github.com/octo/repo/actions/runs/123456)" in body
    assert [(c.method, c.path) for c in fake.calls] == [
        ("GET", "/user"),
        ("GET", f"/repos/{REPO}/issues/{PR_NUMBER}/comments"),
        ("POST", f"/repos/{REPO}/issues/{PR_NUMBER}/comments"),
    ]
    assert fake.calls[-1].body == {"body": body}

    assert run.outputs == {"passed": "true", "failed_outputs": "[]", "junit_path": "reports/accuracy-junit.xml"}
    assert TABLE_HEADER in run.summary and table_row(run.summary)[1:] == [
        "elemwise",
        "0",
        "1e-05",
        "0",
        "0.0001",
        "0/8",
        "pass",
    ]
    assert run.summary.rstrip() in body  # the comment is the job summary under the marker
    assert junit_results(run.junit) == [(f"model.onnx/{OUTPUT}", [])]
    assert run.lines("::notice title=accuracy-gate::passed: 1 of 1 outputs")
    assert f"PR comment created: https://github.com/{REPO}/pull/{PR_NUMBER}#issuecomment-{comment['id']}" in run.stdout


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
    assert "**regressed**: 1 of 1 outputs out of tolerance: 'save_infer_model/scale_0.tmp_1'" in body
    assert table_row(body)[-2:] == ["1/8", "FAIL"]
    assert f"- `{OUTPUT}`: FAILED:" in body and "at iteration 5" in body

    assert second.outputs["passed"] == "false"
    assert json.loads(second.outputs["failed_outputs"]) == [OUTPUT]
    assert second.outputs["junit_path"] == "reports/accuracy-junit.xml"  # relative to the workspace
    xml = JUnitXml.fromfile(str(workspace.junit))
    assert (xml.tests, xml.failures, xml.errors) == (1, 1, 0)
    [(name, [failure])] = junit_results(workspace.junit)
    assert name == f"model.onnx/{OUTPUT}" and isinstance(failure, Failure)
    assert "at iteration 5" in failure.message and "1/8 iterations failed" in failure.message
    assert "abs error 0.01 " in failure.message
    [final] = second.lines("::error")
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
    assert broken.outputs == {
        **working.outputs,
        "junit_path": "reports/accuracy-junit.xml",
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
    assert "GitHubError: GitHub API GET /user failed with HTTP 502" in run.stderr  # the debug traceback
    assert sleeps == [1.0, 2.0]  # the GET was retried with backoff, without sleeping for real


def test_comment_false_sends_no_request(workspace, fake, httpserver):
    run = workspace.run(INPUT_COMMENT="false")

    assert run.code == 0 and run.outputs["passed"] == "true"
    assert httpserver.log == [] and fake.calls == []
    assert "PR comment" not in run.stdout


def test_push_event_without_pr_number_comments_nowhere(workspace, fake, httpserver):
    workspace.write_event({"ref": "refs/heads/main", "after": "0" * 40}, number=None)
    run = workspace.run(GITHUB_EVENT_NAME="push", GITHUB_SHA=PUSH_SHA)

    assert run.code == 0 and run.outputs["passed"] == "true"
    assert httpserver.log == [] and fake.comments == {}
    assert "No pull request for this event; skipping the PR comment." in run.stdout
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


def test_missing_golden_file_is_an_error_that_is_still_reported(workspace, fake):
    missing = golden_file(workspace.root, 3)
    missing.unlink()

    run = workspace.run()

    assert run.code == 2
    assert workspace.junit.is_file()
    [(name, [error])] = junit_results(workspace.junit)
    assert isinstance(error, Error) and error.type == "could-not-evaluate"
    assert str(missing) in error.message and name.endswith("/(no outputs)")
    final = run.stdout.rstrip().splitlines()[-1]
    assert final.startswith("::error title=accuracy-gate::could not evaluate: ") and str(missing) in final
    assert run.outputs == {"passed": "false", "failed_outputs": "[]", "junit_path": "reports/accuracy-junit.xml"}
    [comment] = fake.on_pr(PR_NUMBER)
    assert comment["body"].splitlines()[0] == workspace.comment_marker
    assert "**error (could not evaluate)**" in comment["body"] and str(missing) in comment["body"]
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

    run = workspace.run()

    assert run.code == 0
    assert (run.junit.stat().st_uid, run.junit.stat().st_gid) == (1234, 1234)
    assert run.junit.parent.stat().st_uid == 1234  # the reports/ folder we created too
