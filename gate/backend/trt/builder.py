"""Engine building from ONNX (parse, profiles, precision, workspace, mark all, progress, INT8
calibration), the engine cache around it, and the loaders ``TrtRunner`` takes.

``build_engine(model, settings, cache_dir=...)`` needs no GPU with flavour ``tensorrt_rtx`` (ahead-of-
time build); flavour ``tensorrt`` builds on the GPU it will run on. Loading (deserializing) and running
an engine always need a GPU; the loaders probe for one first so that a container started without
``--gpus`` gets one clear line.

Deviation from Polygraphy: an input dim that is dynamic in the model but has one value in every
optimization profile (min = opt = max, the same in all profiles) is made static in the network before
the build. This is what the profiles allow anyway, and it lets models whose exporter named several
unknown dims ``?`` build: TensorRT's parser treats dims with the same name as equal, so a profile of
``[1,3,48,192]`` for ``[N,3,?,?]`` would otherwise be refused as contradictory.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gate.backend.trt.cache import EngineCache, _write_atomic, cache_key, model_sha256, sha256_file
from gate.backend.trt.flavour import first_error, flavour_of, import_trt, trt_logger
from gate.backend.trt.layerwise import mark_network_outputs, not_produced, onnx_tensor_names
from gate.backend.trt.precision import prepare_build
from gate.backend.trt.probe import GpuInfo, probe_gpu
from gate.backend.trt.settings import Profile, TrtBuildSettings
from gate.errors import GateError

log = logging.getLogger("gate.backend.trt")


# --------------------------------------------------------------------------------------------------
# Build progress


class BuildProgress:
    """What TensorRT's ``IProgressMonitor`` reports, as at most one log line every ``interval_s``
    seconds (CI logs are not terminals: no carriage returns, no redrawn bars), e.g.
    ``TensorRT build, 12 s: Building engine 3/6 > Computing profile costs 1/5 > Timing tactics 2/3``.

    Args:
        interval_s: seconds between lines (0: a line at every event).
        clock: a monotonic clock in seconds (injectable for tests).
        emit: where lines go (default: ``log.info``).
    """

    def __init__(self, interval_s: float = 5.0, clock=time.monotonic, emit=None):
        self.interval_s = interval_s
        self._clock = clock
        self._emit = emit or log.info
        self._phases: list[list] = []  # [name, steps, done]
        self._start = None
        self._last = None
        self.lines = 0

    def phase_start(self, parent_phase, phase_name, num_steps) -> None:
        if self._start is None:
            self._start = self._last = self._clock()
        self._phases.append([str(phase_name), int(num_steps), 0])
        self._maybe_emit()

    def step_complete(self, phase_name, step) -> bool:
        for phase in reversed(self._phases):
            if phase[0] == phase_name:
                phase[2] = int(step) + 1
                break
        self._maybe_emit()
        return True  # False would cancel the build

    def phase_finish(self, phase_name) -> None:
        for index in range(len(self._phases) - 1, -1, -1):
            if self._phases[index][0] == phase_name:
                del self._phases[index]
                break

    def line(self) -> str:
        elapsed = 0.0 if self._start is None else self._clock() - self._start
        phases = " > ".join(f"{name} {done}/{steps}" for name, steps, done in self._phases) or "finishing"
        return f"TensorRT build, {elapsed:.0f} s: {phases}"

    def _maybe_emit(self) -> None:
        now = self._clock()
        if self._last is not None and now - self._last >= self.interval_s:
            self._last = now
            self.lines += 1
            self._emit(self.line())


def make_progress_monitor(trt, progress: BuildProgress):
    """A ``trt.IProgressMonitor`` that forwards to ``progress`` (and never lets an exception out into
    TensorRT's builder threads)."""

    class ProgressMonitor(trt.IProgressMonitor):
        def __init__(self):
            trt.IProgressMonitor.__init__(self)

        def phase_start(self, phase_name, parent_phase, num_steps):
            try:
                progress.phase_start(parent_phase, phase_name, num_steps)
            except Exception:  # noqa: BLE001 - a log line must never abort a build
                log.debug("progress monitor failed", exc_info=True)

        def step_complete(self, phase_name, step):
            try:
                return progress.step_complete(phase_name, step)
            except Exception:
                return True

        def phase_finish(self, phase_name):
            try:
                progress.phase_finish(phase_name)
            except Exception:
                log.debug("progress monitor failed", exc_info=True)

    return ProgressMonitor()


# --------------------------------------------------------------------------------------------------
# INT8 calibration


def feeds_sha256(data: Iterable) -> str:
    """sha256 over a re-iterable of feed_dicts (names, dtypes, shapes, bytes), for the cache key."""
    digest = hashlib.sha256()
    for feed in data:
        for name in sorted(feed):
            array = np.ascontiguousarray(feed[name])
            digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


class CalibrationFeed:
    """Feeds stored inputs to TensorRT's INT8 calibrator: one feed_dict per calibration batch,
    copied into one device buffer per input (grown when a later feed is larger), and the calibration
    cache file read and written next to the engine.

    Args:
        data: a re-iterable of feed_dicts (a list, a DataLoader, stored inputs), each with every input.
        cache_path: the calibration cache file, or None for none.
    """

    def __init__(self, data, cache_path=None):
        self._data = data
        self._iter = None
        self._buffers = {}
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self.batches = 0

    def next_batch(self, names) -> list[int] | None:
        """Device addresses of the next feed's inputs in ``names`` order, or None when done.

        Raises:
            GateError: a feed lacks one of ``names``.
        """
        from gate.backend.trt import cuda

        if self._iter is None:
            self._iter = iter(self._data)
        feed = next(self._iter, None)
        if feed is None:
            return None
        missing = [n for n in names if n not in feed]
        if missing:
            raise GateError(f"INT8 calibration input {self.batches} lacks {missing}; it has {list(feed)}.")
        pointers = []
        for name in names:
            array = np.ascontiguousarray(feed[name])
            buffer = self._buffers.get(name)
            if buffer is None:
                buffer = self._buffers[name] = cuda.DeviceBuffer(array.nbytes)
            buffer.ensure(array.nbytes)
            cuda.copy(buffer.ptr, array.ctypes.data, array.nbytes, "htod")
            pointers.append(buffer.ptr)
        self.batches += 1
        return pointers

    def read_cache(self) -> bytes | None:
        if self.cache_path is not None and self.cache_path.is_file():
            log.info("Using INT8 calibration cache %s.", self.cache_path)
            return self.cache_path.read_bytes()
        return None

    def write_cache(self, data: bytes) -> None:
        if self.cache_path is not None:
            _write_atomic(self.cache_path, bytes(data))
            log.info("Wrote INT8 calibration cache %s.", self.cache_path)

    def free(self) -> None:
        for buffer in self._buffers.values():
            buffer.free()
        self._buffers.clear()


def make_calibrator(trt, feed: CalibrationFeed):
    """A ``trt.IInt8EntropyCalibrator2`` over ``feed``. An exception inside a callback is kept in
    ``.error`` (and the batch ends) instead of crossing into TensorRT.

    Raises:
        GateError: this TensorRT has no INT8 calibrator (TensorRT-RTX, TensorRT 11).
    """
    base = getattr(trt, "IInt8EntropyCalibrator2", None)
    if base is None:
        raise GateError(f"--int8 needs an INT8 calibrator, which {trt.__name__} {trt.__version__} does not have.")

    class Calibrator(base):
        def __init__(self):
            base.__init__(self)
            self.error = None

        def get_batch_size(self):
            return 1

        def get_batch(self, names):
            try:
                return feed.next_batch(list(names))
            except Exception as err:  # noqa: BLE001 - re-raised after the build
                self.error = err
                return None

        def read_calibration_cache(self):
            return feed.read_cache()

        def write_calibration_cache(self, cache):
            try:
                feed.write_cache(bytes(cache))
            except Exception as err:
                self.error = err

    return Calibrator()


# --------------------------------------------------------------------------------------------------
# Parsing, profiles, config


def _format_shape(shape) -> str:
    return "[" + ",".join(str(d) if d >= 0 else "?" for d in shape) + "]"


def parse_onnx(trt, model_path, strongly_typed: bool = False):
    """Parses an ONNX file into a new network. Returns ``(builder, network, parser)``; keep the parser
    alive until the build is done (it owns the weights).

    Raises:
        GateError: the file is missing, or TensorRT cannot parse it: one line naming the first failing
            node (index, name, op) and TensorRT's reason, and how many errors there were.
    """
    path = Path(model_path)
    if not path.is_file():
        raise GateError(f"{path}: model file not found.")
    logger = trt_logger(trt)
    builder = trt.Builder(logger)
    flags = 0
    if strongly_typed and hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED"):
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    logger.errors.clear()
    if not parser.parse_from_file(str(path)):
        errors = [parser.get_error(i) for i in range(parser.num_errors)]
        raise GateError(f"{path}: TensorRT cannot parse the model: {_describe_parse_errors(errors, logger)}")
    return builder, network, parser


def _describe_parse_errors(errors, logger) -> str:
    if not errors:
        return first_error(logger, "the parser gave no reason") + "."
    first = errors[0]
    desc = " ".join(str(first.desc()).split())
    code = getattr(first.code(), "name", str(first.code()))
    node = first.node()
    if node is not None and node >= 0:
        where = f"node {node} '{first.node_name()}' (op {first.node_operator()})"
        text = f"{where}: {code}: {desc}"
    else:
        text = f"{code}: {desc}"
    more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
    return f"{text}{more}."


def network_io(network) -> tuple[dict, dict]:
    """``({input: {"dtype", "shape"}}, {output: ...})`` of a network (shapes with -1 for dynamic)."""

    def describe(tensor):
        return {"dtype": tensor.dtype.name, "shape": [int(d) for d in tensor.shape]}

    inputs = {network.get_input(i).name: describe(network.get_input(i)) for i in range(network.num_inputs)}
    outputs = {network.get_output(i).name: describe(network.get_output(i)) for i in range(network.num_outputs)}
    return inputs, outputs


def apply_profiles(builder, network, config, profiles) -> tuple[list[dict], list]:
    """Adds one optimization profile per ``Profile`` (see ``TrtBuildSettings.profiles``); without any
    and with dynamic inputs, one profile of the model shapes with dynamic dims set to 1 (Polygraphy's
    default, with a warning). Makes dims that every profile fixes static (module docstring).

    Returns:
        ``(profiles as {input: [min, opt, max]}, the IOptimizationProfile objects)``.

    Raises:
        GateError: a shape for an input the model does not have (lists the model's inputs); a shape
            whose rank or static dims do not match the model's; TensorRT refusing a profile.
    """
    inputs = {network.get_input(i).name: network.get_input(i) for i in range(network.num_inputs)}
    names = list(inputs)
    for index, profile in enumerate(profiles):
        unknown = [n for n in profile.shapes if n not in inputs]
        if unknown:
            where = f"optimization profile {index}" if len(profiles) > 1 else "the input shapes"
            raise GateError(
                f"{where} give shapes for {unknown}, which the model does not have; the model's inputs are {names}."
            )
    dynamic = [n for n, t in inputs.items() if t.is_shape_tensor or any(d < 0 for d in t.shape)]
    if not profiles and not dynamic:
        return [], []
    profiles = list(profiles) or [Profile({})]
    resolved = []
    for index, profile in enumerate(profiles):
        entries = {}
        for name, tensor in inputs.items():
            model_shape = tuple(int(d) for d in tensor.shape)
            if name in profile.shapes:
                triple = profile.shapes[name]
                if not tensor.is_shape_tensor:
                    for shape in triple:
                        if len(shape) != len(model_shape) or any(m >= 0 and m != s for s, m in zip(shape, model_shape)):
                            raise GateError(
                                f"Optimization profile {index}: shape {list(shape)} for input '{name}' does not fit "
                                f"the model's {_format_shape(model_shape)} (rank and static dims must match)."
                            )
                entries[name] = triple
            elif tensor.is_shape_tensor:
                ones = (1,) * (model_shape[0] if len(model_shape) == 1 and model_shape[0] >= 0 else 0)
                entries[name] = (ones, ones, ones)
            elif any(d < 0 for d in model_shape):
                default = tuple(1 if d < 0 else d for d in model_shape)
                log.warning(
                    "Input '%s' has dynamic shape %s and profile %d gives it none; building for %s "
                    "(set --input-shapes or --trt-min/opt/max-shapes).",
                    name,
                    _format_shape(model_shape),
                    index,
                    list(default),
                )
                entries[name] = (default, default, default)
        resolved.append(entries)
    for name, tensor in inputs.items():
        if tensor.is_shape_tensor or not all(name in entries for entries in resolved):
            continue
        shape = [int(d) for d in tensor.shape]
        fixed = False
        for dim, size in enumerate(shape):
            values = {s[dim] for entries in resolved for s in entries[name]}
            if size < 0 and len(values) == 1:
                shape[dim] = values.pop()
                fixed = True
        if fixed:
            log.debug("Input '%s': dims fixed by every profile made static: %s.", name, shape)
            tensor.shape = shape
    objects = []
    for index, entries in enumerate(resolved):
        profile = builder.create_optimization_profile()
        for name, (low, opt, high) in entries.items():
            if inputs[name].is_shape_tensor:
                profile.set_shape_input(name, low, opt, high)
            else:
                profile.set_shape(name, low, opt, high)
        if config.add_optimization_profile(profile) < 0:
            raise GateError(f"TensorRT refused optimization profile {index} ({Profile(entries).to_json()}).")
        objects.append(profile)
    return [Profile(entries).to_json() for entries in resolved], objects


def configure(trt, config, settings: TrtBuildSettings) -> None:
    """Precision flags, workspace, optimization level and (TensorRT-RTX) compute capabilities.

    Raises:
        GateError: a flag or compute capability this TensorRT does not have.
    """
    flag = trt.BuilderFlag
    if hasattr(flag, "TF32"):
        (config.set_flag if settings.tf32 else config.clear_flag)(flag.TF32)
    for name, enum in (("fp16", "FP16"), ("bf16", "BF16"), ("int8", "INT8")):
        if getattr(settings, name):
            if not hasattr(flag, enum):
                raise GateError(
                    f"--{name} is not available in {trt.__name__} {trt.__version__} (no BuilderFlag.{enum})."
                )
            config.set_flag(getattr(flag, enum))
    if settings.workspace is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, settings.workspace)
    if settings.builder_optimization_level is not None:
        config.builder_optimization_level = settings.builder_optimization_level
    caps = settings.compute_capabilities
    if caps is not None:
        if caps == "current":
            config.num_compute_capabilities = 1
            config.set_compute_capability(trt.ComputeCapability.CURRENT, 0)
        else:
            members = trt.ComputeCapability.__members__
            config.num_compute_capabilities = len(caps)
            for index, cap in enumerate(caps):
                name = "SM" + cap.replace(".", "")
                if name not in members:
                    known = ", ".join(m for m in members if m.startswith("SM"))
                    raise GateError(f"compute capability {cap} is not one TensorRT-RTX builds for ({known}).")
                config.set_compute_capability(members[name], index)


