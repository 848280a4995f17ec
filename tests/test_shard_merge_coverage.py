"""merge checks that each shard covers exactly its iterations of the golden set (issue 14): a partial
file from which an iteration was removed by hand never merges to a pass over fewer iterations."""

from __future__ import annotations

import json

import pytest
import test_shard_merge
from test_shard_merge import config_of, merge_error

from gate.compared_run import result_of
from gate.errors import GateError
from gate.job import check
from gate.merge import merge_files
from gate.partial_file import write_partial
from gate.shards import Shard

gate_dir = test_shard_merge.gate_dir  # the module-scoped fixture: a real model and 10 noisy iterations


def drop_iteration(path, index: int) -> None:
    """Removes golden-set iteration ``index`` from a partial file, as a hand edit would: from the
    iteration list, the per-output columns and ``where``."""
    data = json.loads(path.read_text())
    its = data["iterations"]
    j = its["index"].index(index)
    for key in ("index", "golden_sha256"):
        del its[key][j]
    for pair in data["pairs"]:
        for output in pair["outputs"]:
            if index not in output["index"]:
                continue
            k = output["index"].index(index)
            n = len(output["index"])
            for key, column in output.items():
                if isinstance(column, list) and len(column) == n and key != "thresholds":
                    del column[k]
    data["where"].pop(str(index), None)
    path.write_text(json.dumps(data))


def test_a_partial_missing_its_failing_iteration_does_not_merge(gate_dir, tmp_path, capsys):
    # A tolerance between the two noisiest iterations: exactly one iteration fails.
    probe = check(config_of(gate_dir, ["--check-error-stat", "max", "--atol", "1", "--rtol", "0"]))
    worst_per_iteration = {}
    for iterations in probe.run.accuracy.values():
        for index, outputs in zip(probe.run.indices, iterations):
            worst = max(result.max_absdiff for result in outputs.values())
            worst_per_iteration[index] = max(worst, worst_per_iteration.get(index, 0.0))
    ranked = sorted(worst_per_iteration, key=worst_per_iteration.get)
    worst = ranked[-1]
    atol = (worst_per_iteration[ranked[-1]] + worst_per_iteration[ranked[-2]]) / 2
    cfg = config_of(gate_dir, ["--check-error-stat", "max", "--atol", repr(atol), "--rtol", "0"])
    results = [check(cfg, Shard(i, 2), partial=True) for i in (1, 2)]
    paths = [write_partial(r.run, tmp_path / f"{i}.json") for i, r in enumerate(results, 1)]
    merged = result_of(merge_files(paths))
    assert merged.status == "regressed"
    assert {row.worst_iteration for row in merged.rows if not row.passed} == {worst}
    shard = worst % 2  # its shard's position in paths
    drop_iteration(paths[shard], worst)
    # On main: "passed" over the 9 iterations left of 10.
    with pytest.raises(GateError, match=rf"shard {shard + 1}/2 lacks 1 of its 5 iterations .*iteration {worst}\)"):
        merge_files(paths)
    err = merge_error(capsys, *paths)
    assert f"lacks 1 of its 5 iterations of the golden set of 10 (first: iteration {worst})" in err


def test_a_shard_holding_no_iteration_at_all_does_not_merge(gate_dir, tmp_path):
    results = [check(config_of(gate_dir, []), Shard(i, 2), partial=True) for i in (1, 2)]
    paths = [write_partial(r.run, tmp_path / f"{i}.json") for i, r in enumerate(results, 1)]
    for index in range(1, 10, 2):
        drop_iteration(paths[1], index)
    with pytest.raises(GateError, match=r"shard 2/2 lacks 5 of its 5 iterations"):
        merge_files(paths)


def _failing_shards(gate_dir, tmp_path):
    """Two shards' partial files under a max check whose tolerance one iteration exceeds; returns the
    paths and that iteration."""
    probe = check(config_of(gate_dir, ["--check-error-stat", "max", "--atol", "1", "--rtol", "0"]))
    worst = {}
    for iterations in probe.run.accuracy.values():
        for index, outputs in zip(probe.run.indices, iterations):
            worst[index] = max([result.max_absdiff for result in outputs.values()] + [worst.get(index, 0.0)])
    ranked = sorted(worst, key=worst.get)
    atol = (worst[ranked[-1]] + worst[ranked[-2]]) / 2
    cfg = config_of(gate_dir, ["--check-error-stat", "max", "--atol", repr(atol), "--rtol", "0"])
    results = [check(cfg, Shard(i, 2), partial=True) for i in (1, 2)]
    return [write_partial(r.run, tmp_path / f"{i}.json") for i, r in enumerate(results, 1)], ranked[-1]


def test_a_partial_whose_verdict_contradicts_its_numbers_does_not_merge(gate_dir, tmp_path, capsys):
    # Failed before: the failing iteration's "passed" set to true by hand merged to a pass (exit 0).
    paths, worst = _failing_shards(gate_dir, tmp_path)
    path = paths[worst % 2]
    data = json.loads(path.read_text())
    for output in data["pairs"][0]["outputs"]:
        output["passed"] = [True] * len(output["passed"])
    path.write_text(json.dumps(data))
    err = merge_error(capsys, *paths)
    assert f"[{worst}].passed' must be False, as its statistics give it (the file was edited)" in err


def test_a_partial_whose_outputs_were_emptied_does_not_merge(gate_dir, tmp_path, capsys):
    # Failed before: the failing shard's outputs list emptied by hand merged to a pass over all iterations.
    paths, worst = _failing_shards(gate_dir, tmp_path)
    path = paths[worst % 2]
    data = json.loads(path.read_text())
    data["pairs"][0]["outputs"] = []
    path.write_text(json.dumps(data))
    err = merge_error(capsys, *paths)
    assert "'pairs[0].outputs' must be the outputs compared in iteration" in err
