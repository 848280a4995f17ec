"""The attacker's false passes in the compare functions and verdict rules (exit 0 for outputs that
must fail): each case here passed before its fix."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

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


# --- 2. a structured output's leaves (seq[0]) take their output's per-output settings ------------


def _seq_model(path, c: float, split=None):
    """seq = SplitToSequence(x * c) into items of one element each, or of the lengths ``split``."""
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(c, np.float32))),
             helper.make_node("Mul", ["x", "c"], ["xc"])]  # fmt: skip
    if split is None:
        nodes.append(helper.make_node("SplitToSequence", ["xc"], ["seq"], axis=0, keepdims=1))
    else:
        lengths = numpy_helper.from_array(np.array(split, np.int64))
        nodes += [helper.make_node("Constant", [], ["s"], value=lengths),
                  helper.make_node("SplitToSequence", ["xc", "s"], ["seq"], axis=0)]  # fmt: skip
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)])  # fmt: skip
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _seq_gate(tmp_path, compare, ratio=2.0, split=None):
    """seq = SplitToSequence(x * c) of x = [1, 2, 3, 4] (``_seq_model``): golden recorded with c = 1,
    then the model changed to c = ``ratio``, so every element is off by (ratio - 1) * x."""
    _seq_model(tmp_path / "model.onnx", 1.0, split)
    (tmp_path / "inputs").mkdir()
    np.savez(tmp_path / "inputs" / "0.npz", x=np.array([1, 2, 3, 4], np.float32))
    (tmp_path / "gate.toml").write_text(
        f'model = "model.onnx"\ninputs = "inputs"\ngolden = "golden"\n[compare]\natol = 1e-5\nrtol = 1e-5\n{compare}\n'
    )
    assert main(["record", str(tmp_path / "gate.toml"), "--root", str(tmp_path)]) == 0
    _seq_model(tmp_path / "model.onnx", ratio, split)
    return tmp_path / "gate.toml"


def test_a_sequences_own_max_failed_iterations_applies_to_its_items(tmp_path, capsys):
    # Before: the items seq[i] took the default entry (1): rc 0, PASSED 4 of 4.
    config = _seq_gate(tmp_path, 'max_failed_iterations = { "" = 1, seq = 0 }')
    assert _run(tmp_path, config) == 1
    assert "REGRESSED: 4 of 4 outputs out of tolerance: 'seq[0]'" in capsys.readouterr().out


def test_a_sequences_own_compare_func_and_verdict_apply_to_its_items(tmp_path, capsys):
    # Before: the items took the default functions and verdict (cosine): simple reported only, rc 0.
    funcs = 'compare_func = { "" = ["simple", "cosine"], seq = "simple" }'
    config = _seq_gate(tmp_path, f'{funcs}\ncompare_verdict = {{ "" = "cosine", seq = "simple" }}')
    assert _run(tmp_path, config) == 1
    out = capsys.readouterr().out
    assert "REGRESSED: 4 of 4 outputs" in out and "report only" not in out


def test_a_sequences_verdict_by_a_metric_over_the_whole_sequence_judges_it(tmp_path, capsys):
    config = _seq_gate(tmp_path, 'compare_func = { "" = "simple", seq = ["simple", "cosine"] }\n'
                                 'compare_verdict = { seq = "cosine" }')  # fmt: skip
    assert _run(tmp_path, config) == 0  # cosine of x and 2x is 1; the items' simple rows are reported only
    out = capsys.readouterr().out
    assert out.count("FAIL (report only)") == 4 and "PASSED: 5 of 5" in out


@pytest.mark.parametrize(("tolerances", "code"), [('atol = { "" = 1e-5, seq = 4.0 }', 0),
                                                 ('atol = { "" = 10.0, seq = 1e-5 }\nrtol = 0.0', 1)])  # fmt: skip
def test_a_sequences_own_tolerances_apply_to_its_items(tmp_path, capsys, tolerances, code):
    # This held before too: the simple compare looks tolerances up by the output's name.
    config = _seq_gate(tmp_path, "")
    config.write_text(config.read_text().replace("atol = 1e-5\nrtol = 1e-5\n", tolerances + "\n"))
    assert _run(tmp_path, config) == code, capsys.readouterr().out


def test_a_regression_margin_for_a_sequence_is_accepted_and_applies_to_its_items(tmp_path, capsys):
    # Before: "regression_margin names output 'seq', which this run does not have" (exit 2).
    config = _seq_gate(tmp_path, "", ratio=1.5)
    assert _run(tmp_path, config, "--report", str(tmp_path / "base.json")) == 1  # the baseline: errors 0.5 x
    args = ("--baseline", str(tmp_path / "base.json"), "--fail-on", "regression", "--regression-margin")
    capsys.readouterr()
    assert _run(tmp_path, config, *args, "seq:0.1", "0") == 0, capsys.readouterr()  # the same errors
    _seq_model(tmp_path / "model.onnx", 2.0)  # errors 1 x now: 0.5 x worse
    assert _run(tmp_path, config, *args, "seq:0.1", "10") == 1  # seq's own margin, not the default
    assert _run(tmp_path, config, *args, "seq:10", "0") == 0


# --- 3. NaN scores never agree, and never get a label right (D19) ----------------------------------

NAN_ROW, GOLDEN_ROW = np.full((1, 3), np.nan), [[0.8, 0.15, 0.05]]


def test_all_nan_scores_do_not_agree_with_a_top1_of_index_0(tmp_path, capsys):
    # Before: "top-1 100% agree pass", rc 0.
    config = _gate(tmp_path, NAN_ROW, GOLDEN_ROW, 'compare_func = ["simple", "indices"]\ncompare_verdict = "indices"')
    assert _run(tmp_path, config) == 1
    out = capsys.readouterr().out
    assert "0% agree" in out and "REGRESSED: 1 of 1" in out


def test_all_nan_scores_are_not_a_correct_label(tmp_path, capsys):
    # Before: "top-1 accuracy 100% (ref 100%, +0 pts) pass", rc 0.
    config = _gate(tmp_path, NAN_ROW, GOLDEN_ROW, 'labels = "labels"\ntask_metric = "accuracy"\ntask_min = 1.0')
    (tmp_path / "labels").mkdir()
    np.savez(tmp_path / "labels" / "0.npz", label=np.array([0]))
    assert _run(tmp_path, config) == 1
    assert "top-1 accuracy  0% (ref 100%, -100 pts)" in capsys.readouterr().out


def test_polygraphy_ranks_an_all_nan_row_index_0_first_where_we_disagree():
    from polygraphy.comparator import compare as pg
    from polygraphy.comparator import postprocess as pg_post
    from polygraphy.comparator import struct as pg_struct

    from gate.comparator.output_funcs import top_k_agreement

    live, golden = NAN_ROW.astype(np.float32), np.array(GOLDEN_ROW, np.float32)
    topk = pg_post.TopKPostprocessFunc(k=1)
    a = topk(pg_struct.IterationResult({"y": live}, runner_name="a"))
    b = topk(pg_struct.IterationResult({"y": golden}, runner_name="b"))
    assert pg.IndicesCompareFunc()(a, b)["y"] is True  # Polygraphy: agrees
    ours = top_k_agreement(live, golden)
    assert not ours and ours.mismatch_count == 1 and ours.first_mismatch == ((0,), 0)
    partly = np.array([[0.8, 0.1, 0.1], [0.1, np.nan, 0.0]], np.float32)  # one NaN in the second row
    both = top_k_agreement(partly, np.array([[0.8, 0.1, 0.1], [0.1, 0.9, 0.0]], np.float32), k=2)
    assert both.mismatch_count == 2 and both.first_mismatch == ((1,), 0)
    assert top_k_agreement(golden, golden, k=2)  # no NaN: agrees


@pytest.mark.parametrize(("metric", "label"), [("accuracy", [0]), ("exact_match", [0, 0]),
                                               ("ctc_exact_match", [1])])  # fmt: skip
def test_nan_scores_get_no_task_metric_right(metric, label):
    from gate.task_metrics import is_correct

    scores = np.array([[0.1, 0.9], [0.9, 0.1]] if metric == "ctc_exact_match" else [[0.9, 0.1], [0.8, 0.2]], np.float32)
    label = np.array(label if metric != "accuracy" else [0, 0])
    assert is_correct(scores, label, metric)
    scores[1, :] = np.nan  # an argmax or a sort would pick class 0 here
    assert not is_correct(scores, label, metric)


# --- 4. an index_tolerance that leaves nothing to check (D20) ---------------------------------------


def test_an_index_tolerance_of_the_whole_axis_is_exit_2_naming_length_and_tolerance(tmp_path, capsys):
    # Before: indices 0..3 against 7..10, index_tolerance 1 on a last axis of 1: "100% agree", rc 0.
    live = np.arange(4).reshape(4, 1)
    config = _gate(tmp_path, live, live + 7, 'compare_func = "indices"\nindex_tolerance = 1', elem=TensorProto.INT64)
    assert _run(tmp_path, config) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'y' (has 1 position(s) along its last axis, but index_tolerance is 1" in err[0]


def test_polygraphy_passes_a_tolerance_of_the_whole_axis_where_we_refuse():
    from polygraphy.comparator import compare as pg
    from polygraphy.comparator import struct as pg_struct

    from gate.comparator.output_funcs import top_k_agreement

    a, b = np.array([[0], [1]]), np.array([[7], [8]])
    it_a, it_b = (pg_struct.IterationResult({"y": v}, runner_name=n) for v, n in ((a, "a"), (b, "b")))
    assert pg.IndicesCompareFunc(index_tolerance=1)(it_a, it_b)["y"] is True  # checks nothing
    ours = top_k_agreement(a, b, index_tolerance=1)
    assert not ours and "index_tolerance is 1" in ours.error
    scores = np.array([[0.1, 0.9, 0.0]], np.float32)
    assert "3 position(s) along its class axis -1" in top_k_agreement(scores, scores, index_tolerance=3).error
    assert top_k_agreement(scores, scores[:, ::-1], index_tolerance=2)  # below the length: checked
    assert top_k_agreement(a, a, index_tolerance=0)


# --- 5. metrics at 1e20 scale: no overflow clamped into a pass (D21) -----------------------------

BIG_A, BIG_B = np.array([1e20, 1e10], np.float32), np.array([1e20, -1e25], np.float32)


def test_cosine_of_vectors_whose_float32_dot_product_overflows_fails(tmp_path, capsys):
    # Before: the dot product overflowed to +inf and was clamped to 1.0: "cosine 1 pass", rc 0.
    config = _gate(tmp_path, BIG_A, BIG_B, 'compare_func = "cosine"')
    assert _run(tmp_path, config) == 1
    assert "FAILED: worst cosine 9.99990064e-06 (min 0.997)" in capsys.readouterr().out


def _pg_metric(func, field, a, b):
    from polygraphy.comparator import struct as pg_struct

    it_a, it_b = (pg_struct.IterationResult({"y": v}, runner_name=n) for v, n in ((a, "a"), (b, "b")))
    return getattr(func(it_a, it_b)["y"], field)


def test_polygraphys_cosine_overflows_to_1_or_nan_where_ours_is_float64s():
    from polygraphy.comparator import compare as pg

    from gate.comparator.distances import cosine_similarity

    a64, b64 = BIG_A.astype(np.float64), BIG_B.astype(np.float64)
    truth = float(a64 @ b64 / np.linalg.norm(a64) / np.linalg.norm(b64))  # 9.9999e-06
    with np.errstate(all="ignore"):
        assert _pg_metric(pg.CosineSimilarityCompareFunc(), "cosine_similarity", BIG_A, BIG_B) == 1.0
        huge_a, huge_b = np.array([1e200, 1e190]), np.array([1e190, -1e200])
        assert np.isnan(_pg_metric(pg.CosineSimilarityCompareFunc(), "cosine_similarity", huge_a, huge_b))
    assert cosine_similarity(BIG_A, BIG_B) == pytest.approx(truth, rel=1e-12)
    x, y = huge_a / 1e200, huge_b / 1e200
    expected = float(np.dot(x, y) / np.linalg.norm(x) / np.linalg.norm(y))
    assert cosine_similarity(huge_a, huge_b) == pytest.approx(expected, rel=1e-12) and abs(expected) < 1e-9
    assert cosine_similarity(huge_a, huge_a) == 1.0
    small = np.array([0.5, -0.25, 3.0], np.float32), np.array([0.4, -0.2, 2.5], np.float32)
    assert cosine_similarity(*small) == _pg_metric(pg.CosineSimilarityCompareFunc(), "cosine_similarity", *small)


@pytest.mark.parametrize("name", ["l2", "mse", "psnr", "snr"])
def test_the_other_metrics_at_1e20_agree_with_polygraphy_and_float64(name):
    from polygraphy.comparator import compare as pg

    from gate.comparator.distances import l2_norm, psnr, snr
    from gate.comparator.output_funcs import mean_squared_error

    a, b = BIG_A.astype(np.float64), BIG_B.astype(np.float64)
    mse = float(np.mean((a - b) ** 2))
    ours, truth = {
        "l2": (l2_norm, float(np.linalg.norm(a - b))),
        "mse": (mean_squared_error, mse),
        "psnr": (psnr, float(20 * np.log10(a.max()) - 10 * np.log10(mse))),
        "snr": (snr, float(10 * np.log10(np.mean(a**2) / mse))),
    }[name]
    assert ours(BIG_A, BIG_B) == pytest.approx(truth, rel=1e-12)
    if name != "mse":  # Polygraphy has no MSE compare function
        func, field = {"l2": (pg.L2CompareFunc(), "l2_norm"), "psnr": (pg.PsnrCompareFunc(), "psnr"),
                       "snr": (pg.SnrCompareFunc(), "snr")}[name]  # fmt: skip
        assert ours(BIG_A, BIG_B) == _pg_metric(func, field, BIG_A, BIG_B)


# --- 6. one-line errors, not "internal error: ... a bug in accuracy-gate" ---------------------------


def _one_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in lines[0] and "Traceback" not in captured.err + captured.out
    return lines[0]


def test_a_labels_file_without_a_label_tensor_is_one_line_naming_the_file(tmp_path, capsys):
    # Before: "internal error: KeyError: 'label'".
    scores = [[0.8, 0.1, 0.1]]
    config = _gate(tmp_path, scores, scores, 'labels = "labels"\ntask_metric = "accuracy"\ntask_min = 1.0')
    (tmp_path / "labels").mkdir()
    np.savez(tmp_path / "labels" / "0.npz", lbl=np.array([0]))
    assert _run(tmp_path, config) == 2
    assert "labels/0.npz: has no tensor 'label' (it holds ['lbl'])" in _one_line(capsys)


@pytest.mark.parametrize("task", [False, True])
def test_a_top_k_axis_the_output_lacks_is_one_line(tmp_path, capsys, task):
    # Before: "internal error: AxisError" (indices) / "IndexError: tuple index out of range" (task).
    scores = [[0.8, 0.15, 0.05]]
    compare = 'labels = "labels"\ntask_metric = "accuracy"' if task else 'compare_func = "indices"'
    config = _gate(tmp_path, scores, scores, f"{compare}\ntop_k_axis = 5")
    (tmp_path / "labels").mkdir()
    np.savez(tmp_path / "labels" / "0.npz", label=np.array([0]))
    assert _run(tmp_path, config) == 2
    assert "'y' (has 2 dimension(s) (shape (1, 3)), so top_k_axis 5 is not one of its axes" in _one_line(capsys)


@pytest.mark.parametrize(("func", "code", "shown"), [("cosine", 0, "seq     cosine  1 "),
                                                    ("l2", 1, "seq     l2    5.4772")])  # fmt: skip
def test_a_metric_on_a_ragged_sequence_takes_its_items_as_one_vector(tmp_path, capsys, func, code, shown):
    # Before: "internal error: ValueError: ... inhomogeneous shape".
    config = _seq_gate(tmp_path, f'compare_func = "{func}"', split=[1, 3])
    assert _run(tmp_path, config) == code  # x vs 2x: cosine 1, l2 sqrt(1 + 4 + 9 + 16)
    assert shown in capsys.readouterr().out


def test_indices_on_a_sequence_is_one_line(tmp_path, capsys):
    config = _seq_gate(tmp_path, 'compare_func = "indices"', split=[1, 3])
    assert _run(tmp_path, config) == 2
    assert "'seq' (is a sequence, map or optional, but indices and task metrics need a tensor" in _one_line(capsys)
