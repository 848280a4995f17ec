"""GitHub's REST API as the action needs it, and the sticky pull-request comment: one comment per
pull request and key, updated in place.

Uses GitHub's REST "issue comments" endpoints (pull requests are issues there):
https://docs.github.com/rest/issues/comments, and the "pulls" endpoints to find the pull request of
a commit or branch (https://docs.github.com/rest/pulls/pulls,
https://docs.github.com/rest/commits/commits#list-pull-requests-associated-with-a-commit). Our
comment is found by a hidden HTML marker on its first line *and* by its author, so comments by people
(or other bots) quoting the marker are never touched. Retries follow GitHub's "Best practices for
using the REST API" (rate limits: ``retry-after``, ``x-ratelimit-remaining``/``x-ratelimit-reset``;
at least a minute for a secondary limit without either; no retry for 401, 404 and 422).
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

MARKER_PREFIX = "<!-- accuracy-gate:"
DIGEST_PREFIX = "<!-- accuracy-gate-digest:"
AUTHOR_PREFIX = "<!-- accuracy-gate-author:"
DEFAULT_AUTHOR = "github-actions[bot]"
"""The login of comments made with the workflow's ``GITHUB_TOKEN``."""
INSTALLATION_TOKEN_PREFIX = "ghs_"
"""GitHub's prefix of installation access tokens: the workflow's ``GITHUB_TOKEN`` and GitHub App
tokens (https://github.blog/2021-04-05-behind-githubs-new-authentication-token-formats/). ``GET /user``
always answers 403 for them, so it is not asked."""
LONGEST_LOGIN = 39 + len("[bot]")
"""GitHub logins have at most 39 characters; an App's bot adds ``[bot]``."""
UNKNOWN_AUTHOR_WARNING = (
    "GitHub did not say who authored the PR comment just created, so the next run cannot find it and "
    "will post another; set the comment_author input to the login of the token's user or App bot."
)
_BOT_LOGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}\[bot\]")
API_VERSION = "2022-11-28"
COMMENT_LIMIT = 65536
"""GitHub's comment body limit in characters (HTTP 422 "Body is too long")."""
COMMENT_TRUNCATE_AT = 60000
"""The most UTF-8 bytes a comment body gets: GitHub's exact counting is unclear, so keep a margin.
Counting bytes bounds characters and UTF-16 code units alike."""
TRUNCATED_NOTE = "_The report was truncated to fit GitHub's comment size limit; see the job summary for all of it._"
READ_ONLY_MESSAGE = "resource not accessible by integration"
"""GitHub's 403 message for a token without the needed permission (a fork's read-only token)."""

_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
_SHA = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/-]")  # no '>' or '!', so a key cannot end the HTML comment
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


def utf8_len(text: str) -> int:
    """The length of ``text`` in UTF-8 bytes, the unit of every size budget here."""
    return len(text.encode("utf-8"))


def fit_comment_body(body: str, limit: int = COMMENT_TRUNCATE_AT) -> str:
    """Return ``body`` unchanged if it has at most ``limit`` UTF-8 bytes, else cut at a line boundary
    (closing an open code fence) and ending with :data:`TRUNCATED_NOTE`, ``limit`` bytes at most.

    The last line of defence: reports arrive already fitted section by section
    (``gate.report.markdown.render_markdown(budget=...)``), so this only cuts a body that a caller
    built too long, and GitHub never answers 422 "Body is too long".
    """
    if utf8_len(body) <= limit:
        return body
    room = limit - utf8_len(TRUNCATED_NOTE) - len("```\n") - 2
    head = body.encode("utf-8")[: max(room, 0)].decode("utf-8", "ignore")
    cut = head.rfind("\n")
    head = head[: cut + 1] if cut > 0 else head + "\n"
    fences = sum(line.lstrip().startswith("```") for line in head.splitlines())
    if fences % 2:
        head += "```\n"
    return head + "\n" + TRUNCATED_NOTE


def digest_marker(digest: str) -> str:
    """Return the hidden line ``<!-- accuracy-gate-digest:{digest} -->`` that records which results a
    comment shows, so that ``on-change`` can tell unchanged results apart from a new commit or run."""
    if not re.fullmatch(r"[0-9a-f]{8,128}", digest or ""):
        raise GateError(f"Digest {digest!r} is not a lower-case hex string.")
    return f"{DIGEST_PREFIX}{digest} -->"


def author_marker(login: str) -> str:
    """Return the hidden line ``<!-- accuracy-gate-author:{login} -->`` that records which App bot
    created the comment, for a token whose own login cannot be read (see :func:`upsert_comment`).

    Raises:
        GateError: for a login that is not a GitHub App bot's (``name[bot]``).
    """
    if not _BOT_LOGIN.fullmatch(login or ""):
        raise GateError(f"Login {login!r} is not a GitHub App bot's login (name[bot]).")
    return f"{AUTHOR_PREFIX}{login} -->"


