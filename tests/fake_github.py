"""A fake of GitHub's REST issue-comments API for tests, served by pytest-httpserver on 127.0.0.1.

Shared by ``test_github_comments.py`` (the REST client on its own) and ``test_action.py`` (the whole
action end to end). Every request the server receives is kept in ``server.log`` (pytest-httpserver
reads the body before dispatching), and :func:`recorded_calls` turns that log into
``Call(method, path, query, body, status)`` tuples, so tests can count calls of any kind, including
requests to routes the fake does not serve.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any, NamedTuple

from werkzeug import Request, Response

from gate.github.comments import DEFAULT_AUTHOR

TOKEN = "ghs_SECRETtoken0123456789abcdefXYZ"
REPO = "octo-org/model-zoo"
PR = 42

LIST_PATH = re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<number>\d+)/comments$")
ONE_PATH = re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/comments/(?P<id>\d+)$")

_EPOCH = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


class Call(NamedTuple):
    """One request the server received, and the status it answered."""

    method: str
    path: str
    query: str
    body: Any  # the parsed JSON body, the raw text when it is not JSON, None when empty
    status: int


def json_response(payload, status=200, headers=None) -> Response:
    return Response(json.dumps(payload), status=status, headers=headers, content_type="application/json")


def _body(request: Request) -> Any:
    data = request.get_data(as_text=True)
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data


def recorded_calls(server) -> list[Call]:
    """Every request ``server`` (a pytest-httpserver ``HTTPServer``) received since it was last cleared."""
    return [
        Call(r.method, r.path, r.query_string.decode(), _body(r), response.status_code) for r, response in server.log
    ]


class FakeGitHub:
    """Just enough of GitHub's REST issue-comments API: list (Link pagination, per_page capped at
    ``max_per_page``), create, update, and ``/user`` (403 like a GITHUB_TOKEN, unless ``login`` is set).

    Comments carry ``id``, ``number``, ``body``, ``user.login``, ``html_url``, ``created_at`` and
    ``updated_at``; the timestamps come from a fake clock that advances one second per write, so a
    test can tell whether a comment was written again.
    """

    def __init__(self, server, login=None, max_per_page=100, token=TOKEN):
        self.server = server
        self.login = login  # None: the token is a GITHUB_TOKEN
        self.max_per_page = max_per_page
        self.token = token
        self.comments: dict[int, dict] = {}
        self.next_id = 1000
        self._clock = 0
        server.expect_request(LIST_PATH, method="GET").respond_with_handler(self.list)
        server.expect_request(LIST_PATH, method="POST").respond_with_handler(self.create)
        server.expect_request(ONE_PATH, method="PATCH").respond_with_handler(self.update)
        server.expect_request("/user", method="GET").respond_with_handler(self.user)

    @property
    def author(self) -> str:
        """The login that comments made with this fake's token get."""
        return self.login or DEFAULT_AUTHOR

    def _now(self) -> str:
        self._clock += 1
        return (_EPOCH + dt.timedelta(seconds=self._clock)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def add(self, body, author=DEFAULT_AUTHOR, number=PR, repo=REPO):
        """Store a comment as if ``author`` had written it on issue ``number``; returns it."""
        self.next_id += 1
        comment_id = self.next_id
        now = self._now()
        self.comments[comment_id] = {
            "id": comment_id,
            "number": number,
            "body": body,
            "user": {"login": author},
            "html_url": f"https://github.com/{repo}/pull/{number}#issuecomment-{comment_id}",
            "created_at": now,
            "updated_at": now,
        }
        return self.comments[comment_id]

    def on_pr(self, number=PR):
        """The comments on issue ``number``, oldest first."""
        return [c for c in sorted(self.comments.values(), key=lambda c: c["id"]) if c["number"] == number]

    def requests(self, method, path_re=""):
        """The werkzeug requests of ``method`` whose path matches ``path_re``."""
        return [r for r, _ in self.server.log if r.method == method and re.search(path_re, r.path)]

    @property
    def calls(self) -> list[Call]:
        """Every request the server received (see :func:`recorded_calls`)."""
        return recorded_calls(self.server)

    def calls_to(self, method, path_re="") -> list[Call]:
        return [c for c in self.calls if c.method == method and re.search(path_re, c.path)]

    def _denied(self, request: Request):
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return json_response({"message": "Bad credentials"}, 401)
        return None

    def list(self, request: Request):
        if denied := self._denied(request):
            return denied
        number = int(LIST_PATH.match(request.path)["number"])
        per_page = min(int(request.args.get("per_page", 30)), self.max_per_page)
        page = int(request.args.get("page", 1))
        items = self.on_pr(number)
        last = max(1, -(-len(items) // per_page))
        links = []
        if page < last:
            links.append(f'<{request.base_url}?per_page={per_page}&page={page + 1}>; rel="next"')
            links.append(f'<{request.base_url}?per_page={per_page}&page={last}>; rel="last"')
        headers = {"Link": ", ".join(links)} if links else None
        return json_response(items[(page - 1) * per_page : page * per_page], headers=headers)

    def create(self, request: Request):
        if denied := self._denied(request):
            return denied
        match = LIST_PATH.match(request.path)
        comment = self.add(request.get_json()["body"], self.author, int(match["number"]), match["repo"])
        return json_response(comment, 201)

    def update(self, request: Request):
        if denied := self._denied(request):
            return denied
        comment = self.comments.get(int(ONE_PATH.match(request.path)["id"]))
        if comment is None:
            return json_response({"message": "Not Found"}, 404)
        if comment["user"]["login"] != self.author:
            return json_response({"message": "Must have admin rights to Repository."}, 403)
        comment["body"] = request.get_json()["body"]
        comment["updated_at"] = self._now()
        return json_response(comment)

    def user(self, request: Request):
        if denied := self._denied(request):
            return denied
        if self.login is None:
            return json_response({"message": "Resource not accessible by integration"}, 403)
        return json_response({"login": self.login})


def parse_github_output(text: str) -> dict[str, str]:
    """Parse a GITHUB_OUTPUT file the way the runner does (``name=value`` and ``name<<DELIM`` forms)."""
    outputs, lines = {}, iter(text.split("\n"))
    for line in lines:
        if not line:
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            for value_line in lines:
                if value_line == delimiter:
                    break
                body.append(value_line)
            else:
                raise AssertionError(f"delimiter {delimiter} not closed")
            outputs[name] = "\n".join(body)
        else:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs
