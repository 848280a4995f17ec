"""``accuracy-gate run``: polygraphy-run-style checks without a gate.toml, on the shipped real model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import EXAMPLE, EXAMPLE_OUTPUT, gpu_visible, run_cli

MODEL = EXAMPLE / "model.onnx"
SHAPES = ("--input-shapes", "x:[1,3,48,192]")
SHIPPED = EXAMPLE


@pytest.fixture(autouse=True)
def _example_in_the_working_directory(tmp_path, monkeypatch):
    """``run`` reads only inside the working directory or ``--root`` (issue 14): each test runs on its
    own copy of the shipped example in ``tmp_path`` (the tests' working directory)."""
    import shutil

    copy = Path(shutil.copytree(SHIPPED, tmp_path / "example"))
    monkeypatch.setattr(sys.modules[__name__], "EXAMPLE", copy)
    monkeypatch.setattr(sys.modules[__name__], "MODEL", copy / "model.onnx")


def local(args) -> tuple:
    """``args`` with paths into the shipped example moved to the test's copy."""
    return tuple(
        EXAMPLE / Path(a).relative_to(SHIPPED) if isinstance(a, Path) and SHIPPED in a.parents else a for a in args
    )


def test_golden_saved_by_polygraphy_run_passes_bit_for_bit(tmp_path):
    # polygraphy 0.53.6 writes golden outputs from its seeded synthetic inputs; ours regenerates the
    # same inputs for the same seed, so even atol = rtol = 0 holds.
    golden = tmp_path / "golden.json"
    saved = subprocess.run(
        [str(Path(sys.executable).with_name("polygraphy")), "run", str(MODEL), "--onnxrt", "--iterations", "3", *SHAPES,
         "--save-outputs", str(golden)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    proc = run_cli("run", MODEL, "--onnxrt", "--load-outputs", golden, *SHAPES, "--atol", "0", "--rtol", "0",
                   "--junit", tmp_path / "j.xml", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "3 iterations, onnxrt vs golden" in proc.stdout and EXAMPLE_OUTPUT in proc.stdout
    other_seed = run_cli("run", MODEL, "--onnxrt", "--load-outputs", golden, *SHAPES, "--seed", "2",
                         "--junit", tmp_path / "j.xml", cwd=tmp_path)  # fmt: skip
    assert other_seed.returncode == 1 and "REGRESSED" in other_seed.stdout


def test_golden_recorded_by_accuracy_gate_passes(tmp_path):
    data = EXAMPLE / "data"
    proc = run_cli(
        "run", MODEL, "--onnxrt", "--load-inputs", data, "--load-outputs", data, "--junit", "j", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "PASSED: 1 of 1 outputs within tolerance over 8 iterations" in proc.stdout


def test_two_runners_the_last_is_the_reference(tmp_path):
    proc = run_cli(
        "run", MODEL, "--onnxrt", "--onnxrt", *SHAPES, "--iterations", "4", "--mark-all", "--junit", "j", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "over 4 iterations" in proc.stdout
    assert "per-layer (onnxrt vs onnxrt-reference, 258 tensors in node order; diagnostics only)" in proc.stdout
    assert "no tensor diverges beyond the tolerances" in proc.stdout


@pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: the no-GPU error cannot fire")
def test_trt_against_onnxrt_without_a_gpu_is_one_line(tmp_path):
    proc = run_cli("run", MODEL, "--trt", "--onnxrt", "--junit", "j", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("accuracy-gate: error: No NVIDIA GPU is visible") and "--gpus" in line


def test_mark_all_finds_the_first_layer_that_diverges(tmp_path, monkeypatch):
    # Two real onnxruntime runs of models that differ in one bias: the MatMul output still matches,
    # the Add that uses the bias is the first tensor to diverge, and everything after it follows.
    import numpy as np
    import onnx
    from onnx import numpy_helper

    from gate import layerwise
    from gate.config import GateConfig

    from conftest import make_small_model

    model = make_small_model(tmp_path / "m.onnx")
    changed = onnx.load(str(model))
    bias = next(init for init in changed.graph.initializer if init.name == "b")
    bias.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(bias) + 0.5, "b"))
    onnx.save(changed, str(tmp_path / "changed.onnx"))
    real_runner = layerwise._mark_all_runner

    def runner(kind, cfg, marked, name, *spec):
        if name.endswith("reference"):  # the reference runs the changed model, all tensors marked too
            marked = tmp_path / "changed_marked.onnx"
            from gate.backend.trt.layerwise import onnx_with_outputs

            onnx.save(onnx_with_outputs(onnx.load(str(tmp_path / "changed.onnx")), "*"), str(marked))
        return real_runner(kind, cfg, marked, name, *spec)

    monkeypatch.setattr(layerwise, "_mark_all_runner", runner)
    cfg = GateConfig(path=tmp_path / "cli", model=model, inputs=tmp_path, golden=tmp_path, runners=["onnxrt", "onnxrt"])
    feed = {"x": np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)}
    runner_name, reference, rows = layerwise.compare_layers(cfg, feed)
    assert (runner_name, reference) == ("onnxrt", "onnxrt-reference")
    assert [(r.tensor, r.status) for r in rows] == [("xw", "pass"), ("pre", "FAIL"), ("y", "FAIL"), ("s", "FAIL")]
    assert rows[1].max_absdiff == pytest.approx(0.5, abs=1e-6)
    text = layerwise.render_layers(runner_name, reference, rows)
    assert "first divergence: 'pre'" in text and "1 pass, 3 FAIL, 0 not produced" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("--onnxrt", "--onnxrt", "--val-range", "y:[0,1]"),
            "--val-range: the model has no input 'y'; its inputs are ['x']",
        ),
        (("--onnxrt", "--onnxrt", "--val-range", "[0,inf]"), "must be two finite bounds with LO <= HI"),
        (("--onnxrt", "--onnxrt", *SHAPES, "x:[1,3,48,96]"), "--input-shapes: input 'x' is given twice"),
        (("--onnxrt", "--load-outputs", EXAMPLE / "data", "--mark-all"), "--mark-all compares two runners"),
        (("--onnxrt", "--load-inputs", EXAMPLE / "data", "--seed", "3"), "--seed shapes synthetic inputs"),
        (("--onnxrt", "--onnxrt", "--iterations", "0"), "--iterations must be at least 1, got 0"),
        (
            ("--onnxrt", "--seed", "abc"),
            "run: argument --seed: invalid int value: 'abc' (see 'accuracy-gate run --help')",
        ),
        (("--onnxrt", "--load-inputs", EXAMPLE / "data", "--load-outputs", EXAMPLE / "data", "--atol", "x:1"), "x"),
        # an infinite tolerance passes every finite output: refused before any work, naming the flag
        (
            ("--onnxrt", "--onnxrt", "--atol", "inf"),
            "accuracy-gate: error: --atol must be a non-negative finite number, got inf.",
        ),
        (
            ("--onnxrt", "--onnxrt", "--rtol", "1e-3", "y:1e400"),
            "accuracy-gate: error: --rtol must be a non-negative finite number, got inf (output 'y').",
        ),
    ],
)
def test_run_flag_mistakes_are_one_line(tmp_path, args, message):
    proc = run_cli("run", MODEL, *local(args), "--junit", "j", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("accuracy-gate: error: ") and message in line, line


def test_iterations_must_match_the_loaded_golden_count(tmp_path):
    data = EXAMPLE / "data"
    proc = run_cli(
        "run", MODEL, "--onnxrt", "--load-outputs", data, *SHAPES, "--iterations", "3", "--junit", "j", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert "holds 8 golden iterations but --iterations asks for 3" in proc.stderr


def make_sqrt_model(path):
    """y = sqrt(x), x: float32 [1]: a negative synthetic input gives a NaN output."""
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Sqrt", ["x"], ["y"])],
        "sqrt",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def one_line(proc) -> str:
    """The one error line on stderr; no traceback, and no file of run's deleted scratch folder."""
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "accuracy-gate-run-" not in proc.stdout + proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    return line


def test_synthetic_inputs_the_reference_runner_fails_on_are_named_by_iteration_and_seed(tmp_path):
    # The reference runner records first; onnxruntime refuses a 0-wide image at the first iteration.
    proc = run_cli("run", MODEL, "--onnxrt", "--onnxrt", "--input-shapes", "x:[1,3,48,0]", "--seed", "7", cwd=tmp_path)
    line = one_line(proc)
    assert line.startswith(
        "accuracy-gate: error: iteration 0 (synthetic inputs, --seed 7): onnxrt: onnxruntime failed during inference ("
    ), line


def test_synthetic_input_that_stops_the_run_is_named_by_iteration_and_seed(tmp_path):
    # --seed 4 with this range draws 0.959, 0.027, 0.866, -0.155, ...: iteration 3 is the first negative x.
    model = make_sqrt_model(tmp_path / "sqrt.onnx")
    proc = run_cli("run", model, "--onnxrt", "--onnxrt", "--val-range", "[-0.25,1]", "--seed", "4", "--iterations",
                   "5", "--validate", "--junit", "j.xml", "--markdown", "m.md", cwd=tmp_path)  # fmt: skip
    assert one_line(proc) == (
        "accuracy-gate: error: stopped after 3 of 5 iterations: iteration 3 (synthetic inputs, --seed 4): Output "
        "validation failed: iteration 3 contains invalid values (NaNs/Infs): runner 'onnxrt', output 'y' contains NaN."
    )
    for report in (tmp_path / "j.xml", tmp_path / "m.md"):
        text = report.read_text(encoding="utf-8")
        assert "iteration 3 (synthetic inputs, --seed 4)" in text and "accuracy-gate-run-" not in text


def test_loaded_golden_outputs_beside_synthetic_inputs_keep_their_own_file_names(tmp_path):
    import numpy as np

    from conftest import make_small_model

    model = make_small_model(tmp_path / "m.onnx")
    (tmp_path / "golden").mkdir()
    for i in range(4):
        width = 32 if i == 3 else 64
        np.savez(tmp_path / "golden" / f"{i}.npz", y=np.zeros((1, width), np.float32), s=np.zeros(1, np.float32))
    proc = run_cli("run", model, "--onnxrt", "--load-outputs", tmp_path / "golden", "--input-shapes", "x:[1,64]",
                   "--junit", tmp_path / "j.xml", cwd=tmp_path)  # fmt: skip
    assert one_line(proc) == (
        "accuracy-gate: error: could not compare 'y' (has shape (1, 64) but the reference has shape (1, 32) at "
        f"iteration 3 (synthetic inputs, --seed 1, golden {tmp_path}/golden/3.npz))"
    )


def test_iterations_help_gives_the_default_with_loaded_golden_outputs():
    proc = run_cli("run", "--help")
    help_text = " ".join(proc.stdout.split())
    assert "synthetic iterations (default 1; with --load-outputs, the number of iterations in the loaded golden " \
        "outputs, which N must equal)" in help_text  # fmt: skip


def test_report_paths_stay_inside_the_working_directory_or_root(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    data = EXAMPLE / "data"
    for flag in ("--junit", "--markdown", "--report"):
        proc = run_cli(
            "run", MODEL, "--onnxrt", "--load-inputs", data, "--load-outputs", data, flag, "../out", cwd=work
        )
        assert one_line(proc) == (
            f"accuracy-gate: error: ../out: {flag} resolves outside {work}; paths must stay inside it."
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "example",
        "work",
    ]  # nothing written outside, no error file either
    proc = run_cli("run", MODEL, "--onnxrt", "--load-inputs", data, "--load-outputs", data, "--junit", "../out",
                   "--root", tmp_path, cwd=work)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out").is_file()


def test_report_paths_never_overwrite_the_model_or_the_loaded_data(tmp_path):
    import shutil

    model = Path(shutil.copy(MODEL, tmp_path / "model.onnx"))
    shutil.copytree(EXAMPLE / "data", tmp_path / "data")
    before = model.read_bytes()
    args = ("run", model, "--onnxrt", "--load-inputs", "data", "--load-outputs", "data")
    proc = run_cli(*args, "--junit", "model.onnx", cwd=tmp_path)
    assert one_line(proc) == (
        "accuracy-gate: error: model.onnx: --junit would overwrite the model; reports must stay out of the files "
        "and folders the gate reads."
    )
    proc = run_cli(*args, "--report", "data/report.json", cwd=tmp_path)
    assert one_line(proc) == (
        f"accuracy-gate: error: data/report.json: --report lies inside the loaded inputs ({tmp_path}/data); reports "
        "must stay out of the files and folders the gate reads."
    )
    assert model.read_bytes() == before and not (tmp_path / "data" / "report.json").exists()
    # --junit was refused: no JUnit file at all; --report was refused: the error is in the default JUnit file
    assert [p.name for p in tmp_path.glob("*.xml")] == ["accuracy-gate-junit.xml"]
    assert "--report lies inside the loaded inputs" in (tmp_path / "accuracy-gate-junit.xml").read_text()


def test_an_error_before_a_result_replaces_the_junit_of_an_earlier_pass(tmp_path):
    from junitparser import Error, JUnitXml

    data = EXAMPLE / "data"
    args = ("--onnxrt", "--load-inputs", data, "--load-outputs", data, "--junit", "j.xml", "--report", "r.json")
    assert run_cli("run", MODEL, *args, cwd=tmp_path).returncode == 0
    proc = run_cli("run", tmp_path / "missing.onnx", *args, cwd=tmp_path)
    line = one_line(proc)
    assert line == f"accuracy-gate: error: {tmp_path}/missing.onnx: model file not found."
    [suite] = JUnitXml.fromfile(str(tmp_path / "j.xml"))
    [case] = suite
    [error] = case.result
    assert case.name == "missing.onnx/(no outputs)" and isinstance(error, Error)
    assert error.message == line.removeprefix("accuracy-gate: error: ")
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["status"] == "error" and report["message"] == error.message
