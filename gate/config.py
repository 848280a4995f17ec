"""``gate.toml``: what to run, on which data, compared how. Read with ``tomllib``.

Every setting can be overridden by a CLI flag or an action input (``load_config(path,
overrides)``); per-output values use ``polygraphy run``'s ``[<output>:]<value>`` syntax. Example::

    model = "model.onnx"          # relative paths are relative to this file's folder
    inputs = "data"               # test_data_set_<N>/input_<K>.pb, or <N>.npz files
    golden = "data"               # output_<K>.pb beside the inputs, or a folder of <N>.npz files
    runners = ["onnxrt"]          # live runners, each compared with the golden outputs

    [onnxrt]
    execution_providers = ["CPUExecutionProvider"]
    graph_optimization_level = "all"
    # provider_options = { CUDAExecutionProvider = { device_id = 0, use_tf32 = 0 } }  # per provider

    [compare]
    atol = 1e-5                   # or a table per output: { "" = 1e-5, "logits" = 1e-3 }
    rtol = 1e-5
    check_error_stat = "elemwise" # elemwise | max | mean | median (or a table per output)
    check_average = false         # judge the average over iterations instead of each iteration
    validate = false              # a NaN in any output stops evaluation (could not evaluate)

    [report]
    junit = "accuracy-gate-junit.xml"   # relative to the working directory, inside the confinement root

A file saved with a UTF-8 byte-order mark is read as if it had none.
"""

from __future__ import annotations

import codecs
import difflib
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gate.backend.onnxrt import GRAPH_OPTIMIZATION_LEVELS
from gate.backend.providers import check_provider_options, merge_provider_options
from gate.comparator.compare import CHECK_ERROR_STATS
from gate.compare_options import PER_OUTPUT as COMPARE_FUNC_PER_OUTPUT
from gate.errors import GateError
from gate.limits import TOML_DEPTH, parse_nested
from gate.options import toml_schema
from gate.paths import DEFAULT_JUNIT, confinement_root, read_regular, require_inside, require_output

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RUNNERS = ("onnxrt", "trt")

_SCHEMA = toml_schema()
"""gate.toml's tables and keys, from the option table (``gate.options``)."""


@dataclass(frozen=True)
class GateConfig:
    """The settings of one comparison, validated and frozen: gate.toml with the flags or action
    inputs over it (``load_config``), or ``accuracy-gate run``'s flags alone (``gate.run.run_config``;
    ``path`` None). Paths are absolute. ``source`` names where the settings came from in messages
    (the gate.toml path, or ``accuracy-gate run``); ``trt_build`` is the ``[trt]`` table's build
    settings, parsed when a runner is ``trt``."""

    path: Path | None
    model: Path
    inputs: Path
    golden: Path
    runners: list[str] = field(default_factory=lambda: ["onnxrt"])
    reference_runner: str = "onnxrt"
    golden_runner: str | None = None  # the runner of a Polygraphy JSON golden set holding several
    execution_providers: list[str] = field(default_factory=lambda: ["CPUExecutionProvider"])
    graph_optimization_level: str = "all"
    provider_options: dict = field(default_factory=dict)  # provider -> {option: str}; gate.backend.providers
    atol: float | dict = 1e-5
    rtol: float | dict = 1e-5
    check_error_stat: str | dict = "elemwise"
    check_average: bool = False
    infinities_compare_equal: bool = True
    nan_compare_equal: bool = False  # NaN on both sides at the same element is equal (Polygraphy's nans_compare_equal)
    validate: bool = False
    error_quantile: float | dict = 0.99  # check_error_stat quantile's quantile (polygraphy run --error-quantile)
    fail_fast: bool = False  # stop comparing after the first iteration that fails (polygraphy run --fail-fast)
    trt: dict = field(default_factory=dict)  # the [trt] table; see gate.job.trt_runner
    reference_name: str = "golden"  # how reports name the golden outputs (``run``: the reference runner)
    junit: Path = Path("accuracy-gate-junit.xml")
    title: str = ""
    source: str = ""
    trt_build: object = None  # gate.backend.trt.TrtBuildSettings
    # Compare functions per output (gate.compare_options, gate.compare_funcs); None: the default.
    compare_func: str | list | dict | None = None
    compare_verdict: str | dict | None = None
    max_failed_iterations: int | str | dict | None = None
    top_k: int | dict | None = None
    top_k_axis: int | dict | None = None
    index_tolerance: int | dict | None = None
    ties_compare_equal: bool | None = None
    tie_atol: float | dict | None = None
    cosine_similarity_threshold: float | dict | None = None
    l2_threshold: float | dict | None = None
    mse_threshold: float | dict | None = None
    psnr_threshold: float | dict | None = None
    snr_threshold: float | dict | None = None
    labels: Path | None = None  # the label store (gate.task_metrics)
    task_metric: str | dict | None = None
    task_top_k: int | dict | None = None
    ctc_blank: int | dict | None = None
    task_min: float | dict | None = None
    task_min_relative: float | dict | None = None
    task_max_drop: float | dict | None = None
    # The flag that set each per-output entry ({"atol": {"logits": "--atol"}}), so that a later error
    # about that entry (an output the model lacks) names the flag, not gate.toml.
    named_by: Mapping = field(default_factory=dict)
    # The flag (or action input) that set a path ({"golden": "--golden"}); absent: gate.toml's, so that
    # "no golden outputs yet" is said only of the configured folder, a given path "not found".
    paths_named_by: Mapping = field(default_factory=dict)


