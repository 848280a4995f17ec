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

from gate.comparator.data_loader import DataLoader
from gate.config import GateConfig
from gate.data import open_tensor_set, write_iteration
from gate.data.onnx_model import model_input_metadata, model_io_names
from gate.errors import GateError
from gate.job import check, make_runner, record
from gate.results import GateResult


def synthetic_loader(model_path: Path, iterations: int, seed: int, val_range, input_shapes) -> DataLoader:
    """Polygraphy's seeded synthetic inputs for the model's graph inputs."""
    return DataLoader(
        seed=seed,
        iterations=iterations,
        input_metadata=model_input_metadata(model_path),
        val_range=val_range,
        input_shapes=input_shapes,
    )


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
    if options.iterations is not None and options.iterations < 1:
        raise GateError(f"--iterations must be at least 1, got {options.iterations}.")
    if options.mark_all and len(options.runners) < 2:
        raise GateError("--mark-all compares two runners tensor by tensor; give two, e.g. --trt --onnxrt.")
    for flag, names in (("--val-range", options.val_range or []), ("--input-shapes", options.input_shapes or [])):
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


def synthetic_settings(options) -> tuple[int, dict | None, dict | None]:
    """``(seed, val_range, input_shapes)`` of ``options`` parsed (seed 1 by default, as Polygraphy)."""
    from gate.backend.trt.settings import parse_shape_args

    seed = 1 if options.seed is None else options.seed
    shapes = parse_shape_args(options.input_shapes) if options.input_shapes else None
    return seed, parse_val_range(options.val_range), shapes


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

    from gate.config import trt_build_settings

    return GateConfig(
        path=None,
        source="accuracy-gate run",
        trt_build=trt_build_settings(trt, "accuracy-gate run") if "trt" in options.runners else None,
        model=Path(options.model).resolve(),
        inputs=Path.cwd(),
        golden=Path.cwd(),
        runners=list(options.runners),
        execution_providers=given("execution_providers", ["CPUExecutionProvider"]),
        graph_optimization_level=given("graph_optimization_level", "all"),
        provider_options=given("provider_options", {}),
        atol=given("atol", 1e-5),
        rtol=given("rtol", 1e-5),
        check_error_stat=given("check_error_stat", "elemwise"),
        check_average=bool(overrides.get("check_average")),
        infinities_compare_equal=overrides.get("infinities_compare_equal") is not False,
        nan_compare_equal=bool(overrides.get("nan_compare_equal")),
        validate=bool(overrides.get("validate")),
        junit=Path(overrides.get("junit") or "accuracy-gate-junit.xml"),
        title=overrides.get("title") or "",
        trt=trt,
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
) -> GateResult:
    """Runs ``cfg.runners`` on the loaded or synthesized inputs and compares them with the loaded
    golden outputs, or with the last runner's outputs. ``cfg.inputs``/``cfg.golden`` are ignored.

    Synthetic inputs and the reference runner's outputs live in a temporary folder; messages name them
    ``synthetic inputs, --seed N`` and ``the reference runner's outputs`` (``gate.job.Labelled``)
    instead of that folder's files.

    Raises:
        GateError: fewer than two things to compare; anything ``check`` raises.
    """
    runners = list(cfg.runners)
    if load_outputs is None and len(runners) < 2:
        raise GateError(
            "accuracy-gate run: nothing to compare against; give --load-outputs GOLDEN or a second runner "
            "(e.g. --trt --onnxrt)."
        )
    input_names, output_names = model_io_names(cfg.model)
    for kind in dict.fromkeys(runners):  # fail fast (e.g. TensorRT without a GPU) before any work
        make_runner(kind, cfg)
    with tempfile.TemporaryDirectory(prefix="accuracy-gate-run-") as scratch:
        scratch = Path(scratch)
        labels = {}  # what lives in the scratch folder is named as the user knows it, not by its files
        if load_outputs is not None:
            golden = Path(load_outputs).resolve()
            count = len(open_tensor_set(golden, "output", output_names))
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
        else:
            inputs = synthesize_inputs(cfg.model, scratch / "inputs", count, seed, val_range, input_shapes)
            labels["input"] = f"synthetic inputs, --seed {seed}"
        cfg = replace(cfg, inputs=inputs, golden=golden)
        if load_outputs is None:
            reference = runners.pop()
            # The reference's outputs are compared at once (a NaN there fails its row, or validation).
            record(replace(cfg, reference_runner=reference), layout="npz", warn_nan=False, labels=labels)
            cfg = replace(cfg, runners=runners, reference_name=f"{reference} (reference)")
        return check(cfg, labels=labels)


__all__ = ["run", "synthesize_inputs", "synthetic_loader"]
