"""``check --jobs N`` / ``--devices``: shards in parallel processes (``gate.parallel``), merged as
``accuracy-gate merge`` merges a matrix's; the merged result equals the unsharded one number for
number. Real ONNX Runtime CPU processes on the shipped example, with golden outputs perturbed so
that the numbers compared are not all zero."""

from __future__ import annotations

import json

import pytest

from gate.errors import GateError
from gate.parallel import parse_devices

from conftest import perturb_golden, run_cli

VOLATILE = ("duration_s", "scope")


def _perturbed(example):
    for k, delta in ((1, 3e-5), (4, 2e-3), (6, 1e-6)):
        perturb_golden(example / "data" / f"test_data_set_{k}" / "output_0.pb", (0, 1), delta)


def _report(example, *flags):
    name = "r" + "".join(flags).replace("-", "").replace(",", "") + ".json"
    proc = run_cli(
        "check",
        example / "gate.toml",
        "--junit",
        example / f"{name}.xml",
        "--report",
        example / name,
        "--write-partial",
        example / f"p{name}",
        *flags,
        cwd=example,
    )
    return proc, json.loads((example / name).read_text()), json.loads((example / f"p{name}").read_text())


@pytest.mark.parametrize("jobs", ["2", "3", "8"])
def test_jobs_merge_equals_the_unsharded_run_number_for_number(example, jobs):
    _perturbed(example)
    plain, whole, whole_partial = _report(example)
    proc, merged, merged_partial = _report(example, "--jobs", jobs)
    assert plain.returncode == proc.returncode == 1, proc.stderr
    assert f"{jobs} shards in parallel" in proc.stdout
    assert merged["rows"] == whole["rows"]  # every number, worst iteration and element alike
    assert merged["rows"][0]["abs_value"] > 1e-3 and merged["rows"][0]["failed_iterations"] == 1
    assert {k: v for k, v in merged.items() if k not in VOLATILE} == {
        k: v for k, v in whole.items() if k not in VOLATILE
    }
    # the partial result files agree on every compared column and setting too
    for key in ("config", "golden", "iterations", "aggregation", "facts", "pairs"):
        assert _timeless(merged_partial[key]) == _timeless(whole_partial[key]), key


def _timeless(value):
    """``value`` without the measured comparison times (``time_s``), the one column two runs never share."""
    if isinstance(value, dict):
        return {k: _timeless(v) for k, v in value.items() if k != "time_s"}
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def test_jobs_errors(example):
    # run in the example's folder: the default JUnit and partial paths are the working directory's
    proc = run_cli("check", example / "gate.toml", "--jobs", "2", "--shard", "1/2", cwd=example)
    assert proc.returncode == 2
    assert "--shard cannot be combined with --devices or --jobs" in proc.stderr
    # the shard's default partial path, in the working directory, keeps its claim (never a result)
    claim = json.loads((example / "accuracy-gate-partial-1-of-2.json").read_text())
    assert claim["schema"] == "accuracy-gate-unfinished-run" and claim["status"] == "running"
    # More jobs than iterations (--jobs $(nproc) on a small golden set): one shard per iteration, said
    # so in the scope. Failed before: exit 2, "shard 1/9: ... use at most 8 shards".
    proc = run_cli("check", example / "gate.toml", "--jobs", "9", cwd=example)  # 8 iterations
    assert proc.returncode == 0, proc.stderr
    assert "8 shards in parallel (--jobs 9, at most one per iteration)" in proc.stdout
    text = (
        (example / "gate.toml")
        .read_text()
        .replace('execution_providers = ["CPUExecutionProvider"]', 'execution_providers = ["CUDAExecutionProvider"]')
    )
    (example / "gate.toml").write_text(text)
    proc = run_cli("check", example / "gate.toml", "--jobs", "2", cwd=example)
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "shard 1/2: " in line and "execution provider CUDAExecutionProvider is not active" in line


def test_parse_devices():
    assert parse_devices("all", count=3, visible="") == ["0", "1", "2"]
    assert parse_devices("0,2", count=4, visible="") == ["0", "2"]
    assert parse_devices("1", visible="4,5,6") == ["5"]  # index among the visible devices
    assert parse_devices("all", count=2, visible="GPU-a,GPU-b") == ["GPU-a", "GPU-b"]
    with pytest.raises(GateError, match=r"^--devices all: no CUDA device is visible"):
        parse_devices("all", count=0, visible="")
    with pytest.raises(GateError, match=r"^--devices 0,0: a device is named twice"):
        parse_devices("0,0", count=2, visible="")
    with pytest.raises(GateError, match=r"^--devices 3: device 3 is not visible \(2 visible\)"):
        parse_devices("3", visible="0,1")
    with pytest.raises(GateError, match=r"^--devices must be 'all' or device indices"):
        parse_devices("gpu0", visible="")


def test_cpu_shards_share_the_compare_threads_out():
    # --jobs N starts N processes on the same cores: each gets its share of the kernel's threads
    # (gate.comparator.kernels_threads), not the default pool of min(4, CPUs) each.
    from gate.parallel import shard_compare_threads

    assert [shard_compare_threads(jobs, cpus=16) for jobs in (1, 2, 3, 4, 8, 16, 32)] == [4, 4, 4, 4, 2, 1, 1]
    assert [shard_compare_threads(jobs, cpus=2) for jobs in (1, 2, 3)] == [2, 1, 1]
