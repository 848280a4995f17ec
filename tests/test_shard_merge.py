"""Sharding a golden set and merging the partial result files: a real model (``make_small_model``,
two outputs) run by ONNX Runtime over 10 stored inputs whose golden outputs carry noise of growing
size, so every statistic differs between iterations and some iterations fail. The same data is
checked unsharded and as shards 1/3, 2/3, 3/3 merged, through the CLI and the action, and every
verdict and number must be equal (``==``), with ``check_average`` on and off."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from junitparser import JUnitXml
from onnx import numpy_helper

from gate import cli
from gate.comparator.compare import METRIC_FIELDS
from gate.compared_run import result_of
from gate.config import load_config
from gate.data import write_iteration
from gate.data.storage import read_tensor_proto
from gate.errors import GateError
from gate.job import check, record
from gate.merge import merge_files
from gate.partial_file import SCHEMA, read_partial, write_partial
from gate.shards import Shard, parse_shard

from conftest import make_small_model, scratch_cwd, write_gate_toml
from fake_github import parse_github_output

ROOT = Path(__file__).resolve().parents[1]
ITERATIONS = 10
CONFIGS = {
    # per iteration (check_average off): elemwise fails some iterations of y
    "elemwise": ["--atol", "2e-3", "--rtol", "2e-3"],
    "median-quantile": ["--check-error-stat", "median", "s:quantile", "--atol", "5e-3", "--rtol", "0"],
    # check_average on: the average over all iterations of each per-iteration statistic
    "average-max-mean": ["--check-average", "--check-error-stat", "max", "y:mean", "--atol", "4e-3", "--rtol", "0"],
    "average-median-quantile": ["--check-average", "--check-error-stat", "median", "s:quantile"],
}


def perturb(path: Path, scale: float, rng) -> None:
    """Adds noise of standard deviation ``scale`` to a stored golden tensor (same dtype and name)."""
    name, array = read_tensor_proto(path)
    noisy = (array + rng.normal(0.0, scale, array.shape)).astype(array.dtype)
    path.write_bytes(numpy_helper.from_array(noisy, name).SerializeToString())


def make_gate(folder: Path, iterations: int = ITERATIONS) -> Path:
    """A gate folder: model.onnx (x[2,16] -> y[2,16], s[2]), ``iterations`` stored inputs and golden
    outputs recorded by ONNX Runtime, then made noisy (iteration k: noise ~ 1e-3 * (k + 1))."""
    folder.mkdir(parents=True, exist_ok=True)
    make_small_model(folder / "model.onnx", size=16)
    rng = np.random.default_rng(7)
    for k in range(iterations):
        write_iteration(folder / "data", "onnx-zoo", "input", k, {"x": rng.standard_normal((2, 16)).astype(np.float32)})
    config = write_gate_toml(folder, 'model = "model.onnx"\ninputs = "data"\ngolden = "data"\n')
    record(load_config(config))
    for k in range(iterations):
        perturb(folder / "data" / f"test_data_set_{k}" / "output_0.pb", 1e-3 * (k + 1), rng)
        perturb(folder / "data" / f"test_data_set_{k}" / "output_1.pb", 2e-3 * (k + 1), rng)
    return config


@pytest.fixture(scope="module")
def gate_dir(tmp_path_factory) -> Path:
    return make_gate(tmp_path_factory.mktemp("sharded") / "gate").parent


@pytest.fixture
def gate_copy(gate_dir, tmp_path) -> Path:
    dest = tmp_path / "gate"
    shutil.copytree(gate_dir, dest)
    return dest


def run_cli(capsys, *args) -> tuple[int, str, str]:
    """``accuracy-gate ARGS`` in-process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    with scratch_cwd():  # the default JUnit path is the working directory's, never the repository's
        code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def junit_cases(path: Path) -> list:
    """``(testcase name, [(result type, message)])`` of every testcase of a JUnit file."""
    return [
        (case.name, [(type(r).__name__, r.message) for r in case.result])
        for suite in JUnitXml.fromfile(str(path))
        for case in suite
    ]


