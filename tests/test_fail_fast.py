"""--fail-fast (``[compare] fail_fast``): Polygraphy's meaning, stop at the first failing comparison.
Only a failure of a comparison that judges the output stops the run (not a report-only one), and a
run that a failure stopped is regressed (exit 1) whatever ``max_failed_iterations`` allows; with
``check_average`` it is a one-line error before the model runs (exit 2). Real ONNX Runtime runs of
an Identity model over stored npz inputs and golden outputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

from gate import cli

X = np.array([1.0, 2.0], np.float32)


def identity_gate(folder: Path, golden: list, toml: str) -> Path:
    """model.onnx (x[2] -> x_out = Identity(x)), one input ``X`` per golden array, and gate.toml."""
    folder.mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["x_out"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.save(model, folder / "model.onnx")
    (folder / "inputs").mkdir()
    (folder / "golden").mkdir()
    for k, gold in enumerate(golden):
        np.savez(folder / "inputs" / f"{k}.npz", x=X)
        np.savez(folder / "golden" / f"{k}.npz", x_out=np.asarray(gold, np.float32))
    config = folder / "gate.toml"
    config.write_text(f'model = "model.onnx"\ninputs = "inputs"\ngolden = "golden"\nrunners = ["onnxrt"]\n{toml}\n')
    return config


def check(config: Path, *flags) -> tuple[int, dict | None]:
    report = config.parent / "r.json"
    report.unlink(missing_ok=True)
    code = cli.main(["check", str(config), "--junit", str(config.parent / "j.xml"), "--report", str(report), *flags])
    return code, json.loads(report.read_text()) if report.exists() else None


def test_a_run_stopped_by_fail_fast_is_regressed_whatever_max_failed_iterations_allows(tmp_path, capsys):
    # Failed before: 1/1 (allowed 1) pass, exit 0, the report passed.
    config = identity_gate(tmp_path / "g", [X + 1] * 5, "[compare]\nmax_failed_iterations = 1\nfail_fast = true\n")
    code, report = check(config)
    out = capsys.readouterr().out
    assert code == 1
    assert report["status"] == "regressed" and report["passed"] is False and report["iterations"] == 1
    assert report["scope"] == "--fail-fast: stopped at the first failing iteration, 1 of 5 compared"
    assert "1/1           FAIL" in out and "allowed" not in out.split("REGRESSED")[0].split("x_out")[1]
    # Without fail_fast the allowance holds: 5 failures of 5, 1 allowed, regressed over all 5.
    code, report = check(config, "--no-fail-fast")
    assert code == 1 and report["iterations"] == 5


def test_a_failure_at_the_last_iteration_regresses_too(tmp_path):
    # The same rule wherever the failure is: fail_fast allows no failing iteration.
    toml = "[compare]\nmax_failed_iterations = 1\nfail_fast = true\n"
    config = identity_gate(tmp_path / "g", [X] * 4 + [X + 1], toml)
    code, report = check(config)
    assert code == 1 and report["iterations"] == 5
    assert report["scope"] == "--fail-fast: stopped at the first failing iteration, 5 of 5 compared"
    code, report = check(config, "--no-fail-fast")
    assert code == 0 and report["iterations"] == 5


def test_fail_fast_with_check_average_is_one_line_and_exit_2(tmp_path, capsys):
    # Failed before: exit 0, "max (avg) 0.0004 pass" over the 5 iterations before the stop (exit 1 without it).
    golden = [X] * 4 + [X + np.float32(2e-3)] + [X + np.float32(1e-2)] * 5
    config = identity_gate(tmp_path / "g", golden, '[compare]\natol = 1e-3\nrtol = 0\ncheck_error_stat = "max"\n'
                           "check_average = true\n")  # fmt: skip
    assert check(config)[0] == 1
    capsys.readouterr()
    code, report = check(config, "--fail-fast")
    err = capsys.readouterr().err
    assert code == 2 and report["status"] == "error" and report["iterations"] == 0
    assert "--fail-fast: check_average and fail_fast cannot be used together" in err
    assert len([line for line in err.splitlines() if "error" in line]) == 1


def test_a_report_only_failure_does_not_stop_the_run(tmp_path, capsys):
    # Failed before: the report-only simple failure at iteration 0 stopped the run; cosine passed over 1.
    golden = [X + np.float32(1e-3)] + [-X] * 4
    config = identity_gate(tmp_path / "g", golden, '[compare]\ncompare_func = ["simple", "cosine"]\n'
                           'compare_verdict = "cosine"\nfail_fast = true\n')  # fmt: skip
    code, report = check(config)
    assert code == 1 and report["iterations"] == 2
    assert report["scope"] == "--fail-fast: stopped at the first failing iteration, 2 of 5 compared"
    assert "x_out   cosine    -1" in capsys.readouterr().out


def test_shards_stopped_by_fail_fast_merge_as_a_regression(tmp_path, capsys, monkeypatch):
    # Failed before: check --jobs 2 and merge of --shard partials exited 2, "shard 1/2 lacks 2 of its 3
    # iterations ... the file was edited or is incomplete"; unsharded the run exits 1.
    config = identity_gate(tmp_path / "g", [X + 1] * 6, "[compare]\nfail_fast = true\n")
    assert check(config)[0] == 1
    code, report = check(config, "--jobs", "2")
    assert code == 1 and report["status"] == "regressed" and report["iterations"] == 2
    stops = "--fail-fast: shard 1/2 at iteration 0, shard 2/2 at iteration 1 stopped early, 2 of 6 iterations compared"
    assert report["scope"] == f"2 shards in parallel; {stops}"
    partials = []
    for shard in ("1/2", "2/2"):
        partials.append(config.parent / f"p{shard[0]}.json")
        assert check(config, "--shard", shard, "--write-partial", str(partials[-1]))[0] == 0
        assert json.loads(partials[-1].read_text())["fail_fast_stop"] == int(shard[0]) - 1
    capsys.readouterr()
    monkeypatch.chdir(config.parent)  # merge's paths stay inside the working directory
    report = config.parent / "merged.json"
    assert cli.main(["merge", *map(str, partials), "--junit", "m.xml", "--report", str(report)]) == 1
    merged = json.loads(report.read_text())
    assert merged["status"] == "regressed" and merged["scope"] == f"merged from 2 shards; {stops}"
    # A shard that lacks iterations for another reason is still could-not-evaluate (exit 2).
    data = json.loads(partials[0].read_text())
    del data["fail_fast_stop"]
    partials[0].write_text(json.dumps(data))
    capsys.readouterr()
    assert cli.main(["merge", *map(str, partials), "--junit", "m.xml"]) == 2
    assert "shard 1/2 lacks 2 of its 3 iterations" in capsys.readouterr().err
    data["fail_fast_stop"] = 2  # not the shard's last compared iteration
    partials[0].write_text(json.dumps(data))
    assert cli.main(["merge", *map(str, partials), "--junit", "m.xml"]) == 2
    assert "fail_fast_stop" in capsys.readouterr().err
    data["fail_fast_stop"] = 0
    del data["config"]["settings"]["fail_fast"]  # a stop without fail_fast in the settings
    partials[0].write_text(json.dumps(data))
    assert cli.main(["merge", *map(str, partials), "--junit", "m.xml"]) == 2
    assert "'fail_fast_stop' must be absent: config.settings has no fail_fast" in capsys.readouterr().err


def test_a_baseline_does_not_clear_a_run_that_fail_fast_stopped(tmp_path, capsys):
    # Failed before: exit 0, "PASSED: 1 of 1 outputs not worse than the baseline (margin 0) over 1
    # iterations": the first iteration's failure was known on the baseline, the 100x worse
    # iterations after it were never compared.
    config = identity_gate(tmp_path / "g", [X + 1] * 6, "")
    baseline = config.parent / "base.json"
    junit = str(config.parent / "b.xml")
    assert cli.main(["check", str(config), "-q", "--junit", junit, "--report", str(baseline)]) == 1
    for k in range(1, 6):
        np.savez(config.parent / "golden" / f"{k}.npz", x_out=X + 100)
    regression = ("--baseline", str(baseline), "--fail-on", "regression")
    code, report = check(config, *regression)
    assert code == 1 and report["iterations"] == 6  # without --fail-fast: the worse iterations regress
    code, report = check(config, *regression, "--fail-fast")
    out = capsys.readouterr().out
    assert code == 1 and report["status"] == "regressed" and report["iterations"] == 1
    assert "--fail-fast stopped the run at iteration 0; the iterations after it were not compared" in out
    code, report = check(config, *regression, "--fail-fast", "--jobs", "2")  # merged shards: the same rule
    assert code == 1 and report["status"] == "regressed"