def trt_build_settings(table: Mapping, source: str):
    """``[trt]`` -> ``TrtBuildSettings`` (``gate.backend.trt.settings``).

    Raises:
        GateError: a bad setting, prefixed with ``source`` and ``[trt]``.
    """
    from gate.backend.trt.settings import build_settings_from_table

    try:
        return build_settings_from_table(table)
    except GateError as err:
        raise GateError(f"{source}: [trt] {err}") from err


PER_OUTPUT = ("atol", "rtol", "check_error_stat", "error_quantile", *COMPARE_FUNC_PER_OUTPUT)


def merge_per_output(base, override):
    """An override merged over gate.toml's per-output value: a plain value replaces the default (the
    ``""`` entry) and ``name:value`` entries replace those outputs; gate.toml's other entries stay."""
    merged = dict(base) if isinstance(base, dict) else {"": base}
    merged.update(override if isinstance(override, dict) else {"": override})
    return merged[""] if list(merged) == [""] else merged


def _check_type(source, section, key, value):
    expected = _SCHEMA[section][key]
    where = f"{section}.{key}" if section else key
    types = expected if isinstance(expected, tuple) else (expected,)
    if isinstance(value, bool) and bool not in types:
        ok = False
    else:
        ok = isinstance(value, types)
    if not ok:
        words = {dict: "table", int: "number", float: "number", str: "string", list: "list", bool: "boolean"}
        names = " or ".join(dict.fromkeys(words[t] for t in types))
        raise GateError(f"{source}: '{where}' must be a {names}, got {type(value).__name__} {value!r}.")
    if key in ("runners", "execution_providers") and not all(isinstance(v, str) and v for v in value):
        raise GateError(f"{source}: '{where}' must be a list of non-empty strings, got {value!r}.")


def _shown(name: str) -> str:
    """A key as it can be shown on one line (control characters escaped)."""
    return name if name.isprintable() else repr(name)[1:-1]


def _flatten(data: dict, source) -> dict:
    flat = {}
    for key, value in data.items():
        if key in _SCHEMA and key and isinstance(value, dict):
            for sub, subvalue in value.items():
                if sub not in _SCHEMA[key]:
                    hint = difflib.get_close_matches(sub, _SCHEMA[key], n=1)
                    did = f"; did you mean '{hint[0]}'?" if hint else f"; known keys: {', '.join(_SCHEMA[key])}"
                    raise GateError(f"{source}: unknown setting '{_shown(key)}.{_shown(sub)}'{did}")
                _check_type(source, key, sub, subvalue)
                if key == "trt":
                    flat.setdefault("trt", {})[sub] = subvalue
                else:
                    flat[sub] = subvalue
        elif key in _SCHEMA[""]:
            _check_type(source, "", key, value)
            flat[key] = value
        elif key in _SCHEMA:
            raise GateError(f"{source}: '{key}' must be a table ([{key}]), got {type(value).__name__} {value!r}.")
        elif any(key in keys for keys in _SCHEMA.values()):
            section = next(name for name, keys in _SCHEMA.items() if key in keys)
            raise GateError(f"{source}: '{key}' belongs in the [{section}] table; write it under [{section}].")
        else:
            known = list(_SCHEMA[""]) + [s for s in _SCHEMA if s]
            hint = difflib.get_close_matches(key, known, n=1)
            did = f"; did you mean '{hint[0]}'?" if hint else f"; known keys: {', '.join(known)}"
            raise GateError(f"{source}: unknown setting '{_shown(key)}'{did}")
    return flat


