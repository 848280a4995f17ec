"""What tests/test_fault_injection.py and tests/test_startup_kills.py share: the command of each front
end (``accuracy-gate check`` or the action's ``entrypoint.py`` with INPUT_* on a copy of
examples/ppocr-cls) and how a report file left by a killed run reads."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import junitparser

from conftest import ROOT


def reads(path: Path) -> str:
    """passed / not passed / unreadable, for a JUnit (junitparser), results or partial result file
    (json; a complete partial result file reads passed: merge counts it) or Markdown report."""
    try:
        if path.suffix == ".xml":
            xml = junitparser.JUnitXml.fromfile(str(path))
            suites = [xml] if isinstance(xml, junitparser.TestSuite) else list(xml)
            cases = [case for suite in suites for case in suite]
            return "passed" if cases and not any(case.result for case in cases) else "not passed"
        if path.suffix == ".json":
            document = json.loads(path.read_text("utf-8"))
            if document["schema"] in ("accuracy-gate-partial", "accuracy-gate-unfinished-run"):
                return "passed" if document["schema"] == "accuracy-gate-partial" else "not passed"
            return "passed" if document["status"] == "passed" or document["passed"] is True else "not passed"
        text = path.read_text("utf-8")
        return "passed" if "PASSED" in text.upper() and "running" not in text else "not passed"
    except Exception as err:  # noqa: BLE001 - a truncated or foreign file is what we look for
        return f"unreadable ({type(err).__name__}: {err})"


def command(front: str, space: Path, out: Path, partial: bool = False) -> tuple[list, dict]:
    """``(argv, environment)`` of ``front`` (``cli`` or ``action``) on the workspace ``space``, its
    report files in ``out`` (j.xml, r.json; the CLI also m.md and, with ``partial``, p.json)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "PYTHONPROFILE"))}
    env["PYTHONPATH"] = str(ROOT)
    if front == "cli":
        flags = ["--junit", out / "j.xml", "--report", out / "r.json", "--markdown", out / "m.md", "--root", space]
        flags += ["--write-partial", out / "p.json"] if partial else []
        return [sys.executable, "-m", "gate", "check", space / "gate.toml", *flags], env
    rel = out.relative_to(space)
    env.update(
        GITHUB_WORKSPACE=str(space),
        GITHUB_OUTPUT=str(out.with_suffix(".output")),
        GITHUB_STEP_SUMMARY=str(out.with_suffix(".summary")),
        INPUT_CONFIG="gate.toml",
        INPUT_COMMENT_MODE="off",
        INPUT_JUNIT_PATH=f"{rel}/j.xml",
        INPUT_REPORT_PATH=f"{rel}/r.json",
    )
    return [sys.executable, ROOT / "entrypoint.py"], env
