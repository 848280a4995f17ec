"""The TensorRT backend: engine building from ONNX with an engine cache, loaders, ``TrtRunner`` on
cuda-python, per-layer ("mark all") helpers, and a startup GPU probe.

Importing this package is cheap: ``tensorrt`` / ``tensorrt_rtx``, ``cuda.bindings`` and ``onnx`` are
imported when first used.

Typical use (what ``polygraphy run model.onnx --trt --fp16 --input-shapes x:[1,3,224,224]`` does)::

    from gate.backend.trt import EngineFromOnnx, TrtBuildSettings, TrtRunner, probe_gpu

    probe_gpu()  # one clear GateError when no GPU is visible (container without --gpus)
    settings = TrtBuildSettings(fp16=True, input_shapes={"x": [1, 3, 224, 224]})
    with TrtRunner(EngineFromOnnx("model.onnx", settings, cache_dir=".cache/trt")) as runner:
        outputs = runner.infer({"x": x})  # views of reused buffers: copy what you keep

Modules: ``settings`` (build settings and flag parsers), ``builder`` (build, loaders), ``cache``
(engine cache), ``runner`` (``TrtRunner``), ``cuda`` (the cuda-python layer), ``layerwise`` (mark
all, for TensorRT and ONNX Runtime), ``probe`` (GPU probe), ``flavour`` (tensorrt vs tensorrt_rtx).
"""

from gate.backend.trt.builder import (
    BuildProgress,
    BuiltEngine,
    EngineFromBytes,
    EngineFromOnnx,
    EngineFromPath,
    build_engine,
)
from gate.backend.trt.cache import EngineCache
from gate.backend.trt.flavour import FLAVOURS
from gate.backend.trt.layerwise import not_produced, onnx_tensor_names, onnx_with_outputs
from gate.backend.trt.probe import GpuInfo, probe_gpu
from gate.backend.trt.runner import ALLOCATION_STRATEGIES, TrtRunner
from gate.backend.trt.settings import (
    Profile,
    TrtBuildSettings,
    parse_shape_args,
    parse_size,
    profiles_from_shapes,
)

__all__ = [
    "ALLOCATION_STRATEGIES",
    "FLAVOURS",
    "BuildProgress",
    "BuiltEngine",
    "EngineCache",
    "EngineFromBytes",
    "EngineFromOnnx",
    "EngineFromPath",
    "GpuInfo",
    "Profile",
    "TrtBuildSettings",
    "TrtRunner",
    "build_engine",
    "not_produced",
    "onnx_tensor_names",
    "onnx_with_outputs",
    "parse_shape_args",
    "parse_size",
    "probe_gpu",
    "profiles_from_shapes",
]
