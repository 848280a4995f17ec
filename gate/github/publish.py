"""Publishing a result from the action: annotations, the final verdict line, the job summary, the
step outputs' JSON and the one PR comment (finding its pull request, rendering it into the comment
budget, create or update per ``comment_mode``). ``settings`` is the action's ``gate.action.Settings``."""

from __future__ import annotations

import json
import re

from gate.errors import GateError
from gate.github import actions
from gate.paths import relative_paths, workspace_relative, workspace_roots
from gate.report.text import average_note
from gate.results import ERROR, PASSED, REGRESSED, GateResult

OUTPUT_JSON_LIMIT = 64 * 1024
"""Bytes for each JSON step output; GitHub allows 1 MB of outputs per job."""
FORK_NOTICE = (
    "Pull request from a fork: its token is read-only, so the PR comment is skipped. The results are in "
    "the job summary, the JUnit report and the results file {report}; post the comment from a workflow_run "
    "workflow with `mode: comment` (README, 'Fork pull requests')."
)


def workflow_run_url(environ) -> str | None:
    if not environ.get("GITHUB_RUN_ID"):
        return None
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    return f"{server}/{environ.get('GITHUB_REPOSITORY', '')}/actions/runs/{environ['GITHUB_RUN_ID']}"


def github_client(environ, token):
    from gate.github.client import GitHubClient

    api_url = environ.get("GITHUB_API_URL") or "https://api.github.com"
    if not re.match(r"https?://", api_url):
        raise GateError(f"GITHUB_API_URL {api_url!r} is not an http(s) URL.")
    return GitHubClient(api_url, token)


def json_list(names: list[str], limit: int = OUTPUT_JSON_LIMIT) -> str:
    """A JSON array of ``names`` of at most ``limit`` bytes (the first names that fit)."""
    text = json.dumps(names, ensure_ascii=False)
    while len(text.encode("utf-8")) > limit and names:
        names = names[: len(names) // 2]
        text = json.dumps(names, ensure_ascii=False)
    return text


def annotate_outputs(result: GateResult, environ=None) -> None:
    """One ``::error`` per output that failed or could not be compared, and one ``::warning`` per
    output that passed with a caveat (it passes on average only, or its dtype differs from the golden
    one); at most :data:`ANNOTATION_LIMIT` lines of each kind per step counting the final verdict
    line, so the Actions UI (10 of each per step) drops none: past that, one line says how many more.
    Paths in the messages are workspace-relative (``gate.paths.relative_paths``; ``environ`` gives
    ``GITHUB_WORKSPACE``, default ``os.environ``), as in the job summary.
    """
    roots = workspace_roots(environ)
    failed = [
        (f"accuracy-gate: {row.output}", relative_paths(row.message(), roots)) for row in result.rows if not row.passed
    ]
    caveats = [
        (f"accuracy-gate: {row.output}", relative_paths(row.message() + average_note(row), roots))
        for row in result.rows
        if row.passed and ((row.averaged and row.failed_iterations) or row.dtypes_differ)
    ]
    room = actions.ANNOTATION_LIMIT - (0 if result.status == PASSED else 1)
    actions.annotate_capped(
        "error", failed, room, "{count} more outputs failed; every output is in the job summary and the JUnit report."
    )
    actions.annotate_capped(
        "warning",
        caveats,
        actions.ANNOTATION_LIMIT - 1,  # one left for a reporting warning
        "{count} more outputs passed with a caveat; every output is in the job summary and the JUnit report.",
    )


def final_line(result: GateResult, environ=None) -> None:
    """The verdict annotation, its paths workspace-relative as the job summary's (``annotate_outputs``)."""
    final = {PASSED: actions.notice, REGRESSED: actions.error, ERROR: actions.error}[result.status]
    label = {PASSED: "passed", REGRESSED: "accuracy regressed", ERROR: "could not evaluate"}[result.status]
    label = "ran, nothing compared" if result.nothing_compared else label
    final(f"{label}: {relative_paths(result.message, workspace_roots(environ))}", title="accuracy-gate")


def comment_outcome(outcome: dict, number: int) -> str:
    where = outcome.get("html_url") or outcome.get("comment_id")
    return {
        "created": f"PR comment created: {where}",
        "updated": f"PR comment updated: {where}",
        "unchanged": f"PR comment unchanged: {where}",
        "skipped": f"PR comment skipped: comment_mode on-failure and pull request #{number} has none to update.",
    }[outcome["action"]]


def post_comment(client, environ, settings, number: int, result: GateResult, key, run_url, commit) -> dict:
    """Render ``result`` into the comment budget and create or update the comment per ``comment_mode``."""
    from gate.github.comments import COMMENT_TRUNCATE_AT, LONGEST_LOGIN, header_size, upsert_comment
    from gate.report.markdown import render_markdown
    from gate.results_file import results_digest

    digest = results_digest(result) if settings.comment_mode == "on-change" else None
    budget = COMMENT_TRUNCATE_AT - header_size(key, digest, LONGEST_LOGIN)  # room for an App's author line
    body = render_markdown(result, run_url, commit, budget=budget)
    outcome = upsert_comment(
        client,
        environ.get("GITHUB_REPOSITORY", ""),
        number,
        body,
        key=key,
        author=settings.comment_author,
        create=settings.comment_mode != "on-failure" or result.status != PASSED,
        digest=digest,
    )
    if outcome.get("warning"):  # the comment's author is unknown: the next run would post another
        actions.warning(outcome["warning"], title="accuracy-gate")
    return outcome


def read_only_notice(err, number, report) -> None:
    actions.notice(
        f"The token may not comment on pull request #{number} (GitHub: HTTP 403 Resource not accessible by "
        "integration): a fork's or Dependabot's read-only token, or `pull-requests: write` is missing. "
        f"The PR comment is skipped; the results are in the job summary, the JUnit report and {report}.",
        title="accuracy-gate",
    )


def find_comment_target(environ, settings, commit, report_path):
    """``(client, ref, commit)`` for the comment: ref None when there is none to post (and why was said)."""
    from gate.github.event import find_pull_request, is_fork_pull_request

    if settings.comment_mode == "off":
        return None, None, commit
    if is_fork_pull_request(environ):
        actions.notice(FORK_NOTICE.format(report=workspace_relative(report_path, environ)), title="accuracy-gate")
        return None, None, commit
    client = github_client(environ, settings.token) if settings.token else None
    ref, reason = find_pull_request(environ, client, settings.pr_number)
    if ref is None:
        print(f"{reason} Skipping the PR comment.")
        return client, None, commit
    if client is None:
        actions.warning("No github_token given; skipping the PR comment.")
        return None, None, ref.head_sha or commit
    print(f"Pull request #{ref.number}, found from {ref.found_by}.")
    return client, ref, ref.head_sha or commit


def write_summary(result, run_url, commit, environ, warn) -> None:
    from gate.report.markdown import render_markdown

    try:
        room = actions.step_summary_room(environ)
        if environ.get("GITHUB_STEP_SUMMARY") and room > 1:
            markdown = render_markdown(
                result, run_url, commit, budget=room - 1, more_at="the JUnit report and the results file"
            )
            actions.append_step_summary(markdown, environ)
    except Exception as err:
        warn("job summary", err)
