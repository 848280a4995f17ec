"""``mode: comment`` with several results files of one comment key (issue 14): one comment per key,
showing the worst of them, and step outputs that say the same."""

from __future__ import annotations

import json
import shutil

import test_action
from test_action import FORK, HEAD_SHA, PR_NUMBER, REPO, companion_env, perturb_golden

from gate.github.comments import marker
from gate.report.per_key import worst_per_key
from gate.results import GateResult

workspace = test_action.workspace  # fixtures: a workspace with the example, the action run in-process
sleeps = test_action.sleeps


def test_two_results_files_of_one_key_post_one_comment_with_the_worst_verdict(workspace, fake, tmp_path):
    """Shard 1 regressed, shard 2 passed, one comment key: on main the second file's comment
    overwrote the first's, so the comment said passed while the step output said regressed."""
    fake.add_pull(PR_NUMBER, HEAD_SHA, branch="feature", head_repo=FORK, repo=REPO)
    perturb_golden(workspace.root)
    workspace.run(INPUT_COMMENT_MODE="off", INPUT_COMMENT_KEY="ppocr", INPUT_REPORT_PATH="leg-1.json")
    workspace.run(INPUT_COMMENT_MODE="off", INPUT_COMMENT_KEY="ppocr", INPUT_REPORT_PATH="leg-2.json")
    regressed, passed = (json.loads((workspace.root / f"leg-{i}.json").read_text()) for i in (1, 2))
    assert regressed["status"] == passed["status"] == "regressed"
    passed["status"], passed["message"] = "passed", "1 of 1 outputs within tolerance"  # as a passing shard writes it
    passed["rows"][0]["passed"] = True
    for i, document in ((1, regressed), (2, passed)):
        folder = workspace.root / "artifacts" / f"accuracy-gate-{i}"
        folder.mkdir(parents=True)
        (folder / "r.json").write_text(json.dumps(document))

    run = workspace.run(**companion_env(workspace, tmp_path, report_path="artifacts"))

    assert run.code == 0, run.stdout
    [comment] = fake.on_pr(PR_NUMBER)
    body = comment["body"]
    assert body.splitlines()[0] == marker("ppocr")
    assert "**regressed**" in body and "**passed**" not in body
    assert "the worst of 2 results files for this comment key: 1 regressed, 1 passed" in body
    assert len(fake.calls_to("POST")) == 1 and fake.calls_to("PATCH") == []  # not posted, then overwritten
    assert (run.outputs["passed"], run.outputs["regressed"]) == ("false", "true")
    shutil.rmtree(workspace.root / "artifacts")


def _result(status: str, message: str = "m") -> GateResult:
    return GateResult(model="m", status=status, message=message)


def test_worst_per_key_keeps_one_result_per_key_in_first_seen_order():
    keyed = [
        ("a", _result("passed", "a1")),
        ("b", _result("error", "b1")),
        ("a", _result("regressed", "a2")),
        ("b", _result("passed", "b2")),
        ("a", _result("error", "a3")),
        ("c", _result("passed", "c1")),
    ]
    chosen = worst_per_key(keyed)
    assert [key for key, _ in chosen] == ["a", "b", "c"]
    assert [r.status for _, r in chosen] == ["regressed", "error", "passed"]
    assert (
        chosen[0][1].message == "a2 (the worst of 3 results files for this comment key: 1 regressed, 1 error, 1 passed)"
    )
    assert chosen[1][1].message == "b1 (the worst of 2 results files for this comment key: 1 error, 1 passed)"
    assert chosen[2][1].message == "c1"
    assert keyed[2][1].message == "a2"  # the inputs are not changed
