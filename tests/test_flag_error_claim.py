"""A flag error is an early error too: an earlier run's passing reports at this run's report paths do
not survive it (the guide: "a killed run never leaves a report that reads green", nor an early
error). argparse stops before the early claim (gate.early_claim) could run; ``gate.cli.main`` then
claims what a lenient parse of the same flags names, and exits 2 with argparse's one line."""

from __future__ import annotations

import json

from conftest import run_cli


def _reports(folder):
    return folder / "j.xml", folder / "m.md", folder / "r.json"


def test_a_flag_error_leaves_no_earlier_passing_report(example):
    junit, markdown, report = _reports(example)
    flags = ["--junit", junit, "--markdown", markdown, "--report", report]
    first = run_cli("check", example / "gate.toml", *flags, cwd=example)
    assert first.returncode == 0, first.stdout + first.stderr
    assert 'failures="0" errors="0"' in junit.read_text() and json.loads(report.read_text())["passed"] is True

    second = run_cli("check", example / "gate.toml", *flags, "--atoll", "1", cwd=example)  # a typo
    assert second.returncode == 2
    assert second.stderr.strip().splitlines() == [
        "accuracy-gate: error: check: unrecognized arguments: --atoll 1 (see 'accuracy-gate check --help')."
    ]
    assert 'errors="1"' in junit.read_text() and "could not evaluate" in junit.read_text()
    assert json.loads(report.read_text())["passed"] is False
    assert "could not evaluate" in markdown.read_text()


def test_help_and_version_claim_nothing(example):
    junit, _, _ = _reports(example)
    assert run_cli("check", example / "gate.toml", "--junit", junit, cwd=example).returncode == 0
    before = junit.read_bytes()
    for flags in (["--help"], ["--version"]):
        proc = run_cli(*(["check", example / "gate.toml", "--junit", junit] if flags == ["--help"] else []), *flags)
        assert proc.returncode == 0, proc.stderr
    assert junit.read_bytes() == before


def test_sigint_during_the_start_up_imports_is_one_line_and_exit_2(example, tmp_path):
    # Deterministic stand-in for Ctrl-C while numpy / ONNX Runtime load (before gate.pipeline.guarded
    # installs its handler): an import hook raises KeyboardInterrupt when gate.pipeline is imported.
    # Before, Python printed a KeyboardInterrupt traceback and exited 1 ("regressed" for a CI step).
    hook = tmp_path / "hook" / "sitecustomize.py"
    hook.parent.mkdir()
    hook.write_text(
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'gate.pipeline':\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n",
        encoding="utf-8",
    )
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hook.parent), str(ROOT)])}
    env.pop("GITHUB_WORKSPACE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "gate", "check", str(example / "gate.toml")],
        cwd=example,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["accuracy-gate: interrupted; could not evaluate"]
