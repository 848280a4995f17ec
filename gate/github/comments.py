"""The sticky pull-request comment: one comment per pull request and key, updated in place.

Uses GitHub's REST "issue comments" endpoints (pull requests are issues there):
https://docs.github.com/rest/issues/comments. Our comment is found by a hidden HTML marker on its first
line *and* by its author, so comments by people (or other bots) quoting the marker are never touched.
Retries follow GitHub's "Best practices for using the REST API" (rate limits: ``retry-after``,
``x-ratelimit-remaining``/``x-ratelimit-reset``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import requests

import gate
from gate.errors import GateError

MARKER_PREFIX = "<!-- accuracy-gate:"
DEFAULT_AUTHOR = "github-actions[bot]"
"""The login of comments made with the workflow's ``GITHUB_TOKEN``."""
API_VERSION = "2022-11-28"
COMMENT_LIMIT = 65536
"""GitHub's comment body limit in characters (HTTP 422 "Body is too long")."""
COMMENT_TRUNCATE_AT = 60000
"""Longer bodies are cut to this many characters: GitHub's exact counting is unclear, so keep a margin."""
TRUNCATED_NOTE = "_The report was truncated to fit GitHub's comment size limit; see the job summary for all of it._"

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/-]")  # no '>' or '!', so a key cannot end the HTML comment


