"""Task metrics against labels (issue 17): accuracy against the golden outputs as the reference, the
criteria (a floor, MLPerf's min_relative, a drop in points), bad labels as one line (exit 2), exactness
over shards, and the pure metric functions."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, save

from gate.cli import main
from gate.config import load_config
from gate.job import check
from gate.task_metrics import ctc_collapse, is_correct, task_passed

N = 10


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _gate(tmp_path, labels, golden_of=lambda i, x: x, compare="", label_dir="labels"):
    """y = x (1x3 scores); inputs whose class is argmax(x); ``labels[i]`` the stored label."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "model.onnx")
    for folder in ("inputs", "golden", label_dir):
        (tmp_path / folder).mkdir(exist_ok=True)
    rng = np.random.default_rng(1)
    for i in range(N):
        xi = rng.standard_normal((1, 3)).astype(np.float32)
        np.savez(tmp_path / "inputs" / f"{i}.npz", x=xi)
        np.savez(tmp_path / "golden" / f"{i}.npz", y=golden_of(i, xi))
        if i < len(labels):
            label = labels[i](xi) if callable(labels[i]) else labels[i]
            np.savez(tmp_path / label_dir / f"{i}.npz", label=np.asarray(label))
    (tmp_path / "gate.toml").write_text(
        'model = "model.onnx"\ninputs = "inputs"\ngolden = "golden"\n[compare]\nlabels = "labels"\n'
        f'task_metric = "accuracy"\ncompare_func = "indices"\nmax_failed_iterations = "100%"\n{compare}\n'
    )
    return tmp_path / "gate.toml"


def right(x):
    return [int(np.argmax(x))]


def wrong(x):
    return [(int(np.argmax(x)) + 1) % 3]


def _golden_right(labels):
    """Golden outputs that always get the label right (a one-hot on it), whatever the model says."""

    def golden(i, x):
        out = np.zeros((1, 3), np.float32)
        out[0, labels[i](x)[0]] = 1.0
        return out

    return golden


def test_accuracy_below_min_relative_fails_naming_metric_value_and_reference(tmp_path, capsys):
    # The model is right on 8 of 10, the golden outputs (reference) on 10 of 10: 80% < 0.99 * 100%.
    labels = [right] * 8 + [wrong] * 2
    config = _gate(tmp_path, labels, _golden_right(labels), "task_min_relative = 0.99")
    assert main(["check", str(config), "--root", str(tmp_path), "--report", str(tmp_path / "r.json")]) == 1
    out = capsys.readouterr().out
    assert "top-1 accuracy  80% (ref 100%, -20 pts)  min_relative 0.99 (>= 0.99)" in out
    assert "REGRESSED: 1 of 1 outputs out of tolerance: 'y'" in out
    row = next(r for r in check(load_config(config)).rows if r.func == "task")
    assert (row.abs_value, row.reference, row.passed) == (0.8, 1.0, False)
    assert row.message() == (
        "FAILED: top-1 accuracy 80% against the labels, reference (golden outputs) 100%, -20 points; "
        "criterion min_relative 0.99 (>= 0.99)"
    )
    task = [r for r in json.loads((tmp_path / "r.json").read_text())["rows"] if r.get("func") == "task"][0]
    assert (task["abs_value"], task["reference"], task["passed"]) == (0.8, 1.0, False)