def _entries(value) -> list:
    """A per-output value as ``(output, value)`` pairs, ``""`` being the default."""
    return list(value.items()) if isinstance(value, dict) else [("", value)]


def _for_output(output: str) -> str:
    return f" (output '{_shown(output)}')" if output else ""


def check_tolerance(value, subject) -> None:
    """The one tolerance rule, for gate.toml, flags and action inputs alike: every entry of a
    per-output atol/rtol is a non-negative finite number (an infinite one would pass every finite
    output; ``1e400`` reads as infinite).

    Raises:
        GateError: ``"<subject(output)> must be a non-negative finite number, got <value>"``.
    """
    for output, v in _entries(value):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise GateError(f"{subject(output)} must be a non-negative finite number, got {v!r}{_for_output(output)}.")


def _flag_of(overrides: dict, flags: Mapping[str, str]):
    """``flag(key, output="")``: the name in ``flags`` of the override that set ``key`` (of a
    per-output setting: ``output``'s entry; ``"trt.<key>"``: a [trt] key), or None where the value
    is gate.toml's, so that an error blames the flag that set a bad value and not the file."""

    def flag(key: str, output: str = "") -> str | None:
        section, _, sub = key.rpartition(".")
        value = (overrides.get(section) or {}).get(sub) if section else overrides.get(key)
        if value is None or key not in flags:
            return None
        if key in PER_OUTPUT and output not in dict(_entries(value)):
            return None  # that output's entry is gate.toml's (merge_per_output)
        return flags[key]

    return flag


def _read_text(path: Path) -> str:
    """The config's text; a UTF-8 byte-order mark (as some Windows editors save) is dropped."""
    try:
        raw = read_regular(path, "the config file")
    except FileNotFoundError as err:
        raise GateError(f"{path}: config file not found.") from err
    except OSError as err:
        raise GateError(f"{path}: cannot read the config file ({err.strerror}).") from err
    bom = len(codecs.BOM_UTF8) if raw.startswith(codecs.BOM_UTF8) else 0
    try:
        return raw[bom:].decode("utf-8")
    except UnicodeDecodeError as err:
        raise GateError(f"{path}: not UTF-8 text (byte {bom + err.start}); save the config as UTF-8.") from err


def _parse_toml(path: Path) -> dict:
    """gate.toml's table (``gate.limits.parse_nested``: nesting bounded).

    Raises:
        GateError: the file cannot be read, is not UTF-8, not TOML or nested too deep."""
    try:
        return parse_nested(tomllib.loads, _read_text(path), TOML_DEPTH, str(path), "the config")
    except tomllib.TOMLDecodeError as err:
        raise GateError(f"{path}: not valid TOML ({err}).") from err


_READ = {
    "model": "the model",
    "inputs": "the stored inputs",
    "golden": "the golden outputs",
    "engine": "the TensorRT engine",
}


def _read_paths(path: Path, data: dict, overrides: dict) -> list[tuple[Path, str]]:
    """``(path, description)`` of each file and folder the configuration makes the gate read (the
    config, model, stored inputs, golden outputs, TensorRT engine), taken from gate.toml's table
    before its values are checked, so that no report is written over them even when a check fails."""
    base = path.resolve().parent
    trt = data.get("trt") if isinstance(data.get("trt"), dict) else {}
    values = {key: data.get(key) for key in ("model", "inputs", "golden")} | {"engine": trt.get("engine")}
    named = {key: base / value for key, value in values.items() if isinstance(value, str)}
    for key in ("model", "inputs", "golden"):
        if overrides.get(key) is not None:
            named[key] = Path(overrides[key]).resolve()
    if (overrides.get("trt") or {}).get("engine") is not None:
        named["engine"] = base / overrides["trt"]["engine"]
    named.setdefault("golden", named.get("inputs"))
    return [(path, "the config file")] + [(named[key], what) for key, what in _READ.items() if named.get(key)]


def _junit_path(data: dict, overrides: dict, flag, root: Path, protected) -> Path:
    """The JUnit path (``--junit``, else ``[report] junit``, else the default), checked like every
    report path (``gate.paths.require_output``).

    Raises:
        GateError: it leads outside ``root`` or over a file or into a folder the gate reads.
    """
    if overrides.get("junit") is not None:
        value, what = overrides["junit"], flag("junit") or "'report.junit'"
    else:
        report = data.get("report") if isinstance(data.get("report"), dict) else {}
        value, what = report.get("junit"), "'report.junit'"
        if not isinstance(value, str):  # absent, or a wrong type that _flatten reports
            return require_output(Path(DEFAULT_JUNIT), root, "the default JUnit path", default=DEFAULT_JUNIT)
    return require_output(Path(value), root, what, protected, default=DEFAULT_JUNIT)


