#!/usr/bin/env python3
"""Compare kernel: ours vs Polygraphy 0.53.6 vs the memory floor, measured side by side.

For two arrays of N elements (float32 at 1 Mi and 16 Mi elements, float16 and int64 at 16 Mi;
256 Mi float32 with --huge) and each check_error_stat, times (best of --repeat):

- floor: reading both arrays once (``np.copyto`` of both into preallocated buffers), one thread;
- floorT: the same copies, block by block on the compare kernel's thread pool with as many threads
  as ours uses (``--threads T`` / ``ACCURACY_GATE_COMPARE_THREADS``), so that ours/floorT shows
  what the threads did not buy;
- ours: ``gate.comparator.SimpleCompareFunc(compute_medians=False)`` on two IterationResults (as the gate calls it);
- polygraphy: ``polygraphy.comparator.compare.SimpleCompareFunc()`` on the same arrays, its logger
  silenced
  (``G_LOGGER.module_severity = CRITICAL``; it still computes the statistics of its log lines).

Peak extra memory of each variant is measured in a fresh subprocess per case with tracemalloc
(numpy reports its array allocations to it), started after the inputs exist; it is printed in MiB
and as a multiple of the floor's (whose extra memory is its two destination buffers, i.e. the size
of both inputs). The last column checks that the two implementations reported the same numbers
(max and median exactly, mean at relative 1e-5 (deviation D3: our mean is summed in float64),
the verdict, and for elemwise our mismatch count against an independent numpy count).

Run:  python bench/compare_kernel.py [--huge] [--repeat 5] [--no-memory] [--threads T]
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are removed from the environment for the run (the script
re-executes itself without them), and the numpy build, SIMD level and thread pools are printed.
"""

from __future__ import annotations

import os
import sys

_BLAS_VARS = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
if any(v in os.environ for v in _BLAS_VARS):
    _env = {k: v for k, v in os.environ.items() if k not in _BLAS_VARS}
    _env["BENCH_UNSET_BLAS_VARS"] = ", ".join(f"{v}={os.environ[v]}" for v in _BLAS_VARS if v in os.environ)
    os.execve(sys.executable, [sys.executable, *sys.argv], _env)

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from collections import OrderedDict  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.comparator.kernels_threads import THREADS_ENV, compare_threads  # noqa: E402

MI = 1 << 20
STATS = ("elemwise", "mean", "median", "max")


# ----------------------------------------------------------------------------------------- data


