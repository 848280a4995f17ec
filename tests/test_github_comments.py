"""The REST client and the sticky PR comment against a real HTTP server on 127.0.0.1 that speaks GitHub's
endpoints (``fake_github.FakeGitHub``): pagination, retries and rate limits with injected time, the
pull-request lookups, and the comment's create / update / unchanged / skipped paths."""

from __future__ import annotations

import socket
from urllib.parse import parse_qs, urlsplit

import pytest

import gate
from gate.errors import GateError
from gate.github.comments import (
    COMMENT_TRUNCATE_AT,
    DEFAULT_AUTHOR,
    MARKER_PREFIX,
    TRUNCATED_NOTE,
    GitHubClient,
    GitHubError,
    digest_marker,
    fit_comment_body,
    header_size,
    marker,
    upsert_comment,
)

from fake_github import BODY_LIMIT, PR, REPO, TOKEN, FakeGitHub
from fake_github import LIST_PATH as _LIST
from fake_github import json_response as _json

NOW = 1_700_000_000.0
PAT = "ghp_PERSONALtoken0123456789abcdefXYZ"






def _client(server, **kwargs):
    kwargs.setdefault("sleep", lambda seconds: None)
    kwargs.setdefault("clock", lambda: NOW)
    return GitHubClient(server.url_for("/"), TOKEN, **kwargs)


def test_server_is_local(httpserver):
    assert urlsplit(httpserver.url_for("/")).hostname == "127.0.0.1"


def test_first_run_creates_one_comment_with_marker_first(fake):
    result = upsert_comment(_client(fake.server), REPO, PR, "## Accuracy: PASS")

    [comment] = fake.on_pr()
    assert result == {"action": "created", "comment_id": comment["id"], "html_url": comment["html_url"]}
    assert comment["body"] == "<!-- accuracy-gate:default -->\n## Accuracy: PASS"
    assert comment["user"]["login"] == "github-actions[bot]"


def test_second_run_updates_the_same_comment(fake):
    client = _client(fake.server)
    first = upsert_comment(client, REPO, PR, "run 1")
    second = upsert_comment(client, REPO, PR, "run 2")

    assert second["action"] == "updated"
    assert second["comment_id"] == first["comment_id"]
    assert len(fake.on_pr()) == 1
    assert fake.comments[first["comment_id"]]["body"].endswith("\nrun 2")
    assert len(fake.requests("POST")) == 1 and len(fake.requests("PATCH")) == 1


def test_unchanged_body_sends_no_patch(fake):
    client = _client(fake.server)
    first = upsert_comment(client, REPO, PR, "same report\n")
    again = upsert_comment(client, REPO, PR, "same report\n")

    assert again == {**first, "action": "unchanged"}
    assert fake.requests("PATCH") == []
    assert len(fake.requests("POST")) == 1


def test_comment_by_another_author_with_our_marker_is_never_touched(fake):
    quoted = f"{marker('default')}\nI copied the bot's comment here"
    other = fake.add(quoted, author="octocat")
    client = _client(fake.server)

    created = upsert_comment(client, REPO, PR, "run 1")
    fake.add(quoted, author="octocat")  # a newer foreign comment must not win either
    updated = upsert_comment(client, REPO, PR, "run 2")

    assert created["action"] == "created" and created["comment_id"] != other["id"]
    assert updated["action"] == "updated" and updated["comment_id"] == created["comment_id"]
    assert [c["body"] for c in fake.on_pr() if c["user"]["login"] == "octocat"] == [quoted, quoted]
    assert all(f"/comments/{created['comment_id']}" in r.path for r in fake.requests("PATCH"))


def test_marker_comment_on_a_later_page_is_found(fake):
    for i in range(150):
        fake.add(f"filler {i}", author="someone")
    ours = fake.add(f"{marker('resnet50')}\nold report")
    for i in range(80):
        fake.add(f"later filler {i}", author="someone")

    result = upsert_comment(_client(fake.server), REPO, PR, "new report", key="resnet50")

    assert result["action"] == "updated" and result["comment_id"] == ours["id"]
    assert len(fake.on_pr()) == 231
    pages = [parse_qs(r.query_string.decode()).get("page", ["1"])[0] for r in fake.requests("GET", "/comments$")]
    assert pages == ["1", "2", "3"]