# --------------------------------------------------------------------------------------------------
# Build + cache


@dataclass
class BuiltEngine:
    """A serialized engine and what its build reported.

    Attributes:
        serialized: the engine (bytes).
        flavour, trt_version: the TensorRT that built it.
        inputs, outputs: ``{name: {"dtype": TensorRT type name, "shape": [dims, -1 = dynamic]}}`` of
            the built network (outputs include marked ones).
        profiles: ``[{input: [min, opt, max]}]`` as built; ``num_profiles`` is their count.
        marked_outputs: names marked by ``outputs`` (``"*"``: on top of the model's outputs).
        not_produced: with ``outputs="*"``: ONNX main-graph tensors that are no output of the engine
            (folded by the parser, constants, shape computations): "not produced" in a per-layer report.
        from_cache: True when the engine came from the cache (no build).
        engine_path: the cached engine file, or None without a cache.
        key: the cache key, or None.
        build_seconds: the build's wall time (the original build's, on a cache hit).
    """

    serialized: bytes
    flavour: str
    trt_version: str
    inputs: dict
    outputs: dict
    profiles: list
    marked_outputs: list = field(default_factory=list)
    not_produced: list = field(default_factory=list)
    from_cache: bool = False
    engine_path: Path | None = None
    key: str | None = None
    build_seconds: float | None = None

    @property
    def num_profiles(self) -> int:
        return len(self.profiles)

    def info(self) -> dict:
        return {
            "flavour": self.flavour,
            "trt_version": self.trt_version,
            "inputs": self.inputs,
            "outputs": self.outputs,
            "profiles": self.profiles,
            "marked_outputs": self.marked_outputs,
            "not_produced": self.not_produced,
            "build_seconds": self.build_seconds,
        }


