"""The gate's main job (``check``) against the model's pure inference time, and its peak RSS as the
golden set grows (issue 6).

Model: PP-OCRv4 text recognition (ppocr_v4_rec, ``pip install --no-deps rapidocr-onnxruntime==1.4.4``),
``x f32[1,3,48,320]`` -> ``softmax_11.tmp_0 f32[1,40,6625]``. Inputs: N text lines rendered with
Pillow's bundled font, normalized as PP-OCR does, stored as ``<i>.npz``; golden outputs recorded by
``accuracy-gate record``.

For each N it prints, measured in one run:
- pure inference: an ``onnxruntime.InferenceSession`` with the same settings, created and run over
  the same inputs already in memory (the floor: nothing read, nothing compared);
- ``check``: the whole job in a fresh process (``gate.job.check``: read inputs and golden data from
  disk, run, compare every output, build the verdict), timed from ``load_config`` to the verdict;
- the ratio of the two, and each process's peak RSS (``ru_maxrss``).

The two processes run side by side and take turns every ``--segment`` iterations (pure first):
each waits, between two iterations, while the other runs its segment, and that wait is not counted
in its time. A change in the machine's speed (this shared VM's flips between two speeds, a factor
of two apart, for seconds to minutes at a time) then hits both alike, which whole runs one after
the other did not give: their ratio varied from 0.6 to 1.55. While ``check`` waits, its read-ahead
thread may read its next two iterations (about 0.3 ms each); that is all it can do ahead. Each N is
measured ``--repeat`` times; the table shows the run with the median ratio and lists every ratio.

Usage: ``python bench/golden_job.py [--n 50 1000] [--repeat 3] [--segment 25] [--keep DIR]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORDS = "invoice total amount due date order number page customer address phone tax net gross paid".split()


def model_path() -> Path:
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None:
        sys.exit("install the model first: pip install --no-deps rapidocr-onnxruntime==1.4.4")
    return Path(spec.submodule_search_locations[0]) / "models" / "ch_PP-OCRv4_rec_infer.onnx"


def text_line(rng) -> np.ndarray:
    """A rendered text line, resized to 48x320 as PP-OCR's recognizer expects, NCHW float32."""
    from PIL import Image, ImageDraw, ImageFont

    text = " ".join(rng.choice(WORDS, size=rng.integers(2, 5))) + f" {rng.integers(0, 99999)}"
    font = ImageFont.load_default(size=32)
    left, top, right, bottom = font.getbbox(text)
    image = Image.new("L", (right - left + 12, bottom - top + 12), 255)
    ImageDraw.Draw(image).text((6 - left, 6 - top), text, font=font, fill=0)
    width = min(320, int(np.ceil(48 * image.width / image.height)))
    pixels = np.asarray(image.resize((width, 48), Image.BILINEAR), np.float32)
    line = np.zeros((1, 3, 48, 320), np.float32)
    line[0, :, :, :width] = ((pixels / 255.0 - 0.5) / 0.5)[None]
    return line


def make_golden_set(folder: Path, n: int) -> Path:
    rng = np.random.default_rng(0)
    (folder / "inputs").mkdir(parents=True)
    for i in range(n):
        np.savez(folder / "inputs" / f"{i:05d}.npz", x=text_line(rng))
    (folder / "model.onnx").symlink_to(model_path())
    cfg = folder / "gate.toml"
    cfg.write_text('model = "model.onnx"\ninputs = "inputs"\ngolden = "golden"\n[compare]\natol = 1e-5\n')
    subprocess.run([sys.executable, "-m", "gate", "record", str(cfg), "--root", "/"], check=True, cwd=folder)
    return cfg


TURNS = """
import sys, time


class Turns:
    # Takes turns with the other measured process: waits for "go" on stdin before starting, and
    # before every `every`-th iteration after the first; the time spent waiting is excluded.

    def __init__(self, every):
        self.every, self.count, self.paused = every, 0, 0.0
        print("ready", flush=True)
        self.wait()

    def wait(self):
        if sys.stdin.readline().strip() != "go":
            sys.exit("golden_job: lost the parent")

    def tick(self):
        if self.every and self.count and self.count % self.every == 0:
            start = time.perf_counter()
            print("paused", flush=True)
            self.wait()
            self.paused += time.perf_counter() - start
        self.count += 1
"""

