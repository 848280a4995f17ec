"""Mark all for ONNX Runtime (``onnx_with_outputs``): every intermediate tensor becomes a graph output,
checked against real ONNX Runtime runs of the unmodified model and of sub-models cut out of it."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

from gate.backend.trt import not_produced, onnx_tensor_names, onnx_with_outputs
from gate.errors import GateError

from conftest import EXAMPLE, EXAMPLE_OUTPUT, make_small_model


def _session(model) -> ort.InferenceSession:
    data = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"])


def _run(model, feed) -> dict:
    session = _session(model)
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feed)))


def test_every_intermediate_tensor_of_a_small_model_is_an_output(tmp_path):
    path = make_small_model(tmp_path / "small.onnx")
    original = onnx.load(str(path))
    marked = onnx_with_outputs(path)
    assert [o.name for o in marked.graph.output] == ["y", "s", "xw", "pre"]
    assert [o.name for o in original.graph.output] == ["y", "s"]  # the input model is not changed
    assert marked.graph.output[2].type.tensor_type.elem_type == onnx.TensorProto.FLOAT  # inferred type kept

    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    outputs = _run(marked, {"x": x})
    weights = {t.name: numpy_helper.to_array(t) for t in original.graph.initializer}
    np.testing.assert_allclose(outputs["xw"], x @ weights["W"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(outputs["pre"], outputs["xw"] + weights["b"], rtol=1e-6)
    np.testing.assert_array_equal(outputs["y"], np.maximum(outputs["pre"], 0))
    unmodified = _run(path, {"x": x})
    for name in ("y", "s"):  # the verdict outputs are the same tensors as the unmodified model's
        np.testing.assert_allclose(outputs[name], unmodified[name], rtol=1e-6, atol=1e-6)


def test_mark_all_on_a_real_model_matches_sub_models_cut_out_of_it(tmp_path):
    model_path = EXAMPLE / "model.onnx"
    x = numpy_helper.to_array(onnx.load_tensor(str(EXAMPLE / "data" / "test_data_set_0" / "input_0.pb")))
    names = onnx_tensor_names(model_path)
    marked = onnx_with_outputs(model_path)
    outputs = _run(marked, {"x": x})
    assert list(outputs)[0] == EXAMPLE_OUTPUT
    assert set(outputs) == set(names)
    unmodified = _run(model_path, {"x": x})
    np.testing.assert_allclose(outputs[EXAMPLE_OUTPUT], unmodified[EXAMPLE_OUTPUT], rtol=1e-5, atol=1e-6)

    # Independent check of some intermediates: cut the model at that tensor and run the cut model.
    float_names = [n for n in names if outputs[n].dtype == np.float32 and outputs[n].ndim == 4]
    picks = [float_names[i] for i in (0, len(float_names) // 3, 2 * len(float_names) // 3, -1)]
    extractor = onnx.utils.Extractor(onnx.shape_inference.infer_shapes(onnx.load(str(model_path))))
    for name in picks:
        cut = extractor.extract_model(["x"], [name])
        expected = _run(cut, {"x": x})[name]
        assert outputs[name].shape == expected.shape
        np.testing.assert_allclose(outputs[name], expected, rtol=1e-4, atol=1e-5, err_msg=name)


def test_named_outputs_replace_the_graph_outputs_and_patterns_work(tmp_path):
    path = make_small_model(tmp_path / "small.onnx")
    assert [o.name for o in onnx_with_outputs(path, ["pre"]).graph.output] == ["pre"]
    assert [o.name for o in onnx_with_outputs(path, ["s", "x*"]).graph.output] == ["s", "x", "xw"]
    assert [o.name for o in onnx_with_outputs(path, "*", exclude_outputs=["p*"]).graph.output] == ["y", "s", "xw"]
    x = np.ones((2, 64), np.float32)
    assert list(_run(onnx_with_outputs(path, ["pre"]), {"x": x})) == ["pre"]
    with pytest.raises(GateError, match=r"--onnx-outputs 'nope' matches no tensor of the model; it has 'x', 'xw'"):
        onnx_with_outputs(path, ["nope"])
    with pytest.raises(GateError, match="missing.onnx: model file not found"):
        onnx_with_outputs(tmp_path / "missing.onnx")


def test_constant_nodes_are_not_listed_and_not_produced_keeps_order():
    from onnx import TensorProto, helper

    nodes = [
        helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones(2, np.float32))),
        helper.make_node("Add", ["x", "c"], ["a"]),
        helper.make_node("Relu", ["a"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert onnx_tensor_names(model) == ["a", "y"]
    assert [o.name for o in onnx_with_outputs(model).graph.output] == ["y", "a"]
    assert not_produced(["a", "b", "y", "c"], {"y": 1, "a": 2}) == ["b", "c"]
