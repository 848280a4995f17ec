"""Compare functions per output: which ones check each output (``compare_func``), which decides its
verdict (``compare_verdict``), their thresholds, and how many iterations may fail
(``max_failed_iterations``); settings from ``gate.compare_options``, compare functions from
``gate.comparator``. Pure functions: the settings are a mapping of those keys (a ``GateConfig``'s
fields, or the ``settings`` a partial result file keeps, where only non-default values are written),
so ``check`` and ``merge`` judge the same comparisons alike.

- ``simple``: ``SimpleCompareFunc`` (atol, rtol, check_error_stat).
- ``indices``: top-``top_k`` agreement along ``top_k_axis`` (``TopKCompareFunc``; an integer output
  already holds indices and is compared as ``IndicesCompareFunc`` does), ``index_tolerance``,
  ``ties_compare_equal`` with ``tie_atol``. Judged per iteration, never averaged.
- ``cosine`` (>= ``cosine_similarity_threshold``), ``l2`` (<= ``l2_threshold``), ``mse``
  (<= ``mse_threshold``), ``psnr`` / ``snr`` (>= threshold, dB): Polygraphy's single-metric compare
  functions and ``MseCompareFunc``; averaged over iterations with ``check_average``.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from pathlib import Path

from gate.comparator.compare import value_or_from_dict
from gate.comparator.metrics import CosineSimilarityCompareFunc, L2CompareFunc, PsnrCompareFunc, SnrCompareFunc
from gate.comparator.output_funcs import MseCompareFunc, SelectedOutputs, TopKCompareFunc
from gate.compare_options import DEFAULTS, FUNC_NAMES, NAMES, TASK_METRICS, THRESHOLDS
from gate.dtype_rules import iteration_error
from gate.errors import GateError
from gate.per_output import output_lineage, value_for_output
from gate.results import OutputVerdict
from gate.task_metrics import task_rows

METRIC_FUNCS = {
    "cosine": CosineSimilarityCompareFunc,
    "l2": L2CompareFunc,
    "mse": MseCompareFunc,
    "psnr": PsnrCompareFunc,
    "snr": SnrCompareFunc,
}
HIGHER_IS_BETTER = ("cosine", "psnr", "snr")
NUMERIC_ONLY = ("indices", *METRIC_FUNCS)
"""Functions that refuse bool and text outputs (``check_output_dtypes``)."""


def setting(settings, key):
    """``settings[key]`` (a mapping or an object with that attribute), else the option's default."""
    value = settings.get(key) if isinstance(settings, dict) else getattr(settings, key, None)
    return DEFAULTS[key] if value is None else value


def funcs_for(settings, output: str) -> list[str]:
    """The compare functions of ``output``, in order (``compare_func``: a name, a list, or names joined
    by ``+``; per output, a structured output's leaf by its output's entry)."""
    value = value_for_output(setting(settings, "compare_func"), output, "simple")
    names = value if isinstance(value, list) else str(value).split("+")
    return [name.strip() for name in names if name.strip()]


def compare_settings(cfg) -> dict:
    """The compare-function settings of ``cfg`` that differ from their defaults (for the partial result
    file's fingerprint: a run without any keeps the fingerprint it had)."""
    values = {name: setting(cfg, name) for name in NAMES}
    if values.get("labels") is not None:
        values["labels"] = Path(values["labels"]).name  # not a path: the fingerprint holds none
    return {name: value for name, value in values.items() if value != DEFAULTS[name]}


def _entries(value):
    return list(value.items()) if isinstance(value, dict) else [("", value)]


_DIGITS = re.compile(r"[0-9]+")
_DECIMAL = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")


def parse_count(value, subject: str):
    """``max_failed_iterations``'s value: an integer >= 0, or a share ``"P%"`` (0 <= P <= 100); returns
    the int or the share as an exact Fraction of 1 from its decimal text (``"0.5%"`` -> 1/200).

    Raises:
        GateError: anything else, naming ``subject``.
    """
    if isinstance(value, str) and value.strip().endswith("%"):
        digits = value.strip()[:-1].strip()
        if not _DECIMAL.fullmatch(digits):  # ASCII digits only (float() also reads "٣٤", "1_0", "nan")
            raise GateError(f"{subject}: expected a count >= 0 or a share such as '0.5%', got {value!r}.")
        share = Fraction(digits)
        if not 0 <= share <= 100:
            raise GateError(f"{subject}: a share must be 0% to 100%, got {value!r}.")
        return share / 100
    if isinstance(value, str):
        count = int(value) if _DIGITS.fullmatch(value.strip()) else None  # (int() also reads "1_0", "１")
    else:
        count = int(value) if isinstance(value, int) and not isinstance(value, bool) else None
    if count is None or count < 0:
        raise GateError(f"{subject}: expected a count >= 0 or a share such as '0.5%', got {value!r}.")
    return count