def config_of(folder: Path, flags: list[str]):
    args = cli.build_parser().parse_args(["check", str(folder / "gate.toml"), *flags])
    return load_config(args.config, cli.overrides_from_args(args))


def assert_same_comparisons(full, merged) -> None:
    """Every per-iteration result of every pair and output has equal fields, in the same order."""
    assert list(full) == list(merged)
    assert full.aggregation == merged.aggregation
    for pair in full:
        assert len(full[pair]) == len(merged[pair])
        for a_it, b_it in zip(full[pair], merged[pair]):
            assert list(a_it) == list(b_it)
            for name in a_it:
                a, b = a_it[name], b_it[name]
                for field in (*METRIC_FIELDS, "passed", "error", "num_elements", "zero_reference_count"):
                    assert getattr(a, field) == getattr(b, field), (pair, name, field)
                for field in ("mismatch_count", "worst_index", "dtypes", "shapes", "output0_name", "output1_name"):
                    assert getattr(a, field) == getattr(b, field), (pair, name, field)
                assert a.thresholds == b.thresholds and bool(a) == bool(b)
        if full.aggregation == "average":
            averaged_full, averaged_merged = full.average_results(pair), merged.average_results(pair)
            assert list(averaged_full) == list(averaged_merged)
            for name, a in averaged_full.items():
                b = averaged_merged[name]
                for field in (*METRIC_FIELDS, "num_elements", "zero_reference_count"):
                    assert getattr(a, field) == getattr(b, field), (pair, name, field)
                assert bool(a) == bool(b)


# --- shards ----------------------------------------------------------------------------------------


def test_shards_split_by_index_and_stay_put_when_the_set_grows():
    shards = [Shard(i, 3) for i in (1, 2, 3)]
    assert [list(s.indices(10)) for s in shards] == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    for total in range(3, 40):  # growing at the end only adds iterations; none moves
        for shard in shards:
            assert list(shard.indices(total + 1))[: len(shard.indices(total))] == list(shard.indices(total))
    assert sorted(i for s in shards for i in s.indices(10)) == list(range(10))
    assert parse_shard(" 2/3 ") == Shard(2, 3) and str(Shard(2, 3)) == "2/3"


@pytest.mark.parametrize("spec", ["0/3", "4/3", "3", "a/b", "1/0", "-1/3", "1/3/3", ""])
def test_a_shard_spec_out_of_range_is_one_line_exit_2(gate_dir, capsys, spec):
    with pytest.raises(GateError):
        parse_shard(spec)
    code, _, err = run_cli(capsys, "check", gate_dir / "gate.toml", f"--shard={spec}")
    assert code == 2 and err.count("\n") == 1 and "--shard" in err and "Traceback" not in err


def test_shard_spec_messages_say_what_is_wrong():
    with pytest.raises(GateError, match=r"^--shard 1/0: the number of shards n must be at least 1 \(shard i of n\)\.$"):
        parse_shard("1/0")
    with pytest.raises(GateError, match=r"^--shard 4/3: the shard must be 1 to 3 of 3\.$"):
        parse_shard("4/3")


