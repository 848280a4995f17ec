"""A symbolic link at a report path is replaced by the report, never written through (a second
attacker's finding): before, the run refused the path (exit 2) and left the link, so an earlier
run's passing JUnit, Markdown, results or partial file stayed readable at this run's report paths,
and ``merge`` of such links passed from the stale partial files."""

from __future__ import annotations

import json
import os

from conftest import perturb_golden, run_cli


def _earlier_passing_run(example):
    out = example / "out"
    flags = ["--junit", out / "real.xml", "--markdown", out / "real.md", "--report", out / "real.json"]
    proc = run_cli("check", example / "gate.toml", *flags, cwd=example)
    assert proc.returncode == 0, proc.stderr
    for name, target in (("j.xml", "real.xml"), ("m.md", "real.md"), ("r.json", "real.json")):
        os.symlink(f"out/{target}", example / name)
    return out


def test_links_at_the_report_paths_are_replaced_by_this_runs_reports(example):
    out = _earlier_passing_run(example)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    perturb_golden(example / "data" / "test_data_set_0" / "output_0.pb", (0, 0), 0.5)
    proc = run_cli("check", example / "gate.toml", "--junit", "j.xml", "--markdown", "m.md", "--report", "r.json",
                   cwd=example)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for name in ("j.xml", "m.md", "r.json"):
        assert not (example / name).is_symlink(), name
    assert 'failures="1"' in (example / "j.xml").read_text()
    assert json.loads((example / "r.json").read_text())["passed"] is False
    assert "regressed" in (example / "m.md").read_text().lower() or "fail" in (example / "m.md").read_text().lower()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing written where the links led


def test_merge_of_linked_stale_partial_files_cannot_pass(example):
    for k in (1, 2):
        proc = run_cli("check", example / "gate.toml", "--shard", f"{k}/2", "--write-partial", f"old{k}.json",
                       cwd=example)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        os.symlink(f"old{k}.json", example / f"p{k}.json")
    perturb_golden(example / "data" / "test_data_set_0" / "output_0.pb", (0, 0), 0.5)
    codes = [
        run_cli("check", example / "gate.toml", "--shard", f"{k}/2", "--write-partial", f"p{k}.json",
                cwd=example).returncode  # fmt: skip
        for k in (1, 2)
    ]
    assert codes == [0, 0]  # a shard's verdict comes from merge
    assert not (example / "p1.json").is_symlink() and not (example / "p2.json").is_symlink()
    merged = run_cli("merge", example / "p1.json", example / "p2.json", "--junit", example / "mj.xml", cwd=example)
    assert merged.returncode == 1, merged.stdout + merged.stderr
