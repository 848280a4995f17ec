"""Polygraphy's own unit tests, run against polygraphy 0.53.6 and against ``gate`` with only the imports changed.

    python bench/polygraphy_tests.py PATH/TO/TensorRT/tools/Polygraphy/tests [--impl both|polygraphy|gate]

PATH is Polygraphy's ``tests`` folder (NVIDIA/TensorRT, ``tools/Polygraphy/tests``; not shipped in the
pip package and not copied into this repository). Nothing is fetched: the script copies the parts it
needs (``comparator/``, ``backend/base/``, ``backend/onnxrt/``, ``models/``, ``conftest.py``,
``helper.py``) into a scratch folder and runs pytest there twice:

- ``polygraphy``: the tests as they are, except that a missing ``tensorrt`` / ``torch`` becomes a
  placeholder (so that the modules import; their TensorRT / torch cases then fail on both sides) and
  one fixture decorator newer pytest rejects is dropped;
- ``gate``: the same copy with the imports of the three modules under test changed
  (:data:`IMPORT_MAP`): ``polygraphy.comparator`` -> ``gate.comparator``, ``polygraphy.backend.base``
  -> ``gate.backend.base``, ``polygraphy.backend.onnxrt`` -> ``gate.backend.onnxrt``, and
  ``PolygraphyException`` / ``TensorMetadata`` to ours. Everything else (``polygraphy.util``,
  ``DataType``, the logger, the ONNX loaders the test models use) stays Polygraphy's.

It prints, per test file, how many tests pass on polygraphy and how many of those pass on ours, then
each test passing on polygraphy and not on ours with the documented deviation that explains it
(:data:`EXPLAINED`) or ``UNEXPLAINED``. Exit code 0 when at least ``--target`` (default 95 %) of the
tests passing on polygraphy pass on ours and every other one is explained, else 1.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PARTS = [
    "__init__.py",
    "conftest.py",
    "helper.py",
    "pytest.ini",
    "models",
    "comparator",
    "backend/__init__.py",
    "backend/base",
    "backend/onnxrt",
]
TEST_DIRS = ["tests/comparator", "tests/backend/base", "tests/backend/onnxrt"]

# Applied in order to every copied .py file for the ``gate`` run.
IMPORT_MAP = [
    (
        r"from polygraphy\.exception import PolygraphyException\b",
        "from gate.errors import GateError as PolygraphyException",
    ),
    (r"from polygraphy\.common import TensorMetadata\b", "from gate.backend.base import TensorMetadata"),
    (r"\bpolygraphy\.comparator\b", "gate.comparator"),
    (r"\bpolygraphy\.backend\.base\b", "gate.backend.base"),
    (r"\bpolygraphy\.backend\.onnxrt\b", "gate.backend.onnxrt"),
]

# Applied to both runs: placeholders where TensorRT / torch are not installed, and the one fixture
# decorator pytest >= 8 refuses ("Marks cannot be applied to fixtures").
_TRT_STUB = (
    "try:\n    import tensorrt as trt\nexcept ImportError:  # harness: no TensorRT here\n"
    '    import types as _types\n\n    trt = _types.SimpleNamespace(__version__="0")\n'
)
_TORCH_STUB = "try:\n    import torch\nexcept ImportError:  # harness: no torch here\n    torch = None\n"
COMMON_MAP = [
    (r"^import tensorrt as trt$", _TRT_STUB),
    (r"^import torch$", _TORCH_STUB),
    (r"@pytest\.fixture\(\)\n@pytest\.mark\.skipif\((?s:.*?)\n\)\n", "@pytest.fixture()\n"),
]

# Tests that pass on polygraphy and not on ours on purpose: test id (or its prefix) -> reason.
EXPLAINED: dict[str, str] = {
    # output0's mean |diff| of float32 values is 0.41250000149 (float64 sum), above atol = 0.4125;
    # Polygraphy's float32 sum rounds it to 0.41249999 and passes.
    "comparator.test_compare.TestSimpleCompareFunc::test_per_output_error_stat[": "D3 (mean accumulated in float64)",
    # The test sets polygraphy.config.ARRAY_SWAP_THRESHOLD_MB, which gate does not read.
    "comparator.test_struct.TestLazyArray::test_swapped_array[": "D14 (swap threshold is gate's own setting)",
}


def _rewrite(folder: Path, rules) -> None:
    for path in folder.rglob("*.py"):
        text = path.read_text()
        new = text
        for pattern, repl in rules:
            new = re.sub(pattern, lambda _m, r=repl: r, new, flags=re.M)
        if new != text:
            path.write_text(new)


def prepare(source: Path, dest: Path, impl: str) -> Path:
    """Copy the needed parts of Polygraphy's tests folder ``source`` to ``dest/tests`` and apply the
    rewrites of ``impl``. Returns ``dest``."""
    tests = dest / "tests"
    for part in PARTS:
        src = source / part
        if not src.exists():
            raise SystemExit(f"polygraphy_tests: {src} does not exist; pass Polygraphy's tests folder")
        target = tests / part
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, target)
    _rewrite(tests, COMMON_MAP)
    if impl == "gate":
        _rewrite(tests, IMPORT_MAP)
    return dest


def run(dest: Path, impl: str, extra: list[str], timeout: float) -> dict[str, tuple[str, str]]:
    """Run pytest in ``dest``; returns {test id: (outcome, first line of the message)}."""
    junit = dest / "junit.xml"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(dest), str(ROOT)])
    cmd = [sys.executable, "-m", "pytest", *TEST_DIRS, "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]
    cmd += ["-o", "addopts=", f"--junitxml={junit}", *extra]
    proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=timeout)
    if not junit.exists():
        raise SystemExit(f"polygraphy_tests: pytest wrote no report for {impl}:\n{proc.stdout}\n{proc.stderr}")
    results = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = (child.get("message") or "").strip().splitlines()[:1]
                message = message[0][:160] if message else ""
                break
        results[test_id] = (outcome, message)
    return results


def explain(test_id: str) -> str | None:
    for prefix, reason in EXPLAINED.items():
        if test_id.startswith(prefix):
            return reason
    return None


def report(pg: dict, ours: dict, target: float) -> int:
    passing = [t for t, (o, _) in pg.items() if o == "passed"]
    by_file: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    missing = []
    for test_id in passing:
        counts = by_file[test_id.split("::")[0]]
        counts[0] += 1
        if ours.get(test_id, ("absent", ""))[0] == "passed":
            counts[1] += 1
        else:
            missing.append(test_id)
    print(f"{'test module':60s} {'polygraphy':>10s} {'gate':>6s}")
    for name in sorted(by_file):
        print(f"{name:60s} {by_file[name][0]:10d} {by_file[name][1]:6d}")
    n_pg, n_ours = len(passing), len(passing) - len(missing)
    share = 100.0 * n_ours / n_pg if n_pg else 0.0
    print(f"{'total':60s} {n_pg:10d} {n_ours:6d}  ({share:.1f} %)")
    unexplained = 0
    for test_id in missing:
        reason = explain(test_id)
        unexplained += reason is None
        outcome, message = ours.get(test_id, ("absent", ""))
        print(f"  {test_id}: {outcome} -- {reason or 'UNEXPLAINED: ' + message}")
    extra = sorted(t for t, (o, _) in ours.items() if o == "passed" and pg.get(t, ("", ""))[0] != "passed")
    if extra:
        print(f"passing on gate only: {len(extra)}")
    print(f"passing on polygraphy: {n_pg}; of those passing on gate: {n_ours} ({share:.1f} %); ", end="")
    print(f"unexplained: {unexplained}")
    return 0 if share >= target and not unexplained else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tests", type=Path, help="Polygraphy's tests folder (TensorRT/tools/Polygraphy/tests)")
    parser.add_argument("--impl", choices=["both", "polygraphy", "gate"], default="both")
    parser.add_argument("--keep", type=Path, help="prepare the copies under this folder and keep them")
    parser.add_argument("--target", type=float, default=95.0, help="percent that must pass on gate (default 95)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per pytest run")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    impls = ["polygraphy", "gate"] if args.impl == "both" else [args.impl]
    base = Path(tempfile.mkdtemp(prefix="polygraphy-tests-")) if args.keep is None else args.keep
    try:
        results = {}
        for impl in impls:
            dest = base / impl
            if dest.exists():
                shutil.rmtree(dest)
            prepare(args.tests.resolve(), dest, impl)
            results[impl] = run(dest, impl, args.pytest_args, args.timeout)
            counts = defaultdict(int)
            for outcome, _ in results[impl].values():
                counts[outcome] += 1
            print(f"{impl}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        if len(impls) == 1:
            return 0
        return report(results["polygraphy"], results["gate"], args.target)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