def test_more_shards_than_iterations_is_one_line_exit_2(gate_dir, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default partial result file is claimed (not passed) in the working directory
    code, _, err = run_cli(capsys, "check", gate_dir / "gate.toml", "--shard", "1/11")
    assert code == 2 and err.count("\n") == 1
    assert "shard 1/11 splits 10 iterations into 11 shards; use at most 10 shards" in err
    assert json.loads((tmp_path / "accuracy-gate-partial-1-of-11.json").read_text())["status"] == "running"


# --- the must-show: unsharded == 1/3 + 2/3 + 3/3 merged ---------------------------------------------


@pytest.mark.parametrize("name", list(CONFIGS))
def test_merged_shards_equal_the_unsharded_run(gate_dir, tmp_path, capsys, name):
    flags = CONFIGS[name]
    config = gate_dir / "gate.toml"
    out = tmp_path / "out"
    code_full, text_full, _ = run_cli(
        capsys, "check", config, *flags, "--junit", out / "full.xml", "--report", out / "full.json",
        "--markdown", out / "full.md", "--write-partial", out / "full.partial.json", "--root", tmp_path.parent,
    )  # fmt: skip
    partials = []
    for i in (1, 2, 3):
        partial = out / "legs" / f"shard-{i}.json"
        code, text, _ = run_cli(capsys, "check", config, *flags, "--shard", f"{i}/3", "--write-partial", partial,
                                "--junit", out / f"shard-{i}.xml", "--root", tmp_path.parent)  # fmt: skip
        assert code == 0, text  # a leg reports its part; merge gives the verdict
        assert f"shard {i}/3: " in text and "the verdict over all iterations comes from 'accuracy-gate merge'" in text
        partials.append(partial)
    code_merged, text_merged, _ = run_cli(
        capsys, "merge", *reversed(partials), "--junit", out / "merged.xml", "--report", out / "merged.json",
        "--markdown", out / "merged.md", "--write-partial", out / "merged.partial.json", "--root", tmp_path,
    )  # fmt: skip

    assert code_merged == code_full
    if name == "elemwise":
        assert code_full == 1
    # The results files: every row and every number, as JSON (floats by repr: exact).
    full, merged = json.loads((out / "full.json").read_text()), json.loads((out / "merged.json").read_text())
    assert merged.pop("scope") == "merged from 3 shards" and "scope" not in full
    for doc in (full, merged):
        doc.pop("duration_s")
    assert merged == full

    # The text table and the JUnit file say the same.
    def table(text):
        # The error statistics and histogram of a failed output (gate.report.details) come from the arrays
        # of its worst iteration, which partial files do not keep: the merge prints the rest.
        text = text.partition("accuracy-gate: ")[2].partition("JUnit:")[0]
        stats = ("    abs error", "    rel error", "      [")
        return "\n".join(line for line in text.splitlines() if not line.startswith(stats))

    assert table(text_merged).replace("\nmerged from 3 shards", "") == table(text_full)
    assert junit_cases(out / "merged.xml") == junit_cases(out / "full.xml")
    full_md = (out / "full.md").read_text()
    merged_md = (out / "merged.md").read_text()
    assert " · merged from 3 shards" in merged_md.split("\n")[4]  # the line under the verdict
    assert merged_md.replace(" · merged from 3 shards", "", 1) == full_md
    # The merged partial is the unsharded one: same comparisons, same golden contents.
    full_partial = json.loads((out / "full.partial.json").read_text())
    merged_partial = json.loads((out / "merged.partial.json").read_text())
    for document in (full_partial, merged_partial):  # comparison times differ from run to run
        for pair in document["pairs"]:
            for output in pair["outputs"]:
                times = output.pop("time_s")
                assert len(times) == len(output["index"]) and all(t >= 0 for t in times)
    for key in ("shard", "config", "golden", "iterations", "aggregation", "pairs", "stopped", "model"):
        assert merged_partial[key] == full_partial[key], key
    assert full_partial["golden"]["content_sha256"] is not None

    # In process: the rows (every field), the per-iteration values and every comparator result.
    unsharded = check(config_of(gate_dir, flags))
    rebuilt = result_of(merge_files(partials))
    assert rebuilt.rows == unsharded.rows
    assert [r.values for r in rebuilt.rows] == [r.values for r in unsharded.rows]
    assert (rebuilt.status, rebuilt.message, rebuilt.iterations) == (unsharded.status, unsharded.message, 10)
    assert_same_comparisons(unsharded.run.accuracy, rebuilt.run.accuracy)


def test_the_merge_verdict_is_a_failure_that_some_shards_do_not_see(gate_dir, tmp_path, capsys):
    """Elemwise fails only the noisiest iterations: the shard without them passes on its own, and
    the merge still fails, naming the worst iteration by its index in the whole golden set."""
    flags = CONFIGS["elemwise"]
    results = [check(config_of(gate_dir, flags), Shard(i, 3), partial=True) for i in (1, 2, 3)]
    paths = [write_partial(r.run, tmp_path / f"{i}.json") for i, r in enumerate(results, 1)]
    merged = result_of(merge_files(paths))
    unsharded = check(config_of(gate_dir, flags))
    assert merged.status == unsharded.status == "regressed"
    [y] = [row for row in merged.rows if row.output == "y"]
    assert y.worst_iteration == next(r for r in unsharded.rows if r.output == "y").worst_iteration
    shard_of_worst = y.worst_iteration % 3
    assert results[shard_of_worst].rows[0].worst_iteration == y.worst_iteration  # reported globally by the leg too
    assert y.failed_iterations == sum(r.rows[0].failed_iterations for r in results)


def test_a_folder_of_partials_merges_like_the_files(gate_dir, tmp_path, capsys):
    folder = tmp_path / "download" / "nested"
    for i in (1, 2):
        result = check(config_of(gate_dir, []), Shard(i, 2), partial=True)
        write_partial(result.run, folder / f"accuracy-gate-partial-{i}" / "p.json")
    code, out, _ = run_cli(capsys, "merge", tmp_path / "download", "--junit", tmp_path / "j.xml", "--root", tmp_path)
    assert code == 1 and "merged from 2 shards" in out


# --- merge errors: one line, exit 2, naming the file and the shard ------------------------------


@pytest.fixture
def shard_files(gate_dir, tmp_path) -> list[Path]:
    cfg = config_of(gate_dir, CONFIGS["average-max-mean"])
    return [write_partial(check(cfg, Shard(i, 3), partial=True).run, tmp_path / f"shard-{i}.json") for i in (1, 2, 3)]


def merge_error(capsys, *paths) -> str:
    folder = Path(paths[0]).parent
    code, out, err = run_cli(capsys, "merge", *paths, "--junit", folder / "merge-junit.xml", "--root", folder)
    assert code == 2, out + err
    assert err.count("\n") == 1 and err.startswith("accuracy-gate: error: ") and "Traceback" not in err
    return err


def test_merge_error_missing_shard(shard_files, capsys):
    err = merge_error(capsys, shard_files[0], shard_files[2])
    assert "missing shard 2/3: got 2 of 3 partial result files (1/3, 3/3)" in err
    err = merge_error(capsys, shard_files[1])
    assert "missing shards 1/3, 3/3" in err


def test_merge_error_duplicated_shard(shard_files, tmp_path, capsys):
    copy = tmp_path / "again" / "shard-2.json"
    copy.parent.mkdir()
    shutil.copy(shard_files[1], copy)
    err = merge_error(capsys, *shard_files, copy)
    assert f"{copy}: shard 2/3 is given twice (also {shard_files[1]})" in err


def test_merge_error_foreign_shard_of_another_config(shard_files, gate_dir, tmp_path, capsys):
    other = config_of(gate_dir, [*CONFIGS["average-max-mean"][:-2], "--rtol", "1e-3"])
    foreign = write_partial(check(other, Shard(2, 3), partial=True).run, tmp_path / "foreign.json")
    err = merge_error(capsys, shard_files[0], foreign, shard_files[2])
    assert f"{foreign}: shard 2/3 was made with another configuration than shard 1/3 ({shard_files[0]})" in err
    assert "rtol 0.001 vs 0.0" in err


def test_merge_error_foreign_shard_of_another_golden_set(shard_files, gate_copy, tmp_path, capsys):
    # The same config on a golden set that grew by one iteration.
    rng = np.random.default_rng(3)
    write_iteration(
        gate_copy / "data", "onnx-zoo", "input", ITERATIONS, {"x": rng.standard_normal((2, 16)).astype(np.float32)}
    )
    folder = gate_copy / "data" / f"test_data_set_{ITERATIONS}"
    for position in (0, 1):
        shutil.copy(gate_copy / "data" / "test_data_set_0" / f"output_{position}.pb", folder / f"output_{position}.pb")
    cfg = config_of(gate_copy, CONFIGS["average-max-mean"])
    foreign = write_partial(check(cfg, Shard(3, 3), partial=True).run, tmp_path / "grown.json")
    err = merge_error(capsys, shard_files[0], shard_files[1], foreign)
    assert f"{foreign}: shard 3/3 was made on another golden set than shard 1/3" in err and "11 iterations vs 10" in err


def test_merge_error_foreign_shard_of_another_split_or_commit(shard_files, gate_dir, tmp_path, capsys, monkeypatch):
    cfg = config_of(gate_dir, CONFIGS["average-max-mean"])
    split = write_partial(check(cfg, Shard(2, 4), partial=True).run, tmp_path / "of-four.json")
    assert "is from a split into 4 shards" in merge_error(capsys, shard_files[0], split)
    monkeypatch.setenv("GITHUB_SHA", "a" * 40)
    other_commit = write_partial(check(cfg, Shard(3, 3), partial=True).run, tmp_path / "other-commit.json")
    monkeypatch.setenv("GITHUB_SHA", "b" * 40)
    for path in shard_files[:2]:
        doc = json.loads(path.read_text())
        doc["commit"] = "b" * 40
        path.write_text(json.dumps(doc))
    err = merge_error(capsys, *shard_files[:2], other_commit)
    assert "shard 3/3 was made from commit aaaaaaaaaaaa, shard 1/3" in err


def test_merge_error_corrupt_or_unknown_files(shard_files, tmp_path, capsys):
    truncated = tmp_path / "truncated.json"
    truncated.write_text(shard_files[1].read_text()[:200])
    assert f"{truncated}: the partial result file is not valid JSON (line 1, column" in merge_error(
        capsys, shard_files[0], truncated, shard_files[2]
    )
    future = tmp_path / "future.json"
    future.write_text(json.dumps({**json.loads(shard_files[1].read_text()), "version": 2}))
    err = merge_error(capsys, shard_files[0], future, shard_files[2])
    assert f"{future}: partial result file version '2' is not supported; this accuracy-gate reads version 1." in err
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "accuracy-gate-report", "version": 1}))
    assert "not a partial result file" in merge_error(capsys, report)
    broken = tmp_path / "broken.json"
    doc = json.loads(shard_files[1].read_text())
    doc["pairs"][0]["outputs"][0]["max_absdiff"] = doc["pairs"][0]["outputs"][0]["max_absdiff"][:-1]
    broken.write_text(json.dumps(doc))
    assert "max_absdiff' must be a list of 3 entries" in merge_error(capsys, broken)
    assert "no such partial result file or folder" in merge_error(capsys, tmp_path / "nowhere.json")


