"""A misbehaving GitHub API on 127.0.0.1 and a malformed token (issue 14): every request and the whole
GitHub step end in bounded time, pagination ends, and no piece of the token is ever printed."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest
from werkzeug import Response

from gate.github import actions
from gate.github.comments import MAX_PAGES, GitHubClient, GitHubError

from fake_github import TOKEN, json_response


class TrickleServer:
    """A real HTTP server on 127.0.0.1 that answers every request with a status line and then one
    byte every ``interval`` seconds, for ``duration`` seconds at most."""

    def __init__(self, interval: float = 0.3, duration: float = 20.0, headers_first: bool = True):
        self.interval, self.duration, self.headers_first = interval, duration, headers_first
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
        end = time.monotonic() + self.duration
        try:
            conn.recv(65536)
            if self.headers_first:
                conn.sendall(head)
                payload = b"[" + b" " * 99999
            else:
                payload = head
            for byte in payload:
                if self.stop.is_set() or time.monotonic() > end:
                    break
                conn.sendall(bytes([byte]))
                time.sleep(self.interval)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


@pytest.fixture
def trickle():
    servers = []

    def make(**kwargs) -> TrickleServer:
        servers.append(TrickleServer(**kwargs))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


@pytest.mark.parametrize("headers_first", [True, False], ids=["slow-body", "slow-headers"])
def test_a_request_to_a_trickling_server_ends_at_its_deadline(trickle, headers_first):
    server = trickle(headers_first=headers_first)
    client = GitHubClient(server.url, TOKEN, timeout=10.0, deadline=1.5, retries=0)
    started = time.monotonic()
    with pytest.raises(GitHubError, match=r"did not complete within its 1.5 s limit") as err:
        client.get_pull("octo/repo", 1)
    took = time.monotonic() - started
    assert 1.4 < took < 4.0, took  # per read, the 10 s timeout never fires: 0.3 s between bytes
    assert err.value.status is None


def test_the_whole_step_ends_at_the_step_deadline(trickle):
    server = trickle()
    client = GitHubClient(server.url, TOKEN, timeout=10.0, deadline=30.0, step_deadline=2.0, retries=3)
    started = time.monotonic()
    with pytest.raises(GitHubError, match=r"within the GitHub step's"):
        client.list_issue_comments("octo/repo", 1)
    with pytest.raises(GitHubError, match=r"not sent: the GitHub step ran past its 2 s limit"):
        client.get_pull("octo/repo", 1)
    assert time.monotonic() - started < 5.0


def test_pagination_whose_every_page_links_to_a_new_url_ends(httpserver):
    pages = []

    def endless(request):
        page = int(request.args.get("page", 1))
        pages.append(page)
        link = f'<{request.base_url}?page={page + 1}>; rel="next"'
        return json_response([{"id": page, "body": "x"}], headers={"Link": link})

    httpserver.expect_request(re.compile(r".*/issues/1/comments$")).respond_with_handler(endless)
    client = GitHubClient(httpserver.url_for("/"), TOKEN, sleep=lambda s: None)
    with pytest.raises(GitHubError, match=rf"has more than {MAX_PAGES} pages"):
        client.list_issue_comments("octo/repo", 1)
    assert len(pages) == MAX_PAGES == 100


NEWLINE_TOKEN = "ghp_firstHALFofAtoken\nsecondHALFofAtoken"


def test_a_token_with_a_line_break_is_masked_line_by_line(capsys):
    actions.add_mask(NEWLINE_TOKEN)
    lines = capsys.readouterr().out.splitlines()
    assert "::add-mask::ghp_firstHALFofAtoken" in lines
    assert "::add-mask::secondHALFofAtoken" in lines


def test_a_token_with_a_line_break_never_reaches_an_error_message(httpserver):
    httpserver.expect_request(re.compile(".*")).respond_with_response(Response("{}", status=500))
    client = GitHubClient(httpserver.url_for("/"), NEWLINE_TOKEN, retries=0)
    with pytest.raises(GitHubError) as err:
        client.get_pull("octo/repo", 1)
    message = str(err.value)
    assert "failed without a response" in message  # requests refuses the header, quoting it
    assert "firstHALF" not in message and "secondHALF" not in message
    assert "firstHALF" not in repr(client) and "secondHALF" not in repr(client)


def test_redact_replaces_every_line_of_the_secret():
    text = "a ghp_firstHALFofAtoken b secondHALFofAtoken c 'Bearer ghp_firstHALFofAtoken\\nsecondHALFofAtoken'"
    assert actions.redact(text, NEWLINE_TOKEN) == "a *** b *** c 'Bearer ***\\n***'"
    assert actions.redact("no secret", None) == "no secret"


def test_the_action_settings_never_show_the_token():
    from gate.action import read_settings

    settings, _ = read_settings({"INPUT_GITHUB_TOKEN": TOKEN, "INPUT_MODE": "comment"})
    assert settings.token == TOKEN
    assert TOKEN not in repr(settings)


def test_retry_waits_stop_at_the_step_deadline(httpserver):
    httpserver.expect_request(re.compile(".*")).respond_with_response(Response("{}", status=503))
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # really waits: the step's clock is the real one
        waits.append(seconds)
        time.sleep(seconds)

    client = GitHubClient(httpserver.url_for("/"), TOKEN, retries=3, sleep=sleep, step_deadline=1.8)
    with pytest.raises(GitHubError, match="HTTP 503"):
        client.get_pull("octo/repo", 1)
    assert waits == [1.0]  # then 2 s more would pass the step's 1.8 s: the 503 is the answer (main: 1, 2, 4)
