"""A run compared with a baseline (the same gate on the base branch): delta columns, and
``--fail-on regression``. Real model (``make_small_model``: outputs y and s), real ONNX Runtime; the
golden value of one element of ``s`` is moved by a known amount, so the worst abs error of ``s`` is
that amount (y stays exact): 0.01 on the baseline, 0.03 in the run under test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from junitparser import Failure, JUnitXml
from onnx import numpy_helper

from gate import cli
from gate.config import load_config
from gate.data import write_iteration
from gate.data.storage import read_tensor_proto
from gate.job import record
from gate.results import fmt, fmt_delta

from conftest import make_small_model, scratch_cwd, write_gate_toml

CONFIG = """model = "model.onnx"
inputs = "data"
golden = "data"

[compare]
check_error_stat = "max"
atol = { "" = 1e-5, "s" = 0.05 }
rtol = 0
"""
ITERATION = 2  # the iteration whose golden s is moved


class Gate:
    """A gate folder whose golden ``s`` of one iteration can be moved by ``d`` from the recorded value."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.config = folder / "gate.toml"
        self.golden_s = folder / "data" / f"test_data_set_{ITERATION}" / "output_1.pb"
        self.name, self.recorded = read_tensor_proto(self.golden_s)

    def move_s(self, d: float) -> float:
        """Golden s[0] = recorded s[0] + d (float32 arithmetic); returns the abs error the comparator
        will find there, computed the same way (|live - golden| in float32)."""
        golden = self.recorded.copy()
        golden[0] = np.float32(self.recorded[0]) + np.float32(d)
        self.golden_s.write_bytes(numpy_helper.from_array(golden, self.name).SerializeToString())
        return float(np.abs(np.float32(self.recorded[0]) - golden[0]))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("baseline") / "gate"
    folder.mkdir()
    make_small_model(folder / "model.onnx", size=16)
    rng = np.random.default_rng(11)
    for k in range(6):
        write_iteration(folder / "data", "onnx-zoo", "input", k, {"x": rng.standard_normal((2, 16)).astype(np.float32)})
    record(load_config(write_gate_toml(folder, CONFIG)))
    return folder


@pytest.fixture
def gate(recorded, tmp_path) -> Gate:
    dest = tmp_path / "gate"
    shutil.copytree(recorded, dest)
    return Gate(dest)


