"""The partial result file: what one ``check`` compared (``gate.compared_run.ComparedRun``), kept
exactly enough to rebuild its ``AccuracyResult`` and so the verdict of any union of shards
(``gate.merge``); writer and reader together.

The file, schema ``accuracy-gate-partial`` version 1 (documented in README.md,
"Partial result file"), is strict JSON (NaN and infinities as the strings ``"NaN"``, ``"Infinity"``,
``"-Infinity"``; every other float as Python's shortest repr, which reads back to the same float)::

    {"schema": "accuracy-gate-partial", "version": 1,
     "shard": {"index": int, "count": int},
     "model": str, "title": str, "commit": str | null,
     "config": {"sha256": str, "settings": {...}, "path"?: str},  # what decides the numbers; gate.toml
     "golden": {"iterations": int, "files_sha256": str, "content_sha256": str | null},
     "iterations": {"index": [int], "golden_sha256": [str | null]},
     "where": {"<index>": str},                               # files of iterations named in errors
     "stopped": null | {"iteration": int | null, "message": str, "output"?: str},
     "fail_fast_stop"?: int,   # --fail-fast: the iteration whose failure stopped the shard (the last one)
     "aggregation": "per_sample" | "average",
     "duration_s": num, "facts": {str: str},
     "pairs": [{"runners": [str, str],
                "outputs": [{"output": str,
                             "thresholds": [{"stat": str, "atol": num, "rtol": num}],
                             "index": [int], "threshold": [int | null],
                             "max_absdiff": [num | null], ... (the 8 metric fields),
                             "passed": [bool | null], "error": [str | null],
                             "mismatch_count": [int | null], "worst_index": [[int] | null],
                             "num_elements": [int | null], "zero_reference_count": [int | null],
                             "dtypes": [[str, str] | null], "shapes": [[[int], [int]] | null],
                             "names": [[str | null, str | null]],
                             "time_s": [num | null]}]}]}   # optional: seconds each comparison took

Per output the per-iteration values are columns (one list per field, aligned with ``index``), which
keeps a file of tens of thousands of iterations compact.
"""

from __future__ import annotations

import json
import math
from collections import OrderedDict
from pathlib import Path
from typing import Any

from gate.comparator.compare import CHECK_ERROR_STATS, METRIC_FIELDS, OutputCompareResult, SimpleThreshold
from gate.comparator.struct import AccuracyResult
from gate.compared_run import ComparedRun
from gate.errors import GateError
from gate.partial_funcs import funcs_document, read_funcs
from gate.paths import write_atomic
from gate.shards import Shard
from gate.strict_json import element_from_json, element_json, json_int, json_number, load_json, number_from_json

SCHEMA = "accuracy-gate-partial"
VERSION = 1


def _output_columns(name: str, samples) -> dict:
    """The columns of one output: ``samples`` is ``[(golden index, OutputCompareResult)]``."""
    thresholds, table = [], {}
    column: dict[str, list] = {key: [] for key in ("index", "threshold", *METRIC_FIELDS)}
    for key in ("passed", "error", "mismatch_count", "worst_index", "num_elements", "zero_reference_count"):
        column[key] = []
    for key in ("dtypes", "shapes", "names", "worst_element", "time_s"):
        column[key] = []
    for index, result in samples:
        if not isinstance(result, OutputCompareResult):
            raise GateError(f"output '{name}': only SimpleCompareFunc results can be written to a partial result file.")
        column["index"].append(int(index))
        threshold = result.thresholds
        if threshold is None:
            column["threshold"].append(None)
        else:
            exact = bool(getattr(threshold, "exact", False))
            key = (threshold.check_error_stat, float(threshold.atol), float(threshold.rtol), exact)
            if key not in table:
                table[key] = len(thresholds)
                entry = {"stat": key[0], "atol": json_number(key[1]), "rtol": json_number(key[2])}
                thresholds.append({**entry, "exact": True} if exact else entry)
            column["threshold"].append(table[key])
        for metric in METRIC_FIELDS:
            column[metric].append(json_number(getattr(result, metric)))
        column["passed"].append(None if result.passed is None else bool(result.passed))
        column["error"].append(None if result.error is None else str(result.error))
        column["mismatch_count"].append(json_int(result.mismatch_count))
        column["worst_index"].append(None if result.worst_index is None else [int(i) for i in result.worst_index])
        column["num_elements"].append(json_int(result.num_elements))
        column["zero_reference_count"].append(json_int(result.zero_reference_count))
        column["dtypes"].append(None if result.dtypes is None else [str(d) for d in result.dtypes])
        column["shapes"].append(None if result.shapes is None else [[int(d) for d in shape] for shape in result.shapes])
        column["names"].append([result.output0_name, result.output1_name])
        column["worst_element"].append(
            element_json(result.worst_values, result.worst_absdiff, result.worst_reldiff, result.nan_counts)
        )
        column["time_s"].append(json_number(getattr(result, "time_s", None)))
    return {"output": name, "thresholds": thresholds, **column}


