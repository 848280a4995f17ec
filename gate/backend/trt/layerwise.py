"""Per-layer comparison ("mark all", ``--trt-outputs '*'`` / ``--onnx-outputs '*'``): marking
intermediate tensors as outputs in a TensorRT network and in an ONNX model, so that a user can find the
first layer whose outputs diverge.

Per-layer results are diagnostics: the pass/fail verdict comes from the unmodified model. A tensor the
ONNX model has but the TensorRT network does not (folded away by the parser, inside a loop or
conditional body, a shape computation) is *not produced* (``not_produced``), not a failure.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

from gate.errors import GateError

log = logging.getLogger("gate.backend.trt")

# Layers whose outputs Polygraphy's mark_layerwise leaves out: constants and shape reads are not
# computations worth comparing (TensorRT folds them).
_EXCLUDED_LAYER_TYPES = ("SHAPE", "CONSTANT")
# Layers whose outputs are inside a loop or conditional body, and the layers that carry a body's
# results back out. TensorRT cannot make a tensor inside a body a network output.
_BODY_SOURCES = ("ITERATOR", "RECURRENCE", "TRIP_LIMIT", "CONDITION", "CONDITIONAL_INPUT")
_BODY_EXITS = ("LOOP_OUTPUT", "CONDITIONAL_OUTPUT")


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(name == p or fnmatchcase(name, p) for p in patterns)


def _listing(names: Sequence[str], limit: int = 10) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def network_tensors(network) -> dict:
    """``{name: ITensor}`` for the network's inputs and every layer output, in layer order."""
    tensors = {}
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        tensors[tensor.name] = tensor
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        for out in range(layer.num_outputs):
            tensor = layer.get_output(out)
            if tensor is not None:
                tensors.setdefault(tensor.name, tensor)
    return tensors


def markable_tensors(network) -> list[str]:
    """Names of the layer outputs that "mark all" marks, in layer order: not from SHAPE or CONSTANT
    layers (as Polygraphy's ``mark_layerwise``), not shape tensors, and not inside a loop or
    conditional body. A body is found by data flow rather than by layer order (the ONNX parser
    interleaves nested If bodies): a tensor is inside one when its layer is a body source
    (iterator, recurrence, conditional input) or reads a tensor inside one, until a loop or conditional
    output carries it out."""
    inside: set[str] = set()
    names = []
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        kind = layer.type.name
        inputs = [layer.get_input(i) for i in range(layer.num_inputs)]
        in_body = kind in _BODY_SOURCES or (
            kind not in _BODY_EXITS and any(t is not None and t.name in inside for t in inputs)
        )
        for out in range(layer.num_outputs):
            tensor = layer.get_output(out)
            if tensor is None:
                continue
            if in_body:
                inside.add(tensor.name)
            elif kind not in _EXCLUDED_LAYER_TYPES and not tensor.is_shape_tensor:
                names.append(tensor.name)
    return names


def mark_network_outputs(network, outputs, exclude_outputs: Sequence[str] = (), only=None) -> list[str]:
    """Marks TensorRT network outputs as ``TrtBuildSettings.outputs`` says; returns the names marked
    on top of the model's own outputs (for ``"*"``) or the new output list (for names).

    Args:
        network: a parsed ``INetworkDefinition``.
        outputs: None (leave the model's outputs), ``"*"`` (mark all, ``markable_tensors``, keeping the
            model's outputs), or names / fnmatch patterns that *replace* the model's outputs.
        exclude_outputs: names / patterns left out of ``"*"``.
        only: for ``"*"``, the names that may be marked, or None for all. The builder passes the ONNX
            main graph's tensor names (``onnx_tensor_names``): a tensor of an ONNX If / Loop body,
            which TensorRT cannot output, is then never marked, and the marked tensors are those
            ``onnx_with_outputs`` gives ONNX Runtime, so the two runners' outputs pair by name.

    Raises:
        GateError: a name or pattern that matches no tensor of the network (lists some that exist).
    """
    if outputs is None:
        return []
    tensors = network_tensors(network)
    if outputs == "*":
        current = {network.get_output(i).name for i in range(network.num_outputs)}
        marked = []
        for name in markable_tensors(network):
            if name in current or _matches(name, exclude_outputs) or (only is not None and name not in only):
                continue
            network.mark_output(tensors[name])
            marked.append(name)
        log.info("Marked %d TensorRT tensors as outputs (mark all).", len(marked))
        return marked
    selected = []
    for pattern in outputs:
        hits = [name for name in tensors if name == pattern or fnmatchcase(name, pattern)]
        if not hits:
            raise GateError(
                f"--trt-outputs '{pattern}' matches no tensor of the TensorRT network; "
                f"it has {_listing(list(tensors))}."
            )
        selected.extend(h for h in hits if h not in selected)
    for index in reversed(range(network.num_outputs)):
        network.unmark_output(network.get_output(index))
    for name in selected:
        network.mark_output(tensors[name])
    return selected


