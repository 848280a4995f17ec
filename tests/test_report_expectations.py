"""Every report of a result, byte for byte, as golden files per case under tests/expectations/reports/
<case>/: the job summary (summary.md), the PR comment (comment.md, with its marker line), the JUnit
file (junit.xml), the results file (results.json), the action's annotations (annotations.txt) and the
CLI's table (text.txt). A change to a report shows up as a diff of these files, reviewed once.

Regenerate them after an intended change (like publish-unit-test-result-action's
``update_expectations``)::

    UPDATE_EXPECTATIONS=1 python -m pytest tests/test_report_expectations.py -q
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gate.baseline import Baseline, apply_baseline
from gate.github.comments import COMMENT_TRUNCATE_AT, header_size, marker
from gate.github.publish import annotate_outputs
from gate.report import render_markdown, render_text, write_junit
from gate.results import ERROR, GateResult, OutputVerdict
from gate.results_file import write_report

EXPECTATIONS = Path(__file__).resolve().parent / "expectations" / "reports"
UPDATE = os.environ.get("UPDATE_EXPECTATIONS") == "1"
RUN = "https://github.com/octo/repo/actions/runs/42"
SHA = "4f1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5"
KEY = "accuracy/gate.toml"
FACTS = {
    "accuracy_gate_version": "0.0.0",
    "onnxruntime_version": "1.20.1",
    "execution_providers": "CPUExecutionProvider",
}
SUMMARY_ROOM = 1024 * 1024  # the job summary's room, as actions.step_summary_room gives it when empty
BUDGETS = {"many_outputs_truncated": 3000}
"""A case's room for the summary and the comment, where it shows the truncation (the real limits need
tens of thousands of rows)."""


def row(name: str, passed: bool, **extra) -> OutputVerdict:
    values = dict(
        stat="elemwise",
        atol=1e-5,
        rtol=1e-4,
        abs_value=0.0 if passed else 0.0125,
        rel_value=0.0 if passed else 0.03125,
        iterations=8,
        failed_iterations=0 if passed else 2,
        worst_iteration=5,
        worst_index=(0, 1),
        mismatch_count=0 if passed else 3,
        num_elements=6,
        zero_reference_count=0,
        dtypes=("float32", "float32"),
    )
    values.update(extra)
    return OutputVerdict(("onnxrt", "golden"), name, passed, **values)


def result(rows, status=None, message=None, **extra) -> GateResult:
    failed = [r for r in rows if not r.passed]
    status = status or ("regressed" if failed else "passed")
    message = message or (
        f"{len(failed)} of {len(rows)} outputs out of tolerance over 8 iterations"
        if failed
        else f"{len(rows)} of {len(rows)} outputs within tolerance over 8 iterations"
    )
    values = dict(rows=rows, iterations=8, facts=dict(FACTS), duration_s=1.5)
    values.update(extra)
    return GateResult("model.onnx", status, message, **values)


def _baseline_case() -> GateResult:
    current = result([row("logits", False), row("boxes", True)])
    base_rows = [row("logits", False, abs_value=0.0123), row("boxes", True, abs_value=1e-6)]
    rows = {(r.pair, r.output): r for r in base_rows}
    apply_baseline(current, Baseline("base.json", "model.onnx", rows, "base.json (8 iterations)"), "regression", None)
    return current


CASES = {
    "passed": lambda: result([row("save_infer_model/scale_0.tmp_1", True), row("boxes", True)]),
    "regressed": lambda: result([row("logits", False), row("boxes", True)], title="Nightly accuracy"),
    "error_before_a_result": lambda: GateResult(
        "gate.toml", ERROR, "gate.toml: 'rtol' must be a non-negative finite number, got inf."
    ),
    "stopped_part_way": lambda: result(
        [row("logits", True, iterations=3)],
        status=ERROR,
        message="stopped after 3 of 8 iterations: iteration 3 (inputs data/3.npz): data/3.npz: file not found.",
        stopped_at=3,
    ),
    "baseline_regression": _baseline_case,
    "many_outputs_truncated": lambda: result([row(f"output_{i:02d}", i % 2 == 0) for i in range(30)]),
    "exact_failure": lambda: result(
        [
            row("token_ids", False, stat="exact", exact=True, atol=0.0, rtol=0.0, abs_value=5.0, rel_value=0.83333,
                worst_index=(0, 1), mismatch_count=2, zero_reference_count=1, dtypes=("int64", "int64"),
                worst_values=(1, 6), worst_absdiff=5.0, worst_reldiff=0.83333),
            row("embedding", True, func="cosine", stat="cosine", abs_value=0.99999994, threshold=0.9999999,
                atol=None, rtol=None, rel_value=None),
        ]
    ),  # fmt: skip
    "nothing_compared": lambda: GateResult(
        "model.onnx", "passed", "onnxrt, 1 iteration (outputs: y float32 [1,4]); nothing compared (one runner, no "
        "--load-outputs): give --load-outputs GOLDEN or a second runner (e.g. --onnxrt --onnxrt) to compare",
        iterations=1,
    ),
    "hostile_names": lambda: result(
        [row("::error::forged | `x` <b>", False), row("line\n::add-mask::y", True), row("a_b*c", False)]
    ),
}


def reports(case: str, tmp_path: Path, capsys) -> dict[str, str]:
    res = CASES[case]()
    write_junit(res, tmp_path / "junit.xml")
    write_report(res, tmp_path / "results.json", SHA, KEY)
    capsys.readouterr()
    annotate_outputs(res)
    annotations = capsys.readouterr().out
    comment_room = BUDGETS.get(case, COMMENT_TRUNCATE_AT)
    comment = render_markdown(res, RUN, SHA, budget=comment_room - header_size(KEY, None))
    summary_room = BUDGETS.get(case, SUMMARY_ROOM)
    return {
        "summary.md": render_markdown(
            res, RUN, SHA, budget=summary_room - 1, more_at="the JUnit report and the results file"
        ),
        "comment.md": f"{marker(KEY)}\n{comment}",
        "junit.xml": (tmp_path / "junit.xml").read_text(encoding="utf-8"),
        "results.json": (tmp_path / "results.json").read_text(encoding="utf-8"),
        "annotations.txt": annotations,
        "text.txt": render_text(res) + "\n",
    }


@pytest.mark.parametrize("case", sorted(CASES))
def test_reports_equal_their_expectations(case, tmp_path, capsys):
    folder = EXPECTATIONS / case
    for name, text in reports(case, tmp_path, capsys).items():
        path = folder / name
        if UPDATE:
            folder.mkdir(parents=True, exist_ok=True)
            path.write_bytes(text.encode("utf-8"))
        assert path.is_file(), f"{path} is missing; regenerate with UPDATE_EXPECTATIONS=1 (see the module docstring)"
        assert text == path.read_bytes().decode("utf-8"), f"{case}/{name} differs from its expectation"


def test_no_stale_expectations():
    assert sorted(p.name for p in EXPECTATIONS.iterdir()) == sorted(CASES)
