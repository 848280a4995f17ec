"""Report files under faults (issue 14): written atomically (a failed write leaves the old file or
nothing, never a truncated XML), never through a symlink, and a symlink at the action's default
report paths is a one-line error, not an internal error or a file written outside the workspace."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml

from gate.errors import GateError
from gate.paths import write_atomic

from conftest import EXAMPLE, ROOT

# --- write_atomic ------------------------------------------------------------------------------


def test_write_atomic_replaces_the_file_with_a_plain_mode(tmp_path):
    path = tmp_path / "reports" / "j.xml"
    write_atomic(path, "<old/>")
    write_atomic(path, b"<new/>")
    assert path.read_text() == "<new/>"
    umask = os.umask(0o022)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    assert sorted(os.listdir(path.parent)) == ["j.xml"]  # no temporary file left


@pytest.mark.parametrize("dangling", [True, False])
def test_write_atomic_never_writes_through_a_symlink(tmp_path, dangling):
    outside = tmp_path / "outside.xml"
    if not dangling:
        outside.write_text("mine")
    link = tmp_path / "ws" / "accuracy-gate-junit.xml"
    link.parent.mkdir()
    os.symlink(outside, link)
    with pytest.raises(GateError, match=r"accuracy-gate-junit.xml: the JUnit report path is a symbolic link"):
        write_atomic(link, "<x/>", "JUnit report")
    assert os.path.islink(link)
    assert (not outside.exists()) if dangling else outside.read_text() == "mine"


FILL_AND_FAIL = r"""
import resource, signal, sys
from gate.report import write_junit
from gate.results_file import write_report
from gate.results import GateResult, OutputVerdict

path, kind = sys.argv[1], sys.argv[2]
rows = [OutputVerdict(pair=("onnxrt", "golden"), output=f"out{i:05d}", passed=True, stat="max", atol=1e-5,
                      rtol=1e-5, abs_value=0.0, rel_value=0.0, iterations=8) for i in range(2000)]
result = GateResult(model="model.onnx", status="passed", message="passed", rows=rows, iterations=8)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    (write_junit if kind == "junit" else write_report)(result, path)
except OSError as err:
    print("failed:", err.strerror)
    sys.exit(3)
"""


@pytest.mark.parametrize("kind", ["junit", "report"])
@pytest.mark.parametrize("old", [True, False], ids=["over-an-old-file", "no-old-file"])
def test_a_failed_report_write_leaves_the_old_file_or_nothing(tmp_path, kind, old):
    """A real failed write: the file-size limit (RLIMIT_FSIZE) makes the write fail part-way, as a
    full disk does. On main the file was truncated to 4096 bytes of XML/JSON."""
    path = tmp_path / ("j.xml" if kind == "junit" else "r.json")
    before = b'<?xml version="1.0" ?>\n<testsuites/>\n' if kind == "junit" else b'{"schema":"accuracy-gate-report"}\n'
    if old:
        path.write_bytes(before)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", FILL_AND_FAIL, str(path), kind], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "failed: File too large" in proc.stdout
    if old:
        assert path.read_bytes() == before
    else:
        assert not path.exists()
    assert sorted(os.listdir(tmp_path)) == ([path.name] if old else [])  # no temporary file left


# --- symlinks at the action's default report paths ---------------------------------------------------


def _action(workspace: Path, **inputs) -> tuple[subprocess.CompletedProcess, dict]:
    output = workspace / "github-output.txt"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONPATH": str(ROOT),
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(workspace / "summary.md"),
        "INPUT_CONFIG": "ex/gate.toml",
        "INPUT_COMMENT_MODE": "off",
        **{f"INPUT_{k.upper()}": v for k, v in inputs.items()},
    }
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, gate.action; sys.exit(gate.action.main())"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return proc, outputs


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A workspace holding the example under ex/ (its gate.toml without a [report] junit)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    shutil.copytree(EXAMPLE, ws / "ex")
    config = ws / "ex" / "gate.toml"
    config.write_text("\n".join(line for line in config.read_text().splitlines() if not line.startswith("junit")))
    return ws


def test_a_dangling_symlink_at_the_default_junit_path_is_never_written_through(workspace, tmp_path):
    outside = tmp_path / "outside" / "evil.xml"
    outside.parent.mkdir()
    os.symlink(outside, workspace / "accuracy-gate-junit.xml")
    proc, outputs = _action(workspace)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not outside.exists()  # on an earlier main: the error JUnit was written there, outside the workspace
    # The link itself is replaced by the report (a second attacker's finding: a refused link kept an
    # earlier passing report readable at the report path); nothing is written where it led.
    assert not os.path.islink(workspace / "accuracy-gate-junit.xml")
    assert JUnitXml.fromfile(str(workspace / "accuracy-gate-junit.xml")) is not None
    assert "internal error" not in proc.stdout + proc.stderr
    assert outputs["passed"] == "true" and outputs["junit_path"] == "accuracy-gate-junit.xml"


@pytest.mark.parametrize("target", ["outside", "dangling", "inside"])
def test_a_symlink_at_the_default_results_path_is_replaced_never_written_through(workspace, tmp_path, target):
    outside = tmp_path / "outside.json"
    if target == "outside":
        outside.write_text("mine")
    link_to = workspace / "ex" / "gate.toml" if target == "inside" else outside
    os.symlink(link_to, workspace / "accuracy-gate-report.json")
    config_before = (workspace / "ex" / "gate.toml").read_bytes()
    proc, outputs = _action(workspace)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "internal error" not in log and "Traceback" not in log
    report = workspace / "accuracy-gate-report.json"
    assert not os.path.islink(report) and report.read_bytes().startswith(b'{"schema":"accuracy-gate-report"')
    assert outputs["passed"] == "true" and outputs["report_path"] == "accuracy-gate-report.json"
    assert (workspace / "ex" / "gate.toml").read_bytes() == config_before
    if target == "outside":
        assert outside.read_text() == "mine"
    elif target == "dangling":
        assert not outside.exists()