@dataclass(frozen=True)
class ReportScope:
    """What the report-path policy (``gate.report_files``) needs to know of a gate.toml: the confinement
    ``root``, ``protected`` (``(path, description)`` of each file and folder the gate reads; complete
    only when ``known``, i.e. once the file was read as TOML) and the checked JUnit path of
    ``--junit`` / ``[report] junit`` / the default (``junit``; None with ``junit_error`` when refused,
    None alone when not known)."""

    root: Path
    protected: tuple = ()
    known: bool = False
    junit: Path | None = None
    junit_error: GateError | None = None


def _scope(path: Path, overrides: dict, flag) -> tuple[ReportScope, dict | None]:
    """``(scope, data)``: ``data`` is the TOML table, or None where the file cannot be read as TOML
    (``scope`` then names only the config file and is not ``known``)."""
    root = confinement_root(path, overrides.get("root"))
    try:
        data = _parse_toml(path)
    except GateError:
        return ReportScope(root=root, protected=((path, "the config file"),)), None
    protected = tuple(_read_paths(path, data, overrides))
    try:
        junit, error = _junit_path(data, overrides, flag, root, protected), None
    except GateError as err:
        junit, error = None, err
    return ReportScope(root=root, protected=protected, known=True, junit=junit, junit_error=error), data


def report_scope(path, overrides: dict | None = None, flags: Mapping[str, str] | None = None) -> ReportScope:
    """The :class:`ReportScope` of ``path`` with ``overrides`` (as for :func:`load_config`); never
    raises a GateError: a file that cannot be read gives a scope that is not ``known``."""
    overrides = {key: value for key, value in (overrides or {}).items() if value is not None}
    return _scope(Path(path), overrides, _flag_of(overrides, flags or {}))[0]


