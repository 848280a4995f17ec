"""The GitHub Action's glue: read and validate ``INPUT_*``, run the gate, report (JUnit, results file,
job summary, step outputs, annotations, one PR comment) and return the exit code (0 pass, 1 accuracy
regressed, 2 could not evaluate).

Three modes (input ``mode``):

- ``check`` (default): run the gate on the checked-out repository and report. With ``shard: i/n`` it
  runs one shard of the golden set (a matrix leg), writes the partial result file and reports that
  shard in its job summary only; exit 0 when the shard was evaluated, 2 when not.
- ``merge``: combine the partial result files of every shard (``partial_path``: the downloaded
  artifacts) into the verdict of the whole golden set and report it once (JUnit, results file, job
  summary, PR comment, outputs), exactly as an unsharded ``check`` would.
- ``comment``: the fork-safe companion for a ``workflow_run`` workflow. It runs no model: it reads
  the results file(s) a pull-request run uploaded, as untrusted data, and posts or updates the comment
  on that pull request (README, "Fork pull requests"). Exit 0 when done, 2 when the file is invalid
  or the comment could not be written.

``baseline`` (a results file or partial result files of the base branch) adds a delta column to the
reports; ``fail_on: regression`` fails only on a regression against it (``gate.baseline``).

A reporting failure in ``check`` mode (summary file, comment) is logged as a warning and never
changes the verdict or the exit code; a read-only token (a fork's) is one notice.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gate.errors import GateError
from gate.github import actions
from gate.paths import replaceable
from gate.results import ERROR, PASSED, REGRESSED, GateResult

# Action inputs (action.yml) in the order they are documented.
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
    "nan_compare_equal",
    "validate",
    "junit_path",
    "report_path",
    "title",
    "mode",
    "shard",
    "partial_path",
    "baseline",
    "fail_on",
    "regression_margin",
    "github_token",
    "pr_number",
    "comment_mode",
    "comment",
    "comment_key",
    "comment_author",
)
DEFAULTS = {
    "report_path": "accuracy-gate-report.json",
    "mode": "check",
    "fail_on": "threshold",
    "comment_mode": "always",
}
"""Defaults the code applies to an empty input; action.yml declares the same ones (a test checks)."""
REQUIRED = {"check": ("config",), "comment": ("github_token",), "merge": ("partial_path",)}
"""Inputs required per mode. GitHub does not enforce ``required: true``, so the action does."""
OUTPUTS = ("passed", "regressed", "failed_outputs", "junit_path", "report_path", "report_json", "partial_path")
MODES = ("check", "comment", "merge")
COMMENT_MODES = ("always", "on-change", "on-failure", "off")
DEFAULT_JUNIT = "accuracy-gate-junit.xml"
OUTPUT_JSON_LIMIT = 64 * 1024
"""Bytes for each JSON step output; GitHub allows 1 MB of outputs per job."""
MAX_REPORT_FILES = 50
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")
FORK_NOTICE = (
    "Pull request from a fork: its token is read-only, so the PR comment is skipped. The results are in "
    "the job summary, the JUnit report and the results file {report}; post the comment from a workflow_run "
    "workflow with `mode: comment` (README, 'Fork pull requests')."
)


@dataclass
class Settings:
    """The validated action inputs that are not gate.toml settings."""

    mode: str = "check"
    config: str | None = None
    token: str | None = None
    pr_number: int | None = None
    comment_mode: str = "always"
    comment_key: str | None = None
    comment_author: str | None = None
    title: str | None = None
    junit_path: Path | None = None
    report_path: Path | None = None
    shard: object | None = None  # gate.partial.Shard
    partial_path: Path | None = None
    baseline: Path | None = None
    fail_on: str = "threshold"
    margins: object | None = None  # gate.baseline margins

    @property
    def shard_leg(self) -> bool:
        """A matrix leg that runs one of several shards: it reports its part, the merge the verdict."""
        return self.shard is not None and self.shard.count > 1


def _get(name: str, environ: Mapping[str, str]) -> str | None:
    return actions.read_input(name, environ)


def read_settings(environ: Mapping[str, str]) -> tuple[Settings, list[GateError]]:
    """Read and validate the inputs that steer the action (not the gate.toml overrides).

    Returns:
        ``(settings, errors)``: each invalid input is one ``GateError`` naming it, and its setting
        keeps a safe default (an invalid ``comment_mode`` turns the comment off, an invalid path
        input falls back to its default path), so that the error can still be reported.
    """
    errors: list[GateError] = []
    settings = Settings()

    def parse(name, parser, fallback=None):
        value = _get(name, environ)
        if value is None:
            value = DEFAULTS.get(name)
        if value is None:
            return fallback
        try:
            return parser(name, value)
        except GateError as err:
            errors.append(err)
            return fallback

    settings.mode = parse("mode", lambda n, v: actions.parse_choice(n, v, MODES), "check")
    settings.config = _get("config", environ)
    settings.title = _get("title", environ)
    settings.token = _get("github_token", environ)
    settings.pr_number = parse("pr_number", actions.parse_positive_int)
    settings.comment_mode = parse("comment_mode", lambda n, v: actions.parse_choice(n, v, COMMENT_MODES), "off")
    if parse("comment", actions.parse_bool, True) is False:  # deprecated: `comment: false` is `comment_mode: off`
        settings.comment_mode = "off"
    settings.comment_key = _get("comment_key", environ)
    settings.comment_author = parse("comment_author", _login)
    settings.junit_path = parse("junit_path", lambda n, v: actions.workspace_path(n, v, environ))
    settings.report_path = parse(
        "report_path",
        lambda n, v: actions.workspace_path(n, v, environ),
        actions.workspace_path("report_path", DEFAULTS["report_path"], environ),
    )
    from gate.baseline import FAIL_ON, parse_margins
    from gate.partial import parse_shard

    settings.shard = parse("shard", lambda n, v: parse_shard(v, f"Input `{n}`"))
    settings.partial_path = parse("partial_path", lambda n, v: actions.workspace_path(n, v, environ))
    settings.baseline = parse("baseline", lambda n, v: actions.workspace_path(n, v, environ))
    settings.fail_on = parse("fail_on", lambda n, v: actions.parse_choice(n, v, FAIL_ON), "threshold")
    settings.margins = parse("regression_margin", lambda n, v: parse_margins(v, f"Input `{n}`"))
    if settings.fail_on == "regression" and not _get("baseline", environ):
        errors.append(GateError("Input `fail_on: regression` needs input `baseline` (the base branch's results)."))
    if settings.margins is not None and settings.fail_on != "regression":
        errors.append(GateError("Input `regression_margin` applies only with `fail_on: regression`."))
    if settings.mode == "check" and settings.shard is not None and settings.partial_path is None:
        from gate.partial import default_partial_name

        settings.partial_path = actions.workspace_path("partial_path", default_partial_name(settings.shard), environ)
    # Inputs that only mean something in another mode are mistakes (a merge job copied from a matrix
    # leg with `shard` still set would otherwise report a regression as a shard's green check).
    check_only = ("shard", *INPUTS[INPUTS.index("model") : INPUTS.index("validate") + 1])
    if settings.mode != "check":
        given = [name for name in check_only if _get(name, environ)]
        if given:
            errors.append(
                GateError(f"Input `{given[0]}` applies only to `mode: check`, not `mode: {settings.mode}`; remove it.")
            )
    for name in REQUIRED[settings.mode]:
        if not _get(name, environ):
            what = {
                "config": "the path of gate.toml in the repository",
                "github_token": "a token that may comment",
                "partial_path": "the partial result file(s) of every shard, a file or a folder",
            }
            errors.append(GateError(f"Input '{name}' is required: {what[name]}."))
    return settings, errors


def _login(name: str, value: str) -> str:
    if not _LOGIN.fullmatch(value.strip()):
        raise GateError(f"Input `{name}` must be a GitHub login such as `github-actions[bot]`, got {value!r}.")
    return value.strip()


def overrides_from_inputs(environ: Mapping[str, str]) -> dict:
    """Action inputs -> the flat override keys of ``gate.config.load_config`` (same parsing as the
    CLI flags: per-output ``name:value`` entries separated by spaces, commas or new lines). Paths are
    resolved inside ``GITHUB_WORKSPACE``; numbers, booleans and names are validated here, so an
    error names the input rather than gate.toml.

    Raises:
        GateError: a value that cannot be parsed or is out of range, naming the input.
    """
    from gate.backend.onnxrt import GRAPH_OPTIMIZATION_LEVELS
    from gate.comparator.compare import CHECK_ERROR_STATS
    from gate.config import RUNNERS, parse_per_output

    def get(name):
        return _get(name, environ)

    def per_output(name, cast):
        try:
            return parse_per_output(get(name), cast, name)
        except GateError as err:
            raise GateError(f"Input `{name}`: {err}") from err

    overrides: dict = {}
    for key in ("model", "inputs", "golden"):
        value = get(key)
        overrides[key] = str(actions.workspace_path(key, value, environ)) if value else None
    for key in ("runners", "execution_providers"):
        value = get(key)
        overrides[key] = value.replace(",", " ").split() if value else None
    for runner in overrides["runners"] or []:
        if runner not in RUNNERS:
            raise GateError(f"Input `runners` names unknown runner {runner!r}; available: {', '.join(RUNNERS)}.")
    for key in ("atol", "rtol"):
        if not get(key):
            overrides[key] = None
            continue
        value = per_output(key, float)
        for tol in value.values() if isinstance(value, dict) else [value]:
            if not math.isfinite(tol) or tol < 0:
                raise GateError(f"Input `{key}` must hold non-negative finite numbers, got {get(key)!r}.")
        overrides[key] = value
    if get("check_error_stat"):
        value = per_output("check_error_stat", str)
        for stat in value.values() if isinstance(value, dict) else [value]:
            if stat not in CHECK_ERROR_STATS:
                raise GateError(
                    f"Input `check_error_stat` must be one of {', '.join(CHECK_ERROR_STATS)} "
                    f"(per output if wanted), got {stat!r}."
                )
        overrides["check_error_stat"] = value
    else:
        overrides["check_error_stat"] = None
    for key in ("check_average", "infinities_compare_equal", "nan_compare_equal", "validate"):
        value = get(key)
        overrides[key] = actions.parse_bool(key, value) if value else None
    level = get("graph_optimization_level")
    overrides["graph_optimization_level"] = (
        actions.parse_choice("graph_optimization_level", level, GRAPH_OPTIMIZATION_LEVELS) if level else None
    )
    overrides["title"] = get("title")
    junit = get("junit_path")
    overrides["junit"] = str(actions.workspace_path("junit_path", junit, environ)) if junit else None
    # gate.toml's own paths must stay inside the workspace too (gate.paths).
    overrides["root"] = environ.get("GITHUB_WORKSPACE") or None
    return overrides


def _run_gate(environ, settings: Settings) -> tuple[GateResult, object]:
    """Runs the gate (one shard of it with ``shard``), writes the partial result file when asked, and
    applies the baseline. The baseline is read first, so a wrong one fails before the model runs.

    Raises:
        GateError: a config, data or baseline problem; the partial file cannot be written.
    """
    from gate.config import load_config
    from gate.job import check
    from gate.partial import write_partial

    baseline = _load_baseline(settings)
    config = actions.workspace_path("config", settings.config, environ)
    cfg = load_config(config, overrides_from_inputs(environ))
    try:
        result = check(cfg, settings.shard, partial=settings.partial_path is not None)
    finally:
        if "trt" in cfg.runners:  # engines and timing caches written into the workspace
            _chown_tree_to_workspace_owner(cfg.trt.get("cache_dir", ".accuracy-gate-cache/trt"), environ)
    if settings.partial_path is not None:
        path = write_partial(result.run, settings.partial_path)
        _chown_to_workspace_owner(path, environ)
        print(f"partial result file: {_workspace_relative(path, environ)}")
    return _with_baseline(result, baseline, settings), cfg


def _load_baseline(settings: Settings):
    from gate.baseline import load_baseline

    if settings.baseline is None:
        return None
    try:
        return load_baseline(settings.baseline)
    except GateError as err:
        raise GateError(f"Input `baseline`: {err}") from err


def _with_baseline(result: GateResult, baseline, settings: Settings) -> GateResult:
    from gate.baseline import apply_baseline

    if baseline is None:
        return result
    try:
        return apply_baseline(result, baseline, settings.fail_on, settings.margins)
    except GateError as err:
        raise GateError(f"Input `baseline`: {err}") from err


def _merge_gate(settings: Settings) -> GateResult:
    """``mode: merge``: every shard's partial result file -> the whole run's verdict (gate.merge).

    Raises:
        GateError: a missing, duplicate, foreign or corrupt shard; a bad baseline.
    """
    from gate.merge import merge_files
    from gate.partial import result_of

    baseline = _load_baseline(settings)
    run = merge_files([settings.partial_path])
    if settings.title:
        run.title = settings.title
    return _with_baseline(result_of(run), baseline, settings)


# --- files in the workspace ----------------------------------------------------------------------


def _workspace(environ) -> str:
    return os.path.abspath(environ.get("GITHUB_WORKSPACE") or os.getcwd())


def _workspace_relative(path, environ=None) -> str:
    """A path the workflow's later steps can use: relative to the workspace (the container's working
    directory, mounted from the host) when it lies inside it."""
    path = os.path.abspath(path)
    root = _workspace(environ or {})
    return os.path.relpath(path, root) if path.startswith(root + os.sep) else path


def _chown_to_workspace_owner(path, environ) -> None:
    """Gives a file we wrote to the workspace's owner: the container runs as root, and root-owned files
    break the next ``actions/checkout`` on persistent self-hosted runners (actions/runner#434)."""
    workspace = _workspace(environ)
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    try:
        owner = os.stat(workspace)
        if os.path.abspath(path).startswith(workspace + os.sep):
            for folder in _created_parents(path, workspace):
                os.chown(folder, owner.st_uid, owner.st_gid)
            os.chown(path, owner.st_uid, owner.st_gid)
    except OSError as err:
        actions.warning(f"Could not hand {path} to the workspace owner: {err}")


def _chown_tree_to_workspace_owner(folder, environ) -> None:
    """``_chown_to_workspace_owner`` for every file and folder below ``folder`` (e.g. the engine cache)."""
    folder = os.path.abspath(folder)
    if not os.path.isdir(folder):
        return
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            _chown_to_workspace_owner(os.path.join(root, name), environ)
    _chown_to_workspace_owner(folder, environ)


def _created_parents(path, workspace):
    parent = os.path.dirname(os.path.abspath(path))
    while parent.startswith(workspace + os.sep):
        yield parent
        parent = os.path.dirname(parent)


# --- reporting helpers ---------------------------------------------------------------------------


def _run_url(environ) -> str | None:
    if not environ.get("GITHUB_RUN_ID"):
        return None
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    return f"{server}/{environ.get('GITHUB_REPOSITORY', '')}/actions/runs/{environ['GITHUB_RUN_ID']}"


def _client(environ, token):
    from gate.github.comments import GitHubClient

    api_url = environ.get("GITHUB_API_URL") or "https://api.github.com"
    if not re.match(r"https?://", api_url):
        raise GateError(f"GITHUB_API_URL {api_url!r} is not an http(s) URL.")
    return GitHubClient(api_url, token)


def _json_list(names: list[str], limit: int = OUTPUT_JSON_LIMIT) -> str:
    """A JSON array of ``names`` of at most ``limit`` bytes (the first names that fit)."""
    text = json.dumps(names, ensure_ascii=False)
    while len(text.encode("utf-8")) > limit and names:
        names = names[: len(names) // 2]
        text = json.dumps(names, ensure_ascii=False)
    return text


def annotate_outputs(result: GateResult) -> None:
    """One ``::error`` per output that failed or could not be compared, and one ``::warning`` per
    output that passed with a caveat (it passes on average only, or its dtype differs from the golden
    one); at most :data:`ANNOTATION_LIMIT` lines of each kind per step counting the final verdict
    line, so the Actions UI (10 of each per step) drops none: past that, one line says how many more.
    """
    failed = [(f"accuracy-gate: {row.output}", row.message()) for row in result.rows if not row.passed]
    caveats = [
        (f"accuracy-gate: {row.output}", row.message())
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


def _final_line(result: GateResult) -> None:
    final = {PASSED: actions.notice, REGRESSED: actions.error, ERROR: actions.error}[result.status]
    label = {PASSED: "passed", REGRESSED: "accuracy regressed", ERROR: "could not evaluate"}[result.status]
    final(f"{label}: {result.message}", title="accuracy-gate")


def _comment_outcome(outcome: dict, number: int) -> str:
    where = outcome.get("html_url") or outcome.get("comment_id")
    return {
        "created": f"PR comment created: {where}",
        "updated": f"PR comment updated: {where}",
        "unchanged": f"PR comment unchanged: {where}",
        "skipped": f"PR comment skipped: comment_mode on-failure and pull request #{number} has none to update.",
    }[outcome["action"]]


def _post(client, environ, settings: Settings, number: int, result: GateResult, key, run_url, commit) -> dict:
    """Render ``result`` into the comment budget and create or update the comment per ``comment_mode``."""
    from gate.github.comments import COMMENT_TRUNCATE_AT, header_size, upsert_comment
    from gate.report.json_report import results_digest
    from gate.report.markdown import render_markdown

    digest = results_digest(result) if settings.comment_mode == "on-change" else None
    body = render_markdown(result, run_url, commit, budget=COMMENT_TRUNCATE_AT - header_size(key, digest))
    return upsert_comment(
        client,
        environ.get("GITHUB_REPOSITORY", ""),
        number,
        body,
        key=key,
        author=settings.comment_author,
        create=settings.comment_mode != "on-failure" or result.status != PASSED,
        digest=digest,
    )


def _read_only_notice(err, number, report) -> None:
    actions.notice(
        f"The token may not comment on pull request #{number} (GitHub: HTTP 403 Resource not accessible by "
        "integration): a fork's or Dependabot's read-only token, or `pull-requests: write` is missing. "
        f"The PR comment is skipped; the results are in the job summary, the JUnit report and {report}.",
        title="accuracy-gate",
    )


# --- the two modes -------------------------------------------------------------------------------


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
    token = _get("github_token", environ)
    if token:
        actions.add_mask(token)  # before anything else is printed
    settings, errors = read_settings(environ)
    if settings.mode == "comment":
        return _comment_mode(environ, settings, errors, verbose)
    return _check_mode(environ, settings, errors, verbose)


def _check_mode(environ, settings: Settings, errors: list[GateError], verbose: bool) -> int:
    """``mode: check`` and ``mode: merge``: get the verdict, then report it."""
    from gate.report import render_text

    junit_path = str(settings.junit_path or DEFAULT_JUNIT)
    model = _get("model", environ) or settings.config or "model"
    merging = settings.mode == "merge"
    title = (
        "Accuracy gate: merge the shards' partial result files"
        if merging
        else "Accuracy gate: run the model and compare with the golden outputs"
    )
    # Output names, messages and tracebacks carry text from the model and the stored data: the runner
    # must not read a line of it as a workflow command (our annotations come after, outside).
    with actions.group(title), actions.stop_commands():
        if errors:
            result = GateResult(model=os.path.basename(model), status=ERROR, message=str(errors[0]))
        else:
            try:
                if merging:
                    result = _merge_gate(settings)
                else:
                    result, cfg = _run_gate(environ, settings)
                    junit_path = str(cfg.junit)
            except Exception as err:  # GateError: a user mistake; anything else: our bug. Both still get reported.
                if verbose or not isinstance(err, GateError):
                    traceback.print_exc()
                message = str(err) if isinstance(err, GateError) else f"internal error {type(err).__name__}: {err}"
                result = GateResult(model=os.path.basename(model), status=ERROR, message=message)
    with actions.stop_commands():  # the table, outside the fold
        print(render_text(result))
    if settings.shard_leg:
        print(f"shard {settings.shard}: no annotations or PR comment here; the merge job reports the whole run.")
    else:
        annotate_outputs(result)
    return _publish(environ, settings, result, junit_path, verbose)


def _publish(environ, settings: Settings, result: GateResult, junit_path: str, verbose: bool) -> int:
    from gate.report import write_junit
    from gate.report.json_report import dumps_within, report_document, write_report

    key = settings.comment_key or f"{environ.get('GITHUB_WORKFLOW') or 'workflow'}/{settings.config or 'default'}"
    run_url = _run_url(environ)
    report_path = str(settings.report_path)
    written: dict[str, str] = {}

    lost: list[str] = []  # evidence files the user asked for that could not be written

    def warn(step, err):
        if verbose:
            traceback.print_exception(err)
        actions.warning(f"Could not write the {step}: {err}")
        if step in ("JUnit report", "results file"):
            lost.append(f"{step}: {err}")

    if settings.partial_path is not None and settings.mode == "check" and result.run is not None:
        written["partial_path"] = _workspace_relative(settings.partial_path, environ)
    with actions.group("Accuracy gate: reports"):
        try:
            if result.status == ERROR and not replaceable(junit_path, "junit"):
                # An error before the config checked this path (it may name the model, say): keep the file.
                raise GateError(f"{junit_path} is not a JUnit file; not overwriting it")
            junit_file = write_junit(result, junit_path)
            _chown_to_workspace_owner(junit_file, environ)
            written["junit_path"] = _workspace_relative(junit_file, environ)
        except Exception as err:
            warn("JUnit report", err)
        from gate.github.event import head_sha

        try:
            commit = head_sha(environ)
        except GateError as err:
            actions.warning(f"Could not read the commit from the event: {err}")
            commit = None
        client, ref = None, None
        try:
            if not settings.shard_leg:
                client, ref, commit = _find_pull_request(environ, settings, commit, report_path)
        except Exception as err:
            warn("PR comment", err)
        try:
            report_file = write_report(result, report_path, commit, key)
            _chown_to_workspace_owner(report_file, environ)
            written["report_path"] = _workspace_relative(report_file, environ)
        except Exception as err:
            warn("results file", err)
        _write_summary(result, run_url, commit, environ, warn)
        if ref is not None:
            try:
                outcome = _post(client, environ, settings, ref.number, result, key, run_url, commit)
                print(_comment_outcome(outcome, ref.number))
            except GateError as err:
                if getattr(err, "read_only", False):
                    _read_only_notice(err, ref.number, written.get("report_path", report_path))
                else:
                    warn("PR comment", err)
            except Exception as err:  # a reporting failure never changes the verdict
                warn("PR comment", err)
        try:
            document = report_document(result, commit, key)
            actions.set_outputs(
                {
                    "passed": result.status == PASSED,
                    "regressed": result.status == REGRESSED,
                    "failed_outputs": _json_list(result.failed_outputs),
                    "junit_path": written.get("junit_path", ""),
                    "report_path": written.get("report_path", ""),
                    "report_json": dumps_within(document, OUTPUT_JSON_LIMIT),
                    # only when written (an unset output reads as empty in the workflow)
                    **({"partial_path": written["partial_path"]} if "partial_path" in written else {}),
                },
                environ,
            )
        except Exception as err:
            warn("step outputs", err)
    if settings.shard_leg and result.status != ERROR:
        actions.notice(
            f"shard {settings.shard} evaluated ({result.status}: {result.message}); the merge job gives the verdict "
            "over every shard.",
            title="accuracy-gate",
        )
        sys.stdout.flush()
        return 0
    _final_line(result)
    if lost and result.exit_code == 0:
        # The job summary and PR comment may fail without changing the verdict; a JUnit or results
        # file the workflow asked for may not: a green check without its evidence is not a pass.
        actions.error(f"could not evaluate: the {lost[0]}", title="accuracy-gate")
        sys.stdout.flush()
        return 2
    sys.stdout.flush()
    return result.exit_code


def _find_pull_request(environ, settings: Settings, commit, report_path):
    """``(client, ref, commit)`` for the comment: ref None when there is none to post (and why was said)."""
    from gate.github.event import find_pull_request, is_fork_pull_request

    if settings.comment_mode == "off":
        return None, None, commit
    if is_fork_pull_request(environ):
        actions.notice(FORK_NOTICE.format(report=_workspace_relative(report_path, environ)), title="accuracy-gate")
        return None, None, commit
    client = _client(environ, settings.token) if settings.token else None
    ref, reason = find_pull_request(environ, client, settings.pr_number)
    if ref is None:
        print(f"{reason} Skipping the PR comment.")
        return client, None, commit
    if client is None:
        actions.warning("No github_token given; skipping the PR comment.")
        return None, None, ref.head_sha or commit
    print(f"Pull request #{ref.number}, found from {ref.found_by}.")
    return client, ref, ref.head_sha or commit


def _write_summary(result, run_url, commit, environ, warn) -> None:
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


def _report_files(path: Path) -> list[Path]:
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


def _trusted_run_url(environ, event) -> str | None:
    """The ``html_url`` of the run that triggered a ``workflow_run`` (its job summary has the full
    report), when it is a run of this repository on this server; else this run's URL."""
    run = event.get("workflow_run") if isinstance(event, dict) else None
    url = run.get("html_url") if isinstance(run, dict) else None
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    prefix = f"{server}/{environ.get('GITHUB_REPOSITORY')}/"
    if isinstance(url, str) and url.startswith(prefix + "actions/runs/") and re.fullmatch(r"[\w./:-]+", url):
        return url
    return _run_url(environ)


def _comment_mode(environ, settings: Settings, errors: list[GateError], verbose: bool) -> int:
    """``mode: comment``: post the results file(s) of another run as the PR comment; no model runs.

    The files are untrusted (a fork's workflow wrote them): they are size-capped and validated
    (``read_untrusted_report``), rendered with everything escaped, and echoed to the log with workflow
    commands stopped. The pull request and commit come from the ``workflow_run`` event (GitHub's
    data), never from the file.
    """
    from gate.github.event import find_pull_request, head_sha, load_event
    from gate.report import render_text
    from gate.report.json_report import dumps_within, read_untrusted_report, report_document

    def fail(message: str) -> int:
        actions.error(f"could not post the accuracy report: {message}", title="accuracy-gate")
        return 2

    if errors:
        return fail(str(errors[0]))
    try:
        with actions.group("Accuracy gate: read the results files"):
            reports = [read_untrusted_report(path) for path in _report_files(settings.report_path)]
            for report in reports:
                with actions.stop_commands():
                    print(f"{_workspace_relative(report.source, environ)}:")
                    print(render_text(report.result))
        try:
            event = load_event(environ)
        except GateError:
            event = {}
        run = event.get("workflow_run") if isinstance(event.get("workflow_run"), dict) else {}
        client = _client(environ, settings.token)
        ref, reason = find_pull_request(environ, client, settings.pr_number)
        commit = (ref.head_sha if ref else None) or head_sha(environ)
    except GateError as err:
        if verbose:
            traceback.print_exc()
        return fail(str(err))
    run_url = _trusted_run_url(environ, event)
    workflow = run.get("name") if isinstance(run.get("name"), str) else environ.get("GITHUB_WORKFLOW", "workflow")
    failures = 0
    with actions.group("Accuracy gate: PR comment"):
        if ref is None:
            print(f"{reason} Nothing to comment on.")
        else:
            print(f"Pull request #{ref.number}, found from {ref.found_by}.")
        for report in reports:
            key = settings.comment_key or report.comment_key or f"{workflow}/{report.result.model}"
            _write_summary(report.result, run_url, commit, environ, _warn_only)
            if ref is None or settings.comment_mode == "off":
                continue
            try:
                outcome = _post(client, environ, settings, ref.number, report.result, key, run_url, commit)
                print(_comment_outcome(outcome, ref.number))
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
            "passed": all(r.status == PASSED for r in results),
            "regressed": any(r.status == REGRESSED for r in results),
            "failed_outputs": _json_list([name for r in results for name in r.failed_outputs]),
            "junit_path": "",
            "report_path": _workspace_relative(settings.report_path, environ),
            "report_json": dumps_within(one, OUTPUT_JSON_LIMIT) if one else _json_list_of(documents),
        },
        environ,
    )
    if failures:
        return fail(f"{failures} of {len(reports)} comments could not be written.")
    where = f"pull request #{ref.number}" if ref else "no pull request"
    verdicts = ", ".join(sorted({r.status for r in results}))
    actions.notice(
        f"comment mode: {len(reports)} results file(s) for {where} (reported: {verdicts}).", title="accuracy-gate"
    )
    return 0


def _warn_only(step, err) -> None:
    actions.warning(f"Could not write the {step}: {err}")


def _json_list_of(documents: list[dict]) -> str:
    from gate.report.json_report import dumps, dumps_within

    share = OUTPUT_JSON_LIMIT // max(len(documents), 1)
    return "[" + ",".join(dumps_within(d, share - 2) for d in documents) + "]" if documents else dumps([])
