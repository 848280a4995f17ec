"""``accuracy-gate run``: a ``polygraphy run``-style comparison without a gate.toml.

``accuracy-gate run model.onnx --onnxrt --load-outputs golden.json`` checks ONNX Runtime against
golden outputs (saved by ``polygraphy run --save-outputs`` or by ``accuracy-gate record``);
``accuracy-gate run model.onnx --trt --onnxrt`` checks TensorRT against ONNX Runtime. It is the
gate's ``check`` underneath (same comparator, verdict, reports and exit codes):

- inputs: ``--load-inputs`` (any stored layout, Polygraphy's JSON included), else seeded synthetic
  inputs from the model's input metadata (``gate.comparator.DataLoader``: the same values as
  Polygraphy's for the same ``--seed``, so a golden file saved by ``polygraphy run`` is reproduced);
- reference: ``--load-outputs``, else the LAST runner given, whose outputs are recorded first and
  every other runner is compared with them (for two runners this is Polygraphy's default pair, the
  second as the reference; for three or more Polygraphy compares neighbours instead).
"""

from __future__ import annotations

import math
import tempfile
from dataclasses import replace
from pathlib import Path
from shlex import quote

from gate.comparator.data_loader import DataLoader
from gate.config import GateConfig
from gate.data import open_tensor_set, write_iteration
from gate.data.onnx_model import model_input_metadata, model_io_names
from gate.data.polygraphy_json import SeveralRunners
from gate.errors import GateError
from gate.job import check, make_runner, record
from gate.results import GateResult


def synthetic_loader(model_path: Path, iterations: int, seed: int, val_range, input_shapes) -> DataLoader:
    """Polygraphy's seeded synthetic inputs for the model's graph inputs."""
    loader = DataLoader(
        seed=seed,
        iterations=iterations,
        input_metadata=model_input_metadata(model_path),
        val_range=val_range,
        input_shapes=input_shapes,
    )
    loader.shapes_option = "--input-shapes"  # its messages name the flag
    return loader


def synthesize_inputs(model_path: Path, folder: Path, iterations: int, seed: int, val_range, input_shapes) -> Path:
    """Writes ``iterations`` seeded synthetic feed_dicts as ``<folder>/<i>.npz`` and returns the folder."""
    loader = synthetic_loader(model_path, iterations, seed, val_range, input_shapes)
    for index in range(iterations):
        write_iteration(folder, "npz", "input", index, loader[index])
    return folder


def check_options(options, model_inputs) -> None:
    """``run``'s flags that contradict each other or name inputs the model lacks: one-line errors.
    ``options`` is a ``gate.pipeline.RunOptions`` (the flags as given)."""
    if options.load_inputs and (options.seed is not None or options.val_range or options.iterations is not None):
        given = "--seed" if options.seed is not None else "--val-range" if options.val_range else "--iterations"
        raise GateError(f"{given} shapes synthetic inputs; it cannot be used with --load-inputs.")
    read = [Path(p).resolve() for p in (options.model, options.load_inputs, options.load_outputs) if p]
    for flag, path in (("--save-inputs", options.save_inputs), ("--save-outputs", options.save_outputs)):
        target = Path(path).resolve() if path else None
        if target is not None and any(p.is_relative_to(target) or target.is_relative_to(p) for p in read):
            raise GateError(f"{flag} {path}: would write over the model or the data this run reads; name another path.")
    if options.iterations is not None and options.iterations < 1:
        raise GateError(f"--iterations must be at least 1, got {options.iterations}.")
    for flag, given in (("--mark-all", options.mark_all), ("--onnx-outputs", options.onnx_outputs),
                        ("--trt-outputs", options.trt_outputs)):  # fmt: skip
        if given and len(options.runners) < 2:
            raise GateError(f"{flag} compares two runners tensor by tensor; give two, e.g. --trt --onnxrt.")
    excludes = (("--onnx-exclude-outputs", options.onnx_exclude_outputs, options.onnx_outputs),
                ("--trt-exclude-outputs", options.trt_exclude_outputs, options.trt_outputs))  # fmt: skip
    for flag, excluded, marked in excludes:
        if excluded and marked != "*":
            raise GateError(f"{flag} leaves tensors out of 'mark all'; give {flag.replace('exclude-', '')} mark all.")
    if isinstance(options.onnx_outputs, tuple):  # a name that marks nothing fails before any work
        import fnmatch

        from gate.backend.trt.layerwise import onnx_tensor_names

        known = [*model_inputs, *model_io_names(Path(options.model).resolve())[1],
                 *onnx_tensor_names(Path(options.model).resolve())]  # fmt: skip
        for pattern in options.onnx_outputs:
            if not any(fnmatch.fnmatchcase(name, pattern) for name in known):
                raise GateError(f"--onnx-outputs: '{pattern}' matches no tensor of {Path(options.model).name}.")
    for flag, names in (("--val-range", options.val_range or []), ("--input-shapes", options.input_shapes or [])):
        seen = set()
        for entry in names:
            name = entry.rpartition(":")[0]
            if name in seen:
                raise GateError(f"{flag}: input '{name or '(default)'}' is given twice.")
            seen.add(name)
            if name and name not in model_inputs:
                raise GateError(f"{flag}: the model has no input '{name}'; its inputs are {model_inputs}.")


