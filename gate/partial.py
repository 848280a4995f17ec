"""Shards and the partial result file: what one ``check`` compared, kept exactly enough to rebuild
its ``AccuracyResult`` and so the verdict of any union of shards (``gate.merge``).

A shard ``i/n`` (1-based) takes the iterations whose index ``k`` has ``k % n == i - 1``. Adding
iterations at the end of the golden set never moves an existing iteration to another shard (contiguous
blocks of ``ceil(total / n)`` would move almost all of them), and the shards stay balanced to within
one iteration.

The partial result file, schema ``accuracy-gate-partial`` version 1 (documented in README.md,
"Partial result file"), is strict JSON (NaN and infinities as the strings ``"NaN"``, ``"Infinity"``,
``"-Infinity"``; every other float as Python's shortest repr, which reads back to the same float)::

    {"schema": "accuracy-gate-partial", "version": 1,
     "shard": {"index": int, "count": int},
     "model": str, "title": str, "commit": str | null,
     "config": {"sha256": str, "settings": {...}},            # what decides the numbers
     "golden": {"iterations": int, "files_sha256": str, "content_sha256": str | null},
     "iterations": {"index": [int], "golden_sha256": [str | null]},
     "where": {"<index>": str},                               # files of iterations named in errors
     "stopped": null | {"iteration": int | null, "message": str},
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
                             "names": [[str | null, str | null]]}]}]}

Per output the per-iteration values are columns (one list per field, aligned with ``index``), which
keeps a file of tens of thousands of iterations compact.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gate.comparator.compare import CHECK_ERROR_STATS, METRIC_FIELDS, OutputCompareResult, SimpleThreshold
from gate.comparator.struct import AccuracyResult
from gate.errors import GateError
from gate.results import (
    ERROR,
    GateResult,
    element_from_json,
    element_json,
    finish_rows,
    gate_result,
    json_int,
    json_number,
    number_from_json,
    verdicts,
)
from gate.structured import all_leaves, is_structured, skeleton

SCHEMA = "accuracy-gate-partial"
VERSION = 1


# --- shards ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based, as written ``"2/3"``)."""

    index: int = 1
    count: int = 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def indices(self, total: int) -> range:
        """The golden-set indices of this shard, ascending: ``k`` with ``k % count == index - 1``."""
        return range(self.index - 1, total, self.count)

    def check_total(self, total: int, where) -> None:
        """Raises GateError when the golden set has fewer iterations than shards (a shard would be
        empty), naming ``where`` (the golden folder)."""
        if self.count > total:
            raise GateError(
                f"{where}: shard {self} splits {total} iterations into {self.count} shards; use at most {total} shards."
            )


def parse_shard(text: str, setting: str = "--shard") -> Shard:
    """``"i/n"`` -> Shard(i, n), with 1 <= i <= n.

    Raises:
        GateError: anything else, naming the setting.
    """
    raw = str(text).strip()
    index, sep, count = raw.partition("/")
    if not (sep and index.strip().isdigit() and count.strip().isdigit()):
        raise GateError(f"{setting} must look like 1/3 (shard i of n, 1-based), got {text!r}.")
    shard = Shard(int(index), int(count))
    if shard.count < 1:
        raise GateError(f"{setting} {raw}: the number of shards n must be at least 1 (shard i of n).")
    if not 1 <= shard.index <= shard.count:
        raise GateError(f"{setting} {raw}: the shard must be 1 to {shard.count} of {shard.count}.")
    return shard


class ShardView:
    """The iterations of one shard of a stored tensor set (``gate.data.TensorSet``): ``view[j]`` is
    iteration ``indices[j]``; ``location`` and every other attribute are the wrapped set's."""

    def __init__(self, stored, indices):
        self.stored = stored
        self.indices = list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int):
        if position < 0 or position >= len(self.indices):
            raise IndexError(position)
        return self.stored[self.indices[position]]

    def __iter__(self):
        for position in range(len(self)):
            yield self[position]

    def location(self, position: int):
        return self.stored.location(self.indices[position])

    def __getattr__(self, name):
        return getattr(self.stored, name)


class DigestingView:
    """Wraps a tensor set; every iteration read through it gets a content digest
    (:func:`iteration_sha256`) in ``digests[position]``, computed as it streams by."""

    def __init__(self, stored):
        self.stored = stored
        self.digests: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.stored)

    def __getitem__(self, position: int):
        tensors = self.stored[position]
        self.digests[position] = iteration_sha256(tensors)
        return tensors

    def __iter__(self):
        for position in range(len(self)):
            yield self[position]

    def __getattr__(self, name):
        return getattr(self.stored, name)


