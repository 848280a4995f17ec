"""Which ONNX Runtime build is installed: exactly one, imported with a one-line error otherwise.

Every ONNX Runtime build on PyPI (``onnxruntime`` for the CPU, ``onnxruntime-gpu`` for CUDA, and the
DirectML, OpenVINO, QNN, ROCm and nightly builds) installs the same Python package, ``onnxruntime``,
into site-packages. With two of them installed the second has overwritten part of the first's files,
so neither build is what it claims to be (typically ``CUDAExecutionProvider`` goes missing);
ONNX Runtime's install guide says to uninstall one before installing another. accuracy-gate installs
one through its extras: ``[cpu]`` (onnxruntime) or ``[gpu]`` (onnxruntime-gpu, TensorRT, cuda-python).
"""

from __future__ import annotations

import functools
import importlib
from importlib import metadata

from gate.errors import GateError

# The PyPI distributions that install the `onnxruntime` Python package (onnxruntime's install guide).
DISTRIBUTIONS = (
    "onnxruntime",
    "onnxruntime-gpu",
    "onnxruntime-directml",
    "onnxruntime-openvino",
    "onnxruntime-qnn",
    "onnxruntime-rocm",
    "onnxruntime-training",
    "ort-nightly",
    "ort-nightly-gpu",
)
INSTALL_HINT = "pip install 'accuracy-gate[cpu]' (CPU) or 'accuracy-gate[gpu]' (CUDA 12, with TensorRT)"


def installed_distributions() -> list[str]:
    """The names (as in :data:`DISTRIBUTIONS`) of the ONNX Runtime builds whose metadata is on
    ``sys.path``, in that order; empty when none is installed."""
    found = []
    for name in DISTRIBUTIONS:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        found.append(name)
    return found


@functools.lru_cache(maxsize=1)
def import_onnxruntime():
    """The ``onnxruntime`` module, after checking that exactly one ONNX Runtime build is installed.

    Raises:
        GateError: two or more builds are installed (names them and the commands that fix it), or
            ``onnxruntime`` cannot be imported (says what to install).
    """
    found = installed_distributions()
    if len(found) > 1:
        raise GateError(
            f"Several ONNX Runtime builds are installed ({', '.join(found)}); they install the same Python "
            f"module 'onnxruntime' over each other, so none of them works as built. Keep one: "
            f"pip uninstall -y {' '.join(found)}, then {INSTALL_HINT}."
        )
    try:
        return importlib.import_module("onnxruntime")
    except ImportError as err:
        raise GateError(f"ONNX Runtime is not installed (import onnxruntime: {err}); {INSTALL_HINT}.") from err


def onnxruntime_version() -> str:
    """The installed ONNX Runtime's version (``onnxruntime.__version__``), or ``""`` when none can be
    imported (a TensorRT-only run needs none). Never raises."""
    try:
        return import_onnxruntime().__version__
    except GateError:
        return ""
