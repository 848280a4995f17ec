"""What a GPU report needs to be read: the GPU, its driver, and the CUDA, cuDNN and TensorRT
libraries the runners actually use, read from the libraries themselves through ``ctypes`` (no new
dependency, nothing imported that a CPU run lacks).

- GPU name and compute capability: the CUDA driver API (``libcuda.so.1``: ``cuDeviceGetName``,
  ``cuDeviceGetAttribute`` 75 / 76), so ``CUDA_VISIBLE_DEVICES`` is honoured as CUDA honours it.
- Driver version: NVML (``libnvidia-ml.so.1``: ``nvmlSystemGetDriverVersion``), e.g. ``580.159.04``;
  the CUDA version the driver supports from ``cuDriverGetVersion``.
- CUDA runtime, cuDNN and TensorRT: from the copies mapped into this process (``/proc/self/maps``)
  once a session or an engine has loaded them: ``cudaRuntimeGetVersion``, ``cudnnGetVersion``,
  ``getInferLibVersion``. A library that is not loaded is not reported (it is not in use).

Every probe returns nothing rather than raise: facts describe a run, they never stop one.
"""

from __future__ import annotations

import ctypes
import os
import re
from pathlib import Path

import numpy as np

from gate.backend.providers import describe_providers

CPU_PROVIDERS = ("CPUExecutionProvider", "AzureExecutionProvider")
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


def _library(name: str):
    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def loaded_library(prefix: str) -> str | None:
    """The path of the first shared library mapped into this process whose file name starts with
    ``prefix`` (e.g. ``libcudart.so``), or None."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if path.startswith("/") and os.path.basename(path).startswith(prefix):
            return path
    return None


def _version(major_minor: int, scale: int = 1000) -> str:
    """CUDA's ``1000 * major + 10 * minor`` as ``major.minor``."""
    return f"{major_minor // scale}.{(major_minor % scale) // 10}"


def device_facts(device: int = 0) -> dict[str, str]:
    """``gpu_name``, ``gpu_compute_capability``, ``cuda_driver_version`` (the CUDA version the driver
    supports) and ``gpu_driver`` (NVML's driver version) of visible CUDA device ``device``; empty
    without a CUDA driver or device."""
    cuda = _library("libcuda.so.1")
    facts: dict[str, str] = {}
    if cuda is None or cuda.cuInit(0) != 0:
        return facts
    handle, count = ctypes.c_int(), ctypes.c_int()
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value <= device:
        return facts
    if cuda.cuDeviceGet(ctypes.byref(handle), device) == 0:
        name = ctypes.create_string_buffer(256)
        if cuda.cuDeviceGetName(name, 256, handle) == 0:
            facts["gpu_name"] = name.value.decode("utf-8", "replace")
        major, minor = ctypes.c_int(), ctypes.c_int()
        if (
            cuda.cuDeviceGetAttribute(ctypes.byref(major), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, handle) == 0
            and cuda.cuDeviceGetAttribute(ctypes.byref(minor), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, handle)
            == 0
        ):
            facts["gpu_compute_capability"] = f"{major.value}.{minor.value}"
    version = ctypes.c_int()
    if cuda.cuDriverGetVersion(ctypes.byref(version)) == 0:
        facts["cuda_driver_version"] = _version(version.value)
    nvml = _library("libnvidia-ml.so.1")
    if nvml is not None and nvml.nvmlInit_v2() == 0:
        text = ctypes.create_string_buffer(96)
        if nvml.nvmlSystemGetDriverVersion(text, 96) == 0:
            facts["gpu_driver"] = text.value.decode("ascii", "replace")
        nvml.nvmlShutdown()
    return facts


