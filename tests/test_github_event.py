"""The pull-request number and head commit from the runner's event payload, and the REST lookups
for events without one (against ``fake_github.FakeGitHub`` on 127.0.0.1)."""

from __future__ import annotations

import json
from urllib.parse import parse_qs

import pytest

from gate.errors import GateError
from gate.github.comments import GitHubClient
from gate.github.event import (
    PullRequestRef,
    find_pull_request,
    head_sha,
    is_fork_pull_request,
    pull_request_number,
)

from fake_github import REPO, TOKEN

HEAD = "a" * 40
MERGE = "m" * 40


def _env(tmp_path, name, payload, sha=MERGE):
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return {"GITHUB_EVENT_NAME": name, "GITHUB_EVENT_PATH": str(path), "GITHUB_SHA": sha, "GITHUB_REPOSITORY": REPO}






@pytest.fixture
def client(httpserver):
    return GitHubClient(httpserver.url_for("/"), TOKEN, sleep=lambda s: None)


PR_PAYLOAD = {"action": "synchronize", "number": 7, "pull_request": {"number": 7, "head": {"sha": HEAD}}}


@pytest.mark.parametrize("event_name", ["pull_request", "pull_request_target"])
def test_pull_request_events(tmp_path, event_name):
    env = _env(tmp_path, event_name, PR_PAYLOAD)
    assert pull_request_number(env) == 7
    assert head_sha(env) == HEAD


def test_top_level_number_is_a_fallback(tmp_path):
    env = _env(tmp_path, "pull_request", {"number": 12})
    assert pull_request_number(env) == 12
    assert head_sha(env) == MERGE  # no head in the payload: GITHUB_SHA


def test_push_has_no_pull_request(tmp_path):
    env = _env(tmp_path, "push", {"ref": "refs/heads/main", "after": HEAD})
    assert pull_request_number(env) is None
    assert head_sha(env) == MERGE
    assert pull_request_number({}) is None and head_sha({}) is None


@pytest.mark.parametrize(("explicit", "expected"), [(5, 5), ("5", 5), (" 19 ", 19)])
def test_explicit_override_wins(tmp_path, explicit, expected):
    env = _env(tmp_path, "pull_request", PR_PAYLOAD)
    assert pull_request_number(env, explicit=explicit) == expected
    assert pull_request_number({"GITHUB_EVENT_NAME": "push"}, explicit=explicit) == expected


def test_empty_explicit_counts_as_not_given(tmp_path):
    assert pull_request_number(_env(tmp_path, "pull_request", PR_PAYLOAD), explicit="") == 7


@pytest.mark.parametrize("explicit", ["0", "-3", "abc", "7.5", "#7", 0, -1, True, 2.0, "\u0663"])
def test_bad_explicit_value(explicit):
    with pytest.raises(GateError, match=r"^Input `pr_number` must be a positive integer, got .*\.$"):
        pull_request_number({}, explicit=explicit)


def test_missing_event_file(tmp_path):
    missing = tmp_path / "nope.json"
    env = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(missing)}
    with pytest.raises(GateError, match=f"Cannot read the GitHub event file {missing}"):
        pull_request_number(env)
    with pytest.raises(GateError, match="nope.json"):
        head_sha(env)


def test_unset_event_path_and_bad_json(tmp_path):
    with pytest.raises(GateError, match="GITHUB_EVENT_PATH is not set"):
        pull_request_number({"GITHUB_EVENT_NAME": "pull_request"})
    bad = tmp_path / "event.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(GateError, match="event.json"):
        pull_request_number({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(bad)})


def test_pull_request_event_without_number(tmp_path):
    with pytest.raises(GateError, match="no pull_request.number"):
        pull_request_number(_env(tmp_path, "pull_request", {"pull_request": {"number": "x"}}))


# --- forks -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "event_name, head_repo, fork",
    [
        ("pull_request", {"full_name": REPO}, False),
        ("pull_request", {"full_name": REPO.upper()}, False),  # GitHub names are case-insensitive
        ("pull_request", {"full_name": "forker/model-zoo"}, True),
        ("pull_request", None, True),  # a deleted fork
        ("pull_request_target", {"full_name": "forker/model-zoo"}, False),  # runs with the base's token
    ],
)
def test_fork_detection(tmp_path, event_name, head_repo, fork):
    payload = {"pull_request": {"number": 7, "head": {"sha": HEAD, "repo": head_repo}}}
    assert is_fork_pull_request(_env(tmp_path, event_name, payload)) is fork


def test_fork_detection_without_head_repo_or_event_file(tmp_path):
    assert is_fork_pull_request(_env(tmp_path, "pull_request", PR_PAYLOAD)) is False
    assert (
        is_fork_pull_request({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(tmp_path / "x")}) is False
    )
    assert is_fork_pull_request({"GITHUB_EVENT_NAME": "push"}) is False


# --- find_pull_request, per event -------------------------------------------------------------------


@pytest.mark.parametrize("event_name", ["pull_request", "pull_request_target"])
def test_pull_request_events_need_no_lookup(tmp_path, fake, client, event_name):
    ref, reason = find_pull_request(_env(tmp_path, event_name, PR_PAYLOAD), client)

    assert ref == PullRequestRef(7, HEAD, f"the {event_name} event") and reason == ""
    assert fake.calls == []


def test_explicit_number_wins_without_lookup(tmp_path, fake, client):
    env = _env(tmp_path, "push", {"after": HEAD}, sha=HEAD)
    ref, _ = find_pull_request(env, client, explicit="31")

    assert ref == PullRequestRef(31, HEAD, "the pr_number input") and fake.calls == []