def test_list_follows_links_with_small_pages(httpserver):
    fake = FakeGitHub(httpserver, max_per_page=2)
    ids = [fake.add(f"c{i}")["id"] for i in range(5)]

    comments = _client(httpserver).list_issue_comments(REPO, PR)

    assert [c["id"] for c in comments] == ids
    assert len(fake.requests("GET", "/comments$")) == 3


def test_keys_give_separate_comments(fake):
    client = _client(fake.server)
    a = upsert_comment(client, REPO, PR, "model A", key="model-a")
    b = upsert_comment(client, REPO, PR, "model B", key="model-ab")
    a2 = upsert_comment(client, REPO, PR, "model A v2", key="model-a")

    assert a["comment_id"] != b["comment_id"] and a2["comment_id"] == a["comment_id"]
    assert fake.comments[b["comment_id"]]["body"].endswith("model B")


def test_pat_author_comes_from_user_endpoint(httpserver):
    fake = FakeGitHub(httpserver, login="release-bot", token=PAT)
    fake.add(f"{marker('default')}\nby the actions bot", author=DEFAULT_AUTHOR)
    client = GitHubClient(httpserver.url_for("/"), PAT, sleep=lambda s: None, clock=lambda: NOW)

    assert client.authenticated_login() == "release-bot"
    result = upsert_comment(client, REPO, PR, "report")

    assert result["action"] == "created"
    assert fake.comments[result["comment_id"]]["user"]["login"] == "release-bot"


def test_github_token_user_endpoint_is_not_asked(fake):
    assert not _client(fake.server).can_read_user  # ghs_: an installation token, /user always 403
    assert _client(fake.server).authenticated_login() is None
    assert fake.requests("GET", "^/user$") == []


def test_user_endpoint_403_gives_none(httpserver):
    fake = FakeGitHub(httpserver, token=PAT)  # a PAT without the right to read its user
    client = GitHubClient(httpserver.url_for("/"), PAT, sleep=lambda s: None, clock=lambda: NOW)
    assert client.can_read_user and client.authenticated_login() is None
    assert len(fake.requests("GET", "^/user$")) == 1  # a plain 403 is not retried as a rate limit


def test_explicit_author_skips_user_lookup(fake):
    upsert_comment(_client(fake.server), REPO, PR, "x", author="github-actions[bot]")
    assert fake.requests("GET", "^/user$") == []


def test_headers_are_sent(fake):
    upsert_comment(_client(fake.server), REPO, PR, "report")

    for request in [r for r, _ in fake.server.log]:
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        assert request.headers["X-GitHub-Api-Version"] == "2022-11-28"
        assert request.headers["Accept"] == "application/vnd.github+json"
        assert request.headers["User-Agent"] == f"accuracy-gate/{gate.__version__}"


def test_server_error_raises_without_token(httpserver):
    httpserver.expect_request(_LIST).respond_with_json({"message": "Server Error"}, status=500)
    sleeps = []
    client = _client(httpserver, sleep=sleeps.append)

    with pytest.raises(GitHubError) as info:
        client.list_issue_comments(REPO, PR)

    error = info.value
    assert error.status == 500 and isinstance(error, GateError)
    assert f"GET /repos/{REPO}/issues/{PR}/comments" in str(error) and "500" in str(error)
    assert TOKEN not in str(error) and TOKEN not in repr(error) and TOKEN not in repr(client)
    assert len(httpserver.log) == 4 and sleeps == [1.0, 2.0, 4.0]  # GET is retried three times with backoff


def test_post_is_not_retried_on_server_error(httpserver):
    httpserver.expect_request(_LIST, method="POST").respond_with_json({"message": "oops"}, status=502)

    with pytest.raises(GitHubError) as info:
        _client(httpserver).create_issue_comment(REPO, PR, "body")

    assert info.value.status == 502 and len(httpserver.log) == 1


