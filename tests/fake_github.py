"""A fake of GitHub's REST API for tests (issue comments, pull-request lookups, error answers), served
by pytest-httpserver on 127.0.0.1.

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

LIST_PATH = re.compile(r"^(?:/api/v3)?/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<number>\d+)/comments$")
ONE_PATH = re.compile(r"^(?:/api/v3)?/repos/(?P<repo>[^/]+/[^/]+)/issues/comments/(?P<id>\d+)$")
PULLS_PATH = re.compile(r"^(?:/api/v3)?/repos/(?P<repo>[^/]+/[^/]+)/pulls$")
PULL_PATH = re.compile(r"^(?:/api/v3)?/repos/(?P<repo>[^/]+/[^/]+)/pulls/(?P<number>\d+)$")
COMMIT_PULLS_PATH = re.compile(r"^(?:/api/v3)?/repos/(?P<repo>[^/]+/[^/]+)/commits/(?P<sha>[0-9a-fA-F]+)/pulls$")
BODY_LIMIT = 65536
"""GitHub's comment body limit in characters; the fake answers 422 above it, as GitHub does."""
READ_ONLY = "Resource not accessible by integration"

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
    """Just enough of GitHub's REST API: issue comments (list with Link pagination and per_page capped at
    ``max_per_page``, create, update), ``/user`` (403 like a GITHUB_TOKEN, unless ``login`` is set),
    pull requests (``GET /pulls?head=owner:branch&state=...``, ``GET /pulls/{n}``,
    ``GET /commits/{sha}/pulls``), and GitHub's error answers:

    - 401 "Bad credentials" for any other token;
    - 403 "Resource not accessible by integration" on writes when ``read_only`` (a fork's token);
    - 422 "Body is too long" for a comment body over 65,536 characters;
    - scripted answers (:meth:`script`): e.g. 500, 500, then the real answer, or a 429 with ``Retry-After``.

    Every route is also served under GitHub Enterprise Server's ``/api/v3`` prefix. Comments carry
    ``id``, ``number``, ``body``, ``user.login`` and ``user.type``, ``performed_via_github_app`` (the
    App a comment was made through: ``app``'s for an App token, GitHub Actions' for a GITHUB_TOKEN,
    none for a PAT's or one stored by :meth:`add` without ``app``), ``html_url``, ``created_at`` and
    ``updated_at``; the timestamps come from a fake clock that advances one second per write, so a
    test can tell whether a comment was written again.
    """

    def __init__(self, server, login=None, max_per_page=100, token=TOKEN, read_only=False, app=None):
        self.server = server
        self.login = login  # None: an installation token (GITHUB_TOKEN, or a GitHub App's with ``app``)
        self.app = app  # a GitHub App's slug: comments are by "<app>[bot]", made through that App
        self.max_per_page = max_per_page
        self.token = token
        self.read_only = read_only
        self.comments: dict[int, dict] = {}
        self.pulls: dict[int, dict] = {}
        self.pull_commits: dict[int, list[str]] = {}
        self.next_id = 1000
        self._clock = 0
        self._scripts: list[tuple[str, re.Pattern, list[Response]]] = []
        server.expect_request(LIST_PATH, method="GET").respond_with_handler(self.list)
        server.expect_request(LIST_PATH, method="POST").respond_with_handler(self.create)
        server.expect_request(ONE_PATH, method="PATCH").respond_with_handler(self.update)
        server.expect_request(ONE_PATH, method="DELETE").respond_with_handler(self.delete)
        server.expect_request(re.compile(r"^(?:/api/v3)?/user$"), method="GET").respond_with_handler(self.user)
        server.expect_request(PULLS_PATH, method="GET").respond_with_handler(self.list_pulls)
        server.expect_request(PULL_PATH, method="GET").respond_with_handler(self.get_pull)
        server.expect_request(COMMIT_PULLS_PATH, method="GET").respond_with_handler(self.commit_pulls)

    @property
    def author(self) -> str:
        """The login that comments made with this fake's token get."""
        return self.login or (f"{self.app}[bot]" if self.app else DEFAULT_AUTHOR)

    @property
    def via_app(self) -> str | None:
        """The App that comments made with this fake's token are made through (GitHub's
        ``performed_via_github_app``): the App's, or GitHub Actions' for a GITHUB_TOKEN; None for a PAT."""
        return None if self.login else (self.app or "github-actions")

    def _now(self) -> str:
        self._clock += 1
        return (_EPOCH + dt.timedelta(seconds=self._clock)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def add(self, body, author=DEFAULT_AUTHOR, number=PR, repo=REPO, app=None):
        """Store a comment as if ``author`` had written it on issue ``number`` (through GitHub App
        ``app``, a slug, when given); returns it."""
        self.next_id += 1
        comment_id = self.next_id
        now = self._now()
        via = None
        if app:
            via = {
                "id": 900000 + len(app),
                "slug": app,
                "name": app.replace("-", " ").title(),
                "owner": {"login": "octo-org"},
            }
        self.comments[comment_id] = {
            "id": comment_id,
            "number": number,
            "body": body,
            "user": {"login": author, "type": "Bot" if author.endswith("[bot]") else "User"},
            "performed_via_github_app": via,
            "html_url": f"https://github.com/{repo}/pull/{number}#issuecomment-{comment_id}",
            "created_at": now,
            "updated_at": now,
        }
        return self.comments[comment_id]

    def add_pull(
        self, number, head_sha, branch="feature", head_owner=None, state="open", repo=REPO, head_repo=None, commits=()
    ):
        """Store pull request ``number`` of ``repo`` whose head is ``head_owner:branch`` at ``head_sha``
        (``head_repo`` "owner/name", default ``repo``: a fork when it differs). ``commits`` are earlier
        commits it contains: ``GET /commits/{sha}/pulls`` lists it for those too. Returns it."""
        head_repo = head_repo or repo
        head_owner = head_owner or head_repo.split("/")[0]
        self.pulls[number] = {
            "number": number,
            "state": state,
            "html_url": f"https://github.com/{repo}/pull/{number}",
            "head": {
                "sha": head_sha,
                "ref": branch,
                "label": f"{head_owner}:{branch}",
                "user": {"login": head_owner},
                "repo": {"full_name": head_repo},
            },
            "base": {"ref": "main", "repo": {"full_name": repo}},
        }
        self.pull_commits[number] = [head_sha, *commits]
        return self.pulls[number]

    def script(self, method, path_re, *answers):
        """Answer the next requests of ``method`` whose path matches ``path_re`` with ``answers`` in turn
        (each a status code, or ``(status, headers)``, or ``(status, headers, message)``), then as usual."""
        responses = []
        for answer in answers:
            status, headers, message = (
                (tuple(answer) + (None, None))[:3]
                if isinstance(answer, tuple)
                else (
                    answer,
                    None,
                    None,
                )
            )
            default = {401: "Bad credentials", 403: "Forbidden", 404: "Not Found", 422: "Validation Failed"}
            message = message or default.get(status, "API rate limit exceeded" if status == 429 else "Server Error")
            responses.append(json_response({"message": message}, status, headers))
        self._scripts.append((method, re.compile(path_re), responses))

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

    def _denied(self, request: Request, write=False):
        for method, pattern, responses in self._scripts:
            if responses and method == request.method and pattern.search(request.path):
                return responses.pop(0)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return json_response({"message": "Bad credentials"}, 401)
        if write and self.read_only:
            return json_response({"message": READ_ONLY, "documentation_url": "https://docs.github.com/rest"}, 403)
        return None

    def _too_long(self, request: Request):
        body = request.get_json()["body"]
        if len(body) > BODY_LIMIT:
            errors = [
                {
                    "resource": "IssueComment",
                    "code": "custom",
                    "field": "body",
                    "message": f"body is too long (maximum is {BODY_LIMIT} characters)",
                }
            ]
            return json_response({"message": "Validation Failed", "errors": errors}, 422)
        return None

    def _page(self, request: Request, items: list):
        per_page = min(int(request.args.get("per_page", 30)), self.max_per_page)
        page = int(request.args.get("page", 1))
        last = max(1, -(-len(items) // per_page))
        links = []
        query = {k: v for k, v in request.args.items() if k not in ("per_page", "page")}
        extra = "".join(f"&{k}={v}" for k, v in query.items())
        if page < last:
            links.append(f'<{request.base_url}?per_page={per_page}{extra}&page={page + 1}>; rel="next"')
            links.append(f'<{request.base_url}?per_page={per_page}{extra}&page={last}>; rel="last"')
        headers = {"Link": ", ".join(links)} if links else None
        return json_response(items[(page - 1) * per_page : page * per_page], headers=headers)

    def list(self, request: Request):
        if denied := self._denied(request):
            return denied
        return self._page(request, self.on_pr(int(LIST_PATH.match(request.path)["number"])))

    def create(self, request: Request):
        if denied := self._denied(request, write=True) or self._too_long(request):
            return denied
        match = LIST_PATH.match(request.path)
        comment = self.add(request.get_json()["body"], self.author, int(match["number"]), match["repo"], self.via_app)
        return json_response(comment, 201)

    def _own(self, request: Request, check=None):
        """``(comment, None)`` for the comment at ``request``'s path when this token may change it, else
        ``(None, the error answer)``: scripted, 401, read-only 403, ``check``'s, 404, another's 403."""
        if denied := self._denied(request, write=True) or (check(request) if check else None):
            return None, denied
        comment = self.comments.get(int(ONE_PATH.match(request.path)["id"]))
        if comment is None:
            return None, json_response({"message": "Not Found"}, 404)
        if comment["user"]["login"] != self.author:
            return None, json_response({"message": "Must have admin rights to Repository."}, 403)
        return comment, None

    def update(self, request: Request):
        comment, denied = self._own(request, self._too_long)
        if denied:
            return denied
        comment["body"] = request.get_json()["body"]
        comment["updated_at"] = self._now()
        return json_response(comment)

    def delete(self, request: Request):
        """``DELETE /repos/{repo}/issues/comments/{id}``: 204, 404 when gone, 403 for another's comment."""
        comment, denied = self._own(request)
        if denied:
            return denied
        del self.comments[comment["id"]]
        return Response(status=204)

    def user(self, request: Request):
        if denied := self._denied(request):
            return denied
        if self.login is None:
            return json_response({"message": READ_ONLY}, 403)
        return json_response({"login": self.login})

    def _repo_pulls(self, request: Request, pattern: re.Pattern) -> list[dict]:
        repo = pattern.match(request.path)["repo"]
        return [p for _, p in sorted(self.pulls.items()) if p["base"]["repo"]["full_name"] == repo]

    def list_pulls(self, request: Request):
        """``GET /pulls?head=owner:branch&state=open|closed|all`` (GitHub filters by head owner and branch)."""
        if denied := self._denied(request):
            return denied
        state = request.args.get("state", "open")
        head = request.args.get("head")
        pulls = [p for p in self._repo_pulls(request, PULLS_PATH) if state == "all" or p["state"] == state]
        if head:
            pulls = [p for p in pulls if p["head"]["label"] == head]
        return self._page(request, pulls)

    def get_pull(self, request: Request):
        if denied := self._denied(request):
            return denied
        pull = self.pulls.get(int(PULL_PATH.match(request.path)["number"]))
        return json_response(pull) if pull else json_response({"message": "Not Found"}, 404)

    def commit_pulls(self, request: Request):
        """``GET /commits/{sha}/pulls``: every pull request (any state) that contains the commit."""
        if denied := self._denied(request):
            return denied
        sha = COMMIT_PULLS_PATH.match(request.path)["sha"]
        pulls = self._repo_pulls(request, COMMIT_PULLS_PATH)
        return self._page(request, [p for p in pulls if sha in self.pull_commits[p["number"]]])


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
