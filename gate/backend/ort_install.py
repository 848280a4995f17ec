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
import importlib.util
import os

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
    """The names (as in :data:`DISTRIBUTIONS`) of the ONNX Runtime builds installed where ``import
    onnxruntime`` finds its package, in that order; empty when none is installed. Builds there have
    written their files over one another. A build in another folder of ``sys.path`` that the first
    one shadows (e.g. onnxruntime-gpu in ``PYTHONPATH=/opt/site`` over a system onnxruntime) is not
    counted: its files are intact and never imported.

    The builds are found by the names of the metadata folders pip writes beside the package
    (``onnxruntime_gpu-1.31.1.dist-info``: the escaped name, PEP 427 / the packaging spec's
    "recording installed projects"), without reading any file: parsing every installed project's
    METADATA (``importlib.metadata.distributions()``) took 0.19 s of a GPU check with 200 projects
    installed."""
    spec = importlib.util.find_spec("onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        return []
    package = next(iter(spec.submodule_search_locations))
    folders = {os.path.dirname(os.path.abspath(package)), os.path.dirname(os.path.realpath(package))}
    found = set()
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            if entry.endswith((".dist-info", ".egg-info")):
                name = entry.rsplit(".", 1)[0].split("-", 1)[0].lower().replace("_", "-").replace(".", "-")
                if name in DISTRIBUTIONS:
                    found.add(name)
    return [name for name in DISTRIBUTIONS if name in found]


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
