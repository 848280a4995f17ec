"""The ``accuracy-gate`` command line (``check``, ``record``, ``run``, ``merge``): a thin front end of
``gate.pipeline``. It parses the flags (the option table's, ``gate.options``) into a ``Request``,
executes it, prints the table and writes the report files.

Flags use ``polygraphy run``'s names (``--atol``, ``--rtol``, ``--check-error-stat``, per-output
``name:value``). Exit codes: 0 all passed, 1 accuracy regressed, 2 could not evaluate (any user
mistake: one line on stderr, no traceback unless ``--verbose`` or ``RUNNER_DEBUG=1``). Where report
files may go, and what an error writes, is ``gate.report_files``' policy (the action's too).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import sys
import traceback
from pathlib import Path

import gate
from gate.errors import GateError

EXIT_ERROR = 2


class _Parser(argparse.ArgumentParser):
    """argparse with the project's one-line errors (exit 2) instead of the whole usage text, and
    without prefix matching (``--at`` would be ``--atol``; a later flag could make it ambiguous)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        command = self.prog.removeprefix("accuracy-gate").strip()
        missing = message.rpartition("the following arguments are required: ")[2]
        words = [arg for arg in _Parser.argv[1:] if not arg.startswith("-")]
        if missing in ("config", "model") and words:  # eaten by a flag that takes several values
            example = f"accuracy-gate {command} {'gate.toml' if missing == 'config' else 'model.onnx'} --atol 1e-3"
            message += (
                "; flags that take several values (--atol, --runners, ...) also take the words after them, "
                f"so give {missing.upper()} first, e.g. {example}"
            )
        self.exit(
            EXIT_ERROR,
            f"accuracy-gate: error: {command + ': ' if command else ''}{message} (see '{self.prog} --help').\n",
        )

    argv: list = []  # the arguments being parsed (for error's hint)

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but an unknown flag is the subcommand's error, pointing at its own help."""
        argv = sys.argv[1:] if args is None else [str(arg) for arg in args]
        _Parser.argv = argv
        first = argv[0].split("=", 1)[0] if argv else ""
        if first.startswith("--") and first not in self._option_string_actions:  # before the subcommand
            self.error(f"unrecognized arguments: {argv[0]}{self.abbreviation_hint(argv[:1])}")
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            sub = self.commands.get(getattr(parsed, "command", None), self)
            sub.error(f"unrecognized arguments: {' '.join(extra)}{sub.abbreviation_hint(extra)}")
        return parsed

    def abbreviation_hint(self, extra) -> str:
        """`` (flags are not abbreviated: --atol?)`` where an unknown ``--flag`` starts a known one."""
        for arg in extra:
            name = arg.split("=", 1)[0]
            if name.startswith("--"):
                whole = sorted(flag for flag in self._option_string_actions if flag.startswith(name) and flag != name)
                if whole:
                    return f"; flags are not abbreviated: {name} for {' or '.join(whole)}?"
        return ""


HELP = {
    "check": "compare live outputs with the golden outputs (exit 0 pass, 1 fail, 2 error)",
    "run": "polygraphy-run-style: compare runners with each other or with loaded golden outputs, no gate.toml",
    "merge": "combine the partial result files of every shard and report once (exit 0 pass, 1 fail, 2 error)",
    "record": "write golden outputs from the reference runner",
}
RUN_DESCRIPTION = (
    "Compare a model's runners (the last one is the reference) or one runner with loaded golden "
    "outputs (saved by 'polygraphy run --save-outputs' or 'accuracy-gate record'). Synthetic inputs are "
    "Polygraphy's for the same --seed, unless --load-inputs is given. Exit 0 pass, 1 fail, 2 error."
)


