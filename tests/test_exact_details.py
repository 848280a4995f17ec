"""The terminal's failure details of an output compared exactly (integers, bools and strings without a
tolerance, gate.dtype_rules): the differing elements (count, share, the largest difference with both
values), never a float tolerance's advice ("minimum tolerance to pass") or the relative error's
zero-reference note, which cannot apply to them."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from gate.comparator.details import error_details

from conftest import run_cli, write_gate_toml


def identity_gate(folder, dtype, inputs, goldens):
    """An Identity model of ``dtype`` over stored npz inputs and golden outputs; returns gate.toml."""
    shape = list(np.asarray(inputs[0]).shape)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", dtype, shape)],
        [helper.make_tensor_value_info("y", dtype, shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(folder / "m.onnx"))
    (folder / "inputs").mkdir()
    (folder / "golden").mkdir()
    for i, (x, y) in enumerate(zip(inputs, goldens)):
        np.savez(folder / "inputs" / f"{i}.npz", x=x)
        np.savez(folder / "golden" / f"{i}.npz", y=y)
    return write_gate_toml(folder, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')


def int_gate(folder):
    """int64 [2, 3], three iterations; iteration 0's golden differs at [0, 1] by 5 (1 vs 6) and at
    [1, 2] by 1, and its reference holds a 0 (at [0, 0])."""
    inputs = [np.arange(6, dtype=np.int64).reshape(2, 3) + i for i in range(3)]
    goldens = [x.copy() for x in inputs]
    goldens[0][0, 1] += 5
    goldens[0][1, 2] -= 1
    return identity_gate(folder, TensorProto.INT64, inputs, goldens)


def test_an_integer_failure_shows_the_differing_elements_not_tolerance_advice(tmp_path):
    proc = run_cli("check", int_gate(tmp_path))
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "minimum tolerance" not in out
    assert "reference elements are 0" not in out
    assert "rel error" not in out.split("\n\n", 1)[1]  # below the table: no relative error of integers
    assert "FAILED: exact: element [0, 1] of iteration 0 differs (onnxrt 1 vs golden 6); 2 of 6 elements differ" in out
    assert "    differing elements: 2 of 6 (33.3%) in iteration 0\n" in out
    assert "    largest difference: 5 at element [0, 1] (onnxrt 1 vs golden 6)\n" in out
    assert "    abs difference of the differing elements: mean 3, median 3, max 5, std 2\n" in out


def test_a_bool_failure_names_the_first_differing_element(tmp_path):
    x = np.array([[True, False, True, True]])
    golden = x.copy()
    golden[0, 2] = False
    proc = run_cli("check", identity_gate(tmp_path, TensorProto.BOOL, [x], [golden]))
    assert proc.returncode == 1, proc.stderr
    assert "minimum tolerance" not in proc.stdout
    assert "    differing elements: 1 of 4 (25%) in iteration 0\n" in proc.stdout
    assert "    first differing element: element [0, 2] (onnxrt True vs golden False)\n" in proc.stdout
    assert "histogram" not in proc.stdout


def test_exact_details_of_text_count_the_differing_strings():
    a = np.array(["cat", "dog", "eel"], dtype=object)
    b = np.array(["cat", "dot", "elk"], dtype=object)
    found = error_details(a, b, exact=True)
    assert found["differing"] == 2 and found["elements"] == 3
    assert found["largest"] == ((1,), "dog", "dot", None)
    assert found["abs"] is None and found["histogram"] == []
    assert error_details(a, a.copy(), exact=True) is None


def test_a_compare_function_row_gets_no_tolerance_advice(tmp_path):
    from test_threshold_digits import float_gate

    proc = run_cli("check", float_gate(tmp_path), "--compare-func", "cosine", "-v")
    assert proc.returncode == 0, proc.stderr
    assert "worst cosine 0.999999938 (min 0.997)" in proc.stdout  # the default minimum
    assert "minimum tolerance" not in proc.stdout  # it read "atol >= 1 or rtol >= n/a (cosine error)"
