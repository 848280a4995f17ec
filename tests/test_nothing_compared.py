"""``accuracy-gate run model.onnx --onnxrt`` (one runner, no --load-outputs) exits 0 as ``polygraphy
run`` does, but compared nothing: no report reads it as a passed comparison. The terminal says ``RAN``
(not PASSED), the Markdown ``ran`` (not a green tick), the results file ``"passed": false`` with
``"nothing_compared": true``, JUnit one skipped test case, and a ``mode: comment`` step that posts such
a results file sets the step output ``passed`` to false."""

from __future__ import annotations

import json
import shutil

import test_action
from junitparser import JUnitXml, Skipped
from test_action import FORK, HEAD_SHA, PR_NUMBER, REPO, companion_env
from test_threshold_digits import float_gate

from conftest import run_cli

workspace = test_action.workspace  # fixtures: a workspace with the example, the action run in-process
sleeps = test_action.sleeps


def run_once(folder):
    float_gate(folder)
    paths = {name: folder / name for name in ("j.xml", "r.json", "s.md")}
    proc = run_cli("run", folder / "m.onnx", "--onnxrt", "--junit", paths["j.xml"], "--report", paths["r.json"],
                   "--markdown", paths["s.md"], cwd=folder)  # fmt: skip
    return proc, paths


def test_one_runner_reads_ran_not_passed_in_every_report(tmp_path):
    proc, paths = run_once(tmp_path)
    assert proc.returncode == 0, proc.stderr
    last = [line for line in proc.stdout.splitlines() if line.startswith("RAN: ")]
    assert last == [
        "RAN: onnxrt, 1 iteration (outputs: y float32 [1,4]); nothing compared (one runner, no --load-outputs): "
        "give --load-outputs GOLDEN or a second runner (e.g. --onnxrt --onnxrt) to compare"
    ]
    assert "PASSED" not in proc.stdout
    document = json.loads(paths["r.json"].read_text())
    assert (document["status"], document["passed"], document["nothing_compared"]) == ("passed", False, True)
    markdown = paths["s.md"].read_text()
    assert markdown.startswith("## ℹ️ Accuracy gate: m.onnx") and "**ran**: onnxrt, 1 iteration" in markdown
    assert "✅" not in markdown and "**passed**" not in markdown
    [case] = list(next(iter(JUnitXml.fromfile(str(paths["j.xml"])))))
    assert [type(r) for r in case.result] == [Skipped]


def test_comment_mode_on_such_a_results_file_does_not_set_passed(workspace, fake, tmp_path):
    fake.add_pull(PR_NUMBER, HEAD_SHA, branch="feature", head_repo=FORK, repo=REPO)
    folder = tmp_path / "run"
    folder.mkdir()
    proc, paths = run_once(folder)
    assert proc.returncode == 0, proc.stderr
    artifact = workspace.root / "artifact"
    artifact.mkdir()
    shutil.copy(paths["r.json"], artifact / "accuracy-gate-report.json")
    run = workspace.run(**companion_env(workspace, tmp_path))
    assert run.code == 0, run.stdout
    assert (run.outputs["passed"], run.outputs["regressed"]) == ("false", "false")
    [comment] = fake.on_pr(PR_NUMBER)
    assert "**ran**" in comment["body"] and "**passed**" not in comment["body"]
    assert "(reported: ran, nothing compared)." in run.stdout
