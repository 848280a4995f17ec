"""Compare functions per output (issue 17): each metric the gate reports equals Polygraphy 0.53.6's on
the same arrays; elementwise failures with full top-1 agreement pass when indices is the verdict;
max_failed_iterations decides when one sample of N changes its class; a bad setting is one line,
exit 2; sharded runs merge to the same rows."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from polygraphy.comparator import compare as pg
from polygraphy.comparator import postprocess as pg_post
from polygraphy.comparator import struct as pg_struct
from polygraphy.logger import G_LOGGER

from gate.cli import main
from gate.config import load_config
from gate.job import check

G_LOGGER.module_severity = G_LOGGER.CRITICAL
N = 10


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # default report files land there


def _model(path, out_type=TensorProto.FLOAT):
    """y = x (float32, 1x5), or y = x > 0 (bool) with ``out_type`` BOOL."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5])
    y = helper.make_tensor_value_info("y", out_type, [1, 5])
    if out_type == TensorProto.BOOL:
        zero = helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])
        graph = helper.make_graph([helper.make_node("Greater", ["x", "zero"], ["y"])], "g", [x], [y], [zero])
    else:
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _gate(tmp_path, golden_of, compare="", out_type=TensorProto.FLOAT, seed=0):
    """A gate over N random inputs whose golden outputs are ``golden_of(index, x)``."""
    rng = np.random.default_rng(seed)
    _model(tmp_path / "model.onnx", out_type)
    (tmp_path / "inputs").mkdir()
    (tmp_path / "golden").mkdir()
    xs = []
    for i in range(N):
        x = rng.standard_normal((1, 5)).astype(np.float32)
        xs.append(x)
        np.savez(tmp_path / "inputs" / f"{i}.npz", x=x)
        golden = golden_of(i, x) if out_type == TensorProto.FLOAT else x > 0
        np.savez(tmp_path / "golden" / f"{i}.npz", y=golden)
    (tmp_path / "gate.toml").write_text(
        f'model = "model.onnx"\ninputs = "inputs"\ngolden = "golden"\n[compare]\natol = 1e-6\nrtol = 1e-6\n{compare}\n'
    )
    return tmp_path / "gate.toml", xs


def _noisy(i, x):
    """Golden outputs off by 1e-3 relative noise: elementwise fails, every class stays."""
    return (x * (1 + 1e-3 * np.cos(np.arange(5) + i))).astype(np.float32)


def _pg(func, a, b):
    a_it = pg_struct.IterationResult({"y": np.asarray(a)}, runner_name="a")
    b_it = pg_struct.IterationResult({"y": np.asarray(b)}, runner_name="b")
    return func(a_it, b_it)["y"]


def _row(result, func):
    return next(row for row in result.rows if row.func == func)


@pytest.mark.parametrize(
    ("func", "pg_func", "field", "worst"),
    [
        ("cosine", pg.CosineSimilarityCompareFunc(), "cosine_similarity", min),
        ("l2", pg.L2CompareFunc(), "l2_norm", max),
        ("psnr", pg.PsnrCompareFunc(), "psnr", min),
        ("snr", pg.SnrCompareFunc(), "snr", min),
    ],
)
def test_each_metric_equals_polygraphys_on_the_same_arrays(tmp_path, func, pg_func, field, worst):
    config, xs = _gate(tmp_path, _noisy, f'compare_func = "{func}"')
    result = check(load_config(config))
    theirs = [getattr(_pg(pg_func, x, _noisy(i, x)), field) for i, x in enumerate(xs)]
    row = _row(result, func)
    assert row.abs_value == worst(theirs)  # to the last digit
    assert row.worst_iteration == theirs.index(worst(theirs))
    assert row.iterations == N


