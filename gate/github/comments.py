"""The sticky pull-request comment: one comment per pull request and key, updated in place.

Uses GitHub's REST "issue comments" endpoints (pull requests are issues there):
https://docs.github.com/rest/issues/comments, through ``gate.github.client.GitHubClient`` (which
also finds the pull request of a commit or branch). Our comment is found by a hidden HTML marker on
its first line *and* by its author, so comments by people (or other bots) quoting the marker are
never touched.
"""

from __future__ import annotations

import re
from typing import Any

from gate.errors import GateError

# The REST client and its errors live in gate.github.client; they stay importable from here.
from gate.github.client import MAX_PAGES as MAX_PAGES
from gate.github.client import GitHubClient as GitHubClient
from gate.github.client import GitHubError as GitHubError

MARKER_PREFIX = "<!-- accuracy-gate:"
DIGEST_PREFIX = "<!-- accuracy-gate-digest:"
AUTHOR_PREFIX = "<!-- accuracy-gate-author:"
DEFAULT_AUTHOR = "github-actions[bot]"
"""The login of comments made with the workflow's ``GITHUB_TOKEN``."""
LONGEST_LOGIN = 39 + len("[bot]")
"""GitHub logins have at most 39 characters; an App's bot adds ``[bot]``."""
UNKNOWN_AUTHOR_WARNING = (
    "GitHub did not say who authored the PR comment just created, so the next run cannot find it and "
    "will post another; set the comment_author input to the login of the token's user or App bot."
)
_BOT_LOGIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}\[bot\]")
COMMENT_LIMIT = 65536
"""GitHub's comment body limit in characters (HTTP 422 "Body is too long")."""
COMMENT_TRUNCATE_AT = 60000
"""The most UTF-8 bytes a comment body gets: GitHub's exact counting is unclear, so keep a margin.
Counting bytes bounds characters and UTF-16 code units alike."""
TRUNCATED_NOTE = "_The report was truncated to fit GitHub's comment size limit; see the job summary for all of it._"

_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/-]")  # no '>' or '!', so a key cannot end the HTML comment


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
    the oldest match (lowest ``id``) is the one kept up to date, and newer matches of ours (two runs
    of one key that both found none and both created one) are deleted: after creating, the comments
    are listed again, and a comment we created that is not the oldest is deleted and the oldest one
    updated instead, so that concurrent runs end with one comment.

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

    def ours_now() -> list[dict[str, Any]]:
        tagged = [c for c in client.list_issue_comments(repo, number) if tag in (c.get("body") or "")]
        if login:
            return [c for c in tagged if _login_of(c) == login.casefold()]
        return [c for c in tagged if _adopted(c)] or [c for c in tagged if _login_of(c) == DEFAULT_AUTHOR]

    ours = ours_now()
    if not ours:
        if not create:
            return {"action": "skipped", "comment_id": None, "html_url": None}
        created = client.create_issue_comment(repo, number, full(None))
        outcome = {"action": "created", "comment_id": created["id"], "html_url": created.get("html_url")}
        if not login:
            by = str((created.get("user") or {}).get("login") or "")
            if not by or not (_BOT_LOGIN.fullmatch(by) and created.get("performed_via_github_app")):
                # A GITHUB_TOKEN's comment is found by its author next time; anything else cannot be.
                if by.casefold() != DEFAULT_AUTHOR:
                    return {**outcome, "warning": UNKNOWN_AUTHOR_WARNING}
            elif by.casefold() != DEFAULT_AUTHOR:  # an App's bot: record it in the comment itself
                client.update_issue_comment(repo, created["id"], full(author_marker(by)))
        again = ours_now()
        if again and min(c["id"] for c in again) != created["id"]:  # another run of this key was first
            client.delete_issue_comment(repo, created["id"])
            return _update(client, repo, [c for c in again if c["id"] != created["id"]], full, login, digest)
        return outcome
    return _update(client, repo, ours, full, login, digest)


def _update(client: GitHubClient, repo: str, ours: list, full, login, digest) -> dict[str, Any]:
    """Updates the oldest of ``ours`` (unless it already says the same) and deletes the newer ones."""
    oldest = min(ours, key=lambda c: c["id"])
    for duplicate in sorted(c["id"] for c in ours if c["id"] != oldest["id"]):
        client.delete_issue_comment(repo, duplicate)
    existing = oldest.get("body") or ""
    author_line = author_marker(oldest["user"]["login"]) if not login and _adopted(oldest) else None
    full_body = full(author_line)
    if _same_text(existing, full_body) or (digest and digest_marker(digest) in existing.splitlines()[:3]):
        return {"action": "unchanged", "comment_id": oldest["id"], "html_url": oldest.get("html_url")}
    updated = client.update_issue_comment(repo, oldest["id"], full_body)
    return {"action": "updated", "comment_id": updated["id"], "html_url": updated.get("html_url")}
