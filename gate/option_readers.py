"""Reading the option table's options (``gate.options``) from the CLI's flags and the action's
inputs: the argparse groups of ``check``, ``record``, ``run`` and ``merge``, and the overrides of
gate.toml's settings that flags or inputs give (``gate.config.load_config``'s ``overrides``)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from gate.compare_options import PER_OUTPUT_COUNT, PER_OUTPUT_FUNCS, PER_OUTPUT_INT
from gate.errors import GateError
from gate.options import (
    BOOL,
    BY_NAME,
    CHOICE,
    FLAG,
    IGNORED,
    LIST,
    NOT_APPLICABLE,
    OPTIONS,
    PATH,
    PER_OUTPUT_FLOAT,
    PER_OUTPUT_STR,
    PROFILE_FLAGS,
    PROFILES,
    PROVIDER_OPTIONS,
    SETTINGS,
    SHAPES,
    UNFAILING,
    Option,
)

# --- the CLI ------------------------------------------------------------------------------------------


def _add(parser, option: Option, command: str) -> None:
    help = option.help_for.get(command, option.help)
    if option.flags[0].startswith("-"):
        kwargs = {"dest": option.key, "help": help, **option.argparse}
    else:
        kwargs = {"help": help, **option.argparse}
    if option.kind == BOOL and option.name.startswith("trt."):
        kwargs.update(action="store_true", default=None)
    elif option.kind == BOOL:
        kwargs.update(action=argparse.BooleanOptionalAction, default=None)
    elif option.kind == FLAG:
        kwargs.setdefault("action", "store_true")
    elif option.kind == CHOICE:
        kwargs["choices"] = [*option.choices, *option.aliases]
    elif option.kind == LIST:
        kwargs.setdefault("nargs", "+")
    parser.add_argument(*option.flags, *option.flags_for.get(command, ()), **kwargs)


def add_arguments(parser, command: str, names=None) -> None:
    """Adds the flags of every option ``command`` takes (only ``names``, in that order, if given); the
    [trt] keys go in a TensorRT group."""
    options = [BY_NAME[name] for name in names] if names else OPTIONS
    groups: dict = {}
    for option in options:
        if command not in option.commands or not option.flags:
            continue
        if option.group:
            if option.group not in groups:
                groups[option.group] = parser.add_argument_group(option.group)
            group = groups[option.group]
            _add(group, option, command)
            if option.name == "trt.input_shapes":
                for which, flag in PROFILE_FLAGS.items():
                    group.add_argument(
                        flag,
                        nargs="+",
                        action="append",
                        metavar="NAME:[D,...]",
                        help=f"{which} shapes of an optimization profile (repeat the three flags for several profiles)",
                    )
        else:
            _add(parser, option, command)


def _float(raw):
    return float(raw)


def _count(raw):
    if raw.strip().endswith("%"):
        return raw  # read by gate.compare_funcs.parse_count
    if not raw.strip().isascii() or not raw.strip().isdigit():  # int() also reads "1_0" and "１"
        raise ValueError(raw)
    return int(raw)


_COMPARE_FUNC_CASTS = {PER_OUTPUT_INT: int, PER_OUTPUT_FUNCS: str, PER_OUTPUT_COUNT: _count}
# What a value of each kind looks like, for "cannot read" errors (the README's forms).
_EXPECTED = {
    PER_OUTPUT_FLOAT: "a number such as 1e-05",
    PER_OUTPUT_INT: "an integer such as 5",
    PER_OUTPUT_COUNT: "a count such as 2 or a share of the iterations such as 0.5%",
    "error_quantile": "a number from 0 to 1 such as 0.99",
}


def parse_value(option: Option, raw, subject: str):
    """A flag's or input's raw value (already split into entries where it has several) -> the
    override ``load_config`` takes.

    Raises:
        GateError: a value that cannot be read or is out of range, naming ``subject``.
    """
    from gate.config import check_tolerance
    from gate.per_output import parse_per_output

    expected = _EXPECTED.get(option.name) or _EXPECTED.get(option.kind, "a value")
    if option.kind == PER_OUTPUT_FLOAT:
        value = parse_per_output(raw, _float, subject, expected)
        if option.name in ("atol", "rtol"):  # the other numbers (a cosine may be negative): load_config
            check_tolerance(value, lambda output: subject)
        return value
    if option.kind == PER_OUTPUT_STR:
        return parse_per_output(raw, str, subject)  # the statistics are checked by load_config
    if option.kind in _COMPARE_FUNC_CASTS:  # gate.compare_options; checked by load_config
        return parse_per_output(raw, _COMPARE_FUNC_CASTS[option.kind], subject, expected)
    if option.kind == PROVIDER_OPTIONS:
        from gate.backend.providers import parse_provider_options

        return parse_provider_options(raw, subject)  # checked against the providers by load_config
    if option.kind == SHAPES:
        from gate.backend.trt.settings import parse_shape_args

        return parse_shape_args(raw, subject)
    if option.name in ("trt.engine", "trt.cache_dir"):  # relative to the working directory
        return str(Path(raw).resolve())
    if option.name == "trt.workspace" and isinstance(raw, list):
        return _workspace(raw, subject)
    return option.aliases.get(raw, raw) if isinstance(raw, str) else raw


def _workspace(entries: list, subject: str) -> str:
    """``--workspace 1G`` or ``polygraphy run --pool-limit workspace:1G``: the workspace pool's size
    (pool names case-insensitive, as TensorRT's ``MemoryPoolType``); another pool is refused."""
    sizes = {}
    for entry in entries:
        pool, sep, size = entry.rpartition(":")
        pool = pool.lower() if sep else "workspace"
        if pool != "workspace":
            raise GateError(
                f"{subject}: pool '{pool}' is not supported (only workspace, e.g. workspace:1G; the DLA and tactic "
                "pools keep TensorRT's defaults)."
            )
        sizes[pool] = size
    return sizes["workspace"]


def refuse_not_applicable(args, command: str) -> None:
    """``polygraphy run``'s flags that cannot apply here, or a value of one that cannot (``--compare
    l2``): one line naming the flag and why.

    Raises:
        GateError: the first such flag given.
    """
    for option in OPTIONS:
        if command not in option.commands or option.kind not in (IGNORED, NOT_APPLICABLE):
            continue
        value = getattr(args, option.key, None)
        if value is None:
            continue
        if option.kind == NOT_APPLICABLE:
            raise GateError(f"{option.flags[0]} is {option.help}.")
        for entry in value if option.choices and isinstance(value, list) else ():
            if entry not in option.choices:
                raise GateError(
                    f"{option.flags[0]}: '{entry}' is not available; {', '.join(option.choices)} is ({option.help})."
                )


def _trt_profiles(args) -> list | None:
    from gate.backend.trt.settings import parse_shape_args

    groups = [getattr(args, f"trt_{which}_shapes", None) or [] for which in PROFILE_FLAGS]
    if not any(groups):
        return None
    if len({len(g) for g in groups}) != 1:
        raise GateError("--trt-min-shapes, --trt-opt-shapes and --trt-max-shapes must be given equally often.")
    return [
        {which: parse_shape_args(shapes, PROFILE_FLAGS[which]) for which, shapes in zip(PROFILE_FLAGS, profile)}
        for profile in zip(*groups)
    ]


def overrides_from_args(args, command: str, unfailing: bool = False) -> dict:
    """The overrides of gate.toml's settings (:data:`SETTINGS`) that ``command``'s flags in ``args``
    give (None where a flag was not given; ``trt``: the [trt] keys); with ``unfailing``, only those
    whose reading cannot fail (paths, names, switches), as an error report needs them.

    Raises:
        GateError: a flag value that cannot be read or is out of range, naming the flag.
    """
    if not unfailing:
        refuse_not_applicable(args, command)
    overrides: dict = {}
    for name in SETTINGS:
        option = BY_NAME[name]
        if command not in option.commands or (unfailing and option.kind not in UNFAILING):
            continue
        if option.kind == PROFILES:
            value = _trt_profiles(args)
        else:
            raw = getattr(args, option.key, None)
            value = None if raw is None else parse_value(option, raw, option.flags[0])
        if name.startswith("trt."):
            overrides.setdefault("trt", {})[name[4:]] = value
        else:
            overrides[name] = value
    return overrides


def flag_names(overrides: Mapping) -> dict:
    """The flag of each override key, for ``load_config``'s errors (a bad flag value names the flag,
    not gate.toml); ``trt.<key>`` for a [trt] key."""
    names = {name: option.flags[0] for name, option in BY_NAME.items() if option.flags and option.toml}
    return {key: names.get(key, "--" + key.replace("_", "-")) for key in overrides} | {
        name: option.flags[0] for name, option in BY_NAME.items() if name.startswith("trt.") and option.flags
    }


# --- the action -------------------------------------------------------------------------------------


def _check_stat_input(name: str, value) -> None:
    from gate.comparator.compare import CHECK_ERROR_STATS

    for stat in value.values() if isinstance(value, dict) else [value]:
        if stat not in CHECK_ERROR_STATS:
            raise GateError(
                f"Input `{name}` must be one of {', '.join(CHECK_ERROR_STATS)} (per output if wanted), got {stat!r}."
            )


def overrides_from_inputs(environ: Mapping[str, str]) -> dict:
    """The action inputs that override gate.toml settings -> ``load_config``'s overrides (the same
    parsing as the CLI flags: per-output ``name:value`` entries separated by spaces, commas or new
    lines). Paths are resolved inside ``GITHUB_WORKSPACE``; numbers, booleans and names are checked
    here, so that an error names the input rather than gate.toml.

    Raises:
        GateError: a value that cannot be read or is out of range, naming the input.
    """
    from gate.config import RUNNERS
    from gate.github import actions

    overrides: dict = {}
    for option in OPTIONS:
        if not (option.input and option.toml):
            continue
        value = actions.read_input(option.input, environ)
        subject = f"Input `{option.input}`"
        if not value:
            overrides[option.name] = None
        elif option.kind == PATH:
            overrides[option.name] = str(actions.workspace_path(option.input, value, environ))
        elif option.kind == LIST:
            overrides[option.name] = value.replace(",", " ").split()
            for runner in overrides[option.name] if option.name == "runners" else ():
                if runner not in RUNNERS:
                    raise GateError(
                        f"Input `runners` names unknown runner {runner!r}; available: {', '.join(RUNNERS)}."
                    )
        elif option.kind == BOOL:
            overrides[option.name] = actions.parse_bool(option.input, value)
        elif option.kind == CHOICE:
            overrides[option.name] = actions.parse_choice(option.input, value, option.choices)
        else:
            overrides[option.name] = parse_value(option, value, subject)
            if option.kind == PER_OUTPUT_STR:
                _check_stat_input(option.input, overrides[option.name])
    # gate.toml's own paths must stay inside the workspace too (gate.paths).
    overrides["root"] = environ.get("GITHUB_WORKSPACE") or None
    return overrides