def test_mse_equals_the_mse_inside_polygraphys_psnr(tmp_path):
    config, xs = _gate(tmp_path, _noisy, 'compare_func = "mse"')
    row = _row(check(load_config(config)), "mse")
    mses = []
    for i, x in enumerate(xs):
        psnr = _pg(pg.PsnrCompareFunc(), x, _noisy(i, x)).psnr
        mses.append(10 ** ((20 * math.log10(float(x.max())) - psnr) / 10))  # PSNR = 20 log10(peak) - 10 log10(MSE)
    assert row.abs_value == pytest.approx(max(mses), rel=1e-9)
    exact = max(float(np.mean(np.square((x - _noisy(i, x)).astype(np.float64)))) for i, x in enumerate(xs))
    assert row.abs_value == exact


def _swap_first_two_classes(index, x, changed=(3,)):
    """Golden outputs whose top-1 class differs from the model's at the iterations in ``changed``."""
    golden = x.copy()
    if index in changed:
        top = int(np.argmax(x))
        golden[0, top] = x.min() - 1
    return golden


def test_indices_agrees_with_polygraphys_top_k_then_indices(tmp_path):
    changed = (1, 4, 7)
    config, xs = _gate(
        tmp_path,
        lambda i, x: _swap_first_two_classes(i, x, changed),
        'compare_func = "indices"\nmax_failed_iterations = 3',
    )
    row = _row(check(load_config(config)), "indices")
    topk = pg_post.TopKPostprocessFunc(k=1)
    theirs = []
    for i, x in enumerate(xs):
        a = topk(pg_struct.IterationResult({"y": x}, runner_name="a"))
        b = topk(pg_struct.IterationResult({"y": _swap_first_two_classes(i, x, changed)}, runner_name="b"))
        theirs.append(bool(pg.IndicesCompareFunc()(a, b)["y"]))
    assert [i for i, ok in enumerate(theirs) if not ok] == list(changed)
    assert row.failed_iterations == 3 and row.passed and row.abs_value == pytest.approx(0.7)