def _workflow_run(sha=HEAD, owner="forker", branch="fix", pulls=(), event="pull_request"):
    return {
        "workflow_run": {
            "event": event,
            "head_sha": sha,
            "head_branch": branch,
            "head_repository": {"owner": {"login": owner}},
            "pull_requests": list(pulls),
        }
    }


def test_workflow_run_uses_the_listed_pull_request_whose_head_matches(tmp_path, fake, client):
    listed = [{"number": 3, "head": {"sha": "0" * 40}}, {"number": 4, "head": {"sha": HEAD}}]
    ref, _ = find_pull_request(_env(tmp_path, "workflow_run", _workflow_run(pulls=listed)), client)

    assert ref == PullRequestRef(4, HEAD, "the workflow_run event") and fake.calls == []


def test_workflow_run_of_a_fork_finds_the_pull_request_by_head_branch(tmp_path, fake, client):
    fake.add_pull(9, HEAD, branch="fix", head_owner="forker", head_repo="forker/model-zoo")
    fake.add_pull(8, HEAD, branch="fix", head_owner="forker", head_repo="forker/model-zoo", state="closed")
    fake.add_pull(10, HEAD, branch="fix", head_owner="someone", head_repo="someone/model-zoo")

    ref, _ = find_pull_request(_env(tmp_path, "workflow_run", _workflow_run()), client)

    assert ref == PullRequestRef(9, HEAD, "its head forker:fix")
    [call] = fake.calls
    assert call.path == f"/repos/{REPO}/pulls" and parse_qs(call.query)["head"] == ["forker:fix"]
    assert parse_qs(call.query)["state"] == ["open"]


def test_workflow_run_of_a_fork_needs_the_head_sha_to_match(tmp_path, fake, client):
    fake.add_pull(9, "f" * 40, branch="fix", head_owner="forker", head_repo="forker/model-zoo")

    ref, reason = find_pull_request(_env(tmp_path, "workflow_run", _workflow_run()), client)

    assert ref is None and reason == f"No open pull request of {REPO} has head forker:fix at commit {HEAD}."


def test_workflow_run_without_head_owner(tmp_path, fake, client):
    ref, reason = find_pull_request(_env(tmp_path, "workflow_run", _workflow_run(owner="")), client)
    assert ref is None and "no head repository owner" in reason and fake.calls == []


def test_workflow_run_without_a_client_finds_nothing(tmp_path):
    ref, reason = find_pull_request(_env(tmp_path, "workflow_run", _workflow_run()))
    assert ref is None and "no token" in reason


def test_workflow_run_of_a_push_looks_up_the_commit(tmp_path, fake, client):
    fake.add_pull(11, HEAD, branch="fix")
    ref, _ = find_pull_request(_env(tmp_path, "workflow_run", _workflow_run(event="push")), client)

    assert ref.number == 11 and [c.path for c in fake.calls] == [f"/repos/{REPO}/commits/{HEAD}/pulls"]


@pytest.mark.parametrize("event_name", ["push", "merge_group", "workflow_dispatch", "schedule"])
def test_commit_events_keep_open_pull_requests_whose_head_is_the_commit(tmp_path, fake, client, event_name):
    fake.add_pull(1, HEAD, state="closed")
    fake.add_pull(2, "9" * 40, commits=[HEAD])  # contains the commit, but its head moved on
    fake.add_pull(3, HEAD, branch="fix")

    ref, _ = find_pull_request(_env(tmp_path, event_name, {}, sha=HEAD), client)

    assert ref == PullRequestRef(3, HEAD, f"commit {HEAD[:12]}")


def test_several_matching_pull_requests_take_the_first(tmp_path, fake, client):
    fake.add_pull(3, HEAD, branch="a")
    fake.add_pull(4, HEAD, branch="b")

    ref, _ = find_pull_request(_env(tmp_path, "push", {}, sha=HEAD), client)

    assert ref == PullRequestRef(3, HEAD, f"commit {HEAD[:12]} (first of 2 open pull requests)")


def test_commit_of_another_repository_is_ignored(tmp_path, fake, client):
    fake.add_pull(3, HEAD, repo="someone/else")
    ref, reason = find_pull_request(_env(tmp_path, "push", {}, sha=HEAD), client)
    assert ref is None and reason == f"No open pull request of {REPO} has commit {HEAD[:12]} as its head."


def test_issue_comment_on_a_pull_request_fetches_its_head(tmp_path, fake, client):
    fake.add_pull(5, HEAD)
    payload = {"issue": {"number": 5, "pull_request": {"url": "https://api.github.com/..."}}}

    ref, _ = find_pull_request(_env(tmp_path, "issue_comment", payload), client)

    assert ref == PullRequestRef(5, HEAD, "the issue_comment event")
    assert [c.path for c in fake.calls] == [f"/repos/{REPO}/pulls/5"]


def test_issue_comment_on_an_issue_has_no_pull_request(tmp_path, fake, client):
    ref, reason = find_pull_request(_env(tmp_path, "issue_comment", {"issue": {"number": 5}}), client)
    assert ref is None and reason == "The issue_comment event is not on a pull request." and fake.calls == []


def test_other_events_have_none(tmp_path, fake, client):
    ref, reason = find_pull_request(_env(tmp_path, "release", {}), client)
    assert ref is None and reason == "The release event has no pull request." and fake.calls == []


def test_head_sha_of_workflow_run_is_the_runs_head(tmp_path):
    env = _env(tmp_path, "workflow_run", _workflow_run())
    assert head_sha(env) == HEAD
    env = _env(tmp_path, "workflow_run", {"workflow_run": {}})
    assert head_sha(env) == MERGE
