"""The attacker's false passes in the compare functions and verdict rules (exit 0 for outputs that
must fail): each case here passed before its fix."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gate.cli import main
from gate.compare_funcs import judge_rows
from gate.results import OutputVerdict


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # default report files land there


def _gate(tmp_path, live, golden, compare="", elem=TensorProto.FLOAT):
    """y = Identity(x) over one iteration: x = ``live``, golden y = ``golden``; returns gate.toml."""
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    live, golden = np.asarray(live, dtype), np.asarray(golden, dtype)
    x = helper.make_tensor_value_info("x", elem, list(live.shape))
    y = helper.make_tensor_value_info("y", elem, list(live.shape))
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "model.onnx")
    for folder, name, value in (("inputs", "x", live), ("golden", "y", golden)):
        (tmp_path / folder).mkdir(exist_ok=True)
        np.savez(tmp_path / folder / "0.npz", **{name: value})
    (tmp_path / "gate.toml").write_text(
        f'model = "model.onnx"\ninputs = "inputs"\ngolden = "golden"\n[compare]\natol = 1e-5\nrtol = 1e-5\n{compare}\n'
    )
    return tmp_path / "gate.toml"


def _run(tmp_path, config, *args):
    return main(["check", str(config), "--root", str(tmp_path), *args])


# --- 1. the default compare_verdict against an output's own compare_func ------------------------


def test_a_default_verdict_that_is_not_among_an_outputs_own_functions_is_exit_2(tmp_path, capsys):
    # Before: rc 0, "y ... FAIL (report only)", "PASSED: 1 of 1": nothing judged y.
    funcs = 'compare_func = { "" = ["simple", "cosine"], y = "simple" }'
    config = _gate(tmp_path, [1.0, 2.0, 3.0], [100.0, 200.0, 300.0], f'{funcs}\ncompare_verdict = "cosine"')
    assert _run(tmp_path, config) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "compare_verdict 'cosine' is not among the compare functions of output 'y' (simple)" in err[0]


def test_a_default_verdict_among_an_outputs_functions_judges_it(tmp_path, capsys):
    funcs = 'compare_func = { "" = ["simple", "cosine"], y = ["simple", "cosine"] }'
    config = _gate(tmp_path, [1.0, 2.0, 3.0], [100.0, 200.0, 300.0], f'{funcs}\ncompare_verdict = "cosine"')
    assert _run(tmp_path, config) == 0  # cosine of parallel vectors is 1: it decides, simple is reported
    out = capsys.readouterr().out
    assert "FAIL (report only)" in out and "PASSED: 1 of 1" in out


def test_an_outputs_own_verdict_overrides_the_default(tmp_path):
    config = _gate(tmp_path, [1.0, 2.0, 3.0], [100.0, 200.0, 300.0],
                   'compare_func = { "" = ["simple", "cosine"], y = "simple" }\n'
                   'compare_verdict = { "" = "cosine", y = "simple" }')  # fmt: skip
    assert _run(tmp_path, config) == 1  # simple judges y, and it is out of tolerance


def test_an_output_none_of_whose_rows_is_judged_never_passes():
    rows = [OutputVerdict(("a", "b"), "y", False, func="simple", iterations=1, failed_iterations=1)]
    judge_rows(rows, {"compare_func": {"": ["simple", "cosine"], "y": ["simple", "cosine"]},
                      "compare_verdict": "cosine"})  # fmt: skip  # no cosine row came back
    assert rows[0].error and "no compare function judges it" in rows[0].error and not rows[0].passed
