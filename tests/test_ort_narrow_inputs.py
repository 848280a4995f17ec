"""Inputs of the narrow ONNX types (bfloat16, float8, int4, int2) through the ONNX Runtime runner:
onnxruntime's ``run`` refuses them as numpy arrays, so the runner feeds OrtValues (real models)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_ml_dtypes_outputs import CASTS

from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx

from conftest import run_cli, write_gate_toml


def identity_model(path, elem_type, out_type=None, opset=21):
    """y = Identity(x), or y = Cast(x, to=out_type): [5] in, [5] out."""
    node = (
        helper.make_node("Identity", ["x"], ["y"])
        if out_type is None
        else helper.make_node("Cast", ["x"], ["y"], to=out_type)
    )
    graph = helper.make_graph(
        [node],
        "identity",
        [helper.make_tensor_value_info("x", elem_type, [5])],
        [helper.make_tensor_value_info("y", out_type or elem_type, [5])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10 if opset < 25 else 11  # Cast takes 2-bit types from opset 25
    onnx.save(model, str(path))
    return path


@pytest.mark.parametrize(
    "elem_type, dtype", [*CASTS, (TensorProto.INT2, ml_dtypes.int2), (TensorProto.UINT2, ml_dtypes.uint2)]
)
def test_narrow_inputs_reach_onnxruntime_and_come_back_equal(tmp_path, elem_type, dtype):
    # On main: "onnxruntime failed during inference (Numpy_type 262 can't be converted to MLDataType.)".
    model = identity_model(tmp_path / "id.onnx", elem_type, TensorProto.FLOAT, opset=25)
    values = {ml_dtypes.uint4: [1, 2, 3, 0, 15], ml_dtypes.int2: [1, -2, 0, -1, 1], ml_dtypes.uint2: [1, 2, 3, 0, 3]}
    x = np.array(values.get(dtype, [1, -2, 3, 0, 7]), dtype=np.float32).astype(dtype)
    with OnnxrtRunner(SessionFromOnnx(model)) as runner:
        y = runner.infer({"x": x})["y"]
    assert y.dtype == np.float32 and y.tolist() == x.astype(np.float32).tolist()


def test_record_and_check_a_float8_model_in_the_model_zoo_layout(tmp_path):
    # float8 in and out: run() refuses the input array, then the output type (read from its buffer).
    identity_model(tmp_path / "id.onnx", TensorProto.FLOAT8E5M2)
    data = tmp_path / "data" / "test_data_set_0"
    data.mkdir(parents=True)
    x = np.array([0.5, -1.5, 448, 0, 2], np.float32).astype(ml_dtypes.float8_e5m2)
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    cfg = write_gate_toml(tmp_path, 'model = "id.onnx"\ninputs = "data"\ngolden = "data"\n')
    proc = run_cli("record", cfg)
    assert proc.returncode == 0, proc.stderr
    golden = numpy_helper.to_array(onnx.load_tensor(str(data / "output_0.pb")))
    assert golden.dtype == np.dtype(ml_dtypes.float8_e5m2) and golden.astype(np.float32).tolist() == [
        0.5,
        -1.5,
        448,
        0,
        2,
    ]
    proc = run_cli("check", cfg, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