def allowed_failures(value, iterations: int) -> int:
    """How many of ``iterations`` may fail: a count as it is, a share of them rounded down."""
    parsed = parse_count(value, "max_failed_iterations")
    if isinstance(parsed, Fraction):  # exact: 33.333333333333333% of 3 is 0, not 1
        return math.floor(parsed * iterations)
    return parsed


def check_compare_settings(settings: dict, subject, check_average: bool = False) -> None:
    """The compare-function settings of gate.toml with its overrides, before anything runs.
    ``subject(key, output) -> str`` names the flag, input or gate.toml key in the message.

    Raises:
        GateError: an unknown compare function; a verdict that is not one of the output's functions;
            a bad count or share; a top_k < 1, a negative index_tolerance; a threshold that is not a
            finite number.
    """
    for output, value in _entries(setting(settings, "compare_func")):
        names = funcs_for({"compare_func": value}, "")
        unknown = [name for name in names if name not in FUNC_NAMES] or ([] if names else ["(none)"])
        if unknown:
            raise GateError(f"{subject('compare_func', output)}: unknown compare function '{unknown[0]}'; "
                            f"expected one of {', '.join(FUNC_NAMES)}{_of(output)}.")  # fmt: skip
    for output, verdict in _entries(setting(settings, "compare_verdict")):
        names = funcs_for(settings, output) if output else funcs_for({"compare_func": _default(settings)}, "")
        if verdict != "all" and verdict not in names:
            raise GateError(f"{subject('compare_verdict', output)}: '{verdict}' is not one of the output's compare "
                            f"functions ({', '.join(names)}) nor 'all'{_of(output)}.")  # fmt: skip
    for output, value in _entries(setting(settings, "max_failed_iterations")):
        parse_count(value, subject("max_failed_iterations", output) + _of(output))
    for key, low in (("top_k", 1), ("index_tolerance", 0)):
        for output, value in _entries(setting(settings, key)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise GateError(f"{subject(key, output)}: must be an integer >= {low}, got {value!r}{_of(output)}.")
    for output, value in _entries(setting(settings, "top_k_axis")):
        if isinstance(value, bool) or not isinstance(value, int):
            raise GateError(f"{subject('top_k_axis', output)}: must be an integer, got {value!r}{_of(output)}.")
    for output, value in _entries(setting(settings, "task_metric") or {}):
        if value not in TASK_METRICS:
            raise GateError(f"{subject('task_metric', output)}: unknown task metric '{value}'; expected one of "
                            f"{', '.join(TASK_METRICS)}{_of(output)}.")  # fmt: skip
    for key, high in (("task_min", 1), ("task_min_relative", 1), ("task_max_drop", 100)):
        for output, value in _entries(setting(settings, key) or {}):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= high:
                raise GateError(
                    f"{subject(key, output)}: must be a number from 0 to {high}, got {value!r}{_of(output)}."
                )
    for key in (*THRESHOLDS.values(), "tie_atol"):
        for output, value in _entries(setting(settings, key)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise GateError(f"{subject(key, output)}: must be a finite number, got {value!r}{_of(output)}.")
    for key in ("l2_threshold", "mse_threshold", "tie_atol"):  # distances are >= 0: a negative bound never passes
        for output, value in _entries(setting(settings, key)):
            if value < 0:
                raise GateError(f"{subject(key, output)}: must be a number >= 0, got {value!r}{_of(output)}.")
    for output, value in _entries(setting(settings, "cosine_similarity_threshold")):
        if not -1 <= value <= 1:  # a cosine similarity lies in [-1, 1]: any other minimum never passes
            raise GateError(f"{subject('cosine_similarity_threshold', output)}: must be from -1 to 1 (a cosine "
                            f"similarity), got {value!r}{_of(output)}.")  # fmt: skip


def check_error_quantile(value, subject) -> None:
    """``error_quantile`` (one value or ``{output: value}``) must be a number in [0, 1];
    ``subject(output) -> str`` names the flag or gate.toml key.

    Raises:
        GateError: one line naming the setting and the output."""
    for output, quantile in _entries(value if value is not None else {}):
        if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 <= quantile <= 1:
            raise GateError(f"{subject(output)}: must be a quantile from 0 to 1, got {quantile!r}{_of(output)}.")


def _default(settings):
    return value_or_from_dict(setting(settings, "compare_func"), "", "simple")


def _of(output: str) -> str:
    return f" (output '{output}')" if output else ""


def check_output_dtypes(settings, dtypes: dict, source: str) -> None:
    """``dtypes``: ``{output: numpy dtype or None}`` as the model declares them. ``indices`` and the
    metrics need numbers: a bool or text output is refused, and a per-output setting for an output the
    model lacks too.

    Raises:
        GateError: one line naming the output, the function and the dtype.
    """
    for key in NAMES:
        value = setting(settings, key) if key != "labels" else None
        for name in value if isinstance(value, dict) else ():
            if name and name not in dtypes:
                raise GateError(f"{source}: {key} names output '{name}', which the model does not have; its "
                                f"outputs are {list(dtypes)}.")  # fmt: skip
    for output, dtype in dtypes.items():
        verdict_for(settings, output, source)
        metric = value_or_from_dict(setting(settings, "task_metric"), output, None)
        if metric and dtype is not None and dtype.kind in "bOSU":
            raise GateError(f"{source}: task metric '{metric}' needs scores or classes, but '{output}' is {dtype}.")
        for func in funcs_for(settings, output):
            if func in NUMERIC_ONLY and dtype is not None and dtype.kind in "bOSU":
                raise GateError(f"{source}: compare function '{func}' needs a numeric output, but '{output}' is "
                                f"{dtype}; check it with 'simple'.")  # fmt: skip


def build_compare_funcs(cfg) -> list[tuple[str, object]]:
    """``(name, compare function)`` for every function some output uses besides ``simple``, each
    restricted to its outputs (``SelectedOutputs``)."""
    used = []
    value = setting(cfg, "compare_func")
    for output, _ in _entries(value):
        used += [name for name in funcs_for(cfg, output) if name not in used and name != "simple"]
    funcs = []
    for name in used:
        if name == "indices":
            func = TopKCompareFunc(setting(cfg, "top_k"), setting(cfg, "top_k_axis"), setting(cfg, "index_tolerance"),
                                   setting(cfg, "ties_compare_equal"), setting(cfg, "tie_atol"))  # fmt: skip
        else:
            func = METRIC_FUNCS[name](setting(cfg, THRESHOLDS[name]))
        funcs.append((name, SelectedOutputs(func, lambda output, name=name: name in funcs_for(cfg, output))))
    return funcs


def uses_simple(cfg):
    """``selected(output)`` for ``SelectedOutputs``: the outputs ``simple`` checks."""
    return lambda output: "simple" in funcs_for(cfg, output)


# --- rows and verdicts -------------------------------------------------------------------------------


def _label(name: str, settings, output: str, dtypes) -> str:
    if name != "indices":
        return name
    if dtypes and all(d[:3] in ("int", "uin") for d in dtypes):
        return "indices"
    return f"top-{value_for_output(setting(settings, 'top_k'), output, 1)}"


def _worst_key(name):
    def key(item):
        value = getattr(item[1], "value", None)
        if name == "indices":
            return item[1].mismatch_count
        if value is None:
            return -math.inf
        if math.isnan(value):
            return math.inf
        return -value if name in HIGHER_IS_BETTER else value

    return key


def func_rows(name: str, accuracy, indices, settings) -> list[OutputVerdict]:
    if name == "task":
        return task_rows(accuracy, indices, settings)
    return _func_rows(name, accuracy, indices, settings)


def _func_rows(name: str, accuracy, indices, settings) -> list[OutputVerdict]:
    """One row per (runner pair, output) of compare function ``name``'s AccuracyResult: the worst
    iteration's value (the lowest similarity, PSNR or SNR, the highest L2 or MSE; for ``indices`` the
    share of iterations whose top-k indices agree, and the worst iteration's mismatching positions),
    or with ``aggregation == "average"`` the average over iterations. ``indices`` maps positions to
    golden-set indices."""
    rows = []
    for pair, iterations in accuracy.items():
        for output in accuracy.output_names(pair):
            samples = [(i, it[output]) for i, it in enumerate(iterations) if output in it]
            failed = [(i, r) for i, r in samples if not bool(r)]
            base = {"func": name, "iterations": len(samples), "failed_iterations": len(failed)}
            if (stopped := iteration_error(pair, samples)) is not None:  # every iteration's dtypes, too
                index, error, dtypes = stopped
                row = OutputVerdict(pair, output, False, worst_iteration=index, error=error, dtypes=dtypes, **base)
            else:
                worst_iteration, worst = max(failed or samples, key=_worst_key(name))
                row = OutputVerdict(pair, output, not failed, worst_iteration=worst_iteration, dtypes=worst.dtypes,
                                    stat=_label(name, settings, output, worst.dtypes), **base)  # fmt: skip
                if name == "indices":
                    row.abs_value = (len(samples) - len(failed)) / len(samples)
                    row.mismatch_count = worst.mismatch_count
                else:
                    row.abs_value, row.threshold = worst.value, worst.thresholds.threshold
                    row.num_elements = worst.num_elements
                    if accuracy.aggregation == "average":
                        averaged = type(worst).averaged([r for _, r in samples])
                        row.averaged, row.passed, row.abs_value = True, bool(averaged), averaged.value
            if indices is not None and row.worst_iteration is not None:
                row.worst_iteration = indices[row.worst_iteration]
            rows.append(row)
    return rows


def verdict_for(settings, output: str, source: str = "compare_verdict") -> str:
    """The compare function that decides ``output``'s verdict, or ``"all"``: its own
    ``compare_verdict`` entry, else the default (``""``) entry when that is ``all`` or one of the
    output's compare functions.

    Raises:
        GateError: the default verdict is not one of the output's functions (nothing would judge it),
            naming the output, its functions and the verdict.
    """
    value = setting(settings, "compare_verdict")
    own = [name for name in output_lineage(output) if isinstance(value, dict) and name in value]
    if own:  # a structured output's leaf (``out[0]``) takes its output's entry
        return value[own[0]]
    verdict = value_or_from_dict(value, "", "all")
    names = funcs_for(settings, output)
    if verdict != "all" and verdict not in names:
        raise GateError(f"{source}: the default compare_verdict '{verdict}' is not among the compare functions of "
                        f"output '{output}' ({', '.join(names)}), so nothing would judge it; give '{output}' its "
                        f"own compare_verdict or add '{verdict}' to its compare_func.")  # fmt: skip
    return verdict


def judge_rows(rows: list[OutputVerdict], settings) -> None:
    """In place: a row judged per iteration passes when at most ``max_failed_iterations`` of its
    iterations failed; a row of a function other than its output's ``compare_verdict`` is reported
    only (``verdict`` False, ``passed`` True, its own outcome in ``within``). Every setting of a
    structured output's leaf (``out[0]``, ``out{key}``) is its output's. An output none of whose rows
    is judged (its verdict's function gave no row) is an error on each of its rows.

    Raises:
        GateError: an output's default verdict is not one of its functions (``verdict_for``).
    """
    for row in rows:
        if row.error:
            continue
        spec = value_for_output(setting(settings, "max_failed_iterations"), row.output, 0)
        row.allowed_failures = allowed_failures(spec, row.iterations)
        if not row.averaged:
            row.passed = row.failed_iterations <= row.allowed_failures
        verdict = verdict_for(settings, row.output)
        if verdict != "all" and row.func not in (verdict, "task"):  # a task metric has its own criterion
            row.verdict, row.within, row.passed = False, row.passed, True

    def root(row):  # a structured output's leaves (seq[0]) and its metric rows (seq) are one output
        return row.pair, output_lineage(row.output)[-1]

    judged = {root(row) for row in rows if row.verdict or row.error}
    for row in rows:
        if root(row) not in judged:
            row.passed = False
            verdict = verdict_for(settings, row.output)
            row.error = f"no compare function judges it (its compare_verdict '{verdict}' gave no row)"
