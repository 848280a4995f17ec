"""What the action publishes on GitHub: the Markdown report under a size budget (section-wise
truncation, escaping of untrusted text) and the versioned JSON results file (written by the gate,
read back as untrusted data by the ``workflow_run`` commenter)."""

from __future__ import annotations

import json
import math

import pytest

from gate import results_file as json_report
from gate.errors import GateError
from gate.report.markdown import md_code, md_text, render_markdown
from gate.results import GateResult, OutputVerdict
from gate.results_file import (
    SCHEMA,
    dumps,
    dumps_within,
    read_untrusted_report,
    report_document,
    results_digest,
    write_report,
)

RUN = "https://github.com/octo/repo/actions/runs/42"
SHA = "4f1d2c3b4a5968778695a4b3c2d1e0f9a8b7c6d5"


def row(name: str, passed: bool, **extra) -> OutputVerdict:
    values = dict(
        stat="elemwise",
        atol=1e-5,
        rtol=1e-5,
        abs_value=0.5 if not passed else 0.0,
        rel_value=0.25 if not passed else 0.0,
        iterations=4,
        failed_iterations=0 if passed else 1,
        worst_iteration=2,
        worst_index=(0, 3),
    )
    values.update(extra)
    return OutputVerdict(("onnxrt", "golden"), name, passed, **values)


def result_of(rows, facts=None, message=None) -> GateResult:
    failed = [r for r in rows if not r.passed]
    status = "regressed" if failed else "passed"
    message = message or (
        f"{len(failed)} of {len(rows)} outputs out of tolerance" if failed else f"{len(rows)} of {len(rows)} ok"
    )
    return GateResult("m.onnx", status, message, rows=rows, iterations=4, facts=facts or {}, duration_s=1.5)


# --- the Markdown report ---------------------------------------------------------------------------


def test_small_report_renders_exactly():
    result = result_of([row("logits", False), row("boxes", True)], facts={"onnxruntime": "1.20.1"})

    assert render_markdown(result, RUN, SHA) == "\n".join(
        [
            "## ❌ Accuracy gate: m.onnx",
            "",
            "**regressed**: 1 of 2 outputs out of tolerance",
            "",
            f"4 iterations · checked statistic: elemwise · commit 4f1d2c3b4a59 · [workflow run]({RUN})",
            "",
            "| result | output | abs error / atol | rel error / rtol | failed iters |",
            "|---|---|--:|--:|--:|",
            "| ❌\u00a0FAIL | `logits` | 0.5\u00a0/\u00a01e\u221205 | 0.25\u00a0/\u00a01e\u221205 | 1/4 |",
            "| ✅\u00a0pass | `boxes` | 0\u00a0/\u00a01e\u221205 | 0\u00a0/\u00a01e\u221205 | 0/4 |",
            "",
            "<details><summary>Failures</summary>",
            "",
            "- `logits`: FAILED: worst max abs error 0.5 (atol 1e-05), rel error 0.25 (rtol 1e-05) at iteration 2,"
            " element \\[0, 3\\]; 1/4 iterations failed",
            "",
            "</details>",
            "",
            "<details><summary>Runtime</summary>",
            "",
            "- onnxruntime: `1.20.1`",
            "",
            "</details>",
            "",
        ]
    )


def _big(n=400, failing_every=4, facts=20):
    rows = [row(f"head_{i:04d}/out", i % failing_every != 0) for i in range(n)]
    return result_of(rows, facts={f"fact_{i}": "v" * 50 for i in range(facts)})


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def test_a_report_within_budget_is_unchanged():
    result = _big()
    full = render_markdown(result, RUN, SHA)
    assert render_markdown(result, RUN, SHA, budget=_size(full)) == full


def test_runtime_facts_go_first():
    result = _big()
    full = render_markdown(result, RUN, SHA)

    short = render_markdown(result, RUN, SHA, budget=_size(full) - 10)

    assert _size(short) <= _size(full) - 10
    assert "<summary>Runtime</summary>" not in short and "<summary>Failures</summary>" in short
    assert short.count("| ❌\u00a0FAIL |") == 100 and short.count("| ✅\u00a0pass |") == 300
    assert short.rstrip().endswith(
        "> **Shortened** to fit GitHub's size limit: the runtime facts are left out. "
        f"The full report is in the [job summary]({RUN}) of the workflow run."
    )


