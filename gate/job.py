"""The gate's main jobs: ``check`` (stream stored inputs through the live runners and compare every
output with the golden outputs) and ``record`` (write golden outputs from a reference runner)."""

from __future__ import annotations

import json
import logging
import platform
import shutil
import tempfile
import time
from pathlib import Path
from shlex import quote

import numpy as np

import gate
from gate.ahead import StreamAhead, runner_outputs_copied
from gate.ahead import on_gpu as inference_ahead
from gate.backend.golden import GoldenRunner
from gate.backend.gpu_facts import runtime_facts
from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
from gate.comparator import Comparator
from gate.comparator.bases import value_or_from_dict
from gate.comparator.data_loader import coerce_feed_dict
from gate.comparator.details import DetailsOnFailure
from gate.comparator.kernels_fused import kernel_name
from gate.comparator.kernels_threads import compare_threads
from gate.comparator.output_funcs import SelectedOutputs
from gate.compare_funcs import build_compare_funcs, check_output_dtypes, uses_simple
from gate.compare_funcs import setting as compare_setting
from gate.compared_run import ComparedRun, config_settings, env_commit, golden_fingerprint, result_of
from gate.config import GateConfig, trt_build_settings
from gate.data import open_tensor_set, write_iteration
from gate.data.golden_folder import check_leftovers, recorded_golden_files, remove_golden_files
from gate.data.onnx_model import model_io, output_dtypes
from gate.data.polygraphy_json import SeveralRunners
from gate.data.readahead import ReadAhead
from gate.data.storage import LAYOUTS, MODEL_ZOO, POLYGRAPHY_JSON
from gate.dtype_rules import GateCompareFunc
from gate.errors import GateError
from gate.paths import refuse_symlinks
from gate.results import GateResult
from gate.shards import DigestingView, Shard, ShardView
from gate.stream_progress import Guarded as _Guarded
from gate.stream_progress import Progress as _Progress
from gate.stream_progress import progress_line  # noqa: F401 (gate.job.progress_line: its old home)
from gate.structured import all_leaves
from gate.task_metrics import TaskCompareFunc, open_labels

log = logging.getLogger("gate")


def make_runner(kind: str, cfg: GateConfig, name: str | None = None):
    if kind == "onnxrt":
        session = SessionFromOnnx(
            cfg.model, cfg.execution_providers, cfg.graph_optimization_level, provider_options=cfg.provider_options
        )
        return OnnxrtRunner(session, name=name or "onnxrt")
    if kind == "trt":
        return trt_runner(cfg, name or "trt")
    raise GateError(f"{cfg.source}: unknown runner '{kind}'.")


def trt_runner(cfg: GateConfig, name: str):
    """A ``TrtRunner`` from the config's ``[trt]`` table: probes the GPU first (one clear error when the
    container has none), then builds the engine from the model through the engine cache (or loads
    ``engine``, a prebuilt serialized engine).

    Raises:
        GateError: no GPU visible; a bad ``[trt]`` setting (prefixed with the config file).
    """
    from gate.backend import trt

    settings = dict(cfg.trt)
    build = cfg.trt_build if cfg.trt_build is not None else trt_build_settings(cfg.trt, cfg.source)
    flavour = build.flavour
    trt.probe_gpu(flavour=flavour)  # settings first: a config mistake shows even on a machine without a GPU
    try:
        if "engine" in settings:
            engine = trt.EngineFromPath(settings["engine"], flavour)
        else:
            cache_dir = Path(settings.get("cache_dir", ".accuracy-gate-cache/trt"))
            engine = trt.EngineFromOnnx(cfg.model, build, cache_dir=cache_dir)
        return trt.TrtRunner(
            engine,
            name=name,
            optimization_profile=settings.get("optimization_profile"),
            allocation_strategy=settings.get("allocation_strategy"),
        )
    except GateError as err:
        raise GateError(f"{cfg.source}: [trt] {err}") from err


class Labelled:
    """A stored tensor set whose iterations are named ``label`` in messages instead of by their files
    (``accuracy-gate run``'s synthetic inputs and its reference runner's outputs live in a temporary
    folder that is gone by the time anyone reads the message)."""

    def __init__(self, stored, label: str):
        self.stored = stored
        self.label = label

    def __len__(self) -> int:
        return len(self.stored)

    def __getitem__(self, index: int):
        return self.stored[index]

    def location(self, index: int) -> str:
        return self.label

    def __getattr__(self, name):
        return getattr(self.stored, name)


