"""Two runs of one comment key at once (issue 14): both list, find nothing and create; each lists again
after its POST, the run whose comment is not the oldest deletes it and updates the oldest, so one
comment remains; a later run updates that one and deletes any newer duplicate of ours. Against
tests/fake_github.py (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import threading

from gate.github.client import GitHubClient
from gate.github.comments import marker, upsert_comment

from fake_github import PR, REPO, TOKEN, FakeGitHub


def client_for(server) -> GitHubClient:
    return GitHubClient(server.url_for("/"), TOKEN, sleep=lambda seconds: None)


class ListedTogether(GitHubClient):
    """A client whose first list waits for the other run's first list: both see no comment yet."""

    def __init__(self, server, barrier: threading.Barrier):
        super().__init__(server.url_for("/"), TOKEN, sleep=lambda seconds: None)
        self.barrier, self.first = barrier, True

    def list_issue_comments(self, repo, number):
        comments = super().list_issue_comments(repo, number)
        if self.first:
            self.first = False
            self.barrier.wait(timeout=30)
        return comments


def test_two_concurrent_runs_of_one_key_leave_one_comment(httpserver):
    fake = FakeGitHub(httpserver)
    barrier = threading.Barrier(2)
    outcomes: dict = {}

    def run(name):
        outcomes[name] = upsert_comment(ListedTogether(httpserver, barrier), REPO, PR, f"run {name}", key="k")

    threads = [threading.Thread(target=run, args=(name,)) for name in ("a", "b")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(fake.requests("POST")) == 2  # both created one: the race happened
    [comment] = fake.on_pr()
    assert {o["comment_id"] for o in outcomes.values()} == {comment["id"]}
    assert sorted(o["action"] for o in outcomes.values()) in (["created", "updated"], ["created", "unchanged"])
    assert comment["body"].startswith(marker("k") + "\n") and comment["body"].split("\n", 1)[1] in ("run a", "run b")
    assert len(fake.requests("DELETE")) == 1
    # the next run updates that one comment
    again = upsert_comment(client_for(httpserver), REPO, PR, "run c", key="k")
    assert again == {"action": "updated", "comment_id": comment["id"], "html_url": comment["html_url"]}
    assert [c["body"] for c in fake.on_pr()] == [f"{marker('k')}\nrun c"]


def test_a_later_run_updates_the_oldest_and_deletes_newer_duplicates_of_ours(httpserver):
    fake = FakeGitHub(httpserver)
    oldest = fake.add(f"{marker('k')}\nfirst")
    fake.add(f"{marker('k')}\nsecond")
    fake.add(f"{marker('k')}\nthird")
    theirs = fake.add(f"{marker('k')}\nquoted by a person", author="alice")
    outcome = upsert_comment(client_for(httpserver), REPO, PR, "now", key="k")
    assert outcome["action"] == "updated" and outcome["comment_id"] == oldest["id"]
    assert [(c["id"], c["body"]) for c in fake.on_pr()] == [
        (oldest["id"], f"{marker('k')}\nnow"),
        (theirs["id"], f"{marker('k')}\nquoted by a person"),  # another author's: never touched
    ]
