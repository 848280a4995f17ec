"""Reduced precision on strongly typed TensorRT (TensorRT 11.x, TensorRT-RTX): the model is converted.

TensorRT 11 removed ``BuilderFlag.FP16``, ``BF16`` and ``INT8`` (and the INT8 calibrator); TensorRT-RTX
never had them: every network is strongly typed, its precision is the model's. NVIDIA's migration
guide (TensorRT 11 "Strongly Typed Networks") says: convert the ONNX model to fp16 / bf16 with
ModelOpt AutoCast (``modelopt.onnx.autocast``), quantize it with explicit Q/DQ nodes for int8. So
``--fp16`` / ``--bf16`` there convert the model first:

- with ModelOpt AutoCast when ``nvidia-modelopt[onnx]`` is installed
  (``convert_to_mixed_precision(low_precision_type=..., keep_io_types=True)``);
- else fp16 with ``onnxconverter-common`` (``float16.convert_float_to_float16(keep_io_types=True)``,
  the ``precision`` extra), which converts e.g. the PP-OCR classifier and recognizer.

Inputs and outputs keep their float32 types (``keep_io_types``), so the stored inputs and golden
outputs still fit. The converted model is cached (``<cache>/converted/<key>.onnx``), keyed by the
model's sha256, the converter, its version and settings; those are part of the engine-cache key too.
The same conversion runs under ONNX Runtime CPU as a preview of the precision change
(``check --preview-precision fp16``), on any machine.

TensorRT 10 keeps its builder flags (nothing is converted there).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import warnings
from pathlib import Path

from gate.errors import GateError

log = logging.getLogger("gate.backend.trt")

PRECISIONS = ("fp16", "bf16")
INT8_NEEDS = (
    "--int8 on strongly typed TensorRT ({module} {version}) needs a model with explicit quantization: "
    "insert calibrated QuantizeLinear/DequantizeLinear nodes (e.g. ModelOpt: python -m modelopt.onnx.quantization "
    "--onnx_path model.onnx --quantize_mode int8 --calibration_data inputs.npz) and build that model without --int8"
)


def strongly_typed_only(trt) -> bool:
    """True for a TensorRT without the weak-typing precision flags (TensorRT 11.x, TensorRT-RTX)."""
    return not hasattr(trt.BuilderFlag, "FP16")


def converter(precision: str, given: str | None = None) -> dict:
    """The converter for ``precision``: ``{"name", "version", "settings"}``; ModelOpt AutoCast if it is
    installed, else onnxconverter-common (fp16 only). ``given``: what the user asked for, for the
    errors (``"--preview-precision fp16"``); default ``"--fp16 on strongly typed TensorRT"``.

    Raises:
        GateError: an unknown precision; no converter installed (says what to install); bf16
            without ModelOpt.
    """
    if precision not in PRECISIONS:
        raise GateError(f"precision '{precision}' is not one of {', '.join(PRECISIONS)}.")
    if _has("modelopt.onnx.autocast"):
        from importlib.metadata import version

        return {
            "name": "modelopt.onnx.autocast",
            "version": version("nvidia-modelopt"),
            "settings": {"low_precision_type": precision, "keep_io_types": True},
        }
    return _float16_converter(precision, given or f"--{precision} on strongly typed TensorRT")


def _has(module: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _float16_converter(precision: str, given: str) -> dict:
    if precision != "fp16":
        raise GateError(
            f"{given} needs ModelOpt AutoCast (pip install 'nvidia-modelopt[onnx]'); "
            "onnxconverter-common converts to fp16 only."
        )
    if not _has("onnxconverter_common"):
        raise GateError(
            f"{given} converts the model first, which needs onnxconverter-common "
            "(pip install 'accuracy-gate[precision]') or ModelOpt (pip install 'nvidia-modelopt[onnx]')."
        )
    import onnxconverter_common

    return {
        "name": "onnxconverter_common.float16",
        "version": onnxconverter_common.__version__,
        "settings": {"to": "float16", "keep_io_types": True, "graph_outputs_apart": True},
    }


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def conversion_key(model_path, conv: dict) -> str:
    """sha256 of the model's contents and the converter's name, version and settings (hex)."""
    text = json.dumps({"model_sha256": _sha256(Path(model_path)), **conv}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def convert_model(model_path, precision: str, cache_dir=None, given: str | None = None) -> tuple[Path, dict]:
    """The model converted to ``precision`` (``converter``), from the cache when it is there.

    Args:
        model_path: the float32 ``.onnx`` file.
        precision: ``fp16`` or ``bf16``.
        cache_dir: where converted models are kept (``<cache_dir>/<key>.onnx``); None: a temporary
            folder (the file lives as long as the process).
        given: what the user asked for, for the errors (``converter``).

    Returns:
        ``(path of the converted model, the converter's name/version/settings)``.

    Raises:
        GateError: no converter (``converter``); the model cannot be read or converted (names the
            file and the converter's reason).
    """
    model_path = Path(model_path)
    if not model_path.is_file():
        raise GateError(f"{model_path}: model file not found.")
    conv = converter(precision, given)
    folder = Path(cache_dir) if cache_dir is not None else Path(tempfile.mkdtemp(prefix="accuracy-gate-converted-"))
    target = folder / f"{conversion_key(model_path, conv)[:32]}.onnx"
    if target.is_file():
        log.info("Converted model (%s) from the cache: %s", precision, target)
        return target, conv
    log.info("Converting %s to %s with %s %s...", model_path, precision, conv["name"], conv["version"])
    try:
        model = _convert(model_path, precision, conv)
    except GateError:
        raise
    except Exception as err:  # the converters raise their own types (and onnx's checker errors)
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise GateError(f"{model_path}: {conv['name']} cannot convert the model to {precision} ({first}).") from err
    import onnx

    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(f".{os.getpid()}.tmp")
    try:
        onnx.save(model, str(partial))
        os.replace(partial, target)  # atomic: parallel shards may convert at once
    except OSError as err:
        raise GateError(f"{target}: cannot write the converted model ({err.strerror or err}).") from err
    finally:
        partial.unlink(missing_ok=True)
    return target, conv


def _convert(model_path: Path, precision: str, conv: dict):
    import onnx

    if conv["name"] == "modelopt.onnx.autocast":
        from modelopt.onnx.autocast import convert_to_mixed_precision

        return convert_to_mixed_precision(onnx_path=str(model_path), **conv["settings"])
    from onnxconverter_common import float16

    model = onnx.load(str(model_path))
    _graph_outputs_apart(model.graph)
    with warnings.catch_warnings():  # it warns for every constant it clamps into float16's range
        warnings.simplefilter("ignore")
        return float16.convert_float_to_float16(model, keep_io_types=True)


def _graph_outputs_apart(graph) -> None:
    """A graph output that other nodes also read gets its own Identity node (``t`` becomes
    ``t.gate_internal`` for the producer and the readers, and ``Identity(t.gate_internal) -> t``):
    onnxconverter-common's ``keep_io_types`` casts such an output back to float32 but leaves its
    readers declared float16 (ONNX Runtime then refuses the model: "Type (tensor(float16)) of output
    arg ... does not match expected type (tensor(float))"). Only top-level readers are renamed, so a
    graph whose subgraphs (If, Loop, Scan bodies) read such an output is left as it is."""
    from onnx import helper

    produced = {name for node in graph.node for name in node.output}  # (not an input or initializer)
    read = {name for node in graph.node for name in node.input} & {o.name for o in graph.output} & produced
    if not read or any(attr.g.node or attr.graphs for node in graph.node for attr in node.attribute):
        return
    taken = {name for node in graph.node for name in (*node.input, *node.output)}
    renamed = {}
    for name in sorted(read):
        new = f"{name}.gate_internal"
        while new in taken:
            new += "_"
        renamed[name] = new
    for node in graph.node:
        node.output[:] = [renamed.get(name, name) for name in node.output]
        node.input[:] = [renamed.get(name, name) for name in node.input]
    for info in graph.value_info:
        info.name = renamed.get(info.name, info.name)
    for name, new in renamed.items():
        graph.node.append(helper.make_node("Identity", [new], [name], name=f"{name}.gate_output"))


def describe(precision: str, conv: dict) -> str:
    """``fp16 (onnxconverter_common.float16 1.16.0, keep_io_types)`` for reports."""
    return f"{precision} ({conv['name']} {conv['version']}, keep_io_types)"


def prepare_build(trt, model_path, settings, cache_dir=None):
    """What ``build_engine`` builds from: on strongly typed TensorRT with fp16 / bf16, the converted
    model (``convert_model``, cached under ``<cache_dir>/converted``) and the settings without those
    flags (TensorRT has none); elsewhere the model and the settings as they are.

    Returns:
        ``(model path, settings for the builder config, conversion fields or None)``; the fields
        (precision, converter name, version, settings) belong in the engine-cache key.

    Raises:
        GateError: int8 on strongly typed TensorRT (says what it needs); no converter; the model
            cannot be converted.
    """
    from dataclasses import replace

    if not strongly_typed_only(trt):
        return Path(model_path), settings, None
    if settings.int8:
        raise GateError(INT8_NEEDS.format(module=trt.__name__, version=trt.__version__) + ".")
    precision = "bf16" if settings.bf16 else "fp16" if settings.fp16 else None
    if precision is None:
        return Path(model_path), settings, None
    folder = Path(cache_dir) / "converted" if cache_dir is not None else None
    converted, conv = convert_model(model_path, precision, folder)
    return converted, replace(settings, fp16=False, bf16=False), {"precision": precision, **conv}
