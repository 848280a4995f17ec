"""A long reason an output could not be compared (the dtype advice with both file paths) stays out
of the terminal table's cell, which points below, where the verdict line gives every reason in
full. Failed before: a 230-character cell stretched every row of the table. Real ONNX Runtime on
the shipped example, one golden iteration stored as float64."""

from __future__ import annotations

import numpy as np

from conftest import run_cli


def test_a_long_reason_is_below_the_table_not_in_it(example):
    cfg = example / "gate.toml"
    cfg.write_text(cfg.read_text().replace('golden = "data"', 'golden = "golden"'))
    assert run_cli("record", cfg, "--layout", "npz").returncode == 0
    path = example / "golden" / "000003.npz"
    np.savez(path, **{k: v.astype(np.float64) for k, v in np.load(path).items()})
    proc = run_cli("check", cfg, "--junit", example / "j.xml", cwd=example)
    assert proc.returncode == 2
    table = proc.stdout.split("\n\n")[0].splitlines()
    assert table[-1].endswith("ERROR (the reason is below the table)") and max(map(len, table)) < 140, table
    assert "is float64 in the golden outputs but onnxrt produces float32" in proc.stdout.split("\n\n")[1]