def test_rate_limit_waits_for_retry_after(fake):
    limited = _json({"message": "You have exceeded a secondary rate limit"}, 403, {"Retry-After": "7"})
    fake.server.expect_oneshot_request(_LIST, method="GET").respond_with_response(limited)
    sleeps = []

    result = upsert_comment(_client(fake.server, sleep=sleeps.append), REPO, PR, "report")

    assert result["action"] == "created" and sleeps == [7.0]


def test_permission_error_names_the_permission(httpserver):
    httpserver.expect_request(_LIST, method="POST").respond_with_json(
        {"message": "Resource not accessible by integration"}, status=403
    )
    with pytest.raises(GitHubError, match=r"POST .* HTTP 403: Resource not accessible.*pull-requests: write"):
        _client(httpserver).create_issue_comment(REPO, PR, "x")


def test_no_server_raises_without_token():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = GitHubClient(f"http://127.0.0.1:{port}", TOKEN, timeout=2, sleep=lambda s: None)

    with pytest.raises(GitHubError) as info:
        client.list_issue_comments(REPO, PR)

    assert info.value.status is None and TOKEN not in str(info.value)


def test_next_link_to_another_host_is_refused(httpserver):
    headers = {"Link": '<https://evil.example/steal?page=2>; rel="next"'}
    httpserver.expect_request(_LIST).respond_with_json([], headers=headers)

    with pytest.raises(GitHubError, match="another host: evil.example"):
        _client(httpserver).list_issue_comments(REPO, PR)


def test_long_body_is_truncated_at_a_line_boundary(fake):
    body = "\n".join(f"| row {i:06d} | {'x' * 40} |" for i in range(3000))  # ~ 150k characters
    result = upsert_comment(_client(fake.server), REPO, PR, body)

    stored = fake.comments[result["comment_id"]]["body"]
    lines = stored.splitlines()
    assert len(stored.encode("utf-8")) <= COMMENT_TRUNCATE_AT
    assert lines[0] == marker("default") and lines[-1] == TRUNCATED_NOTE
    assert all(line.startswith("| row ") and line.endswith(" |") for line in lines[1:-2])


def test_empty_token_and_bad_repo_are_gate_errors(fake):
    with pytest.raises(GateError, match="token is empty"):
        GitHubClient(fake.server.url_for("/"), "")
    with pytest.raises(GateError, match="owner/name"):
        _client(fake.server).list_issue_comments("not-a-repo", PR)


@pytest.mark.parametrize("key", ["default", "model A", "x -->", "a--!>b", "<!-- y", "100%"])
def test_marker_cannot_close_the_html_comment(key):
    tag = marker(key)
    assert tag.startswith(MARKER_PREFIX) and tag.endswith(" -->")
    inner = tag[len("<!--") : -len("-->")]
    assert ">" not in inner and "<" not in inner


def test_marker_keys_stay_distinct():
    assert len({marker("model A"), marker("model_A"), marker("model%20A")}) == 3
    assert marker("resnet50") == "<!-- accuracy-gate:resnet50 -->"
    with pytest.raises(GateError):
        marker("  ")


# --- retries and rate limits (time injected, never slept) -----------------------------------------


def test_server_errors_then_success_are_retried_with_backoff(fake):
    fake.add("earlier")
    fake.script("GET", "/comments$", 500, 500)
    sleeps = []

    comments = _client(fake.server, sleep=sleeps.append).list_issue_comments(REPO, PR)

    assert [c["body"] for c in comments] == ["earlier"]
    assert [c.status for c in fake.calls] == [500, 500, 200] and sleeps == [1.0, 2.0]


def test_429_waits_for_retry_after(fake):
    fake.script("GET", "/comments$", (429, {"Retry-After": "30"}))
    sleeps = []

    assert _client(fake.server, sleep=sleeps.append).list_issue_comments(REPO, PR) == []
    assert sleeps == [30.0] and [c.status for c in fake.calls] == [429, 200]


def test_retry_after_as_an_http_date_is_counted_from_the_clock(fake):
    fake.script("GET", "/comments$", (429, {"Retry-After": "Tue, 14 Nov 2023 22:16:25 GMT"}))  # NOW + 185 s
    sleeps = []

    _client(fake.server, sleep=sleeps.append).list_issue_comments(REPO, PR)

    assert sleeps == [185.0]


