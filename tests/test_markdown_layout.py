"""The Markdown report's layout for a PR timeline (about 780 px): the verdict symbol first in each
row, errors with tolerances in one cell, numbers that never wrap at their sign (U+2212 minus, no-break
spaces), the baseline's columns in a table of their own, error details below the table with paths
relative to the workspace, and the iteration count said once. Compared exactly."""

from __future__ import annotations

from gate.report.markdown import md_number, relative_paths, render_markdown
from gate.results import ERROR, GateResult, OutputVerdict

NBSP, MINUS = "\u00a0", "\u2212"


def verdict(name, passed=True, **extra) -> OutputVerdict:
    values = dict(stat="max", atol=1e-5, rtol=1e-3, abs_value=0.0, rel_value=0.0, iterations=8)
    values.update(extra)
    return OutputVerdict(("onnxrt", "golden"), name, passed, **values)


def test_numbers_use_the_minus_sign_and_text_stays_escaped():
    assert md_number("1e-05") == f"1e{MINUS}05"
    assert md_number("-3.2e-07") == f"{MINUS}3.2e{MINUS}07"
    assert md_number("+1.5e+03") == "+1.5e+03" and md_number("-inf") == f"{MINUS}inf" and md_number("0") == "0"
    assert md_number("n/a") == "n/a" and md_number("new") == "new" and md_number("-") == "-"
    assert md_number("*x*") == "\\*x\\*"


def test_relative_paths():
    text = "/w/repo/data/3.npz: file not found; /w/repo2/x and /tmp/a"
    assert relative_paths(text, ["/w/repo", "/w/repo/"]) == "data/3.npz: file not found; /w/repo2/x and /tmp/a"
    assert relative_paths("/a/b", ["/", ""]) == "/a/b"


def test_an_error_row_is_marked_and_its_details_sit_below_the_table():
    rows = [
        verdict("y", False, error="is float64 in the golden outputs but onnxrt produces float32 at iteration 2 "
                "(inputs /ws/repo/data/2.npz)", abs_value=None, rel_value=None),
        verdict("s", abs_value=2.5e-6, rel_value=1e-4, stat="mean"),
    ]  # fmt: skip
    result = GateResult("m.onnx", ERROR, "could not compare 'y' (/ws/repo/data/2.npz)", rows, iterations=8)
    markdown = render_markdown(result, roots=["/ws/repo"])
    assert markdown == "\n".join(
        [
            "## ⚠️ Accuracy gate: m.onnx",
            "",
            "**error (could not evaluate)**: could not compare 'y' (data/2.npz)",
            "",
            "8 iterations · checked statistic: mean",
            "",
            "| result | output | abs error / atol | rel error / rtol | failed iters |",
            "|---|---|--:|--:|--:|",
            "| ⚠️\u00a0ERROR | `y` | - | - | - |",
            f"| ✅\u00a0pass | `s` | 2.5e{MINUS}06{NBSP}/{NBSP}1e{MINUS}05 | 0.0001{NBSP}/{NBSP}0.001 | 0/8 |",
            "",
            "**Could not compare:**",
            "",
            "- `y`: is float64 in the golden outputs but onnxrt produces float32 at iteration 2 (inputs data/2.npz)",
            "",
        ]
    )


def test_the_baseline_gets_a_table_of_its_own_and_mixed_statistics_a_column():
    rows = [
        verdict("y", False, abs_value=3e-5, rel_value=0.01, failed_iterations=2),
        verdict("s", abs_value=1e-6, rel_value=1e-6, stat="median"),
        verdict("z", abs_value=0.0, rel_value=0.0),
    ]
    rows[0].baseline_found, rows[0].baseline_abs, rows[0].baseline_rel = True, 1e-5, 0.02
    rows[1].baseline_found, rows[1].baseline_abs, rows[1].baseline_rel = True, 1e-6, 1e-6
    message = "1 of 3 outputs out of tolerance: 'y'"
    result = GateResult("m.onnx", "regressed", message, rows, iterations=8, baseline="base.json (8 iterations)")
    markdown = render_markdown(result, roots=[])
    table = markdown.split("\n\n", 3)[3].rsplit("<details>", 1)[0]
    assert table == "\n".join(
        [
            "| result | output | stat | abs error / atol | rel error / rtol | failed iters |",
            "|---|---|---|--:|--:|--:|",
            f"| ❌\u00a0FAIL | `y` | max | 3e{MINUS}05{NBSP}/{NBSP}1e{MINUS}05 | 0.01{NBSP}/{NBSP}0.001 | 2/8 |",
            f"| ✅\u00a0pass | `s` | median | 1e{MINUS}06{NBSP}/{NBSP}1e{MINUS}05 | 1e{MINUS}06{NBSP}/{NBSP}0.001"
            " | 0/8 |",
            f"| ✅\u00a0pass | `z` | max | 0{NBSP}/{NBSP}1e{MINUS}05 | 0{NBSP}/{NBSP}0.001 | 0/8 |",
            "",
            "Against the baseline base.json (8 iterations):",
            "",
            "| output | baseline abs | Δ abs | baseline rel | Δ rel |",
            "|---|--:|--:|--:|--:|",
            f"| `y` | 1e{MINUS}05 | +2e{MINUS}05 | 0.02 | {MINUS}0.01 |",
            f"| `s` | 1e{MINUS}06 | 0 | 1e{MINUS}06 | 0 |",
            "| `z` | new | new | new | new |",
            "",
            "",
        ]
    )
    assert markdown.split("\n")[4] == "8 iterations · baseline base.json (8 iterations)"


def test_a_passing_verdict_that_names_the_iterations_is_not_repeated():
    result = GateResult("m.onnx", "passed", "1 of 1 outputs within tolerance over 8 iterations", [verdict("y")], 8)
    lines = render_markdown(result, "https://github.com/o/r/actions/runs/1", roots=[]).split("\n")
    assert lines[4] == "checked statistic: max · [workflow run](https://github.com/o/r/actions/runs/1)"
    assert sum("8 iterations" in line for line in lines) == 1
