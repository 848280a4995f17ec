"""A metric's bound reads the same from a flag as from gate.toml: a cosine similarity threshold from
-1 to 1 (``--cosine-similarity-threshold -0.5`` was refused as "must be a non-negative finite number",
which gate.toml accepted), an L2 / MSE bound or tie_atol >= 0 in both (gate.toml accepted
``l2_threshold = -1``, a bound no output can meet). Real ONNX Runtime on the shipped example."""

from __future__ import annotations

import pytest

from conftest import run_cli


def _check(example, *flags, toml=""):
    cfg = example / "gate.toml"
    if toml:
        cfg.write_text(cfg.read_text().replace("[compare]\n", f"[compare]\n{toml}\n", 1))
    return run_cli("check", cfg, "-q", "--junit", example / "j.xml", *flags, cwd=example)


@pytest.mark.parametrize("where", ["flag", "toml"])
def test_a_negative_cosine_threshold_is_a_threshold(example, where):
    if where == "flag":
        proc = _check(example, "--compare-func", "cosine", "--cosine-similarity-threshold", "-0.5")
    else:
        proc = _check(example, toml='compare_func = "cosine"\ncosine_similarity_threshold = -0.5')
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("where", ["flag", "toml"])
@pytest.mark.parametrize(("func", "key"), [("l2", "l2_threshold"), ("mse", "mse_threshold")])
def test_a_negative_distance_bound_is_one_line(example, where, func, key):
    if where == "flag":
        proc = _check(example, "--compare-func", func, f"--{key.replace('_', '-')}", "-1")
    else:
        proc = _check(example, toml=f'compare_func = "{func}"\n{key} = -1')
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "must be a number >= 0, got -1" in lines[0], proc.stderr
