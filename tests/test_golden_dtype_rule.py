"""A golden output in another dtype than the runner produces is could not evaluate (exit 2), even when
its values equal the output's (the README's rule; Polygraphy compares such a pair in the wider type
and passes it), in every golden layout and through ``run --load-outputs``; the Python API compares
in the wider type as Polygraphy does. Real ONNX Runtime on the shipped example."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from conftest import ROOT, run_cli

OUT = "save_infer_model/scale_0.tmp_1"


def _golden_apart(example, layout):
    cfg = example / "gate.toml"
    cfg.write_text(cfg.read_text().replace('golden = "data"', 'golden = "golden"'))
    assert run_cli("record", cfg, "--force", "--layout", layout).returncode == 0
    return cfg


def _as_float64(golden: Path, layout: str) -> None:
    """Every golden value widened to float64 exactly (equal to the float32 output)."""
    if layout == "npz":
        for path in golden.glob("*.npz"):
            np.savez(path, **{k: v.astype(np.float64) for k, v in np.load(path).items()})
        return
    for path in golden.glob("test_data_set_*/output_0.pb"):
        tensor = onnx.load_tensor(str(path))
        onnx.save_tensor(
            numpy_helper.from_array(numpy_helper.to_array(tensor).astype(np.float64), tensor.name), str(path)
        )


def test_equal_float64_golden_is_could_not_evaluate_in_both_layouts(example):
    for layout in ("npz", "onnx-zoo"):
        cfg = _golden_apart(example, layout)
        _as_float64(example / "golden", layout)
        report = example / f"r-{layout}.json"
        proc = run_cli("check", cfg, "--report", report, "--junit", example / "j.xml")
        assert proc.returncode == 2, proc.stdout
        assert proc.stderr.count("\n") == 1
        assert f"could not compare '{OUT}' (is float64 in the golden outputs but onnxrt produces float32" in proc.stderr
        result = json.loads(report.read_text())
        assert result["status"] == "error" and result["rows"][0]["dtypes"] == ["float32", "float64"]
        assert run_cli("record", cfg, "--force", "--layout", layout).returncode == 0  # re-recorded: passes
        assert run_cli("check", cfg, "--junit", example / "j.xml").returncode == 0


def test_readme_states_the_rule_and_no_dtype_caveat():
    readme = (ROOT / "README.md").read_text()
    assert "name, shape or dtype mismatch between golden data and model" in readme
    assert (
        "a float64 golden for a float32\noutput, say, even with equal values) is could not evaluate (exit 2)" in readme
    )
    assert not re.search(r"caveat \([^)]*dtype", readme)  # no promise of a caveat for a dtype difference