def run_cli(capsys, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    with scratch_cwd():  # the default JUnit path is the working directory's, never the repository's
        code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def text_row(out: str, output: str) -> list[str]:
    """The cells of ``output``'s row in the printed table (cells are separated by 2+ spaces)."""
    import re

    [line] = [line for line in out.splitlines() if line.split("  ")[0] == output]
    return re.split(r"\s{2,}", line.strip())


def md_row(markdown: str, output: str, table: int = 0) -> list[str]:
    """The cells of ``output``'s row in the Markdown report's first table (the verdicts; its name is
    the second cell) or, with ``table=1``, in the baseline table (its name first)."""
    lines = [line for line in markdown.splitlines() if f"| `{output}` |" in line]
    line = [line for line in lines if line.startswith(f"| `{output}` |") == bool(table)][0]
    return [cell.strip() for cell in line.strip("|").split("|")]


def md_delta(value) -> str:
    return fmt_delta(value).replace("-", "\u2212")  # the Markdown's minus sign


def baseline_of(capsys, gate: Gate, tmp_path: Path, d: float) -> tuple[float, Path, Path]:
    """Runs the gate with s moved by ``d``; returns (s's abs error, results file, partial file)."""
    error = gate.move_s(d)
    report, partial = tmp_path / "base" / "report.json", tmp_path / "base" / "partial.json"
    code, out, _ = run_cli(
        capsys, "check", gate.config, "--report", report, "--write-partial", partial, "--junit", tmp_path / "b.xml",
        "--root", gate.folder.parent,
    )  # fmt: skip
    assert code == (0 if error <= 0.05 else 1), out
    return error, report, partial


# --- the must-show -------------------------------------------------------------------------------


def test_a_known_worsening_shows_as_delta_and_fails_only_in_regression_mode_past_the_margin(gate, tmp_path, capsys):
    base_error, report, partial = baseline_of(capsys, gate, tmp_path, 0.01)
    error = gate.move_s(0.03)
    delta = error - base_error
    assert delta == pytest.approx(0.02, abs=1e-5)  # the known amount (float32 steps aside)

    # Threshold mode (the default): the delta is shown, the verdict is the tolerances' (0.03 <= 0.05).
    md, junit = tmp_path / "m.md", tmp_path / "j.xml"
    code, out, _ = run_cli(
        capsys, "check", gate.config, "--baseline", report, "--markdown", md, "--junit", junit, "--root", tmp_path
    )
    assert code == 0, out
    assert out.splitlines()[2].split()[-2:] == ["Δ", "rel"] and "Δ abs" in out.splitlines()[2]
    cells = text_row(out, "s")
    assert cells[2] == f"{error:.5g}" and cells[-3:-1] == ["pass", fmt_delta(delta)]
    assert cells[-2].startswith(("+0.02", "+0.019999"))
    assert text_row(out, "y")[-2:] == ["0", "0"]
    markdown = md.read_text()
    assert "| result | output | abs error / atol | rel error / rtol | failed iters |" in markdown
    assert "| output | baseline abs | Δ abs | baseline rel | Δ rel |" in markdown
    assert md_row(markdown, "s")[0] == "✅\u00a0pass" and md_row(markdown, "s", 1)[2] == md_delta(delta)
    assert "baseline report.json (6 iterations)" in markdown
    [s_case] = [c for suite in JUnitXml.fromfile(str(junit)) for c in suite if c.name.endswith("/s")]
    assert f"delta_abs={fmt_delta(delta)}" in s_case.system_out and not list(s_case.result)

    # Regression mode: fails only when the worsening exceeds the margin.
    def regression(*margin) -> tuple[int, str, str]:
        return run_cli(
            capsys, "check", gate.config, "--baseline", report, "--fail-on", "regression",
            *(["--regression-margin", *margin] if margin else []), "--junit", junit, "--markdown", md,
            "--root", tmp_path,
        )  # fmt: skip

    code, out, _ = regression("0.05")
    assert code == 0 and "PASSED: 2 of 2 outputs not worse than the baseline (margin 0.05) over 6 iterations" in out
    code, out, err = regression("0.01")
    assert code == 1, out + err
    assert (
        "REGRESSED: 1 of 2 outputs regressed against the baseline: 's' (abs error "
        f"{error:.5g} vs {base_error:.5g} on the baseline, worse by more than the margin 0.01)"
    ) in out
    assert text_row(out, "s")[-3] == "REGRESSED" and text_row(out, "y")[-3] == "pass"
    assert md_row(md.read_text(), "s")[0] == "❌\u00a0REGRESSED" and md_row(md.read_text(), "s", 1)[2] == md_delta(
        delta
    )
    [(name, [failure])] = [
        (c.name, list(c.result)) for suite in JUnitXml.fromfile(str(junit)) for c in suite if list(c.result)
    ]
    assert name == "model.onnx/s" and isinstance(failure, Failure)
    assert failure.message.startswith("REGRESSED against the baseline (abs error ")
    # Per output, and relative to the baseline.
    assert regression("0", "s:0.05")[0] == 0
    assert regression("0.05", "s:0.01")[0] == 1
    assert regression("150%")[0] == 1  # 0.03 > 0.01 * 2.5
    assert regression("250%")[0] == 0  # 0.03 <= 0.01 * 3.5
    # Without a margin, any worsening is a regression; y (unchanged) is not one.
    code, out, _ = regression()
    assert code == 1 and "1 of 2 outputs regressed" in out


def test_a_partial_baseline_gives_the_same_deltas_and_a_baseline_series(gate, tmp_path, capsys):
    base_error, report, partial = baseline_of(capsys, gate, tmp_path, 0.01)
    error = gate.move_s(0.03)
    md = tmp_path / "m.md"
    code, out, _ = run_cli(capsys, "check", gate.config, "--baseline", partial, "--markdown", md, "--root", tmp_path)
    assert code == 0 and text_row(out, "s")[-2] == fmt_delta(error - base_error)
    markdown = md.read_text()
    assert (
        "`s` (onnxrt vs golden): max abs error per iteration (6 iterations), atol 0.05; bars: this run, line: baseline"
        in markdown
    )
    chart = markdown.split("```mermaid\n", 1)[1].split("```", 1)[0]
    assert "    bar [5, 0, 0, 0, 0, 0, 0, 0, 0, 1]" in chart  # five exact iterations, one at 0.03
    assert "    line [5, 0, 0, 1, 0, 0, 0, 0, 0, 0]" in chart  # the baseline's one at 0.01
    assert "- `y`: all 6 iterations have max abs error 0" in markdown
    assert f"| `s` | `█········▂` | `█··▂······` | 0 | {fmt(error)} | 0.05 |" in markdown  # atol above every bin


def regression_check(capsys, gate, root, baseline, margin: str):
    """``check --baseline B --fail-on regression --regression-margin M`` inside ``root``."""
    args = ("--baseline", baseline, "--fail-on", "regression", "--regression-margin", margin)
    return run_cli(capsys, "check", gate.config, "--root", root, *args)


def test_crossing_the_tolerance_is_a_regression_and_an_old_failure_is_known(gate, tmp_path, capsys):
    _, report, _ = baseline_of(capsys, gate, tmp_path, 0.01)
    gate.move_s(0.06)  # out of tolerance now (atol 0.05), within it on the baseline
    code, out, _ = regression_check(capsys, gate, tmp_path, report, "1")
    assert code == 1 and "'s' (now out of tolerance, within it on the baseline)" in out

    _, report, _ = baseline_of(capsys, gate, tmp_path / "failing", 0.06)  # the baseline fails too
    gate.move_s(0.062)
    code, out, _ = run_cli(capsys, "check", gate.config, "--root", tmp_path, "--baseline", report)
    assert code == 1  # the tolerances' verdict
    code, out, _ = regression_check(capsys, gate, tmp_path, report, "0.01")
    assert code == 0, out
    assert "; 1 out of tolerance as on the baseline: 's'" in out and text_row(out, "s")[-3] == "FAIL (as baseline)"
    code, out, _ = regression_check(capsys, gate, tmp_path, report, "1e-3")
    assert code == 1 and "worse by more than the margin 0.001" in out


def test_merge_applies_the_baseline_too(gate, tmp_path, capsys):
    _, report, _ = baseline_of(capsys, gate, tmp_path, 0.01)
    gate.move_s(0.03)
    parts = []
    for i in (1, 2):
        parts.append(tmp_path / f"p{i}.json")
        assert run_cli(capsys, "check", gate.config, "--shard", f"{i}/2", "--write-partial", parts[-1],
                       "--root", tmp_path)[0] == 0  # fmt: skip
    code, out, _ = run_cli(
        capsys, "merge", *parts, "--baseline", report, "--fail-on", "regression", "--regression-margin", "0.01",
        "--junit", tmp_path / "j.xml", "--root", tmp_path,
    )  # fmt: skip
    assert code == 1 and "merged from 2 shards; baseline report.json" in out
    code, _, _ = run_cli(
        capsys, "merge", *parts, "--baseline", report, "--junit", tmp_path / "j.xml", "--root", tmp_path
    )
    assert code == 0


# --- a baseline that does not fit: one line, exit 2 ------------------------------------------------


def one_line_error(capsys, *args) -> str:
    code, out, err = run_cli(capsys, *args)
    assert code == 2, out + err
    assert err.count("\n") == 1 and "Traceback" not in err
    return err


def test_a_baseline_of_another_model_or_statistic_is_an_error(gate, tmp_path, capsys):
    _, report, partial = baseline_of(capsys, gate, tmp_path, 0.01)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**json.loads(report.read_text()), "model": "resnet50.onnx"}))
    err = one_line_error(capsys, "check", gate.config, "--root", tmp_path, "--baseline", other)
    assert f"{other}: the baseline is for model resnet50.onnx, this run is for model.onnx" in err
    err = one_line_error(
        capsys, "check", gate.config, "--root", tmp_path, "--baseline", partial, "--check-error-stat", "mean"
    )
    assert "output 'y' is checked with max on the baseline but mean here" in err
    err = one_line_error(capsys, "check", gate.config, "--root", tmp_path, "--baseline", report, "--check-average")
    assert "checked with max on the baseline but max averaged over iterations here" in err
    renamed = tmp_path / "renamed.json"
    doc = json.loads(report.read_text())
    for row in doc["rows"]:
        row["output"] += "_old"
    renamed.write_text(json.dumps(doc))
    assert "the baseline has none of this run's outputs" in one_line_error(
        capsys, "check", gate.config, "--root", tmp_path, "--baseline", renamed
    )


