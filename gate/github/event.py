"""The pull request and commit that triggered the workflow, read from the runner's event payload,
with the REST lookups for events that carry no pull request.

References: GitHub docs "Events that trigger workflows" and "Webhook events and payloads"
(https://docs.github.com/webhooks/webhook-events-and-payloads). For ``pull_request`` events
``GITHUB_SHA`` is the test merge commit, so the commit reported is the pull request's head. For
``workflow_run`` the payload's ``pull_requests`` list is empty when the pull request comes from a fork
(actions/runner#3444), so the pull request is found by its head ``owner:branch`` and must have the
run's head SHA. For ``push``, ``merge_group``, ``workflow_dispatch`` and ``schedule`` the open pull
requests of this repository whose head is the commit are looked up.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gate.errors import GateError

if TYPE_CHECKING:
    from gate.github.client import GitHubClient

PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")
COMMIT_LOOKUP_EVENTS = ("push", "merge_group", "workflow_dispatch", "schedule")
"""Events without a pull request in the payload; the commit's open pull requests are looked up."""


@dataclass(frozen=True)
class PullRequestRef:
    """The pull request to comment on: its ``number``, the ``head_sha`` to report (the pull request's
    head, not a merge commit; None when unknown) and ``found_by``, how it was found, for the log."""

    number: int
    head_sha: str | None
    found_by: str


def _is_pull_request_event(environ: Mapping[str, str]) -> bool:
    return environ.get("GITHUB_EVENT_NAME", "") in PULL_REQUEST_EVENTS