def _where(inputs, golden, index) -> str:
    """The files of golden-set iteration ``index``, for messages (a ``Labelled`` set by its label)."""
    where = inputs.label if isinstance(inputs, Labelled) else f"inputs {inputs.location(index)}"
    if not isinstance(golden, Labelled) and golden.location(index) != inputs.location(index):
        where += f", golden {golden.location(index)}"
    return where


def _open(path, kind, names, labels, types=None, runner=None):
    try:
        stored = open_tensor_set(path, kind, names, runner, types)
    except SeveralRunners as err:  # check: gate.toml's key or the flag
        example = err.runners[-1]
        raise err.picked_by(
            f"golden_runner = {json.dumps(example)} in gate.toml or --golden-runner {quote(example)}"
        ) from None
    label = (labels or {}).get(kind)
    return Labelled(stored, label) if label else stored


def _facts(cfg: GateConfig, runners, model_sha256: str) -> dict:
    from gate.backend.ort_install import onnxruntime_version

    providers = []
    for runner in runners:
        providers.extend(p for p in getattr(runner, "execution_providers", []) if p not in providers)
    return {
        "accuracy_gate_version": gate.__version__,
        "onnxruntime_version": onnxruntime_version(),
        "numpy_version": np.__version__,
        "compare_kernel": kernel_name(),  # compiled, or numpy (with the reason where a build was refused)
        "python_version": platform.python_version(),
        "execution_providers": ",".join(providers or cfg.execution_providers),
        "model_sha256": model_sha256,
        **runtime_facts(runners),  # providers in use with their options; the GPU and its libraries
    }


def check(cfg: GateConfig, shard: Shard | None = None, partial: bool = False, labels=None, sink=None) -> GateResult:
    """Streams every stored input (or only shard ``shard``'s, see ``gate.shards``) through the live
    runners and the golden set, compares each output (SimpleCompareFunc with the configured
    tolerances, golden as the reference), and returns the verdict. Memory stays flat: one iteration
    of inputs, outputs and golden data at a time.

    ``result.run`` holds what was compared (``gate.compared_run.ComparedRun``) for a partial result file;
    with ``partial`` its golden fingerprint is computed and every golden iteration's contents are
    hashed as they stream by. ``labels`` (``{"input" | "output": label}``) names a set in messages
    by that label instead of its files (``Labelled``). ``sink(run_results)``, if given, sees each
    iteration's RunResults (every runner's outputs, the golden set's last) before it is compared.

    Raises:
        GateError: anything that prevents evaluation (bad model, missing or mismatched data, a runner
            failing, more shards than iterations), naming the file, tensor or iteration.
    """
    start = time.perf_counter()
    compare_threads()  # ACCURACY_GATE_COMPARE_THREADS checked before any model runs
    kernel_name()  # and ACCURACY_GATE_COMPARE_KERNEL, whatever the outputs' dtypes
    shard = shard or Shard()
    input_names, output_names, model_sha256, types = model_io(cfg.model)
    _check_per_output_names(cfg, output_names)
    check_output_dtypes(cfg, output_dtypes(types, output_names), cfg.source)
    inputs = _open(cfg.inputs, "input", input_names, labels, types)
    if len(inputs) == 0:
        raise GateError(f"{cfg.inputs}: no stored inputs; nothing to compare.")
    _check_golden_folder(cfg, inputs.layout, inputs.layout)
    # A golden file (Polygraphy JSON) beside model-zoo inputs has no output_<K>.pb to look for.
    zoo_without_outputs = inputs.layout == MODEL_ZOO and cfg.golden.is_dir() and not recorded_golden_files(cfg.golden)
    if not cfg.golden.exists() and "golden" in cfg.paths_named_by:  # given by a flag: missing, not unrecorded
        raise GateError(
            f"{cfg.golden}: not found ({cfg.paths_named_by['golden']}); expected golden outputs there: {LAYOUTS}."
        )
    if not cfg.golden.exists() or zoo_without_outputs:
        raise GateError(f"{cfg.golden}: no golden outputs yet; record them with 'accuracy-gate record {cfg.source}'.")
    golden = _open(cfg.golden, "output", output_names, labels, types, cfg.golden_runner)
    if len(golden) != len(inputs):
        hint = (
            "every input needs its golden outputs ('accuracy-gate record --force' records them all anew)"
            if len(golden) < len(inputs)
            else "the extra golden iterations have no stored inputs; remove them"
        )
        raise GateError(
            f"{cfg.golden}: {len(golden)} golden iterations for {len(inputs)} stored inputs in {cfg.inputs}; {hint}."
        )
    shard.check_total(len(golden), cfg.golden)
    fingerprint = golden_fingerprint(golden) if partial else {"iterations": len(golden), "files_sha256": ""}
    runners = [
        make_runner(kind, cfg, kind if cfg.runners.count(kind) == 1 else f"{kind}-{i}")
        for i, kind in enumerate(cfg.runners)
    ]
    compare_func = GateCompareFunc(
        atol=cfg.atol,
        rtol=cfg.rtol,
        check_error_stat=cfg.check_error_stat,
        infinities_compare_equal=cfg.infinities_compare_equal,
        error_quantile=cfg.error_quantile,
        compute_medians=False,  # the gate reports no median unless it checks it: keep the kernel's speed
        nans_compare_equal=cfg.nan_compare_equal,
        source=cfg.source,
    )
    details = DetailsOnFailure(compare_func, cfg.infinities_compare_equal, cfg.nan_compare_equal)
    compare_func = [("simple", SelectedOutputs(details, uses_simple(cfg))), *build_compare_funcs(cfg)]
    store = open_labels(cfg, len(inputs))
    if store is not None:  # the label of the iteration being compared, by its position in the shard
        chosen = list(shard.indices(len(golden)))
        label_at = lambda position: (store[chosen[position]]["label"], str(store.location(chosen[position])))  # noqa: E731
        compare_func.append(("task", TaskCompareFunc(cfg, label_at, len(cfg.runners))))
    selected = list(shard.indices(len(golden)))
    golden_view = ShardView(golden, selected)
    digests = DigestingView(golden_view) if partial else None
    run = ComparedRun(
        model=cfg.model.name,
        title=cfg.title,
        settings={},
        golden=fingerprint,
        shard=shard,
        indices=[],
        accuracy=None,
        commit=env_commit(),
        scope=f"shard {shard}: {len(selected)} of {len(golden)} iterations" if shard.count > 1 else "",
    )
    run.facts = {"model_sha256": model_sha256}  # the rest when the runners have run (_facts)
    ahead_inputs, ahead_golden = ReadAhead(ShardView(inputs, selected)), ReadAhead(digests or golden_view)
    try:
        return _check_streaming(
            cfg,
            start,
            (ahead_inputs, ahead_golden),
            (inputs, golden),
            input_names,
            runners,
            compare_func,
            run,
            digests,
            sink,
            details,
        )
    finally:
        ahead_inputs.close()
        ahead_golden.close()


