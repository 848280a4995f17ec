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
- the ratio of the two, and each process's peak RSS (``ru_maxrss``);
each measured ``--repeat`` times, alternating, keeping the fastest of each (a shared VM's speed
drifts by tens of percent between minutes).

Usage: ``python bench/golden_job.py [--n 50 1000] [--keep DIR]``
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


PURE = """
import json, resource, sys, time
from pathlib import Path
import numpy as np, onnxruntime as ort
folder = Path(sys.argv[1])
inputs = [dict(np.load(p)) for p in sorted((folder / "inputs").glob("*.npz"))]
start = time.perf_counter()
options = ort.SessionOptions()
options.log_severity_level = 4
sess = ort.InferenceSession(str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"])
for feed in inputs:
    sess.run(None, feed)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

CHECK = """
import json, resource, sys, time
import onnxruntime  # imported before timing, as in the pure-inference script
from gate.config import load_config
from gate.job import check
start = time.perf_counter()
result = check(load_config(sys.argv[1], {"root": "/"}))
seconds = time.perf_counter() - start
assert result.status == "passed", result.message
print(json.dumps({"seconds": seconds, "rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def measure(code: str, arg: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, arg], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        sys.exit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[50, 1000])
    parser.add_argument("--keep", type=Path, help="keep the generated golden sets here")
    parser.add_argument(
        "--repeat", type=int, default=3, help="alternate the two measurements this many times and keep the best"
    )
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="golden-job-"))
    rows = []
    for n in args.n:
        folder = base / f"n{n}"
        cfg = folder / "gate.toml" if (folder / "gate.toml").exists() else make_golden_set(folder, n)
        pures, checks = [], []
        for _ in range(args.repeat):  # alternated, so that a slow spell of the machine hits both
            pures.append(measure(PURE, str(folder)))
            checks.append(measure(CHECK, str(cfg)))
        best = lambda runs: min(runs, key=lambda r: r["seconds"])  # noqa: E731
        rows.append((n, best(pures), best(checks)))
    print(f"\nppocr_v4_rec, 1x3x48x320 text lines, onnxruntime CPU; {sys.executable}")
    print(f"{'N':>6} {'pure inference s':>17} {'check s':>9} {'ratio':>6} {'pure RSS MiB':>13} {'check RSS MiB':>14}")
    for n, pure, ours in rows:
        print(
            f"{n:>6} {pure['seconds']:>17.2f} {ours['seconds']:>9.2f} {ours['seconds'] / pure['seconds']:>6.3f} "
            f"{pure['rss_kib'] / 1024:>13.1f} {ours['rss_kib'] / 1024:>14.1f}"
        )
    if len(rows) > 1:
        growth = (rows[-1][2]["rss_kib"] - rows[0][2]["rss_kib"]) / 1024
        print(f"check peak RSS growth from N={rows[0][0]} to N={rows[-1][0]}: {growth:+.1f} MiB")


if __name__ == "__main__":
    main()