def iteration_sha256(tensors) -> str:
    """sha256 (hex) of one iteration's tensors: each name, dtype, shape and the values' bytes, in order."""
    digest = hashlib.sha256()
    structure = {name: skeleton(value) for name, value in tensors.items() if is_structured(value)}
    if structure:  # a sequence, map or optional: its shape of items and keys, then its tensors
        digest.update(json.dumps(structure, sort_keys=True).encode("utf-8"))
    for name, array in all_leaves(tensors):
        digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        if array.dtype.hasobject:  # strings: their text, not pointers
            digest.update(repr(array.tolist()).encode("utf-8"))
        else:
            digest.update(np.ascontiguousarray(array).view(np.uint8).reshape(-1).data)
    return digest.hexdigest()


# --- fingerprints ----------------------------------------------------------------------------------


def _canonical(data) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _tolerance(value):
    if isinstance(value, dict):
        return {str(k): float(v) for k, v in value.items()}
    return float(value)


def config_settings(cfg, model_sha256: str) -> dict:
    """Every setting of ``cfg`` (a ``gate.config.GateConfig``) that can change a number or a verdict:
    the model (file name and sha256), runners, ONNX Runtime and TensorRT settings, tolerances,
    statistics, check_average, infinities_compare_equal and validate. Not paths, the JUnit path, the
    title or the engine cache folder."""
    trt = {k: v for k, v in sorted(cfg.trt.items()) if k not in ("cache_dir", "engine")}
    engine = cfg.trt.get("engine")
    if engine:
        trt["engine_sha256"] = _file_sha256(Path(engine))
    stat = cfg.check_error_stat
    return {
        "model": cfg.model.name,
        "model_sha256": model_sha256,
        "runners": list(cfg.runners),
        "execution_providers": list(cfg.execution_providers),
        "graph_optimization_level": cfg.graph_optimization_level,
        "atol": _tolerance(cfg.atol),
        "rtol": _tolerance(cfg.rtol),
        "check_error_stat": dict(stat) if isinstance(stat, dict) else stat,
        "check_average": bool(cfg.check_average),
        "infinities_compare_equal": bool(cfg.infinities_compare_equal),
        **({"nan_compare_equal": True} if getattr(cfg, "nan_compare_equal", False) else {}),
        "validate": bool(cfg.validate),
        "trt": json.loads(_canonical(trt)),
    }


def settings_sha256(settings: dict) -> str:
    return hashlib.sha256(_canonical(settings).encode("utf-8")).hexdigest()