class GitHubError(GateError):
    """A GitHub API call failed. ``status`` is the HTTP status, or None when no response came back.
    The message names the method, path and status, never the token."""

    def __init__(self, status: int | None, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def marker(key: str) -> str:
    """Return the hidden marker ``<!-- accuracy-gate:{key} -->`` that identifies our comment.

    Characters other than letters, digits and ``_.:/-`` are percent-encoded, so distinct keys give
    distinct markers and no key can close the HTML comment.

    Raises:
        GateError: when ``key`` is empty.
    """
    key = str(key).strip()
    if not key:
        raise GateError("The comment key is empty; expected a short name such as the model's name.")
    safe = _KEY_UNSAFE.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8")), key)
    return f"{MARKER_PREFIX}{safe} -->"


def _rate_limit_wait(response: requests.Response) -> float | None:
    """Seconds to wait before retrying a rate-limited response, or None when it was not rate-limited."""
    if response.status_code not in (403, 429):
        return None
    retry_after = response.headers.get("retry-after", "")
    if retry_after.isdigit():
        return float(retry_after)
    if response.headers.get("x-ratelimit-remaining") == "0":
        reset = response.headers.get("x-ratelimit-reset", "")
        return max(float(reset) - time.time(), 0.0) + 1.0 if reset.isdigit() else 60.0
    if response.status_code == 429 or "rate limit" in response.text.lower():
        return 60.0  # a secondary rate limit without headers: GitHub asks for at least a minute
    return None


class GitHubClient:
    """A minimal GitHub REST client for issue comments.

    Args:
        api_url: the REST root, ``GITHUB_API_URL`` (``https://api.github.com`` or GHES's ``/api/v3``).
        token: a ``GITHUB_TOKEN``, PAT or App token; kept out of every message and ``repr``.
        timeout: seconds per HTTP request.
        session: a ``requests.Session`` to reuse; a new one by default.
        retries: extra attempts after rate limits, 5xx and connection errors (POST: rate limits and
            connect timeouts only, since a repeated POST could create a second comment).
        sleep: the wait function (tests pass a stub).
        max_wait: give up instead of waiting longer than this many seconds for a rate limit.
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
        retries: int = 2,
        sleep: Callable[[float], None] = time.sleep,
        max_wait: float = 300.0,
    ) -> None:
        if not token:
            raise GateError("The GitHub token is empty; a token is needed to post the pull-request comment.")
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self.retries = retries
        self.max_wait = max_wait
        self._session = session if session is not None else requests.Session()
        self._sleep = sleep
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
        return text.replace(self._token, "***")

    def _request(self, method: str, url: str, **kwargs: Any) -> requests.Response:
        """Send one request with retries; return the last response, or raise GitHubError when none came."""
        path = urlsplit(url).path
        for attempt in range(self.retries + 1):
            final = attempt == self.retries
            try:
                response = self._session.request(method, url, headers=self._headers, timeout=self.timeout, **kwargs)
            except requests.RequestException as exc:
                if final or (method == "POST" and not isinstance(exc, requests.ConnectTimeout)):
                    message = self._redact(f"GitHub API {method} {path} failed without a response: {exc}")
                    raise GitHubError(None, message) from exc
                self._sleep(2.0**attempt)
                continue
            wait = _rate_limit_wait(response)
            if wait is None and response.status_code >= 500 and method != "POST":
                wait = 2.0**attempt
            if wait is None or final or wait > self.max_wait:
                return response
            self._sleep(wait)
        raise AssertionError("unreachable")

    def _error(self, method: str, url: str, response: requests.Response) -> GitHubError:
        try:
            detail = str(response.json().get("message", ""))
        except (ValueError, AttributeError):
            detail = response.text
        detail = " ".join(detail.split())[:300] or response.reason or ""
        hint = ""
        if response.status_code in (403, 404) and _rate_limit_wait(response) is None:
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

    def list_issue_comments(self, repo: str, number: int) -> list[dict[str, Any]]:
        """Return every comment on issue or pull request ``number`` of ``repo`` ("owner/name"), oldest first.

        ``GET /repos/{owner}/{repo}/issues/{number}/comments?per_page=100``, following the ``Link``
        header's ``rel="next"`` through all pages (https://docs.github.com/rest/issues/comments,
        https://docs.github.com/rest/using-the-rest-api/using-pagination-in-the-rest-api).

        Raises:
            GitHubError: on an API error, or a next-page link to another host (the token is not sent there).
        """
        url: str | None = f"{self._repo_url(repo)}/issues/{int(number)}/comments"
        params: dict[str, Any] | None = {"per_page": 100}
        origin = urlsplit(self.api_url)[:2]
        comments: list[dict[str, Any]] = []
        seen: set[str] = set()
        while url and url not in seen:
            seen.add(url)
            response = self._call("GET", url, params=params)
            page = response.json()
            if not isinstance(page, list):
                raise GitHubError(response.status_code, f"GitHub API GET {urlsplit(url).path} returned no list.")
            comments.extend(page)
            url, params = response.links.get("next", {}).get("url"), None  # the link carries the query
            if url and urlsplit(url)[:2] != origin:
                raise GitHubError(None, f"GitHub API pagination pointed to another host: {urlsplit(url).netloc}.")
        return comments

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

    def authenticated_login(self) -> str | None:
        """Return the login the token acts as, or None when the token may not read it.

        ``GET /user`` (https://docs.github.com/rest/users/users#get-the-authenticated-user); a
        ``GITHUB_TOKEN`` or App installation token gets 403 there.

        Raises:
            GitHubError: on other API errors (5xx, no response).
        """
        url = f"{self.api_url}/user"
        response = self._request("GET", url)
        if response.status_code in (401, 403, 404):
            return None
        if not 200 <= response.status_code < 300:
            raise self._error("GET", url, response)
        login = response.json().get("login")
        return login if isinstance(login, str) and login else None


def fit_comment_body(body: str, limit: int = COMMENT_TRUNCATE_AT) -> str:
    """Return ``body`` unchanged if it has at most ``limit`` characters, else cut at a line boundary
    (closing an open code fence) and ending with :data:`TRUNCATED_NOTE`, ``limit`` characters at most."""
    if len(body) <= limit:
        return body
    room = limit - len(TRUNCATED_NOTE) - len("```\n") - 1
    head = body[:room]
    cut = head.rfind("\n")
    head = head[: cut + 1] if cut > 0 else head + "\n"
    fences = sum(line.lstrip().startswith("```") for line in head.splitlines())
    if fences % 2:
        head += "```\n"
    return head + "\n" + TRUNCATED_NOTE


def _same_text(a: str, b: str) -> bool:
    # GitHub stores CRLF as sent but editors and the API may differ in line endings and trailing space.
    return a.replace("\r\n", "\n").rstrip() == b.replace("\r\n", "\n").rstrip()


def upsert_comment(
    client: GitHubClient,
    repo: str,
    number: int,
    body: str,
    key: str = "default",
    author: str | None = None,
) -> dict[str, Any]:
    """Create or update the one accuracy-gate comment for ``key`` on pull request ``number``.

    The body gets ``marker(key)`` as its first line and is cut to fit GitHub's size limit. Among the
    comments containing that marker, only those by ``author`` count: the given login, else the token's
    own login (``client.authenticated_login()``), else ``github-actions[bot]`` (the ``GITHUB_TOKEN``
    identity; pass ``author`` explicitly for an App token, whose ``/user`` is unreadable). The newest of
    them (highest ``id``) is updated in place; with none, a comment is created.

    Returns:
        ``{"action": "created" | "updated" | "unchanged", "comment_id": int, "html_url": str}``;
        "unchanged" means the body was already identical and no PATCH was sent.
    Raises:
        GitHubError: on an API error. GateError: for an empty key or a malformed ``repo``.
    """
    tag = marker(key)
    full_body = fit_comment_body(f"{tag}\n{body}")
    login = (author or client.authenticated_login() or DEFAULT_AUTHOR).casefold()
    ours = [
        c
        for c in client.list_issue_comments(repo, number)
        if tag in (c.get("body") or "") and str((c.get("user") or {}).get("login", "")).casefold() == login
    ]
    if not ours:
        created = client.create_issue_comment(repo, number, full_body)
        return {"action": "created", "comment_id": created["id"], "html_url": created.get("html_url")}
    newest = max(ours, key=lambda c: c["id"])
    if _same_text(newest.get("body") or "", full_body):
        return {"action": "unchanged", "comment_id": newest["id"], "html_url": newest.get("html_url")}
    updated = client.update_issue_comment(repo, newest["id"], full_body)
    return {"action": "updated", "comment_id": updated["id"], "html_url": updated.get("html_url")}