def _gpu_for_build(settings: TrtBuildSettings, gpu: GpuInfo | None) -> GpuInfo | None:
    if gpu is not None:
        return gpu
    if settings.flavour == "tensorrt" or settings.compute_capabilities == "current":
        return probe_gpu()
    try:
        return probe_gpu()
    except GateError:
        return None  # TensorRT-RTX builds ahead of time without a GPU


def build_key_fields(
    model_path, settings: TrtBuildSettings, trt_version: str, gpu: GpuInfo | None, calibration_data=None
) -> dict:
    """The engine-cache key fields (see ``gate.backend.trt.cache``)."""
    calibration_cache = None
    if settings.calibration_cache and Path(settings.calibration_cache).is_file():
        calibration_cache = sha256_file(settings.calibration_cache)
    return {
        "model_sha256": model_sha256(model_path),
        "flavour": settings.flavour,
        "trt_version": trt_version,
        "gpu_name": gpu.name if gpu else "none",
        "compute_capability": gpu.compute_capability_str if gpu else "none",
        "settings": settings.key_fields(),
        "calibration_sha256": feeds_sha256(calibration_data)
        if settings.int8 and calibration_data is not None
        else None,
        "calibration_cache_sha256": calibration_cache,
    }


def build_engine(
    model_path,
    settings: TrtBuildSettings | None = None,
    *,
    cache_dir=None,
    calibration_data=None,
    gpu: GpuInfo | None = None,
    progress_interval_s: float = 5.0,
    force: bool = False,
) -> BuiltEngine:
    """Builds a serialized engine from an ONNX file, or takes it from the engine cache.

    Args:
        model_path: the ``.onnx`` file (external data next to it).
        settings: ``TrtBuildSettings`` (default: fp32, the model's outputs, flavour ``tensorrt``).
        cache_dir: the engine cache directory (``gate.backend.trt.cache``), or None for no cache.
        calibration_data: for ``int8``: a re-iterable of feed_dicts (e.g. the stored inputs); not
            needed when a calibration cache exists.
        gpu: the GPU the key names; None probes (flavour ``tensorrt_rtx`` builds without one).
        progress_interval_s: seconds between progress log lines.
        force: rebuild even on a cache hit (the entry is replaced).

    Returns:
        BuiltEngine.

    Raises:
        GateError: no GPU for flavour ``tensorrt``; the model is missing or does not parse (names
            the node and op); a profile names an input the model lacks (lists its inputs) or does not
            fit it; an output name that matches nothing; int8 without calibration data or cache;
            TensorRT cannot build the engine (its first error).
    """
    settings = settings or TrtBuildSettings()
    if settings.int8 and calibration_data is not None and iter(calibration_data) is calibration_data:
        raise GateError(
            "INT8 calibration data must be re-iterable (a list, a DataLoader, stored inputs), not an iterator."
        )
    trt = import_trt(settings.flavour)
    gpu = _gpu_for_build(settings, gpu)
    cache = EngineCache(cache_dir) if cache_dir is not None else None
    # Strongly typed TensorRT: fp16 / bf16 build a converted model (gate.backend.trt.precision).
    model_path, build_settings, conversion = prepare_build(trt, model_path, settings, cache_dir)
    fields = build_key_fields(model_path, settings, trt.__version__, gpu, calibration_data) if cache else None
    if fields is not None and conversion is not None:
        fields["precision_conversion"] = conversion
    key = cache_key(fields) if cache else None
    if cache and not force:
        entry = cache.load(key, fields)
        if entry is not None:
            info = entry.info
            return BuiltEngine(
                serialized=entry.engine,
                flavour=settings.flavour,
                trt_version=trt.__version__,
                inputs=info.get("inputs", {}),
                outputs=info.get("outputs", {}),
                profiles=info.get("profiles", []),
                marked_outputs=info.get("marked_outputs", []),
                not_produced=info.get("not_produced", []),
                from_cache=True,
                engine_path=cache.engine_path(key),
                key=key,
                build_seconds=info.get("build_seconds"),
            )

    calibration_path = settings.calibration_cache or (cache.calibration_cache_path(key) if cache else None)
    if settings.int8 and calibration_data is None and not (calibration_path and Path(calibration_path).is_file()):
        raise GateError("--int8 needs calibration inputs (stored inputs) or an existing --calibration-cache.")

    started = time.perf_counter()
    builder, network, parser = parse_onnx(trt, model_path, settings.strongly_typed)
    onnx_names = onnx_tensor_names(model_path) if settings.mark_all else None
    marked = mark_network_outputs(
        network, settings.outputs, settings.exclude_outputs, only=set(onnx_names) if onnx_names else None
    )
    config = builder.create_builder_config()
    profiles, profile_objects = apply_profiles(builder, network, config, settings.effective_profiles())
    configure(trt, config, build_settings)
    progress = BuildProgress(progress_interval_s)
    monitor = make_progress_monitor(trt, progress)
    config.progress_monitor = monitor
    gpu_name = gpu.name if gpu else "none"
    cc = gpu.compute_capability_str if gpu else "none"
    # TensorRT-RTX times no tactics ahead of time ("The timing cache will not be used!"): no timing cache.
    use_timing = cache is not None and settings.flavour == "tensorrt"
    timing_path = cache.timing_cache_path(settings.flavour, trt.__version__, gpu_name, cc) if use_timing else None
    timing_cache = None
    if use_timing:
        timing_data = cache.read_timing_cache(timing_path)
        timing_cache = config.create_timing_cache(timing_data)
        if timing_cache is None and timing_data:
            log.warning("Timing cache %s is unreadable; building without it.", timing_path)
            timing_cache = config.create_timing_cache(b"")
        if timing_cache is not None and not config.set_timing_cache(timing_cache, False):
            log.warning("Timing cache %s was made for another GPU or TensorRT; building without it.", timing_path)
            timing_cache = config.create_timing_cache(b"")
            config.set_timing_cache(timing_cache, False)
    calibrator = feed = None
    if settings.int8:
        feed = CalibrationFeed(calibration_data or [], calibration_path)
        calibrator = make_calibrator(trt, feed)
        config.int8_calibrator = calibrator
        if profile_objects and hasattr(config, "set_calibration_profile"):
            config.set_calibration_profile(profile_objects[0])

    inputs, outputs = network_io(network)
    log.info(
        "Building a TensorRT engine from %s (%s %s, %d input(s), %d output(s), %d profile(s))...",
        model_path,
        flavour_of(trt),
        trt.__version__,
        len(inputs),
        len(outputs),
        len(profiles),
    )
    logger = trt_logger(trt)
    logger.errors.clear()
    try:
        serialized = builder.build_serialized_network(network, config)
    finally:
        if feed is not None:
            feed.free()
    if calibrator is not None and calibrator.error is not None:
        raise calibrator.error
    if serialized is None:
        hint = (
            " (every tensor was marked as an output: leave some out with --trt-exclude-outputs)"
            if settings.mark_all
            else ""
        )
        raise GateError(
            f"{model_path}: TensorRT could not build an engine: {first_error(logger, 'no reason given')}{hint}."
        )
    seconds = time.perf_counter() - started
    data = bytes(serialized)
    log.info("Built the TensorRT engine in %.1f s (%.1f MB).", seconds, len(data) / 1e6)
    built = BuiltEngine(
        serialized=data,
        flavour=settings.flavour,
        trt_version=trt.__version__,
        inputs=inputs,
        outputs=outputs,
        profiles=profiles,
        marked_outputs=marked,
        not_produced=not_produced(onnx_names, outputs) if onnx_names is not None else [],
        key=key,
        build_seconds=round(seconds, 3),
    )
    if cache:
        if timing_cache is not None:
            cache.write_timing_cache(timing_path, bytes(config.get_timing_cache().serialize()))
        built.engine_path = cache.store(key, fields, data, built.info())
    del parser  # owned the weights until the build was done
    return built