def _marked(values, flag: str):
    if not values:
        return None
    if [v.lower() for v in values] == ["mark", "all"] or list(values) == ["*"]:
        return "*"
    if "mark" in values and "all" in values:
        raise GateError(f"{flag}: 'mark all' marks every tensor; it cannot be combined with names ({values}).")
    return tuple(values)


def marked_outputs(args) -> dict:
    """``RunOptions``' marked-tensor fields from ``run``'s flags, as Polygraphy reads them:
    ``--onnx-outputs mark all`` (or ``'*'``) marks every tensor, names or fnmatch patterns mark those;
    ``--mark-all`` is ``--onnx-outputs mark all --trt-outputs mark all``.

    Raises:
        GateError: ``mark all`` mixed with names, naming the flag.
    """
    everything = "*" if args.mark_all else None
    return {
        "onnx_outputs": everything or _marked(args.onnx_outputs, "--onnx-outputs"),
        "onnx_exclude_outputs": tuple(args.onnx_exclude_outputs or ()),
        "trt_outputs": everything or _marked(args.trt_outputs, "--trt-outputs"),
        "trt_exclude_outputs": tuple(args.trt_exclude_outputs or ()),
    }


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


def synthetic_settings(options) -> tuple[int, dict | None, dict | None]:
    """``(seed, val_range, input_shapes)`` of ``options`` parsed (seed 1 by default, as Polygraphy)."""
    from gate.backend.trt.settings import parse_shape_args

    seed = 1 if options.seed is None else options.seed
    shapes = parse_shape_args(options.input_shapes) if options.input_shapes else None
    return seed, parse_val_range(options.val_range), shapes


_PER_OUTPUT_FLAGS = {"atol": "--atol", "rtol": "--rtol", "check_error_stat": "--check-error-stat",
                     "error_quantile": "--error-quantile"}  # fmt: skip


def run_config(options, overrides) -> GateConfig:
    """The comparison settings of ``accuracy-gate run`` (no gate.toml): ``overrides`` are the parsed
    comparison flags (``gate.config.load_config``'s keys, read and checked by ``gate.options``).

    Raises:
        GateError: a flag contradicting another, a bad tolerance, an input the model lacks.
    """
    model_inputs = model_io_names(Path(options.model).resolve())[0]
    check_options(options, model_inputs)
    trt = {key: value for key, value in (overrides.get("trt") or {}).items() if value is not None}

    def given(key, default):
        return default if overrides.get(key) is None else overrides[key]

    from gate.backend.providers import check_provider_options
    from gate.compare_funcs import check_compare_settings, check_error_quantile
    from gate.compare_options import COMPARE_FUNC_OPTIONS
    from gate.config import trt_build_settings

    providers = given("execution_providers", ["CPUExecutionProvider"])
    if overrides.get("golden_runner") is not None and options.load_outputs is None:
        raise GateError("--golden-runner picks the runner of a --load-outputs file that holds several; give one.")
    compare = {name: overrides[name] for name, *_ in COMPARE_FUNC_OPTIONS if overrides.get(name) is not None}
    check_compare_settings(compare, lambda key, output="": dict((r[0], r[1]) for r in COMPARE_FUNC_OPTIONS)[key])
    check_error_quantile(overrides.get("error_quantile"), lambda output: "--error-quantile")
    return GateConfig(
        **compare,
        path=None,
        source="accuracy-gate run",
        trt_build=trt_build_settings(trt, "accuracy-gate run") if "trt" in options.runners else None,
        model=Path(options.model).resolve(),
        inputs=Path.cwd(),
        golden=Path.cwd(),
        runners=list(options.runners),
        golden_runner=overrides.get("golden_runner"),
        execution_providers=providers,
        graph_optimization_level=given("graph_optimization_level", "all"),
        provider_options=check_provider_options(given("provider_options", {}), providers, "--provider-options"),
        atol=given("atol", 1e-5),
        rtol=given("rtol", 1e-5),
        check_error_stat=given("check_error_stat", "elemwise"),
        check_average=bool(overrides.get("check_average")),
        infinities_compare_equal=overrides.get("infinities_compare_equal") is not False,
        nan_compare_equal=bool(overrides.get("nan_compare_equal")),
        validate=bool(overrides.get("validate")),
        fail_fast=bool(overrides.get("fail_fast")),
        error_quantile=given("error_quantile", 0.99),
        junit=Path(overrides.get("junit") or "accuracy-gate-junit.xml"),
        title=overrides.get("title") or "",
        trt=trt,
        named_by={
            key: dict.fromkeys(overrides[key], flag)
            for key, flag in _PER_OUTPUT_FLAGS.items()
            if isinstance(overrides.get(key), dict)
        },  # fmt: skip
    )


