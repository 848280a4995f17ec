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

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from gate.backend.trt.cache import EngineCache, cache_key, model_sha256, sha256_file
from gate.backend.trt.calibrator import CalibrationFeed, feeds_sha256, make_calibrator
from gate.backend.trt.flavour import first_error, flavour_of, import_trt, trt_logger
from gate.backend.trt.layerwise import mark_network_outputs, not_produced, onnx_tensor_names
from gate.backend.trt.network import apply_profiles, configure, network_io, parse_onnx
from gate.backend.trt.precision import prepare_build
from gate.backend.trt.probe import GpuInfo, probe_gpu
from gate.backend.trt.progress import BuildProgress, make_progress_monitor
from gate.backend.trt.settings import TrtBuildSettings
from gate.errors import GateError

log = logging.getLogger("gate.backend.trt")


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


def _from_cache(cache, key, fields, settings: TrtBuildSettings, trt_version: str) -> BuiltEngine | None:
    """The cached engine of ``key`` (None on a miss)."""
    entry = cache.load(key, fields)
    if entry is None:
        return None
    info = entry.info
    return BuiltEngine(
        serialized=entry.engine,
        flavour=settings.flavour,
        trt_version=trt_version,
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


def network_from_onnx(trt, model_path, settings: TrtBuildSettings):
    """Polygraphy's ``NetworkFromOnnxPath`` and ``ModifyNetworkOutputs``: ``(builder, network, parser,
    marked outputs, ONNX tensor names (mark all; else None))``."""
    builder, network, parser = parse_onnx(trt, model_path, settings.strongly_typed)
    onnx_names = onnx_tensor_names(model_path) if settings.mark_all else None
    marked = mark_network_outputs(
        network, settings.outputs, settings.exclude_outputs, only=set(onnx_names) if onnx_names else None
    )
    return builder, network, parser, marked, onnx_names


def create_config(trt, builder, network, settings: TrtBuildSettings, progress_interval_s: float):
    """Polygraphy's ``CreateConfig``: ``(config, profiles as JSON, profile objects, progress monitor)``
    with the optimization profiles, precision, workspace and a progress monitor (keep the monitor
    referenced until the build is done: the config does not own it)."""
    config = builder.create_builder_config()
    profiles, profile_objects = apply_profiles(builder, network, config, settings.effective_profiles())
    configure(trt, config, settings)
    monitor = make_progress_monitor(trt, BuildProgress(progress_interval_s))
    config.progress_monitor = monitor
    return config, profiles, profile_objects, monitor


def _use_timing_cache(trt, cache, config, settings: TrtBuildSettings, gpu):
    """``(path, timing cache)`` set on ``config`` (``(None, None)`` without one). TensorRT-RTX times no
    tactics ahead of time ("The timing cache will not be used!"): no timing cache there."""
    if cache is None or settings.flavour != "tensorrt":
        return None, None
    gpu_name = gpu.name if gpu else "none"
    cc = gpu.compute_capability_str if gpu else "none"
    timing_path = cache.timing_cache_path(settings.flavour, trt.__version__, gpu_name, cc)
    timing_data = cache.read_timing_cache(timing_path)
    timing_cache = config.create_timing_cache(timing_data)
    if timing_cache is None and timing_data:
        log.warning("Timing cache %s is unreadable; building without it.", timing_path)
        timing_cache = config.create_timing_cache(b"")
    if timing_cache is not None and not config.set_timing_cache(timing_cache, False):
        log.warning("Timing cache %s was made for another GPU or TensorRT; building without it.", timing_path)
        timing_cache = config.create_timing_cache(b"")
        config.set_timing_cache(timing_cache, False)
    return timing_path, timing_cache


def _attach_calibrator(trt, config, settings: TrtBuildSettings, data, cache_path, profile_objects):
    """``(calibrator, feed)`` set on ``config`` for int8 (``(None, None)`` otherwise)."""
    if not settings.int8:
        return None, None
    feed = CalibrationFeed(data or [], cache_path)
    calibrator = make_calibrator(trt, feed)
    config.int8_calibrator = calibrator
    if profile_objects and hasattr(config, "set_calibration_profile"):
        config.set_calibration_profile(profile_objects[0])
    return calibrator, feed


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
        cached = _from_cache(cache, key, fields, settings, trt.__version__)
        if cached is not None:
            return cached

    calibration_path = settings.calibration_cache or (cache.calibration_cache_path(key) if cache else None)
    if settings.int8 and calibration_data is None and not (calibration_path and Path(calibration_path).is_file()):
        raise GateError("--int8 needs calibration inputs (stored inputs) or an existing --calibration-cache.")

    started = time.perf_counter()
    builder, network, parser, marked, onnx_names = network_from_onnx(trt, model_path, settings)
    config, profiles, profile_objects, monitor = create_config(
        trt, builder, network, build_settings, progress_interval_s
    )
    timing_path, timing_cache = _use_timing_cache(trt, cache, config, settings, gpu)
    calibrator, feed = _attach_calibrator(trt, config, settings, calibration_data, calibration_path, profile_objects)

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
    del parser, monitor  # the weights and the progress monitor, needed until the build was done
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