def load_config(path, overrides: dict | None = None, flags: Mapping[str, str] | None = None) -> GateConfig:
    """Reads ``gate.toml`` and applies ``overrides`` (flat keys as in ``GateConfig``; values already
    parsed, paths relative to the working directory). ``flags`` names where each override came from
    (``{"atol": "--atol"}``; ``"trt.engine"`` for a [trt] key): an error about a value set that way
    names it, one about a value written in gate.toml names the file and the key (as it does for an
    override without a name).

    Where the reports of this configuration may go is :func:`report_scope`'s (the same reading).

    Raises:
        GateError: the file is missing or not TOML; an unknown key (with a suggestion); a value of
            the wrong type; a missing ``model``/``inputs``; a negative, NaN or infinite tolerance; an
            unknown check_error_stat or runner; check_average with elemwise; a path outside the
            confinement root; a JUnit path over a file or inside a folder the gate reads.
    """
    path = Path(path)
    overrides = {key: value for key, value in (overrides or {}).items() if value is not None}
    flag = _flag_of(overrides, flags or {})
    scope, data = _scope(path, overrides, flag)
    root = scope.root
    overrides.pop("root", None)
    if data is None:  # the same read again, for its error
        data = _parse_toml(path)
    if scope.junit_error is not None:
        raise scope.junit_error
    flat = _flatten(data, path)
    base = path.resolve().parent
    paths = ("model", "inputs", "golden", "labels")
    settings = {key: base / value if key in paths else value for key, value in flat.items()}
    for key, value in overrides.items():
        if key in ("model", "inputs", "golden", "junit", "labels"):
            value = Path(value).resolve()
        elif key in PER_OUTPUT and key in settings:
            value = merge_per_output(settings[key], value)
        elif key == "trt":
            value = {**settings.get("trt", {}), **{k: v for k, v in value.items() if v is not None}}
        elif key == "provider_options":
            value = merge_provider_options(settings.get(key, {}), value)
        settings[key] = value

    for required in ("model", "inputs"):
        if required not in settings:
            raise GateError(f"{path}: '{required}' is not set; expected a path relative to the config file.")
    settings.setdefault("golden", settings["inputs"])
    for key in ("atol", "rtol"):
        if key in settings:
            check_tolerance(settings[key], lambda output, key=key: flag(key, output) or f"{path}: '{key}'")
    stat = settings.get("check_error_stat", "elemwise")
    for output, value in _entries(stat):
        if value not in CHECK_ERROR_STATS:
            given = flag("check_error_stat", output)
            subject = f"{given}:" if given else f"{path}: check_error_stat"
            raise GateError(
                f"{subject} '{_shown(str(value))}' is not one of {', '.join(CHECK_ERROR_STATS)}{_for_output(output)}."
            )
    from gate.compare_funcs import check_compare_settings, check_error_quantile

    check_compare_settings(settings, lambda key, output="": flag(key, output) or f"{path}: '{key}'")
    check_error_quantile(
        settings.get("error_quantile"), lambda output: flag("error_quantile", output) or f"{path}: 'error_quantile'"
    )
    if settings.get("check_average"):
        no_default = isinstance(stat, dict) and "" not in stat
        elemwise = [output for output, value in _entries(stat) if value == "elemwise"]
        # A clash between check_average and the statistics names the flag that set one of them, if any.
        stat_flags = (flag("check_error_stat", output) for output in (list(stat) if no_default else elemwise))
        where = flag("check_average") or next(filter(None, stat_flags), None) or path
        if no_default:
            example = 'an entry "" = "max", say' if where == path else "an entry without an output name, e.g. max"
            raise GateError(
                f"{where}: check_average needs a default check_error_stat ({example}): "
                "outputs not listed would be checked elemwise, which cannot be averaged."
            )
        if elemwise:
            raise GateError(
                f"{where}: check_average needs check_error_stat max, mean, median or quantile, not elemwise "
                f"(for {', '.join(_shown(output) or 'the default' for output in elemwise)})."
            )
        if settings.get("fail_fast"):  # as Polygraphy's Comparator.compare_accuracy refuses them together
            where = flag("check_average") or flag("fail_fast") or path
            raise GateError(
                f"{where}: check_average and fail_fast cannot be used together (an average over the iterations "
                "compared before a stop is not the run's average)."
            )
    if "execution_providers" in settings and not settings["execution_providers"]:
        raise GateError(
            f"{flag('execution_providers') or path}: 'execution_providers' is empty; name at least one, "
            'e.g. ["CPUExecutionProvider"].'
        )
    if "provider_options" in settings:
        settings["provider_options"] = check_provider_options(
            settings["provider_options"],
            settings.get("execution_providers", ["CPUExecutionProvider"]),
            flag("provider_options") or path,
        )
    named = [("runners", runner) for runner in settings.get("runners", [])]
    for key, runner in [*named, ("reference_runner", settings.get("reference_runner", "onnxrt"))]:
        if runner not in RUNNERS:
            raise GateError(
                f"{flag(key) or path}: unknown runner '{_shown(str(runner))}'; available: {', '.join(RUNNERS)}."
            )
    level = settings.get("graph_optimization_level", "all")
    if level not in GRAPH_OPTIMIZATION_LEVELS:
        raise GateError(
            f"{flag('graph_optimization_level') or path}: graph_optimization_level '{_shown(str(level))}' is not one "
            f"of {', '.join(GRAPH_OPTIMIZATION_LEVELS)}."
        )
    if "runners" in settings and not settings["runners"]:
        raise GateError(f"{flag('runners') or path}: 'runners' is empty; name at least one runner, e.g. [\"onnxrt\"].")
    if "junit" in settings:
        settings["junit"] = Path(settings["junit"])
    for key in ("model", "inputs", "golden", "labels"):
        if key in settings:
            require_inside(settings[key], root, flag(key) or f"'{key}'")
    trt = settings.get("trt", {})
    if "engine" in trt:
        trt["engine"] = require_inside(base / trt["engine"], root, flag("trt.engine") or "'trt.engine'")
    if isinstance(trt.get("cache_dir"), str):  # as engine: gate.toml's relative to its folder (a flag's is absolute)
        trt["cache_dir"] = str(base / trt["cache_dir"])
    source = str(path.resolve())
    settings["paths_named_by"] = {key: flag(key) for key in ("model", "inputs", "golden", "labels") if flag(key)}
    settings["named_by"] = {
        key: {output: flag(key, output) for output, _ in _entries(overrides[key]) if flag(key, output)}
        for key in PER_OUTPUT
        if key in overrides
    }
    if "trt" in settings.get("runners", ()):  # parsed now: a [trt] mistake shows before anything runs
        settings["trt_build"] = trt_build_settings(trt, source)
    return GateConfig(path=path.resolve(), source=source, **settings)