def test_exhausted_rate_limit_waits_until_reset_on_the_injected_clock(fake):
    headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 90), "x-ratelimit-limit": "1000"}
    fake.script("POST", "/comments$", (403, headers, "API rate limit exceeded"))
    sleeps = []

    result = upsert_comment(_client(fake.server, sleep=sleeps.append), REPO, PR, "report")

    assert result["action"] == "created" and sleeps == [91.0]
    assert [c.status for c in fake.calls_to("POST")] == [403, 201]  # a rate-limited POST was not processed


def test_secondary_rate_limit_without_headers_waits_a_minute_then_doubles(fake):
    fake.script("GET", "/comments$", *[(403, None, "You have exceeded a secondary rate limit")] * 2)
    sleeps = []

    _client(fake.server, sleep=sleeps.append).list_issue_comments(REPO, PR)

    assert sleeps == [60.0, 120.0]


def test_a_wait_beyond_max_wait_gives_up_at_once(fake):
    fake.script("GET", "/comments$", (429, {"Retry-After": "3600"}))
    sleeps = []

    with pytest.raises(GitHubError) as info:
        _client(fake.server, sleep=sleeps.append, max_wait=300).list_issue_comments(REPO, PR)

    assert info.value.status == 429 and sleeps == [] and len(fake.calls) == 1


def test_total_wait_is_capped(fake):
    fake.script("GET", "/comments$", *[(429, {"Retry-After": "200"})] * 3)
    sleeps = []

    with pytest.raises(GitHubError):
        _client(fake.server, sleep=sleeps.append, max_wait=300).list_issue_comments(REPO, PR)

    assert sleeps == [200.0]  # a second 200 s wait would pass max_wait


@pytest.mark.parametrize(
    "status, message",
    [
        (401, "Bad credentials"),
        (404, "Not Found"),
        (422, "Validation Failed"),
        (403, "Resource not accessible by integration"),
    ],
)
def test_client_errors_are_never_retried(fake, status, message):
    fake.script("GET", "/comments$", (status, {"Retry-After": "1"} if status != 403 else None, message))
    sleeps = []

    with pytest.raises(GitHubError) as info:
        _client(fake.server, sleep=sleeps.append).list_issue_comments(REPO, PR)

    assert info.value.status == status and len(fake.calls) == 1 and sleeps == []
    assert message in str(info.value) and TOKEN not in str(info.value)
    assert info.value.read_only is (status == 403)


def test_wrong_token_is_a_401_without_retry(httpserver):
    FakeGitHub(httpserver, token="ghs_other")

    with pytest.raises(GitHubError, match="HTTP 401: Bad credentials") as info:
        _client(httpserver).list_issue_comments(REPO, PR)

    assert len(httpserver.log) == 1 and not info.value.read_only


def test_connection_errors_are_retried_for_reads():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = []
    client = GitHubClient(f"http://127.0.0.1:{port}", TOKEN, timeout=2, sleep=sleeps.append)

    with pytest.raises(GitHubError, match="failed without a response"):
        client.list_issue_comments(REPO, PR)

    assert sleeps == [1.0, 2.0, 4.0]


def test_body_over_githubs_limit_is_a_422_from_the_fake(fake):
    # The fake enforces GitHub's limit, so the tests that show it is never reached mean something.
    with pytest.raises(GitHubError, match="HTTP 422: Validation Failed") as info:
        _client(fake.server).create_issue_comment(REPO, PR, "x" * (BODY_LIMIT + 1))

    assert info.value.status == 422 and len(fake.calls) == 1 and fake.comments == {}


def test_upsert_never_sends_a_body_github_would_refuse(fake):
    body = "\u00e9" * 200_000  # 2 bytes each: characters and bytes differ
    result = upsert_comment(_client(fake.server), REPO, PR, body)

    stored = fake.comments[result["comment_id"]]["body"]
    assert len(stored.encode("utf-8")) <= COMMENT_TRUNCATE_AT and stored.endswith(TRUNCATED_NOTE)
    assert all(c.status < 400 for c in fake.calls if c.path != "/user")


