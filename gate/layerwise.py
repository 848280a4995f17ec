"""Per-layer diagnostics ("mark all"): every intermediate tensor of the model marked as an output,
for ONNX Runtime and TensorRT, compared runner against reference to find the first layer that
diverges. These results are diagnostics only: the verdict always comes from the unmodified model.
A tensor that one runner does not produce (e.g. fused away by TensorRT) is "not produced", never a
failure."""

from __future__ import annotations

import copy
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import onnx

from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
from gate.comparator.compare import SimpleCompareFunc, compare_arrays
from gate.config import GateConfig


@dataclass
class LayerRow:
    """One intermediate tensor: ``status`` is ``pass``, ``FAIL`` or ``not produced``."""

    tensor: str
    status: str
    max_absdiff: float | None = None
    max_reldiff: float | None = None


def _mark_all_runner(kind: str, cfg: GateConfig, marked_model: Path, name: str):
    if kind == "onnxrt":
        return OnnxrtRunner(
            SessionFromOnnx(
                marked_model,
                cfg.execution_providers,
                cfg.graph_optimization_level,
                provider_options=cfg.provider_options,
            ),
            name=name,
        )
    from gate.config import trt_build_settings
    from gate.job import trt_runner

    build = cfg.trt_build if cfg.trt_build is not None else trt_build_settings(cfg.trt, cfg.source)
    return trt_runner(replace(cfg, trt_build=replace(build, outputs="*")), name)


def compare_layers(cfg: GateConfig, feed_dict) -> tuple[str, str, list[LayerRow]]:
    """Runs the first and the last of ``cfg.runners`` with every tensor marked on one feed_dict and
    compares each tensor, in node order, under the configured tolerances (the last runner is the
    reference). Returns ``(runner, reference, rows)``.

    Raises:
        GateError: fewer than two runners; anything a runner raises.
    """
    from gate.backend.trt.layerwise import onnx_tensor_names, onnx_with_outputs
    from gate.errors import GateError

    if len(cfg.runners) < 2:
        raise GateError("per-layer comparison needs two runners, e.g. --trt --onnxrt.")
    model = onnx.load(str(cfg.model))
    order = onnx_tensor_names(model)
    func = SimpleCompareFunc(
        atol=cfg.atol, rtol=cfg.rtol, infinities_compare_equal=cfg.infinities_compare_equal, check_error_stat="max"
    )
    kinds = [cfg.runners[0], cfg.runners[-1]]
    names = [kinds[0], kinds[1] if kinds[1] != kinds[0] else f"{kinds[1]}-reference"]
    with tempfile.TemporaryDirectory(prefix="accuracy-gate-layers-") as scratch:
        marked = Path(scratch) / cfg.model.name
        onnx.save(onnx_with_outputs(model, "*"), str(marked))
        outputs = []
        for kind, name in zip(kinds, names):
            with _mark_all_runner(kind, cfg, marked, name) as runner:
                outputs.append({k: copy.deepcopy(v) for k, v in runner.infer(feed_dict).items()})
    rows = []
    for tensor in order:
        if tensor not in outputs[0] or tensor not in outputs[1]:
            rows.append(LayerRow(tensor, "not produced"))
            continue
        threshold = func.thresholds_for(tensor)
        result = compare_arrays(outputs[0][tensor], outputs[1][tensor], threshold)
        status = "pass" if result else "FAIL"
        rows.append(LayerRow(tensor, status, result.max_absdiff, result.max_reldiff))
    return names[0], names[1], rows


def render_layers(runner: str, reference: str, rows: list[LayerRow], limit: int = 20) -> str:
    """A short text report: the first diverging tensor, counts, and the first ``limit`` failures."""
    failed = [row for row in rows if row.status == "FAIL"]
    missing = sum(row.status == "not produced" for row in rows)
    lines = [f"per-layer ({runner} vs {reference}, {len(rows)} tensors in node order; diagnostics only):"]
    if failed:
        first = failed[0]
        lines.append(
            f"  first divergence: '{first.tensor}' (max abs {first.max_absdiff:.5g}, max rel {first.max_reldiff:.5g})"
        )
    else:
        lines.append("  no tensor diverges beyond the tolerances")
    lines.append(f"  {len(rows) - len(failed) - missing} pass, {len(failed)} FAIL, {missing} not produced")
    for row in failed[1:limit]:
        lines.append(f"  FAIL '{row.tensor}' (max abs {row.max_absdiff:.5g})")
    return "\n".join(lines)