def partial_document(run: ComparedRun) -> dict[str, Any]:
    """The version-1 document of ``run`` (see the module docstring)."""
    pairs = []
    for pair, iterations in run.accuracy.items():
        outputs = []
        for name in run.accuracy.output_names(pair):
            samples = [(run.indices[j], it[name]) for j, it in enumerate(iterations) if name in it]
            outputs.append(_output_columns(name, samples))
        pairs.append({"runners": [str(pair[0]), str(pair[1])], "outputs": outputs})
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "shard": {"index": run.shard.index, "count": run.shard.count},
        "model": run.model,
        "title": run.title,
        "commit": run.commit,
        "config": {
            "sha256": run.config_sha256,
            "settings": run.settings,
            **({"path": run.config_path} if run.config_path else {}),
        },
        "golden": {
            "iterations": run.total,
            "files_sha256": run.golden["files_sha256"],
            "content_sha256": run.content_sha256(),
        },
        "iterations": {"index": list(run.indices), "golden_sha256": list(run.golden_sha256)},
        "where": {str(k): v for k, v in sorted(run.where.items())},
        "stopped": run.stopped,
        **({"fail_fast_stop": run.fail_fast_stop} if run.fail_fast_stop is not None else {}),
        "aggregation": run.accuracy.aggregation,
        "duration_s": json_number(run.duration_s),
        "facts": {str(k): str(v) for k, v in run.facts.items()},
        "pairs": pairs,
        **({"funcs": funcs_document(run.metrics, run.indices)} if run.metrics else {}),
    }


