"""Settings a fresh user got wrong and the gate accepted (found from the README alone): an
error_quantile outside [0, 1] crashed during the comparison ("internal error", after the model had
run), and a cosine similarity minimum above 1 made an output fail forever. Each is now one line
naming the setting, exit 2, before anything runs."""

from __future__ import annotations

import pytest

from conftest import run_cli


@pytest.mark.parametrize(
    "flags, line",
    [
        (("--check-error-stat", "quantile", "--error-quantile", "2"),
         "--error-quantile: must be a quantile from 0 to 1"),
        (("--error-quantile", "-0.5"), "--error-quantile: must be a quantile from 0 to 1, got -0.5"),
        (("--compare-func", "cosine", "--cosine-similarity-threshold", "2"),
         "--cosine-similarity-threshold: must be from -1 to 1 (a cosine similarity), got 2.0"),
    ],
)  # fmt: skip
def test_out_of_range_flags_are_one_line_before_the_model_runs(example, flags, line):
    proc = run_cli("check", example / "gate.toml", *flags, "--junit", example / "j.xml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and line in lines[0], proc.stderr
    assert "internal error" not in proc.stderr and "iterations" not in proc.stdout  # nothing ran


def test_error_quantile_in_gate_toml_names_the_file(example):
    toml = example / "gate.toml"
    stat = 'check_error_stat = "quantile"\nerror_quantile = 1.5'
    text = toml.read_text().replace('check_error_stat = "elemwise"', stat)
    toml.write_text(text)
    proc = run_cli("check", toml, "--junit", example / "j.xml")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "gate.toml: 'error_quantile': must be a quantile from 0 to 1, got 1.5" in proc.stderr


def test_run_checks_error_quantile_too(example, tmp_path):
    proc = run_cli("run", example / "model.onnx", "--onnxrt", "--onnxrt", "--error-quantile", "3",
                   "--junit", example / "j.xml", cwd=example)  # fmt: skip
    assert proc.returncode == 2 and "--error-quantile: must be a quantile from 0 to 1, got 3.0" in proc.stderr