@pytest.mark.parametrize(
    ("criteria", "code"),
    [
        ("task_min_relative = 0.8", 0),
        ("task_min = 0.8", 0),
        ("task_min = 0.81", 1),
        ("task_max_drop = 20", 0),
        ("task_max_drop = 19.9", 1),
        ("task_min = 0.5\ntask_max_drop = 10", 1),
    ],
)
def test_each_criterion_against_the_reference(tmp_path, criteria, code):
    labels = [right] * 8 + [wrong] * 2
    config = _gate(tmp_path, labels, _golden_right(labels), criteria)
    assert check(load_config(config)).exit_code == code


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ([right] * 7, "labels: 7 labels for 10 stored inputs; every iteration needs one."),
        ([right] * 3 + [[5]] + [right] * 6, "label 5 is out of range for the 3 classes of the output (axis -1)."),
        ([right] * 2 + [[0, 1]] + [right] * 7, "expected 1 label(s), one per batch row, got shape (2,)."),
        ([right] * 4 + [[0.5]] + [right] * 5, "labels must be integer classes, got float64."),
    ],
)
def test_bad_labels_are_one_line_exit_2(tmp_path, capsys, labels, expected):
    config = _gate(tmp_path, labels)
    assert main(["check", str(config), "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err and "Traceback" not in err


def test_a_task_metric_without_labels_or_unknown_is_one_line(tmp_path, capsys):
    config = _gate(tmp_path, [right] * N)
    text = config.read_text().replace('labels = "labels"\n', "")
    config.write_text(text)
    assert main(["check", str(config), "--root", str(tmp_path)]) == 2
    assert "task_metric needs labels" in capsys.readouterr().err
    config.write_text(text.replace('"accuracy"', '"top1"'))
    assert main(["check", str(config), "--root", str(tmp_path)]) == 2
    assert (
        "unknown task metric 'top1'; expected one of accuracy, exact_match, ctc_exact_match" in capsys.readouterr().err
    )


def test_shards_count_the_same(tmp_path, capsys):
    labels = [right] * 6 + [wrong] * 4
    config = _gate(tmp_path, labels, _golden_right(labels), "task_min = 0.5")
    root = ["--root", str(tmp_path)]
    for i in (1, 2, 3):
        assert main(["check", str(config), *root, "--shard", f"{i}/3", "--write-partial", f"p/{i}.json"]) == 0
    capsys.readouterr()
    assert main(["check", str(config), *root]) == 0
    full = capsys.readouterr().out
    assert main(["merge", "p", *root]) == 0
    assert capsys.readouterr().out.replace("merged from 3 shards\n", "") == full
    assert "60% (ref 100%, -40 pts)" in full


def test_the_metric_functions():
    scores = np.array([[0.1, 0.7, 0.2]])
    assert is_correct(scores, [1], "accuracy") and not is_correct(scores, [2], "accuracy")
    assert is_correct(scores, [2], "accuracy", k=2) and is_correct(np.array([[1]]), [1], "accuracy")
    batch = np.array([[0.9, 0.1], [0.2, 0.8]])
    assert is_correct(batch, [0, 1], "accuracy") and not is_correct(batch, [0, 0], "accuracy")
    # exact match of the argmax sequence (1, T, C) along the class axis
    seq = np.eye(4)[[1, 1, 0, 2, 2, 0, 3]][None]  # argmax: 1 1 0 2 2 0 3
    assert is_correct(seq, [1, 1, 0, 2, 2, 0, 3], "exact_match")
    assert not is_correct(seq, [1, 0, 2, 0, 3, 0, 0], "exact_match")
    assert is_correct(seq, [1, 2, 3], "ctc_exact_match") and is_correct(seq, [1, 2, 3, 0, 0], "ctc_exact_match")
    assert not is_correct(seq, [1, 2, 2, 3], "ctc_exact_match")  # a label's repeats are real letters
    double = np.eye(4)[[2, 0, 2, 3]][None]  # argmax 2 0 2 3: the blank separates the two 2s
    assert is_correct(double, [2, 2, 3], "ctc_exact_match")
    assert ctc_collapse([1, 1, 0, 1]) == [1, 0, 1]
    assert task_passed(0.9, 1.0, {"task_min_relative": 0.9}, "y") == (True, "min_relative 0.9 (>= 0.9)")
    assert task_passed(0.5, 0.6, {}, "y") == (True, "none")


def test_the_shipped_example_with_labels_and_its_fp16_preview(example, capsys):
    """fp32: everything passes, 8 of 8 lines classified right. The fp16 conversion (onnxconverter-common,
    ``--preview-precision fp16``): elementwise fails, top-1 agreement and label accuracy pass."""
    pytest.importorskip("onnxconverter_common")
    config, root = str(example / "gate-labels.toml"), ["--root", str(example)]
    assert main(["check", config, *root, "--report", str(example / "fp32.json")]) == 0
    assert main(["check", config, *root, "--preview-precision", "fp16", "--report", str(example / "fp16.json")]) == 0
    out = capsys.readouterr().out
    assert "FAIL (report only)" in out and "100% agree" in out and "100% (ref 100%, +0 pts)" in out
    rows = {r.get("func", "simple"): r for r in json.loads((example / "fp16.json").read_text())["rows"]}
    assert rows["simple"]["within"] is False and rows["simple"]["abs_value"] > 1e-3  # 0.0074949 measured
    assert (rows["indices"]["abs_value"], rows["task"]["abs_value"], rows["task"]["reference"]) == (1.0, 1.0, 1.0)


def test_a_baseline_gives_the_task_metrics_delta(tmp_path, capsys):
    labels = [right] * 8 + [wrong] * 2
    config = _gate(tmp_path, labels, _golden_right(labels), "task_min = 0.5")
    root = ["--root", str(tmp_path)]
    assert main(["check", str(config), *root, "--task-metric", "y:accuracy", "--task-top-k", "y:3", "--report",
                 "base.json"]) == 0  # fmt: skip
    capsys.readouterr()
    # The same top-1 metric on the baseline: 80% now against 80% there.
    assert main(["check", str(config), *root, "--report", "base1.json"]) == 0
    capsys.readouterr()
    assert main(["check", str(config), *root, "--baseline", "base1.json", "--report", "now.json"]) == 0
    out = capsys.readouterr().out
    task_line = next(line for line in out.splitlines() if "top-1 accuracy" in line)
    assert "80% (ref 100%, -20 pts)" in task_line and task_line.split()[-2:] == ["pts", "-"]
    assert "  0 pts  -" in task_line  # Δ abs against the baseline: the same 80%
    row = [r for r in json.loads((tmp_path / "now.json").read_text())["rows"] if r.get("func") == "task"][0]
    assert row["baseline_value"] == 0.8
    # A baseline with another metric (top-3) and nothing else in common is not this gate's baseline.
    assert main(["check", str(config), *root, "--baseline", "base.json"]) == 2
    assert "the baseline has none of this run's outputs" in capsys.readouterr().err


def test_ctc_exact_match_with_labels_in_the_model_zoo_layout(tmp_path):
    """A (1, T, C) sequence output, labels as ``labels/test_data_set_<N>/input_0.pb`` tensors named ``label``."""
    from onnx import numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "model.onnx")
    paths = [[1, 1, 0, 2], [2, 0, 2, 2], [0, 0, 0, 1]]  # argmax per step: decoded 1 2 | 2 2 | 1
    labels = [[1, 2, 0], [2, 2, 0], [2, 0, 0]]  # padded with blanks; the last one is wrong
    for i, (path, label) in enumerate(zip(paths, labels)):
        folder = tmp_path / "data" / f"test_data_set_{i}"
        (tmp_path / "labels" / f"test_data_set_{i}").mkdir(parents=True)
        folder.mkdir(parents=True)
        scores = np.eye(3, dtype=np.float32)[path][None]
        (folder / "input_0.pb").write_bytes(numpy_helper.from_array(scores, "x").SerializeToString())
        (folder / "output_0.pb").write_bytes(numpy_helper.from_array(scores, "y").SerializeToString())
        tensor = numpy_helper.from_array(np.array(label, np.int64), "label")
        (tmp_path / "labels" / f"test_data_set_{i}" / "input_0.pb").write_bytes(tensor.SerializeToString())
    (tmp_path / "gate.toml").write_text(
        'model = "model.onnx"\ninputs = "data"\n[compare]\nlabels = "labels"\ntask_metric = "ctc_exact_match"\n'
        "task_min = 0.6\n"
    )
    row = next(r for r in check(load_config(tmp_path / "gate.toml")).rows if r.func == "task")
    assert (row.stat, row.abs_value, row.reference, row.passed) == ("ctc_exact_match", 2 / 3, 2 / 3, True)
