"""One path rule for reads and writes (issue 14): ``run``, ``merge`` and ``check --baseline`` read
nothing outside the confinement root (``--root``, else GITHUB_WORKSPACE, else the working directory
or the config's folder), also not through a symlink; a report folder replaced by a symlink while the
run goes on is not followed (``gate.report_files.place``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import junitparser
import pytest
from test_report_claims import action_environ

import gate.job
from gate import cli
from gate.action import main as action_main

from conftest import EXAMPLE


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside the workspace with a copy of the example's model and data."""
    folder = tmp_path / "outside"
    shutil.copytree(EXAMPLE, folder)
    return folder


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def test_run_does_not_read_a_model_or_golden_outputs_outside_the_working_directory(outside, work, capsys):
    assert cli.main(["run", str(outside / "model.onnx"), "--onnxrt", "--load-inputs", str(outside / "data")]) == 2
    assert one_line(capsys) == (
        f"accuracy-gate: error: {outside}/model.onnx: the model resolves outside {work}; paths must stay inside it."
    )
    shutil.copy(outside / "model.onnx", work / "model.onnx")
    (work / "data").symlink_to(outside / "data")  # inside by name, outside by where it leads
    assert cli.main(["run", "model.onnx", "--onnxrt", "--load-inputs", "data", "--load-outputs", "data"]) == 2
    assert one_line(capsys) == (
        f"accuracy-gate: error: data: --load-inputs resolves outside {work} (through a symlink); paths must stay "
        "inside it."
    )
    [case] = [c for suite in junitparser.JUnitXml.fromfile("accuracy-gate-junit.xml") for c in suite]
    assert "resolves outside" in case.result[0].message  # the error is reported, not a stale pass
    (work / "data").unlink()
    shutil.copytree(outside / "data", work / "data")
    assert cli.main(["run", "model.onnx", "--onnxrt", "--load-inputs", "data", "--load-outputs", "data"]) == 0


def shard_files(example: Path, folder: Path) -> list[Path]:
    parts = []
    for i in (1, 2):
        parts.append(folder / f"p{i}.partial.json")
        args = ["check", str(example / "gate.toml"), "--shard", f"{i}/2", "--write-partial", str(parts[-1])]
        assert cli.main([*args, "--junit", str(folder / f"j{i}.xml"), "--root", str(folder)]) == 0
    return parts


def test_merge_does_not_read_partial_files_outside_the_root(tmp_path, work, capsys):
    example = Path(shutil.copytree(EXAMPLE, work / "example"))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.copytree(EXAMPLE, outside / "example")
    parts = shard_files(outside / "example", outside)
    capsys.readouterr()
    assert cli.main(["merge", *map(str, parts)]) == 2
    assert f"{parts[0]}: merge's partial result files (a partial result file being merged) resolves outside" in (
        one_line(capsys)
    )
    (work / "download").mkdir()
    (work / "download" / "p1.partial.json").symlink_to(parts[0])
    shutil.copy(parts[1], work / "download" / "p2.partial.json")
    assert cli.main(["merge", "download/p1.partial.json", "download/p2.partial.json"]) == 2
    assert "(through a symlink)" in one_line(capsys)
    inside = shard_files(example, work)
    assert cli.main(["merge", *map(str, inside)]) == 0


def test_check_does_not_read_a_baseline_outside_the_root(tmp_path, work, capsys):
    example = Path(shutil.copytree(EXAMPLE, work / "example"))
    args = ["check", str(example / "gate.toml"), "--report", str(tmp_path / "r.json"), "--root", str(tmp_path)]
    assert cli.main(args) == 0
    capsys.readouterr()
    assert cli.main(["check", str(example / "gate.toml"), "--baseline", str(tmp_path / "r.json")]) == 2
    assert one_line(capsys) == (
        f"accuracy-gate: error: {tmp_path}/r.json: --baseline (the baseline) resolves outside {example}; paths "
        "must stay inside it."
    )
    (example / "base.json").symlink_to(tmp_path / "r.json")
    assert cli.main(["check", str(example / "gate.toml"), "--baseline", str(example / "base.json")]) == 2
    assert "(through a symlink)" in one_line(capsys)
    shutil.copy(tmp_path / "r.json", example / "copy.json")
    assert cli.main(["check", str(example / "gate.toml"), "--baseline", str(example / "copy.json")]) == 0


def swap_folder_during_the_run(monkeypatch, folder: Path, target: Path) -> None:
    """When the model is about to run, ``folder`` (holding the claimed report files) is moved away
    and replaced by a symlink to ``target`` (outside the workspace)."""
    real = gate.job.check

    def check(*args, **kwargs):
        os.rename(folder, folder.with_name("moved-away"))
        folder.symlink_to(target, target_is_directory=True)
        return real(*args, **kwargs)

    monkeypatch.setattr(gate.job, "check", check)


def test_cli_does_not_follow_a_report_folder_replaced_by_a_symlink_during_the_run(
    tmp_path, example, monkeypatch, capsys
):
    target = tmp_path / "target"
    target.mkdir()
    out = example / "out"
    swap_folder_during_the_run(monkeypatch, out, target)
    flags = ["--junit", str(out / "j.xml"), "--report", str(out / "r.json"), "--root", str(example)]
    assert cli.main(["check", str(example / "gate.toml"), *flags]) == 2
    assert f"{out}/j.xml: the folder of the JUnit file was replaced while the gate ran" in capsys.readouterr().err
    assert list(target.iterdir()) == []  # nothing written outside
    # the claims are still there, in the folder that was moved: not passed
    [case] = [c for suite in junitparser.JUnitXml.fromfile(str(example / "moved-away" / "j.xml")) for c in suite]
    assert case.result and "running: accuracy-gate has not finished" in case.result[0].message


def test_action_does_not_follow_a_report_folder_replaced_by_a_symlink_during_the_run(
    tmp_path, example, monkeypatch, capsys
):
    target = tmp_path / "target"
    target.mkdir()
    monkeypatch.chdir(example)
    swap_folder_during_the_run(monkeypatch, example / "out", target)
    environ = action_environ(example, tmp_path)
    assert action_main(environ) == 2
    out = capsys.readouterr().out
    assert "the folder of the JUnit file was replaced while the gate ran" in out
    assert list(target.iterdir()) == []
    assert "passed=false" in (tmp_path / "github_output").read_text()