def build_parser() -> argparse.ArgumentParser:
    """The four subcommands, each with the flags of the options it takes (``gate.options``)."""
    from gate.option_readers import add_arguments

    parser = _Parser(
        prog="accuracy-gate",
        description="Run a model over stored inputs and compare every output with golden outputs.",
    )
    parser.add_argument("--version", action="version", version=f"accuracy-gate {gate.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    parser.commands = {}
    for command in ("check", "run", "merge", "record"):
        extra = {"description": RUN_DESCRIPTION} if command == "run" else {}
        parser.commands[command] = sub.add_parser(command, help=HELP[command], **extra)
        add_arguments(parser.commands[command], command)
    return parser


def baseline_options(args) -> tuple[str, object]:
    """``(fail_on, margins)`` from the flags; ``--fail-on regression`` needs ``--baseline``.

    Raises:
        GateError: a bad margin, a margin without regression mode, or regression mode without a baseline.
    """
    from gate.baseline import parse_margins

    fail_on = args.fail_on or "threshold"
    if fail_on == "regression" and not args.baseline:
        raise GateError("--fail-on regression needs --baseline (the results of the base branch).")
    if args.regression_margin and fail_on != "regression":
        raise GateError("--regression-margin applies only with --fail-on regression.")
    margins = parse_margins(args.regression_margin, "--regression-margin") if args.regression_margin else None
    return fail_on, margins


def overrides_from_args(args) -> dict:
    """CLI flags -> the flat override keys of ``gate.config.load_config`` (``gate.options``)."""
    from gate.option_readers import overrides_from_args

    return {**overrides_from_args(args, args.command), "root": args.root}


def flag_names(overrides: dict) -> dict:
    """The flag of each override key, for ``load_config``'s errors."""
    from gate.option_readers import flag_names

    return flag_names(overrides)


_NAMES = {"junit": "--junit", "markdown": "--markdown", "report": "--report", "partial": "--write-partial"}


def _optional_path(value) -> Path | None:
    return Path(value) if value else None


def base_request(args):
    """The part of ``args``' request that cannot fail to parse: enough for an error report (``run``'s
    options too, as far as they name files the report paths must stay off)."""
    from gate.option_readers import overrides_from_args
    from gate.pipeline import Request, RunOptions

    command = args.command
    model = {"check": getattr(args, "model", None) or getattr(args, "config", None), "merge": "merge"}
    model = model.get(command, getattr(args, "model", None))
    unfailing = overrides_from_args(args, command, unfailing=True) if command in ("check", "record") else {}
    return Request(
        command=command,
        config=Path(args.config) if command in ("check", "record") else None,
        overrides=unfailing,
        sources=flag_names(unfailing),
        root=args.root,
        junit=_optional_path(getattr(args, "junit", None)),
        markdown=_optional_path(getattr(args, "markdown", None)),
        report=_optional_path(getattr(args, "report", None)),
        partial=_optional_path(getattr(args, "write_partial", None)),
        names=_NAMES,
        run=RunOptions(Path(args.model), load_inputs=args.load_inputs, load_outputs=args.load_outputs)
        if command == "run"
        else None,
        baseline=tuple(getattr(args, "baseline", None) or ()),
        title=args.title if command == "merge" else None,
        partials=tuple(args.partials) if command == "merge" else (),
        force=getattr(args, "force", False),
        layout=getattr(args, "layout", None),
        model_name=Path(model or "model").name,
    )


def request_from_args(args, base):
    """The whole request of ``args`` (``base``: :func:`base_request`'s).

    Raises:
        GateError: a flag value that cannot be read, naming the flag.
    """
    from dataclasses import replace

    from gate.pipeline import RunOptions
    from gate.run import marked_outputs
    from gate.shards import default_partial_name, parse_shard

    changes: dict = {}
    if args.command in ("check", "merge"):
        changes["fail_on"], changes["margins"] = baseline_options(args)
    if args.command == "check":
        shard = parse_shard(args.shard) if args.shard is not None else None
        changes["shard"] = shard
        changes.update(devices=args.devices, jobs=args.jobs, preview_precision=args.preview_precision)
        if shard is not None:
            changes["defaults"] = {"partial": default_partial_name(shard)}
            if shard.count > 1 and not args.write_partial:
                changes["partial"] = Path(changes["defaults"]["partial"])  # a shard's results only count once merged
        overrides = overrides_from_args(args)
        overrides.pop("root")
        changes.update(overrides=overrides, sources=flag_names(overrides))
    if args.command == "run":
        changes["overrides"] = overrides_from_args(args)
        changes["run"] = RunOptions(
            model=Path(args.model),
            runners=tuple(args.runner_flags or ["onnxrt"]),
            load_inputs=args.load_inputs,
            load_outputs=args.load_outputs,
            iterations=args.iterations,
            seed=args.seed,
            val_range=tuple(args.val_range) if args.val_range else None,
            input_shapes=tuple(args.input_shapes) if args.input_shapes else None,
            mark_all=args.mark_all,
            save_inputs=args.save_inputs,
            save_outputs=args.save_outputs,
            **marked_outputs(args),
        )
    return replace(base, **changes)


def _error(message) -> None:
    print(f"accuracy-gate: error: {message}", file=sys.stderr)


def _write_error_reports(outcome) -> None:
    """The error as the only testcase of the JUnit file (as the action writes it), and in the Markdown
    and results files asked for; a file that cannot be written is left (the error line said why the
    gate could not evaluate)."""
    from gate.pipeline import write_reports

    for kind in ("junit", "markdown", "report"):
        try:
            written = write_reports(outcome, (kind,))
        except GateError:
            continue
        if "junit" in written:
            print(f"JUnit: {written['junit']}")


def _finish(outcome, verbose: bool, quiet: bool = False) -> int:
    """Prints the outcome and writes its report files; returns the exit code."""
    from gate.pipeline import layer_report, write_reports
    from gate.report import render_text
    from gate.report.text import nothing_ran

    request, result = outcome.request, outcome.result
    if outcome.early:
        if verbose:
            traceback.print_exception(outcome.error)
        _error(outcome.error)
        if request.command != "record":
            _write_error_reports(outcome)
        return EXIT_ERROR
    if request.command == "record":
        print(f"recorded golden outputs: {len(outcome.recorded)} files under {outcome.config.golden}")
        return 0
    if outcome.partial is not None:
        print(f"partial result file: {outcome.partial}")
    for what in ("inputs", "outputs"):  # run --save-inputs / --save-outputs (Polygraphy JSON)
        saved = getattr(request.run, f"save_{what}", None) if request.run is not None else None
        if saved is not None and Path(saved).is_file():
            print(f"saved {what}: {saved}")
    if not nothing_ran(result):  # else the error line below is all there is to say
        print(render_text(result, details=not quiet and (verbose or result.status == "regressed")))
    if result.status == "error":
        _error(result.message)
    try:
        print(f"JUnit: {write_reports(outcome, ('junit',))['junit']}")
        write_reports(outcome, ("markdown", "report"))
        if request.run is not None and request.run.layered:
            print(layer_report(outcome))
    except GateError as err:
        if verbose:
            traceback.print_exc()
        _error(err)
        return EXIT_ERROR
    if request.shard_leg and outcome.exit_code != EXIT_ERROR:
        print(f"shard {request.shard} evaluated; the verdict over all iterations comes from 'accuracy-gate merge'.")
    return outcome.exit_code


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as stop:
        if stop.code:  # a flag error (exit 2), not --help or --version (exit 0)
            _claim_after_flag_error(parser, argv)
        raise
    try:
        from gate.early_claim import claim_for_cli

        claim_for_cli(args)  # an earlier run's report files, before the heavy imports (gate.early_claim)
        from gate.pipeline import guarded
    except KeyboardInterrupt:  # SIGINT before guarded's handler is in place: the claims stay, no traceback
        print("accuracy-gate: interrupted; could not evaluate", file=sys.stderr)
        return EXIT_ERROR
    return guarded(lambda: _main(args), _error)  # SIGTERM / SIGINT: an error report, exit 2


def _claim_after_flag_error(parser, argv) -> None:
    """A flag error stops the run before the early claim: an earlier run's passing reports at the
    report paths that a lenient parse of the same flags names (unknown flags left out) are claimed
    all the same, so the error never leaves a report that reads green. Silent: argparse's one line
    has said what is wrong; a flag whose value argparse itself refuses leaves its paths unclaimed."""
    from gate.early_claim import claim_for_cli

    with contextlib.suppress(Exception, SystemExit), contextlib.redirect_stderr(io.StringIO()):
        args, _ = argparse.ArgumentParser.parse_known_args(parser, argv)
        claim_for_cli(args)


def _main(args) -> int:
    verbose = args.verbose or os.environ.get("RUNNER_DEBUG") == "1"
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s: %(message)s")
    if getattr(args, "log_file", None):  # polygraphy run --log-file: the log goes to the file too
        try:
            logging.getLogger().addHandler(logging.FileHandler(args.log_file, encoding="utf-8"))
        except OSError as err:
            _error(f"--log-file: cannot write {args.log_file} ({err.strerror}).")
            return EXIT_ERROR
    from gate.pipeline import execute, failed

    try:
        base = base_request(args)
        try:
            request = request_from_args(args, base)
        except GateError as err:
            outcome = failed(base, str(err), err)
        else:
            outcome = execute(request)
        return _finish(outcome, verbose, bool(getattr(args, "quiet", 0)))
    except BrokenPipeError:  # e.g. `accuracy-gate check ... | head`: the reader went away
        sys.stderr.close()
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("accuracy-gate: interrupted", file=sys.stderr)
        return EXIT_ERROR
    except Exception as err:  # a bug of ours: exit 2 ("could not evaluate"), never 1 ("regressed")
        message = (
            f"internal error: {type(err).__name__}: {err} (a bug in accuracy-gate: please report it with the "
            "traceback that --verbose prints)"
        )
        if verbose:
            traceback.print_exc()
        try:  # the error report replaces a file an earlier passing run left, as for any other error
            return _finish(failed(base, message, GateError(message)), False)
        except Exception:
            _error(message)
            return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
