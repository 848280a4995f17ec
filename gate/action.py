"""The GitHub Action's glue: read ``INPUT_*``, run the gate, report (JUnit, job summary, step
outputs, one PR comment) and return the exit code (0 pass, 1 accuracy regressed, 2 could not
evaluate).

A reporting failure (summary file, comment) is logged as a warning and never changes the verdict
or the exit code.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import traceback
from collections.abc import Mapping

from gate.errors import GateError
from gate.github import actions
from gate.results import ERROR, GateResult

# Action inputs (action.yml) in the order they are documented; every one is optional except config.
INPUTS = (
    "config",
    "model",
    "inputs",
    "golden",
    "runners",
    "execution_providers",
    "graph_optimization_level",
    "atol",
    "rtol",
    "check_error_stat",
    "check_average",
    "infinities_compare_equal",
    "junit_path",
    "title",
    "github_token",
    "pr_number",
    "comment",
    "comment_key",
    "comment_author",
)
OUTPUTS = ("passed", "failed_outputs", "junit_path")


def overrides_from_inputs(environ: Mapping[str, str]) -> dict:
    """Action inputs -> the flat override keys of ``gate.config.load_config`` (same parsing as the
    CLI flags: per-output ``name:value`` entries separated by spaces, commas or new lines).

    Raises:
        GateError: a value that cannot be parsed, naming the input.
    """
    from gate.config import parse_per_output

    def get(name):
        return actions.read_input(name, environ)

    overrides = {key: get(key) for key in ("model", "inputs", "golden")}
    for key in ("runners", "execution_providers"):
        value = get(key)
        overrides[key] = value.replace(",", " ").split() if value else None
    for key in ("atol", "rtol"):
        value = get(key)
        overrides[key] = parse_per_output(value, float, key) if value else None
    value = get("check_error_stat")
    overrides["check_error_stat"] = parse_per_output(value, str, "check_error_stat") if value else None
    for key in ("check_average", "infinities_compare_equal"):
        value = get(key)
        overrides[key] = actions.parse_bool(key, value) if value else None
    overrides["graph_optimization_level"] = get("graph_optimization_level")
    overrides["title"] = get("title")
    overrides["junit"] = get("junit_path")
    return overrides


def _run_gate(environ) -> tuple[GateResult, object]:
    from gate.config import load_config
    from gate.job import check

    config = actions.read_input("config", environ)
    if not config:
        raise GateError("Input 'config' is required: the path of gate.toml in the repository.")
    cfg = load_config(config, overrides_from_inputs(environ))
    return check(cfg), cfg


def _comment(result: GateResult, markdown: str, environ) -> None:
    from gate.github.comments import GitHubClient, upsert_comment
    from gate.github.event import pull_request_number

    enabled = actions.parse_bool("comment", actions.read_input("comment", environ) or "true")
    token = actions.read_input("github_token", environ)
    if not enabled:
        return
    number = pull_request_number(environ, actions.read_input("pr_number", environ))
    if number is None:
        print("No pull request for this event; skipping the PR comment.")
        return
    if not token:
        actions.warning("No github_token given; skipping the PR comment.")
        return
    repo = environ.get("GITHUB_REPOSITORY", "")
    key = actions.read_input("comment_key", environ) or (
        f"{environ.get('GITHUB_WORKFLOW', 'workflow')}/{actions.read_input('config', environ) or 'default'}"
    )
    client = GitHubClient(environ.get("GITHUB_API_URL", "https://api.github.com"), token)
    outcome = upsert_comment(
        client, repo, number, markdown, key=key, author=actions.read_input("comment_author", environ)
    )
    print(f"PR comment {outcome['action']}: {outcome.get('html_url') or outcome.get('comment_id')}")


def _workspace_relative(path) -> str:
    """A path the workflow's later steps can use: relative to the workspace (the container's working
    directory, mounted from the host) when it lies inside it."""
    path = os.path.abspath(path)
    cwd = os.getcwd()
    return os.path.relpath(path, cwd) if path.startswith(cwd + os.sep) else path


def _chown_to_workspace_owner(path, environ) -> None:
    """Gives a file we wrote to the workspace's owner: the container runs as root, and root-owned files
    break the next ``actions/checkout`` on persistent self-hosted runners (actions/runner#434)."""
    workspace = environ.get("GITHUB_WORKSPACE") or os.getcwd()
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    try:
        owner = os.stat(workspace)
        if os.path.abspath(path).startswith(os.path.abspath(workspace) + os.sep):
            for folder in _created_parents(path, workspace):
                os.chown(folder, owner.st_uid, owner.st_gid)
            os.chown(path, owner.st_uid, owner.st_gid)
    except OSError as err:
        actions.warning(f"Could not hand {path} to the workspace owner: {err}")


def _created_parents(path, workspace):
    parent = os.path.dirname(os.path.abspath(path))
    workspace = os.path.abspath(workspace)
    while parent.startswith(workspace + os.sep):
        yield parent
        parent = os.path.dirname(parent)


def main(environ: Mapping[str, str] | None = None) -> int:
    """Runs the action; returns the exit code. An unexpected exception is exit 2 (could not
    evaluate), never 1, which means that accuracy regressed."""
    environ = os.environ if environ is None else environ
    try:
        return _main(environ)
    except Exception as err:  # an internal error must not read as "accuracy regressed"
        traceback.print_exc()
        actions.error(f"could not evaluate: internal error {type(err).__name__}: {err}", title="accuracy-gate")
        return 2


def _main(environ: Mapping[str, str]) -> int:
    verbose = environ.get("RUNNER_DEBUG") == "1"
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s: %(message)s")
    from gate.report import render_markdown, render_text, write_junit

    token = actions.read_input("github_token", environ)
    if token:
        actions.add_mask(token)
    junit_path = actions.read_input("junit_path", environ) or "accuracy-gate-junit.xml"
    try:
        with actions.group("Accuracy gate"):
            result, cfg = _run_gate(environ)
        junit_path = str(cfg.junit)
    except Exception as err:  # GateError: a user mistake; anything else: our bug. Both still get reported.
        if verbose or not isinstance(err, GateError):
            traceback.print_exc()
        message = str(err) if isinstance(err, GateError) else f"internal error {type(err).__name__}: {err}"
        model = actions.read_input("model", environ) or actions.read_input("config", environ) or "model"
        result = GateResult(model=os.path.basename(model), status=ERROR, message=message)

    print(render_text(result))
    junit_path = _workspace_relative(write_junit(result, junit_path))
    _chown_to_workspace_owner(junit_path, environ)
    run_url = None
    if environ.get("GITHUB_RUN_ID"):
        server = environ.get("GITHUB_SERVER_URL", "https://github.com")
        run_url = f"{server}/{environ.get('GITHUB_REPOSITORY', '')}/actions/runs/{environ['GITHUB_RUN_ID']}"
    from gate.github.event import head_sha

    try:
        commit = head_sha(environ)
    except GateError as err:
        actions.warning(f"Could not read the commit from the event: {err}")
        commit = None
    markdown = render_markdown(result, run_url=run_url, commit=commit)
    for step, call in (
        ("job summary", lambda: actions.append_step_summary(markdown, environ)),
        (
            "step outputs",
            lambda: actions.set_outputs(
                {
                    "passed": "true" if result.status == "passed" else "false",
                    "failed_outputs": json.dumps(result.failed_outputs),
                    "junit_path": junit_path,
                },
                environ,
            ),
        ),
        ("PR comment", lambda: _comment(result, markdown, environ)),
    ):
        try:
            call()
        except Exception as err:  # a reporting failure never changes the verdict
            if verbose:
                traceback.print_exc()
            actions.warning(f"Could not write the {step}: {err}")

    final = {"passed": actions.notice, "regressed": actions.error, "error": actions.error}[result.status]
    label = {"passed": "passed", "regressed": "accuracy regressed", "error": "could not evaluate"}[result.status]
    final(f"{label}: {result.message}", title="accuracy-gate")
    sys.stdout.flush()
    return result.exit_code
