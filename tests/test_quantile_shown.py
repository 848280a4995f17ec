"""Which quantile a ``check_error_stat = "quantile"`` output checked is in every report: the terminal
and Markdown tables (``quantile 0.9``), JUnit (``quantile=0.9``) and the results file
(``"quantile": 0.9``); a baseline of another quantile is a one-line error, as one of another
statistic. Failed before: every report said only ``quantile``, and a 0.5 baseline was compared
with a 0.9 run. Real ONNX Runtime on the shipped example."""

from __future__ import annotations

import json

from conftest import run_cli


def test_the_quantile_is_in_every_report_and_a_baseline_of_another_is_refused(example):
    cfg = example / "gate.toml"
    flags = ("--check-error-stat", "quantile", "--error-quantile", "0.9", "--junit", example / "j.xml")
    proc = run_cli("check", cfg, *flags, "--report", example / "r.json", "--markdown", example / "r.md", cwd=example)
    assert proc.returncode == 0, proc.stderr
    assert "quantile 0.9 " in proc.stdout  # the table's stat cell
    assert "checked statistic: quantile 0.9" in (example / "r.md").read_text()
    assert "stat=quantile quantile=0.9 atol=" in (example / "j.xml").read_text()
    row = json.loads((example / "r.json").read_text())["rows"][0]
    assert row["stat"] == "quantile" and row["quantile"] == 0.9
    proc = run_cli(
        "check", cfg, "--check-error-stat", "quantile", "--error-quantile", "0.5", "--junit", example / "j2.xml",
        "--baseline", example / "r.json", cwd=example,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "is checked with quantile 0.9 on the baseline but quantile 0.5 here" in proc.stderr
