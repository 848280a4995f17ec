"""``record --force`` leaves a golden folder that ``check`` reads: the golden files the gate wrote in
another layout (and the test_data_set_<N>/ folders they leave empty) are removed, files the gate does
not write never are; where such a file would leave the folder holding two layouts, record says so in
one line before writing. A crash between removing the old files and moving in the new ones leaves a
folder that check stops on (exit 2), never one that passes. Real ONNX Runtime on the shipped example."""

from __future__ import annotations

import shutil

import pytest

from gate.config import load_config
from gate.errors import GateError
from gate.job import record

from conftest import run_cli


@pytest.fixture
def golden_apart(example):
    """The example with golden = "golden" (its own folder), recorded in the model-zoo layout."""
    cfg = example / "gate.toml"
    cfg.write_text(cfg.read_text().replace('golden = "data"', 'golden = "golden"'))
    proc = run_cli("record", cfg)
    assert proc.returncode == 0, proc.stderr
    return cfg


def _names(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _check(cfg):
    return run_cli("check", cfg, "--junit", cfg.parent / "j.xml")


def test_force_npz_over_model_zoo_golden_leaves_npz_alone(golden_apart):
    # before the fix: empty test_data_set_<N>/ folders stayed and check stopped, "holds several layouts"
    proc = run_cli("record", golden_apart, "--force", "--layout", "npz")
    assert proc.returncode == 0, proc.stderr
    assert _names(golden_apart.parent / "golden") == [f"{i:06d}.npz" for i in range(8)]
    proc = _check(golden_apart)
    assert proc.returncode == 0, proc.stderr
    assert "PASSED: 1 of 1 outputs within tolerance over 8 iterations" in proc.stdout


def test_force_model_zoo_over_npz_golden(golden_apart):
    assert run_cli("record", golden_apart, "--force", "--layout", "npz").returncode == 0
    proc = run_cli("record", golden_apart, "--force", "--layout", "onnx-zoo")
    assert proc.returncode == 0, proc.stderr
    names = _names(golden_apart.parent / "golden")
    assert names == sorted(
        [f"test_data_set_{i}" for i in range(8)] + [f"test_data_set_{i}/output_0.pb" for i in range(8)]
    )
    assert _check(golden_apart).returncode == 0


def test_force_with_fewer_inputs_removes_the_emptied_iteration_folders(golden_apart):
    # before the fix: test_data_set_6/ and _7/ stayed empty: "8 golden iterations for 6 stored inputs"
    data = golden_apart.parent / "data"
    shutil.rmtree(data / "test_data_set_6")
    shutil.rmtree(data / "test_data_set_7")
    proc = run_cli("record", golden_apart, "--force")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (golden_apart.parent / "golden").iterdir()) == [
        f"test_data_set_{i}" for i in range(6)
    ]
    proc = _check(golden_apart)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("unknown", ["test_data_set_3/notes.txt", "meta.json"])
def test_a_file_the_gate_does_not_write_is_kept_and_named_before_writing(golden_apart, unknown):
    golden = golden_apart.parent / "golden"
    (golden / unknown).write_text("{}")
    before = _names(golden)
    # before the fix: exit 0, and check then stopped on the folder ("holds several layouts")
    proc = run_cli("record", golden_apart, "--force", "--layout", "npz")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    other = "onnx-zoo" if unknown.startswith("test_data_set") else "polygraphy-json"
    assert lines[0] == (
        f"accuracy-gate: error: {golden / unknown}: not a golden file the gate writes, so record leaves it; beside "
        f"npz golden outputs {golden} would hold several layouts (npz, {other}), which check refuses; move it out "
        "first."
    )
    assert _names(golden) == before  # nothing written, nothing removed


def test_a_crash_while_moving_the_new_golden_files_in_never_reads_as_passing(golden_apart, monkeypatch):
    import gate.job

    moved = []
    real_move = shutil.move

    def move_three_then_die(src, dst):
        if len(moved) == 3:
            raise KeyboardInterrupt  # stands for the process being killed mid-way
        moved.append(dst)
        return real_move(src, dst)

    monkeypatch.setattr(gate.job.shutil, "move", move_three_then_die)
    with pytest.raises(KeyboardInterrupt):
        record(load_config(golden_apart), force=True, layout="npz")
    assert _names(golden_apart.parent / "golden") == [f"{i:06d}.npz" for i in range(3)]
    proc = _check(golden_apart)
    assert proc.returncode == 2
    assert "3 golden iterations for 8 stored inputs" in proc.stderr


def test_without_force_existing_golden_files_are_still_refused(golden_apart):
    with pytest.raises(GateError, match=r"golden outputs already exist \(8 files\); pass --force"):
        record(load_config(golden_apart), layout="npz")


@pytest.mark.parametrize("layout", ["npz", "onnx-zoo"])
def test_force_never_deletes_files_the_readers_do_not_take(golden_apart, layout):
    # An attacker's finding: record --force deleted golden/test_data_set_old/output_0.pb and
    # golden/test_data_set_0/output_backup.pb, files check never reads (the readers take
    # test_data_set_<N>/output_<K>.pb only): the user's backups are not golden files of ours.
    golden = golden_apart.parent / "golden"
    (golden / "test_data_set_old").mkdir()
    (golden / "test_data_set_old" / "output_0.pb").write_bytes(b"user backup")
    (golden / "test_data_set_0" / "output_backup.pb").write_bytes(b"user backup 2")
    proc = run_cli("record", golden_apart, "--force", "--layout", layout)
    assert (golden / "test_data_set_old" / "output_0.pb").read_bytes() == b"user backup"
    assert (golden / "test_data_set_0" / "output_backup.pb").read_bytes() == b"user backup 2"
    if layout == "onnx-zoo":  # same layout: recorded anew beside the user's files
        assert proc.returncode == 0, proc.stderr
        assert _check(golden_apart).returncode == 0
    else:  # the zoo folder the user keeps would leave two layouts: one line, nothing written
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
