"""A TensorRT network from an ONNX model (Polygraphy ``NetworkFromOnnxPath``): parsing, the network's
inputs and outputs, its optimization profiles (the deviation in ``gate.backend.trt.builder``'s
docstring: dims one value in every profile are made static) and the builder config's settings."""

from __future__ import annotations

import logging
from pathlib import Path

from gate.backend.trt.flavour import first_error, trt_logger
from gate.backend.trt.settings import Profile, TrtBuildSettings
from gate.errors import GateError

log = logging.getLogger("gate.backend.trt")


def _format_shape(shape) -> str:
    return "[" + ",".join(str(d) if d >= 0 else "?" for d in shape) + "]"


def parse_onnx(trt, model_path, strongly_typed: bool = False):
    """Parses an ONNX file into a new network. Returns ``(builder, network, parser)``; keep the parser
    alive until the build is done (it owns the weights).

    Raises:
        GateError: the file is missing, or TensorRT cannot parse it: one line naming the first failing
            node (index, name, op) and TensorRT's reason, and how many errors there were.
    """
    path = Path(model_path)
    if not path.is_file():
        raise GateError(f"{path}: model file not found.")
    logger = trt_logger(trt)
    builder = trt.Builder(logger)
    flags = 0
    if strongly_typed and hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED"):
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    logger.errors.clear()
    if not parser.parse_from_file(str(path)):
        errors = [parser.get_error(i) for i in range(parser.num_errors)]
        raise GateError(f"{path}: TensorRT cannot parse the model: {_describe_parse_errors(errors, logger)}")
    return builder, network, parser


def _describe_parse_errors(errors, logger) -> str:
    if not errors:
        return first_error(logger, "the parser gave no reason") + "."
    first = errors[0]
    desc = " ".join(str(first.desc()).split())
    code = getattr(first.code(), "name", str(first.code()))
    node = first.node()
    if node is not None and node >= 0:
        where = f"node {node} '{first.node_name()}' (op {first.node_operator()})"
        text = f"{where}: {code}: {desc}"
    else:
        text = f"{code}: {desc}"
    more = f" (and {len(errors) - 1} more error(s))" if len(errors) > 1 else ""
    return f"{text}{more}."


def network_io(network) -> tuple[dict, dict]:
    """``({input: {"dtype", "shape"}}, {output: ...})`` of a network (shapes with -1 for dynamic)."""

    def describe(tensor):
        return {"dtype": tensor.dtype.name, "shape": [int(d) for d in tensor.shape]}

    inputs = {network.get_input(i).name: describe(network.get_input(i)) for i in range(network.num_inputs)}
    outputs = {network.get_output(i).name: describe(network.get_output(i)) for i in range(network.num_outputs)}
    return inputs, outputs


