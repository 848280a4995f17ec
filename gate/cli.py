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
import math
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import gate
from gate.errors import GateError
from gate.paths import DEFAULT_JUNIT, confinement_root, replaceable, require_output

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
        "--nan-compare-equal",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="treat NaN on both sides at the same element as equal (default: off, as Polygraphy)",
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


def overrides_from_args(args) -> dict:
    """CLI flags -> the flat override keys of ``gate.config.load_config``."""
    from gate.config import parse_per_output

    overrides = {
        "model": args.model,
        "inputs": args.inputs,
        "golden": args.golden,
        "execution_providers": args.execution_providers,
        "graph_optimization_level": args.graph_optimization_level,
        "root": args.root,
    }
    if getattr(args, "command", None) == "record":
        overrides["reference_runner"] = args.reference_runner
    if getattr(args, "command", None) == "check":
        overrides.update(
            runners=args.runners,
            infinities_compare_equal=args.infinities_compare_equal,
            nan_compare_equal=args.nan_compare_equal,
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
    return overrides


def flag_names(overrides: dict) -> dict:
    """The flag of each override key, for ``load_config``'s errors: ``check_error_stat`` is
    ``--check-error-stat`` (a bad flag value names the flag, not gate.toml)."""
    return {**{key: "--" + key.replace("_", "-") for key in overrides}, "trt.engine": "--trt-engine"}


def _load_config(args, progress: dict | None = None):
    from gate.config import load_config

    overrides = overrides_from_args(args)
    return load_config(args.config, overrides, flag_names(overrides), progress)


@dataclass
class _Reports:
    """Where ``check``, ``run`` and ``merge`` write their reports, for the error path of :func:`main`:
    an error before a result exists still gets a JUnit file (and the Markdown and results files asked
    for), so that no file of an earlier passing run stays behind as green evidence."""

    model: str = "model"  # names the error testcase
    progress: dict = field(default_factory=dict)  # load_config's (check)
    paths: dict | None = None  # kind -> path (None: not asked for), once every report path passed its checks
    reported: bool = False  # a result is being reported: the error path writes nothing


_KINDS = {"junit": "--junit", "markdown": "--markdown", "report": "--report"}


def _report_paths(args, root, protected, junit, partial_default=None) -> dict:
    """The checked report paths (``gate.paths.require_output``): ``junit`` as given (already checked),
    ``--markdown``, ``--report`` and ``--write-partial`` where the command has them.

    Raises:
        GateError: a path outside ``root`` or over what the gate reads, naming the flag.
    """
    paths = {"junit": junit}
    for kind in ("markdown", "report"):
        value = getattr(args, kind, None)
        paths[kind] = require_output(Path(value), root, _KINDS[kind], protected) if value else None
    if getattr(args, "write_partial", None):
        require_output(Path(args.write_partial), root, "--write-partial", protected, default=partial_default)
    return paths


_READS = {
    "check": (("model", "the model"), ("inputs", "the stored inputs"), ("golden", "the golden outputs")),
    "run": (
        ("model", "the model"),
        ("load_inputs", "the loaded inputs"),
        ("load_outputs", "the loaded golden outputs"),
    ),
    "merge": (("partials", "the partial result files being merged"),),
}


def _reads(args) -> list:
    """``(path, description)`` of the files a command's flags make it read, besides gate.toml's."""
    reads = [(path, "the baseline") for path in getattr(args, "baseline", None) or []]
    for key, what in _READS.get(args.command, ()):
        value = getattr(args, key)
        reads += [(path, what) for path in ([] if value is None else value if isinstance(value, list) else [value])]
    return reads


def _error_paths(args, reports: _Reports) -> dict:
    """Where an error that stopped the command before its report paths were checked may be written:
    each path that passes the checks (others are left out); where gate.toml could not be read (its model
    and data paths unknown), only a path with no file yet or with a report of the same kind."""
    progress = reports.progress
    if args.command == "check":
        root = progress.get("root") or confinement_root(Path(args.config), args.root)
    else:
        root = confinement_root(None, args.root)
    protected = progress.get("protected", [(Path(args.config), "the config file")] if args.command == "check" else [])
    protected = protected + _reads(args)
    known = args.command != "check" or progress.get("complete", False)
    paths = {}
    for kind, flag in _KINDS.items():
        value = getattr(args, kind, None)
        try:
            if kind == "junit" and "junit" in progress:
                path = progress["junit"]  # checked by load_config (None: refused)
            elif kind == "junit":
                path = _junit(args, root, protected)
            else:
                path = require_output(Path(value), root, flag, protected) if value else None
        except GateError:
            path = None
        if path is not None and not known and not replaceable(path, kind):
            path = None
        paths[kind] = path
    return paths


def _write_error_reports(args, reports: _Reports, message: str) -> None:
    """The error as the only testcase of the JUnit file (as the action writes it), and in the Markdown
    and results files asked for; a file that cannot be written is left (the error line said why the
    gate could not evaluate)."""
    from gate.report import render_markdown, write_junit
    from gate.report.json_report import write_report
    from gate.results import ERROR, GateResult

    result = GateResult(model=reports.model, status=ERROR, message=message)
    paths = reports.paths if reports.paths is not None else _error_paths(args, reports)
    writers = {
        "junit": lambda p: write_junit(result, p),
        "markdown": lambda p: Path(p).write_text(render_markdown(result), "utf-8"),
        "report": lambda p: write_report(result, p),
    }
    for kind, path in paths.items():
        if path is None:
            continue
        try:
            _write_report(path, kind, writers[kind])
        except GateError:
            continue
        if kind == "junit":
            print(f"JUnit: {path}")


def _write_report(path, what, write):
    """Writes a report file (parent folders created); an unwritable path is a one-line GateError."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(path)
    except OSError as err:
        raise GateError(f"{path}: cannot write the {what} ({err.strerror or err}).") from err
    return path


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


def run_check(args, reports: _Reports) -> int:
    from gate.job import check
    from gate.partial import default_partial_name, parse_shard, write_partial

    reports.model = Path(args.model or args.config).name
    shard = parse_shard(args.shard) if args.shard is not None else None
    partial_default = default_partial_name(shard) if shard is not None else None
    if shard is not None and shard.count > 1 and not args.write_partial:
        args.write_partial = partial_default  # a shard's results only count once merged
    cfg = _load_config(args, reports.progress)
    reports.model = cfg.model.name
    protected = reports.progress["protected"] + _reads(args)
    reports.paths = _report_paths(args, reports.progress["root"], protected, cfg.junit, partial_default)
    baseline = _baseline(args)
    result = check(cfg, shard, partial=bool(args.write_partial))
    if args.write_partial:
        print(f"partial result file: {write_partial(result.run, args.write_partial)}")
    code = _report(args, result, reports, baseline)
    if shard is not None and shard.count > 1 and code != EXIT_ERROR:
        print(f"shard {shard} evaluated; the verdict over all iterations comes from 'accuracy-gate merge'.")
        return 0
    return code


def run_merge(args, reports: _Reports) -> int:
    from gate.merge import merge_files
    from gate.partial import result_of, write_partial

    reports.model = "merge"
    root, protected = confinement_root(None, args.root), _reads(args)
    reports.paths = _report_paths(args, root, protected, _junit(args, root, protected))
    baseline = _baseline(args)
    run = merge_files(args.partials)
    if args.title:
        run.title = args.title
    result = result_of(run)
    if args.write_partial:
        print(f"partial result file: {write_partial(run, args.write_partial)}")
    return _report(args, result, reports, baseline)


def _junit(args, root, protected) -> Path:
    """``--junit``, else the default path, checked (``gate.paths.require_output``).

    Raises:
        GateError: the path leads outside ``root`` or over what the gate reads.
    """
    if args.junit:
        return require_output(Path(args.junit), root, "--junit", protected, default=DEFAULT_JUNIT)
    return require_output(Path(DEFAULT_JUNIT), root, "the default JUnit path", default=DEFAULT_JUNIT)


def _baseline(args):
    """``(baseline, fail_on, margins)`` from the flags, the baseline read (None without one)."""
    from gate.baseline import load_baseline

    fail_on, margins = baseline_options(args)
    return (load_baseline(args.baseline) if args.baseline else None), fail_on, margins


def _report(args, result, reports: _Reports, baseline) -> int:
    """Applies the baseline, prints the table and writes the report files (``reports.paths``, checked);
    returns the exit code."""
    from gate.baseline import apply_baseline
    from gate.report import render_markdown, render_text, write_junit

    baseline, fail_on, margins = baseline
    if baseline is not None:
        apply_baseline(result, baseline, fail_on, margins)
    print(render_text(result))
    if result.status == "error":
        print(f"accuracy-gate: error: {result.message}", file=sys.stderr)
    paths = reports.paths
    reports.reported = True  # from here on the files hold this result, or a write error says why not
    path = _write_report(paths["junit"], "JUnit file", lambda p: write_junit(result, p))
    print(f"JUnit: {path}")
    if paths["markdown"]:
        _write_report(
            paths["markdown"], "Markdown report", lambda p: Path(p).write_text(render_markdown(result), "utf-8")
        )
    if paths["report"]:
        from gate.report.json_report import write_report

        _write_report(paths["report"], "results file", lambda p: write_report(result, p))
    return result.exit_code


def _check_run_args(args, model_inputs) -> None:
    """``run``'s flags that contradict each other or name inputs the model lacks: one-line errors."""
    from gate.config import check_tolerance, parse_per_output

    for key in ("atol", "rtol"):
        if getattr(args, key):
            value = parse_per_output(getattr(args, key), _float, f"--{key}")
            check_tolerance(None, key, value, lambda key, output="": f"--{key}")
    if args.load_inputs and (args.seed is not None or args.val_range or args.iterations is not None):
        given = "--seed" if args.seed is not None else "--val-range" if args.val_range else "--iterations"
        raise GateError(f"{given} shapes synthetic inputs; it cannot be used with --load-inputs.")
    if args.iterations is not None and args.iterations < 1:
        raise GateError(f"--iterations must be at least 1, got {args.iterations}.")
    if args.mark_all and len(args.runner_flags or ["onnxrt"]) < 2:
        raise GateError("--mark-all compares two runners tensor by tensor; give two, e.g. --trt --onnxrt.")
    for flag, names in (("--val-range", args.val_range or []), ("--input-shapes", args.input_shapes or [])):
        seen = set()
        for entry in names:
            name = entry.rpartition(":")[0]
            if name in seen:
                raise GateError(f"{flag}: input '{name or '(default)'}' is given twice.")
            seen.add(name)
            if name and name not in model_inputs:
                raise GateError(f"{flag}: the model has no input '{name}'; its inputs are {model_inputs}.")


def parse_val_range(values) -> dict | None:
    """``polygraphy run --val-range``: ``[lo,hi]`` entries, optionally ``name:[lo,hi]`` (split on the
    last ``:``); a bare range is the ``""`` default."""
    if not values:
        return None
    ranges = {}
    for entry in values:
        name, sep, text = entry.rpartition(":")
        if not sep:
            name, text = "", entry
        try:
            low, high = (float(part) for part in text.strip().strip("[]").split(","))
        except ValueError as err:
            raise GateError(f"--val-range: cannot read {entry!r}; expected [LO,HI] or NAME:[LO,HI].") from err
        if not (math.isfinite(low) and math.isfinite(high)) or low > high:
            raise GateError(f"--val-range: {entry!r} must be two finite bounds with LO <= HI.")
        ranges[name] = (low, high)
    return ranges


def run_run(args, reports: _Reports) -> int:
    from gate.backend.trt.settings import parse_shape_args
    from gate.config import GateConfig, parse_per_output
    from gate.job import model_io_names
    from gate.run import run

    reports.model = Path(args.model).name
    root, protected = confinement_root(None, args.root), _reads(args)
    junit = _junit(args, root, protected)
    reports.paths = _report_paths(args, root, protected, junit)
    _check_run_args(args, model_io_names(Path(args.model).resolve())[0])
    trt = {key: value for key, value in trt_overrides(args).items() if value is not None}
    cfg = GateConfig(
        path=Path("accuracy-gate run"),
        model=Path(args.model).resolve(),
        inputs=Path.cwd(),
        golden=Path.cwd(),
        runners=args.runner_flags or ["onnxrt"],
        execution_providers=args.execution_providers or ["CPUExecutionProvider"],
        graph_optimization_level=args.graph_optimization_level or "all",
        atol=parse_per_output(args.atol, _float, "--atol") if args.atol else 1e-5,
        rtol=parse_per_output(args.rtol, _float, "--rtol") if args.rtol else 1e-5,
        check_error_stat=parse_per_output(args.check_error_stat, str, "--check-error-stat")
        if args.check_error_stat
        else "elemwise",
        check_average=bool(args.check_average),
        infinities_compare_equal=args.infinities_compare_equal is not False,
        nan_compare_equal=bool(args.nan_compare_equal),
        validate=bool(args.validate),
        junit=junit,
        title=args.title or "",
        trt=trt,
    )
    seed = 1 if args.seed is None else args.seed
    val_range = parse_val_range(args.val_range)
    input_shapes = parse_shape_args(args.input_shapes) if args.input_shapes else None
    result = run(
        cfg,
        load_inputs=args.load_inputs,
        load_outputs=args.load_outputs,
        iterations=args.iterations,
        seed=seed,
        val_range=val_range,
        input_shapes=input_shapes,
    )
    code = _report(args, result, reports, (None, None, None))
    if args.mark_all:
        from gate.data import open_tensor_set
        from gate.job import model_io_names
        from gate.layerwise import compare_layers, render_layers
        from gate.run import synthetic_loader

        if args.load_inputs:
            feed = open_tensor_set(Path(args.load_inputs).resolve(), "input", model_io_names(cfg.model)[0])[0]
        else:
            feed = synthetic_loader(cfg.model, 1, seed, val_range, input_shapes)[0]
        print(render_layers(*compare_layers(cfg, feed)))
    return code


def run_record(args, reports: _Reports) -> int:
    from gate.job import record

    cfg = _load_config(args)
    written = record(cfg, force=args.force, layout=args.layout)
    print(f"recorded golden outputs: {len(written)} files under {cfg.golden}")
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    verbose = args.verbose or os.environ.get("RUNNER_DEBUG") == "1"
    logging.basicConfig(level=logging.DEBUG if verbose else logging.WARNING, format="%(levelname)s: %(message)s")
    reports = _Reports()
    try:
        command = {"check": run_check, "merge": run_merge, "record": run_record, "run": run_run}[args.command]
        return command(args, reports)
    except GateError as err:
        if verbose:
            traceback.print_exc()
        print(f"accuracy-gate: error: {err}", file=sys.stderr)
        if args.command != "record" and not reports.reported:
            _write_error_reports(args, reports, str(err))
        return EXIT_ERROR
    except BrokenPipeError:  # e.g. `accuracy-gate check ... | head`: the reader went away
        sys.stderr.close()
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("accuracy-gate: interrupted", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
