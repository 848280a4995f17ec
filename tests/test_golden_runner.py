"""``golden_runner`` (gate.toml) / ``--golden-runner`` (check, run) picks the golden runner of a
Polygraphy JSON golden file saved from several runners; without it one line lists the runners and
says how to pick one: ``check`` names gate.toml's key and the flag, ``run`` the flag only (before: both
named gate.toml and a Python argument, ``open_tensor_set(..., runner=NAME)``).
A runner the file lacks, or the setting with golden outputs of another layout, is one line too.
Real ONNX Runtime on the shipped example."""

from __future__ import annotations

import numpy as np
import pytest

from gate.comparator.struct import IterationResult, RunResults

from conftest import run_cli, save_example_as_json


@pytest.fixture
def two_runner_golden(example):
    """``golden.json``: the example's golden outputs as runner ``onnxrt``, and the same outputs
    plus 1.0 as runner ``broken``; ``inputs.json`` the example's inputs as Polygraphy JSON."""
    iterations = save_example_as_json(example, "one.json")
    both = RunResults()
    both.append(("onnxrt", iterations))
    shifted = [
        IterationResult({k: v + np.float32(1) for k, v in it.items()}, runner_name="broken") for it in iterations
    ]
    both.append(("broken", shifted))
    both.save(example / "golden.json")
    cfg = example / "gate.toml"
    text = (
        cfg.read_text()
        .replace('inputs = "data"', 'inputs = "inputs.json"')
        .replace('golden = "data"', 'golden = "golden.json"')
    )
    cfg.write_text(text)
    return cfg


def _error_line(proc) -> str:
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_without_a_choice_the_error_lists_the_runners_and_how_to_pick(two_runner_golden):
    line = _error_line(run_cli("check", two_runner_golden, "--junit", two_runner_golden.parent / "j.xml"))
    assert line.endswith(
        "golden.json: the saved RunResults holds several runners ['onnxrt', 'broken']; say which one is the golden: "
        'golden_runner = "broken" in gate.toml or --golden-runner broken.'
    ), line


def test_run_without_a_choice_names_only_its_flag(two_runner_golden):
    # accuracy-gate run has no gate.toml, and no user calls open_tensor_set: only --golden-runner.
    folder = two_runner_golden.parent
    proc = run_cli(
        "run", "model.onnx", "--onnxrt", "--load-inputs", "inputs.json", "--load-outputs", "golden.json", cwd=folder
    )  # fmt: skip
    line = _error_line(proc)
    assert line == (
        f"accuracy-gate: error: {folder}/golden.json: the saved RunResults holds several runners ['onnxrt', "
        "'broken']; say which one is the golden: --golden-runner broken."
    ), line


def test_the_flag_and_gate_toml_pick_the_golden_runner(two_runner_golden):
    folder = two_runner_golden.parent
    proc = run_cli("check", two_runner_golden, "--golden-runner", "onnxrt", "--junit", folder / "j.xml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASSED: 1 of 1 outputs within tolerance over 8 iterations" in proc.stdout
    proc = run_cli("check", two_runner_golden, "--golden-runner", "broken", "--junit", folder / "j.xml")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the shifted outputs are out of tolerance
    two_runner_golden.write_text('golden_runner = "broken"\n' + two_runner_golden.read_text())
    assert run_cli("check", two_runner_golden, "--junit", folder / "j.xml").returncode == 1
    line = _error_line(run_cli("check", two_runner_golden, "--golden-runner", "trt", "--junit", folder / "j.xml"))
    assert line.endswith(
        "golden.json: holds no results of runner 'trt' (golden_runner); it holds ['onnxrt', 'broken']."
    ), line


def test_run_golden_runner(two_runner_golden):
    folder = two_runner_golden.parent
    common = ("run", "model.onnx", "--onnxrt", "--load-inputs", "inputs.json", "--load-outputs", "golden.json")
    assert "holds several runners ['onnxrt', 'broken']" in _error_line(run_cli(*common, cwd=folder))
    proc = run_cli(*common, "--golden-runner", "onnxrt", cwd=folder)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert run_cli(*common, "--golden-runner", "broken", cwd=folder).returncode == 1
    line = _error_line(run_cli("run", "model.onnx", "--onnxrt", "--golden-runner", "onnxrt", cwd=folder))
    assert line == (
        "accuracy-gate: error: --golden-runner picks the runner of a --load-outputs file that holds several; give one."
    )


def test_golden_runner_with_another_layout_is_an_error(example):
    line = _error_line(
        run_cli("check", example / "gate.toml", "--golden-runner", "onnxrt", "--junit", example / "j.xml")
    )
    assert line.endswith(
        f"{example / 'data'}: golden_runner 'onnxrt' picks a runner of Polygraphy JSON golden outputs, but these are "
        "in the onnx-zoo layout, which holds one runner's outputs; leave golden_runner out."
    ), line