# --------------------------------------------------------------------------------------------------
# Loaders for TrtRunner


def _deserialize(trt, data: bytes):
    logger = trt_logger(trt)
    logger.errors.clear()
    runtime = trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(data)
    return runtime, engine


class EngineFromOnnx:
    """A callable for ``TrtRunner``: at activation, probes the GPU, builds the engine (or takes it from
    the cache) and deserializes it. A cached engine that TensorRT cannot deserialize (another
    driver, a damaged file that passed the checks) is rebuilt with a warning.

    Args:
        model_path, settings, cache_dir, calibration_data, progress_interval_s: as ``build_engine``.

    ``build()`` builds without deserializing (no GPU needed with ``tensorrt_rtx``); the result is kept,
    so a second activation does not build again.
    """

    def __init__(self, model_path, settings=None, cache_dir=None, calibration_data=None, progress_interval_s=5.0):
        self.model_path = Path(model_path)
        self.settings = settings or TrtBuildSettings()
        self.cache_dir = cache_dir
        self.calibration_data = calibration_data
        self.progress_interval_s = progress_interval_s
        self.built: BuiltEngine | None = None
        self._runtime = None

    def build(self, force: bool = False) -> BuiltEngine:
        if self.built is None or force:
            self.built = build_engine(
                self.model_path,
                self.settings,
                cache_dir=self.cache_dir,
                calibration_data=self.calibration_data,
                progress_interval_s=self.progress_interval_s,
                force=force,
            )
        return self.built

    def __call__(self):
        """Returns a ``trt.ICudaEngine``.

        Raises:
            GateError: no usable GPU (see ``probe_gpu``); any ``build_engine`` error; TensorRT cannot
                deserialize the freshly built engine.
        """
        gpu = probe_gpu(flavour=self.settings.flavour)
        trt = import_trt(self.settings.flavour)
        built = self.build()
        self._runtime, engine = _deserialize(trt, built.serialized)
        if engine is None and built.from_cache:
            reason = first_error(trt_logger(trt), "deserialization failed")
            EngineCache(self.cache_dir).invalidate(
                built.key, f"incompatible with {trt.__name__} {trt.__version__} on {gpu.name}: {reason}"
            )
            built = self.build(force=True)
            self._runtime, engine = _deserialize(trt, built.serialized)
        if engine is None:
            raise GateError(
                f"{self.model_path}: TensorRT built an engine it cannot load on {gpu.name}: "
                f"{first_error(trt_logger(trt), 'no reason given')}."
            )
        return engine