def library_facts() -> dict[str, str]:
    """``cuda_runtime_version``, ``cudnn_version`` and ``tensorrt_version`` of the libraries mapped
    into this process (absent where a library is not loaded)."""
    facts: dict[str, str] = {}
    path = loaded_library("libcudart.so")
    lib = _library(path) if path else None
    value = ctypes.c_int()
    if lib is not None and lib.cudaRuntimeGetVersion(ctypes.byref(value)) == 0:
        facts["cuda_runtime_version"] = _version(value.value)
    path = loaded_library("libcudnn.so")
    lib = _library(path) if path else None
    if lib is not None:
        lib.cudnnGetVersion.restype = ctypes.c_size_t
        v = int(lib.cudnnGetVersion())  # cuDNN 9: 10000 * major + 100 * minor + patch
        facts["cudnn_version"] = f"{v // 10000}.{(v % 10000) // 100}.{v % 100}" if v >= 10000 else str(v)
    for prefix in ("libnvinfer.so", "libtensorrt_rtx.so"):
        path = loaded_library(prefix)
        lib = _library(path) if path else None
        if lib is not None and hasattr(lib, "getInferLibVersion"):
            v = int(lib.getInferLibVersion())  # 10000 * major + 100 * minor + patch (TensorRT >= 10)
            facts["tensorrt_version"] = f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
            break
    return facts


def runtime_facts(runners) -> dict[str, str]:
    """The facts of ``runners`` (after they ran) that a GPU report needs: ``onnxrt_providers`` (each
    ONNX Runtime provider in use with its options, ``gate.backend.providers.describe_providers``)
    and, when a runner used a GPU (a provider other than the CPU's, or TensorRT), the device and
    library facts above; ``tensorrt_version`` from the TensorRT module when no library says it."""
    facts: dict[str, str] = {}
    in_use: dict = {}
    on_gpu = False
    for runner in runners:
        for provider, options in getattr(runner, "providers_in_use", {}).items():
            in_use.setdefault(provider, options)
            on_gpu = on_gpu or provider not in CPU_PROVIDERS
        module = getattr(runner, "_trt", None)
        if module is not None:
            on_gpu = True
            facts["tensorrt_version"] = str(getattr(module, "__version__", ""))
    if in_use:
        facts["onnxrt_providers"] = describe_providers(in_use)
    if on_gpu:
        device = next((int(o["device_id"]) for o in in_use.values() if str(o.get("device_id", "")).isdigit()), 0)
        facts.update(device_facts(device))
        facts.update(library_facts())
        if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
            facts["cuda_visible_devices"] = os.environ["CUDA_VISIBLE_DEVICES"]
    return facts


def tf32_in_use(facts: dict) -> bool:
    """The CUDA provider ran with TF32 on: ``use_tf32`` is not ``0`` (absent: ONNX Runtime's default, on)."""
    match = re.search(r"CUDAExecutionProvider(?:\(([^)]*)\))?", facts.get("onnxrt_providers", ""))
    return match is not None and "use_tf32=0" not in (match.group(1) or "").replace(" ", "")


TF32_NOTE = (
    "the CUDA execution provider ran with TF32 on (use_tf32=1, ONNX Runtime's default): float32 matrix "
    "products and convolutions round their inputs to 10-bit mantissas (errors near 1e-3 relative); to compare "
    "at float32 precision set [onnxrt] provider_options = { CUDAExecutionProvider = { use_tf32 = 0 } } "
    "(or --provider-options CUDAExecutionProvider:use_tf32=0)"
)


def precision_note(facts: dict, rows) -> str | None:
    """:data:`TF32_NOTE` when one of ``rows`` (``gate.results.OutputVerdict``) is a float output out
    of tolerance and ``facts`` say the CUDA provider ran with TF32 on; else None."""
    if not tf32_in_use(facts):
        return None
    for row in rows:
        if not row.error and not row.passed and row.dtypes and _is_float(row.dtypes[0]):
            return TF32_NOTE
    return None


def _is_float(name) -> bool:
    try:
        return np.dtype(name).kind in "fc"
    except TypeError:
        return "float" in str(name)
