"""A CONFIG (or MODEL) given after a flag that takes several values is eaten by that flag; the error
then says so and how to order them. Failed before: only "the following arguments are required:
config", with nothing pointing at the order."""

from __future__ import annotations

import pytest

from conftest import run_cli


@pytest.mark.parametrize(
    ("args", "first"),
    [(("check", "--atol", "1e-3", "gate.toml"), "CONFIG"), (("check", "--runners", "onnxrt", "gate.toml"), "CONFIG"),
     (("run", "--onnxrt", "--atol", "1e-3", "model.onnx"), "MODEL")],
)  # fmt: skip
def test_a_config_after_a_flag_of_several_values_gets_a_hint(args, first):
    proc = run_cli(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"so give {first} first, e.g. accuracy-gate {args[0]} " in lines[0], proc.stderr


def test_no_argument_at_all_gets_no_hint():
    proc = run_cli("check")
    assert proc.returncode == 2 and "required: config (see 'accuracy-gate check --help')" in proc.stderr
