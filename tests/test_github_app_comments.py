"""The PR comment made with a GitHub App's token, against the fake GitHub on 127.0.0.1: ``GET /user``
is 403 for installation tokens, so the author is unknown until GitHub names it in the answer to the
POST (``user.login`` "acme-gate[bot]", ``performed_via_github_app``). That author is recorded in the
comment itself (a hidden line), so three runs leave one comment, and nothing is stored elsewhere."""

from __future__ import annotations

import pytest

from gate.errors import GateError
from gate.github.comments import (
    COMMENT_TRUNCATE_AT,
    DEFAULT_AUTHOR,
    LONGEST_LOGIN,
    UNKNOWN_AUTHOR_WARNING,
    GitHubClient,
    author_marker,
    digest_marker,
    header_size,
    marker,
    upsert_comment,
)

from fake_github import PR, REPO, TOKEN, FakeGitHub

APP = "acme-gate"
BOT = "acme-gate[bot]"
PAT = "ghp_PERSONALtoken0123456789abcdefXYZ"


def client_for(server, token=TOKEN) -> GitHubClient:
    return GitHubClient(server.url_for("/"), token, sleep=lambda s: None, clock=lambda: 1_700_000_000.0)


def calls(fake) -> list[tuple[str, str]]:
    return [(c.method, c.path.rsplit("/", 2)[-2] + "/" + c.path.rsplit("/", 1)[-1]) for c in fake.calls]


def test_three_app_token_runs_leave_one_comment(httpserver):
    fake = FakeGitHub(httpserver, app=APP)
    client = client_for(httpserver)
    outcomes = [upsert_comment(client, REPO, PR, f"run {n}") for n in (1, 2, 3)]

    [comment] = fake.on_pr()
    assert [o["action"] for o in outcomes] == ["created", "updated", "updated"]
    assert {o["comment_id"] for o in outcomes} == {comment["id"]}
    assert not any("warning" in o for o in outcomes)
    assert comment["user"]["login"] == BOT and comment["performed_via_github_app"]["slug"] == APP
    assert comment["body"] == f"{marker('default')}\n{author_marker(BOT)}\nrun 3"
    # No GET /user (always 403 for an installation token); one PATCH records the author after the POST,
    # then one list finds no other run's comment of this key (issue 14: concurrent runs).
    assert calls(fake) == [
        ("GET", "42/comments"),
        ("POST", "42/comments"),
        ("PATCH", "comments/" + str(comment["id"])),
        ("GET", "42/comments"),
        ("GET", "42/comments"),
        ("PATCH", "comments/" + str(comment["id"])),
        ("GET", "42/comments"),
        ("PATCH", "comments/" + str(comment["id"])),
    ]
    # The same body again sends nothing, and the digest line stays within the first three lines.
    assert upsert_comment(client, REPO, PR, "run 3")["action"] == "unchanged"
    first = upsert_comment(client, REPO, PR, "run 4", digest="ab" * 32)
    again = upsert_comment(client, REPO, PR, "run 5", digest="ab" * 32)
    assert (first["action"], again["action"]) == ("updated", "unchanged")
    assert fake.on_pr()[0]["body"].splitlines()[:3] == [marker("default"), author_marker(BOT), digest_marker("ab" * 32)]


def test_github_token_runs_stay_at_three_requests_and_find_their_comment(fake):
    client = client_for(fake.server)
    outcomes = [upsert_comment(client, REPO, PR, f"run {n}") for n in (1, 2, 3)]

    [comment] = fake.on_pr()
    assert comment["user"]["login"] == DEFAULT_AUTHOR and comment["body"] == f"{marker('default')}\nrun 3"
    assert [o["action"] for o in outcomes] == ["created", "updated", "updated"]
    # the first run lists again after its POST: a concurrent run of the same key may have created one too
    assert [c.method for c in fake.calls] == ["GET", "POST", "GET", "GET", "PATCH", "GET", "PATCH"]


def test_quotes_of_the_app_comment_are_never_touched(httpserver):
    fake = FakeGitHub(httpserver, app=APP)
    client = client_for(httpserver)
    created = upsert_comment(client, REPO, PR, "ours")
    ours = fake.comments[created["comment_id"]]["body"]
    # A person quoting it whole (author line included), a person naming themselves, another App's bot.
    quoted = fake.add(ours + "\n> quoted", author="alice")
    fake.add(f"{marker('default')}\n<!-- accuracy-gate-author:alice -->\nmine", author="alice")
    other = fake.add(ours, author="other-app[bot]", app="other-app")

    assert upsert_comment(client, REPO, PR, "ours, again")["comment_id"] == created["comment_id"]
    assert fake.comments[quoted["id"]]["body"] == ours + "\n> quoted"
    assert fake.comments[other["id"]]["body"] == ours
    assert len(fake.on_pr()) == 4


def test_a_comment_whose_author_github_does_not_name_warns(httpserver):
    fake = FakeGitHub(httpserver, login="alice", token=PAT)  # a PAT ...
    fake.script("GET", "/user$", 403)  # ... that may not read its own user
    outcome = upsert_comment(client_for(httpserver, PAT), REPO, PR, "report")

    assert outcome["action"] == "created" and outcome["warning"] == UNKNOWN_AUTHOR_WARNING
    assert "comment_author" in UNKNOWN_AUTHOR_WARNING
    assert [c.method for c in fake.calls] == ["GET", "GET", "POST"]  # no PATCH: alice is no App bot


def test_the_author_line_and_its_room():
    assert author_marker(BOT) == "<!-- accuracy-gate-author:acme-gate[bot] -->"
    for login in ("alice", "x[bot] --> <b>", "", "-a[bot]"):
        with pytest.raises(GateError, match="not a GitHub App bot's login"):
            author_marker(login)
    line = len(author_marker(BOT)) + 1
    assert header_size("k", None, BOT) == header_size("k") + line
    assert header_size("k", None, LONGEST_LOGIN) >= header_size("k", None, "a" * 39 + "[bot]")
    assert COMMENT_TRUNCATE_AT - header_size("k", "0f" * 32, LONGEST_LOGIN) > 59_000


def test_the_action_with_an_app_token_keeps_one_comment(tmp_path, httpserver, monkeypatch, capsys):
    from test_action import PR_NUMBER, Workspace

    fake = FakeGitHub(httpserver, app=APP)
    root = tmp_path / "workspace"
    root.mkdir()
    monkeypatch.chdir(root)
    workspace = Workspace(root, httpserver.url_for("/"), capsys)
    runs = [workspace.run() for _ in range(3)]

    assert [run.code for run in runs] == [0, 0, 0]
    [comment] = fake.on_pr(PR_NUMBER)
    assert comment["user"]["login"] == BOT
    assert comment["body"].splitlines()[1] == author_marker(BOT)
    assert not any(run.lines("::warning") for run in runs)
    assert fake.requests("GET", "/user$") == []