class EngineFromBytes:
    """A callable for ``TrtRunner`` that deserializes a serialized engine at activation.

    Args:
        data: the serialized engine (bytes).
        flavour: ``tensorrt`` or ``tensorrt_rtx`` (which one built it).
        source: how to name the engine in errors.
    """

    def __init__(self, data: bytes, flavour: str = "tensorrt", source: str = "the serialized engine"):
        self.data = data
        self.flavour = flavour
        self.source = source
        self._runtime = None

    def _load(self) -> bytes:
        return self.data

    def __call__(self):
        """Returns a ``trt.ICudaEngine``.

        Raises:
            GateError: no usable GPU; TensorRT cannot deserialize the engine (its first error, and the
                likely causes: another TensorRT version, another GPU, not an engine).
        """
        data = self._load()
        gpu = probe_gpu(flavour=self.flavour)
        trt = import_trt(self.flavour)
        self._runtime, engine = _deserialize(trt, data)
        if engine is None:
            raise GateError(
                f"{self.source}: {trt.__name__} {trt.__version__} cannot load this engine on {gpu.name} "
                f"({first_error(trt_logger(trt), 'no reason given')}); was it built by another TensorRT version, "
                "for another GPU, or is it not an engine?"
            )
        return engine


class EngineFromPath(EngineFromBytes):
    """A callable for ``TrtRunner`` that loads a prebuilt serialized engine file (``--load-engine``)
    at activation; see ``EngineFromBytes``.

    Raises (at activation):
        GateError: the file is missing or unreadable; see ``EngineFromBytes``.
    """

    def __init__(self, path, flavour: str = "tensorrt"):
        super().__init__(b"", flavour, str(path))
        self.path = Path(path)

    def _load(self) -> bytes:
        try:
            return self.path.read_bytes()
        except OSError as err:
            raise GateError(f"{self.path}: engine file cannot be read ({err.strerror or err}).") from err
