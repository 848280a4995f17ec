"""Outputs of ONNX's narrow types (float8, bfloat16, int4) from ONNX Runtime, compared by value.

onnxruntime returns float8e4m3fn outputs as uint8 bit patterns and refuses bfloat16 / other float8 /
int4 outputs in ``InferenceSession.run``; golden files of them read back as ml_dtypes arrays. The
runner returns the same ml_dtypes arrays, and the comparator widens them exactly (float32 / int32).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
from gate.comparator import IterationResult, SimpleCompareFunc
from gate.comparator.dtypes import cast_up

X = np.array([[0.47892547, -3.25, 1e-3, 200.0], [0.5, -0.0, 2.0, 7.0]], np.float32)
X_INT = np.array([[0.4, -3.25, 1e-3, 6.6], [1.2, -0.0, 2.0, 7.0]], np.float32)  # in range, no halves

CASTS = [
    (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
    (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),
    (TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
    (TensorProto.BFLOAT16, ml_dtypes.bfloat16),
    (TensorProto.INT4, ml_dtypes.int4),
    (TensorProto.UINT4, ml_dtypes.uint4),
]


def _cast_model(tmp_path, to):
    node = helper.make_node("Cast", ["x"], ["y"], to=to)
    graph = helper.make_graph(
        [node],
        "cast",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", to, [2, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    path = tmp_path / "cast.onnx"
    onnx.save(model, path)
    return path


def _input(dtype):
    if dtype == ml_dtypes.uint4:
        return np.abs(X_INT)
    return X_INT if dtype == ml_dtypes.int4 else X


def _expected(dtype):
    if dtype in (ml_dtypes.int4, ml_dtypes.uint4):
        return np.rint(_input(dtype)).astype(dtype)
    return X.astype(dtype)


@pytest.mark.parametrize(("to", "dtype"), CASTS, ids=[np.dtype(d).name for _, d in CASTS])
def test_onnxrt_returns_narrow_outputs_as_ml_dtypes(tmp_path, to, dtype):
    with OnnxrtRunner(SessionFromOnnx(_cast_model(tmp_path, to))) as runner:
        y = runner.infer({"x": _input(dtype)})["y"]
    assert y.dtype == np.dtype(dtype)
    golden = numpy_helper.to_array(numpy_helper.from_array(_expected(dtype), "y"))  # as a golden file reads back
    assert golden.dtype == y.dtype
    np.testing.assert_array_equal(y.astype(np.float32), golden.astype(np.float32))


def test_narrow_dtypes_are_compared_by_value():
    golden = np.array([1.0, 2.0, 0.46875, -448.0], ml_dtypes.float8_e4m3fn)
    live = np.array([1.0, 2.0, 0.5, -448.0], ml_dtypes.float8_e4m3fn)
    assert cast_up(live).dtype == np.float32
    result = SimpleCompareFunc(atol=0.01, rtol=0.01)(
        IterationResult({"y": live}, runner_name="live"), IterationResult({"y": golden}, runner_name="golden")
    )["y"]
    # The values 0.5 vs 0.46875 (bit patterns 0x30 vs 0x2F, which differ by 1 as uint8).
    assert result.max_absdiff == 0.03125 and result.worst_index == (2,) and not result
    i4 = SimpleCompareFunc(atol=0, rtol=0)(
        IterationResult({"y": np.array([-8, 7], ml_dtypes.int4)}, runner_name="live"),
        IterationResult({"y": np.array([7, 7], ml_dtypes.int4)}, runner_name="golden"),
    )["y"]
    assert i4.max_absdiff == 15.0 and not i4


def test_npz_layout_refuses_ml_dtypes_at_record_time(tmp_path):
    from gate.data import write_iteration
    from gate.errors import GateError

    with pytest.raises(
        GateError, match=r"output .y. is bfloat16, which the npz layout cannot store .*\(--layout onnx-zoo\)"
    ):
        write_iteration(tmp_path, "npz", "output", 0, {"y": X.astype(ml_dtypes.bfloat16)})
    assert not list(tmp_path.iterdir())


def test_raw_bytes_of_an_unknown_type_are_one_error_naming_the_dtype():
    from gate.comparator.compare import SimpleThreshold, compare_arrays

    result = compare_arrays(np.zeros(3, np.float32), np.zeros(3, "V2"), SimpleThreshold("max", 0.0, 0.0))
    assert not result and result.error == (
        "holds |V2 values (raw bytes of a type numpy does not know), which cannot be compared"
    )


@pytest.mark.parametrize(
    ("elem_type", "dtype"),
    [
        (TensorProto.BFLOAT16, ml_dtypes.bfloat16),
        (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),  # numpy kind "f"
        (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
        (TensorProto.INT4, ml_dtypes.int4),  # packed two per byte; odd element count
        (TensorProto.UINT4, ml_dtypes.uint4),
    ],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_narrow_inputs_are_fed_with_their_onnx_type(tmp_path, elem_type, dtype):
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
        "cast_in",
        [helper.make_tensor_value_info("x", elem_type, [5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "cast_in.onnx")
    values = np.array([1.0, -2.0, 3.0, 0.0, 7.0], np.float32)
    if dtype == ml_dtypes.uint4:
        values = np.abs(values)
    x = values.astype(dtype)
    with OnnxrtRunner(SessionFromOnnx(tmp_path / "cast_in.onnx")) as runner:
        y = runner.infer({"x": x})["y"]
    np.testing.assert_array_equal(y, x.astype(np.float32))


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.int4])
def test_polygraphy_json_layout_refuses_ml_dtypes_at_record_time(tmp_path, dtype):
    # Failed before: record --layout polygraphy-json wrote |V2 / |V1 / '<f1' payloads (exit 0) that check
    # could not read (exit 2: "holds |V2 values", "descr '<f1' is not a valid dtype").
    from gate.data import write_iteration
    from gate.data.polygraphy_codec import to_json
    from gate.errors import GateError

    name = np.dtype(dtype).name
    with pytest.raises(GateError, match=rf"^output 'y' is {name}, which Polygraphy's JSON cannot hold .*onnx-zoo\)\.$"):
        write_iteration(tmp_path, "polygraphy-json", "output", 0, {"y": _expected(dtype)})
    assert not list(tmp_path.iterdir())
    with pytest.raises(GateError, match=f"Cannot save an array of dtype {name}"):  # run --save-outputs too
        to_json({"y": _expected(dtype)})


def test_record_to_polygraphy_json_refuses_bfloat16_in_one_line(tmp_path):
    from conftest import run_cli

    model = _cast_model(tmp_path, TensorProto.BFLOAT16)
    (tmp_path / "data" / "test_data_set_0").mkdir(parents=True)
    (tmp_path / "data" / "test_data_set_0" / "input_0.pb").write_bytes(
        numpy_helper.from_array(X, "x").SerializeToString()
    )
    config = tmp_path / "gate.toml"
    config.write_text(f'model = "{model.name}"\ninputs = "data"\ngolden = "golden"\n')
    proc = run_cli("record", config, "--layout", "polygraphy-json", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "accuracy-gate: error: iteration 0: output 'y' is bfloat16, which Polygraphy's JSON cannot hold (np.save "
        "writes it as raw bytes; Polygraphy keeps such values as torch tensors only); record it in the ONNX "
        "model-zoo layout (--layout onnx-zoo)."
    ]
    assert not list((tmp_path / "golden").glob("*.json")) if (tmp_path / "golden").exists() else True
