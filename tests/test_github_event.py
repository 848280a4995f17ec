"""The pull-request number and head commit from the runner's event payload."""

from __future__ import annotations

import json

import pytest

from gate.errors import GateError
from gate.github.event import head_sha, pull_request_number

HEAD = "a" * 40
MERGE = "m" * 40


def _env(tmp_path, name, payload):
    path = tmp_path / "event.json"
    path.write_text(json.dumps(payload), encoding="utf-8")
    return {"GITHUB_EVENT_NAME": name, "GITHUB_EVENT_PATH": str(path), "GITHUB_SHA": MERGE}


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