def write_partial(run: ComparedRun, path) -> Path:
    """Writes the partial result file (UTF-8 JSON, one line); parent folders are created.

    Raises:
        GateError: the file cannot be written, naming it.
    """
    path = Path(path)
    text = json.dumps(partial_document(run), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        write_atomic(path, text + "\n", "partial result file")
    except OSError as err:
        raise GateError(f"{path}: cannot write the partial result file ({err.strerror or err}).") from err
    return path


# --- reading ---------------------------------------------------------------------------------------


class _Reader:
    """Type checks with one-line errors naming the file and the field."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, expected: str) -> GateError:
        return GateError(f"{self.source}: '{where}' must be {expected}; not a valid partial result file.")

    def get(self, data, key, where, kind, expected, optional=False):
        if not isinstance(data, dict):
            raise self.fail(where.rpartition(".")[0] or where, "an object")
        value = data.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) and bool not in kind:
            raise self.fail(where, expected)
        if not isinstance(value, kind):
            raise self.fail(where, expected)
        return value

    def integer(self, value, where, optional=False):
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(where, "a non-negative integer")
        return value

    def number(self, value, where):
        try:
            return number_from_json(value)
        except TypeError:
            raise self.fail(where, 'a number, "NaN", "Infinity", "-Infinity" or null') from None

    def column(self, data, key, where, length):
        value = self.get(data, key, f"{where}.{key}", list, f"a list of {length} entries")
        if len(value) != length:
            raise self.fail(f"{where}.{key}", f"a list of {length} entries (one per iteration)")
        return value


def _int_list(read: _Reader, value, where):
    if value is None:
        return None
    if not isinstance(value, list):
        raise read.fail(where, "a list of integers or null")
    return [read.integer(v, where) for v in value]


def _pair_of(read: _Reader, value, where, item=str, nullable=False):
    if value is None and nullable:
        return None
    if not (isinstance(value, list) and len(value) == 2):
        raise read.fail(where, "a list of two entries")
    return tuple(value if item is None else [item(v) for v in value])


def _read_output(read: _Reader, data, where) -> tuple[str, list[tuple[int, OutputCompareResult]]]:
    name = read.get(data, "output", f"{where}.output", str, "a string")
    thresholds = []
    for t, entry in enumerate(read.get(data, "thresholds", f"{where}.thresholds", list, "a list")):
        spot = f"{where}.thresholds[{t}]"
        if not isinstance(entry, dict) or entry.get("stat") not in CHECK_ERROR_STATS:
            raise read.fail(f"{spot}.stat", f"one of {', '.join(CHECK_ERROR_STATS)}")
        thresholds.append(
            SimpleThreshold(
                read.get(entry, "stat", f"{spot}.stat", str, "a statistic's name"),
                read.number(read.get(entry, "atol", f"{spot}.atol", (int, float, str), "a number"), f"{spot}.atol"),
                read.number(read.get(entry, "rtol", f"{spot}.rtol", (int, float, str), "a number"), f"{spot}.rtol"),
                exact=read.get(entry, "exact", f"{spot}.exact", (bool,), "true or absent", optional=True) is True,
            )
        )
    indices = [read.integer(v, f"{where}.index") for v in read.get(data, "index", f"{where}.index", list, "a list")]
    n = len(indices)
    col = {
        key: read.column(data, key, where, n)
        for key in (
            "threshold",
            *METRIC_FIELDS,
            "passed",
            "error",
            "mismatch_count",
            "worst_index",
            "num_elements",
            "zero_reference_count",
            "dtypes",
            "shapes",
            "names",
        )
    }
    elements = data.get("worst_element") if isinstance(data, dict) else None  # absent before 1.x
    if elements is None:
        elements = [None] * n
    elif not isinstance(elements, list) or len(elements) != n:
        raise read.fail(f"{where}.worst_element", f"a list of {n} entries (one per iteration)")
    # Comparison times (optional: files written before they were recorded have none).
    times = read.column(data, "time_s", where, n) if data.get("time_s") is not None else [None] * n
    samples = []
    for j, index in enumerate(indices):
        spot = f"{where}[{index}]"
        t = col["threshold"][j]
        if t is not None and (isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < len(thresholds)):
            raise read.fail(f"{spot}.threshold", f"null or an index below {len(thresholds)}")
        passed = col["passed"][j]
        if passed is not None and not isinstance(passed, bool):
            raise read.fail(f"{spot}.passed", "true, false or null")
        error = col["error"][j]
        if error is not None and not isinstance(error, str):
            raise read.fail(f"{spot}.error", "a string or null")
        shapes = col["shapes"][j]
        if shapes is not None:
            shapes = _pair_of(read, shapes, f"{spot}.shapes", None)
            shapes = tuple(tuple(_int_list(read, s, f"{spot}.shapes")) for s in shapes)
        names = _pair_of(read, col["names"][j], f"{spot}.names", None)
        if not all(n is None or isinstance(n, str) for n in names):
            raise read.fail(f"{spot}.names", "two output names or nulls")
        worst = _int_list(read, col["worst_index"][j], f"{spot}.worst_index")
        try:
            element = element_from_json(elements[j])
        except TypeError:
            raise read.fail(f"{spot}.worst_element", "null or the worst element's values and differences") from None
        result = OutputCompareResult(
            thresholds=None if t is None else thresholds[t],
            passed=passed,
            error=error,
            num_elements=read.integer(col["num_elements"][j], f"{spot}.num_elements", optional=True),
            zero_reference_count=read.integer(
                col["zero_reference_count"][j], f"{spot}.zero_reference_count", optional=True
            ),
            mismatch_count=read.integer(col["mismatch_count"][j], f"{spot}.mismatch_count", optional=True),
            worst_index=None if worst is None else tuple(worst),
            **element,
            dtypes=_pair_of(read, col["dtypes"][j], f"{spot}.dtypes", str, nullable=True),
            shapes=shapes,
            output0_name=names[0],
            output1_name=names[1],
            **{metric: read.number(col[metric][j], f"{spot}.{metric}") for metric in METRIC_FIELDS},
            time_s=read.number(times[j], f"{spot}.time_s"),
        )
        if passed is not None and error is None and t is not None:  # the verdict its own numbers give
            stat = thresholds[t].check_error_stat
            if stat == "elemwise" and not thresholds[t].exact:
                contradicts = passed and bool(result.mismatch_count)
            else:
                try:
                    contradicts = thresholds[t].passed(result) != passed
                except (GateError, TypeError, ValueError):  # statistics it cannot re-judge (strings)
                    contradicts = False
            if contradicts:
                raise read.fail(f"{spot}.passed", f"{not passed}, as its statistics give it (the file was edited)")
        samples.append((index, result))
    return name, samples


def read_partial(path, data: dict | None = None) -> ComparedRun:
    """Reads a partial result file back into a ComparedRun (``data``: the file's JSON, if already loaded).

    Raises:
        GateError: a missing or corrupt file, another schema or version, or a malformed field, naming
            the file (and the field).
    """
    source = str(path)
    data = load_json(path, "partial result file") if data is None else data
    read = _Reader(source)
    if data.get("schema") != SCHEMA:
        raise GateError(
            f"{source}: not a partial result file (schema {str(data.get('schema'))[:40]!r}, expected {SCHEMA!r})."
        )
    version = data.get("version")
    if version != VERSION or isinstance(version, bool):
        raise GateError(
            f"{source}: partial result file version {str(version)[:20]!r} is not supported; this accuracy-gate "
            f"reads version {VERSION}."
        )
    shard_data = read.get(data, "shard", "shard", dict, "an object")
    shard = Shard(
        read.integer(shard_data.get("index"), "shard.index"), read.integer(shard_data.get("count"), "shard.count")
    )
    if not 1 <= shard.index <= shard.count:
        raise read.fail("shard", "1 <= index <= count")
    config = read.get(data, "config", "config", dict, "an object")
    settings = read.get(config, "settings", "config.settings", dict, "an object")
    golden = read.get(data, "golden", "golden", dict, "an object")
    golden_fp = {
        "iterations": read.integer(golden.get("iterations"), "golden.iterations"),
        "files_sha256": read.get(golden, "files_sha256", "golden.files_sha256", str, "a string"),
    }
    its = read.get(data, "iterations", "iterations", dict, "an object")
    indices = [read.integer(v, "iterations.index") for v in read.get(its, "index", "iterations.index", list, "a list")]
    if indices != sorted(set(indices)) or any(i >= golden_fp["iterations"] for i in indices):
        raise read.fail("iterations.index", "ascending distinct indices below golden.iterations")
    if any(i % shard.count != shard.index - 1 for i in indices):
        raise read.fail("iterations.index", f"indices of shard {shard} (index % {shard.count} == {shard.index - 1})")
    digests = read.column(its, "golden_sha256", "iterations", len(indices))
    if not all(d is None or isinstance(d, str) for d in digests):
        raise read.fail("iterations.golden_sha256", "a list of strings or nulls")
    where = {}
    for key, value in read.get(data, "where", "where", dict, "an object").items():
        if not key.isdigit() or not isinstance(value, str):
            raise read.fail("where", "an object of iteration index -> string")
        where[int(key)] = value
    stopped = data.get("stopped")
    if stopped is not None:
        if not isinstance(stopped, dict):
            raise read.fail("stopped", "null or an object")
        stopped = {
            "iteration": read.integer(stopped.get("iteration"), "stopped.iteration", optional=True),
            "message": read.get(stopped, "message", "stopped.message", str, "a string"),
            "output": read.get(stopped, "output", "stopped.output", str, "a string", optional=True),
        }
        if stopped["output"] is None:  # files from runs whose stop named no output
            del stopped["output"]
    fail_fast_stop = read.integer(data.get("fail_fast_stop"), "fail_fast_stop", optional=True)
    if fail_fast_stop is not None and (not indices or fail_fast_stop != indices[-1]):
        raise read.fail("fail_fast_stop", "the last index of iterations.index")
    if fail_fast_stop is not None and settings.get("fail_fast") is not True:
        raise read.fail("fail_fast_stop", "absent: config.settings has no fail_fast")
    aggregation = data.get("aggregation")
    if aggregation not in ("per_sample", "average"):
        raise read.fail("aggregation", '"per_sample" or "average"')
    accuracy = AccuracyResult(aggregation=aggregation)
    position = {index: j for j, index in enumerate(indices)}
    for p, pair_data in enumerate(read.get(data, "pairs", "pairs", list, "a list")):
        runners = _pair_of(
            read, read.get(pair_data, "runners", f"pairs[{p}].runners", list, "a list"), f"pairs[{p}].runners"
        )
        iterations = [OrderedDict() for _ in indices]
        for o, output_data in enumerate(read.get(pair_data, "outputs", f"pairs[{p}].outputs", list, "a list")):
            name, samples = _read_output(read, output_data, f"pairs[{p}].outputs[{o}]")
            for index, result in samples:
                if index not in position:
                    raise read.fail(f"pairs[{p}].outputs[{o}].index", "indices listed in iterations.index")
                iterations[position[index]][name] = result
        empty = next((index for index, outputs in zip(indices, iterations) if not outputs), None)
        if empty is not None and not data.get("funcs"):  # zero outputs compared is never a pass (README D7)
            # (with compare_func naming other functions only, their results are under "funcs")
            raise read.fail(f"pairs[{p}].outputs", f"the outputs compared in iteration {empty}, at least one")
        accuracy[runners] = iterations
    facts = read.get(data, "facts", "facts", dict, "an object")
    duration = read.number(data.get("duration_s"), "duration_s") or 0.0
    commit = data.get("commit")
    return ComparedRun(
        model=read.get(data, "model", "model", str, "a string"),
        title=read.get(data, "title", "title", str, "a string", optional=True) or "",
        settings=settings,
        golden=golden_fp,
        shard=shard,
        indices=indices,
        accuracy=accuracy,
        metrics=read_funcs(data.get("funcs"), source, indices),
        golden_sha256=list(digests),
        where=where,
        stopped=stopped,
        fail_fast_stop=fail_fast_stop,
        duration_s=duration if math.isfinite(duration) else 0.0,
        facts={str(k): str(v) for k, v in facts.items()},
        commit=commit if isinstance(commit, str) else None,
        config_path=read.get(config, "path", "config.path", str, "a string", optional=True) or "",
    )