def test_failure_details_go_next_from_the_last():
    result = _big()
    without_runtime = render_markdown(result, RUN, SHA, budget=_size(render_markdown(result, RUN, SHA)) - 10)
    budget = _size(without_runtime) - 2000

    short = render_markdown(result, RUN, SHA, budget=budget)

    assert _size(short) <= budget
    details = [line for line in short.splitlines() if line.startswith("- `head_")]
    assert 0 < len(details) < 100 and details[0].startswith("- `head_0000/out`")
    assert short.count("| ✅\u00a0pass |") == 300  # the table is still whole
    assert f"{len(details)} of 100 failure details are shown; the runtime facts are left out." in short


def test_table_rows_go_last_passing_before_failing_and_the_verdict_stays():
    result = _big()
    table_only = 4000

    short = render_markdown(result, RUN, SHA, budget=table_only)

    assert _size(short) <= table_only
    lines = short.splitlines()
    assert (
        lines[0] == "## ❌ Accuracy gate: m.onnx" and lines[2] == "**regressed**: 100 of 400 outputs out of tolerance"
    )
    rows = [line for line in lines if " | `head_" in line]
    assert rows and all(line.startswith("| ❌\u00a0FAIL |") for line in rows)  # every passing row went first
    assert rows == sorted(rows)  # the table keeps its order
    assert f"{len(rows)} of 400 table rows are shown ({100 - len(rows)} failing rows left out)" in short
    assert "the failure details are left out; the runtime facts are left out" in short

    roomier = render_markdown(result, RUN, SHA, budget=30000)
    kept = [line for line in roomier.splitlines() if " | `head_" in line]
    assert sum(line.startswith("| ❌\u00a0FAIL |") for line in kept) == 100 and len(kept) > 100


def test_a_huge_verdict_message_is_cut_but_its_label_stays():
    result = _big()
    result.message = "out of tolerance: " + ", ".join(f"'head_{i:04d}/out'" for i in range(5000))

    short = render_markdown(result, RUN, SHA, budget=2000)

    assert _size(short) <= 2000
    verdict = short.splitlines()[2]
    assert verdict.startswith("**regressed**: out of tolerance: 'head\\_0000/out'") and verdict.endswith("…")
    assert "the end of the verdict message" in short and "| `head_" not in short


@pytest.mark.parametrize("budget", [600, 900, 1500, 3000, 10_000, 25_000, 60_000])
def test_every_budget_is_kept_with_multibyte_text(budget):
    rows = [row(f"ü_{i}_é", i % 3 != 0) for i in range(500)]
    result = result_of(rows, facts={"name": "ß" * 100})

    short = render_markdown(result, RUN, SHA, budget=budget)

    assert _size(short) <= budget
    assert short.startswith("## ❌ Accuracy gate: m.onnx\n\n**regressed**: ")


def test_note_without_a_run_url_and_a_custom_place():
    result = _big()
    assert "The full report is in the job summary." in render_markdown(result, budget=3000)
    note = render_markdown(result, budget=3000, more_at="the JUnit report and the results file")
    assert note.rstrip().endswith("The full report is in the JUnit report and the results file.")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("plain words 1e-05", "plain words 1e-05"),
        (
            "a_b *c* `d` [e](f) <img> x|y ~z~ $m$ \\",
            "a\\_b \\*c\\* \\`d\\` \\[e\\](f) \\<img\\> x\\|y \\~z\\~ \\$m\\$ \\\\",
        ),
        ("&amp; &lt;", "&amp;amp; &amp;lt;"),
        ("ping @octocat and @everyone, mail a@b", "ping @\u2060octocat and @\u2060everyone, mail a@\u2060b"),
        ("see https://evil.example and www.evil.example", "see https:\u2060//evil.example and www\u2060.evil.example"),
        ("two\nlines\r\n\ttab", "two lines tab"),
        # shown escaped, not removed (issue 14): names differing only by them must render distinctly
        (
            "bidi \u202eevil\u202c zero\u200bwidth \x1b[31mred",
            "bidi \\\\u202eevil\\\\u202c zero\\\\u200bwidth \\\\x1b\\[31mred",
        ),
    ],
)
def test_md_text_defuses_markdown(text, expected):
    assert md_text(text) == expected