def test_baseline_flags_and_files_are_checked(gate, tmp_path, capsys):
    _, report, partial = baseline_of(capsys, gate, tmp_path, 0.01)
    assert "--fail-on regression needs --baseline" in one_line_error(
        capsys, "check", gate.config, "--fail-on", "regression"
    )
    assert "--regression-margin applies only with --fail-on regression" in one_line_error(
        capsys, "check", gate.config, "--root", tmp_path, "--baseline", report, "--regression-margin", "1"
    )
    for bad in ("-1", "abc%", "nan"):
        assert "--regression-margin" in one_line_error(
            capsys,
            "check",
            gate.config,
            "--root",
            tmp_path,
            "--baseline",
            report,
            "--fail-on",
            "regression",
            f"--regression-margin={bad}",
        )
    missing = tmp_path / "nowhere.json"
    assert f"{missing}: no such partial result file or folder" in one_line_error(
        capsys, "check", gate.config, "--root", tmp_path, "--baseline", missing
    )
    corrupt = tmp_path / "corrupt.json"
    corrupt.write_text("{")
    assert "not valid JSON" in one_line_error(capsys, "check", gate.config, "--root", tmp_path, "--baseline", corrupt)
    shard = tmp_path / "shard.json"
    assert run_cli(capsys, "check", gate.config, "--shard", "1/2", "--write-partial", shard, "--root", tmp_path)[0] == 0
    assert "missing shard 2/2" in one_line_error(capsys, "check", gate.config, "--root", tmp_path, "--baseline", shard)


