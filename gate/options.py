"""The option table: every setting of the gate once, with its gate.toml key, CLI flag(s), action
input, parser, default and help. Everything else is generated from it or checked against it:

- gate.toml's schema (``toml_schema``: which keys each table may hold, of which TOML types);
- the CLI's argument groups (``gate.option_readers.add_arguments``: each subcommand takes the options
  whose ``commands`` name it) and the overrides its flags give (``overrides_from_args``);
- the action's inputs (``INPUTS``, in action.yml's order; ``DEFAULTS``) and the overrides they give
  (``gate.option_readers.overrides_from_inputs``); tests check action.yml and the README against them.

Adding an option is one entry in :data:`OPTIONS`, e.g. a comparison switch in ``[compare]``::

    Option("nan_compare_equal", toml="compare.nan_compare_equal", flags=("--nan-compare-equal",),
           input="nan_compare_equal", kind=BOOL, commands=COMPARE, default=False,
           help="treat NaN on both sides as equal (default: off)"),

plus the field of the same name in ``gate.config.GateConfig`` (tests/test_options.py fails until it is
there), its use where it acts, a description in action.yml and a row in the README's inputs table.

Kinds say how a raw value is read: ``PATH``, ``STR``, ``LIST`` (TOML array; flag ``nargs="+"``; input
split on spaces or commas), ``BOOL`` (``--x`` / ``--no-x``; input ``true``/``false``), ``CHOICE``,
``INT``, ``PER_OUTPUT_FLOAT`` / ``PER_OUTPUT_STR`` (``polygraphy run``'s ``[<output>:]<value>``
entries, ``gate.per_output.parse_per_output``), ``SHAPES`` (``name:[d,...]`` entries) and ``SIZE``.
"""

from __future__ import annotations

from gate import compare_options as _funcs  # the compare functions' rows
from gate.option_model import (  # noqa: F401 (the vocabulary, re-exported)
    BOOL,
    CHECK,
    CHOICE,
    COMPARE,
    CONFIGURED,
    FLAG,
    IGNORED,
    INT,
    LIST,
    MERGE,
    NOT_APPLICABLE,
    PATH,
    PER_OUTPUT_FLOAT,
    PER_OUTPUT_STR,
    PROFILES,
    PROVIDER_OPTIONS,
    RECORD,
    REPORTING,
    RUN,
    SHAPES,
    SIZE,
    STR,
    TOML_TYPES,
    Option,
)
from gate.options_run import POLYGRAPHY_ONLY, RUN_OWN

TRT_GROUP = "TensorRT (runners = trt; see [trt] in gate.toml)"
_PER_OUTPUT_ARGS = {"nargs": "+", "action": "extend"}


def _trt(name, flag=None, kind=BOOL, help="", **kw) -> Option:
    """A [trt] key (``polygraphy run``'s flag names)."""
    flags = () if flag is False else (flag or f"--{name.replace('_', '-')}",)
    return Option(f"trt.{name}", toml=f"trt.{name}", flags=flags, kind=kind, commands=COMPARE, group=TRT_GROUP,
                  dest=kw.pop("dest", name), help=help, **kw)  # fmt: skip