def _check_streaming(
    cfg, start, views, full, input_names, runners, compare_func, run, digests, sink=None, details=None
) -> GateResult:
    """``views``: the shard's inputs and golden iterations (read ahead); ``full``: the whole sets, to
    name an iteration's files by its golden-set index."""
    inputs, golden = views
    progress = _Progress(inputs, golden, input_names)
    stream = Comparator.run(
        [*runners, GoldenRunner(golden, name=cfg.reference_name)], data_loader=progress.feed(), streaming=True
    )
    if cfg.validate:  # as polygraphy run --validate: NaN and Inf
        stream = Comparator.validate(stream, check_inf=True, check_nan=True)
    ahead = None
    if inference_ahead(cfg):  # a GPU runs iterations i + 1, i + 2 while iteration i is compared (gate.ahead)
        stream = ahead = StreamAhead(stream, detach=runner_outputs_copied(runners))
    if sink is not None:  # after the worker: it sees only the iterations that are compared (--fail-fast)
        stream = (sink(run_results) or run_results for run_results in stream)  # sink returns None
    names = [name for name, _ in compare_func]
    try:
        accuracies = Comparator.compare_accuracy(  # --fail-fast: the stream stops (gate.stream_progress.Guarded)
            progress.until_error(stream),
            compare_func=[_Guarded(func, progress, _judging(cfg, name)) for name, func in compare_func],
            comparisons=[(i, len(runners)) for i in range(len(runners))],
        )
    finally:
        if ahead is not None:  # the worker stops and the runners are deactivated before anything else
            ahead.close()
    for name, result in zip(names, accuracies):  # check_average: every function that has a metric to average
        result.aggregation = "average" if cfg.check_average and name not in ("indices", "task") else "per_sample"
    accuracy, run.metrics = accuracies[0], dict(zip(names[1:], accuracies.lst[1:]))
    selected = inputs.indices
    if progress.error is not None:
        for result in accuracies:  # an iteration whose comparison raised holds nothing worth reporting
            for pair in result:
                del result[pair][progress.compared :]
        position = progress.error_iteration
        index = selected[position] if position is not None else None
        message = str(progress.error)
        if index is not None and str(full[0].location(index)) not in message:
            message = f"iteration {index} ({_where(*full, index)}): {message}"
        of = f"{len(selected)} iterations" + (f" of shard {run.shard}" if run.shard.count > 1 else "")
        stop = f"stopped after {progress.compared} of {of}"
        if position is None and progress.compared == 0:  # no iteration was fed: the runners could not start
            stop = "could not start" + (f" shard {run.shard}" if run.shard.count > 1 else "")
        run.stopped = {"iteration": index, "message": f"{stop}: {message}"}
        if getattr(progress.error, "output", None) is not None:  # the output that stopped it (gate.results)
            run.stopped["output"] = progress.error.output
    run.facts = _facts(cfg, runners, run.facts["model_sha256"])
    run.settings = config_settings(cfg, run.facts["model_sha256"])
    run.accuracy = accuracy
    run.indices = selected[: progress.compared]
    if progress.error is None and progress.failed_at is not None:
        run.fail_fast_stop = selected[progress.failed_at]  # the run regressed (gate.compared_run.result_of)
        stop = f"--fail-fast: stopped at the first failing iteration, {progress.compared} of {len(selected)} compared"
        run.scope = f"{run.scope}; {stop}" if run.scope else stop
    if digests is not None:
        run.golden_sha256 = [digests.digests.get(position) for position in range(progress.compared)]

    def where(index):
        if index not in run.where:
            run.where[index] = _where(*full, index)
        return run.where[index]

    run.duration_s = time.perf_counter() - start
    run.config_path = str(cfg.path) if cfg.path else ""  # the JUnit file's 'file' (gate.report.junit)
    result = result_of(run, where)
    if details is not None:
        details.attach(result.rows, run.indices)
    for row in result.rows:  # a merge of shards names the files of any shard's worst iteration
        if row.worst_iteration is not None:
            where(row.worst_iteration)
    return result


