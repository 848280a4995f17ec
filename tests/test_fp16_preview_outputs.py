"""The fp16 conversion (``gate.backend.trt.precision.convert_model``, used by ``check
--preview-precision fp16`` and fp16 on strongly typed TensorRT) of a model whose graph output other
nodes also read: a Conv+Relu feature map that is an output and feeds Flatten+MatMul+Softmax. Failed
before: onnxconverter-common's ``keep_io_types`` cast the output back to float32 but left its readers
declared float16, and ONNX Runtime refused the converted model ("Type (tensor(float16)) of output arg
(flat) of node () does not match expected type (tensor(float))"), exit 2 for the preview."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from gate.backend.trt.precision import convert_model

pytest.importorskip("onnxconverter_common", reason="the precision extra is not installed (pip install '.[precision]')")


def _model(path):
    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.2, "w"),
        numpy_helper.from_array(rng.standard_normal((4 * 8 * 8, 5)).astype(np.float32) * 0.05, "m"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["conv"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["features"]),
        helper.make_node("Flatten", ["features"], ["flat"]),
        helper.make_node("MatMul", ["flat", "m"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, 4, 8, 8]),
            helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, 5]),
        ],
        initializer=weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_graph_output_that_other_nodes_read_converts_and_runs(tmp_path):
    path = _model(tmp_path / "model.onnx")
    converted, conv = convert_model(path, "fp16", tmp_path / "cache")
    model = onnx.load(str(converted))
    assert [o.name for o in model.graph.output] == ["features", "probs"]
    assert all(o.type.tensor_type.elem_type == TensorProto.FLOAT for o in model.graph.output)  # keep_io_types
    assert any(t.data_type == TensorProto.FLOAT16 for t in model.graph.initializer)
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    fp32 = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    fp16 = ort.InferenceSession(str(converted), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    for full, half in zip(fp32, fp16):
        assert half.dtype == np.float32 and half.shape == full.shape
        assert 0 < np.max(np.abs(full - half)) < 1e-2  # the precision changed, the model did not
    assert conv["settings"]["graph_outputs_apart"] is True  # part of the cache key


def test_a_model_without_such_outputs_is_converted_as_before(tmp_path):
    path = _model(tmp_path / "model.onnx")
    model = onnx.load(str(path))
    del model.graph.output[0]  # only probs
    onnx.save(model, str(path))
    converted, _ = convert_model(path, "fp16", tmp_path / "cache")
    assert not [n for n in onnx.load(str(converted)).graph.node if n.name.endswith(".gate_output")]


def test_gate_toml_cache_dir_is_relative_to_its_folder(example, tmp_path):
    """``[trt] cache_dir`` in gate.toml, as its other paths, is relative to gate.toml's folder; the
    ``--engine-cache`` flag to the working directory. Failed before: run from another folder, the
    converted model went to ``<working directory>/cache``."""
    from conftest import run_cli

    cfg = example / "gate.toml"
    cfg.write_text(cfg.read_text() + '\n[trt]\ncache_dir = "cache"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    junit = ("--junit", example / "j.xml")
    proc = run_cli("check", cfg, "--preview-precision", "fp16", *junit, cwd=elsewhere)
    assert proc.returncode in (0, 1), proc.stderr
    assert list((example / "cache" / "converted").glob("*.onnx")) and not (elsewhere / "cache").exists()
    proc = run_cli("check", cfg, "--preview-precision", "fp16", "--engine-cache", "flagged", *junit, cwd=example)
    assert proc.returncode in (0, 1), proc.stderr
    assert list((example / "flagged" / "converted").glob("*.onnx"))
