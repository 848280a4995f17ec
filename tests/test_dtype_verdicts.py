"""The gate's verdict per output dtype, through ``accuracy-gate check`` on real ONNX Runtime models.

Each case is a false pass, a mixed-up failure line or a crash on the main branch before these rules:
integer and bool outputs are exact unless they have a tolerance of their own, strings always exact
(a tolerance for one is an error), NaN on both sides is named (``nan_compare_equal`` makes it
equal), float8 outputs compare by value, and a failure line describes one element: its index, both
values and its own abs and rel errors, with the worst abs and worst rel error each at its iteration.
"""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import onnx
import pytest
from junitparser import Failure, JUnitXml
from onnx import TensorProto, helper, numpy_helper

from gate.action import overrides_from_inputs

from conftest import run_cli, write_gate_toml

ONNX_TYPES = {
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(object): TensorProto.STRING,
}


def identity_case(folder, inputs, goldens, toml="", to=None):
    """A model ``y = Identity(x)`` (or ``Cast(x, to)``), the stored inputs ``x`` and golden ``y``
    per iteration in the model-zoo layout; returns gate.toml."""
    x0 = np.asarray(inputs[0])
    out_type = to if to is not None else ONNX_TYPES[x0.dtype]
    node = (
        helper.make_node("Cast", ["x"], ["y"], to=to) if to is not None else helper.make_node("Identity", ["x"], ["y"])
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", ONNX_TYPES[x0.dtype], list(x0.shape))],
        [helper.make_tensor_value_info("y", out_type, list(x0.shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, folder / "m.onnx")
    for i, (x, y) in enumerate(zip(inputs, goldens)):
        data = folder / "data" / f"test_data_set_{i}"
        data.mkdir(parents=True)
        (data / "input_0.pb").write_bytes(numpy_helper.from_array(np.asarray(x), "x").SerializeToString())
        (data / "output_0.pb").write_bytes(numpy_helper.from_array(np.asarray(y), "y").SerializeToString())
    return write_gate_toml(folder, f'model = "m.onnx"\ninputs = "data"\n{toml}')


def check(config, *flags):
    junit = config.parent / "junit.xml"
    report = config.parent / "report.json"
    proc = run_cli("check", config, "--junit", junit, "--report", report, *flags)
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr
    return proc, junit, report


def failure_message(junit) -> str:
    case = next(iter(next(iter(JUnitXml.fromfile(str(junit))))))
    (failure,) = [r for r in case.result if isinstance(r, Failure)]
    return failure.message


def table_row(stdout, name="y"):
    return next(line.split() for line in stdout.splitlines() if line.startswith(name + " "))


def test_token_id_off_by_one_fails_under_a_float_tolerance(tmp_path):
    ids = np.array([[101, 14523, 2003, 102]], np.int64)
    golden = ids.copy()
    golden[0, 1] = 14524
    config = identity_case(tmp_path, [ids], [golden])
    proc, junit, report = check(config, "--rtol", "1e-4", "--atol", "1e-4")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert table_row(proc.stdout)[1:4] == ["exact", "1", "-"]
    message = failure_message(junit)
    assert message.startswith("FAILED: exact: element [0, 1] of iteration 0 differs (onnxrt 14523 vs golden 14524)")
    assert "1 of 4 elements differ" in message
    row = json.loads(report.read_text())["rows"][0]
    assert row["exact"] is True and row["worst_index"] == [0, 1]
    assert row["worst_element"]["values"] == [14523, 14524]


def test_int64_wraparound_through_the_gate(tmp_path):
    live = np.array([np.iinfo(np.int64).max, 5], np.int64)
    golden = np.array([-1, 5], np.int64)
    config = identity_case(tmp_path, [live], [golden], '[compare]\natol = { "" = 1e-5, "y" = 1.0 }\n')
    proc, junit, _ = check(config)
    assert proc.returncode == 1, proc.stdout
    message = failure_message(junit)
    assert "abs error 9.2234e+18 (atol 1)" in message
    assert "element [0] (onnxrt 9223372036854775807 vs golden -1, abs error 9.2234e+18" in message


def test_an_integer_output_with_its_own_tolerance_is_compared_under_it(tmp_path):
    live = np.array([10, 20, 30], np.int32)
    golden = np.array([10, 21, 30], np.int32)
    config = identity_case(tmp_path, [live], [golden], '[compare]\natol = { "" = 1e-5, "y" = 1 }\n')
    proc, _, _ = check(config)
    assert proc.returncode == 0, proc.stdout
    assert table_row(proc.stdout)[1] == "elemwise"
    # The same as a flag (an entry naming the output); a bare --atol is the float default only.
    config = identity_case(tmp_path / "b" if (tmp_path / "b").mkdir() is None else None, [live], [golden])
    assert check(config, "--atol", "y:1")[0].returncode == 0
    assert check(config, "--atol", "1", "--rtol", "1")[0].returncode == 1


def test_bool_output_is_exact(tmp_path):
    mask = np.array([True, False, True, True])
    golden = np.array([True, False, False, True])
    config = identity_case(tmp_path, [mask], [golden])
    proc, junit, _ = check(config, "--atol", "1", "--rtol", "1")
    assert proc.returncode == 1
    assert "element [2] of iteration 0 differs (onnxrt True vs golden False)" in failure_message(junit)


def test_strings_are_always_exact_and_a_tolerance_for_one_is_an_error(tmp_path):
    live = np.array(["cat", "dog"], dtype=object)
    golden = np.array(["cat", "dot"], dtype=object)
    config = identity_case(tmp_path, [live], [golden])
    proc, junit, _ = check(config, "--atol", "1", "--rtol", "1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "element [1] of iteration 0 differs (onnxrt 'dog' vs golden 'dot')" in failure_message(junit)
    proc, _, _ = check(config, "--atol", "y:1")
    assert proc.returncode == 2
    assert (
        "output 'y' holds object values, which are always compared exactly, but atol gives it a tolerance of its "
        f"own ({config}, --atol or the action input atol); remove that entry."
    ) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_nan_on_both_sides_is_named_and_nan_compare_equal_makes_it_equal(tmp_path):
    x = np.array([1.5, np.nan, -2.0, np.nan], np.float32)
    config = identity_case(tmp_path, [x], [x.copy()])
    proc, junit, _ = check(config)
    assert proc.returncode == 1
    message = failure_message(junit)
    assert "element [1] (onnxrt nan vs golden nan, abs error nan, rel error nan)" in message
    assert "NaN on both sides at the same 2 elements" in message and "--nan-compare-equal" in message
    assert check(config, "--nan-compare-equal")[0].returncode == 0
    config.write_text(config.read_text() + "[compare]\nnan_compare_equal = true\n")
    assert check(config)[0].returncode == 0
    assert check(config, "--no-nan-compare-equal")[0].returncode == 1
    # NaN on one side only still fails, and says so.
    other = x.copy()
    other[3] = 4.0
    config = identity_case(tmp_path / "one", [x], [other]) if (tmp_path / "one").mkdir() is None else None
    proc, junit, _ = check(config, "--nan-compare-equal")
    assert proc.returncode == 1
    assert "element [3] (onnxrt nan vs golden 4, abs error nan, rel error nan)" in failure_message(junit)


def test_nan_compare_equal_action_input():
    assert overrides_from_inputs({"INPUT_NAN_COMPARE_EQUAL": "true"})["nan_compare_equal"] is True
    assert overrides_from_inputs({"INPUT_NAN_COMPARE_EQUAL": ""})["nan_compare_equal"] is None


def test_failure_line_describes_one_element_and_each_worst_at_its_iteration(tmp_path):
    x0 = np.array([1.0, 100.0, 0.001, 5.0], np.float32)
    x1 = np.array([2.0, 3.0, 4.0, 5.0], np.float32)
    g0 = x0 + np.array([0, 0.5, 0, 0], np.float32)  # iteration 0: abs error 0.5 (rel 0.005)
    g1 = x1.copy()
    g1[3] = np.float32(-np.inf)  # iteration 1: live 5 against golden -inf
    g2 = np.array([1.0, 100.0, 0.001, 5.0], np.float32)
    g2[2] = 0.0011  # iteration 2: abs error 1e-4, rel error 0.0909
    config = identity_case(tmp_path, [x0, x1, x0], [g0, g1, g2], "[compare]\natol = 1e-5\nrtol = 1e-5\n")
    proc, junit, report = check(config)
    assert proc.returncode == 1
    message = failure_message(junit)
    # The worst abs error (inf, iteration 1) and the worst rel error (the max over iterations), each
    # at its own iteration; the element shown is iteration 1's, with both values.
    assert message.startswith("FAILED: worst max abs error inf (atol 1e-05), rel error nan (rtol 1e-05) at iteration 1")
    assert "element [3] (onnxrt 5 vs golden -inf, abs error inf, rel error nan)" in message
    # Without the infinite golden value: abs worst at iteration 0, rel worst at iteration 2.
    for name in ("test_data_set_1",):
        (tmp_path / "data" / name / "output_0.pb").write_bytes(numpy_helper.from_array(x1, "y").SerializeToString())
    proc, junit, report = check(config)
    message = failure_message(junit)
    assert message.startswith(
        "FAILED: worst max abs error 0.5 (atol 1e-05) at iteration 0, worst max rel error 0.090909 (rtol 1e-05) "
        "at iteration 2; worst element [1] of iteration 0 (onnxrt 100 vs golden 100.5, abs error 0.5, "
        "rel error 0.0049751)"
    ), message
    cells = table_row(proc.stdout)
    assert cells[2] == "0.5" and cells[4] == "0.090909"
    row = json.loads(report.read_text())["rows"][0]
    assert (row["worst_iteration"], row["rel_iteration"]) == (0, 2)
    element = row["worst_element"]
    assert element["values"] == [100.0, 100.5] and element["absdiff"] == 0.5 and element["nan_counts"] is None
    assert element["reldiff"] == float(np.float32(0.5) / np.float32(100.5))  # float32 arithmetic, as Polygraphy


def test_worst_element_of_elemwise_is_one_element(tmp_path):
    # Element 0 has the largest abs error but is within rtol; element 2 is the only one out of
    # tolerance. The line must give element 2's own errors, not element 0's abs error.
    x = np.array([1000.0, 1.0, 1.0], np.float32)
    golden = np.array([1000.5, 1.0, 1.1], np.float32)
    config = identity_case(tmp_path, [x], [golden], "[compare]\natol = 1e-5\nrtol = 1e-3\n")
    proc, junit, _ = check(config)
    assert proc.returncode == 1
    message = failure_message(junit)
    assert "element [2] (onnxrt 1 vs golden 1.1, abs error 0.1, rel error 0.090909)" in message
    assert "1 of 3 elements out of tolerance" in message


def test_float8_output_is_compared_by_value(tmp_path):
    x = np.array([0.47892547, -3.25, 1e-3, 200.0], np.float32)
    golden = x.astype(ml_dtypes.float8_e4m3fn)
    config = identity_case(tmp_path, [x], [golden], to=TensorProto.FLOAT8E4M3FN)
    proc, _, _ = check(config)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert table_row(proc.stdout)[1] == "elemwise"  # a float output: tolerances apply
    shifted = golden.view(np.uint8).copy()
    shifted[0] += 1  # the next float8 value: 0.46875 -> 0.5
    (tmp_path / "data" / "test_data_set_0" / "output_0.pb").write_bytes(
        numpy_helper.from_array(shifted.view(ml_dtypes.float8_e4m3fn), "y").SerializeToString()
    )
    proc, junit, _ = check(config, "--atol", "0.01", "--rtol", "0.01")
    assert proc.returncode == 1
    assert "element [0] (onnxrt 0.46875 vs golden 0.5, abs error 0.03125, rel error 0.0625)" in failure_message(junit)


@pytest.mark.parametrize("stat", ["max", "mean", "median"])
def test_summary_statistics_show_the_worst_element_beside_the_statistic(tmp_path, stat):
    x = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    golden = np.array([1.1, 2.2, 3.5, 4.1, 5.3], np.float32)
    config = identity_case(tmp_path, [x], [golden], f'[compare]\ncheck_error_stat = "{stat}"\natol = 0\nrtol = 0\n')
    proc, junit, _ = check(config)
    assert proc.returncode == 1
    message = failure_message(junit)
    assert message.startswith(f"FAILED: worst {stat} abs error ")
    assert "element [2] (onnxrt 3 vs golden 3.5, abs error 0.5, rel error 0.14286)" in message


def test_exact_outputs_under_check_average_fail_when_any_iteration_differs(tmp_path):
    ids = [np.array([1, 2, 3], np.int64)] * 3
    golden = [ids[0], np.array([1, 2, 4], np.int64), ids[0]]
    config = identity_case(tmp_path, ids, golden, '[compare]\ncheck_error_stat = "max"\ncheck_average = true\n')
    proc, junit, _ = check(config, "--atol", "10", "--rtol", "10")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # judged per iteration (the same verdict as the average of the maxima), shown so: no "(avg)"
    assert table_row(proc.stdout)[1:3] == ["exact", "1"] and "1/3" in table_row(proc.stdout)
    assert "exact: element [2] of iteration 1 differs (onnxrt 3 vs golden 4)" in failure_message(junit)


def test_exact_rows_and_worst_elements_survive_shards_merge_and_the_results_file(tmp_path):
    from gate.results_file import read_untrusted_report

    words = [np.array(["a", "b", f"w{k}"], dtype=object) for k in range(4)]
    golden = [w.copy() for w in words]
    golden[1][2] = "zz"
    golden[3][0] = "NaN"  # a string that reads "NaN" stays a string
    config = identity_case(tmp_path, words, golden)
    out = tmp_path / "out"
    full = run_cli("check", config, "--report", out / "full.json", "--junit", out / "full.xml")
    assert full.returncode == 1, full.stdout + full.stderr
    partials = []
    for i in (1, 2):
        partial = out / f"p{i}.json"
        leg = run_cli("check", config, "--shard", f"{i}/2", "--write-partial", partial, "--junit", out / f"{i}.xml")
        assert leg.returncode == 0, leg.stdout + leg.stderr
        partials.append(partial)
    merged = run_cli(
        "merge", *partials, "--report", out / "merged.json", "--junit", out / "merged.xml", "--root", tmp_path
    )
    assert merged.returncode == 1, merged.stdout + merged.stderr
    documents = [json.loads((out / name).read_text()) for name in ("full.json", "merged.json")]
    for doc in documents:
        doc.pop("duration_s"), doc.pop("scope", None)
    assert documents[0] == documents[1]
    row = documents[0]["rows"][0]
    assert row["exact"] is True and row["worst_iteration"] == 1
    assert row["worst_element"]["values"] == [{"text": "w1"}, {"text": "zz"}]
    back = read_untrusted_report(out / "merged.json").result.rows[0]
    assert back.exact and back.worst_values == ("w1", "zz") and back.worst_index == (2,)
    assert back.message() == failure_message(out / "full.xml")


@pytest.mark.parametrize("stat", ["median", "quantile", "mean"])
def test_exact_whatever_the_statistic(tmp_path, stat):
    # One token of five differs: its median (and 0.99 quantile of 5) abs error is 0 under a float
    # check, yet the output is wrong. Every report says "exact" (tests/test_exact_vocabulary.py).
    ids = np.array([5, 6, 7, 8, 9], np.int64)
    golden = np.array([5, 6, 7, 8, 10], np.int64)
    config = identity_case(tmp_path, [ids], [golden], f'[compare]\ncheck_error_stat = "{stat}"\natol = 1\nrtol = 1\n')
    proc, junit, report = check(config)
    assert proc.returncode == 1, proc.stdout
    assert table_row(proc.stdout)[1] == "exact"
    assert failure_message(junit).startswith(
        "FAILED: exact: element [4] of iteration 0 differs (onnxrt 9 vs golden 10); 1 of 5 elements differ"
    )
    row = json.loads(report.read_text())["rows"][0]
    assert (row["stat"], row["exact"], row["mismatch_count"]) == ("exact", True, 1)
