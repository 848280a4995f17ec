#!/usr/bin/env python3
"""Streaming job: ours vs Polygraphy 0.53.6 vs the bare loop, measured side by side.

Two ONNX Runtime runners of one Conv(3->16, 3x3, pad 1) + Relu model (built here with
onnx.helper, seeded weights) on 1x3x128x128 float32 inputs, N iterations of seeded random inputs:

- ours: ``gate.comparator.Comparator.run(runners, loader, streaming=True)`` and
  ``Comparator.compare_accuracy(stream)``, runners ``gate.backend.onnxrt.OnnxrtRunner(
  SessionFromOnnx(path, intra_op_num_threads=1))``;
- polygraphy: the same two calls of ``polygraphy.comparator.Comparator`` with
  ``polygraphy.backend.onnxrt.OnnxrtRunner(SessionFromOnnx(path))`` (logger silenced);
- bare: two ``onnxruntime.InferenceSession``s, ``run`` both, one ``np.allclose`` per iteration.

Each (variant, N) runs in its own subprocess pinned to one CPU (``os.sched_setaffinity``) with
ONNX Runtime's intra-op threads at 1: Polygraphy's SessionFromOnnx sets them to the number of
usable CPUs, so the pinning is what brings it to 1; ours and the bare loop set 1 explicitly. The
wall time covers everything after the imports: building the sessions, generating the inputs,
inference and comparison. Peak RSS is ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of that
subprocess at the end.

Run:  python bench/streaming_job.py [--iterations 100,2000] [--repeat 1] [--profile ours]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

VARIANTS = ("bare", "ours", "polygraphy")
SHAPE = (1, 3, 128, 128)


def build_model(path: Path) -> None:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array((rng.standard_normal((16, 3, 3, 3)) * 0.2).astype(np.float32), "w")
    bias = numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "bias")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w", "bias"], ["conv"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
            helper.make_node("Relu", ["conv"], ["y"]),
        ],
        "conv_relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 128, 128])],
        initializer=[weight, bias],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def loader(iterations: int):
    import numpy as np

    rng = np.random.default_rng(42)
    for _ in range(iterations):
        yield OrderedDict(x=rng.standard_normal(SHAPE, dtype=np.float32))


def run_bare(path: str, iterations: int) -> dict:
    import numpy as np
    import onnxruntime as ort

    def session():
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        return ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])

    sess_a, sess_b = session(), session()
    matched = 0
    for feed in loader(iterations):
        ya = sess_a.run(None, feed)[0]
        yb = sess_b.run(None, feed)[0]
        matched += bool(np.allclose(ya, yb))
    return {"passed": matched, "iterations": iterations}


def run_ours(path: str, iterations: int) -> dict:
    from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
    from gate.comparator import Comparator

    runners = [
        OnnxrtRunner(SessionFromOnnx(path, intra_op_num_threads=1), name="a"),
        OnnxrtRunner(SessionFromOnnx(path, intra_op_num_threads=1), name="b"),
    ]
    stream = Comparator.run(runners, data_loader=loader(iterations), streaming=True)
    results = Comparator.compare_accuracy(stream)
    passed, failed, total = results[0].stats()
    return {"passed": passed, "iterations": total}


def run_polygraphy(path: str, iterations: int) -> dict:
    from polygraphy.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
    from polygraphy.comparator import Comparator
    from polygraphy.logger import G_LOGGER

    G_LOGGER.module_severity = G_LOGGER.CRITICAL  # ``G_LOGGER.severity = ...`` has no effect in 0.53.6
    runners = [OnnxrtRunner(SessionFromOnnx(path), name="a"), OnnxrtRunner(SessionFromOnnx(path), name="b")]
    stream = Comparator.run(runners, data_loader=loader(iterations), streaming=True)
    results = Comparator.compare_accuracy(stream)
    passed, failed, total = results[0].stats()
    return {"passed": passed, "iterations": total}


RUNS = {"bare": run_bare, "ours": run_ours, "polygraphy": run_polygraphy}


def child(spec: dict) -> dict:
    os.sched_setaffinity(0, {spec["cpu"]})
    # Imports first (not timed): numpy, onnxruntime and the variant's package.
    import numpy  # noqa: F401
    import onnxruntime  # noqa: F401

    if spec["variant"] == "ours":
        import gate.comparator  # noqa: F401
    elif spec["variant"] == "polygraphy":
        import polygraphy.comparator  # noqa: F401
    run = RUNS[spec["variant"]]
    if spec.get("profile"):
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        start = time.perf_counter()
        profiler.enable()
        outcome = run(spec["model"], spec["iterations"])
        profiler.disable()
        wall = time.perf_counter() - start
        stats = pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime")
        stats.print_stats(25)
        stats.sort_stats("cumulative").print_stats(40)
    else:
        start = time.perf_counter()
        outcome = run(spec["model"], spec["iterations"])
        wall = time.perf_counter() - start
    outcome.update(wall_s=wall, maxrss_kib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return outcome


def run_child(spec: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--_child", json.dumps(spec)], capture_output=True, text=True, cwd=ROOT
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{spec['variant']} N={spec['iterations']} failed:\n{proc.stderr[-4000:]}")
    if spec.get("profile"):
        sys.stderr.write(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", default="100,2000", help="comma-separated N values")
    parser.add_argument("--repeat", type=int, default=1, help="runs per (variant, N); the fastest is kept")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--cpu", type=int, default=0, help="the CPU every subprocess is pinned to")
    parser.add_argument("--profile", choices=VARIANTS, help="cProfile one variant at the largest N, to stderr")
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._child:
        print(json.dumps(child(json.loads(args._child))))
        return 0

    import numpy as np
    import onnxruntime as ort

    counts = [int(n) for n in args.iterations.split(",")]
    variants = args.variants.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / "conv_relu.onnx"
        build_model(model)
        if args.profile:
            run_child(
                {
                    "variant": args.profile,
                    "iterations": max(counts),
                    "model": str(model),
                    "cpu": args.cpu,
                    "profile": True,
                }
            )
            return 0
        print(
            f"numpy {np.__version__}, onnxruntime {ort.__version__}, {os.cpu_count()} cores; each run pinned to "
            f"CPU {args.cpu}, intra-op threads 1; model Conv(3->16, 3x3, pad 1)+Relu on {SHAPE} float32"
        )
        results = {}
        for n in counts:
            for variant in variants:
                runs = [
                    run_child({"variant": variant, "iterations": n, "model": str(model), "cpu": args.cpu})
                    for _ in range(args.repeat)
                ]
                best = min(runs, key=lambda r: r["wall_s"])
                best["maxrss_kib"] = max(r["maxrss_kib"] for r in runs)
                results[(variant, n)] = best
    print()
    header = (
        f"{'variant':<11} {'N':>6} {'it/s':>9} {'vs bare':>8} {'ours vs it':>10} {'peak RSS MiB':>13} {'passed':>8}"
    )
    print(header)
    print("-" * len(header))
    for n in counts:
        bare = results.get(("bare", n))
        ours = results.get(("ours", n))
        for variant in variants:
            r = results[(variant, n)]
            rate = r["iterations"] / r["wall_s"]
            vs_bare = f"{rate / (bare['iterations'] / bare['wall_s']):.2f}x" if bare else "-"
            vs_ours = f"{(ours['iterations'] / ours['wall_s']) / rate:.1f}x" if ours else "-"
            print(
                f"{variant:<11} {n:>6} {rate:9.1f} {vs_bare:>8} {vs_ours:>10} {r['maxrss_kib'] / 1024:13.1f} "
                f"{r['passed']:>4}/{r['iterations']}"
            )
    if len(counts) > 1:
        print()
        low, high = min(counts), max(counts)
        for variant in variants:
            growth = (results[(variant, high)]["maxrss_kib"] - results[(variant, low)]["maxrss_kib"]) / 1024
            print(f"peak RSS growth {variant:<11} N={low} -> N={high}: {growth:+.1f} MiB")
    print()
    print("it/s: N / wall time of the whole job (sessions, inputs, inference, comparison); 'ours vs it': our it/s")
    print("divided by that variant's. Peak RSS: ru_maxrss of the variant's own subprocess.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