def test_action_inputs_baseline_fail_on_and_margin(gate, tmp_path, capsys, monkeypatch):
    import yaml

    from gate.action import main

    _, report, _ = baseline_of(capsys, gate, tmp_path, 0.01)
    gate.move_s(0.03)
    workspace = gate.folder.parent
    monkeypatch.chdir(workspace)
    inputs = yaml.safe_load((Path(__file__).resolve().parents[1] / "action.yml").read_text())["inputs"]
    base = {
        f"INPUT_{n.upper()}": "" if "${{" in str(s.get("default", "")) else str(s.get("default", ""))
        for n, s in inputs.items()
    }

    def action(**given) -> tuple[int, dict]:
        out, summary = workspace / "out", workspace / "summary"
        out.write_text("")
        summary.write_text("")
        env = {**base, **{f"INPUT_{k.upper()}": v for k, v in given.items()}}
        env.update(
            INPUT_CONFIG="gate/gate.toml", INPUT_COMMENT_MODE="off", GITHUB_WORKSPACE=str(workspace),
            GITHUB_OUTPUT=str(out), GITHUB_STEP_SUMMARY=str(summary),
        )  # fmt: skip
        code = main(env)
        return code, json.loads((workspace / "accuracy-gate-report.json").read_text())

    baseline = "base/report.json"  # inside the workspace, as the action requires
    assert (workspace / baseline).is_file()
    code, doc = action(baseline=baseline)
    assert code == 0 and doc["baseline"] == "report.json (6 iterations)"
    [s] = [row for row in doc["rows"] if row["output"] == "s"]
    assert s["baseline_abs_value"] < s["abs_value"]
    code, doc = action(baseline=baseline, fail_on="regression", regression_margin="0.01")
    assert code == 1 and doc["fail_on"] == "regression" and doc["failed_outputs"] == ["s"]
    [s] = [row for row in doc["rows"] if row["output"] == "s"]
    assert (s["regressed"], s["within_tolerance"], s["known_failure"]) == (True, True, False)
    code, doc = action(baseline=baseline, fail_on="regression", regression_margin="5%,s:300%")
    assert code == 0
    code, doc = action(fail_on="regression")
    assert code == 2 and "needs input `baseline`" in doc["message"]
    code, doc = action(baseline=baseline, regression_margin="1")
    assert code == 2 and "applies only with `fail_on: regression`" in doc["message"]


