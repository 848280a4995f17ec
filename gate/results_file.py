"""The results file: a ``GateResult`` as versioned JSON, written by the gate and read back, as
untrusted data, by the ``workflow_run`` commenter (``mode: comment``).

Schema ``accuracy-gate-report`` version 1 (documented in README.md, "Results file")::

    {"schema": "accuracy-gate-report", "version": 1,
     "status": "passed" | "regressed" | "error", "passed": bool, "regressed": bool,
     "message": str, "model": str, "title": str, "iterations": int, "duration_s": float,
     "commit": str | null, "comment_key": str | null,
     "failed_outputs": [str], "failed_total": int, "rows_total": int, "rows_truncated": bool,
     "rows": [{"pair": [str, str], "output": str, "passed": bool,
               "stat": str | null,  # "exact" for an output compared exactly (older files: its configured stat)
               "atol": num | null, "rtol": num | null, "abs_value": num | null, "rel_value": num | null,
               "iterations": int, "failed_iterations": int, "worst_iteration": int | null,
               "worst_index": [int] | null, "mismatch_count": int | null, "num_elements": int | null,
               "zero_reference_count": int | null, "averaged": bool, "error": str | null,
               "dtypes": [str, str] | null,
               # only against a baseline (gate.baseline):
               "baseline_abs_value": num | null, "baseline_rel_value": num | null,
               "within_tolerance": bool | null, "regressed": bool | null, "known_failure": bool,
               "regression": str | null}],
     "facts": {str: str},
     # only when set: "scope": str (shard / merge), "baseline": str, "fail_on": "regression",
     # "nothing_compared": true (accuracy-gate run with one runner: "passed" is then false, exit 0)}

JSON has no NaN or infinity, so a non-finite ``num`` is the string ``"NaN"``, ``"Infinity"`` or
``"-Infinity"``. Unknown keys are ignored when reading (later versions 1.x may add some); another
``version`` is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

from gate.errors import GateError
from gate.paths import read_regular, write_atomic
from gate.results import ERROR, PASSED, REGRESSED, GateResult, OutputVerdict
from gate.strict_json import element_from_json, element_json, json_int, json_number, number_from_json, parse_json

SCHEMA = "accuracy-gate-report"
VERSION = 1

# Limits for reading a file that someone else wrote (a fork's workflow can upload anything).
MAX_FILE_BYTES = 8 * 1024 * 1024
MAX_ROWS = 20000
MAX_NAME = 512
MAX_MESSAGE = 256 * 1024
"""The verdict message names every failed output, so it may be long; the renderer shortens it."""
MAX_ROW_ERROR = 4096
MAX_FACTS = 64
MAX_FACT = 512
MAX_KEY = 200
MAX_INT = 2**63 - 1

_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_STAT = re.compile(r"[A-Za-z0-9_.\- ()]{1,64}")
_DTYPE = re.compile(r"[A-Za-z0-9_.\[\]<>|=]{1,64}")


def _row(row: OutputVerdict) -> dict[str, Any]:
    return {
        "pair": [str(row.pair[0]), str(row.pair[1])],
        "output": str(row.output),
        "passed": bool(row.passed),
        "stat": row.stat,
        **({"quantile": json_number(row.quantile)} if row.quantile is not None else {}),
        "atol": json_number(row.atol),
        "rtol": json_number(row.rtol),
        "abs_value": json_number(row.abs_value),
        "rel_value": json_number(row.rel_value),
        "iterations": int(row.iterations),
        "failed_iterations": int(row.failed_iterations),
        "worst_iteration": json_int(row.worst_iteration),
        "worst_index": None if row.worst_index is None else [int(i) for i in row.worst_index],
        "mismatch_count": json_int(row.mismatch_count),
        "num_elements": json_int(row.num_elements),
        "zero_reference_count": json_int(row.zero_reference_count),
        "averaged": bool(row.averaged),
        "error": row.error,
        "dtypes": None if row.dtypes is None else [str(d) for d in row.dtypes],
        "exact": bool(row.exact),
        "rel_iteration": json_int(row.rel_iteration),
        "worst_element": element_json(row.worst_values, row.worst_absdiff, row.worst_reldiff, row.nan_counts),
        **_baseline_fields(row),
        **_func_fields(row),
    }


def _func_fields(row: OutputVerdict) -> dict[str, Any]:
    """The row's compare-function keys (version 1.x additions, ``gate.compare_funcs``), only where
    they differ from a plain SimpleCompareFunc row."""
    fields: dict[str, Any] = {}
    if row.func != "simple":
        fields["func"], fields["threshold"] = row.func, json_number(row.threshold)
    if not row.verdict:
        fields["verdict"], fields["within"] = False, bool(row.within)
    if row.allowed_failures:
        fields["allowed_failed_iterations"] = int(row.allowed_failures)
    if row.func == "task" and not row.error:
        fields["reference"], fields["criterion"] = json_number(row.reference), row.criterion
        if row.baseline_abs is not None:
            fields["baseline_value"] = json_number(row.baseline_abs)
    return fields


def _baseline_fields(row: OutputVerdict) -> dict[str, Any]:
    """The row's baseline keys (version 1.x additions), only when it was compared with a baseline, so
    that a report without one stays as it was."""
    fields: dict[str, Any] = {}
    if row.baseline_found:
        fields["baseline_abs_value"] = json_number(row.baseline_abs)
        fields["baseline_rel_value"] = json_number(row.baseline_rel)
    if row.regressed is not None:
        fields["within_tolerance"] = row.within_tolerance
        fields["regressed"] = bool(row.regressed)
        fields["known_failure"] = bool(row.known_failure)
        fields["regression"] = row.regression
    return fields


def report_document(result: GateResult, commit: str | None = None, comment_key: str | None = None) -> dict[str, Any]:
    """Return the version-1 document for ``result`` (every row), ready for :func:`dumps`.

    ``commit`` is the commit the results are for; ``comment_key`` the key the gate's PR comment uses,
    so that the ``workflow_run`` commenter updates the same comment.
    """
    return {
        "schema": SCHEMA,
        "version": VERSION,
        "status": result.status,
        "passed": result.status == PASSED and not result.nothing_compared,  # nothing compared: not passed
        "regressed": result.status == REGRESSED,
        "message": result.message,
        "model": result.model,
        "title": result.title,
        "iterations": int(result.iterations),
        "duration_s": json_number(result.duration_s),
        "commit": commit,
        "comment_key": comment_key,
        "failed_outputs": result.failed_outputs,
        "failed_total": len(result.failed_outputs),
        "rows_total": len(result.rows),
        "rows_truncated": False,
        "rows": [_row(row) for row in result.rows],
        "facts": {str(k): str(v) for k, v in result.facts.items()},
        **{key: value for key, value in _scope(result).items() if value},
        **({"nothing_compared": True} if result.nothing_compared else {}),
    }


def _scope(result: GateResult) -> dict[str, Any]:
    return {
        "scope": result.scope,
        "baseline": result.baseline,
        "fail_on": result.fail_on if result.fail_on != "threshold" else None,
    }


def dumps(document: dict[str, Any]) -> str:
    """One line of strict JSON (no NaN, no line breaks), UTF-8 characters kept."""
    return json.dumps(document, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def largest_fitting(low: int, high: int, fits) -> int:
    """The largest n in [low, high] with fits(n), assuming fits is monotone (low is taken when nothing
    larger fits). Used to cut reports to a size budget."""
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def dumps_within(document: dict[str, Any], limit: int) -> str:
    """:func:`dumps` of ``document`` in at most ``limit`` UTF-8 bytes, for step outputs (GitHub caps
    them at 1 MB per job). When the full document is larger, ``rows_truncated`` is set and, in turn,
    only the failed rows are kept, then as many of them as fit; then ``failed_outputs`` is cut to the
    names that fit, then the message (``rows_total`` and ``failed_total`` still count them all).
    """

    def size(doc) -> int:
        return len(dumps(doc).encode("utf-8"))

    if size(document) <= limit:
        return dumps(document)
    doc = {**document, "rows_truncated": True}
    failed = [row for row in document["rows"] if not row["passed"]]
    doc["rows"] = failed[: largest_fitting(0, len(failed), lambda n: size({**doc, "rows": failed[:n]}) <= limit)]
    if size(doc) <= limit:
        return dumps(doc)
    names = document["failed_outputs"]
    doc["failed_outputs"] = names[
        : largest_fitting(0, len(names), lambda n: size({**doc, "failed_outputs": names[:n]}) <= limit)
    ]
    message = document["message"]
    doc["message"] = message[
        : largest_fitting(0, len(message), lambda n: size({**doc, "message": message[:n]}) <= limit)
    ]
    return dumps(doc)


def write_report(result: GateResult, path, commit: str | None = None, comment_key: str | None = None) -> Path:
    """Write the results file (one line of JSON, UTF-8) atomically (``gate.paths.write_atomic``: all
    or nothing, never through a symlink) and return its path; parent folders are created.

    Raises:
        GateError: ``path`` is a symbolic link. OSError: the file cannot be written (an old one stays)."""
    return write_atomic(path, dumps(report_document(result, commit, comment_key)) + "\n", "results file")


def results_digest(result: GateResult) -> str:
    """A sha256 (hex) of what the results say: verdict, message, title, every row and the runtime facts;
    not the duration, commit or run. Equal digests mean the report would show the same results."""
    document = report_document(result)
    for key in ("duration_s", "commit", "comment_key"):
        document.pop(key)
    return hashlib.sha256(dumps(document).encode("utf-8")).hexdigest()


# --- reading a file someone else wrote --------------------------------------------------------------


class _Reader:
    """Type and size checks with one-sentence errors that name the file and the field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, where: str, expected: str) -> GateError:
        return GateError(f"{self.source}: '{where}' must be {expected}; the results file is not a valid report.")

    def text(self, data: dict, key: str, limit: int, where: str, optional: bool = False) -> str | None:
        value = data.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, str) or len(value) > limit:
            raise self.fail(where, f"a string of at most {limit} characters")
        return value

    def integer(self, data: dict, key: str, where: str, optional: bool = False) -> int | None:
        value = data.get(key)
        if value is None and optional:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT:
            raise self.fail(where, "a non-negative integer")
        return value

    def boolean(self, data: dict, key: str, where: str) -> bool:
        value = data.get(key)
        if not isinstance(value, bool):
            raise self.fail(where, "true or false")
        return value

    def number(self, data: dict, key: str, where: str) -> float | None:
        value = data.get(key)
        try:
            return number_from_json(value)
        except TypeError:
            raise self.fail(where, 'a number, "NaN", "Infinity", "-Infinity" or null') from None

    def pattern(self, data: dict, key: str, regex: re.Pattern, where: str, expected: str) -> str | None:
        value = data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not regex.fullmatch(value):
            raise self.fail(where, expected)
        return value

    def row(self, data: object, index: int) -> OutputVerdict:
        where = f"rows[{index}]"
        if not isinstance(data, dict):
            raise self.fail(where, "an object")
        pair = data.get("pair")
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(p, str) and len(p) <= 64 for p in pair)):
            raise self.fail(f"{where}.pair", "two runner names")
        worst_index = data.get("worst_index")
        if worst_index is not None and not (
            isinstance(worst_index, list)
            and len(worst_index) <= 32
            and all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= MAX_INT for i in worst_index)
        ):
            raise self.fail(f"{where}.worst_index", "a list of at most 32 non-negative integers")
        dtypes = data.get("dtypes")
        if dtypes is not None and not (
            isinstance(dtypes, list)
            and len(dtypes) == 2
            and all(isinstance(d, str) and _DTYPE.fullmatch(d) for d in dtypes)
        ):
            raise self.fail(f"{where}.dtypes", "two dtype names")
        row = OutputVerdict(
            pair=(pair[0], pair[1]),
            output=self.text(data, "output", MAX_NAME, f"{where}.output"),
            passed=self.boolean(data, "passed", f"{where}.passed"),
            stat=self.pattern(data, "stat", _STAT, f"{where}.stat", "a statistic's name"),
            quantile=self.number(data, "quantile", f"{where}.quantile"),  # (files before it: None)
            atol=self.number(data, "atol", f"{where}.atol"),
            rtol=self.number(data, "rtol", f"{where}.rtol"),
            abs_value=self.number(data, "abs_value", f"{where}.abs_value"),
            rel_value=self.number(data, "rel_value", f"{where}.rel_value"),
            iterations=self.integer(data, "iterations", f"{where}.iterations"),
            failed_iterations=self.integer(data, "failed_iterations", f"{where}.failed_iterations"),
            worst_iteration=self.integer(data, "worst_iteration", f"{where}.worst_iteration", optional=True),
            worst_index=None if worst_index is None else tuple(worst_index),
            mismatch_count=self.integer(data, "mismatch_count", f"{where}.mismatch_count", optional=True),
            num_elements=self.integer(data, "num_elements", f"{where}.num_elements", optional=True),
            zero_reference_count=self.integer(
                data, "zero_reference_count", f"{where}.zero_reference_count", optional=True
            ),
            averaged=self.boolean(data, "averaged", f"{where}.averaged"),
            error=self.text(data, "error", MAX_ROW_ERROR, f"{where}.error", optional=True),
            dtypes=None if dtypes is None else (dtypes[0], dtypes[1]),
            exact=data.get("exact") is True,
            rel_iteration=self.integer(data, "rel_iteration", f"{where}.rel_iteration", optional=True),
        )
        if row.exact and row.stat != "exact":
            # A file written before "stat": "exact" (then the configured statistic, with "exact": true): the same
            # row as a new file's, so that it serves as a baseline of the same gate.
            row.stat, row.averaged = "exact", False
        try:
            for key, value in element_from_json(data.get("worst_element"), MAX_ROW_ERROR).items():
                setattr(row, key, value)
        except TypeError:
            raise self.fail(f"{where}.worst_element", "null or the worst element's values and differences") from None
        if "baseline_abs_value" in data or "baseline_rel_value" in data:
            row.baseline_found = True
            row.baseline_abs = self.number(data, "baseline_abs_value", f"{where}.baseline_abs_value")
            row.baseline_rel = self.number(data, "baseline_rel_value", f"{where}.baseline_rel_value")
        if "func" in data:
            row.func = self.pattern(data, "func", _STAT, f"{where}.func", "a compare function's name")
            row.threshold = self.number(data, "threshold", f"{where}.threshold")
        if "reference" in data:
            row.reference = self.number(data, "reference", f"{where}.reference")
            row.criterion = self.text(data, "criterion", MAX_ROW_ERROR, f"{where}.criterion", optional=True)
            if "baseline_value" in data:
                row.baseline_abs = self.number(data, "baseline_value", f"{where}.baseline_value")
        if data.get("verdict") is False:
            row.verdict, row.within = False, self.boolean(data, "within", f"{where}.within")
        if "allowed_failed_iterations" in data:
            row.allowed_failures = self.integer(data, "allowed_failed_iterations", f"{where}.allowed_failed_iterations")
        if data.get("regressed") is not None:
            row.regressed = self.boolean(data, "regressed", f"{where}.regressed")
            row.known_failure = bool(data.get("known_failure") is True)
            within = data.get("within_tolerance")
            row.within_tolerance = within if isinstance(within, bool) else None
            row.regression = self.text(data, "regression", MAX_ROW_ERROR, f"{where}.regression", optional=True)
        return row