def test_fit_comment_body_closes_an_open_code_fence():
    body = "intro\n```\n" + "line\n" * 40000
    fitted = fit_comment_body(body, 1000)

    assert len(fitted.encode("utf-8")) <= 1000
    assert fitted.count("```") % 2 == 0 and fitted.endswith(TRUNCATED_NOTE)


# --- pull-request lookups -------------------------------------------------------------------------


def test_open_pulls_by_head_sends_owner_branch_and_state(fake):
    fake.add_pull(5, "a" * 40, branch="fix", head_owner="forker", head_repo="forker/model-zoo")
    fake.add_pull(6, "b" * 40, branch="fix", head_owner="other", head_repo="other/model-zoo")
    fake.add_pull(4, "c" * 40, branch="fix", head_owner="forker", head_repo="forker/model-zoo", state="closed")

    pulls = _client(fake.server).list_open_pulls_by_head(REPO, "forker:fix")

    assert [p["number"] for p in pulls] == [5]
    [call] = fake.calls
    assert parse_qs(call.query) == {"per_page": ["100"], "head": ["forker:fix"], "state": ["open"]}


def test_pulls_for_commit_follows_every_page(httpserver):
    fake = FakeGitHub(httpserver, max_per_page=2)
    for number in range(1, 6):
        fake.add_pull(number, "d" * 40, branch=f"b{number}")

    pulls = _client(httpserver).list_pulls_for_commit(REPO, "d" * 40)

    assert [p["number"] for p in pulls] == [1, 2, 3, 4, 5]
    assert [parse_qs(c.query).get("page", ["1"])[0] for c in fake.calls] == ["1", "2", "3"]


def test_pulls_for_commit_refuses_a_non_sha(fake):
    with pytest.raises(GateError, match="not a full commit SHA"):
        _client(fake.server).list_pulls_for_commit(REPO, "main")
    assert fake.calls == []


def test_get_pull(fake):
    fake.add_pull(12, "e" * 40)
    assert _client(fake.server).get_pull(REPO, 12)["head"]["sha"] == "e" * 40
    with pytest.raises(GitHubError, match="HTTP 404"):
        _client(fake.server).get_pull(REPO, 13)


# --- comment modes: create, skip, digest ------------------------------------------------------------


def test_create_false_skips_without_posting(fake):
    result = upsert_comment(_client(fake.server), REPO, PR, "passing", create=False)

    assert result == {"action": "skipped", "comment_id": None, "html_url": None}
    assert fake.calls_to("POST") == [] and fake.comments == {}


def test_create_false_still_updates_an_existing_comment(fake):
    client = _client(fake.server)
    first = upsert_comment(client, REPO, PR, "failing")
    again = upsert_comment(client, REPO, PR, "passing now", create=False)

    assert again["action"] == "updated" and again["comment_id"] == first["comment_id"]
    assert fake.comments[first["comment_id"]]["body"].endswith("passing now")


def test_same_digest_skips_the_patch_even_if_the_text_differs(fake):
    client = _client(fake.server)
    first = upsert_comment(client, REPO, PR, "results X, commit 1", digest="ab" * 32)
    same = upsert_comment(client, REPO, PR, "results X, commit 2", digest="ab" * 32)
    changed = upsert_comment(client, REPO, PR, "results Y, commit 3", digest="cd" * 32)

    assert (first["action"], same["action"], changed["action"]) == ("created", "unchanged", "updated")
    stored = fake.comments[first["comment_id"]]["body"].splitlines()
    assert stored[:2] == [marker("default"), digest_marker("cd" * 32)] and stored[2] == "results Y, commit 3"
    assert len(fake.calls_to("PATCH")) == 1


def test_header_size_matches_what_upsert_adds(fake):
    result = upsert_comment(_client(fake.server), REPO, PR, "body", key="model-a", digest="0f" * 32)
    stored = fake.comments[result["comment_id"]]["body"]
    assert len(stored.encode("utf-8")) == header_size("model-a", "0f" * 32) + len("body")


def test_digest_must_be_hex():
    with pytest.raises(GateError, match="not a lower-case hex string"):
        digest_marker("--> <script>")