OPTIONS: tuple[Option, ...] = (
    Option("config", flags=("config",), input="config", kind=PATH, commands=CONFIGURED, help="path to gate.toml"),
    # --- accuracy-gate run's and merge's own arguments ---------------------------------------------------
    Option(
        "partials",
        flags=("partials",),
        kind=PATH,
        commands=(MERGE,),
        argparse={"nargs": "+", "metavar": "PARTIAL"},
        help="partial result files, or folders of them",
    ),  # fmt: skip
    *RUN_OWN,
    # --- settings: gate.toml, flags and inputs ---------------------------------------------------------
    Option("model", toml="model", flags=("--model",), input="model", kind=PATH, commands=CONFIGURED,
           help="the ONNX model (overrides 'model')"),  # fmt: skip
    Option("inputs", toml="inputs", flags=("--inputs",), input="inputs", kind=PATH, commands=CONFIGURED,
           help="stored inputs folder (overrides 'inputs')"),  # fmt: skip
    Option("golden", toml="golden", flags=("--golden",), input="golden", kind=PATH, commands=CONFIGURED,
           help="golden outputs folder (overrides 'golden')"),  # fmt: skip
    Option(
        "golden_runner",
        toml="golden_runner",
        flags=("--golden-runner",),
        commands=(CHECK, RUN),
        help="the runner whose outputs are the golden ones, where a Polygraphy JSON golden file holds several "
        "(polygraphy run --save-outputs with two runners)",
        argparse={"metavar": "NAME"},
    ),  # fmt: skip
    Option(
        "runners",
        toml="runners",
        flags=("--runners",),
        input="runners",
        kind=LIST,
        commands=(CHECK,),
        default=["onnxrt"],
        help="live runners, e.g. onnxrt",
        argparse={"metavar": "RUNNER"},
    ),  # fmt: skip
    Option(
        "reference_runner",
        toml="reference_runner",
        flags=("--reference-runner",),
        kind=CHOICE,
        commands=(RECORD,),
        choices=("onnxrt",),
        default="onnxrt",
        help="the runner whose outputs become golden",
    ),  # fmt: skip
    Option(
        "execution_providers",
        toml="onnxrt.execution_providers",
        flags=("--execution-providers", "--providers"),
        input="execution_providers",
        kind=LIST,
        commands=(CHECK, RECORD, RUN),
        default=["CPUExecutionProvider"],
        help="ONNX Runtime execution providers, in priority order; each an exact name or a case-insensitive "
        "part of one, e.g. cpu (as polygraphy run --providers)",
        argparse={"metavar": "EP"},
    ),  # fmt: skip
    Option(
        "graph_optimization_level",
        toml="onnxrt.graph_optimization_level",
        flags=("--graph-optimization-level",),
        input="graph_optimization_level",
        kind=CHOICE,
        commands=(CHECK, RECORD, RUN),
        choices=("disable", "basic", "extended", "all"),
        aliases={"ORT_DISABLE_ALL": "disable", "ORT_ENABLE_BASIC": "basic", "ORT_ENABLE_EXTENDED": "extended",
                 "ORT_ENABLE_ALL": "all"},  # fmt: skip
        default="all",
        help="ONNX Runtime setting (or its ORT enum name, as polygraphy run: ORT_DISABLE_ALL ...)",
    ),  # fmt: skip
    Option("provider_options", toml="onnxrt.provider_options", flags=("--provider-options",),
           input="provider_options", kind=PROVIDER_OPTIONS, commands=(CHECK, RECORD, RUN), default={},
           argparse={"nargs": "+", "action": "extend", "metavar": "EP:KEY=VALUE[,...]"},
           help="options of an execution provider, e.g. CUDAExecutionProvider:device_id=0,use_tf32=0"),  # fmt: skip
    Option(
        "atol",
        toml="compare.atol",
        flags=("--atol", "--abs-tol"),
        input="atol",
        kind=PER_OUTPUT_FLOAT,
        commands=COMPARE,
        default=1e-5,
        help="absolute tolerance(s)",
        argparse={**_PER_OUTPUT_ARGS, "metavar": "[OUT:]TOL"},
    ),  # fmt: skip
    Option(
        "rtol",
        toml="compare.rtol",
        flags=("--rtol", "--rel-tol"),
        input="rtol",
        kind=PER_OUTPUT_FLOAT,
        commands=COMPARE,
        default=1e-5,
        help="relative tolerance(s)",
        argparse={**_PER_OUTPUT_ARGS, "metavar": "[OUT:]TOL"},
    ),  # fmt: skip
    Option(
        "check_error_stat",
        toml="compare.check_error_stat",
        flags=("--check-error-stat",),
        input="check_error_stat",
        kind=PER_OUTPUT_STR,
        commands=COMPARE,
        default="elemwise",
        help="elemwise, max, mean, median or quantile (per output)",
        argparse={**_PER_OUTPUT_ARGS, "metavar": "[OUT:]STAT"},
    ),  # fmt: skip
    Option(
        "check_average",
        toml="compare.check_average",
        flags=("--check-average",),
        input="check_average",
        kind=BOOL,
        commands=COMPARE,
        default=False,
        help="judge the average of each statistic over iterations",
    ),  # fmt: skip
    Option(
        "infinities_compare_equal",
        toml="compare.infinities_compare_equal",
        flags=("--infinities-compare-equal",),
        input="infinities_compare_equal",
        kind=BOOL,
        commands=COMPARE,
        default=True,
        help="treat the same infinity on both sides as equal (default: on)",
    ),  # fmt: skip
    Option("nan_compare_equal", toml="compare.nan_compare_equal", flags=("--nan-compare-equal",),
           input="nan_compare_equal", kind=BOOL, commands=COMPARE, default=False,
           help="treat NaN on both sides at the same element as equal (default: off, as Polygraphy)"),  # fmt: skip
    Option(
        "validate",
        toml="compare.validate",
        flags=("--validate",),
        input="validate",
        kind=BOOL,
        commands=COMPARE,
        default=False,
        help="a NaN or Inf in any output stops evaluation with an error naming it, as polygraphy run --validate "
        "(default: off)",
    ),  # fmt: skip
    Option(
        "fail_fast",
        toml="compare.fail_fast",
        flags=("--fail-fast",),
        kind=BOOL,
        commands=COMPARE,
        default=False,
        help="stop comparing after the first iteration with an output out of tolerance (default: off)",
    ),  # fmt: skip
    Option(
        "error_quantile",
        toml="compare.error_quantile",
        flags=("--error-quantile",),
        kind=PER_OUTPUT_FLOAT,
        commands=COMPARE,
        default=0.99,
        help="the quantile of check_error_stat quantile, in [0, 1] (default 0.99, per output as [OUT:]Q)",
        argparse={**_PER_OUTPUT_ARGS, "metavar": "[OUT:]Q"},
    ),  # fmt: skip
    *(Option(name, toml=f"compare.{name}", flags=(flag, "--compare") if name == "compare_func" else (flag,),
             input=name, kind=kind, commands=COMPARE, default=default,
             help=help, argparse=_funcs.COMPARE_FUNC_ARGPARSE[name])
      for name, flag, kind, default, metavar, help in _funcs.COMPARE_FUNC_OPTIONS),  # gate.compare_options
    Option(
        "junit",
        toml="report.junit",
        flags=("--junit",),
        input="junit_path",
        kind=PATH,
        commands=REPORTING,
        help="where to write the JUnit XML file",
        argparse={"metavar": "PATH"},
        help_for={MERGE: "where to write JUnit XML (default accuracy-gate-junit.xml)"},
    ),  # fmt: skip
    Option(
        "report",
        flags=("--report",),
        input="report_path",
        kind=PATH,
        commands=REPORTING,
        action_default="accuracy-gate-report.json",
        help="also write the results file (accuracy-gate-report v1)",
        argparse={"metavar": "PATH"},
    ),  # fmt: skip
    Option(
        "title",
        toml="report.title",
        flags=("--title",),
        input="title",
        commands=REPORTING,
        help="heading of the Markdown report",
        help_for={MERGE: "heading of the Markdown report (default: the shards' title)"},
    ),  # fmt: skip
    Option("mode", input="mode", kind=CHOICE, choices=("check", "comment", "merge"), action_default="check"),
    Option(
        "shard",
        flags=("--shard",),
        input="shard",
        commands=(CHECK,),
        argparse={"metavar": "I/N"},
        help="run only shard I of N (iterations whose index %% N == I-1); exit 0 when evaluated, 2 when not: "
        "the verdict over all iterations comes from 'accuracy-gate merge'",
    ),  # fmt: skip
    Option(
        "partial",
        flags=("--write-partial",),
        input="partial_path",
        kind=PATH,
        commands=(CHECK, MERGE),
        dest="write_partial",
        argparse={"metavar": "PATH"},
        help="write the partial result file (for 'merge' or as a baseline)",
        help_for={MERGE: "write the merged run as one partial result file"},
    ),  # fmt: skip
    # --- how check runs (gate.parallel, gate.preview) --------------------------------------------------
    Option("devices", flags=("--devices",), commands=(CHECK,), argparse={"metavar": "all|0,1,..."},
           help="one shard per GPU, in parallel processes, merged (gate.parallel)"),  # fmt: skip
    Option("jobs", flags=("--jobs",), kind=INT, commands=(CHECK,), argparse={"type": int, "metavar": "N"},
           help="N shards in N parallel CPU processes, merged"),  # fmt: skip
    Option("preview_precision", flags=("--preview-precision",), kind=CHOICE, choices=("fp16", "bf16"),
           commands=(CHECK,), help="convert the model as strongly typed TensorRT would and check it under ONNX "
           "Runtime CPU"),  # fmt: skip
    Option(
        "baseline",
        flags=("--baseline",),
        input="baseline",
        kind=PATH,
        commands=(CHECK, MERGE),
        argparse={"action": "append", "metavar": "PATH"},
        help="results file, or partial result file(s) or folder, of the base branch (repeat for several "
        "shards): adds a delta column per output",
    ),  # fmt: skip
    Option(
        "fail_on",
        flags=("--fail-on",),
        input="fail_on",
        kind=CHOICE,
        commands=(CHECK, MERGE),
        choices=("threshold", "regression"),
        action_default="threshold",
        help="threshold (default): fail when an output is out of tolerance; regression: only when it got worse "
        "than the baseline by more than the margin, or crossed its tolerance",
    ),  # fmt: skip
    Option(
        "regression_margin",
        flags=("--regression-margin",),
        input="regression_margin",
        commands=(CHECK, MERGE),
        argparse={**_PER_OUTPUT_ARGS, "metavar": "[OUT:]MARGIN"},
        help="how much worse than the baseline an output's abs error may get, e.g. 1e-4 or 5%% (default 0)",
    ),  # fmt: skip
    Option("github_token", input="github_token"),
    Option("pr_number", input="pr_number", kind=INT),
    Option(
        "comment_mode",
        input="comment_mode",
        kind=CHOICE,
        choices=("always", "on-change", "on-failure", "off"),
        action_default="always",
    ),  # fmt: skip
    Option("comment", input="comment", kind=BOOL),
    Option("comment_key", input="comment_key"),
    Option("comment_author", input="comment_author"),
    # --- the CLI's own flags -------------------------------------------------------------------------
    Option(
        "markdown",
        flags=("--markdown",),
        kind=PATH,
        commands=REPORTING,
        argparse={"metavar": "PATH"},
        help="also write the Markdown report to this file",
    ),  # fmt: skip
    Option(
        "quiet",
        flags=("-q", "--quiet"),
        kind=FLAG,
        commands=REPORTING,
        argparse={"action": "count", "default": 0},
        help="no per-output details below the table (printed on failure and with -v); the rest as without it",
    ),  # fmt: skip
    Option(
        "log_file",
        flags=("--log-file",),
        kind=PATH,
        commands=(CHECK, RECORD, RUN, MERGE),
        argparse={"metavar": "PATH"},
        help="also write the log (warnings; debug lines with -v) to this file",
    ),  # fmt: skip
    Option(
        "verbose",
        flags=("-v", "--verbose"),
        kind=FLAG,
        argparse={"action": "count", "default": 0},
        commands=(CHECK, RECORD, RUN, MERGE),
        help="print tracebacks and debug logs",
    ),  # fmt: skip
    Option(
        "root",
        flags=("--root",),
        kind=PATH,
        commands=(CHECK, RECORD, RUN, MERGE),
        argparse={"metavar": "DIR"},
        help="folder every model/inputs/golden path and report file must stay inside (default: "
        "$GITHUB_WORKSPACE, else the config file's folder; the default JUnit path in the working directory "
        "is always allowed)",
        help_for=dict.fromkeys(
            (RUN, MERGE),
            "folder every report file must stay inside (default: $GITHUB_WORKSPACE, else the working directory)",
        ),
    ),  # fmt: skip
    Option("force", flags=("--force",), kind=FLAG, commands=(RECORD,), help="overwrite existing golden outputs"),
    Option(
        "layout",
        flags=("--layout",),
        kind=CHOICE,
        commands=(RECORD,),
        choices=("onnx-zoo", "npz", "polygraphy-json"),
        help="golden layout (default: the inputs' layout; Polygraphy JSON inputs give a folder of per-iteration "
        "Polygraphy JSON RunResults, as polygraphy run --save-outputs DIR)",
    ),  # fmt: skip
    _trt(
        "flavour",
        flag="--trt-flavour",
        kind=CHOICE,
        choices=("tensorrt", "tensorrt_rtx"),
        dest="trt_flavour",
        help="which TensorRT module to use",
    ),  # fmt: skip
    _trt("fp16", help="enable fp16 precision"),
    _trt("bf16", help="enable bf16 precision"),
    _trt("tf32", help="enable tf32 precision"),
    _trt("int8", help="enable int8 precision"),
    _trt("strongly_typed", help="build a strongly typed network"),
    _trt(
        "input_shapes",
        kind=SHAPES,
        argparse={"nargs": "+", "metavar": "NAME:[D,...]"},
        flags_for={RUN: ("--inputs",)},
        help="one fixed profile, e.g. x:[1,3,48,192] (run: also the synthetic inputs' shapes)",
    ),  # fmt: skip
    _trt("profiles", flag=False, kind=PROFILES),  # --trt-min/opt/max-shapes, below
    Option(
        "trt.workspace",
        toml="trt.workspace",
        flags=("--pool-limit", "--memory-pool-limit", "--workspace"),
        kind=SIZE,
        commands=COMPARE,
        group=TRT_GROUP,
        dest="workspace",
        argparse={"nargs": "+", "metavar": "[workspace:]SIZE"},
        help="workspace memory-pool limit, e.g. 1G, or polygraphy's workspace:1G (K, M, G suffixes)",
    ),  # fmt: skip
    _trt(
        "builder_optimization_level",
        kind=INT,
        argparse={"type": int, "metavar": "N"},
        help="TensorRT builder optimization level, 0..5 (default: TensorRT's, 3)",
    ),  # fmt: skip
    _trt(
        "cache_dir",
        flag="--engine-cache",
        kind=PATH,
        dest="engine_cache",
        argparse={"metavar": "DIR"},
        help="engine cache folder (default .accuracy-gate-cache/trt)",
    ),  # fmt: skip
    _trt(
        "engine",
        flag="--trt-engine",
        kind=PATH,
        dest="trt_engine",
        argparse={"metavar": "PATH"},
        help="a prebuilt serialized engine instead of building one",
    ),  # fmt: skip
    _trt("optimization_profile", kind=INT, argparse={"type": int, "metavar": "N"}, help="the profile the runner uses"),
    _trt(
        "allocation_strategy", kind=CHOICE, choices=("static", "profile", "runtime"), help="device memory strategy"
    ),  # fmt: skip
    *POLYGRAPHY_ONLY,
)
BY_NAME = {option.name: option for option in OPTIONS}
PROFILE_FLAGS = {which: f"--trt-{which}-shapes" for which in ("min", "opt", "max")}


def toml_schema() -> dict:
    """gate.toml's tables: ``{table: {key: TOML type or types}}``, ``""`` for the top level."""
    schema: dict = {"": {}}
    for option in OPTIONS:
        if option.toml:
            table, _, key = option.toml.rpartition(".")
            schema.setdefault(table, {})[key] = TOML_TYPES[option.kind]
    order = ("", "onnxrt", "compare", "report", "trt")
    return {table: schema[table] for table in order}


INPUTS = tuple(option.input for option in OPTIONS if option.input)
"""The action's inputs, in action.yml's order."""
DEFAULTS = {option.input: option.action_default for option in OPTIONS if option.action_default is not None}
"""Defaults the action applies to an empty input; action.yml declares the same ones (the other
inputs default to gate.toml's setting)."""
SETTINGS = tuple(option.name for option in OPTIONS if option.toml)
"""The options gate.toml holds: ``load_config``'s override keys (``trt.<key>`` for [trt])."""
UNFAILING = (PATH, STR, LIST, BOOL, CHOICE, INT)
