"""GitHub's REST API as the action needs it (``GitHubClient``): issue comments and the pull-request
lookups, with retries, rate limits and deadlines, the token kept out of every message.

Retries follow GitHub's "Best practices for using the REST API" (rate limits: ``retry-after``,
``x-ratelimit-remaining``/``x-ratelimit-reset``; at least a minute for a secondary limit without
either; no retry for 401, 404 and 422). The sticky comment built on it is ``gate.github.comments``.
"""

from __future__ import annotations

import email.utils
import re
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import requests

import gate
from gate.errors import GateError
from gate.github.actions import redact

INSTALLATION_TOKEN_PREFIX = "ghs_"
"""GitHub's prefix of installation access tokens: the workflow's ``GITHUB_TOKEN`` and GitHub App
tokens (https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/). ``GET /user``
always answers 403 for them, so it is not asked."""
API_VERSION = "2022-11-28"
READ_ONLY_MESSAGE = "resource not accessible by integration"
"""GitHub's 403 message for a token without the needed permission (a fork's read-only token)."""

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_SHA = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")
_NO_RETRY = (400, 401, 404, 410, 422)
REQUEST_DEADLINE = 30.0
"""Seconds one HTTP request may take in all, from connecting to the last byte of the body (the
``timeout`` of ``requests`` bounds each read only, so a server trickling a byte at a time would
otherwise keep the action alive without end)."""
STEP_DEADLINE = 600.0
"""Seconds one client (one GitHub step of the action: finding the pull request and writing the
comment) may spend in all, its requests and its waits for rate limits included."""
MAX_PAGES = 100
"""The most pages a list endpoint is followed through (10,000 items at 100 per page)."""


