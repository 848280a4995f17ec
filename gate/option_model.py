"""The option table's vocabulary: the kinds of raw value (``PATH``, ``LIST``, ...), the command
groups, and :class:`Option`, one setting (``gate.options`` holds the table)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gate import compare_options as _funcs  # the compare functions' value kinds

PATH, STR, LIST, BOOL, CHOICE, INT, SIZE, FLAG = "path", "str", "list", "bool", "choice", "int", "size", "flag"
PER_OUTPUT_FLOAT, PER_OUTPUT_STR = "per_output_float", "per_output_str"
SHAPES, PROFILES, PROVIDER_OPTIONS = "shapes", "profiles", "provider_options"
IGNORED = "ignored"  # a polygraphy run flag that has no effect on a comparison here (read, then unused)
NOT_APPLICABLE = "not_applicable"  # a polygraphy run flag refused with one line naming it (``help``: why)

CHECK, RECORD, RUN, MERGE = "check", "record", "run", "merge"
CONFIGURED = (CHECK, RECORD)  # commands that read a gate.toml
COMPARE = (CHECK, RUN)  # commands that compare
REPORTING = (CHECK, RUN, MERGE)  # commands that write reports

TOML_TYPES = {PATH: str, STR: str, LIST: list, BOOL: bool, CHOICE: str, INT: int, SIZE: (int, str), SHAPES: dict,
              PER_OUTPUT_FLOAT: (int, float, dict), PER_OUTPUT_STR: (str, dict), PROFILES: list,
              _funcs.PER_OUTPUT_INT: (int, dict), _funcs.PER_OUTPUT_FUNCS: (str, list, dict),
              _funcs.PER_OUTPUT_COUNT: (int, str, dict), PROVIDER_OPTIONS: dict}  # fmt: skip


@dataclass(frozen=True)
class Option:
    """One setting. ``name`` is its key in ``gate.config.GateConfig`` and ``load_config``'s overrides
    (``trt.<key>`` for the [trt] table); ``toml`` its ``[table.]key`` in gate.toml (None: not there);
    ``flags`` its CLI flags (``dest`` the argparse name, default ``name``); ``input`` its action input;
    ``argparse`` extra ``add_argument`` keywords (``metavar``, ``action``, ``type``); ``aliases``
    other spellings of a value (Polygraphy's, e.g. ``ORT_DISABLE_ALL`` for ``disable``);
    ``flags_for`` aliases that only some commands take (``run``'s ``--inputs`` is
    ``--input-shapes``, where ``check``'s ``--inputs`` is the inputs folder)."""

    name: str
    toml: str | None = None
    flags: tuple = ()
    input: str | None = None
    kind: str = STR
    commands: tuple = ()
    default: object = None
    help: str = ""
    choices: tuple | None = None
    dest: str | None = None
    group: str | None = None
    argparse: Mapping = field(default_factory=dict)
    help_for: Mapping = field(default_factory=dict)  # command -> help, where it reads differently
    action_default: str | None = None  # what the action applies to an empty input (action.yml declares it)
    aliases: Mapping = field(default_factory=dict)  # another spelling of a value -> the value (a CHOICE's)
    flags_for: Mapping = field(default_factory=dict)  # command -> more flags it takes (an alias taken elsewhere)

    @property
    def key(self) -> str:
        """The argparse destination."""
        return self.dest or self.name
