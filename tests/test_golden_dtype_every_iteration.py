"""A golden output stored in another dtype than the runner produces is could not evaluate (exit 2) in
EVERY iteration, not only when it sits in the worst one (the rows' dtypes came from the worst
iteration alone, so an equal-valued float64 golden in iteration 1 of 4 passed with exit 0). Over npz,
model-zoo and Polygraphy JSON golden sets, ``--jobs 2``, ``--shard`` + ``merge`` and
``run --load-outputs``. Real ONNX Runtime on a small generated model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from gate.data.polygraphy_codec import load_json, save_json

from conftest import run_cli, write_gate_toml

ITERATIONS = 4


def _model(path: Path) -> Path:
    """x float32 [1, 8] -> y = relu(x) float32, k = argmax(x) int64 [1], h = x as float16."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["y"]),
            helper.make_node("ArgMax", ["x"], ["k"], axis=1, keepdims=0),
            helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
        ],
        "three",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8]),
            helper.make_tensor_value_info("k", TensorProto.INT64, [1]),
            helper.make_tensor_value_info("h", TensorProto.FLOAT16, [1, 8]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def _recorded(folder: Path, layout: str = "npz") -> Path:
    _model(folder / "m.onnx")
    (folder / "inputs").mkdir()
    for i in range(ITERATIONS):
        x = np.random.default_rng(i).standard_normal((1, 8)).astype(np.float32)
        np.savez(folder / "inputs" / f"{i}.npz", x=x)
    cfg = write_gate_toml(folder, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    proc = run_cli("record", cfg, "--layout", layout)
    assert proc.returncode == 0, proc.stderr
    assert run_cli("check", cfg, "--report", folder / "ok.json").returncode == 0
    return cfg


def _resave_npz(path: Path, output: str, dtype) -> None:
    golden = dict(np.load(path))
    golden[output] = golden[output].astype(dtype)  # the same values in another dtype
    np.savez(path, **golden)


def _resave_json(path: Path, output: str, dtype) -> None:
    run = load_json(path)  # a per-iteration file: one runner's one iteration
    (_, [iteration]) = run.lst[0]
    iteration[output] = iteration[output].astype(dtype)
    save_json(run, path)


def _assert_cannot_evaluate(proc, output, iteration, golden_file, stored, produced) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert f"could not compare '{output}' (is {stored} in the golden outputs but onnxrt produces {produced}" in line
    assert f"at iteration {iteration} (" in line and golden_file in line, line


def test_npz_golden_of_another_dtype_in_a_non_worst_iteration_cannot_evaluate(tmp_path):
    cfg = _recorded(tmp_path)
    _resave_npz(tmp_path / "golden" / "1.npz", "y", np.float64)
    proc = run_cli("check", cfg, "--report", tmp_path / "r.json")
    _assert_cannot_evaluate(proc, "y", 1, "golden/1.npz", "float64", "float32")
    rows = {row["output"]: row for row in json.loads((tmp_path / "r.json").read_text())["rows"]}
    assert rows["y"]["dtypes"] == ["float32", "float64"] and rows["y"]["worst_iteration"] == 1
    assert rows["k"]["error"] is None and rows["h"]["error"] is None
    _assert_cannot_evaluate(run_cli("check", cfg, "--jobs", "2"), "y", 1, "golden/1.npz", "float64", "float32")


def test_int64_output_stored_as_int32_in_iteration_1_or_3_cannot_evaluate(tmp_path):
    cfg = _recorded(tmp_path)
    for iteration in (1, 3):
        path = tmp_path / "golden" / f"{iteration}.npz"
        kept = path.read_bytes()
        _resave_npz(path, "k", np.int32)
        proc = run_cli("check", cfg)
        _assert_cannot_evaluate(proc, "k", iteration, f"golden/{iteration}.npz", "int32", "int64")
        path.write_bytes(kept)


def test_model_zoo_float16_output_stored_as_float32_cannot_evaluate(tmp_path):
    cfg = _recorded(tmp_path, "onnx-zoo")
    path = tmp_path / "golden" / "test_data_set_2" / "output_2.pb"
    tensor = onnx.load_tensor(str(path))
    assert tensor.name == "h" and tensor.data_type == TensorProto.FLOAT16
    wide = numpy_helper.to_array(tensor).astype(np.float32)
    onnx.save_tensor(numpy_helper.from_array(wide, tensor.name), str(path))
    proc = run_cli("check", cfg)
    _assert_cannot_evaluate(proc, "h", 2, "test_data_set_2", "float32", "float16")
    _assert_cannot_evaluate(run_cli("check", cfg, "--jobs", "2"), "h", 2, "test_data_set_2", "float32", "float16")


def test_polygraphy_json_golden_of_another_dtype_cannot_evaluate(tmp_path):
    cfg = _recorded(tmp_path, "polygraphy-json")
    path = sorted((tmp_path / "golden").glob("*.json"))[1]
    _resave_json(path, "y", np.float64)
    _assert_cannot_evaluate(run_cli("check", cfg), "y", 1, path.name, "float64", "float32")


def test_run_load_outputs_of_another_dtype_in_a_non_worst_iteration_cannot_evaluate(tmp_path):
    _recorded(tmp_path, "polygraphy-json")
    path = sorted((tmp_path / "golden").glob("*.json"))[3]
    _resave_json(path, "k", np.int32)
    proc = run_cli("run", "m.onnx", "--onnxrt", "--load-inputs", "inputs", "--load-outputs", "golden", cwd=tmp_path)
    _assert_cannot_evaluate(proc, "k", 3, path.name, "int32", "int64")


def test_a_shard_whose_non_worst_iteration_differs_fails_the_merge(tmp_path):
    cfg = _recorded(tmp_path)
    _resave_npz(tmp_path / "golden" / "2.npz", "y", np.float64)  # shard 1/2 holds iterations 0 and 2
    parts = []
    for i in (1, 2):
        part = tmp_path / f"part-{i}.json"
        run_cli("check", cfg, "--shard", f"{i}/2", "--write-partial", part, cwd=tmp_path)
        parts.append(part)
    proc = run_cli("merge", *parts, "--report", tmp_path / "merged.json", cwd=tmp_path)
    _assert_cannot_evaluate(proc, "y", 2, "golden/2.npz", "float64", "float32")
    assert json.loads((tmp_path / "merged.json").read_text())["status"] == "error"


def test_a_compare_function_row_checks_every_iteration_too(tmp_path):
    cfg = _recorded(tmp_path)
    cfg.write_text(cfg.read_text() + '[compare]\ncompare_func = { "" = "simple", y = "cosine" }\n')
    assert run_cli("check", cfg).returncode == 0
    _resave_npz(tmp_path / "golden" / "3.npz", "y", np.float64)
    _assert_cannot_evaluate(run_cli("check", cfg), "y", 3, "golden/3.npz", "float64", "float32")
