"""Build settings for a TensorRT engine, named after ``polygraphy run``'s flags (spec section 7), and
parsers for the flags' text forms.

| ``polygraphy run`` flag                       | ``TrtBuildSettings`` field                      |
|-----------------------------------------------|-------------------------------------------------|
| ``--fp16`` ``--bf16`` ``--tf32`` ``--int8``   | ``fp16`` ``bf16`` ``tf32`` ``int8``             |
| ``--strongly-typed``                          | ``strongly_typed``                              |
| ``--input-shapes x:[1,3,224,224]``            | ``input_shapes={"x": (1, 3, 224, 224)}``        |
| ``--trt-min/opt/max-shapes`` (each use: one profile) | ``profiles=profiles_from_shapes(...)``   |
| ``--pool-limit workspace:1G``                 | ``workspace=parse_size("1G")`` (bytes)          |
| ``--trt-outputs '*'`` / ``--trt-outputs a b`` | ``outputs="*"`` / ``outputs=("a", "b")``        |
| ``--trt-exclude-outputs``                     | ``exclude_outputs``                             |
| ``--calibration-cache``                       | ``calibration_cache``                           |
| ``--builder-optimization-level``              | ``builder_optimization_level``                  |
| TensorRT-RTX ``--compute-capabilities``       | ``compute_capabilities`` (``"current"`` = ``--use-gpu``) |
| ``POLYGRAPHY_USE_TENSORRT_RTX=1``             | ``flavour="tensorrt_rtx"``                      |

``--optimization-profile N`` and ``--allocation-strategy`` are runner settings (``TrtRunner``), not
build settings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gate.backend.trt.flavour import check_flavour
from gate.errors import GateError

Shape = tuple

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMG]?)i?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text) -> int:
    """``"1G"``, ``"512M"``, ``"64K"`` or a number -> bytes (powers of 1024, like Polygraphy's
    ``--pool-limit``).

    Raises:
        GateError: anything else.
    """
    if isinstance(text, int) and not isinstance(text, bool) and text >= 0:
        return text
    match = _SIZE.match(str(text))
    if not match:
        raise GateError(f"Size '{text}' is not a byte count like 1G, 512M, 64K or 1048576.")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def _parse_dims(text: str, where: str) -> list:
    text = text.strip()
    if not (text.startswith("[") and text.endswith("]")):
        raise GateError(f"{where}: '{text}' is not a shape like [1,3,224,224].")
    inner = text[1:-1].strip()
    if not inner:
        return []
    dims = []
    for part in inner.split(","):
        part = part.strip()
        try:
            dims.append(int(part))
        except ValueError:
            dims.append(part)  # a named / dynamic dim, as Polygraphy keeps it
    return dims


def parse_shape_args(args: Sequence[str], flag: str = "--input-shapes") -> dict[str, list]:
    """Polygraphy's ``name:[d0,d1,...]`` arguments -> ``{name: [d0, d1, ...]}``.

    The split is on the last ``:`` so names may contain ``:``; ``[]`` is a scalar; a non-integer entry
    stays a string (a dynamic dim). ``flag`` names the option in errors.

    Raises:
        GateError: an argument without ``:`` or without a bracketed shape.
    """
    shapes: dict[str, list] = {}
    for arg in args:
        name, sep, dims = str(arg).rpartition(":")
        if not sep or not name:
            raise GateError(f"{flag}: '{arg}' is not name:[d0,d1,...].")
        shapes[name] = _parse_dims(dims, f"{flag} {name}")
    return shapes


def _static_shape(shape, where: str) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise GateError(f"{where} is {shape!r}; expected a list of non-negative ints.")
    dims = []
    for dim in shape:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
            raise GateError(f"{where} is {list(shape)}; every dim must be a non-negative int.")
        dims.append(int(dim))
    return tuple(dims)


@dataclass(frozen=True)
class Profile:
    """One optimization profile: ``{input name: (min, opt, max)}``, each a tuple of ints. For a
    shape-tensor input the three are its allowed *values*, not its shape (TensorRT's
    ``set_shape_input``).

    Raises:
        GateError: a shape that is not a list of ints >= 0, min/opt/max of different ranks, or
            min > opt or opt > max in some dim (names the input and the profile).
    """

    shapes: Mapping[str, tuple[Shape, Shape, Shape]]

    def __post_init__(self):
        checked = {}
        for name, triple in dict(self.shapes).items():
            if not isinstance(triple, Sequence) or len(triple) != 3:
                raise GateError(f"Profile entry for input '{name}' is {triple!r}; expected (min, opt, max) shapes.")
            low, opt, high = (
                _static_shape(s, f"{label} shape of input '{name}'") for label, s in zip(("min", "opt", "max"), triple)
            )
            if not len(low) == len(opt) == len(high):
                raise GateError(
                    f"Input '{name}': min {list(low)}, opt {list(opt)} and max {list(high)} have different ranks."
                )
            if any(not a <= b <= c for a, b, c in zip(low, opt, high)):
                raise GateError(
                    f"Input '{name}': min {list(low)} <= opt {list(opt)} <= max {list(high)} "
                    "does not hold in every dim."
                )
            checked[str(name)] = (low, opt, high)
        object.__setattr__(self, "shapes", checked)

    @classmethod
    def fixed(cls, shapes: Mapping[str, Sequence[int]]) -> Profile:
        """min = opt = max = the given shape for each input (``--input-shapes`` without profiles)."""
        return cls({name: (shape, shape, shape) for name, shape in shapes.items()})

    def to_json(self) -> dict:
        return {name: [list(s) for s in triple] for name, triple in self.shapes.items()}


def profiles_from_shapes(min_shapes, opt_shapes, max_shapes) -> tuple[Profile, ...]:
    """Profiles from repeated ``--trt-min-shapes`` / ``--trt-opt-shapes`` / ``--trt-max-shapes``.

    Args:
        min_shapes, opt_shapes, max_shapes: lists of ``{input name: shape}`` (one dict per use of
            the flag, e.g. from ``parse_shape_args``); the i-th of each make profile i.

    Raises:
        GateError: the three lists differ in length, or profile i names an input in one of them but
            not in all three; see also ``Profile``.
    """
    if not len(min_shapes) == len(opt_shapes) == len(max_shapes):
        raise GateError(
            f"--trt-min-shapes, --trt-opt-shapes and --trt-max-shapes were given {len(min_shapes)}, "
            f"{len(opt_shapes)} and {len(max_shapes)} times; each profile needs all three."
        )
    profiles = []
    for index, (low, opt, high) in enumerate(zip(min_shapes, opt_shapes, max_shapes)):
        names = list(dict.fromkeys([*low, *opt, *high]))
        missing = [n for n in names if not (n in low and n in opt and n in high)]
        if missing:
            raise GateError(
                f"Profile {index}: inputs {missing} need a min, an opt and a max shape "
                "(--trt-min-shapes, --trt-opt-shapes, --trt-max-shapes)."
            )
        profiles.append(Profile({n: (low[n], opt[n], high[n]) for n in names}))
    return tuple(profiles)


@dataclass(frozen=True)
class TrtBuildSettings:
    """Everything that decides what engine is built (and so, every field is part of the engine-cache
    key). Field names follow ``polygraphy run``'s flags (module docstring).

    Args:
        flavour: ``"tensorrt"`` or ``"tensorrt_rtx"``.
        fp16, bf16, tf32, int8: builder precision flags. TF32 is off unless asked for (Polygraphy's
            default). ``tensorrt_rtx`` (and TensorRT 11) has only TF32: its networks are strongly
            typed, so fp16 / bf16 convert the model first (``gate.backend.trt.precision``) and int8
            needs a model with explicit Q/DQ nodes.
        strongly_typed: build a strongly typed network (``tensorrt``; always so for ``tensorrt_rtx``).
            Cannot be combined with fp16 / bf16 / int8.
        input_shapes: ``{input name: shape}``; without ``profiles`` it makes one profile with
            min = opt = max.
        profiles: ``Profile`` s (``profiles_from_shapes``); inputs a profile leaves out get their model
            shape with dynamic dims set to 1, as Polygraphy does.
        workspace: the workspace memory-pool limit in bytes (``parse_size("1G")``), or None for
            TensorRT's default.
        outputs: None (the model's outputs), ``"*"`` (mark all: every layer output that can be a network
            output, on top of the model's) or tensor names (fnmatch patterns allowed) that replace the
            model's outputs.
        exclude_outputs: names (fnmatch patterns) left out of ``"*"``.
        calibration_cache: int8 calibration cache file; None puts it next to the cached engine.
        builder_optimization_level: 0..5, or None for TensorRT's default (3).
        compute_capabilities: ``tensorrt_rtx`` only: None (its default: portable across 8.0+),
            ``"current"`` (the GPU of this machine) or versions like ``("8.6", "12.0")``.

    Raises:
        GateError: an unknown flavour; a precision flag the flavour lacks; fp16/bf16/int8 with
            ``strongly_typed``; a negative workspace; an optimization level outside 0..5; compute
            capabilities with ``tensorrt``.
    """

    flavour: str = "tensorrt"
    fp16: bool = False
    bf16: bool = False
    tf32: bool = False
    int8: bool = False
    strongly_typed: bool = False
    input_shapes: Mapping[str, Sequence[int]] = field(default_factory=dict)
    profiles: Sequence[Profile] = ()
    workspace: int | None = None
    outputs: str | Sequence[str] | None = None
    exclude_outputs: Sequence[str] = ()
    calibration_cache: str | None = None
    builder_optimization_level: int | None = None
    compute_capabilities: str | Sequence[str] | None = None

    def __post_init__(self):
        check_flavour(self.flavour)
        weak = [flag for flag in ("fp16", "bf16", "int8") if getattr(self, flag)]
        if self.flavour == "tensorrt_rtx" and self.int8:  # fp16 / bf16 convert the model (precision.py)
            raise GateError(
                "--int8 is not available with TensorRT flavour tensorrt_rtx: its networks are strongly typed, "
                "so int8 needs a model with explicit (calibrated) QuantizeLinear/DequantizeLinear nodes, "
                "built without --int8."
            )
        if self.strongly_typed and weak:
            raise GateError(
                f"--{weak[0]} cannot be combined with --strongly-typed: a strongly typed network takes its "
                "precision from the model's types."
            )
        shapes = {str(k): _static_shape(v, f"input_shapes['{k}']") for k, v in dict(self.input_shapes).items()}
        object.__setattr__(self, "input_shapes", shapes)
        profiles = tuple(self.profiles)
        for profile in profiles:
            if not isinstance(profile, Profile):
                raise GateError(f"profiles holds {profile!r}; expected Profile objects (see profiles_from_shapes).")
        object.__setattr__(self, "profiles", profiles)
        if self.workspace is not None:
            object.__setattr__(self, "workspace", parse_size(self.workspace))
        outputs = self.outputs
        if outputs is not None and outputs != "*":
            if isinstance(outputs, str):
                outputs = (outputs,)
            outputs = tuple(str(o) for o in outputs)
            if not outputs:
                raise GateError("outputs is empty; give tensor names, '*' (mark all) or None (the model's outputs).")
            if "*" in outputs:
                outputs = "*" if len(outputs) == 1 else outputs
        object.__setattr__(self, "outputs", outputs)
        object.__setattr__(self, "exclude_outputs", tuple(str(o) for o in self.exclude_outputs))
        level = self.builder_optimization_level
        if level is not None and (isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 5):
            raise GateError(f"builder_optimization_level is {level!r}; expected an int from 0 to 5.")
        caps = self.compute_capabilities
        if caps is not None:
            if self.flavour != "tensorrt_rtx":
                raise GateError("compute_capabilities is a TensorRT-RTX setting; it needs flavour tensorrt_rtx.")
            if caps != "current":
                caps = (caps,) if isinstance(caps, str) else tuple(caps)
                for cap in caps:
                    if not re.fullmatch(r"\d+\.\d+", str(cap)):
                        raise GateError(f"compute_capabilities entry '{cap}' is not 'current' or a version like 8.6.")
                caps = tuple(str(c) for c in caps)
            object.__setattr__(self, "compute_capabilities", caps)

    @property
    def mark_all(self) -> bool:
        return self.outputs == "*"

    def effective_profiles(self) -> tuple[Profile, ...]:
        """``profiles``, else one fixed profile from ``input_shapes``, else none (the builder then makes
        the default one)."""
        if self.profiles:
            return self.profiles
        return (Profile.fixed(self.input_shapes),) if self.input_shapes else ()

    def key_fields(self) -> dict:
        """Every field, JSON-ready, for the engine-cache key (the calibration cache by path; its
        content is hashed by the cache)."""
        return {
            "flavour": self.flavour,
            "fp16": self.fp16,
            "bf16": self.bf16,
            "tf32": self.tf32,
            "int8": self.int8,
            "strongly_typed": self.strongly_typed,
            "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
            "profiles": [p.to_json() for p in self.profiles],
            "workspace": self.workspace,
            "outputs": self.outputs if self.outputs in (None, "*") else list(self.outputs),
            "exclude_outputs": list(self.exclude_outputs),
            "builder_optimization_level": self.builder_optimization_level,
            "compute_capabilities": self.compute_capabilities
            if self.compute_capabilities in (None, "current")
            else list(self.compute_capabilities),
        }


def build_settings_from_table(table: Mapping) -> TrtBuildSettings:
    """gate.toml's ``[trt]`` table (with the TensorRT flags merged in) -> the build settings; the
    runner's own keys (``engine``, ``cache_dir``, ``optimization_profile``, ``allocation_strategy``)
    are left to the runner.

    Raises:
        GateError: a profile that is not a table of min, opt and max shapes; a bad shape, size or
            setting (``TrtBuildSettings``).
    """
    profiles = table.get("profiles", [])
    for index, profile in enumerate(profiles):
        if not isinstance(profile, dict) or set(profile) != {"min", "opt", "max"}:
            raise GateError(f"trt.profiles[{index}] must be a table with min, opt and max shapes.")
    return TrtBuildSettings(
        flavour=table.get("flavour", "tensorrt"),
        fp16=table.get("fp16", False),
        bf16=table.get("bf16", False),
        tf32=table.get("tf32", False),
        int8=table.get("int8", False),
        strongly_typed=table.get("strongly_typed", False),
        input_shapes=table.get("input_shapes", {}),
        profiles=profiles_from_shapes(
            [p["min"] for p in profiles], [p["opt"] for p in profiles], [p["max"] for p in profiles]
        ),
        workspace=parse_size(table["workspace"]) if "workspace" in table else None,
        builder_optimization_level=table.get("builder_optimization_level"),
        outputs=table.get("outputs"),
    )