class GitHubError(GateError):
    """A GitHub API call failed. ``status`` is the HTTP status, or None when no response came back.
    The message names the method, path and status, never the token."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def read_only(self) -> bool:
        """True for GitHub's 403 "Resource not accessible by integration": the token may not write
        here (a pull request from a fork, a Dependabot run, or a missing ``pull-requests: write``)."""
        return self.status == 403 and READ_ONLY_MESSAGE in self.message.lower()


def _retry_after(value: str, now: float) -> float | None:
    """Seconds from a ``Retry-After`` header: delay-seconds or an HTTP date (RFC 9110, 10.2.3)."""
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - now, 0.0) if when is not None else None


def _rate_limit_wait(response: requests.Response, now: float, attempt: int = 0) -> float | None:
    """Seconds to wait before retrying a rate-limited response, or None when it was not rate-limited.

    ``retry-after`` wins; else, with ``x-ratelimit-remaining: 0``, until ``x-ratelimit-reset`` (epoch
    seconds, compared with ``now``) plus a second; else a 429, or a 403 whose message names a rate
    limit, waits a minute doubled per earlier attempt, as GitHub asks for secondary limits.
    """
    if response.status_code not in (403, 429):
        return None
    retry_after = _retry_after(response.headers.get("retry-after", ""), now)
    if retry_after is not None:
        return retry_after
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = response.headers.get("x-ratelimit-reset", "").strip()
        return max(float(reset) - now, 0.0) + 1.0 if reset.isdigit() else 60.0 * 2**attempt
    if response.status_code == 429 or "rate limit" in response.text.lower():
        return 60.0 * 2**attempt
    return None


class GitHubClient:
    """A minimal GitHub REST client: issue comments and the pull-request lookups.

    Args:
        api_url: the REST root, ``GITHUB_API_URL`` (``https://api.github.com`` or GHES's ``/api/v3``).
        token: a ``GITHUB_TOKEN``, PAT or App token; kept out of every message and ``repr``.
        timeout: seconds per HTTP request (connect and read).
        session: a ``requests.Session`` to reuse; a new one by default.
        retries: extra attempts after rate limits, 5xx and connection errors (POST: rate limits and
            connect timeouts only, since a repeated POST could create a second comment). 401, 404
            and 422 are never retried, nor a 403 that is not a rate limit.
        sleep: the wait function (tests pass a recorder).
        clock: the current time in epoch seconds, for ``x-ratelimit-reset`` (tests pass a fixed one).
        max_wait: give up instead of waiting more than this many seconds in all for one request.
        deadline: seconds one request may take in all, connect, headers and body (not per read).
        step_deadline: seconds this client may spend in all, over every request and wait; past it
            every request fails at once.
    Raises:
        GateError: when ``token`` is empty.
    """

    def __init__(
        self,
        api_url: str,
        token: str,
        timeout: float = 10.0,
        session: requests.Session | None = None,
        *,
        retries: int = 3,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        max_wait: float = 300.0,
        deadline: float = REQUEST_DEADLINE,
        step_deadline: float = STEP_DEADLINE,
    ) -> None:
        if not token:
            raise GateError("The GitHub token is empty; a token is needed to post the pull-request comment.")
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.max_wait = max_wait
        self.deadline = deadline
        self.step_deadline = step_deadline
        self._step_end = time.monotonic() + step_deadline
        self._session = session if session is not None else requests.Session()
        self._sleep = sleep
        self._clock = clock
        self._token = token
        self._headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": f"accuracy-gate/{gate.__version__}",
        }

    def __repr__(self) -> str:
        return f"GitHubClient(api_url={self.api_url!r})"

    def _redact(self, text: str) -> str:
        return redact(text, self._token)

    def _send(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        """One HTTP exchange that ends within :attr:`deadline` (and the step's deadline) in all.

        ``requests`` has no total timeout, so the exchange runs in a daemon thread that is abandoned
        (with its session) when the time is up; a daemon thread never keeps the process alive.

        Raises:
            GitHubError: the time ran out (status None); requests.RequestException: as requests raises it.
        """
        path = urlsplit(url).path
        left = min(self.deadline, self._step_end - time.monotonic())
        if left <= 0:
            spent = f"the GitHub step ran past its {self.step_deadline:g} s limit"
            raise GitHubError(None, f"GitHub API {method} {path} not sent: {spent}.")
        outcome: dict[str, Any] = {}
        session = self._session

        def exchange() -> None:
            try:
                outcome["response"] = session.request(
                    method, url, headers=self._headers, timeout=min(self.timeout, left), **kwargs
                )
            except BaseException as exc:  # handed to the caller's thread
                outcome["error"] = exc

        worker = threading.Thread(target=exchange, name="accuracy-gate-http", daemon=True)
        worker.start()
        worker.join(left)
        if worker.is_alive():
            self._session = requests.Session()  # the abandoned exchange keeps the old one
            limit = "its" if left >= self.deadline else "the GitHub step's"
            raise GitHubError(None, f"GitHub API {method} {path} did not complete within {limit} {left:.3g} s limit.")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["response"]

    def _request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        """Send one request with retries; return the last response, or raise GitHubError when none came."""
        path = urlsplit(url).path
        waited = 0.0
        for attempt in range(self.retries + 1):
            final = attempt == self.retries
            try:
                response = self._send(method, url, **kwargs)
            except requests.RequestException as exc:
                wait = 2.0**attempt
                retryable = method != "POST" or isinstance(exc, requests.ConnectTimeout)
                if final or not retryable or waited + wait > self.max_wait or not self._may_wait(wait):
                    message = self._redact(f"GitHub API {method} {path} failed without a response: {exc}")
                    raise GitHubError(None, message) from exc
                self._sleep(wait)
                waited += wait
                continue
            wait = _rate_limit_wait(response, self._clock(), attempt)
            if wait is None and response.status_code >= 500 and method != "POST":
                wait = 2.0**attempt
            if response.status_code in _NO_RETRY or wait is None or final or waited + wait > self.max_wait:
                return response
            if not self._may_wait(wait):  # the step's deadline comes first: answer with what came
                return response
            self._sleep(wait)
            waited += wait
        raise AssertionError("unreachable")

    def _may_wait(self, wait: float) -> bool:
        """Whether waiting ``wait`` seconds before a retry still leaves the step some time."""
        return time.monotonic() + wait < self._step_end

    def _error(self, method: str, url: str, response: requests.Response) -> GitHubError:
        try:
            detail = str(response.json().get("message", ""))
        except (ValueError, AttributeError):
            detail = response.text
        detail = " ".join(detail.split())[:300] or response.reason or ""
        hint = ""
        if response.status_code in (403, 404) and _rate_limit_wait(response, self._clock()) is None:
            hint = " (the token needs `pull-requests: write`; tokens of pull requests from forks are read-only)"
        message = f"GitHub API {method} {urlsplit(url).path} failed with HTTP {response.status_code}: {detail}{hint}"
        return GitHubError(response.status_code, self._redact(message))

    def _call(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        response = self._request(method, url, **kwargs)
        if not 200 <= response.status_code < 300:
            raise self._error(method, url, response)
        return response

    def _repo_url(self, repo: str) -> str:
        if not _REPO.fullmatch(repo or ""):
            raise GateError(f"Repository {repo!r} is not of the form 'owner/name'.")
        return f"{self.api_url}/repos/{repo}"

    def _paginate(self, url: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every item of a list endpoint, following the ``Link`` header's ``rel="next"`` through all
        pages (https://docs.github.com/rest/using-the-rest-api/using-pagination-in-the-rest-api).

        Raises:
            GitHubError: on an API error, a page that is not a list, a next-page link to another
                host (the token is not sent there), or more than :data:`MAX_PAGES` pages.
        """
        next_url: str | None = url
        next_params: dict[str, Any] | None = {"per_page": 100, **params}
        origin = urlsplit(self.api_url)[:2]
        items: list[dict[str, Any]] = []
        seen: set[str] = set()
        while next_url and next_url not in seen:
            if len(seen) == MAX_PAGES:
                raise GitHubError(
                    None, f"GitHub API GET {urlsplit(url).path} has more than {MAX_PAGES} pages; expected fewer."
                )
            seen.add(next_url)
            response = self._call("GET", next_url, params=next_params)
            page = response.json()
            if not isinstance(page, list):
                raise GitHubError(response.status_code, f"GitHub API GET {urlsplit(next_url).path} returned no list.")
            items.extend(item for item in page if isinstance(item, dict))
            next_url, next_params = response.links.get("next", {}).get("url"), None  # the link carries the query
            if next_url and urlsplit(next_url)[:2] != origin:
                raise GitHubError(None, f"GitHub API pagination pointed to another host: {urlsplit(next_url).netloc}.")
        return items

    def list_issue_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Return every comment on issue or pull request ``number`` of ``repo`` ("owner/name"), oldest first.

        ``GET /repos/{owner}/{repo}/issues/{number}/comments?per_page=100``, every page
        (https://docs.github.com/rest/issues/comments).

        Raises:
            GitHubError: on an API error, or a next-page link to another host.
        """
        return self._paginate(f"{self._repo_url(repo)}/issues/{int(number)}/comments", {})

    def list_open_pulls_by_head(self, repo: str, head: str) -> list[dict[str, Any]]:
        """Return the open pull requests of ``repo`` whose head is ``head`` (``owner:branch``).

        ``GET /repos/{owner}/{repo}/pulls?head=owner:branch&state=open``, every page
        (https://docs.github.com/rest/pulls/pulls#list-pull-requests). This finds the pull request of
        a fork's branch, which ``workflow_run.pull_requests`` leaves out.

        Raises:
            GitHubError: on an API error.
        """
        return self._paginate(f"{self._repo_url(repo)}/pulls", {"head": head, "state": "open"})

    def list_pulls_for_commit(self, repo: str, sha: str) -> list[dict[str, Any]]:
        """Return the pull requests associated with commit ``sha`` (open, closed and merged).

        ``GET /repos/{owner}/{repo}/commits/{sha}/pulls``, every page
        (https://docs.github.com/rest/commits/commits#list-pull-requests-associated-with-a-commit).

        Raises:
            GitHubError: on an API error. GateError: for a ``sha`` that is not a full commit SHA.
        """
        if not _SHA.fullmatch(sha or ""):
            raise GateError(f"Commit {sha!r} is not a full commit SHA.")
        return self._paginate(f"{self._repo_url(repo)}/commits/{sha}/pulls", {})

    def get_pull(self, repo: str, number: int) -> dict[str, Any]:
        """Return pull request ``number`` of ``repo`` (``GET /repos/{owner}/{repo}/pulls/{number}``).

        Raises:
            GitHubError: on an API error (404: no such pull request).
        """
        return self._call("GET", f"{self._repo_url(repo)}/pulls/{int(number)}").json()

    def create_issue_comment(self, repo: str, number: int, body: str) -> dict[str, Any]:
        """Create a comment on issue or pull request ``number`` and return it (with ``id``, ``html_url``).

        ``POST /repos/{owner}/{repo}/issues/{number}/comments`` (https://docs.github.com/rest/issues/comments).

        Raises:
            GitHubError: on an API error (403/404 usually mean a missing ``pull-requests: write``).
        """
        url = f"{self._repo_url(repo)}/issues/{int(number)}/comments"
        return self._call("POST", url, json={"body": body}).json()

    def update_issue_comment(self, repo: str, comment_id: int, body: str) -> dict[str, Any]:
        """Replace the body of comment ``comment_id`` and return the updated comment.

        ``PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}`` (https://docs.github.com/rest/issues/comments).

        Raises:
            GitHubError: on an API error.
        """
        url = f"{self._repo_url(repo)}/issues/comments/{int(comment_id)}"
        return self._call("PATCH", url, json={"body": body}).json()

    def delete_issue_comment(self, repo: str, comment_id: int) -> None:
        """Delete comment ``comment_id`` (``DELETE /repos/{owner}/{repo}/issues/comments/{comment_id}``,
        https://docs.github.com/rest/issues/comments); one already gone (404) counts as deleted.

        Raises:
            GitHubError: on another API error.
        """
        url = f"{self._repo_url(repo)}/issues/comments/{int(comment_id)}"
        response = self._request("DELETE", url)
        if response.status_code != 404 and not 200 <= response.status_code < 300:
            raise self._error("DELETE", url, response)

    @property
    def can_read_user(self) -> bool:
        """False for an installation token (``ghs_``: ``GITHUB_TOKEN`` or a GitHub App's), which ``GET /user``
        always refuses with 403; True for personal and OAuth tokens."""
        return not self._token.startswith(INSTALLATION_TOKEN_PREFIX)

    def authenticated_login(self) -> str | None:
        """Return the login the token acts as, or None when the token may not read it.

        ``GET /user`` (https://docs.github.com/rest/users/users#get-the-authenticated-user); a
        ``GITHUB_TOKEN`` or App installation token gets 403 there, so for those (``can_read_user``
        False) nothing is sent.

        Raises:
            GitHubError: on other API errors (5xx, no response).
        """
        if not self.can_read_user:
            return None
        url = f"{self.api_url}/user"
        response = self._request("GET", url)
        if response.status_code in (401, 403, 404):
            return None
        if not 200 <= response.status_code < 300:
            raise self._error("GET", url, response)
        login = response.json().get("login")
        return login if isinstance(login, str) and login else None