PURE = (
    TURNS
    + """
import json, resource
from pathlib import Path
import numpy as np, onnxruntime as ort
folder = Path(sys.argv[1])
inputs = [dict(np.load(p)) for p in sorted((folder / "inputs").glob("*.npz"))]
turns = Turns(int(sys.argv[2]))
start = time.perf_counter()
options = ort.SessionOptions()
options.log_severity_level = 4
sess = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
for feed in inputs:
    turns.tick()
    sess.run(None, feed)
seconds = time.perf_counter() - start - turns.paused
print(json.dumps({"seconds": seconds, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
)

CHECK = (
    TURNS
    + """
import json, resource
import onnxruntime  # imported before timing, as in the pure-inference script
from gate.backend.onnxrt import OnnxrtRunner
from gate.config import load_config
from gate.job import check

infer = OnnxrtRunner.infer_impl
def paced(self, feed_dict):  # the turn is taken between two iterations of the job
    turns.tick()
    return infer(self, feed_dict)
OnnxrtRunner.infer_impl = paced

turns = Turns(int(sys.argv[2]))
start = time.perf_counter()
result = check(load_config(sys.argv[1], {"root": "/"}))
seconds = time.perf_counter() - start - turns.paused
assert result.status == "passed", result.message
print(json.dumps({"seconds": seconds, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""
)


def measure_pair(folder: Path, cfg: Path, segment: int) -> tuple[dict, dict]:
    """Runs the pure-inference and the ``check`` process side by side, taking turns every
    ``segment`` iterations (pure first), so that a change in the machine's speed hits both alike;
    returns their results."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, arg, str(segment)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for code, arg in ((PURE, str(folder)), (CHECK, str(cfg)))
    ]
    results: list[dict | None] = [None, None]
    for proc in procs:
        _next_line(proc, ("ready",))
    while any(r is None for r in results):
        for i, proc in enumerate(procs):
            if results[i] is not None:
                continue
            proc.stdin.write("go\n")
            proc.stdin.flush()
            line = _next_line(proc, ("paused", "{"))
            if line.startswith("{"):
                results[i] = json.loads(line)
                proc.stdin.close()
                if proc.wait():
                    sys.exit(f"golden_job: a measured process failed ({proc.returncode})")
    return results[0], results[1]


def _next_line(proc, wanted) -> str:
    """The next protocol line of a child (its other output, e.g. progress lines, is skipped)."""
    for line in proc.stdout:
        if line.startswith(wanted):
            return line.strip()
    proc.wait()
    sys.exit(f"golden_job: a measured process ended early ({proc.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[50, 1000])
    parser.add_argument("--keep", type=Path, help="keep the generated golden sets here")
    parser.add_argument("--repeat", type=int, default=3, help="measure each N this many times; report the median")
    parser.add_argument(
        "--segment", type=int, default=25, help="iterations per turn of the two processes (0: one after the other)"
    )
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="golden-job-"))
    rows = []
    for n in args.n:
        folder = base / f"n{n}"
        cfg = folder / "gate.toml" if (folder / "gate.toml").exists() else make_golden_set(folder, n)
        pairs = sorted(
            (measure_pair(folder, cfg, args.segment) for _ in range(args.repeat)),
            key=lambda pair: pair[1]["seconds"] / pair[0]["seconds"],
        )
        rss = [max(pair[k]["rss_kib"] for pair in pairs) for k in (0, 1)]
        rows.append((n, pairs, rss))
    print(f"\nppocr_v4_rec, 1x3x48x320 text lines, onnxruntime CPU; {sys.executable}")
    print(f"turns every {args.segment} iterations; of {args.repeat} runs, the one with the median ratio")
    header = f"{'N':>6} {'pure inference s':>17} {'check s':>9} {'ratio':>6} {'pure RSS MiB':>13} {'check RSS MiB':>14}"
    print(header + "  all ratios")
    for n, pairs, rss in rows:
        pure, ours = pairs[len(pairs) // 2]
        spread = " ".join(f"{p[1]['seconds'] / p[0]['seconds']:.3f}" for p in pairs)
        print(
            f"{n:>6} {pure['seconds']:>17.2f} {ours['seconds']:>9.2f} {ours['seconds'] / pure['seconds']:>6.3f} "
            f"{rss[0] / 1024:>13.1f} {rss[1] / 1024:>14.1f}  {spread}"
        )
    if len(rows) > 1:
        growth = (rows[-1][2][1] - rows[0][2][1]) / 1024
        print(f"check peak RSS growth from N={rows[0][0]} to N={rows[-1][0]}: {growth:+.1f} MiB")


if __name__ == "__main__":
    main()