def _load(model):
    import onnx

    if isinstance(model, onnx.ModelProto):
        return copy.deepcopy(model)
    path = Path(model)
    if not path.is_file():
        raise GateError(f"{path}: model file not found.")
    try:
        return onnx.load(str(path))
    except Exception as err:
        raise GateError(f"{path}: not an ONNX model onnx can load ({str(err).strip().splitlines()[0]}).") from err


def onnx_tensor_names(model) -> list[str]:
    """Every tensor computed by a node of the main graph, in node order (an ``onnx.ModelProto`` or a
    path), except Constant nodes' outputs and empty (unused optional) names, as Polygraphy's
    ``all_tensor_names``. Tensors inside If / Loop / Scan bodies are not listed: they cannot be graph
    outputs."""
    model = _load(model)
    names = []
    seen = set()
    for node in model.graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            continue
        for name in node.output:
            if name and name not in seen:
                seen.add(name)
                names.append(name)
    return names


def onnx_with_outputs(model, outputs="*", exclude_outputs: Sequence[str] = ()):
    """A copy of an ONNX model whose graph outputs are ``outputs`` (``--onnx-outputs``), for ONNX
    Runtime. The input model is not changed.

    Args:
        model: an ``onnx.ModelProto`` or a path to a ``.onnx`` file (external data next to it).
        outputs: ``"*"``: every tensor a node of the main graph computes, appended after the model's
            own outputs (which keep their order), minus ``exclude_outputs``; or names / fnmatch
            patterns that replace the graph outputs.
        exclude_outputs: names / patterns left out of ``"*"``.

    Returns:
        onnx.ModelProto: outputs carry their inferred type and shape where ONNX shape inference knows
        them, else only the name (ONNX Runtime fills in the type).

    Raises:
        GateError: the file is missing or not an ONNX model; a name that matches no tensor.
    """
    import onnx

    model = _load(model)
    graph = model.graph
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
        known = {vi.name: vi for vi in (*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input)}
    except Exception:  # > 2 GB protos, custom domains: outputs then carry only their names
        known = {}
    computed = onnx_tensor_names(model)
    existing = [o.name for o in graph.output]
    if outputs == "*":
        selected = [n for n in computed if n not in existing and not _matches(n, exclude_outputs)]
        keep = list(graph.output)
    else:
        candidates = [i.name for i in graph.input] + computed
        selected = []
        for pattern in [outputs] if isinstance(outputs, str) else outputs:
            hits = [n for n in candidates if n == pattern or fnmatchcase(n, pattern)]
            if not hits:
                raise GateError(
                    f"--onnx-outputs '{pattern}' matches no tensor of the model; it has {_listing(candidates)}."
                )
            selected.extend(h for h in hits if h not in selected)
        by_name = {o.name: o for o in graph.output}
        keep = [by_name[n] for n in selected if n in by_name]
        selected = [n for n in selected if n not in by_name]
    new_outputs = [copy.deepcopy(o) for o in keep]
    for name in selected:
        info = known.get(name)
        if info is not None and info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            new_outputs.append(copy.deepcopy(info))
        else:
            new_outputs.append(onnx.ValueInfoProto(name=name))
    del graph.output[:]
    graph.output.extend(new_outputs)
    return model


def not_produced(expected: Iterable[str], produced: Iterable[str]) -> list[str]:
    """The names in ``expected`` (e.g. ``onnx_tensor_names`` of the model) that ``produced`` (e.g. a
    TensorRT runner's output names) lacks, in ``expected``'s order: "not produced" in a per-layer
    report, never a failure."""
    produced = set(produced)
    return [name for name in expected if name not in produced]