def test_one_shards_results_file_is_not_a_baseline_and_margins_name_real_outputs(tmp_path):
    from gate.baseline import Baseline, apply_baseline, load_baseline
    from gate.errors import GateError
    from gate.results import GateResult, OutputVerdict
    from gate.results_file import write_report

    result = GateResult(model="m.onnx", status="passed", message="ok", iterations=4,
                        rows=[OutputVerdict(("onnxrt", "golden"), "y", True, stat="max", abs_value=0.0)])  # fmt: skip
    result.scope = "shard 1/2: 4 of 8 iterations"
    write_report(result, tmp_path / "shard.json")
    with pytest.raises(GateError, match="covers only shard 1/2: 4 of 8 iterations; use the merged run"):
        load_baseline(tmp_path / "shard.json")
    baseline = Baseline(source="b.json", model="m.onnx", rows={}, description="b")
    with pytest.raises(GateError, match="regression_margin names output 'nosuch', which this run does not have"):
        apply_baseline(result, baseline, "regression", {"": 0.1, "nosuch": 0.2})


def test_more_failed_iterations_than_on_the_baseline_is_a_regression(tmp_path, capsys):
    # Failed before: baseline 1 bad element in 1 of 8 iterations, now every element bad in 8 of 8 with the
    # same worst abs error 0.01: PASSED, "not worse than the baseline".
    from test_fail_fast import identity_gate

    x = np.zeros(2, np.float32)
    one_bad = np.array([0.01, 0.0], np.float32)
    config = identity_gate(tmp_path / "g", [one_bad] + [x] * 7, "")
    golden = config.parent / "golden"
    for k in range(8):  # the inputs are 0, as the golden values but one
        np.savez(config.parent / "inputs" / f"{k}.npz", x=x)
    base = config.parent / "base.json"
    flags = ["--junit", str(config.parent / "j.xml")]
    assert cli.main(["check", str(config), *flags, "--report", str(base)]) == 1
    for k in range(8):
        np.savez(golden / f"{k}.npz", x_out=np.full(2, 0.01, np.float32))
    report = config.parent / "r.json"
    code = cli.main(["check", str(config), *flags, "--report", str(report), "--baseline", str(base),
                     "--fail-on", "regression"])  # fmt: skip
    assert code == 1
    data = json.loads(report.read_text())
    assert data["message"] == (
        "1 of 1 outputs regressed against the baseline: 'x_out' (failed in 8/8 iterations, 1/8 on the baseline)"
    )
    # The same failures as on the baseline stay a known failure.
    np.savez(golden / "0.npz", x_out=one_bad)
    for k in range(1, 8):
        np.savez(golden / f"{k}.npz", x_out=x)
    code = cli.main(["check", str(config), *flags, "--report", str(report), "--baseline", str(base),
                     "--fail-on", "regression"])  # fmt: skip
    assert code == 0 and "1 out of tolerance as on the baseline" in json.loads(report.read_text())["message"]
