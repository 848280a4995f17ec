#!/usr/bin/env python3
"""Render the stored inputs of the ppocr-cls example.

Makes 8 text-line images of the kind PaddleOCR's text-direction classifier
(model.onnx next to this script) sees after text detection: one short line of
text, cropped with a small margin. Some lines are rotated by 180 degrees (what
the classifier detects: class 0 = "0", class 1 = "180"), and two have a gray,
noisy background.

Each line is preprocessed like PaddleOCR's classifier (TextClassifier.resize_norm_img):
  * resize so the height is 48 and width = min(192, ceil(48 * w / h)) (bilinear),
  * normalize as (x / 255 - 0.5) / 0.5, channels first (NCHW),
  * pad on the right up to width 192 with zeros, AFTER normalization.
The result is float32 of shape [1, 3, 48, 192].

Output is the ONNX model-zoo layout, inputs only:
  <out>/test_data_set_<i>/input_0.pb   (TensorProto named "x")
Golden outputs (output_0.pb) are recorded later by `accuracy-gate record`.

Deterministic: a fixed text list, Pillow's bundled font and a fixed-seed RNG.
(Pillow / FreeType versions other than the ones used to make the stored files
may render glyphs slightly differently; the stored .pb files are the reference.)

Usage:
  python make_inputs.py [--out DIR] [--force]
"""

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from onnx import numpy_helper
from PIL import Image, ImageDraw, ImageFont

HEIGHT, WIDTH = 48, 192  # cls_image_shape [3, 48, 192] in PaddleOCR / RapidOCR
FONT_SIZE = 32
MARGIN = 6  # pixels of background around the text, like a detector's crop
SEED = 20240815

# (text, rotated by 180 degrees, gray noisy background)
LINES = [
    ("Invoice No. 2024-0815", False, False),
    ("Total: $1,284.50", True, False),
    ("Qty 12", False, False),
    ("Due 30 days", True, False),
    ("Order #A-7731", False, True),
    ("Tel 555-0199", True, True),
    ("Page 3 of 7", False, False),
    ("VAT 19%", True, False),
]


def render_line(text, font, rotate, noisy, rng):
    """Return a grayscale uint8 image of one line of text (black on white)."""
    ascent, descent = font.getmetrics()
    left, _, right, _ = font.getbbox(text)
    w = (right - left) + 2 * MARGIN
    h = ascent + descent + 2 * MARGIN

    if noisy:
        # mild gray paper with sensor noise; text slightly lighter than black
        background = np.full((h, w), 215.0) + rng.normal(0.0, 10.0, size=(h, w))
        img = Image.fromarray(np.clip(background, 0, 255).astype(np.uint8), "L")
        ink = 30
    else:
        img = Image.new("L", (w, h), 255)
        ink = 0

    ImageDraw.Draw(img).text((MARGIN - left, MARGIN), text, font=font, fill=ink)
    if rotate:
        img = img.rotate(180)
    return img


def preprocess(img):
    """PaddleOCR classifier preprocessing: -> float32 [1, 3, 48, 192]."""
    w, h = img.size
    resized_w = min(WIDTH, math.ceil(HEIGHT * w / h))
    img = img.convert("RGB").resize((resized_w, HEIGHT), Image.BILINEAR)
    chw = np.asarray(img, dtype=np.float32).transpose(2, 0, 1)
    chw = (chw / 255.0 - 0.5) / 0.5
    padded = np.zeros((3, HEIGHT, WIDTH), dtype=np.float32)
    padded[:, :, :resized_w] = chw
    return padded[np.newaxis]


def make_inputs():
    """Return a list of (text, rotated, noisy, array) in the stored order."""
    font = ImageFont.load_default(size=FONT_SIZE)
    rng = np.random.default_rng(SEED)
    result = []
    for text, rotate, noisy in LINES:
        img = render_line(text, font, rotate, noisy, rng)
        result.append((text, rotate, noisy, preprocess(img)))
    return result


def write_labels(folder):
    """labels/<N>.npz: the class of each line (0 = upright, 1 = rotated by 180 degrees), for the
    gate's task metric (gate.toml: [compare] labels, task_metric)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, (_, rotate, _) in enumerate(LINES):
        np.savez(folder / f"{i}.npz", label=np.array([int(rotate)], dtype=np.int64))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "data",
        help="output folder (default: data/ next to this script)",
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite existing input_0.pb files"
    )
    args = parser.parse_args(argv)

    targets = [
        args.out / f"test_data_set_{i}" / "input_0.pb" for i in range(len(LINES))
    ]
    existing = [p for p in targets if p.exists()]
    if existing and not args.force:
        print(
            f"refusing to overwrite {len(existing)} existing input_0.pb file(s) "
            f"under {args.out} (first: {existing[0]}); use --force",
            file=sys.stderr,
        )
        return 1

    write_labels(args.out.parent / "labels")
    for path, (text, rotate, noisy, arr) in zip(targets, make_inputs()):
        path.parent.mkdir(parents=True, exist_ok=True)
        tensor = numpy_helper.from_array(arr, name="x")
        path.write_bytes(tensor.SerializeToString())
        notes = ", ".join(n for n, on in (("180", rotate), ("noisy", noisy)) if on)
        print(f"{path}: {text!r}{' (' + notes + ')' if notes else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