def apply_profiles(builder, network, config, profiles) -> tuple[list[dict], list]:
    """Adds one optimization profile per ``Profile`` (see ``TrtBuildSettings.profiles``); without any
    and with dynamic inputs, one profile of the model shapes with dynamic dims set to 1 (Polygraphy's
    default, with a warning). Makes dims that every profile fixes static (module docstring).

    Returns:
        ``(profiles as {input: [min, opt, max]}, the IOptimizationProfile objects)``.

    Raises:
        GateError: a shape for an input the model does not have (lists the model's inputs); a shape
            whose rank or static dims do not match the model's; TensorRT refusing a profile.
    """
    inputs = {network.get_input(i).name: network.get_input(i) for i in range(network.num_inputs)}
    names = list(inputs)
    for index, profile in enumerate(profiles):
        unknown = [n for n in profile.shapes if n not in inputs]
        if unknown:
            where = f"optimization profile {index}" if len(profiles) > 1 else "the input shapes"
            raise GateError(
                f"{where} give shapes for {unknown}, which the model does not have; the model's inputs are {names}."
            )
    dynamic = [n for n, t in inputs.items() if t.is_shape_tensor or any(d < 0 for d in t.shape)]
    if not profiles and not dynamic:
        return [], []
    profiles = list(profiles) or [Profile({})]
    resolved = []
    for index, profile in enumerate(profiles):
        entries = {}
        for name, tensor in inputs.items():
            model_shape = tuple(int(d) for d in tensor.shape)
            if name in profile.shapes:
                triple = profile.shapes[name]
                if not tensor.is_shape_tensor:
                    for shape in triple:
                        if len(shape) != len(model_shape) or any(m >= 0 and m != s for s, m in zip(shape, model_shape)):
                            raise GateError(
                                f"Optimization profile {index}: shape {list(shape)} for input '{name}' does not fit "
                                f"the model's {_format_shape(model_shape)} (rank and static dims must match)."
                            )
                entries[name] = triple
            elif tensor.is_shape_tensor:
                ones = (1,) * (model_shape[0] if len(model_shape) == 1 and model_shape[0] >= 0 else 0)
                entries[name] = (ones, ones, ones)
            elif any(d < 0 for d in model_shape):
                default = tuple(1 if d < 0 else d for d in model_shape)
                log.warning(
                    "Input '%s' has dynamic shape %s and profile %d gives it none; building for %s "
                    "(set --input-shapes or --trt-min/opt/max-shapes).",
                    name,
                    _format_shape(model_shape),
                    index,
                    list(default),
                )
                entries[name] = (default, default, default)
        resolved.append(entries)
    for name, tensor in inputs.items():
        if tensor.is_shape_tensor or not all(name in entries for entries in resolved):
            continue
        shape = [int(d) for d in tensor.shape]
        fixed = False
        for dim, size in enumerate(shape):
            values = {s[dim] for entries in resolved for s in entries[name]}
            if size < 0 and len(values) == 1:
                shape[dim] = values.pop()
                fixed = True
        if fixed:
            log.debug("Input '%s': dims fixed by every profile made static: %s.", name, shape)
            tensor.shape = shape
    objects = []
    for index, entries in enumerate(resolved):
        profile = builder.create_optimization_profile()
        for name, (low, opt, high) in entries.items():
            if inputs[name].is_shape_tensor:
                profile.set_shape_input(name, low, opt, high)
            else:
                profile.set_shape(name, low, opt, high)
        if config.add_optimization_profile(profile) < 0:
            raise GateError(f"TensorRT refused optimization profile {index} ({Profile(entries).to_json()}).")
        objects.append(profile)
    return [Profile(entries).to_json() for entries in resolved], objects


def configure(trt, config, settings: TrtBuildSettings) -> None:
    """Precision flags, workspace, optimization level and (TensorRT-RTX) compute capabilities.

    Raises:
        GateError: a flag or compute capability this TensorRT does not have.
    """
    flag = trt.BuilderFlag
    if hasattr(flag, "TF32"):
        (config.set_flag if settings.tf32 else config.clear_flag)(flag.TF32)
    for name, enum in (("fp16", "FP16"), ("bf16", "BF16"), ("int8", "INT8")):
        if getattr(settings, name):
            if not hasattr(flag, enum):
                raise GateError(
                    f"--{name} is not available in {trt.__name__} {trt.__version__} (no BuilderFlag.{enum})."
                )
            config.set_flag(getattr(flag, enum))
    if settings.workspace is not None:
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, settings.workspace)
    if settings.builder_optimization_level is not None:
        config.builder_optimization_level = settings.builder_optimization_level
    caps = settings.compute_capabilities
    if caps is not None:
        if caps == "current":
            config.num_compute_capabilities = 1
            config.set_compute_capability(trt.ComputeCapability.CURRENT, 0)
        else:
            members = trt.ComputeCapability.__members__
            config.num_compute_capabilities = len(caps)
            for index, cap in enumerate(caps):
                name = "SM" + cap.replace(".", "")
                if name not in members:
                    known = ", ".join(m for m in members if m.startswith("SM"))
                    raise GateError(f"compute capability {cap} is not one TensorRT-RTX builds for ({known}).")
                config.set_compute_capability(members[name], index)
