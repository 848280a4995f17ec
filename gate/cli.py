"""The ``accuracy-gate`` command line: ``check``, ``merge`` and ``record``.

Flags use ``polygraphy run``'s names (``--atol``, ``--rtol``, ``--check-error-stat``, per-output
``name:value``). Exit codes: 0 all passed, 1 accuracy regressed, 2 could not evaluate (any user
mistake: one line on stderr, no traceback unless ``--verbose`` or ``RUNNER_DEBUG=1``).

Report paths (``--junit``, ``--markdown``, ``--report``, ``--write-partial``, ``[report] junit``) stay
inside the confinement root and off the files the gate reads (``gate.paths.require_output``). When
``check``, ``run`` or ``merge`` stops with an error before it has a result, the JUnit file (and the
Markdown and results files asked for) still get the error, so that no file of an earlier passing run
is left behind to read as green.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from pathlib import Path

import gate
from gate.errors import GateError
from gate.paths import DEFAULT_JUNIT

EXIT_ERROR = 2


def _float(raw):
    return float(raw)


def _add_onnxrt(parser):
    parser.add_argument(
        "--execution-providers", nargs="+", metavar="EP", help="ONNX Runtime execution providers, in priority order"
    )
    parser.add_argument(
        "--graph-optimization-level", choices=["disable", "basic", "extended", "all"], help="ONNX Runtime setting"
    )


def _add_common(parser):
    parser.add_argument("config", help="path to gate.toml")
    parser.add_argument("--model", help="the ONNX model (overrides 'model')")
    parser.add_argument("--inputs", help="stored inputs folder (overrides 'inputs')")
    parser.add_argument("--golden", help="golden outputs folder (overrides 'golden')")
    _add_onnxrt(parser)
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="folder every model/inputs/golden path and report file must stay inside (default: "
        "$GITHUB_WORKSPACE, else the config file's folder; the default JUnit path in the working directory "
        "is always allowed)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print tracebacks and debug logs")


def _add_comparison(parser):
    """Tolerances, statistics, TensorRT and report flags: shared by ``check`` and ``run``."""
    parser.add_argument(
        "--atol", "--abs-tol", nargs="+", action="extend", metavar="[OUT:]TOL", help="absolute tolerance(s)"
    )
    parser.add_argument(
        "--rtol", "--rel-tol", nargs="+", action="extend", metavar="[OUT:]TOL", help="relative tolerance(s)"
    )
    parser.add_argument(
        "--check-error-stat",
        nargs="+",
        action="extend",
        metavar="[OUT:]STAT",
        help="elemwise, max, mean, median or quantile (per output)",
    )
    parser.add_argument(
        "--check-average",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="judge the average of each statistic over iterations",
    )
    parser.add_argument(
        "--infinities-compare-equal",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="treat the same infinity on both sides as equal (default: on)",
    )
    parser.add_argument(
        "--validate",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a NaN in any output stops evaluation with an error naming it (default: off)",
    )
    parser.add_argument("--title", help="heading of the Markdown report")
    trt = parser.add_argument_group("TensorRT (runners = trt; see [trt] in gate.toml)")
    for flag in ("fp16", "bf16", "tf32", "int8"):
        trt.add_argument(f"--{flag}", action="store_true", default=None, help=f"enable {flag} precision")
    trt.add_argument("--strongly-typed", action="store_true", default=None, help="build a strongly typed network")
    trt.add_argument("--input-shapes", nargs="+", metavar="NAME:[D,...]", help="one fixed profile, e.g. x:[1,3,48,192]")
    for which in ("min", "opt", "max"):
        trt.add_argument(
            f"--trt-{which}-shapes",
            nargs="+",
            action="append",
            metavar="NAME:[D,...]",
            help=f"{which} shapes of an optimization profile (repeat the three flags for several profiles)",
        )
    trt.add_argument("--trt-flavour", choices=["tensorrt", "tensorrt_rtx"], help="which TensorRT module to use")
    trt.add_argument("--trt-engine", metavar="PATH", help="a prebuilt serialized engine instead of building one")
    trt.add_argument("--engine-cache", metavar="DIR", help="engine cache folder (default .accuracy-gate-cache/trt)")
    trt.add_argument("--workspace", metavar="SIZE", help="workspace memory-pool limit, e.g. 1G")
    trt.add_argument("--optimization-profile", type=int, metavar="N", help="the profile the runner uses")
    trt.add_argument("--allocation-strategy", choices=["static", "profile", "runtime"], help="device memory strategy")
    parser.add_argument("--junit", metavar="PATH", help="where to write the JUnit XML file")
    parser.add_argument("--markdown", metavar="PATH", help="also write the Markdown report to this file")


class _Parser(argparse.ArgumentParser):
    """argparse with the project's one-line errors (exit 2) instead of the whole usage text."""

    def error(self, message):
        self.exit(
            EXIT_ERROR,
            f"accuracy-gate: error: {self.prog.removeprefix('accuracy-gate ')}: {message} "
            f"(see '{self.prog} --help').\n",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="accuracy-gate",
        description="Run a model over stored inputs and compare every output with golden outputs.",
    )
    parser.add_argument("--version", action="version", version=f"accuracy-gate {gate.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    check = sub.add_parser("check", help="compare live outputs with the golden outputs (exit 0 pass, 1 fail, 2 error)")
    _add_common(check)
    check.add_argument("--runners", nargs="+", metavar="RUNNER", help="live runners, e.g. onnxrt")
    _add_comparison(check)
    check.add_argument(
        "--shard",
        metavar="I/N",
        help="run only shard I of N (iterations whose index %% N == I-1); exit 0 when evaluated, 2 when not: "
        "the verdict over all iterations comes from 'accuracy-gate merge'",
    )
    check.add_argument(
        "--write-partial", metavar="PATH", help="write the partial result file (for 'merge' or as a baseline)"
    )
    check.add_argument("--report", metavar="PATH", help="also write the results file (accuracy-gate-report v1)")
    _add_baseline(check)

    run = sub.add_parser(
        "run",
        help="polygraphy-run-style: compare runners with each other or with loaded golden outputs, no gate.toml",
        description="Compare a model's runners (the last one is the reference) or one runner with loaded golden "
        "outputs (saved by 'polygraphy run --save-outputs' or 'accuracy-gate record'). Synthetic inputs are "
        "Polygraphy's for the same --seed, unless --load-inputs is given. Exit 0 pass, 1 fail, 2 error.",
    )
    run.add_argument("model", help="the ONNX model")
    run.add_argument("--onnxrt", dest="runner_flags", action="append_const", const="onnxrt", help="add ONNX Runtime")
    run.add_argument("--trt", dest="runner_flags", action="append_const", const="trt", help="add TensorRT")
    run.add_argument("--load-outputs", "--load-results", metavar="PATH", help="golden outputs (file or folder)")
    run.add_argument("--load-inputs", metavar="PATH", help="stored inputs (file or folder) instead of synthetic ones")
    run.add_argument(
        "--iterations",
        "--iters",
        type=int,
        metavar="N",
        help="synthetic iterations (default 1; with --load-outputs, the number of iterations in the loaded golden "
        "outputs, which N must equal)",
    )
    run.add_argument("--seed", type=int, help="seed of the synthetic inputs (default 1, as Polygraphy)")
    run.add_argument("--val-range", nargs="+", metavar="[NAME:][LO,HI]", help="synthetic value ranges")
    _add_onnxrt(run)
    _add_comparison(run)
    run.add_argument("--report", metavar="PATH", help="also write the results file (accuracy-gate-report v1)")
    _add_output_root(run)
    run.add_argument(
        "--mark-all",
        action="store_true",
        help="also compare every intermediate tensor of the first and last runner on the first input, to find "
        "the first layer that diverges (diagnostics only; the verdict comes from the unmodified model)",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="print tracebacks and debug logs")

    merge = sub.add_parser(
        "merge",
        help="combine the partial result files of every shard and report once (exit 0 pass, 1 fail, 2 error)",
    )
    merge.add_argument("partials", nargs="+", metavar="PARTIAL", help="partial result files, or folders of them")
    merge.add_argument("--junit", metavar="PATH", help=f"where to write JUnit XML (default {DEFAULT_JUNIT})")
    merge.add_argument("--markdown", metavar="PATH", help="also write the Markdown report to this file")
    merge.add_argument("--report", metavar="PATH", help="also write the results file (accuracy-gate-report v1)")
    merge.add_argument("--write-partial", metavar="PATH", help="write the merged run as one partial result file")
    merge.add_argument("--title", help="heading of the Markdown report (default: the shards' title)")
    _add_output_root(merge)
    _add_baseline(merge)
    merge.add_argument("-v", "--verbose", action="store_true", help="print tracebacks and debug logs")

    record = sub.add_parser("record", help="write golden outputs from the reference runner")
    _add_common(record)
    record.add_argument("--force", action="store_true", help="overwrite existing golden outputs")
    record.add_argument("--reference-runner", choices=["onnxrt"], help="the runner whose outputs become golden")
    record.add_argument("--layout", choices=["onnx-zoo", "npz"], help="golden layout (default: the inputs' layout)")
    return parser


def _add_output_root(parser):
    parser.add_argument(
        "--root",
        metavar="DIR",
        help="folder every report file must stay inside (default: $GITHUB_WORKSPACE, else the working directory)",
    )


def _add_baseline(parser):
    parser.add_argument(
        "--baseline",
        action="append",
        metavar="PATH",
        help="results file, or partial result file(s) or folder, of the base branch (repeat for several "
        "shards): adds a delta column per output",
    )
    parser.add_argument(
        "--fail-on",
        choices=["threshold", "regression"],
        default=None,
        help="threshold (default): fail when an output is out of tolerance; regression: only when it got worse "
        "than the baseline by more than the margin, or crossed its tolerance",
    )
    parser.add_argument(
        "--regression-margin",
        nargs="+",
        action="extend",
        metavar="[OUT:]MARGIN",
        help="how much worse than the baseline an output's abs error may get, e.g. 1e-4 or 5%% (default 0)",
    )


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


def _path_overrides(args) -> dict:
    """The overrides that cannot fail to parse (paths and names): enough to know where reports go."""
    overrides = {
        "model": args.model,
        "inputs": args.inputs,
        "golden": args.golden,
        "execution_providers": args.execution_providers,
        "graph_optimization_level": args.graph_optimization_level,
    }
    if getattr(args, "command", None) == "record":
        overrides["reference_runner"] = args.reference_runner
    if getattr(args, "command", None) == "check":
        overrides.update(runners=args.runners, title=args.title, junit=args.junit)
        if args.trt_engine:
            overrides["trt"] = {"engine": str(Path(args.trt_engine).resolve())}
    return overrides


def _comparison_overrides(args) -> dict:
    """The comparison flags shared by ``check`` and ``run``, parsed.

    Raises:
        GateError: a value that cannot be read, naming the flag.
    """
    from gate.config import parse_per_output

    return dict(
        infinities_compare_equal=args.infinities_compare_equal,
        validate=args.validate,
        trt=trt_overrides(args),
        title=args.title,
        check_average=args.check_average,
        junit=args.junit,
        atol=parse_per_output(args.atol, _float, "--atol") if args.atol else None,
        rtol=parse_per_output(args.rtol, _float, "--rtol") if args.rtol else None,
        check_error_stat=parse_per_output(args.check_error_stat, str, "--check-error-stat")
        if args.check_error_stat
        else None,
    )


def overrides_from_args(args) -> dict:
    """CLI flags -> the flat override keys of ``gate.config.load_config``."""
    overrides = {**_path_overrides(args), "root": args.root}
    if getattr(args, "command", None) == "check":
        overrides.update(_comparison_overrides(args), runners=args.runners)
    return overrides


def flag_names(overrides: dict) -> dict:
    """The flag of each override key, for ``load_config``'s errors: ``check_error_stat`` is
    ``--check-error-stat`` (a bad flag value names the flag, not gate.toml)."""
    return {**{key: "--" + key.replace("_", "-") for key in overrides}, "trt.engine": "--trt-engine"}


_NAMES = {"junit": "--junit", "markdown": "--markdown", "report": "--report", "partial": "--write-partial"}


def _optional_path(value) -> Path | None:
    return Path(value) if value else None


def base_request(args):
    """The part of ``args``' request that cannot fail to parse: enough for an error report (``run``'s
    options too, as far as they name files the report paths must stay off)."""
    from gate.pipeline import Request, RunOptions

    command = args.command
    model = {"check": getattr(args, "model", None) or getattr(args, "config", None), "merge": "merge"}
    model = model.get(command, getattr(args, "model", None))
    return Request(
        command=command,
        config=Path(args.config) if command in ("check", "record") else None,
        overrides=_path_overrides(args) if command in ("check", "record") else {},
        sources=flag_names(_path_overrides(args)) if command in ("check", "record") else {},
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

    from gate.partial import default_partial_name, parse_shard
    from gate.pipeline import RunOptions

    changes: dict = {}
    if args.command in ("check", "merge"):
        changes["fail_on"], changes["margins"] = baseline_options(args)
    if args.command == "check":
        shard = parse_shard(args.shard) if args.shard is not None else None
        changes["shard"] = shard
        if shard is not None:
            changes["defaults"] = {"partial": default_partial_name(shard)}
            if shard.count > 1 and not args.write_partial:
                changes["partial"] = Path(changes["defaults"]["partial"])  # a shard's results only count once merged
        overrides = overrides_from_args(args)
        overrides.pop("root")
        changes.update(overrides=overrides, sources=flag_names(overrides))
    if args.command == "run":
        changes["overrides"] = {
            **_comparison_overrides(args),
            "execution_providers": args.execution_providers,
            "graph_optimization_level": args.graph_optimization_level,
        }
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
        )
    return replace(base, **changes)


def trt_overrides(args) -> dict:
    """The TensorRT flags -> keys of gate.toml's [trt] table (None where a flag was not given)."""
    from gate.backend.trt.settings import parse_shape_args

    profiles = None
    if args.trt_min_shapes or args.trt_opt_shapes or args.trt_max_shapes:
        groups = [args.trt_min_shapes or [], args.trt_opt_shapes or [], args.trt_max_shapes or []]
        if len({len(g) for g in groups}) != 1:
            raise GateError("--trt-min-shapes, --trt-opt-shapes and --trt-max-shapes must be given equally often.")
        profiles = [
            {
                "min": parse_shape_args(lo, "--trt-min-shapes"),
                "opt": parse_shape_args(op, "--trt-opt-shapes"),
                "max": parse_shape_args(hi, "--trt-max-shapes"),
            }
            for lo, op, hi in zip(*groups)
        ]
    return {
        "fp16": args.fp16,
        "bf16": args.bf16,
        "tf32": args.tf32,
        "int8": args.int8,
        "strongly_typed": args.strongly_typed,
        "input_shapes": parse_shape_args(args.input_shapes) if args.input_shapes else None,
        "profiles": profiles,
        "flavour": args.trt_flavour,
        "engine": str(Path(args.trt_engine).resolve()) if args.trt_engine else None,
        "cache_dir": args.engine_cache,
        "workspace": args.workspace,
        "optimization_profile": args.optimization_profile,
        "allocation_strategy": args.allocation_strategy,
    }


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


def _finish(outcome, verbose: bool) -> int:
    """Prints the outcome and writes its report files; returns the exit code."""
    from gate.pipeline import layer_report, write_reports
    from gate.report import render_text

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
    print(render_text(result))
    if result.status == "error":
        _error(result.message)
    try:
        print(f"JUnit: {write_reports(outcome, ('junit',))['junit']}")
        write_reports(outcome, ("markdown", "report"))
        if request.run is not None and request.run.mark_all:
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
    args = parser.parse_args(argv)
    verbose = args.verbose or os.environ.get("RUNNER_DEBUG") == "1"
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s: %(message)s")
    from gate.pipeline import execute, failed

    try:
        base = base_request(args)
        try:
            request = request_from_args(args, base)
        except GateError as err:
            outcome = failed(base, str(err), err)
        else:
            outcome = execute(request)
        return _finish(outcome, verbose)
    except BrokenPipeError:  # e.g. `accuracy-gate check ... | head`: the reader went away
        sys.stderr.close()
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("accuracy-gate: interrupted", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
