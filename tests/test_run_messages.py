"""``accuracy-gate run``'s lines name its own flags and what it wrote: a shape that does not fit, and
the dynamic-dimension warning, name ``--input-shapes`` (they named the Python argument
``input_shapes``), and ``--save-inputs`` / ``--save-outputs`` say where they saved (they said nothing).
Real ONNX Runtime on the shipped example's model."""

from __future__ import annotations

import shutil

from conftest import EXAMPLE, run_cli


def test_run_names_its_flags_and_what_it_saved(tmp_path):
    shutil.copy(EXAMPLE / "model.onnx", tmp_path / "model.onnx")
    proc = run_cli("run", "model.onnx", "--onnxrt", "--input-shapes", "x:[1,3,48]", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.startswith("accuracy-gate: error: --input-shapes gives input 'x' the shape (1, 3, 48)")
    proc = run_cli(
        "run", "model.onnx", "--onnxrt", "--onnxrt", "--save-inputs", "i.json", "--save-outputs", "o.json",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "(set --input-shapes to choose)" in proc.stderr + proc.stdout
    assert "input_shapes" not in proc.stderr + proc.stdout
    assert "saved inputs: i.json\nsaved outputs: o.json\n" in proc.stdout
    assert (tmp_path / "i.json").is_file() and (tmp_path / "o.json").is_file()
