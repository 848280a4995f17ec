"""The option table's entries for ``accuracy-gate run``'s own arguments (``RUN_OWN``: the model,
the runners, loaded and saved data, synthetic inputs, marked tensors) and for ``polygraphy run``'s
flags that have no setting of their own here (``POLYGRAPHY_ONLY``: accepted without effect, or
refused with one line naming the flag). ``gate.options.OPTIONS`` holds them in its order."""

from __future__ import annotations

from gate.option_model import FLAG, IGNORED, INT, LIST, NOT_APPLICABLE, PATH, RUN, Option

RUN_OWN: tuple[Option, ...] = (
    Option("run.model", flags=("model",), kind=PATH, commands=(RUN,), help="the ONNX model"),
    Option(
        "run.onnxrt",
        flags=("--onnxrt",),
        commands=(RUN,),
        help="add ONNX Runtime",
        argparse={"dest": "runner_flags", "action": "append_const", "const": "onnxrt"},
    ),  # fmt: skip
    Option(
        "run.trt",
        flags=("--trt",),
        commands=(RUN,),
        help="add TensorRT",
        argparse={"dest": "runner_flags", "action": "append_const", "const": "trt"},
    ),  # fmt: skip
    Option(
        "run.load_outputs",
        flags=("--load-outputs", "--load-results"),
        kind=PATH,
        commands=(RUN,),
        dest="load_outputs",
        argparse={"metavar": "PATH"},
        help="golden outputs (file or folder)",
    ),  # fmt: skip
    Option(
        "run.load_inputs",
        flags=("--load-inputs", "--load-input-data"),
        kind=PATH,
        commands=(RUN,),
        dest="load_inputs",
        argparse={"metavar": "PATH"},
        help="stored inputs (file or folder) instead of synthetic ones",
    ),  # fmt: skip
    Option(
        "run.iterations",
        flags=("--iterations", "--iters"),
        kind=INT,
        commands=(RUN,),
        dest="iterations",
        argparse={"type": int, "metavar": "N"},
        help="synthetic iterations (default 1; with --load-outputs, the number of iterations in the loaded golden "
        "outputs, which N must equal)",
    ),  # fmt: skip
    Option(
        "run.seed",
        flags=("--seed",),
        kind=INT,
        commands=(RUN,),
        dest="seed",
        argparse={"type": int},
        help="seed of the synthetic inputs (default 1, as Polygraphy)",
    ),  # fmt: skip
    Option(
        "run.val_range",
        flags=("--val-range",),
        commands=(RUN,),
        dest="val_range",
        argparse={"nargs": "+", "metavar": "[NAME:][LO,HI]"},
        help="synthetic value ranges",
    ),  # fmt: skip
    Option(
        "run.save_inputs",
        flags=("--save-inputs", "--save-input-data"),
        kind=PATH,
        commands=(RUN,),
        dest="save_inputs",
        argparse={"metavar": "PATH"},
        help="save the inputs fed to the runners as Polygraphy JSON (read back by --load-inputs, also "
        "polygraphy's): a path with an extension is one file, any other a folder of per-iteration files",
    ),  # fmt: skip
    Option(
        "run.save_outputs",
        flags=("--save-outputs", "--save-results"),
        kind=PATH,
        commands=(RUN,),
        dest="save_outputs",
        argparse={"metavar": "PATH"},
        help="save the live runners' outputs as a Polygraphy JSON RunResults (read back by --load-outputs, "
        "also polygraphy's): a path with an extension is one file, any other a folder of per-iteration files",
    ),  # fmt: skip
    Option(
        "run.mark_all",
        flags=("--mark-all",),
        kind=FLAG,
        commands=(RUN,),
        dest="mark_all",
        help="also compare every intermediate tensor of the first and last runner on the first input, to "
        "find the first layer that diverges (diagnostics only; the verdict comes from the unmodified "
        "model)",
    ),  # fmt: skip
    Option(
        "run.onnx_outputs",
        flags=("--onnx-outputs",),
        kind=LIST,
        commands=(RUN,),
        dest="onnx_outputs",
        argparse={"metavar": "NAME"},
        help="mark these tensors (names or fnmatch patterns; 'mark all' or '*': every tensor) as outputs of the "
        "ONNX Runtime runners and compare each on the first input (diagnostics only; the verdict comes from the "
        "unmodified model)",
    ),  # fmt: skip
    Option(
        "run.onnx_exclude_outputs",
        flags=("--onnx-exclude-outputs",),
        kind=LIST,
        commands=(RUN,),
        dest="onnx_exclude_outputs",
        argparse={"metavar": "NAME"},
        help="tensors (names or patterns) left out of --onnx-outputs mark all",
    ),  # fmt: skip
    Option(
        "run.trt_outputs",
        flags=("--trt-outputs",),
        kind=LIST,
        commands=(RUN,),
        dest="trt_outputs",
        argparse={"metavar": "NAME"},
        help="mark these tensors (names, patterns, or 'mark all') as outputs of the TensorRT network, compared as "
        "--onnx-outputs",
    ),  # fmt: skip
    Option(
        "run.trt_exclude_outputs",
        flags=("--trt-exclude-outputs",),
        kind=LIST,
        commands=(RUN,),
        dest="trt_exclude_outputs",
        argparse={"metavar": "NAME"},
        help="tensors (names or patterns) left out of --trt-outputs mark all",
    ),  # fmt: skip
)

