"""``check --preview-precision fp16``: the effect of a precision change on the golden set, on any
machine. The model is converted exactly as a strongly typed TensorRT build converts it
(``gate.backend.trt.precision.convert_model``, same converter, same cache) and checked under ONNX
Runtime's CPU provider against the same golden outputs. It previews the conversion, not TensorRT's
kernels: a TensorRT engine of the converted model can differ from it by its own rounding.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gate.backend.trt.precision import PRECISIONS, convert_model, describe
from gate.errors import GateError


def check_preview(cfg, precision: str, shard=None, partial: bool = False):
    """``gate.job.check`` of ``cfg`` with its model converted to ``precision`` (``fp16`` or ``bf16``),
    under ONNX Runtime CPU (runners ``onnxrt``, provider ``CPUExecutionProvider``). The converted model
    is cached under ``<[trt] cache_dir>/converted``. The result's facts gain ``preview_precision``
    (precision, converter, version) and ``preview_of`` (the original model's file name); its scope
    says it is a preview.

    Raises:
        GateError: an unknown precision; no converter installed; the model cannot be converted; any
            error of ``check``.
    """
    from gate.job import check

    if precision not in PRECISIONS:
        raise GateError(f"--preview-precision must be one of {', '.join(PRECISIONS)}, got {precision!r}.")
    cache = Path(cfg.trt.get("cache_dir", ".accuracy-gate-cache/trt")) / "converted"
    converted, conv = convert_model(cfg.model, precision, cache, given=f"--preview-precision {precision}")
    preview = replace(
        cfg,
        model=converted,
        runners=["onnxrt"],
        execution_providers=["CPUExecutionProvider"],
        provider_options={},
    )
    result = check(preview, shard, partial=partial)
    facts = {"preview_precision": describe(precision, conv), "preview_of": cfg.model.name}
    result.facts.update(facts)
    result.model = cfg.model.name
    scope = f"{precision} preview: the model converted by {conv['name']}, run by ONNX Runtime CPU"
    result.scope = "; ".join(filter(None, [scope, result.scope]))
    if result.run is not None:
        result.run.facts.update(facts)
        result.run.model = cfg.model.name
    return result