@pytest.mark.parametrize(
    "text, in_table, expected",
    [
        ("logits", False, "`logits`"),
        ("a`b", False, "``a`b``"),
        ("``x", False, "``` ``x ```"),
        ("a|b", True, "`a\\|b`"),
        ("a|b", False, "`a|b`"),
        ("line\nbreak", False, "`line\\nbreak`"),  # shown escaped (issue 14)
        ("", False, "(empty)"),
    ],
)
def test_md_code(text, in_table, expected):
    assert md_code(text, in_table) == expected


def test_link_targets_are_encoded():
    result = result_of([row("x", True)])
    text = render_markdown(result, "https://github.com/o/r/actions/runs/1) [x](javascript:alert(1)")
    assert "[workflow run](https://github.com/o/r/actions/runs/1%29%20%5Bx%5D%28javascript:alert%281%29)" in text


# --- the JSON results file ---------------------------------------------------------------------------


def _roundtrip(result: GateResult, tmp_path, **kwargs):
    path = write_report(result, tmp_path / "r" / "report.json", **kwargs)
    return read_untrusted_report(path), path


def test_results_file_round_trips_every_field(tmp_path):
    rows = [
        row("logits", False, mismatch_count=3, num_elements=10, zero_reference_count=1, dtypes=("float16", "float32")),
        row("avg", True, stat="mean", averaged=True, abs_value=math.nan, rel_value=math.inf, worst_index=None),
        OutputVerdict(
            ("onnxrt", "golden"), "missing", False, iterations=4, failed_iterations=4, error="shape (2,) vs (3,)"
        ),
    ]
    result = result_of(rows, facts={"onnxruntime": "1.20.1", "model_sha256": "ab" * 32})
    result.title = "Classifier"

    read, path = _roundtrip(result, tmp_path, commit=SHA, comment_key="wf/gate.toml")

    text = path.read_text(encoding="utf-8")
    assert text.count("\n") == 1 and text.endswith("\n")  # one line
    assert "NaN" in text and '"Infinity"' in text and json.loads(text)["rows"][1]["abs_value"] == "NaN"
    assert (read.commit, read.comment_key) == (SHA, "wf/gate.toml")
    got, want = read.result, result
    assert (got.model, got.status, got.message, got.iterations, got.title, got.facts) == (
        want.model,
        want.status,
        want.message,
        want.iterations,
        want.title,
        want.facts,
    )
    assert got.duration_s == 1.5
    for a, b in zip(got.rows, want.rows):
        for field in ("pair", "output", "passed", "stat", "atol", "rtol", "iterations", "failed_iterations"):
            assert getattr(a, field) == getattr(b, field), field
        assert a.message() == b.message()
    assert math.isnan(got.rows[1].abs_value) and got.rows[1].rel_value == math.inf


def test_document_fields():
    document = report_document(result_of([row("logits", False)]), SHA, "key")
    assert list(document) == [
        "schema",
        "version",
        "status",
        "passed",
        "regressed",
        "message",
        "model",
        "title",
        "iterations",
        "duration_s",
        "commit",
        "comment_key",
        "failed_outputs",
        "failed_total",
        "rows_total",
        "rows_truncated",
        "rows",
        "facts",
    ]
    assert (document["schema"], document["version"], document["passed"], document["regressed"]) == (
        SCHEMA,
        1,
        False,
        True,
    )
    assert document["failed_outputs"] == ["logits"] and (document["failed_total"], document["rows_total"]) == (1, 1)