def test_elementwise_fails_while_top1_agrees_and_the_gate_passes(tmp_path, capsys):
    config, _ = _gate(tmp_path, _noisy, 'compare_func = ["simple", "indices"]\ncompare_verdict = "indices"')
    assert main(["check", str(config), "--root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "FAIL (report only)" in out and "100% agree" in out and "PASSED: 1 of 1 outputs" in out
    result = check(load_config(config))
    simple, indices = _row(result, "simple"), _row(result, "indices")
    assert (simple.within, simple.verdict, simple.failed_iterations) == (False, False, N)
    assert (indices.passed, indices.failed_iterations, indices.abs_value) == (True, 0, 1.0)
    # Without a verdict function every one must pass: the same run regresses.
    assert main(["check", str(config), "--root", str(tmp_path), "--compare-verdict", "all"]) == 1


@pytest.mark.parametrize(
    ("allowed", "code", "text"),
    [
        ("0", 1, "1/10 iterations failed"),
        ("1", 0, "1 of 10 (10%) iterations failed, allowed 1"),
        ("10%", 0, "1 of 10 (10%) iterations failed, allowed 1"),
        ("5%", 1, "1/10 iterations failed"),  # 5% of 10 is 0.5: rounded down, none may fail
    ],
)
def test_one_sample_of_n_changes_class_and_max_failed_iterations_decides(tmp_path, allowed, code, text):
    config, _ = _gate(tmp_path, _swap_first_two_classes, 'compare_func = "indices"')
    cfg = load_config(config, {"max_failed_iterations": allowed if allowed.endswith("%") else int(allowed)})
    result = check(cfg)
    assert result.exit_code == code
    row = _row(result, "indices")
    assert row.failed_iterations == 1 and row.worst_iteration == 3
    assert text in row.message()


@pytest.mark.parametrize(
    ("args", "toml", "out_type", "expected"),
    [
        (["--compare-func", "cosin"], "", TensorProto.FLOAT, "--compare-func: unknown compare function 'cosin'"),
        ([], 'compare_func = { y = "top1" }', TensorProto.FLOAT, "unknown compare function 'top1'"),
        (
            ["--compare-func", "cosine"],
            "",
            TensorProto.BOOL,
            "compare function 'cosine' needs a numeric output, but 'y' is bool",
        ),
        (["--compare-verdict", "psnr"], "", TensorProto.FLOAT, "'psnr' is not one of the output's compare functions"),
        (["--max-failed-iterations", "y:lots"], "", TensorProto.FLOAT, "--max-failed-iterations"),
        ([], 'max_failed_iterations = "120%"', TensorProto.FLOAT, "a share must be 0% to 100%"),
        ([], "top_k = { z = 2 }", TensorProto.FLOAT, "top_k names output 'z', which the model does not have"),
    ],
)
def test_a_bad_compare_setting_is_one_line_exit_2(tmp_path, capsys, args, toml, out_type, expected):
    config, _ = _gate(tmp_path, _noisy, toml, out_type=out_type)
    assert main(["check", str(config), "--root", str(tmp_path), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and "\n" not in err and "Traceback" not in err


def test_shards_merge_to_the_rows_of_one_run(tmp_path, capsys):
    config, _ = _gate(tmp_path, _swap_first_two_classes, 'compare_func = "simple+indices+cosine+mse"\n'
                      'compare_verdict = "indices"\nmax_failed_iterations = 1\ncheck_error_stat = "max"')  # fmt: skip
    root = ["--root", str(tmp_path)]
    for i in (1, 2, 3):
        assert (
            main(["check", str(config), *root, "--shard", f"{i}/3", "--write-partial", str(tmp_path / f"p/{i}.json")])
            == 0
        )
    capsys.readouterr()
    assert main(["check", str(config), *root, "--report", str(tmp_path / "full.json")]) == 0
    full = capsys.readouterr().out
    assert main(["merge", str(tmp_path / "p"), *root, "--report", str(tmp_path / "merged.json")]) == 0
    merged = capsys.readouterr().out
    assert merged.replace("merged from 3 shards\n", "") == full
    import json

    rows = [json.loads((tmp_path / f"{name}.json").read_text())["rows"] for name in ("full", "merged")]
    assert rows[0] == rows[1] and [row.get("func", "simple") for row in rows[0]] == [
        "simple",
        "indices",
        "cosine",
        "mse",
    ]


def test_reports_name_each_function_junit_markdown_and_the_results_file_read_back(tmp_path, capsys):
    from junitparser import Failure, JUnitXml

    from gate.results_file import read_untrusted_report

    config, _ = _gate(tmp_path, _swap_first_two_classes, 'compare_func = "simple+indices"\nmax_failed_iterations = 1')
    args = ["--root", str(tmp_path), "--junit", str(tmp_path / "j.xml"), "--report", str(tmp_path / "r.json")]
    assert main(["check", str(config), *args, "--markdown", str(tmp_path / "s.md"), "--atol", "1e-2"]) == 0
    cases = {case.name: case for suite in JUnitXml.fromfile(str(tmp_path / "j.xml")) for case in suite}
    assert set(cases) == {"model.onnx/y", "model.onnx/y [indices]"}
    assert "func=indices" in cases["model.onnx/y [indices]"].system_out
    assert "allowed_failed_iterations=1" in cases["model.onnx/y [indices]"].system_out
    assert not any(isinstance(r, Failure) for case in cases.values() for r in case.result)
    markdown = (tmp_path / "s.md").read_text()
    nbsp = "\u00a0"
    assert f"| ✅{nbsp}pass | `y` | top-1 | 90% agree{nbsp}/{nbsp}- | -{nbsp}/{nbsp}- | 1/10 (allowed 1) |" in markdown
    header = "| result | output | stat | abs error or value / atol or bound | rel error / rtol | failed iters |"
    assert header in markdown
    rows = read_untrusted_report(tmp_path / "r.json").result.rows
    assert [(row.func, row.allowed_failures, row.failed_iterations) for row in rows] == [
        ("simple", 1, 1),
        ("indices", 1, 1),
    ]
    # A row reported only keeps its own outcome through the file.
    assert main(["check", str(config), *args, "--compare-verdict", "simple", "--max-failed-iterations", "0"]) == 1
    indices = read_untrusted_report(tmp_path / "r.json").result.rows[1]
    assert (indices.func, indices.verdict, indices.within, indices.passed) == ("indices", False, False, True)


def test_action_inputs_read_the_compare_settings_like_the_flags(tmp_path):
    from gate.option_readers import overrides_from_inputs

    environ = {
        "INPUT_COMPARE_FUNC": "simple y:simple+indices",
        "INPUT_COMPARE_VERDICT": "y:indices",
        "INPUT_MAX_FAILED_ITERATIONS": "y:0.5%",
        "INPUT_TOP_K": "y:2",
        "INPUT_COSINE_SIMILARITY_THRESHOLD": "0.999",
        "INPUT_TIES_COMPARE_EQUAL": "true",
    }
    got = overrides_from_inputs(environ)
    assert got["compare_func"] == {"": "simple", "y": "simple+indices"}
    assert got["compare_verdict"] == {"y": "indices"} and got["max_failed_iterations"] == {"y": "0.5%"}
    assert got["top_k"] == {"y": 2} and got["cosine_similarity_threshold"] == 0.999
    assert got["ties_compare_equal"] is True


def test_top_k_agreement_ties_and_index_tolerance():
    from gate.comparator.output_funcs import top_k_agreement

    a = np.array([[0.1, 0.9, 0.5, 0.9]], np.float32)
    b = np.array([[0.1, 0.9, 0.5, 0.9000001]], np.float32)  # the reference breaks the tie the other way
    assert not top_k_agreement(a, b, k=1)
    assert top_k_agreement(a, b, k=1, tie_atol=1e-6)  # the reference scores both within 1e-6
    assert not top_k_agreement(a, np.array([[0.1, 0.9, 0.95, 0.2]], np.float32), k=1, tie_atol=1e-6)
    assert top_k_agreement(a, b, k=1, index_tolerance=1)  # index 3 is second in the reference
    # Integer outputs are indices already (Polygraphy's IndicesCompareFunc).
    assert top_k_agreement(np.array([1, 0, 2, 3]), np.array([0, 1, 2, 3]), index_tolerance=1)
    assert top_k_agreement(np.zeros((2, 3)), np.zeros((2, 3)), k=2, axis=0).mismatch_count == 0


SHARES = [(0, 10, 0), (3, 10, 3), ("0.5%", 200, 1), ("0.5%", 199, 0), ("100%", 7, 7), ("33.3%", 3, 0), ("50%", 3, 1)]


@pytest.mark.parametrize(("value", "iterations", "allowed"), SHARES)
def test_allowed_failures_a_count_or_a_share_rounded_down(value, iterations, allowed):
    from gate.compare_funcs import allowed_failures

    assert allowed_failures(value, iterations) == allowed


def test_a_corrupt_funcs_entry_in_a_partial_file_is_one_line(tmp_path, capsys):
    import json

    config, _ = _gate(tmp_path, _noisy, 'compare_func = "cosine"')
    partial = tmp_path / "p.json"
    assert main(["check", str(config), "--root", str(tmp_path), "--write-partial", str(partial)]) == 0
    data = json.loads(partial.read_text())
    data["funcs"][0]["pairs"][0]["outputs"][0]["results"][2] = {"value": "x"}
    partial.write_text(json.dumps(data))
    assert main(["merge", str(partial), "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "funcs[0].pairs[0].outputs[0][2]' must be a cosine result" in err and "\n" not in err


def test_check_average_averages_the_metric_and_leaves_indices_per_iteration(tmp_path):
    settings = 'compare_func = "cosine+indices"\ncheck_average = true\ncheck_error_stat = "max"'
    config, xs = _gate(tmp_path, _noisy, settings)
    result = check(load_config(config))
    theirs = [_pg(pg.CosineSimilarityCompareFunc(), x, _noisy(i, x)).cosine_similarity for i, x in enumerate(xs)]
    cosine, indices = _row(result, "cosine"), _row(result, "indices")
    assert cosine.averaged and cosine.abs_value == sum(theirs) / N  # Polygraphy's average_results: sum / count
    assert not indices.averaged and indices.failed_iterations == 0
    assert "average over iterations of cosine" in cosine.message()
