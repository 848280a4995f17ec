"""The GitHub Action, a thin front end of ``gate.pipeline`` (as ``gate.cli`` is): read and validate
``INPUT_*`` (the option table's inputs, ``gate.options``), execute the request, publish (JUnit,
results file, job summary, step outputs, annotations, one PR comment: ``gate.github.publish``) and
return the exit code (0 pass, 1 accuracy regressed, 2 could not evaluate). Report paths follow the
CLI's policy (``gate.report_files``).

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

import logging
import os
import re
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gate.errors import GateError
from gate.github import actions
from gate.github.comment_mode import comment_mode
from gate.github.publish import (
    FORK_NOTICE,
    OUTPUT_JSON_LIMIT,
    annotate_outputs,
    comment_outcome,
    final_line,
    find_comment_target,
    json_list,
    post_comment,
    read_only_notice,
    workflow_run_url,
    write_summary,
)
from gate.github.workspace import chown_to_workspace_owner, chown_tree_to_workspace_owner
from gate.option_readers import overrides_from_inputs
from gate.options import BY_NAME, DEFAULTS, INPUTS
from gate.paths import relative_paths, workspace_relative, workspace_roots
from gate.results import ERROR, PASSED, REGRESSED
from gate.shards import default_partial_name

# INPUTS, DEFAULTS: from the option table; FORK_NOTICE, annotate_outputs: gate.github.publish
__all__ = ["DEFAULTS", "FORK_NOTICE", "INPUTS", "annotate_outputs", "main", "overrides_from_inputs"]
REQUIRED = {"check": ("config",), "comment": ("github_token",), "merge": ("partial_path",)}
"""Inputs required per mode. GitHub does not enforce ``required: true``, so the action does."""
OUTPUTS = ("passed", "regressed", "failed_outputs", "junit_path", "report_path", "report_json", "partial_path")
MODES = BY_NAME["mode"].choices
COMMENT_MODES = BY_NAME["comment_mode"].choices
DEFAULT_JUNIT = "accuracy-gate-junit.xml"
_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?")


@dataclass(frozen=True)
class Settings:
    """The validated action inputs that are not gate.toml settings (those go to
    ``gate.option_readers.overrides_from_inputs``); with them ``base_request`` makes the pipeline's
    ``Request``."""

    mode: str = "check"
    config: str | None = None
    token: str | None = field(default=None, repr=False)  # a secret: never in a repr
    pr_number: int | None = None
    comment_mode: str = "always"
    comment_key: str | None = None
    comment_author: str | None = None
    title: str | None = None
    junit_path: Path | None = None
    report_path: Path | None = None
    shard: object | None = None  # gate.shards.Shard
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
    values: dict = {}

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

    values["mode"] = parse("mode", lambda n, v: actions.parse_choice(n, v, MODES), "check")
    values["config"] = _get("config", environ)
    values["title"] = _get("title", environ)
    values["token"] = _get("github_token", environ)
    values["pr_number"] = parse("pr_number", actions.parse_positive_int)
    values["comment_mode"] = parse("comment_mode", lambda n, v: actions.parse_choice(n, v, COMMENT_MODES), "off")
    if parse("comment", actions.parse_bool, True) is False:  # deprecated: `comment: false` is `comment_mode: off`
        values["comment_mode"] = "off"
    values["comment_key"] = _get("comment_key", environ)
    values["comment_author"] = parse("comment_author", _login)
    values["junit_path"] = parse("junit_path", lambda n, v: actions.report_workspace_path(n, v, environ))
    values["report_path"] = parse(
        "report_path",
        lambda n, v: actions.report_workspace_path(n, v, environ),
        actions.workspace_default(DEFAULTS["report_path"], environ),  # never raises (a symlink there, say)
    )
    from gate.baseline import FAIL_ON, parse_margins
    from gate.shards import parse_shard

    values["shard"] = parse("shard", lambda n, v: parse_shard(v, f"Input `{n}`"))
    written = actions.report_workspace_path if values["mode"] == "check" else actions.workspace_path  # merge reads it
    values["partial_path"] = parse("partial_path", lambda n, v: written(n, v, environ))
    values["baseline"] = parse("baseline", lambda n, v: actions.workspace_path(n, v, environ))
    values["fail_on"] = parse("fail_on", lambda n, v: actions.parse_choice(n, v, FAIL_ON), "threshold")
    values["margins"] = parse("regression_margin", lambda n, v: parse_margins(v, f"Input `{n}`"))
    if values["fail_on"] == "regression" and not _get("baseline", environ):
        errors.append(GateError("Input `fail_on: regression` needs input `baseline` (the base branch's results)."))
    if values["margins"] is not None and values["fail_on"] != "regression":
        errors.append(GateError("Input `regression_margin` applies only with `fail_on: regression`."))
    if values["mode"] == "check" and values["shard"] is not None and values["partial_path"] is None:
        values["partial_path"] = actions.report_workspace_path(
            "partial_path", default_partial_name(values["shard"]), environ
        )
    # Inputs that only mean something in another mode are mistakes (a merge job copied from a matrix
    # leg with `shard` still set would otherwise report a regression as a shard's green check).
    check_only = ("shard", *INPUTS[INPUTS.index("model") : INPUTS.index("validate") + 1])
    if values["mode"] != "check":
        given = [name for name in check_only if _get(name, environ)]
        if given:
            errors.append(
                GateError(f"Input `{given[0]}` applies only to `mode: check`, not `mode: {values['mode']}`; remove it.")
            )
    for name in REQUIRED[values["mode"]]:
        if not _get(name, environ):
            what = {
                "config": "the path of gate.toml in the repository",
                "github_token": "a token that may comment",
                "partial_path": "the partial result file(s) of every shard, a file or a folder",
            }
            errors.append(GateError(f"Input '{name}' is required: {what[name]}."))
    return Settings(**values), errors


def _login(name: str, value: str) -> str:
    if not _LOGIN.fullmatch(value.strip()):
        raise GateError(f"Input `{name}` must be a GitHub login such as `github-actions[bot]`, got {value!r}.")
    return value.strip()


def base_request(environ, settings: Settings):
    """The action's request as far as the inputs that steer it go (``gate.pipeline.Request``): the
    report paths, the baseline, the shard; gate.toml's overrides come from :func:`overrides_from_inputs`
    (a mistake there is reported with this request's report paths)."""
    from gate.pipeline import Request

    config = None
    if settings.config:
        try:
            config = actions.workspace_path("config", settings.config, environ)
        except GateError:
            config = None  # reported by read_settings' or the gate's error
    overrides: dict = {}
    if settings.junit_path is not None:
        overrides["junit"] = str(settings.junit_path)
    for key in ("model", "inputs", "golden"):
        value = _get(key, environ)
        try:
            overrides[key] = str(actions.workspace_path(key, value, environ)) if value else None
        except GateError:
            pass
    model = _get("model", environ) or settings.config or "model"
    merging = settings.mode == "merge"
    return Request(
        command="merge" if merging else "check",
        config=config,
        overrides=overrides,
        sources={"junit": NAMES["junit"]},
        root=environ.get("GITHUB_WORKSPACE") or None,
        junit=settings.junit_path,
        report=settings.report_path,
        partial=settings.partial_path if not merging else None,
        defaults={
            "report": DEFAULTS["report_path"],
            **({"partial": default_partial_name(settings.shard)} if settings.shard is not None else {}),
        },
        names=NAMES,
        baseline=(settings.baseline,) if settings.baseline is not None else (),
        fail_on=settings.fail_on,
        margins=settings.margins,
        shard=None if merging else settings.shard,
        title=settings.title if merging else None,
        partials=(settings.partial_path,) if merging else (),
        error_junit_fallback=True,
        model_name=os.path.basename(model),
    )


NAMES = {
    "junit": "input `junit_path`",
    "report": "input `report_path`",
    "partial": "input `partial_path`",
    "baseline": "Input `baseline`",
}
"""How a report-path or baseline error names the input that gave the path."""


def _execute(environ, settings: Settings, errors: list[GateError], verbose: bool):
    """The pipeline's outcome for the inputs (an input mistake is an error outcome); a non-GateError
    is our bug: its traceback is printed and it is reported as an internal error."""
    from dataclasses import replace

    from gate.pipeline import execute, failed

    base = base_request(environ, settings)
    if errors:
        return failed(base, str(errors[0]), errors[0])
    outcome = None
    try:
        request = base
        if base.command == "check":
            request = replace(base, config=actions.workspace_path("config", settings.config, environ))
            request = replace(request, overrides=overrides_from_inputs(environ))
        outcome = execute(request)
    except GateError as err:
        outcome = failed(base, str(err), err)
    except Exception as err:  # our bug: still reported, as an error that is not the user's
        traceback.print_exc()
        outcome = failed(base, f"internal error {type(err).__name__}: {err}", err)
    finally:
        config = outcome.config if outcome is not None else None
        if config is None or "trt" in config.runners:  # engines and timing caches written into the workspace
            cache = (config.trt if config is not None else {}).get("cache_dir", ".accuracy-gate-cache/trt")
            chown_tree_to_workspace_owner(cache, environ)
    if verbose and isinstance(outcome.error, GateError):
        traceback.print_exception(outcome.error)
    if outcome.partial is not None:
        chown_to_workspace_owner(outcome.partial, environ)
        print(f"partial result file: {workspace_relative(outcome.partial, environ)}")
    return outcome


# --- the two modes -------------------------------------------------------------------------------


def main(environ: Mapping[str, str] | None = None) -> int:
    """Runs the action; returns the exit code. An unexpected exception is exit 2 (could not
    evaluate), never 1, which means that accuracy regressed."""
    from gate.pipeline import guarded

    environ = os.environ if environ is None else environ
    return guarded(lambda: _main_reported(environ), _interrupted)


def _interrupted(message: str) -> None:
    """A signal ends the run (``gate.pipeline.guarded``): the error annotation, outside any fold."""
    actions.resume_commands()
    print("::endgroup::", flush=True)
    actions.error(message, title="accuracy-gate")


def _main_reported(environ: Mapping[str, str]) -> int:
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
        return comment_mode(environ, settings, errors, verbose)
    return _check_mode(environ, settings, errors, verbose)


def _check_mode(environ, settings: Settings, errors: list[GateError], verbose: bool) -> int:
    """``mode: check`` and ``mode: merge``: get the verdict (``gate.pipeline``), then report it."""
    from gate.report import render_text

    title = (
        "Accuracy gate: merge the shards' partial result files"
        if settings.mode == "merge"
        else "Accuracy gate: run the model and compare with the golden outputs"
    )
    # Output names, messages and tracebacks carry text from the model and the stored data: the runner
    # must not read a line of it as a workflow command (our annotations come after, outside).
    with actions.group(title), actions.stop_commands():
        outcome = _execute(environ, settings, errors, verbose)
    result = outcome.result
    with actions.stop_commands():  # the table, outside the fold
        print(relative_paths(render_text(result), workspace_roots(environ)))  # as the annotations name paths
    if settings.shard_leg:
        print(f"shard {settings.shard}: no annotations or PR comment here; the merge job reports the whole run.")
    else:
        annotate_outputs(result, environ)
    return _publish(environ, settings, outcome, verbose)


def _publish(environ, settings: Settings, outcome, verbose: bool) -> int:
    from gate.pipeline import write_reports
    from gate.results_file import dumps_within, report_document

    result = outcome.result
    key = settings.comment_key or f"{environ.get('GITHUB_WORKFLOW') or 'workflow'}/{settings.config or 'default'}"
    run_url = workflow_run_url(environ)
    report_path = str(outcome.paths.report or settings.report_path)
    refused = dict(outcome.paths.refused)
    written: dict[str, str] = {}

    lost: list[str] = []  # evidence files the user asked for that could not be written

    def warn(step, err):
        if verbose and isinstance(err, BaseException):
            traceback.print_exception(err)
        actions.warning(f"Could not write the {step}: {err}")
        if step in ("JUnit report", "results file"):
            lost.append(f"{step}: {err}")

    if outcome.partial is not None:
        written["partial_path"] = workspace_relative(outcome.partial, environ)
    with actions.group("Accuracy gate: reports"):
        try:
            if "junit" in refused:
                raise GateError(refused["junit"])
            junit_file = write_reports(outcome, ("junit",), environ=environ)["junit"]
            chown_to_workspace_owner(junit_file, environ)
            written["junit_path"] = workspace_relative(junit_file, environ)
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
                client, ref, commit = find_comment_target(environ, settings, commit, report_path)
        except Exception as err:
            warn("PR comment", err)
        try:
            if "report" in refused:
                raise GateError(refused["report"])
            report_file = write_reports(outcome, ("report",), commit, key, environ)["report"]
            chown_to_workspace_owner(report_file, environ)
            written["report_path"] = workspace_relative(report_file, environ)
        except Exception as err:
            warn("results file", err)
        write_summary(result, run_url, commit, environ, warn)
        if ref is not None:
            try:
                outcome_ = post_comment(client, environ, settings, ref.number, result, key, run_url, commit)
                print(comment_outcome(outcome_, ref.number))
            except GateError as err:
                if getattr(err, "read_only", False):
                    read_only_notice(err, ref.number, written.get("report_path", report_path))
                else:
                    warn("PR comment", err)
            except Exception as err:  # a reporting failure never changes the verdict
                warn("PR comment", err)
        try:
            document = report_document(result, commit, key)
            actions.set_outputs(
                {
                    "passed": result.status == PASSED and not lost,  # no pass without its evidence (exit 2)
                    "regressed": result.status == REGRESSED,
                    "failed_outputs": json_list(result.failed_outputs),
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
    final_line(result, environ)
    if lost and result.exit_code == 0:
        # The job summary and PR comment may fail without changing the verdict; a JUnit or results
        # file the workflow asked for may not: a green check without its evidence is not a pass.
        actions.error(f"could not evaluate: the {lost[0]}", title="accuracy-gate")
        sys.stdout.flush()
        return 2
    sys.stdout.flush()
    return result.exit_code
