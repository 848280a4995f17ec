"""``mode: comment``: the fork-safe companion for a ``workflow_run`` workflow. It runs no model: it
reads the results file(s) a pull-request run uploaded, as untrusted data, and posts or updates the
comment on that pull request (README, "Fork pull requests")."""

from __future__ import annotations

import re
import traceback
from pathlib import Path

from gate.errors import GateError
from gate.github import actions
from gate.github.publish import (
    OUTPUT_JSON_LIMIT,
    comment_outcome,
    github_client,
    json_list,
    post_comment,
    workflow_run_url,
    write_summary,
)
from gate.paths import workspace_relative
from gate.results import PASSED, REGRESSED

MAX_REPORT_FILES = 50


def report_files(path: Path) -> list[Path]:
    """The results files under ``path``: the file itself, or every ``*.json`` below a folder (as
    actions/download-artifact leaves several artifacts), sorted, at most :data:`MAX_REPORT_FILES`.

    Raises:
        GateError: no such file, an empty folder, or too many files.
    """
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise GateError(f"Input `report_path`: {path} does not exist; expected the downloaded results file or folder.")
    files = sorted(p for p in path.rglob("*.json") if p.is_file() and not p.is_symlink())
    if not files:
        raise GateError(f"Input `report_path`: the folder {path} holds no .json results file.")
    if len(files) > MAX_REPORT_FILES:
        raise GateError(
            f"Input `report_path`: the folder {path} holds {len(files)} .json files; at most {MAX_REPORT_FILES}."
        )
    return files


def trusted_run_url(environ, event) -> str | None:
    """The ``html_url`` of the run that triggered a ``workflow_run`` (its job summary has the full
    report), when it is a run of this repository on this server; else this run's URL."""
    run = event.get("workflow_run") if isinstance(event, dict) else None
    url = run.get("html_url") if isinstance(run, dict) else None
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    prefix = f"{server}/{environ.get('GITHUB_REPOSITORY')}/"
    if isinstance(url, str) and url.startswith(prefix + "actions/runs/") and re.fullmatch(r"[\w./:-]+", url):
        return url
    return workflow_run_url(environ)


def comment_mode(environ, settings, errors: list[GateError], verbose: bool) -> int:
    """``mode: comment``: post the results file(s) of another run as the PR comment; no model runs.

    The files are untrusted (a fork's workflow wrote them): they are size-capped and validated
    (``read_untrusted_report``), rendered with everything escaped, and echoed to the log with workflow
    commands stopped. The pull request and commit come from the ``workflow_run`` event (GitHub's
    data), never from the file.
    """
    from gate.github.event import find_pull_request, head_sha, load_event
    from gate.report import render_text
    from gate.report.per_key import worst_per_key
    from gate.results_file import dumps_within, read_untrusted_report, report_document

    def fail(message: str) -> int:
        actions.error(f"could not post the accuracy report: {message}", title="accuracy-gate")
        return 2

    if errors:
        return fail(str(errors[0]))
    try:
        with actions.group("Accuracy gate: read the results files"):
            reports = [read_untrusted_report(path) for path in report_files(settings.report_path)]
            for report in reports:
                with actions.stop_commands():
                    print(f"{workspace_relative(report.source, environ)}:")
                    print(render_text(report.result))
        try:
            event = load_event(environ)
        except GateError:
            event = {}
        run = event.get("workflow_run") if isinstance(event.get("workflow_run"), dict) else {}
        client = github_client(environ, settings.token)
        ref, reason = find_pull_request(environ, client, settings.pr_number)
        commit = (ref.head_sha if ref else None) or head_sha(environ)
    except GateError as err:
        if verbose:
            traceback.print_exc()
        return fail(str(err))
    run_url = trusted_run_url(environ, event)
    workflow = run.get("name") if isinstance(run.get("name"), str) else environ.get("GITHUB_WORKFLOW", "workflow")
    failures = 0
    with actions.group("Accuracy gate: PR comment"):
        if ref is None:
            print(f"{reason} Nothing to comment on.")
        else:
            print(f"Pull request #{ref.number}, found from {ref.found_by}.")
        for report in reports:
            write_summary(report.result, run_url, commit, environ, warn_only)
        # One comment per key, showing the worst of the files that share it (gate.report.per_key).
        keyed = [(settings.comment_key or r.comment_key or f"{workflow}/{r.result.model}", r.result) for r in reports]
        comments = worst_per_key(keyed)
        for key, result in comments:
            if ref is None or settings.comment_mode == "off":
                continue
            try:
                outcome = post_comment(client, environ, settings, ref.number, result, key, run_url, commit)
                print(comment_outcome(outcome, ref.number))
            except GateError as err:
                if verbose:
                    traceback.print_exc()
                failures += 1
                read_only = getattr(err, "read_only", False)
                hint = " (the workflow needs `permissions: pull-requests: write`)" if read_only else ""
                actions.error(f"Could not write the PR comment: {err}{hint}", title="accuracy-gate")
    results = [report.result for report in reports]
    documents = [report_document(report.result, commit, report.comment_key) for report in reports]
    one = documents[0] if len(documents) == 1 else None
    actions.set_outputs(
        {
            "passed": all(r.status == PASSED and not r.nothing_compared for r in results),
            "regressed": any(r.status == REGRESSED for r in results),
            "failed_outputs": json_list([name for r in results for name in r.failed_outputs]),
            "junit_path": "",
            "report_path": workspace_relative(settings.report_path, environ),
            "report_json": dumps_within(one, OUTPUT_JSON_LIMIT) if one else json_list_of(documents),
        },
        environ,
    )
    if failures:
        return fail(f"{failures} of {len(comments)} comments could not be written.")
    where = f"pull request #{ref.number}" if ref else "no pull request"
    verdicts = ", ".join(sorted({"ran, nothing compared" if r.nothing_compared else r.status for r in results}))
    actions.notice(
        f"comment mode: {len(reports)} results file(s) for {where} (reported: {verdicts}).", title="accuracy-gate"
    )
    return 0


def warn_only(step, err) -> None:
    actions.warning(f"Could not write the {step}: {err}")


def json_list_of(documents: list[dict]) -> str:
    from gate.results_file import dumps, dumps_within

    share = OUTPUT_JSON_LIMIT // max(len(documents), 1)
    return "[" + ",".join(dumps_within(d, share - 2) for d in documents) + "]" if documents else dumps([])
