"""``-q`` / ``--quiet`` does one thing: it leaves out the per-output details below the table (printed
on failure and with -v); the header, the table, the verdict and the report paths are printed as
without it. The README says it once, in those words, where it describes -q (it said "the table and
the verdict only" in one place and "the table, one line per output, and the verdict" in another)."""

from __future__ import annotations

import re

from test_exact_details import int_gate

from conftest import ROOT, run_cli


def test_quiet_leaves_out_only_the_details(tmp_path):
    config = int_gate(tmp_path)
    loud, quiet = run_cli("check", config), run_cli("check", config, "-q")
    assert loud.returncode == quiet.returncode == 1
    blocks = loud.stdout.split("\n\n")
    details = [block for block in blocks if block.startswith("y (onnxrt vs golden): FAILED")]
    assert len(details) == 1 and "differing elements" in details[0]
    assert quiet.stdout == "\n\n".join(block for block in blocks if block not in details)


def test_the_readme_describes_quiet_one_way():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    mentions = [line for line in readme.splitlines() if re.search(r"`-q`", line)]
    assert len(mentions) == 2, mentions
    assert all("details" in line for line in mentions), mentions
    assert not any(re.search(r"the table and the verdict only|one line per output", line) for line in mentions)