def _judging(cfg: GateConfig, name: str):
    """--fail-fast: ``judging(output)``, whether compare function ``name``'s result decides ``output``'s
    verdict (its ``compare_verdict`` is ``all`` or ``name``; as ``gate.compare_funcs.judge_rows``), so
    that only such a failure stops the run; None without fail_fast. Task metrics are counted over the
    run, never failed by one iteration."""
    if not cfg.fail_fast or name == "task":
        return None
    verdict = compare_setting(cfg, "compare_verdict")
    return lambda output: value_or_from_dict(verdict, output, "all") in ("all", name)


def _check_golden_folder(cfg: GateConfig, golden_layout: str, inputs_layout: str) -> None:
    """Only the ONNX model-zoo layout keeps golden outputs beside the inputs (output_<K>.pb next to
    input_<K>.pb); any other layout needs a golden folder of its own."""
    shared = cfg.golden.resolve() == Path(cfg.inputs).resolve()
    if shared and (golden_layout != MODEL_ZOO or inputs_layout != MODEL_ZOO):
        if golden_layout == MODEL_ZOO:  # model-zoo golden files beside inputs of another layout
            raise GateError(
                f"{cfg.source}: output_<K>.pb files can sit beside the inputs only when the inputs are in the ONNX "
                f'model-zoo layout too, but {cfg.inputs} holds {inputs_layout} inputs; set golden = "golden".'
            )
        raise GateError(
            f"{cfg.source}: golden outputs in the {golden_layout} layout need a folder of their own, but 'golden' is "
            f'the inputs folder {cfg.inputs}; set golden = "golden" (only the ONNX model-zoo layout keeps '
            "output_<K>.pb beside input_<K>.pb)."
        )


def _check_per_output_names(cfg: GateConfig, output_names) -> None:
    """A per-output tolerance or statistic for an output the model does not have is a typo that
    would silently leave the real output at the default: refuse it."""
    for setting in ("atol", "rtol", "check_error_stat", "error_quantile"):
        value = getattr(cfg, setting)
        unknown = [name for name in value if name and name not in output_names] if isinstance(value, dict) else []
        flag = cfg.named_by.get(setting, {}).get(unknown[0]) if unknown else None
        if flag:
            raise GateError(
                f"{flag} {unknown[0]}:{value[unknown[0]]}: {cfg.model.name} has no output '{unknown[0]}'; its outputs "
                f"are {output_names}."
            )
        if unknown:
            raise GateError(
                f"{cfg.source}: {setting} names output '{unknown[0]}', which {cfg.model.name} does not have; "
                f"its outputs are {output_names}."
            )