def _file_sha256(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return digest.hexdigest()
    except OSError:
        return None


def golden_fingerprint(golden) -> dict:
    """``{"iterations": n, "files_sha256": hex}`` of a golden tensor set: the count and a sha256 over
    the name and size of every file that holds an iteration (a model-zoo folder's files, an npz or
    JSON file), in iteration order. Cheap (no file is read), so every shard computes it for the whole
    set; contents are hashed per iteration while streaming (:class:`DigestingView`)."""
    digest = hashlib.sha256()
    seen = set()
    for index in range(len(golden)):
        location = Path(golden.location(index))
        if location in seen:  # one Polygraphy JSON file holds every iteration
            continue
        seen.add(location)
        if location.is_dir():
            files = sorted(p for p in location.rglob("*") if p.is_file())
            entries = [(f"{location.name}/{p.relative_to(location).as_posix()}", p.stat().st_size) for p in files]
        else:
            entries = [(location.name, location.stat().st_size if location.exists() else -1)]
        for name, size in entries:
            digest.update(f"{index}\0{name}\0{size}\n".encode())
    return {"iterations": len(golden), "files_sha256": digest.hexdigest()}


# --- what a check compared -------------------------------------------------------------------------


@dataclass
class ComparedRun:
    """What one ``check`` (or a merge of shards) compared: the comparator's ``accuracy`` with its
    iterations in ascending golden-set order, ``indices[j]`` being the golden-set index of position
    ``j``; the fingerprints of the config and the golden set; and what the verdict needs besides."""

    model: str
    title: str
    settings: dict
    golden: dict
    shard: Shard
    indices: list[int]
    accuracy: AccuracyResult
    golden_sha256: list = field(default_factory=list)
    where: dict = field(default_factory=dict)
    stopped: dict | None = None
    duration_s: float = 0.0
    facts: dict = field(default_factory=dict)
    commit: str | None = None
    scope: str = ""

    @property
    def total(self) -> int:
        return int(self.golden["iterations"])

    @property
    def config_sha256(self) -> str:
        return settings_sha256(self.settings)

    @property
    def complete(self) -> bool:
        """Every iteration of the shard was compared."""
        return self.stopped is None and self.indices == list(self.shard.indices(self.total))

    def content_sha256(self) -> str | None:
        """sha256 over the per-iteration golden digests of a complete 1/1 run (an unsharded check,
        or a merge of every shard): equal for the same golden contents however the run was split."""
        if self.shard.count != 1 or not self.complete or None in self.golden_sha256:
            return None
        return hashlib.sha256("\n".join(self.golden_sha256).encode()).hexdigest()


def result_of(run: ComparedRun, where=None) -> GateResult:
    """The verdict and report rows of ``run``: ``gate.results.verdicts`` over its AccuracyResult, the
    gate's own row checks, and the verdict; ``check`` and ``merge`` both go through here, so the same
    comparisons give the same numbers, messages and exit code. ``where(index) -> str | None`` names
    the files of an iteration for error messages (default: those recorded in ``run.where``).

    Raises:
        GateError: ``check_average`` over an output that could not be compared.
    """
    rows = verdicts(run.accuracy, run.indices)
    finish_rows(rows, where or run.where.get)
    result = gate_result(run.model, run.title, rows, len(run.indices), run.duration_s, dict(run.facts))
    if run.stopped is not None:
        result.status = ERROR
        result.stopped_at = run.stopped.get("iteration")
        result.message = run.stopped["message"]
    result.scope = run.scope
    result.run = run
    return result


# --- the file --------------------------------------------------------------------------------------


def _output_columns(name: str, samples) -> dict:
    """The columns of one output: ``samples`` is ``[(golden index, OutputCompareResult)]``."""
    thresholds, table = [], {}
    column: dict[str, list] = {key: [] for key in ("index", "threshold", *METRIC_FIELDS)}
    for key in ("passed", "error", "mismatch_count", "worst_index", "num_elements", "zero_reference_count"):
        column[key] = []
    for key in ("dtypes", "shapes", "names", "worst_element"):
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
        "config": {"sha256": run.config_sha256, "settings": run.settings},
        "golden": {
            "iterations": run.total,
            "files_sha256": run.golden["files_sha256"],
            "content_sha256": run.content_sha256(),
        },
        "iterations": {"index": list(run.indices), "golden_sha256": list(run.golden_sha256)},
        "where": {str(k): v for k, v in sorted(run.where.items())},
        "stopped": run.stopped,
        "aggregation": run.accuracy.aggregation,
        "duration_s": json_number(run.duration_s),
        "facts": {str(k): str(v) for k, v in run.facts.items()},
        "pairs": pairs,
    }


def write_partial(run: ComparedRun, path) -> Path:
    """Writes the partial result file (UTF-8 JSON, one line); parent folders are created.

    Raises:
        GateError: the file cannot be written, naming it.
    """
    path = Path(path)
    text = json.dumps(partial_document(run), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
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
        )
        samples.append((index, result))
    return name, samples


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def load_json(path, what: str) -> dict:
    """A JSON object from ``path``; a missing, unreadable or corrupt file is a one-line GateError."""
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as err:
        raise GateError(f"{source}: cannot read the {what} ({err.strerror or err}).") from err
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        detail = (
            f"line {err.lineno}, column {err.colno}" if isinstance(err, json.JSONDecodeError) else type(err).__name__
        )
        raise GateError(f"{source}: the {what} is not valid JSON ({detail}); it is corrupt or truncated.") from err
    if not isinstance(data, dict):
        raise GateError(f"{source}: the {what} is not a JSON object.")
    return data


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
        }
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
        golden_sha256=list(digests),
        where=where,
        stopped=stopped,
        duration_s=duration if math.isfinite(duration) else 0.0,
        facts={str(k): str(v) for k, v in facts.items()},
        commit=commit if isinstance(commit, str) else None,
    )


def default_partial_name(shard: Shard) -> str:
    """``accuracy-gate-partial-<i>-of-<n>.json``: distinct per matrix leg, so artifacts do not clash."""
    return f"accuracy-gate-partial-{shard.index}-of-{shard.count}.json"


def env_commit(environ=os.environ) -> str | None:
    """The commit a run is for, as GitHub Actions gives it (``GITHUB_SHA``); None elsewhere."""
    sha = environ.get("GITHUB_SHA", "")
    return sha if len(sha) in (40, 64) and all(c in "0123456789abcdef" for c in sha) else None
