"""Startup GPU probe: is an NVIDIA GPU visible, and which one.

It talks to the CUDA driver (``libcuda``) through ``ctypes``, so it needs neither cuda-python nor
TensorRT: the usual failure it exists for is a container started without ``--gpus``, where the
NVIDIA container runtime mounted neither the driver library nor the device nodes, and the user should
get one line saying so instead of a stack trace from deep inside TensorRT.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass

from gate.errors import GateError

_CONTAINER_HINT = (
    "the container was probably started without --gpus (use `docker run --gpus all ...`, or a GPU runner "
    "with the NVIDIA container toolkit); TensorRT needs an NVIDIA GPU"
)
_MACHINE_HINT = (
    "TensorRT needs an NVIDIA GPU and its driver, and this machine shows none (run on a GPU machine or "
    "runner, or compare with ONNX Runtime alone)"
)
_CONTAINER_MARKS = ("/.dockerenv", "/run/.containerenv")  # Docker's and Podman's


def _no_gpu_hint() -> str:
    """Why no GPU is seen, as far as can be told: a container started without its GPUs, or a machine
    without any."""
    return _CONTAINER_HINT if any(os.path.exists(mark) for mark in _CONTAINER_MARKS) else _MACHINE_HINT
_DRIVER_NAMES = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1", "libcuda.so")
_ATTR_CC_MAJOR = 75  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
_ATTR_CC_MINOR = 76


@dataclass(frozen=True)
class GpuInfo:
    """One visible GPU: its CUDA ordinal (after ``CUDA_VISIBLE_DEVICES``), name, compute capability
    ``(major, minor)``, total memory in bytes, and the driver's CUDA version as ``(major, minor)``."""

    index: int
    name: str
    compute_capability: tuple[int, int]
    total_memory: int
    driver_cuda_version: tuple[int, int]

    @property
    def compute_capability_str(self) -> str:
        return f"{self.compute_capability[0]}.{self.compute_capability[1]}"


def _load_driver():
    for name in _DRIVER_NAMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _error_name(lib, code: int) -> str:
    text = ctypes.c_char_p()
    try:
        if lib.cuGetErrorName(code, ctypes.byref(text)) == 0 and text.value:
            return text.value.decode()
    except (AttributeError, OSError):
        pass
    return f"CUDA driver error {code}"


def probe_gpu(device: int = 0, flavour: str | None = None) -> GpuInfo:
    """The GPU that TensorRT will use (CUDA ordinal ``device``).

    Args:
        device: CUDA device ordinal (0 = the first visible one).
        flavour: when ``"tensorrt_rtx"``, also check that TensorRT-RTX runs on this GPU's compute
            capability (its module lists them in ``ComputeCapability``; this imports it).

    Returns:
        GpuInfo.

    Raises:
        GateError: one line: no NVIDIA driver library or no GPU visible (in a container: saying it
            was probably started without ``--gpus``); ``device`` out of range; the driver too old; a
            compute capability the flavour cannot run on.
    """
    lib = _load_driver()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if lib is None:
        raise GateError(
            f"No NVIDIA GPU is visible (the CUDA driver library libcuda cannot be loaded): {_no_gpu_hint()}."
        )
    code = lib.cuInit(0)
    if code == 100:  # CUDA_ERROR_NO_DEVICE
        where = f" (CUDA_VISIBLE_DEVICES={visible!r})" if visible is not None else ""
        raise GateError(f"No NVIDIA GPU is visible{where}: {_no_gpu_hint()}.")
    if code == 35:  # CUDA_ERROR_INSUFFICIENT_DRIVER / stub driver without a kernel module
        raise GateError(f"The NVIDIA driver is not usable (CUDA_ERROR_INSUFFICIENT_DRIVER): {_no_gpu_hint()}.")
    if code != 0:
        raise GateError(f"The CUDA driver failed to start ({_error_name(lib, code)}): {_no_gpu_hint()}.")
    count = ctypes.c_int()
    lib.cuDeviceGetCount(ctypes.byref(count))
    if count.value == 0:
        raise GateError(f"No NVIDIA GPU is visible: {_no_gpu_hint()}.")
    if not 0 <= device < count.value:
        raise GateError(f"GPU {device} is not visible; {count.value} GPU(s) are (ordinals 0..{count.value - 1}).")
    handle = ctypes.c_int()
    lib.cuDeviceGet(ctypes.byref(handle), device)
    name = ctypes.create_string_buffer(256)
    lib.cuDeviceGetName(name, 256, handle)
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.cuDeviceGetAttribute(ctypes.byref(major), _ATTR_CC_MAJOR, handle)
    lib.cuDeviceGetAttribute(ctypes.byref(minor), _ATTR_CC_MINOR, handle)
    memory = ctypes.c_size_t()
    lib.cuDeviceTotalMem_v2(ctypes.byref(memory), handle)
    version = ctypes.c_int()
    lib.cuDriverGetVersion(ctypes.byref(version))
    info = GpuInfo(
        index=device,
        name=name.value.decode(errors="replace"),
        compute_capability=(major.value, minor.value),
        total_memory=memory.value,
        driver_cuda_version=(version.value // 1000, version.value % 1000 // 10),
    )
    if flavour == "tensorrt_rtx":
        check_rtx_support(info)
    return info


def rtx_compute_capabilities(trt=None) -> list[tuple[int, int]]:
    """The compute capabilities TensorRT-RTX can build for, from its ``ComputeCapability`` enum
    (``SM86`` -> (8, 6), ``SM120`` -> (12, 0))."""
    if trt is None:
        from gate.backend.trt.flavour import import_trt

        trt = import_trt("tensorrt_rtx")
    caps = []
    for name in trt.ComputeCapability.__members__:
        if name.startswith("SM") and name[2:].isdigit():
            digits = name[2:]
            caps.append((int(digits[:-1]), int(digits[-1])))
    return sorted(caps)


def check_rtx_support(gpu: GpuInfo, trt=None) -> None:
    """Raises GateError when TensorRT-RTX cannot run on ``gpu`` (e.g. an H100/H200, 9.0)."""
    caps = rtx_compute_capabilities(trt)
    if tuple(gpu.compute_capability) not in caps:
        listed = ", ".join(f"{a}.{b}" for a, b in caps)
        raise GateError(
            f"TensorRT flavour tensorrt_rtx cannot run on {gpu.name} (compute capability "
            f"{gpu.compute_capability_str}); it supports {listed}: use flavour tensorrt on this GPU."
        )
