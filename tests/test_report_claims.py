"""Claimed report files (issue 14): before any model runs every report path of the run reads "running /
could not evaluate", each final file replaces its claim atomically, and SIGTERM / SIGINT write an
error report and exit 2, in the CLI and in the action alike (``gate.report_files``, ``gate.pipeline.guarded``).
Files are read back with junitparser and json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import junitparser
import pytest

import gate.job
import gate.pipeline
from gate import cli
from gate.action import main as action_main

from conftest import EXAMPLE, ROOT


def junit_state(path: Path) -> tuple[str, str]:
    """``(state, text)`` of a JUnit file read with junitparser: passed (testcases, none with a result),
    else failed / error, and the messages."""
    xml = junitparser.JUnitXml.fromfile(str(path))
    suites = [xml] if isinstance(xml, junitparser.TestSuite) else list(xml)
    cases = [case for suite in suites for case in suite]
    results = [result for case in cases for result in case.result]
    kinds = {type(result).__name__ for result in results}
    state = "passed" if cases and not results else ("error" if "Error" in kinds else "failed")
    return state, " ".join(str(result.message) for result in results)


def results_state(path: Path) -> tuple[str, str]:
    document = json.loads(path.read_text("utf-8"))
    return document["status"], document["message"]


def pass_once(workspace: Path, out: Path) -> list[str]:
    """The report flags of one passing CLI run over ``out`` (an earlier green run's files)."""
    flags = ["--junit", out / "j.xml", "--report", out / "r.json", "--markdown", out / "m.md", "--root", workspace]
    assert cli.main(["check", str(workspace / "gate.toml"), *map(str, flags)]) == 0
    assert junit_state(out / "j.xml")[0] == "passed" and results_state(out / "r.json")[0] == "passed"
    return list(map(str, flags))


def exit_by_raising(monkeypatch) -> None:
    """In-process, the signal handler's ``os._exit(2)`` becomes ``SystemExit(2)`` (the subprocess tests
    below and tests/test_fault_injection.py see the real exit)."""

    def hard_exit(code):
        raise SystemExit(code)

    monkeypatch.setattr(gate.pipeline, "_hard_exit", hard_exit)


def spy_on_check(monkeypatch, then=None) -> list:
    """Replaces ``gate.job.check`` by one that first reads every report file (what a killed run would
    leave), then does ``then`` and runs the real check."""
    seen = []
    real = gate.job.check

    def check(config, *args, **kwargs):
        out = Path(config.path).parent / "out"
        seen.append({p.name: p.read_text("utf-8") for p in sorted(out.iterdir()) if not p.name.startswith(".")})
        if then is not None:
            then()
        return real(config, *args, **kwargs)

    monkeypatch.setattr(gate.job, "check", check)
    return seen


def test_cli_claims_every_report_file_before_the_model_runs(tmp_path, example, monkeypatch, capsys):
    out = example / "out"
    flags = pass_once(example, out)
    seen = spy_on_check(monkeypatch)
    shard = ["--shard", "1/2", "--write-partial", str(out / "p.partial.json")]
    assert cli.main(["check", str(example / "gate.toml"), *flags, *shard]) == 0
    claimed = seen[0]
    assert set(claimed) == {"j.xml", "r.json", "m.md", "p.partial.json"}
    for name in ("j.xml", "r.json"):
        (tmp_path / "claim").mkdir(exist_ok=True)
        (tmp_path / "claim" / name).write_text(claimed[name], "utf-8")
    state, message = junit_state(tmp_path / "claim" / "j.xml")
    assert state == "error" and message.startswith("running: accuracy-gate has not finished")
    assert results_state(tmp_path / "claim" / "r.json") == ("error", message)
    assert "running: accuracy-gate has not finished" in claimed["m.md"]
    assert json.loads(claimed["p.partial.json"])["schema"] == "accuracy-gate-unfinished-run"
    # the final files replaced the claims; no temporary file is left beside them
    assert junit_state(out / "j.xml")[0] == "passed"
    assert sorted(p.name for p in out.iterdir()) == ["j.xml", "m.md", "p.partial.json", "r.json"]


def test_merge_refuses_a_claimed_partial_file(tmp_path, example, monkeypatch, capsys):
    partial = tmp_path / "p.partial.json"
    partial.write_text(json.dumps({"schema": "accuracy-gate-unfinished-run", "status": "running"}), "utf-8")
    code = cli.main(["merge", str(partial), "--junit", str(tmp_path / "j.xml"), "--root", str(tmp_path)])
    assert code == 2 and "not a partial result file" in capsys.readouterr().err
    assert junit_state(tmp_path / "j.xml")[0] == "error"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_cli_signal_during_the_model_writes_an_error_report_and_exits_2(tmp_path, example, monkeypatch, capsys, signum):
    out = example / "out"
    flags = pass_once(example, out)
    spy_on_check(monkeypatch, lambda: (os.kill(os.getpid(), signum), time.sleep(5)))
    exit_by_raising(monkeypatch)
    with pytest.raises(SystemExit) as exited:
        cli.main(["check", str(example / "gate.toml"), *flags])
    assert exited.value.code == 2
    name = signal.Signals(signum).name
    assert f"accuracy-gate: error: interrupted by {name}; could not evaluate" in capsys.readouterr().err
    assert junit_state(out / "j.xml") == ("error", f"interrupted by {name}; could not evaluate")
    assert results_state(out / "r.json") == ("error", f"interrupted by {name}; could not evaluate")
    assert "interrupted by" in (out / "m.md").read_text("utf-8")
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are restored


def action_environ(workspace: Path, tmp_path: Path) -> dict:
    return {
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(tmp_path / "github_output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "INPUT_CONFIG": "gate.toml",
        "INPUT_COMMENT_MODE": "off",
        "INPUT_JUNIT_PATH": "out/j.xml",
        "INPUT_REPORT_PATH": "out/r.json",
        "PATH": os.environ.get("PATH", ""),
    }


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_action_signal_during_the_model_writes_an_error_report_and_exits_2(
    tmp_path, example, monkeypatch, capsys, signum
):
    environ = action_environ(example, tmp_path)
    monkeypatch.chdir(example)
    assert action_main(environ) == 0
    out = example / "out"
    assert junit_state(out / "j.xml")[0] == "passed" and results_state(out / "r.json")[0] == "passed"
    seen = []
    real = gate.job.check

    def check(config, *args, **kwargs):
        seen.append((junit_state(out / "j.xml")[0], results_state(out / "r.json")))
        os.kill(os.getpid(), signum)
        time.sleep(5)
        return real(config, *args, **kwargs)

    monkeypatch.setattr(gate.job, "check", check)
    exit_by_raising(monkeypatch)
    with pytest.raises(SystemExit) as exited:
        action_main(environ)
    assert exited.value.code == 2
    assert seen[0][0] == "error" and seen[0][1][0] == "error"  # claimed before the model ran
    name = signal.Signals(signum).name
    captured = capsys.readouterr()
    assert f"::error title=accuracy-gate::interrupted by {name}; could not evaluate" in captured.out
    assert "Traceback" not in captured.out + captured.err
    assert junit_state(out / "j.xml") == ("error", f"interrupted by {name}; could not evaluate")
    assert results_state(out / "r.json")[0] == "error"


def test_action_entry_point_sigint_is_one_error_line_not_a_traceback(tmp_path, example):
    environ = {**action_environ(example, tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "entrypoint.py")],
        cwd=example,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    junit = example / "out" / "j.xml"
    deadline = time.monotonic() + 120
    while not (junit.exists() and "running: accuracy-gate" in junit.read_text("utf-8")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 2, stdout + stderr
    assert "Traceback" not in stdout + stderr and "KeyboardInterrupt" not in stdout + stderr
    assert "interrupted by SIGINT; could not evaluate" in stdout
    assert junit_state(junit) == ("error", "interrupted by SIGINT; could not evaluate")


assert EXAMPLE.is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can hand files to another owner")
def test_claims_and_reports_written_as_root_get_the_folders_owner(tmp_path, example, capsys):
    out = example / "out"
    os.chown(example, 12345, 23456)
    flags = ["--junit", str(out / "sub" / "j.xml"), "--report", str(out / "r.json"), "--root", str(example)]
    assert cli.main(["check", str(example / "gate.toml"), *flags]) == 0
    for path in (out, out / "sub", out / "sub" / "j.xml", out / "r.json"):
        assert (path.stat().st_uid, path.stat().st_gid) == (12345, 23456), path
