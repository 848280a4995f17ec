"""Paths in what the action shows are relative to the workspace, by one rule (gate.paths.
workspace_relative, which JUnit's ``file``, the step outputs and the messages share): the verdict
annotation said ``/home/runner/work/repo/repo/ppocr-cls/data: ...`` where the job summary said
``ppocr-cls/data: ...``. The CLI keeps its messages as they are."""

from __future__ import annotations

import shutil

import test_action

from gate.paths import relative_paths, workspace_relative, workspace_roots

workspace = test_action.workspace  # fixtures: a workspace with the example, the action run in-process
sleeps = test_action.sleeps


def test_the_verdict_annotation_names_paths_as_the_summary_does(workspace):
    shutil.rmtree(workspace.root / "ppocr-cls" / "data" / "test_data_set_3")
    run = workspace.run()
    assert run.code == 2, run.stdout
    root = str(workspace.root)
    [final] = run.lines("::error title=accuracy-gate::could not evaluate: ")
    assert root not in final, final
    assert root + "/" not in run.stdout  # nor anywhere in the log: the table, the other annotations
    assert "ppocr-cls/data" in final
    assert root not in run.summary and "ppocr-cls/data" in run.summary


def test_one_rule_for_paths_and_for_messages(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    env = {"GITHUB_WORKSPACE": str(tmp_path / "ws")}
    assert workspace_relative(str(tmp_path / "ws" / "a" / "j.xml"), env) == "a/j.xml"
    assert workspace_relative(str(tmp_path / "other" / "j.xml"), env) == "other/j.xml"  # the working directory
    assert workspace_relative("/elsewhere/j.xml", env) == "/elsewhere/j.xml"  # outside both: as given
    assert workspace_relative(str(tmp_path / "ws"), env) == "."
    message = f"{tmp_path}/ws/a/data: missing; {tmp_path}/b: x"
    assert relative_paths(message, workspace_roots(env)) == "a/data: missing; b: x"
