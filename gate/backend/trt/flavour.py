"""Which TensorRT module to use, and what is shared by everything that talks to it: the import with
a one-line error, the logger bridge, and the TensorRT-to-numpy dtype table.

Two flavours have the same Python API for everything this package uses:
- ``tensorrt`` (TensorRT 10.x / 11.x; ``pip install tensorrt``): needs a GPU to build and to run.
- ``tensorrt_rtx`` (TensorRT for RTX; ``pip install tensorrt-rtx-cu13``): builds ahead of time on a
  machine without a GPU; networks are always strongly typed (no fp16 / bf16 / int8 builder flags, no
  INT8 calibrator); runs on compute capability 7.5 (when built for it), 8.0, 8.6, 8.9 and 12.x only.
"""

from __future__ import annotations

import collections
import importlib
import logging

import numpy as np

from gate.errors import GateError

log = logging.getLogger("gate.backend.trt")

FLAVOURS = ("tensorrt", "tensorrt_rtx")
_INSTALL_HINTS = {
    "tensorrt": "pip install 'accuracy-gate[trt]' (TensorRT 10 or later and cuda-python)",
    "tensorrt_rtx": "pip install tensorrt-rtx-cu13 (or tensorrt-rtx-cu12)",
}
_loggers: dict[str, object] = {}


def check_flavour(flavour: str) -> str:
    """Returns ``flavour`` if it is ``tensorrt`` or ``tensorrt_rtx``.

    Raises:
        GateError: any other value (names the setting and the choices).
    """
    if flavour not in FLAVOURS:
        raise GateError(f"TensorRT flavour '{flavour}' is not one of {', '.join(FLAVOURS)}.")
    return flavour


def import_trt(flavour: str = "tensorrt"):
    """The TensorRT Python module of ``flavour`` (imported on first use: it takes seconds).

    Raises:
        GateError: an unknown flavour, or the module is not installed (says what to install).
    """
    check_flavour(flavour)
    try:
        return importlib.import_module(flavour)
    except ImportError as err:
        raise GateError(
            f"TensorRT flavour '{flavour}' is selected but the Python module '{flavour}' cannot be imported "
            f"({err}); install it: {_INSTALL_HINTS[flavour]}."
        ) from err


def module_of(obj):
    """The TensorRT module whose bindings made ``obj`` (an engine, a context). Each flavour binds its
    classes and enums in its own module (``tensorrt_rtx_bindings.tensorrt_rtx`` for example), so this
    finds the right ``ExecutionContextAllocationStrategy`` and ``IOutputAllocator`` for either flavour
    without a setting."""
    return importlib.import_module(type(obj).__module__)


def flavour_of(trt) -> str:
    """``tensorrt_rtx`` or ``tensorrt`` for a TensorRT module."""
    return "tensorrt_rtx" if trt.__name__.split(".")[-1].startswith("tensorrt_rtx") else "tensorrt"


def trt_logger(trt):
    """One ``trt.ILogger`` per flavour that sends TensorRT's messages to the ``gate.backend.trt``
    Python logger: warnings at INFO (TensorRT warns about routine casts), the rest at DEBUG. Errors are
    also kept (``.errors``, the last 32) so that a failing build or inference can name TensorRT's first
    error in its one-line GateError instead of printing TensorRT's multi-line log.

    ``trt`` may be the flavour's package (``tensorrt_rtx``) or the module its classes live in
    (``tensorrt_rtx_bindings.tensorrt_rtx``, what :func:`module_of` gives): both get the same logger.
    TensorRT hands a custom ``ILogger`` every message whatever its ``min_severity`` (only its built-in
    ``Logger`` filters), so ``log`` drops messages less severe than ``min_severity`` itself; errors
    are always kept."""
    key = flavour_of(trt)
    if key not in _loggers:

        class GateTrtLogger(trt.ILogger):
            def __init__(self):
                trt.ILogger.__init__(self)
                self.errors = collections.deque(maxlen=32)

            def log(self, severity, msg):
                level = getattr(severity, "name", str(severity))
                text = str(msg).strip()
                if level in ("INTERNAL_ERROR", "ERROR"):
                    self.errors.append(text)
                    log.debug("TensorRT error: %s", text)
                elif int(severity) > int(self.min_severity):  # Severity: 0 INTERNAL_ERROR ... 4 VERBOSE
                    return
                elif level == "WARNING":
                    log.info("TensorRT: %s", text)
                else:
                    log.debug("TensorRT: %s", text)

        logger = GateTrtLogger()
        logger.min_severity = (
            trt.ILogger.Severity.INFO if log.isEnabledFor(logging.DEBUG) else trt.ILogger.Severity.WARNING
        )
        _loggers[key] = logger
    return _loggers[key]


def first_error(logger, default: str) -> str:
    """TensorRT's first error since ``logger.errors`` was last cleared, on one line, else ``default``."""
    if not logger.errors:
        return default
    return " ".join(logger.errors[0].split())


def last_error(trt, default: str) -> str:
    """TensorRT's latest error logged through ``trt_logger(trt)``, on one line, else ``default`` (also
    when no such logger was made, e.g. for an engine from elsewhere). ``trt`` is the package or the
    module of an engine's or a context's class (:func:`module_of`)."""
    logger = _loggers.get(flavour_of(trt)) if hasattr(trt, "__name__") else None
    if logger is None or not logger.errors:
        return default
    return " ".join(logger.errors[-1].split())


# TensorRT DataType name -> numpy dtype. BF16 has no numpy dtype: it is carried as float32 on the
# host and converted at the copy (round to nearest even), see to_bf16_bits / from_bf16_bits.
_NUMPY_DTYPES = {
    "FLOAT": np.float32,
    "HALF": np.float16,
    "BF16": np.float32,
    "INT8": np.int8,
    "INT32": np.int32,
    "INT64": np.int64,
    "BOOL": np.bool_,
    "UINT8": np.uint8,
}
_ITEMSIZE = {"BF16": 2}


def numpy_dtype(trt_dtype, where: str) -> np.dtype:
    """The host dtype for a TensorRT ``DataType`` (float32 for BF16).

    Raises:
        GateError: FP8, INT4, FP4, E8M0 I/O (``where`` names the tensor).
    """
    name = getattr(trt_dtype, "name", str(trt_dtype))
    if name not in _NUMPY_DTYPES:
        raise GateError(
            f"{where} has TensorRT type {name}, which has no host representation here; "
            "use a model whose I/O is float, half, bf16 or an integer type."
        )
    return np.dtype(_NUMPY_DTYPES[name])


def device_itemsize(trt_dtype) -> int:
    """Bytes per element on the device (2 for BF16, else the host dtype's)."""
    name = getattr(trt_dtype, "name", str(trt_dtype))
    return _ITEMSIZE.get(name) or np.dtype(_NUMPY_DTYPES[name]).itemsize


def is_bf16(trt_dtype) -> bool:
    return getattr(trt_dtype, "name", None) == "BF16"


def to_bf16_bits(array: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16, same shape), rounding to nearest even; NaN stays NaN."""
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32)
    rounded = ((bits + np.uint32(0x7FFF) + ((bits >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    return np.where(np.isnan(array), np.uint16(0x7FC0), rounded)


def from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (uint16) -> float32 (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)