def record(
    cfg: GateConfig, force: bool = False, layout: str | None = None, warn_nan: bool = True, labels=None
) -> list[Path]:
    """Runs the reference runner (``cfg.reference_runner``, ONNX Runtime CPU by default) over every
    stored input and writes its outputs as the golden set.

    The golden layout follows the inputs' layout unless ``layout`` (``onnx-zoo`` / ``npz``) is given
    (Polygraphy JSON inputs need one). The new golden set is written to a temporary folder beside the
    golden folder first and moved into place only when every iteration ran, so a failure leaves the
    old golden set as it was; with ``force`` the golden files the gate wrote in any layout are removed
    first (``gate.data.golden_folder``: never other files). Stored inputs are never touched. With
    ``warn_nan``, a golden output holding NaN is logged once (a warning: every check would report it
    out of tolerance).

    Raises:
        GateError: golden outputs (of any layout) already exist and ``force`` is False; a file the gate
            does not write would leave the folder holding two layouts (before writing); npz golden
            outputs would share the inputs' folder; no stored inputs; a runner or a file write fails
            (naming the iteration or the file).
    """
    input_names, output_names, _, types = model_io(cfg.model)
    inputs = _open(cfg.inputs, "input", input_names, labels, types)
    if len(inputs) == 0:
        raise GateError(f"{cfg.inputs}: no stored inputs to record golden outputs for.")
    layout = layout or inputs.layout  # Polygraphy JSON inputs: golden as polygraphy run --save-outputs DIR
    _check_golden_folder(cfg, layout, inputs.layout)
    if cfg.golden.exists() and not cfg.golden.is_dir():
        raise GateError(f"{cfg.golden}: exists and is not a folder; 'golden' must name a folder.")
    refuse_symlinks(cfg.golden, "the golden folder")  # record deletes and writes there
    existing = recorded_golden_files(cfg.golden)
    if existing and not force:
        raise GateError(
            f"{existing[0]}: golden outputs already exist ({len(existing)} files); pass --force to overwrite them."
        )
    check_leftovers(cfg.golden, layout, existing)  # the folder must read as one layout afterwards
    try:
        cfg.golden.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".golden-", dir=cfg.golden.parent))
    except OSError as err:
        raise GateError(f"{cfg.golden}: cannot create the golden folder ({err.strerror}).") from err
    try:
        runner = make_runner(cfg.reference_runner, cfg, name=cfg.reference_runner)
        warned: set[str] = set()
        with runner:
            # As check feeds them: the model's inputs exactly (one line naming the file otherwise),
            # cast only where lossless (e.g. big-endian float32 to float32).
            for index, feed_dict in enumerate(_Progress(inputs, None, input_names).feed()):
                try:
                    outputs = runner.infer(coerce_feed_dict(feed_dict, runner.get_input_metadata()))
                except GateError as err:
                    raise GateError(f"iteration {index} ({inputs.location(index)}): {err}") from err
                if warn_nan:
                    _warn_nan(outputs, index, inputs.location(index), warned)
                same = layout == inputs.layout and layout != POLYGRAPHY_JSON  # keep the inputs' names
                _write(staging, layout, index, outputs, types, inputs.entries[index].name if same else None)
        # Old files out, then the new ones in: a crash in between leaves too few golden iterations
        # (check stops: exit 2), never a folder that reads as passing.
        remove_golden_files(cfg.golden, existing)
        written = []
        for path in sorted(staging.rglob("*")):
            if path.is_file():
                target = cfg.golden / path.relative_to(staging)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(path), str(target))
                written.append(target)
        return written
    except OSError as err:
        raise GateError(f"{err.filename or cfg.golden}: cannot write golden outputs ({err.strerror}).") from err
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _warn_nan(outputs, index, where, warned: set) -> None:
    """One warning per output whose recorded golden values hold NaN: a NaN never compares equal, so
    every later check reports that output out of tolerance."""
    for name, array in all_leaves(outputs):
        if name not in warned and array.dtype.kind in "fc" and np.isnan(array).any():
            warned.add(name)
            log.warning(
                "golden output '%s' holds NaN at iteration %d (%s); every check will report it out of tolerance.",
                name,
                index,
                where,
            )


def _write(folder, layout, index, outputs, types=None, name=None):
    try:
        write_iteration(folder, layout, "output", index, outputs, types, name)
    except GateError as err:  # a value the layout cannot store
        raise GateError(f"iteration {index}: {err}") from err
    except OSError as err:
        raise GateError(f"{err.filename or folder}: cannot write golden outputs ({err.strerror}).") from err