def load_event(environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Return the event payload, the JSON object in the file at ``GITHUB_EVENT_PATH``.

    Raises:
        GateError: when ``GITHUB_EVENT_PATH`` is unset, or the file is unreadable or not a JSON object.
    """
    path = environ.get("GITHUB_EVENT_PATH")
    if not path:
        raise GateError("GITHUB_EVENT_PATH is not set; expected the runner's event file for a pull-request event.")
    try:
        with open(path, encoding="utf-8") as f:
            event = json.load(f)
    except (OSError, ValueError) as exc:
        raise GateError(f"Cannot read the GitHub event file {path}: {exc}.") from exc
    if not isinstance(event, dict):
        raise GateError(f"The GitHub event file {path} does not hold a JSON object.")
    return event


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
        return number if number > 0 else None
    return None


def pull_request_number(environ: Mapping[str, str] = os.environ, explicit: str | int | None = None) -> int | None:
    """Return the number of the pull request to comment on, or None when there is none.

    ``explicit`` (the ``pr_number`` input) wins when given; an empty string counts as not given.
    Otherwise, for ``pull_request`` and ``pull_request_target`` events, the number is
    ``pull_request.number`` (or the top-level ``number``) of the JSON file at ``GITHUB_EVENT_PATH``.
    Other events (``push``, ``schedule``, ...) give None.

    Raises:
        GateError: when ``explicit`` is not a positive integer, or when the event file of a
            pull-request event is missing, unreadable or has no valid number.
    """
    if explicit is not None and not (isinstance(explicit, str) and not explicit.strip()):
        number = _positive_int(explicit)
        if number is None:
            raise GateError(f"Input `pr_number` must be a positive integer, got {explicit!r}.")
        return number
    if not _is_pull_request_event(environ):
        return None
    event = load_event(environ)
    pull_request = _object(event.get("pull_request"))
    number = _positive_int(pull_request.get("number", event.get("number")))
    if number is None:
        raise GateError(
            f"The GitHub event file {environ['GITHUB_EVENT_PATH']} has no pull_request.number; "
            "expected a positive integer for a pull-request event."
        )
    return number


def _sha(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def head_sha(environ: Mapping[str, str] = os.environ) -> str | None:
    """Return the commit to report on, without calling GitHub: ``pull_request.head.sha`` for
    pull-request events, ``workflow_run.head_sha`` for ``workflow_run`` (each falling back to
    ``GITHUB_SHA`` when the payload lacks it), else ``GITHUB_SHA``; None when nothing is known.

    Raises:
        GateError: when the event file of a pull-request or workflow_run event is missing or unreadable.
    """
    name = environ.get("GITHUB_EVENT_NAME", "")
    if name in PULL_REQUEST_EVENTS:
        pull_request = _object(load_event(environ).get("pull_request"))
        sha = _sha(_object(pull_request.get("head")).get("sha"))
        if sha:
            return sha
    elif name == "workflow_run":
        sha = _sha(_object(load_event(environ).get("workflow_run")).get("head_sha"))
        if sha:
            return sha
    return environ.get("GITHUB_SHA") or None


def is_fork_pull_request(environ: Mapping[str, str] = os.environ) -> bool:
    """True for a ``pull_request`` event whose head repository is not ``GITHUB_REPOSITORY``: its token
    is read-only whatever ``permissions:`` says, so a comment cannot be posted. A deleted fork has
    ``head.repo: null`` and counts as a fork. ``pull_request_target`` runs with the base repository's
    token and is never "a fork" here. An unreadable event file gives False (the caller then finds out
    from GitHub's 403).
    """
    if environ.get("GITHUB_EVENT_NAME") != "pull_request":
        return False
    try:
        head = _object(_object(load_event(environ).get("pull_request")).get("head"))
    except GateError:
        return False
    if "repo" not in head:
        return False
    full_name = _object(head.get("repo")).get("full_name")
    repository = environ.get("GITHUB_REPOSITORY", "")
    return not (isinstance(full_name, str) and full_name.casefold() == repository.casefold())


def _open_pull_of(candidates: list[dict[str, Any]], repo: str, sha: str | None) -> list[dict[str, Any]]:
    """The open pull requests among ``candidates`` that target ``repo`` and whose head is ``sha``."""
    kept = []
    for pull in candidates:
        base_repo = _object(_object(pull.get("base")).get("repo")).get("full_name")
        if pull.get("state", "open") != "open" or _positive_int(pull.get("number")) is None:
            continue
        if isinstance(base_repo, str) and base_repo.casefold() != repo.casefold():
            continue
        if sha is not None and _object(pull.get("head")).get("sha") != sha:
            continue
        kept.append(pull)
    return kept


def _pick(found: list[dict[str, Any]], sha: str | None, how: str) -> PullRequestRef:
    how += f" (first of {len(found)} open pull requests)" if len(found) > 1 else ""
    return PullRequestRef(int(found[0]["number"]), sha, how)


def find_pull_request(
    environ: Mapping[str, str] = os.environ,
    client: GitHubClient | None = None,
    explicit: str | int | None = None,
) -> tuple[PullRequestRef | None, str]:
    """Find the pull request to comment on and the commit to report, for any event.

    - ``explicit`` (the ``pr_number`` input) wins; the commit is :func:`head_sha`'s.
    - ``pull_request``, ``pull_request_target``: the payload's number and ``pull_request.head.sha``.
    - ``issue_comment`` on a pull request: ``issue.number``; the head comes from ``GET /pulls/{n}``.
    - ``workflow_run``: ``workflow_run.pull_requests`` (the entry whose head is ``head_sha`` first);
      when empty (fork pull requests) ``GET /pulls?head={head_repository.owner.login}:{head_branch}
      &state=open``, keeping the pull request whose head is ``workflow_run.head_sha``; for a run of a
      ``push``, the commit lookup below.
    - ``push``, ``merge_group``, ``workflow_dispatch``, ``schedule``: ``GET /commits/{GITHUB_SHA}/pulls``,
      keeping open pull requests of this repository whose head is that commit.
    Lookups need ``client``; without one they find nothing.

    Returns:
        ``(ref, reason)``: ``ref`` is None when there is no pull request, and ``reason`` then says why
        (one sentence for the log); with a ``ref``, ``reason`` is empty.
    Raises:
        GateError: a bad ``explicit`` value, or an unreadable event file of an event that needs it.
        GitHubError: a lookup that failed.
    """
    repo = environ.get("GITHUB_REPOSITORY", "")
    name = environ.get("GITHUB_EVENT_NAME", "")
    if explicit is not None and not (isinstance(explicit, str) and not explicit.strip()):
        number = pull_request_number(environ, explicit)
        return PullRequestRef(number, head_sha(environ), "the pr_number input"), ""
    if name in PULL_REQUEST_EVENTS:
        return PullRequestRef(pull_request_number(environ), head_sha(environ), f"the {name} event"), ""
    if name == "issue_comment":
        issue = _object(load_event(environ).get("issue"))
        number = _positive_int(issue.get("number"))
        if number is None or not issue.get("pull_request"):
            return None, "The issue_comment event is not on a pull request."
        sha = None
        if client is not None:
            sha = _sha(_object(client.get_pull(repo, number).get("head")).get("sha"))
        return PullRequestRef(number, sha, "the issue_comment event"), ""
    if name == "workflow_run":
        run = _object(load_event(environ).get("workflow_run"))
        sha = _sha(run.get("head_sha")) or environ.get("GITHUB_SHA") or None
        listed = [p for p in run.get("pull_requests") or [] if isinstance(p, dict) and _positive_int(p.get("number"))]
        listed.sort(key=lambda p: _object(p.get("head")).get("sha") != sha)
        if listed:
            return PullRequestRef(int(listed[0]["number"]), sha, "the workflow_run event"), ""
        if client is None:
            return None, "The workflow_run event lists no pull request and no token was given to look one up."
        if run.get("event") in PULL_REQUEST_EVENTS:
            owner = _object(_object(run.get("head_repository")).get("owner")).get("login")
            branch = run.get("head_branch")
            if not (isinstance(owner, str) and owner and isinstance(branch, str) and branch):
                return None, "The workflow_run event names no head repository owner and branch."
            found = _open_pull_of(client.list_open_pulls_by_head(repo, f"{owner}:{branch}"), repo, sha)
            if found:
                return _pick(found, sha, f"its head {owner}:{branch}"), ""
            return None, f"No open pull request of {repo} has head {owner}:{branch} at commit {sha}."
        return _commit_lookup(client, repo, sha)
    if name in COMMIT_LOOKUP_EVENTS:
        if client is None:
            return None, f"The {name} event has no pull request and no token was given to look one up."
        return _commit_lookup(client, repo, environ.get("GITHUB_SHA") or None)
    return None, f"The {name or 'unknown'} event has no pull request."


def _commit_lookup(client: GitHubClient, repo: str, sha: str | None) -> tuple[PullRequestRef | None, str]:
    if not sha:
        return None, "No commit is known (GITHUB_SHA is unset)."
    found = _open_pull_of(client.list_pulls_for_commit(repo, sha), repo, sha)
    if found:
        return _pick(found, sha, f"commit {sha[:12]}"), ""
    return None, f"No open pull request of {repo} has commit {sha[:12]} as its head."