def test_partial_file_round_trips_every_float_and_non_finite_values(shard_files, tmp_path):
    doc = json.loads(shard_files[0].read_text())
    assert (doc["schema"], doc["version"], doc["shard"]) == (SCHEMA, 1, {"index": 1, "count": 3})
    assert doc["iterations"]["index"] == [0, 3, 6, 9] and len(doc["iterations"]["golden_sha256"]) == 4
    column = doc["pairs"][0]["outputs"][0]
    column["max_absdiff"][:3] = ["NaN", "Infinity", "-Infinity"]
    column["mean_absdiff"][0] = 0.1 + 0.2  # 0.30000000000000004
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc, allow_nan=False))
    run = read_partial(path)
    values = [it["y"].max_absdiff for it in run.accuracy[("onnxrt", "golden")]]
    assert np.isnan(values[0]) and values[1:3] == [np.inf, -np.inf]
    assert run.accuracy[("onnxrt", "golden")][0]["y"].mean_absdiff == 0.30000000000000004
    again = write_partial(run, tmp_path / "again.json")
    text = again.read_text()
    assert "NaN" in text and "Infinity" in text and json.loads(text, parse_constant=lambda c: 1 / 0)


def test_a_shard_that_stopped_part_way_makes_the_merge_an_error(gate_copy, tmp_path, capsys):
    (gate_copy / "data" / "test_data_set_4" / "output_1.pb").write_bytes(b"\x08garbage")  # shard 2/3's 2nd
    config = gate_copy / "gate.toml"
    paths = []
    for i in (1, 2, 3):
        paths.append(tmp_path / f"{i}.json")
        code, _, err = run_cli(
            capsys, "check", config, "--shard", f"{i}/3", "--write-partial", paths[-1], "--root", tmp_path
        )
        assert code == (2 if i == 2 else 0), err
    assert json.loads(paths[1].read_text())["stopped"]["iteration"] == 4
    code, out, err = run_cli(capsys, "merge", *paths, "--junit", tmp_path / "j.xml", "--root", tmp_path)
    assert code == 2 and "stopped after 1 of 3 iterations of shard 2/3: " in err
    assert "test_data_set_4" in err and err.count("\n") == 1
    assert "8 iterations" in out  # compared before it stopped (not 4 nor 7) is kept and reported


