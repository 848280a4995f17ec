"""Failures that bench/fuzz_readers.py found (issue 14's 30-minute fuzz run), each a test that failed
before its fix."""

from __future__ import annotations

import json

import pytest

from gate.baseline import load_baseline
from gate.config import load_config
from gate.errors import GateError
from gate.job import check
from gate.results_file import write_report
from gate.shards import parse_shard

from conftest import EXAMPLE


def test_a_shard_scope_with_a_line_break_in_a_baseline_is_one_line(tmp_path):
    # fuzz_readers seed 14, reader results_file_baseline: a byte inserted into the results file's
    # "scope" made the baseline's error two lines (the scope is the file's text, untrusted)
    config = load_config(EXAMPLE / "gate.toml", {"root": str(EXAMPLE)})
    path = write_report(check(config, parse_shard("1/2"), partial=True), tmp_path / "results.json")
    document = json.loads(path.read_text("utf-8"))
    assert document["scope"] == "shard 1/2: 4 of 8 iterations"
    document["scope"] = "shard 1/2: 4 of 8 iterati\ns"
    path.write_text(json.dumps(document), "utf-8")
    with pytest.raises(GateError) as raised:
        load_baseline([path])
    assert "\n" not in str(raised.value)
    assert "covers only 'shard 1/2: 4 of 8 iterati\\ns'" in str(raised.value)
