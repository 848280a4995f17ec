"""``accuracy-gate record`` keeps the stored inputs' file names, and records Polygraphy JSON inputs
without a --layout (golden outputs as ``polygraphy run --save-outputs DIR`` writes them), which
polygraphy 0.53.6 reads back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from conftest import make_small_model, run_cli

POLYGRAPHY = str(Path(sys.executable).with_name("polygraphy"))


def _config(tmp_path, inputs: str) -> Path:
    make_small_model(tmp_path / "m.onnx")
    cfg = tmp_path / "gate.toml"
    cfg.write_text(f'model = "m.onnx"\ninputs = "{inputs}"\ngolden = "golden"\n', encoding="utf-8")
    return cfg


def test_npz_inputs_keep_their_file_names(tmp_path):
    (tmp_path / "in").mkdir()
    rng = np.random.default_rng(0)
    for index in range(2):
        np.savez(tmp_path / "in" / f"{index}.npz", x=rng.standard_normal((1, 64)).astype(np.float32))
    cfg = _config(tmp_path, "in")
    proc = run_cli("record", cfg)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "golden").iterdir()) == ["0.npz", "1.npz"]
    assert run_cli("check", cfg, "--atol", "0", "--rtol", "0").returncode == 0


def test_polygraphy_json_inputs_record_without_a_layout_and_polygraphy_reads_the_golden(tmp_path):
    from gate.comparator.serde import load_run_results, save_inputs

    rng = np.random.default_rng(1)
    feeds = [{"x": rng.standard_normal((1, 64)).astype(np.float32)} for _ in range(3)]
    save_inputs(feeds, tmp_path / "inputs.json")
    cfg = _config(tmp_path, "inputs.json")
    proc = run_cli("record", cfg)
    assert proc.returncode == 0, proc.stderr
    files = sorted((tmp_path / "golden").iterdir())
    assert [p.name for p in files] == [f"{i:010d}.json" for i in range(3)]
    assert list(load_run_results(files[0]).keys()) == ["onnxrt"]
    assert run_cli("check", cfg, "--atol", "0", "--rtol", "0").returncode == 0
    theirs = subprocess.run(
        [POLYGRAPHY, "run", "m.onnx", "--onnxrt", "--load-inputs", "inputs.json", "--load-outputs", "golden",
         "--atol", "0", "--rtol", "0"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert theirs.returncode == 0, theirs.stdout[-3000:]
    again = run_cli("record", cfg)
    assert again.returncode == 2 and "golden outputs already exist (3 files); pass --force" in again.stderr