def make_inputs(dtype: str, n: int, scenario: str = "near"):
    """Two seeded arrays that are close, as a live and a golden output are.

    float: ``b = a + noise`` with noise ~ 2e-6 (a handful of elements exceed the default 1e-5
    tolerances); scenario ``far`` makes every element exceed them (noise ~ 1e-2); ``equal`` gives
    ``b = a.copy()`` (a backend against golden outputs it recorded itself).
    int64 / int32: values in [0, 1000) (so the reference holds zeros), 0.1 % of elements off by one.
    """
    rng = np.random.default_rng(1234)
    if dtype in ("int64", "int32"):
        a = rng.integers(0, 1000, n, dtype=np.dtype(dtype))
        b = a.copy()
        idx = rng.integers(0, n, max(1, n // 1000))
        b[idx] += 1
        return a, b
    a32 = rng.standard_normal(n, dtype=np.float32)
    scale = 1e-2 if scenario == "far" else 2e-6
    b32 = a32 + (rng.standard_normal(n, dtype=np.float32) * np.float32(scale))
    if dtype == "float16":
        a32, b32 = a32.astype(np.float16), b32.astype(np.float16)
    return (a32, a32.copy()) if scenario == "equal" else (a32, b32)


# ------------------------------------------------------------------------------------ variants


def _silence_polygraphy():
    from polygraphy.logger import G_LOGGER

    # In 0.53.6 ``G_LOGGER.severity = ...`` only sets an unused attribute; module_severity is the
    # setting. At CRITICAL its lazily built histograms are skipped; its eager statistics
    # (std-dev, percentiles, ...) are still computed, as for every user.
    G_LOGGER.module_severity = G_LOGGER.CRITICAL


def variant(name: str, a, b, stat: str):
    """A zero-argument callable running one variant once; returns its per-output result."""
    if name == "floor":
        out_a, out_b = np.empty_like(a), np.empty_like(b)

        def floor():
            np.copyto(out_a, a)
            np.copyto(out_b, b)

        return floor
    if name == "floor-threads":  # the same copies, block by block on the kernel's thread pool
        from gate.comparator.kernels import CHUNK
        from gate.comparator.kernels_threads import block_map, compare_threads

        out_a, out_b = np.empty_like(a), np.empty_like(b)
        threads = compare_threads()

        def copy_block(start):
            np.copyto(out_a[start : start + CHUNK], a[start : start + CHUNK])
            np.copyto(out_b[start : start + CHUNK], b[start : start + CHUNK])

        return lambda: block_map(copy_block, range(0, a.size, CHUNK), threads)
    if name == "floor-alloc":  # the floor for memory: its two buffers are its extra memory

        def floor_alloc():
            out_a, out_b = np.empty_like(a), np.empty_like(b)
            np.copyto(out_a, a)
            np.copyto(out_b, b)
            return out_a, out_b

        return floor_alloc
    if name == "ours":
        from gate.comparator import IterationResult, SimpleCompareFunc

        # As the gate calls it: medians only when they are the check (the API default computes them).
        func = SimpleCompareFunc(check_error_stat=stat, compute_medians=False)
        it_a = IterationResult(OrderedDict(y=a), runner_name="a")
        it_b = IterationResult(OrderedDict(y=b), runner_name="b")
        return lambda: func(it_a, it_b)["y"]
    if name == "polygraphy":
        _silence_polygraphy()
        from polygraphy.comparator import compare as pg_compare
        from polygraphy.comparator import struct as pg_struct

        func = pg_compare.SimpleCompareFunc(check_error_stat=stat)
        it_a = pg_struct.IterationResult(OrderedDict(y=a), runner_name="a")
        it_b = pg_struct.IterationResult(OrderedDict(y=b), runner_name="b")

        def polygraphy():
            with np.errstate(all="ignore"):
                return func(it_a, it_b)["y"]

        return polygraphy
    raise ValueError(name)


def interleaved_best(fns: dict, repeats: dict) -> tuple[dict, dict]:
    """Best time of each callable over its repeats, the calls interleaved round by round (the
    floor is timed in every round), so that a drift in the machine's speed hits every variant
    alike. The first call of each (page faults, lazy imports) is not timed; it gives the result."""
    results = {name: fn() for name, fn in fns.items()}
    best = {name: math.inf for name in fns}
    for round_ in range(max(repeats.values())):
        for name, fn in fns.items():
            if round_ < repeats[name]:
                gc.collect()
                start = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - start)
    return best, results


def peak_memory(name: str, dtype: str, n: int, stat: str, scenario: str) -> int:
    """Peak bytes allocated (tracemalloc) during the first call of the variant in this process
    (modules already imported; our per-thread block buffers are allocated in that call, so they
    are counted)."""
    a, b = make_inputs(dtype, n, scenario)
    fn = variant(name, a, b, stat)
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    fn()
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def peak_memory_subprocess(name, dtype, n, stat, scenario) -> int:
    cmd = [sys.executable, __file__, "--_memory", json.dumps([name, dtype, n, stat, scenario])]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"memory probe {name} {dtype} {n} {stat} failed:\n{proc.stderr}")
    return int(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------ checking


def _same(x, y, rel):
    if x is None or y is None:
        return x is None and y is None
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return x == y if rel == 0 else math.isclose(x, y, rel_tol=rel, abs_tol=0.0)


def agreement(stat, ours, theirs, a, b) -> str:
    """'yes' when our reported numbers are Polygraphy's (mean: relative 1e-5, deviation D3)."""
    problems = []
    # D2: an integer reference holding zeros has relative errors of 0 / inf with us, NaN with Polygraphy.
    d2 = b.dtype.kind in "biu" and not np.all(b)
    kinds = ("absdiff",) if d2 else ("absdiff", "reldiff")
    checks = [(f"max_{k}", 0) for k in kinds] + [(f"mean_{k}", 1e-5) for k in kinds]
    if stat == "median":
        checks += [(f"median_{k}", 0) for k in kinds]
    for field, rel in checks:
        if not _same(getattr(ours, field), getattr(theirs, field), rel):
            problems.append(field)
    if bool(ours) != bool(theirs) and not d2:
        problems.append("verdict")
    if stat == "elemwise" and ours.mismatch_count is not None:
        with np.errstate(all="ignore"):
            expected = _independent_mismatch_count(a, b)
        if ours.mismatch_count != expected:
            problems.append(f"mismatch_count {ours.mismatch_count} != {expected}")
    if problems:
        return "NO: " + ", ".join(problems)
    return "yes (D2: rel, verdict n/a)" if d2 else "yes"


def _independent_mismatch_count(a, b, atol=1e-5, rtol=1e-5, block=1 << 22):
    """Mismatch count by the spec's formula, computed blockwise here (no D1/D2 cases in the data)."""
    count = 0
    for s in range(0, a.size, block):
        x = a[s : s + block]
        y = b[s : s + block]
        if x.dtype == np.float16:
            x, y = x.astype(np.float32), y.astype(np.float32)
        absdiff = np.abs(x - y)
        ref = y.copy() if y.dtype.kind == "f" else y.astype(np.float64)
        if y.dtype.kind == "f":
            ref[ref == 0] += 2.220446049250313e-16
        reldiff = absdiff / np.abs(ref)
        count += int(np.count_nonzero((absdiff > atol) & (reldiff > rtol)))
    return count


# ---------------------------------------------------------------------------------- self-check


def whole_array_statistics(a, b, stat, atol, rtol, inf_eq, nan_eq, q):
    """Every statistic computed the direct way, with numpy on whole arrays (the definition)."""
    from gate.comparator.kernels import reference_diffs

    with np.errstate(all="ignore"):
        absdiff, reldiff, zeros = reference_diffs(a, b, inf_eq, nan_eq)
        out = {
            "max_absdiff": np.amax(absdiff).item(),
            "max_reldiff": np.amax(reldiff).item(),
            "mean_absdiff": np.mean(absdiff, dtype=np.float64).item(),
            "mean_reldiff": np.mean(reldiff, dtype=np.float64).item(),
            "zero_reference_count": zeros,
        }
        if stat == "median":
            out["median_absdiff"] = np.median(absdiff).item()
            out["median_reldiff"] = np.median(reldiff).item()
        if stat == "quantile":
            numeric = absdiff.view(np.uint8) if absdiff.dtype == np.bool_ else absdiff
            out["quantile_absdiff"] = np.quantile(numeric, q).item()
            out["quantile_reldiff"] = np.quantile(reldiff, q).item()
        worst = absdiff
        out["mismatch_count"] = None
        if stat == "elemwise":
            mismatches = (np.greater(absdiff, atol) | np.isnan(absdiff)) & (
                np.greater(reldiff, rtol) | np.isnan(reldiff)
            )
            out["mismatch_count"] = int(np.count_nonzero(mismatches))
            if out["mismatch_count"]:
                filler = 0 if absdiff.dtype.kind == "u" else -1
                worst = mismatches if absdiff.dtype == np.bool_ else np.where(mismatches, absdiff, filler)
        out["worst_index"] = tuple(int(i) for i in np.unravel_index(int(np.argmax(worst)), a.shape))
    return out


def self_check(trials: int, seed: int) -> int:
    """Random small cases (11 dtypes, NaN/inf/-0/ties/zeros, non-contiguous and big-endian inputs,
    every stat, 1 to 4 threads) through ``compare_arrays`` with tiny blocks and samples, so that the
    multi-block, bracket, tie, miss and overflow paths all run; every field must equal the
    whole-array computation (means at relative 1e-12; the NaN counts of a failed result too).
    Returns the number of differing cases."""
    from gate.comparator import kernels, kernels_select
    from gate.comparator.compare import SimpleThreshold, compare_arrays
    from gate.comparator.dtypes import cast_up

    rng = np.random.default_rng(seed)
    specials = np.array([0.0, -0.0, 1e-20, 1e-3, 0.5, 1.0, 3.0, -2.5, 1e4, 65504.0, np.nan, np.inf, -np.inf])
    dtypes = [np.float16, np.float32, np.float64, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint32]
    dtypes += [np.uint64, np.bool_]

    def generate(dtype, shape, style):
        size = int(np.prod(shape))
        if dtype == np.bool_:
            return (rng.random(size) < rng.random()).reshape(shape)
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            if style == "special":
                picks = [info.min, info.max, 0, 1, info.max // 2, info.min // 2 if info.min else 7]
                return rng.choice(np.array(picks, dtype=dtype), size).reshape(shape)
            lo, hi = (0, 3) if style == "ties" else (max(info.min, -1000), min(info.max, 1000))
            return rng.integers(lo, hi + 1, size).astype(dtype).reshape(shape)
        with np.errstate(over="ignore"):
            if style == "special":
                return rng.choice(specials, size).astype(dtype).reshape(shape)
            if style == "ties":
                return rng.integers(0, 4, size).astype(dtype).reshape(shape)
            if style == "relu":
                return np.maximum(rng.standard_normal(size), 0).astype(dtype).reshape(shape)
            return rng.standard_normal(size).astype(dtype).reshape(shape)

    # Each patched where it is read: the block size in kernels, the sample in kernels_select.
    saved = (kernels.CHUNK, kernels_select.SAMPLE_MIN, kernels_select._SAMPLE_SIGMAS, os.environ.get(THREADS_ENV))
    differing = 0
    try:
        for _ in range(trials):
            kernels.CHUNK = int(rng.choice([1, 2, 3, 7, 64, 1000]))
            kernels_select.SAMPLE_MIN = int(rng.choice([2, 8, 64, 512]))
            kernels_select._SAMPLE_SIGMAS = float(rng.choice([0.0, 1.0, 4.0]))
            kernels_select._POSITIONS.clear()
            os.environ[THREADS_ENV] = str(rng.choice([1, 1, 2, 3, 4]))
            dtype = dtypes[rng.integers(len(dtypes))]
            shape = tuple(int(x) for x in rng.integers(1, 40, rng.integers(0, 4)))
            style = str(rng.choice(["normal", "special", "ties", "relu"]))
            a = generate(dtype, shape, style)
            how = str(rng.choice(["equal", "perturbed", "independent", "other dtype", "mostly equal"]))
            if how == "equal":
                b = a.copy()
            elif how == "perturbed" and a.dtype.kind == "f":
                with np.errstate(all="ignore"):
                    b = (a.astype(np.float64) + rng.choice([0, 1e-6, 1e-3, 0.3], a.shape)).astype(dtype)
            elif how == "other dtype":
                b = generate(dtypes[rng.integers(len(dtypes))], shape, style)
            elif how == "mostly equal":
                b = a.copy()
                flat = b.reshape(-1)
                index = rng.integers(0, flat.size, max(1, flat.size // 10))
                flat[index] = generate(dtype, (index.size,), style)
            else:
                b = generate(dtype, shape, style)
            if a.ndim >= 2 and rng.random() < 0.2:
                a, b = a.T, (np.ascontiguousarray(b.T) if rng.random() < 0.5 else b.T)
            if a.dtype.kind in "fiu" and a.dtype.itemsize > 1 and rng.random() < 0.1:
                a = a.astype(a.dtype.newbyteorder(">"))
            stat = str(rng.choice(["elemwise", "max", "mean", "median", "quantile"]))
            atol, rtol = float(rng.choice([0.0, 1e-5, 1e-3, 0.5, 10.0])), float(rng.choice([0.0, 1e-5, 1e-3, 0.5]))
            inf_eq, nan_eq = bool(rng.random() < 0.7), bool(rng.random() < 0.2)
            q = float(rng.choice([0.0, 0.01, 0.5, 0.9, 0.99, 1.0, 0.3333]))
            a_before, b_before = a.copy(), b.copy()
            ours = compare_arrays(
                a,
                b,
                SimpleThreshold(stat, atol, rtol),
                infinities_compare_equal=inf_eq,
                nans_compare_equal=nan_eq,
                quantile=q,
            )
            expected = whole_array_statistics(a, b, stat, atol, rtol, inf_eq, nan_eq, q)
            for field in expected:
                if field.endswith(("absdiff", "reldiff")):
                    expected[field] = float(expected[field])  # as OutputCompareResult stores them
            problems = [
                (field, getattr(ours, field), value)
                for field, value in expected.items()
                if not (
                    getattr(ours, field) == value
                    if not isinstance(value, float)
                    else _same(getattr(ours, field), value, 1e-12 if field.startswith("mean") else 0)
                )
            ]
            nan_a, nan_b = np.isnan(cast_up(a)), np.isnan(cast_up(b))  # (False for integers, bool)
            nan_counts = (int(np.count_nonzero(nan_a & nan_b)), int(np.count_nonzero(nan_a ^ nan_b)))
            if not ours and ours.nan_counts != (nan_counts if any(nan_counts) else None):
                problems.append(("nan_counts", ours.nan_counts, nan_counts))
            if stat == "elemwise" and ours.passed != (expected["mismatch_count"] == 0):
                problems.append(("passed", ours.passed, expected["mismatch_count"] == 0))
            if not (a.tobytes() == a_before.tobytes() and b.tobytes() == b_before.tobytes()):
                problems.append(("inputs modified", None, None))
            if problems:
                differing += 1
                print(f"DIFFERS: {a.dtype} vs {b.dtype} {shape} {style}/{how} {stat} q={q}: {problems}")
    finally:
        kernels.CHUNK, kernels_select.SAMPLE_MIN, kernels_select._SAMPLE_SIGMAS, threads = saved
        if threads is None:
            os.environ.pop(THREADS_ENV, None)
        else:
            os.environ[THREADS_ENV] = threads
        kernels_select._POSITIONS.clear()
    print(f"self-check: {trials} random cases, {differing} differ from the whole-array computation")
    return differing


# -------------------------------------------------------------------------------------- report


def environment_lines() -> list[str]:
    lines = [
        f"python {platform.python_version()}, numpy {np.__version__}, {platform.machine()}, "
        f"{os.cpu_count()} cores, CPU: {_cpu_name()}"
    ]
    try:
        config = np.show_config(mode="dicts")
        simd = config.get("SIMD Extensions", {})
        blas = config.get("Build Dependencies", {}).get("blas", {})
        lines.append(
            f"numpy SIMD baseline {simd.get('baseline')}, dispatched {simd.get('found')}; "
            f"BLAS {blas.get('name')} {blas.get('version')}"
        )
    except Exception as err:  # older numpy: no dict mode
        lines.append(f"numpy config unavailable ({err})")
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            lines.append(
                f"threadpool: {pool.get('internal_api')} {pool.get('version')} "
                f"threads={pool.get('num_threads')} kernel={pool.get('architecture')} ({pool.get('filepath')})"
            )
    except ImportError:
        lines.append("threadpoolctl not installed: BLAS not shown (numpy's ufuncs and reductions are single-threaded)")
    from gate.comparator.kernels_fused import KERNEL_ENV, kernel_name

    lines.append(
        f"compare kernel: {kernel_name()} block for float16/float32 ({KERNEL_ENV}=numpy for numpy's passes), "
        f"{compare_threads()} thread(s)"
    )
    unset = os.environ.get("BENCH_UNSET_BLAS_VARS")
    lines.append(f"unset for this run: {unset}" if unset else "OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE: not set")
    return lines


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_available() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _size_label(n: int) -> str:
    return f"{n // MI} Mi" if n % MI == 0 else str(n)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--huge", action="store_true", help="add 256 Mi float32 elements (if memory allows)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per variant (best is kept)")
    parser.add_argument("--pg-repeat", type=int, default=3, help="timed runs for Polygraphy (slow)")
    parser.add_argument("--no-memory", action="store_true", help="skip the per-case memory subprocesses")
    parser.add_argument("--quick", action="store_true", help="1 Mi float32 only")
    parser.add_argument(
        "--dtypes", help="only the 16 Mi cases of these dtypes, comma-separated (float32, float16, int32, int64)"
    )
    parser.add_argument(
        "--self-check", type=int, metavar="N", help="only run N random exactness cases (tiny blocks) and exit"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of --self-check")
    parser.add_argument("--equal", action="store_true", help="add equal outputs (b = a.copy()) of each 16 Mi dtype")
    parser.add_argument(
        "--threads", type=int, metavar="T", help=f"threads per comparison (sets {THREADS_ENV}; default: its default)"
    )
    parser.add_argument("--_memory", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args._memory:
        print(peak_memory(*json.loads(args._memory)))
        return 0
    if args.self_check:
        return 1 if self_check(args.self_check, args.seed) else 0

    cases = [("float32", MI, "near"), ("float32", 16 * MI, "near")]
    if not args.quick:
        cases += [("float32", 16 * MI, "far"), ("float16", 16 * MI, "near"), ("int64", 16 * MI, "near")]
    else:
        cases = cases[:1]
    if args.dtypes:
        cases = [(dtype, 16 * MI, "near") for dtype in args.dtypes.split(",")]
    if args.equal:
        cases += [(dtype, n, "equal") for dtype, n, scenario in list(cases) if scenario == "near" and n == 16 * MI]
    if args.huge:
        cases.append(("float32", 256 * MI, "near"))

    if args.threads is not None:
        os.environ[THREADS_ENV] = str(args.threads)  # also for the memory subprocesses
    for line in environment_lines():
        print(line)
    print(
        f"compare threads: {compare_threads()} ({THREADS_ENV}={os.environ.get(THREADS_ENV, 'unset')}; "
        f"floorT uses as many)"
    )
    print()
    header = (
        f"{'dtype':<8} {'elements':>8} {'stat':<8} {'floor ms':>9} {'floorT ms':>9} {'ours ms':>9} "
        f"{'ours/floor':>10} {'ours/floorT':>11} "
        f"{'pg ms':>9} {'pg/floor':>9} {'speed-up':>9} {'ours mem':>13} {'pg mem':>13} {'agree':<6}"
    )
    print(header)
    print("-" * len(header))
    failures = 0
    for dtype, n, scenario in cases:
        a, b = make_inputs(dtype, n, scenario)
        input_bytes = a.nbytes + b.nbytes
        # Polygraphy keeps several full-size temporaries; skip it where they would not fit.
        run_pg = _mem_available() == 0 or _mem_available() > 16 * input_bytes
        stats = ("elemwise",) if scenario in ("far", "equal") else STATS
        fns = {"floor": variant("floor", a, b, None), "floor-threads": variant("floor-threads", a, b, None)}
        repeats = {"floor": args.repeat, "floor-threads": args.repeat}
        for stat in stats:
            fns[("ours", stat)] = variant("ours", a, b, stat)
            repeats[("ours", stat)] = args.repeat
            if run_pg:
                fns[("polygraphy", stat)] = variant("polygraphy", a, b, stat)
                repeats[("polygraphy", stat)] = args.pg_repeat
        times, results = interleaved_best(fns, repeats)
        floor_s, floor_t_s = times["floor"], times["floor-threads"]
        floor_mem = None if args.no_memory else peak_memory_subprocess("floor-alloc", dtype, n, "max", scenario)
        for stat in stats:
            ours_s = times[("ours", stat)]
            if run_pg:
                pg_s = times[("polygraphy", stat)]
                agree = agreement(stat, results[("ours", stat)], results[("polygraphy", stat)], a, b)
            else:
                pg_s, agree = None, "pg skipped (memory)"
            failures += not agree.startswith(("yes", "pg skipped"))
            mem = {"ours": None, "polygraphy": None}
            if not args.no_memory:
                for name in ("ours", "polygraphy") if run_pg else ("ours",):
                    mem[name] = peak_memory_subprocess(name, dtype, n, stat, scenario)

            def fmt_mem(value, floor_mem=floor_mem):
                if value is None:
                    return "-"
                return f"{value / MI:.1f}M {value / floor_mem:.2f}x"

            label = stat + {"far": "*", "equal": "="}.get(scenario, "")
            pg_cols = f"{pg_s * 1e3:9.1f} {pg_s / floor_s:9.1f} {pg_s / ours_s:8.1f}x " if pg_s else f"{'-':>9} " * 3
            print(
                f"{dtype:<8} {_size_label(n):>8} {label:<8} {floor_s * 1e3:9.2f} {floor_t_s * 1e3:9.2f} "
                f"{ours_s * 1e3:9.2f} {ours_s / floor_s:10.2f} {ours_s / floor_t_s:11.2f} {pg_cols}"
                f"{fmt_mem(mem['ours']):>13} {fmt_mem(mem['polygraphy']):>13} {agree}",
                flush=True,
            )
        del a, b, fns, results
        gc.collect()
    print()
    print("floor: np.copyto of both inputs into preallocated buffers, one thread; floorT: the same copies block")
    print("by block on the compare threads. ours/pg: SimpleCompareFunc on one output (ours on the compare threads).")
    print("mem: peak extra bytes during one call (tracemalloc, own subprocess), and as a multiple of the")
    print("floor's (its two destination buffers = the size of both inputs).")
    print("* every element out of tolerance (noise 1e-2): the elemwise worst case for us.")
    print("= equal outputs (--equal): our equal-outputs shortcut.")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