def run(
    cfg: GateConfig,
    *,
    load_inputs: Path | None = None,
    load_outputs: Path | None = None,
    iterations: int | None = None,
    seed: int = 1,
    val_range=None,
    input_shapes=None,
    save_inputs: Path | None = None,
    save_outputs: Path | None = None,
) -> GateResult:
    """Runs ``cfg.runners`` on the loaded or synthesized inputs and compares them with the loaded
    golden outputs, or with the last runner's outputs; one runner and no golden outputs: it runs and
    reports what it ran (``gate.run_outputs.inference_result``), as ``polygraphy run --onnxrt``.
    ``cfg.inputs``/``cfg.golden`` are ignored. ``save_inputs``/``save_outputs``: Polygraphy JSON, as
    ``polygraphy run --save-inputs/--save-outputs`` writes it (a path with an extension is one file,
    any other a folder of per-iteration files); the outputs are the live runners' (not loaded ones).

    Synthetic inputs and the reference runner's outputs live in a temporary folder; messages name them
    ``synthetic inputs, --seed N`` and ``the reference runner's outputs`` (``gate.job.Labelled``)
    instead of that folder's files.

    Raises:
        GateError: anything ``check`` raises; a save path that cannot be written.
    """
    from gate.run_outputs import OutputsWriter, inference_result, save_feed_dicts, tensor_summary

    runners = list(cfg.runners)
    input_names, output_names = model_io_names(cfg.model)
    for kind in dict.fromkeys(runners):  # fail fast (e.g. TensorRT without a GPU) before any work
        make_runner(kind, cfg)
    with tempfile.TemporaryDirectory(prefix="accuracy-gate-run-") as scratch:
        scratch = Path(scratch)
        labels = {}  # what lives in the scratch folder is named as the user knows it, not by its files
        if load_outputs is not None:
            golden = Path(load_outputs).resolve()
            try:
                count = len(open_tensor_set(golden, "output", output_names, cfg.golden_runner))
            except SeveralRunners as err:  # run has no gate.toml: only the flag
                raise err.picked_by(f"--golden-runner {quote(err.runners[-1])}") from None
            if iterations is not None and iterations != count:
                raise GateError(
                    f"{golden}: holds {count} golden iterations but --iterations asks for {iterations} (D6: counts "
                    "must match; leave --iterations out to use the golden count)."
                )
        else:
            golden = scratch / "golden"
            count = iterations or 1
            labels["output"] = "the reference runner's outputs"
        if load_inputs is not None:
            inputs = Path(load_inputs).resolve()
            used = f"{inputs}: "
        else:
            inputs = synthesize_inputs(cfg.model, scratch / "inputs", count, seed, val_range, input_shapes)
            labels["input"] = used = f"synthetic inputs, --seed {seed}"
            used += ": "
        first = open_tensor_set(inputs, "input", input_names)
        used += tensor_summary(first[0]) if len(first) else "(none)"
        if save_inputs is not None:
            save_feed_dicts(open_tensor_set(inputs, "input", input_names), save_inputs)
        cfg = replace(cfg, inputs=inputs, golden=golden)
        writer = OutputsWriter(save_outputs, exclude=cfg.reference_name if load_outputs is not None else None)
        if load_outputs is None:
            reference = runners.pop()
            # The reference's outputs are compared at once (a NaN there fails its row, or validation).
            record(replace(cfg, reference_runner=reference), layout="npz", warn_nan=False, labels=labels)
            if not runners:  # one runner, nothing to compare with: it ran; report that
                with writer:
                    result = inference_result(cfg, reference, open_tensor_set(golden, "output", output_names), writer)
                result.inputs = used
                return result
            cfg = replace(cfg, runners=runners, reference_name=f"{reference} (reference)")
        with writer:
            result = check(cfg, labels=labels, sink=writer.append if save_outputs is not None else None)
        result.inputs = used
        return result


__all__ = ["run", "synthesize_inputs", "synthetic_loader"]