def test_dumps_within_keeps_failed_rows_then_fewer():
    result = result_of([row(f"o{i:04d}", i % 5 != 0) for i in range(1000)])
    document = report_document(result)
    full = dumps(document)

    for limit in (len(full), len(full) // 3, 3000, 600):
        text = dumps_within(document, limit)
        parsed = json.loads(text)
        assert len(text.encode("utf-8")) <= limit and "\n" not in text
        assert (parsed["rows_total"], parsed["failed_total"]) == (1000, 200)
        if limit == len(full):
            assert parsed == document
        else:
            assert parsed["rows_truncated"] is True and all(not r["passed"] for r in parsed["rows"])
    assert len(json.loads(dumps_within(document, len(full) // 3))["rows"]) == 200
    assert json.loads(dumps_within(document, 600))["rows"] == []
    assert 0 < len(json.loads(dumps_within(document, 600))["failed_outputs"]) < 200


def test_digest_ignores_duration_commit_and_key_but_not_results():
    a = result_of([row("logits", True)])
    b = result_of([row("logits", True)])
    b.duration_s = 99.0
    c = result_of([row("logits", False)])
    assert results_digest(a) == results_digest(b) != results_digest(c)
    assert len(results_digest(a)) == 64


def _valid() -> dict:
    return report_document(result_of([row("logits", False)]), SHA, "key")


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda d: d.update(rows="x"), "'rows' must be a list"),
        (lambda d: d.update(model=["m"]), "'model' must be a string of at most 512 characters"),
        (lambda d: d.update(model="m" * 513), "'model' must be a string of at most 512"),
        (lambda d: d.update(iterations=True), "'iterations' must be a non-negative integer"),
        (lambda d: d.update(iterations=-1), "'iterations' must be a non-negative integer"),
        (lambda d: d.update(facts={"k": 1}), "'facts' must be an object of strings"),
        (lambda d: d.update(facts={f"k{i}": "v" for i in range(65)}), "'facts' must be an object of at most 64"),
        (lambda d: d["rows"][0].update(passed="yes"), "'rows[0].passed' must be true or false"),
        (lambda d: d["rows"][0].update(atol="1e-5"), "'rows[0].atol' must be a number"),
        (lambda d: d["rows"][0].update(pair=["a"]), "'rows[0].pair' must be two runner names"),
        (lambda d: d["rows"][0].update(worst_index=[-1]), "'rows[0].worst_index' must be a list"),
        (lambda d: d["rows"][0].update(worst_index=[0] * 33), "'rows[0].worst_index' must be a list"),
        (lambda d: d["rows"][0].update(stat="<script>"), "'rows[0].stat' must be a statistic's name"),
        (lambda d: d["rows"][0].update(dtypes=["float32", "a b"]), "'rows[0].dtypes' must be two dtype names"),
        (lambda d: d["rows"][0].update(output=None), "'rows[0].output' must be a string"),
        (lambda d: d["rows"].__setitem__(0, []), "'rows[0]' must be an object"),
    ],
)
def test_untrusted_reader_names_the_bad_field(tmp_path, change, expected):
    document = _valid()
    change(document)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(document), encoding="utf-8")

    with pytest.raises(GateError) as info:
        read_untrusted_report(path)

    assert str(info.value).startswith(f"{path}: {expected}")


def test_untrusted_reader_caps_rows_and_bytes(tmp_path, monkeypatch):
    monkeypatch.setattr(json_report, "MAX_ROWS", 3)
    document = report_document(result_of([row(f"o{i}", True) for i in range(4)]))
    path = tmp_path / "report.json"
    path.write_text(dumps(document), encoding="utf-8")
    with pytest.raises(GateError, match="'rows' must be a list of at most 3 rows"):
        read_untrusted_report(path)
    with pytest.raises(GateError, match="larger than 100 bytes"):
        read_untrusted_report(path, max_bytes=100)


def test_untrusted_reader_ignores_unknown_keys_and_a_malformed_commit(tmp_path):
    document = _valid()
    document["future_field"] = {"anything": [1, 2]}
    document["commit"] = "not-a-sha"
    document["rows"][0]["future"] = True
    path = tmp_path / "report.json"
    path.write_text(json.dumps(document), encoding="utf-8")

    read = read_untrusted_report(path)

    assert read.commit is None and read.result.rows[0].output == "logits"


def test_untrusted_reader_survives_deep_nesting(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(GateError, match="not valid UTF-8 JSON|'schema' must be"):
        read_untrusted_report(path)