_WHY = {
    "--data-loader-script": "accuracy-gate runs no user scripts; save the data loader's feed_dicts with "
    "polygraphy run --save-inputs and pass them with --load-inputs",
    "--postprocess": "outputs are compared as the model gives them; post-process them into the model, or save "
    "post-processed outputs with polygraphy and compare those with --load-outputs",
    "--postprocess-func-script": "accuracy-gate runs no user scripts",
    "--compare-func-script": "accuracy-gate runs no user scripts; choose a comparison with --compare-func",
    "--no-shape-check": "every output must have the golden shape exactly (D-table: no broadcasting)",
    "--save-engine": "engines are kept in the engine cache (--engine-cache); give a prebuilt one with --trt-engine",
    "--save-timing-cache": "the timing cache lives in the engine cache (--engine-cache)",
    "--load-timing-cache": "the timing cache lives in the engine cache (--engine-cache)",
}


def _refused(flag: str) -> Option:
    return Option(
        f"run.{flag[2:].replace('-', '_')}",
        flags=(flag,),
        kind=NOT_APPLICABLE,
        commands=(RUN,),
        group=POLYGRAPHY_GROUP,
        argparse={"nargs": "*", "metavar": "ARG"},
        help=f"not applicable: {_WHY[flag]}",
    )


POLYGRAPHY_GROUP = "polygraphy run flags without a setting of their own here"
POLYGRAPHY_ONLY: tuple[Option, ...] = (
    Option(
        "run.warm_up",
        flags=("--warm-up",),
        kind=IGNORED,
        commands=(RUN,),
        group=POLYGRAPHY_GROUP,
        argparse={"type": int, "metavar": "N"},
        help="accepted for polygraphy run; no effect (warm-up runs change timings only, and no timings are reported)",
    ),  # fmt: skip
    Option(
        "run.sequential_runners",
        flags=("--sequential-runners",),
        kind=IGNORED,
        commands=(RUN,),
        group=POLYGRAPHY_GROUP,
        argparse={"action": "store_true", "default": None},
        help="accepted for polygraphy run; runners always run one after another on each iteration",
    ),  # fmt: skip
    Option(
        "run.use_subprocess",
        flags=("--use-subprocess",),
        kind=IGNORED,
        commands=(RUN,),
        group=POLYGRAPHY_GROUP,
        argparse={"action": "store_true", "default": None},
        help="accepted for polygraphy run; runners run in this process (a runner that crashes ends the run, "
        "exit code not 0 or 1)",
    ),  # fmt: skip
    Option(
        "run.verbosity",
        flags=("--verbosity",),
        kind=IGNORED,
        commands=(RUN,),
        group=POLYGRAPHY_GROUP,
        argparse={"nargs": "+", "metavar": "LEVEL"},
        help="accepted for polygraphy run; use -v (debug logs) or -q (one line per output)",
    ),  # fmt: skip
    Option(
        "run.silent",
        flags=("--silent",),
        kind=IGNORED,
        commands=(RUN,),
        group=POLYGRAPHY_GROUP,
        argparse={"action": "store_true", "default": None},
        help="accepted for polygraphy run; as -q (the table and the verdict are always printed)",
    ),  # fmt: skip
    *(_refused(flag) for flag in _WHY),
)
