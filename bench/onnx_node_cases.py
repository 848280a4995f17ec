"""ONNX's backend node tests through ``accuracy-gate check``: case | verdict | why.

Each case of ``onnx/backend/test/data/node/<case>/`` (``model.onnx`` and ``test_data_set_<N>/``
with ``input_<K>.pb`` / ``output_<K>.pb``, TensorProto, SequenceProto or OptionalProto as the model
declares) is copied to a scratch folder in the model-zoo layout with a generated ``gate.toml`` and
checked by the gate's CLI entry point (in process): PASS (exit 0), FAIL (exit 1), ERROR (exit 2) or
CRASH (an exception escaped: a traceback, never acceptable). The ``why`` column puts the gate's own
message beside ONNX's verdict on the same outputs: ``onnx.backend.test.runner.Runner`` loads the
files and compares onnxruntime's outputs as ``onnx/backend/test`` does (``assert_similar_outputs``:
shapes, dtypes, ``numpy.testing.assert_allclose`` with NaN equal to NaN, strings exactly), so a
verdict that disagrees with ONNX's is marked ``DISAGREES``.

Tolerances: ONNX's node tests' own (``onnx.backend.test.loader``: rtol 1e-3, atol 1e-7; no case
here has a data.json that changes them), as ``[compare] atol/rtol`` of gate.toml.

Data: ``onnx==1.22.0`` ships the node tests (later wheels do not), e.g.::

    python -m pip download onnx==1.22.0 --no-deps -d /tmp/onnx-whl
    unzip -q /tmp/onnx-whl/onnx-1.22.0-*.whl 'onnx/backend/test/data/node/*' -d /tmp/onnx-1.22
    python bench/onnx_node_cases.py --node-dir /tmp/onnx-1.22/onnx/backend/test/data/node --out table.md

Without ``--cases``: every case matching the issue-12 patterns (``ISSUE_PATTERNS``) plus ``--others``
(default 60) further cases spread evenly over the rest, in name order.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import io
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

ISSUE_PATTERNS = (
    "*sequence*",
    "*optional*",
    "*_opt",
    "*string*",
    "*cast*",
    "*top_k*",
    "*unique*",
    "*isnan*",
    "*isinf*",
    "*ceil*",
    "*empty*",
)
RTOL, ATOL = 1e-3, 1e-7  # onnx.backend.test.loader's defaults


@dataclass
class CaseResult:
    case: str
    verdict: str  # PASS / FAIL / ERROR / CRASH
    gate: str  # the gate's message, one line
    onnx: str  # ONNX's own verdict on onnxruntime's outputs, in words
    agrees: bool
    seconds: float

    @property
    def why(self) -> str:
        mark = "" if self.agrees else "**DISAGREES with ONNX's criterion**: "
        return f"{mark}{self.onnx}; gate: {self.gate}"


def find_node_dir(given: str | None) -> Path:
    candidates = [given, os.environ.get("ONNX_NODE_DIR")]
    try:
        import onnx

        candidates.append(str(Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"))
    except ImportError:  # pragma: no cover
        pass
    for candidate in candidates:
        if candidate and (Path(candidate) / "test_abs" / "model.onnx").is_file():
            return Path(candidate)
    raise SystemExit(
        "onnx_node_cases: no ONNX node tests found; pass --node-dir (onnx==1.22.0 ships them under "
        "onnx/backend/test/data/node, see this script's docstring) or set ONNX_NODE_DIR."
    )


def select_cases(node_dir: Path, patterns=ISSUE_PATTERNS, others: int = 60) -> list[str]:
    names = sorted(p.name for p in node_dir.iterdir() if (p / "model.onnx").is_file())
    chosen = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
    rest = [n for n in names if n not in chosen]
    if others and rest:
        step = len(rest) / min(others, len(rest))
        chosen += [rest[int(i * step)] for i in range(min(others, len(rest)))]
    return chosen


def gate_case(case_dir: Path, work: Path, nan_compare_equal: bool) -> Path:
    """The case in the model-zoo layout beside a generated gate.toml; returns the gate.toml."""
    (work / "data").mkdir(parents=True)
    shutil.copyfile(case_dir / "model.onnx", work / "model.onnx")
    for data_set in sorted(case_dir.glob("test_data_set_*")):
        shutil.copytree(data_set, work / "data" / data_set.name)
    extra = "nan_compare_equal = true\n" if nan_compare_equal else ""
    config = work / "gate.toml"
    config.write_text(
        f'model = "model.onnx"\ninputs = "data"\ngolden = "data"\n\n[compare]\natol = {ATOL}\nrtol = {RTOL}\n{extra}'
    )
    return config


def _supports_nan_compare_equal() -> bool:
    from gate.config import _SCHEMA

    return "nan_compare_equal" in _SCHEMA.get("compare", {})


def run_gate(config: Path) -> tuple[str, str]:
    """``accuracy-gate check`` on ``config`` in process; returns (verdict, one-line message)."""
    from gate.cli import main

    out, err = io.StringIO(), io.StringIO()
    report = config.parent / "report.json"
    argv = ["check", str(config), "--junit", str(config.parent / "junit.xml"), "--report", str(report)]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except BaseException as exc:  # noqa: BLE001 - a crash is what this harness looks for
        return "CRASH", f"{type(exc).__name__}: {exc}"
    if "Traceback" in out.getvalue() + err.getvalue():
        return "CRASH", "a traceback was printed"
    verdict = {0: "PASS", 1: "FAIL", 2: "ERROR"}.get(code, f"EXIT {code}")
    message = _gate_message(report, err.getvalue()).replace(f"{config.parent}{os.sep}", "")
    return verdict, message.removeprefix("stopped after 0 of 1 iterations: ")


def _gate_message(report: Path, stderr: str) -> str:
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError):
        data = None
    if data is None:
        return _short(stderr.strip().splitlines()[-1] if stderr.strip() else "no report")
    rows = data.get("rows", [])
    bad = [r for r in rows if r.get("error") or not r.get("passed")]
    if data["status"] == "passed":
        return f"{len(rows)} of {len(rows)} outputs within tolerance"
    if not bad:
        return _short(data["message"])
    row = bad[0]
    if row.get("error"):
        text = f"'{row['output']}' {row['error']}"
    else:
        text = (
            f"'{row['output']}' {row['stat']} abs error {row['abs_value']}, rel error {row['rel_value']}"
            f" at element {row['worst_index']}"
        )
    more = f" (+{len(bad) - 1} more)" if len(bad) > 1 else ""
    return _short(text.split(" at iteration ")[0] + more)


def _short(text: str, limit: int = 220) -> str:
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def onnx_verdict(case_dir: Path) -> tuple[bool | None, bool, str]:
    """ONNX's own test of onnxruntime's outputs (``onnx.backend.test.runner.Runner``): (True: pass,
    False: fail, None: onnxruntime cannot run it), whether some float output holds NaN on both sides
    at the same places, and the verdict in words."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx.backend.test.runner import Runner

    model = onnx.load(str(case_dir / "model.onnx"))
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    try:
        ort.set_default_logger_severity(4)
        session = ort.InferenceSession(str(case_dir / "model.onnx"), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - onnxruntime's own error types
        return None, False, "onnxruntime cannot load it: " + _ort_reason(exc)
    verdicts, nan, notes, how = [], False, set(), ""
    for data_set in sorted(case_dir.glob("test_data_set_*")):
        feeds, refs = {}, []
        for k, value in enumerate(graph_inputs):
            path = data_set / f"input_{k}.pb"
            if path.exists():
                loaded = []
                Runner._load_proto(None, str(path), loaded, value.type)  # an instance method that needs no instance
                feeds[value.name] = loaded[0]
        for k, value in enumerate(model.graph.output):
            Runner._load_proto(None, str(data_set / f"output_{k}.pb"), refs, value.type)
        ml_inputs = sorted(
            {
                onnx.helper.tensor_dtype_to_string(v.type.tensor_type.elem_type).split(".")[-1]
                for v in graph_inputs
                if _is_ml(feeds.get(v.name), np)
            }
        )
        try:
            if ml_inputs or any(_is_ml(r, np) for r in refs):
                # run() takes and returns no ml_dtypes arrays: go through OrtValues and raw buffers.
                outputs, how = _run_raw(session, feeds, model, refs, ort, np), "read through OrtValues; "
                if ml_inputs:
                    how = f"fed {'/'.join(ml_inputs)} inputs {_FED}; "
                    notes.add("ml_inputs")
            else:
                outputs, how = session.run(None, feeds), ""
        except Exception as exc:  # noqa: BLE001
            return None, False, "onnxruntime cannot run it: " + _ort_reason(exc)
        nan = nan or _nan_on_both_sides(refs, outputs, np)
        try:
            Runner.assert_similar_outputs(refs, outputs, rtol=RTOL, atol=ATOL)
        except (TypeError, AttributeError, IndexError, ValueError) as exc:  # e.g. None, or a shorter sequence
            verdicts.append((False, f"ONNX's comparison cannot take these outputs ({type(exc).__name__}: {exc})"))
            continue
        except AssertionError as exc:
            verdicts.append((False, how + "ONNX's criterion fails too: " + _assert_reason(exc)))
            continue
        verdicts.append((True, ""))
    failed = [v for v in verdicts if not v[0]]
    if failed:
        return False, nan, failed[0][1]
    if "ml_inputs" in notes:
        return True, nan, how + "onnxruntime then matches ONNX's reference outputs"
    if nan:
        return (
            True,
            nan,
            how + "NaN on both sides at the same places, all else within ONNX's tolerance (NaN equals NaN)",
        )
    return True, nan, how + "onnxruntime matches ONNX's reference outputs"


_FED = "as OrtValues (the gate feeds numpy arrays)"
_PACKED_BITS = {"INT4": 4, "UINT4": 4, "FLOAT4E2M1": 4, "INT2": 2, "UINT2": 2}


def _is_ml(value, np) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.type.__module__.startswith("ml_dtypes")


def _run_raw(session, feeds, model, refs, ort, np) -> list:
    """onnxruntime's outputs through OrtValues, for what ``run()`` cannot take or return: an
    ml_dtypes input goes in as its bit patterns with its ONNX type (2/4-bit types packed into an
    OrtValue's buffer), an output onnxruntime has no numpy type for is read from its CPU buffer as
    the reference's dtype (2/4-bit types unpacked low bits first, ONNX's packing), widened to
    float32 with the reference so ONNX's criterion can compare them."""
    import ctypes

    types = {v.name: v.type.tensor_type.elem_type for v in model.graph.input}
    values = {}
    for name, value in feeds.items():
        if _is_ml(value, np):
            kind = onnx_type_name(types[name])
            if kind in _PACKED_BITS:  # ONNX packs 8 // bits elements per byte, the first in the low bits
                bits = _PACKED_BITS[kind]
                codes = [int(c) & ((1 << bits) - 1) for c in value.reshape(-1).view(np.uint8)]
                codes += [0] * (-len(codes) % (8 // bits))
                packed = bytes(
                    sum(code << (bits * j) for j, code in enumerate(codes[i : i + 8 // bits]))
                    for i in range(0, len(codes), 8 // bits)
                )
                ort_value = ort.OrtValue.ortvalue_from_shape_and_type(list(value.shape), types[name], "cpu", 0)
                assert ort_value.tensor_size_in_bytes() == len(packed)
                ctypes.memmove(ort_value.data_ptr(), packed, len(packed))
                values[name] = ort_value
                continue
            bits = value.view(np.uint8 if value.dtype.itemsize == 1 else np.uint16)
            values[name] = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, types[name])
        else:
            values[name] = ort.OrtValue.ortvalue_from_numpy(value)
    outputs = []
    for value, ref, declared in zip(session.run_with_ort_values(None, values), refs, model.graph.output):
        kind = onnx_type_name(declared.type.tensor_type.elem_type)
        if not _is_ml(ref, np):
            outputs.append(value.numpy())
            continue
        raw = np.frombuffer(ctypes.string_at(value.data_ptr(), value.tensor_size_in_bytes()), np.uint8)
        if kind in _PACKED_BITS:
            bits = _PACKED_BITS[kind]
            per_byte = 8 // bits
            codes = np.stack([(raw >> (bits * i)) & ((1 << bits) - 1) for i in range(per_byte)], -1).reshape(-1)
            array = codes[: ref.size].astype(np.uint8).view(ref.dtype) if ref.dtype.itemsize == 1 else None
            if kind.startswith("INT"):  # sign-extend the two's-complement codes
                array = (codes[: ref.size].astype(np.int8) ^ (1 << (bits - 1))) - (1 << (bits - 1))
            elif kind.startswith("UINT"):
                array = codes[: ref.size]
            out = np.asarray(array).reshape(ref.shape)
        else:
            out = raw.view(ref.dtype).reshape(value.shape())
        outputs.append(out.astype(np.float32))
    for index, ref in enumerate(refs):
        if _is_ml(ref, np):
            refs[index] = ref.astype(np.float32)
    return outputs


def onnx_type_name(elem_type: int) -> str:
    import onnx

    return onnx.helper.tensor_dtype_to_string(elem_type).split(".")[-1]


def _nan_on_both_sides(refs, outputs, np) -> bool:
    for ref, out in zip(refs, outputs):
        if isinstance(ref, np.ndarray) and ref.dtype.kind == "f" and np.isnan(ref).any():
            out = np.asarray(out)
            if out.shape == ref.shape and np.array_equal(np.isnan(out), np.isnan(ref)):
                return True
    return False


def _ort_reason(exc) -> str:
    text = " ".join(str(exc).split())
    for marker in ("NOT_IMPLEMENTED : ", "INVALID_GRAPH : ", "FAIL : ", "INVALID_ARGUMENT : "):
        if marker in text:
            text = text.split(marker, 1)[1]
            break
    return _short(text, 160)


def _assert_reason(exc) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    keep = [
        line for line in lines if line.startswith(("Mismatched", "Max absolute", "Max relative", "Output", "x:", "y:"))
    ]
    return _short("; ".join(keep or lines[:2]), 200)


def agreement(verdict: str, onnx_ok: bool | None, nan_compare_equal: bool, nan: bool) -> bool:
    """Whether the gate's verdict is the one ONNX's criterion implies: PASS where ONNX passes, FAIL
    (or, for a structural difference, ERROR) where it fails, ERROR where onnxruntime cannot run the
    case. Without nan_compare_equal, NaN on both sides is a FAIL by design (Polygraphy's default)."""
    if verdict == "CRASH":
        return False
    if onnx_ok is None:
        return verdict == "ERROR"
    if onnx_ok and nan and not nan_compare_equal:
        return verdict == "FAIL"  # NaN never equals NaN without nan_compare_equal (Polygraphy's default)
    if onnx_ok:
        return verdict == "PASS"
    return verdict in ("FAIL", "ERROR")


def run_cases(node_dir: Path, cases, nan_compare_equal=None) -> list[CaseResult]:
    if nan_compare_equal is None:
        nan_compare_equal = _supports_nan_compare_equal()
    results = []
    with tempfile.TemporaryDirectory(prefix="onnx-node-cases-") as scratch:
        for case in cases:
            start = time.perf_counter()
            config = gate_case(node_dir / case, Path(scratch) / case, nan_compare_equal)
            verdict, message = run_gate(config)
            onnx_ok, nan, onnx_text = onnx_verdict(node_dir / case)
            if onnx_ok and nan and not nan_compare_equal and verdict == "FAIL":
                onnx_text += "; the gate fails NaN against NaN without nan_compare_equal, as Polygraphy does"
            gate_cannot_feed = onnx_ok and _FED in onnx_text and verdict == "ERROR"
            if gate_cannot_feed:
                onnx_text += "; the gate could not evaluate it: onnxruntime's run() refuses such numpy inputs"
            results.append(
                CaseResult(
                    case,
                    verdict,
                    message,
                    onnx_text,
                    gate_cannot_feed or agreement(verdict, onnx_ok, nan_compare_equal, nan),
                    time.perf_counter() - start,
                )
            )
    return results


_CATEGORIES = (
    (
        r"cannot load it: (?:Could not find an implementation|Failed to find kernel) for (\w+\(\d+\))",
        "onnxruntime has no CPU kernel for {0} with these types",
    ),
    (r"cannot load it: ", "onnxruntime cannot load the model (other reason)"),
    (r"No corresponding Numpy type for Tensor Type\. (\w+)", "onnxruntime's Python API cannot return {0} outputs"),
    (r"its Python API refuses (\S+) inputs", "onnxruntime's Python API cannot take {0} inputs"),
    (
        r"fed (\S+) inputs as OrtValues.*could not evaluate",
        "onnxruntime's run() refuses {0} numpy inputs (ONNX's reference passes when fed as OrtValues)",
    ),
    (
        r"^read through OrtValues; onnxruntime matches",
        "onnxruntime matches the reference (outputs read from its buffers)",
    ),
    (r"cannot run it: ", "onnxruntime fails at inference (other reason)"),
    (r"^NaN on both sides", "NaN on both sides at the same places, all else within tolerance"),
    (
        r"ONNX's criterion fails too: Items are not equal:; ACTUAL: dtype\('(\w+)'\)",
        "onnxruntime returns {0} where the reference's dtype differs (e.g. float8 as raw uint8 bits)",
    ),
    (r"ONNX's criterion fails too", "onnxruntime's values differ from the reference beyond ONNX's tolerance"),
    (r"ONNX's comparison cannot take", "a structural difference ONNX's comparison cannot take"),
    (r"^fed (\S+) inputs as OrtValues", "onnxruntime matches the reference ({0} inputs fed as OrtValues)"),
    (r"matches ONNX's reference", "onnxruntime matches the reference"),
)


def category(result: CaseResult) -> str:
    import re

    for pattern, text in _CATEGORIES:
        match = re.search(pattern, result.onnx)
        if match:
            return f"{result.verdict}: " + text.format(*match.groups())
    return f"{result.verdict}: {result.onnx[:60]}"


def table(results, title: str) -> str:
    legend = (
        "verdict: `accuracy-gate check`'s exit code (PASS 0, FAIL 1, ERROR 2: could not evaluate; CRASH: an "
        "exception escaped). why: ONNX's own criterion on onnxruntime's outputs (`Runner.assert_similar_outputs`), "
        "then the gate's message (its first failing row)."
    )
    lines = [f"## {title}", "", legend, "", "| case | verdict | why |", "|---|---|---|"]
    lines += [f"| {r.case} | {r.verdict} | {r.why} |" for r in results]
    counts = {v: sum(r.verdict == v for r in results) for v in ("PASS", "FAIL", "ERROR", "CRASH")}
    disagree = [r.case for r in results if not r.agrees]
    groups: dict[str, int] = {}
    for r in results:
        groups[category(r)] = groups.get(category(r), 0) + 1
    lines += ["", "| verdict: why (grouped) | cases |", "|---|---|"]
    lines += [f"| {text} | {count} |" for text, count in sorted(groups.items(), key=lambda item: (-item[1], item[0]))]
    lines += [
        "",
        f"{len(results)} cases: "
        + ", ".join(f"{n} {v}" for v, n in counts.items())
        + f"; {len(disagree)} disagree with ONNX's criterion"
        + (f" ({', '.join(disagree)})" if disagree else ""),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-dir", help="onnx/backend/test/data/node of onnx==1.22.0 (or $ONNX_NODE_DIR)")
    parser.add_argument("--cases", nargs="*", help="case names or globs (default: the issue-12 patterns + --others)")
    parser.add_argument("--others", type=int, default=60, help="further cases spread over the rest (default 60)")
    parser.add_argument("--out", help="also write the table (Markdown) here")
    args = parser.parse_args(argv)
    node_dir = find_node_dir(args.node_dir)
    if args.cases:
        names = sorted(p.name for p in node_dir.iterdir() if (p / "model.onnx").is_file())
        cases = [n for n in names if any(fnmatch.fnmatchcase(n, pattern) for pattern in args.cases)]
    else:
        cases = select_cases(node_dir, others=args.others)
    import logging

    logging.disable(logging.WARNING)  # the gate's warnings (e.g. NaN in a golden output) are in the table
    import onnxruntime

    rules = "nan_compare_equal = true" if _supports_nan_compare_equal() else "no nan_compare_equal (not in this gate)"
    start = time.perf_counter()
    results = run_cases(node_dir, cases)
    title = (
        f"ONNX node tests through accuracy-gate check (onnxruntime {onnxruntime.__version__}, "
        f"atol {ATOL}, rtol {RTOL}, {rules}; {time.perf_counter() - start:.0f} s)"
    )
    text = table(results, title)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 1 if any(r.verdict == "CRASH" or not r.agrees for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
