"""``run --load-outputs`` with a Polygraphy JSON file beside inputs in the ONNX model-zoo layout:
before the fix it stopped with "no golden outputs yet; record them with 'accuracy-gate record
accuracy-gate run'" (the check for output_<K>.pb files beside model-zoo inputs looked into the JSON
file as if it were a folder). Real ONNX Runtime on the shipped example."""

from __future__ import annotations

from conftest import run_cli


def test_run_loads_json_golden_outputs_beside_model_zoo_inputs(example):
    saved = run_cli("run", "model.onnx", "--onnxrt", "--load-inputs", "data", "--save-outputs", "out.json", cwd=example)
    assert saved.returncode == 0, saved.stderr
    proc = run_cli("run", "model.onnx", "--onnxrt", "--load-inputs", "data", "--load-outputs", "out.json", cwd=example)
    assert proc.returncode == 0, proc.stderr
    assert "PASSED: 1 of 1 outputs within tolerance over 8 iterations" in proc.stdout
