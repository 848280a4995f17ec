"""ONNX's own backend node tests through ``accuracy-gate check`` (``bench/onnx_node_cases.py``), on
a fixed subset vendored in ``tests/data/onnx_node`` (36 cases of ``onnx==1.22.0``'s
``onnx/backend/test/data/node``, 0.3 MB, Apache-2.0: see its NOTICE.md): every verdict is the one
ONNX's own criterion (``onnx.backend.test.runner.Runner.assert_similar_outputs`` on onnxruntime's
outputs) implies, no case crashes, and the verdicts are pinned with their reasons."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest

from conftest import ROOT

NODE = ROOT / "tests" / "data" / "onnx_node"


def harness():
    spec = importlib.util.spec_from_file_location("onnx_node_cases", ROOT / "bench" / "onnx_node_cases.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["onnx_node_cases"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


cases = harness()
NAN_RULE = cases._supports_nan_compare_equal()

# case -> (verdict, why), under the gate's rules at ONNX's tolerances (atol 1e-7, rtol 1e-3)
EXPECTED = {
    "test_abs": "PASS",
    "test_ai_onnx_ml_label_encoder_string_int": "PASS",  # string input, int64 output
    "test_cast_FLOAT8E4M3FN_to_FLOAT": "PASS",  # a float8 input, fed as an OrtValue (run() refuses the array)
    "test_cast_INT4_to_FLOAT": "PASS",  # an int4 input, packed into an OrtValue
    "test_cast_UINT2_to_FLOAT": "PASS",  # a uint2 input, packed four per byte
    "test_cast_FLOAT_to_BFLOAT16": "PASS",  # read from onnxruntime's buffer (run() has no numpy type for it)
    "test_cast_FLOAT_to_FLOAT16": "PASS" if NAN_RULE else "FAIL",  # NaN on both sides, equal bit for bit
    "test_cast_FLOAT_to_FLOAT8E4M3FN": "PASS",  # onnxruntime returns uint8 bit patterns, compared as float8
    "test_cast_FLOAT_to_INT4": "PASS",  # packed int4, read from onnxruntime's buffer
    "test_ceil": "PASS",
    "test_dft_rfft": "FAIL",  # onnxruntime's DFT is off by up to 2e-4 where the reference is ~0; ONNX fails it too
    "test_equal_string": "PASS",
    "test_identity_opt": "PASS",  # optional(seq(tensor)) as OptionalProto
    "test_identity_sequence": "PASS",
    "test_if_opt": "PASS",
    "test_isinf_negative": "PASS",
    "test_isnan": "PASS",
    "test_optional_get_element_optional_sequence": "PASS",
    "test_optional_has_element_empty_no_input_optional_input": "PASS",
    "test_optional_has_element_empty_optional_input": "PASS",  # an empty OptionalProto fed as None
    "test_reduce_max_empty_set": "PASS",
    "test_reduce_sum_empty_set": "PASS",
    "test_regex_full_match_empty": "PASS",
    "test_sequence_insert_at_back": "PASS",
    "test_sequence_map_identity_2_sequences": "PASS",
    "test_split_to_sequence_2": "PASS",  # a ragged sequence (items [1, 6] and [2, 6])
    "test_string_concat": "PASS",
    "test_string_split_basic": "PASS",
    "test_string_split_empty_tensor": "PASS",
    "test_strnormalizer_export_monday_empty_output": "ERROR",  # onnxruntime cannot load it (locale)
    "test_top_k": "PASS",
    "test_top_k_same_values": "PASS",
    "test_top_k_uint64": "ERROR",  # onnxruntime has no TopK(24) kernel for uint64
    "test_unique_length_1": "PASS",
    "test_unique_not_sorted_without_axis": "PASS",
    "test_unique_sorted_with_axis": "PASS",
}


@pytest.fixture(scope="module")
def results():
    assert sorted(EXPECTED) == sorted(p.name for p in NODE.iterdir() if p.is_dir())
    return {r.case: r for r in cases.run_cases(NODE, sorted(EXPECTED))}


def test_every_verdict_is_the_one_onnx_implies_and_none_crashes(results):
    for case, result in results.items():
        assert result.verdict != "CRASH", (case, result.gate)
        assert result.agrees, (case, result.why)
        assert "Traceback" not in result.gate


def test_verdicts_are_pinned(results):
    assert {case: r.verdict for case, r in results.items()} == EXPECTED


def test_reasons_name_what_is_wrong(results):
    assert "'seq[1]'" not in results["test_split_to_sequence_2"].gate  # passes, item by item
    assert "2 of 2 outputs" in results["test_split_to_sequence_2"].gate
    assert "onnxruntime cannot load it" in results["test_top_k_uint64"].onnx
    assert "TopK(24)" in results["test_top_k_uint64"].gate
    if not NAN_RULE:
        assert results["test_cast_FLOAT_to_FLOAT16"].onnx.startswith("NaN on both sides at the same places")


def mutated(tmp_path, case, change):
    """A copy of ``case`` whose golden output 0 went through ``change(value) -> value``."""
    folder = tmp_path / case
    shutil.copytree(NODE / case, folder)
    model = onnx.load(str(folder / "model.onnx"))
    path = folder / "test_data_set_0" / "output_0.pb"
    from gate.data.onnx_values import write_value_file
    from gate.data.storage import read_tensor_proto

    name, value = read_tensor_proto(path, model.graph.output[0].type)
    write_value_file(path, name, change(value), model.graph.output[0].type)
    return tmp_path


def test_a_changed_sequence_item_fails_and_a_dropped_one_is_named(tmp_path):
    def nudge(items):
        items[1] = items[1] + np.float32(0.5)
        return items

    result = cases.run_cases(mutated(tmp_path / "a", "test_split_to_sequence_2", nudge), ["test_split_to_sequence_2"])[
        0
    ]
    assert result.verdict == "FAIL" and "'seq[1]'" in result.gate
    result = cases.run_cases(
        mutated(tmp_path / "b", "test_split_to_sequence_2", lambda items: items[:1]), ["test_split_to_sequence_2"]
    )[0]
    assert result.verdict == "ERROR" and "'seq' has 2 items but the reference has 1 item" in result.gate


def test_the_table_script_prints_case_verdict_why(tmp_path):
    out = tmp_path / "table.md"
    proc = subprocess.run(
        [sys.executable, "bench/onnx_node_cases.py", "--node-dir", NODE, "--cases", "test_*sequence*", "--out", out],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| case | verdict | why |" in out.read_text()
    assert "| test_split_to_sequence_2 | PASS |" in proc.stdout
    assert "5 cases: 5 PASS, 0 FAIL, 0 ERROR, 0 CRASH; 0 disagree" in proc.stdout