# --- the action: a 3-leg matrix and a merge job -------------------------------------------------


def action_env(workspace: Path, step: str, **inputs) -> dict:
    """What the runner gives a Docker action step: every declared input (default or empty)."""
    spec = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))["inputs"]
    env = {
        f"INPUT_{n.upper()}": "" if "${{" in str(s.get("default", "")) else str(s.get("default", ""))
        for n, s in spec.items()
    }
    env.update({f"INPUT_{k.upper()}": str(v) for k, v in inputs.items()})
    for name in ("output", "summary"):
        (workspace / f".{step}-{name}").touch()
    env.update(
        GITHUB_WORKSPACE=str(workspace),
        GITHUB_OUTPUT=str(workspace / f".{step}-output"),
        GITHUB_STEP_SUMMARY=str(workspace / f".{step}-summary"),
        GITHUB_ACTIONS="true",
        INPUT_COMMENT_MODE="off",
    )
    return env


def test_action_matrix_legs_and_merge_job_report_the_unsharded_verdict(gate_copy, tmp_path, monkeypatch, capsys):
    from gate.action import main

    workspace = gate_copy.parent
    monkeypatch.chdir(workspace)
    config = "gate/gate.toml"
    flags = {"atol": "2e-3", "rtol": "2e-3"}
    assert main(action_env(workspace, "full", config=config, report_path="full.json", **flags)) == 1
    for i in (1, 2, 3):
        env = action_env(workspace, f"leg{i}", config=config, shard=f"{i}/3", report_path=f"leg{i}.json", **flags)
        capsys.readouterr()
        assert main(env) == 0  # evaluated; one leg regressed, which only the merge reports
        out = capsys.readouterr().out
        assert "::error" not in out and f"::notice title=accuracy-gate::shard {i}/3 evaluated" in out
        outputs = parse_github_output((workspace / f".leg{i}-output").read_text())
        assert outputs["partial_path"] == f"accuracy-gate-partial-{i}-of-3.json"
        artifact = workspace / "artifacts" / f"leg{i}" / "p.json"  # as download-artifact lays them out
        artifact.parent.mkdir(parents=True)
        shutil.move(workspace / outputs["partial_path"], artifact)
    capsys.readouterr()
    code = main(action_env(workspace, "merge", mode="merge", partial_path="artifacts", report_path="merged.json"))
    out = capsys.readouterr().out
    assert code == 1 and out.rstrip().splitlines()[-1].startswith("::error title=accuracy-gate::accuracy regressed")
    full, merged = (
        json.loads((workspace / "full.json").read_text()),
        json.loads((workspace / "merged.json").read_text()),
    )
    assert merged.pop("scope") == "merged from 3 shards"
    for doc in (full, merged):
        doc.pop("duration_s")
        doc.pop("comment_key")  # <workflow>/<config input>, and the merge step has no config
    assert merged == full
    summary = (workspace / ".merge-summary").read_text()
    assert "10 iterations · merged from 3 shards" in summary and "```mermaid" in summary  # the verdict names no count

    missing = main(action_env(workspace, "missing", mode="merge", partial_path="artifacts/leg1", report_path="m.json"))
    assert missing == 2
    assert "missing shards 2/3, 3/3" in json.loads((workspace / "m.json").read_text())["message"]
    assert main(action_env(workspace, "none", mode="merge")) == 2  # partial_path is required in merge mode