def header_size(key: str, digest: str | None = None, author: str | int | None = None) -> int:
    """UTF-8 bytes that :func:`upsert_comment` adds in front of a body (the marker lines), so that a
    caller can render the report into ``COMMENT_TRUNCATE_AT - header_size(...)``. ``author``: the
    login of an author line, or its length (``LONGEST_LOGIN`` reserves room for any)."""
    lines = [marker(key)] + ([digest_marker(digest)] if digest else [])
    extra = 0
    if author is not None:
        length = author if isinstance(author, int) else len(author)
        extra = len(AUTHOR_PREFIX) + length + len(" -->\n")
    return utf8_len("\n".join(lines) + "\n") + extra


def _login_of(comment: dict[str, Any]) -> str:
    return str((comment.get("user") or {}).get("login", "")).casefold()


def _adopted(comment: dict[str, Any]) -> bool:
    """The comment records (in its author line) the App bot that wrote it, and GitHub agrees: its
    author is that bot and it was made through a GitHub App. A person quoting our comment has their own
    login, and no person's login can end in ``[bot]``."""
    login = _login_of(comment)
    lines = (comment.get("body") or "").splitlines()[:3]
    recorded = [line[len(AUTHOR_PREFIX) : -len(" -->")] for line in lines if line.startswith(AUTHOR_PREFIX)]
    return (
        bool(recorded)
        and recorded[0].casefold() == login
        and bool(_BOT_LOGIN.fullmatch(recorded[0]))
        and bool(comment.get("performed_via_github_app"))
    )


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
    *,
    create: bool = True,
    digest: str | None = None,
) -> dict[str, Any]:
    """Create or update the one accuracy-gate comment for ``key`` on pull request ``number``.

    The body gets ``marker(key)`` as its first line (and ``digest_marker(digest)`` as its last marker
    line when ``digest`` is given) and is cut to :data:`COMMENT_TRUNCATE_AT` bytes at most. Among the
    comments containing that marker, only those by the comment's author count: ``author`` when given,
    else the token's own login (``client.authenticated_login()``, not asked for installation tokens).
    When neither is known (a ``GITHUB_TOKEN`` or a GitHub App token), the author is the one GitHub
    reports for the comment we create: a comment whose author line (:func:`author_marker`) names its
    real author, an App bot, is ours; else one by ``github-actions[bot]`` (the ``GITHUB_TOKEN``). A
    comment created by another bot than ``github-actions[bot]`` gets that author line in one PATCH, so
    the next run finds it again; nothing is stored anywhere else. Every page of comments is searched;
    the newest match (highest ``id``) is the one kept up to date.

    - No match: POST a new comment when ``create``, else do nothing ("skipped").
    - A match whose body is the same text, or (with ``digest``) that carries the same digest line:
      no request ("unchanged").
    - Otherwise: PATCH it in place ("updated").

    Returns:
        ``{"action": "created" | "updated" | "unchanged" | "skipped", "comment_id": int | None,
        "html_url": str | None}``, plus ``"warning"`` (:data:`UNKNOWN_AUTHOR_WARNING`) when GitHub did
        not name the author of the comment created, so that the next run cannot find it.
    Raises:
        GitHubError: on an API error (``.read_only`` tells a read-only token apart).
        GateError: for an empty key or a malformed ``repo``.
    """
    tag = marker(key)

    def full(author_line: str | None) -> str:
        lines = [tag] + ([author_line] if author_line else []) + ([digest_marker(digest)] if digest else [])
        return fit_comment_body("\n".join(lines) + f"\n{body}")

    login = author or client.authenticated_login()
    tagged = [c for c in client.list_issue_comments(repo, number) if tag in (c.get("body") or "")]
    if login:
        ours = [c for c in tagged if _login_of(c) == login.casefold()]
    else:
        ours = [c for c in tagged if _adopted(c)] or [c for c in tagged if _login_of(c) == DEFAULT_AUTHOR]
    if not ours:
        if not create:
            return {"action": "skipped", "comment_id": None, "html_url": None}
        created = client.create_issue_comment(repo, number, full(None))
        outcome = {"action": "created", "comment_id": created["id"], "html_url": created.get("html_url")}
        if login:
            return outcome
        by = str((created.get("user") or {}).get("login") or "")
        if not by or not (_BOT_LOGIN.fullmatch(by) and created.get("performed_via_github_app")):
            # A GITHUB_TOKEN's comment is found by its author next time; anything else cannot be.
            return outcome if by.casefold() == DEFAULT_AUTHOR else {**outcome, "warning": UNKNOWN_AUTHOR_WARNING}
        if by.casefold() != DEFAULT_AUTHOR:  # an App's bot: record it in the comment itself
            client.update_issue_comment(repo, created["id"], full(author_marker(by)))
        return outcome
    newest = max(ours, key=lambda c: c["id"])
    existing = newest.get("body") or ""
    author_line = author_marker(newest["user"]["login"]) if not login and _adopted(newest) else None
    full_body = full(author_line)
    if _same_text(existing, full_body) or (digest and digest_marker(digest) in existing.splitlines()[:3]):
        return {"action": "unchanged", "comment_id": newest["id"], "html_url": newest.get("html_url")}
    updated = client.update_issue_comment(repo, newest["id"], full_body)
    return {"action": "updated", "comment_id": updated["id"], "html_url": updated.get("html_url")}