class UntrustedReport:
    """A results file read back with :func:`read_untrusted_report`: ``result`` (a ``GateResult`` whose
    every string is bounded in length), the ``commit`` and ``comment_key`` the file claims (both may be
    None), and ``source`` (the file's path, for messages)."""

    def __init__(self, result: GateResult, commit: str | None, comment_key: str | None, source: str) -> None:
        self.result = result
        self.commit = commit
        self.comment_key = comment_key
        self.source = source


def read_untrusted_report(path, max_bytes: int | None = None) -> UntrustedReport:
    """Read a results file that another workflow run wrote, treating it as untrusted data.

    It is read as at most ``max_bytes`` (default :data:`MAX_FILE_BYTES`) bytes of strict UTF-8 JSON
    (no NaN literals), must be a version-1 ``accuracy-gate-report`` object, and every field is
    type-checked and bounded: at most :data:`MAX_ROWS` rows, names of :data:`MAX_NAME` characters,
    messages of :data:`MAX_MESSAGE`, :data:`MAX_FACTS` runtime facts. Rendering it still escapes
    everything (``gate.report.markdown``).

    Raises:
        GateError: a missing, oversized or malformed file, naming the file and the offending field.
    """
    source = str(path)
    max_bytes = MAX_FILE_BYTES if max_bytes is None else max_bytes
    try:
        raw = read_regular(path, "the results file", max_bytes)
    except OSError as err:
        raise GateError(f"{source}: cannot read the results file ({err.strerror or err}).") from err
    if len(raw) > max_bytes:
        raise GateError(f"{source}: the results file is larger than {max_bytes} bytes; refusing to read it.")
    try:
        data = parse_json(raw.decode("utf-8"), source, "results file")
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise GateError(f"{source}: the results file is not valid UTF-8 JSON ({type(err).__name__}).") from err
    read = _Reader(source)
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise read.fail("schema", f'"{SCHEMA}"')
    if data.get("version") != VERSION or isinstance(data.get("version"), bool):
        raise GateError(
            f"{source}: results file version {str(data.get('version'))[:20]!r} is not supported; expected {VERSION}."
        )
    status = data.get("status")
    if status not in (PASSED, REGRESSED, ERROR):
        raise read.fail("status", '"passed", "regressed" or "error"')
    rows = data.get("rows")
    if not isinstance(rows, list) or len(rows) > MAX_ROWS:
        raise read.fail("rows", f"a list of at most {MAX_ROWS} rows")
    facts = data.get("facts", {})
    if not isinstance(facts, dict) or len(facts) > MAX_FACTS:
        raise read.fail("facts", f"an object of at most {MAX_FACTS} entries")
    for key, value in facts.items():
        if len(key) > MAX_NAME or not isinstance(value, str) or len(value) > MAX_FACT:
            raise read.fail("facts", f"an object of strings of at most {MAX_FACT} characters")
    duration = read.number(data, "duration_s", "duration_s") or 0.0
    result = GateResult(
        model=read.text(data, "model", MAX_NAME, "model"),
        status=status,
        message=read.text(data, "message", MAX_MESSAGE, "message"),
        rows=[read.row(row, i) for i, row in enumerate(rows)],
        iterations=read.integer(data, "iterations", "iterations"),
        duration_s=duration if math.isfinite(duration) else 0.0,
        facts=dict(facts),
        title=read.text(data, "title", MAX_NAME, "title", optional=True) or "",
        scope=read.text(data, "scope", MAX_NAME, "scope", optional=True) or "",
        baseline=read.text(data, "baseline", MAX_NAME, "baseline", optional=True),
        fail_on="regression" if data.get("fail_on") == "regression" else "threshold",
    )
    commit = data.get("commit")
    commit = commit if isinstance(commit, str) and _SHA.fullmatch(commit) else None
    comment_key = read.text(data, "comment_key", MAX_KEY, "comment_key", optional=True)
    return UntrustedReport(result, commit, comment_key or None, source)
