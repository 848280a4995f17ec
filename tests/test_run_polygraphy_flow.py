"""``accuracy-gate run`` as a ``polygraphy run`` user types it: the "Comparing Frameworks" tutorial's
commands (shared/spec/seeds/comparing-frameworks.txt) and polygraphy's flags, run with polygraphy
0.53.6's CLI and with ours side by side (ONNX Runtime only), and Polygraphy's JSON both ways."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from conftest import gpu_visible, run_cli

POLYGRAPHY = str(Path(sys.executable).with_name("polygraphy"))
SHAPES = ("--input-shapes", "X:[1,2,4,4]")


def polygraphy(*args, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [POLYGRAPHY, "run", *map(str, args)], capture_output=True, text=True, timeout=300, cwd=cwd
    )  # fmt: skip


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    """The tutorial's dynamic_identity.onnx: Y = Identity(X), X float32 [1, 2, -1, -1]."""
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2, "h", "w"])
    y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 2, "h", "w"])
    graph = helper.make_graph([helper.make_node("Identity", ["X"], ["Y"])], "dynamic_identity", [x], [y])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    path = tmp_path_factory.mktemp("model") / "dynamic_identity.onnx"
    onnx.save(proto, path)
    return path


@pytest.mark.parametrize("shapes", [(), SHAPES], ids=["default-shapes", "input-shapes"])
def test_one_runner_runs_and_reports_as_polygraphy(model, tmp_path, shapes):
    theirs = polygraphy(model, "--onnxrt", *shapes, cwd=tmp_path)
    ours = run_cli("run", model, "--onnxrt", *shapes, "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert theirs.returncode == 0 and ours.returncode == 0, ours.stderr
    size = "4,4" if shapes else "1,1"
    assert f"inputs: synthetic inputs, --seed 1: X float32 [1,2,{size}]" in ours.stdout
    assert f"PASSED: onnxrt ran 1 iteration (outputs: Y float32 [1,2,{size}]); nothing was compared" in ours.stdout
    # The JUnit file says that nothing was compared: one skipped test case, never a green comparison.
    (case,) = ET.parse(tmp_path / "j.xml").getroot().iter("testcase")
    assert case.find("skipped") is not None and case.find("failure") is None


def _arrays(run_results_or_feeds):
    return [np.asarray(v) for v in run_results_or_feeds]


def test_saved_inputs_and_outputs_round_trip_with_polygraphy_bit_for_bit(model, tmp_path):
    from gate.comparator.serde import load_json, load_run_results

    # ours -> polygraphy: polygraphy reads our inputs and outputs and agrees at atol = rtol = 0.
    ours = run_cli("run", model, "--onnxrt", *SHAPES, "--iterations", "3", "--save-inputs", tmp_path / "in.json",
                   "--save-outputs", tmp_path / "out.json", "--junit", tmp_path / "j.xml", cwd=tmp_path)  # fmt: skip
    assert ours.returncode == 0, ours.stderr
    theirs = polygraphy(model, "--onnxrt", "--load-inputs", "in.json", "--load-outputs", "out.json",
                        "--save-outputs", "theirs.json", "--save-inputs", "theirs_in.json",
                        "--atol", "0", "--rtol", "0", cwd=tmp_path)  # fmt: skip
    assert theirs.returncode == 0, theirs.stdout + theirs.stderr
    assert "Passed: 3/3 iterations" in theirs.stdout
    # ... and what polygraphy saves from our inputs is what we saved, bit for bit.
    mine, its = load_run_results(tmp_path / "out.json"), load_run_results(tmp_path / "theirs.json")
    (mine_runner,), (its_runner,) = mine.keys(), its.keys()
    assert mine_runner == "onnxrt"
    for a, b in zip(mine[mine_runner], its[its_runner], strict=True):
        assert a["Y"].tobytes() == b["Y"].tobytes() and a["Y"].dtype == b["Y"].dtype
    for a, b in zip(load_json(tmp_path / "in.json"), load_json(tmp_path / "theirs_in.json"), strict=True):
        assert a["X"].tobytes() == b["X"].tobytes()
    # polygraphy -> ours: its saved inputs and outputs pass ours at atol = rtol = 0, and ours saves them again
    # bit for bit (a folder of per-iteration files this time).
    back = run_cli("run", model, "--onnxrt", "--load-inputs", tmp_path / "theirs_in.json", "--load-outputs",
                   tmp_path / "theirs.json", "--atol", "0", "--rtol", "0", "--save-outputs", tmp_path / "again",
                   "--junit", tmp_path / "j.xml", cwd=tmp_path)  # fmt: skip
    assert back.returncode == 0, back.stderr
    assert "PASSED: 1 of 1 outputs within tolerance over 3 iterations" in back.stdout
    again = [load_run_results(path) for path in sorted((tmp_path / "again").iterdir())]
    assert [list(run.keys()) for run in again] == [["onnxrt"]] * 3  # the loaded golden set is not saved
    for run, b in zip(again, its[its_runner], strict=True):
        assert run["onnxrt"][0]["Y"].tobytes() == b["Y"].tobytes()


def test_a_save_folder_that_is_not_empty_is_refused_naming_the_flag(model, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep", encoding="utf-8")
    proc = run_cli("run", model, "--onnxrt", *SHAPES, "--save-outputs", tmp_path / "full", "--junit", "j", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("accuracy-gate: error: --save-outputs: "), proc.stderr
    assert (tmp_path / "full" / "x").read_text(encoding="utf-8") == "keep"


@pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: the no-GPU error cannot fire")
@pytest.mark.parametrize(
    "args",
    [
        ("--trt", "--onnxrt"),
        ("--trt", "--onnxrt", *SHAPES),
        ("--trt", "--fp16", "--onnxrt", *SHAPES),
        ("--trt", "--fp16", "--onnxrt", *SHAPES, "--atol", "0.001", "--rtol", "0.001", "--check-error-stat", "median"),
        ("--trt", "--onnxrt", "--trt-outputs", "mark", "all", "--onnx-outputs", "mark", "all"),
        ("--trt", "--onnxrt", "--trt-outputs", "mark", "all", "--onnx-outputs", "mark", "all", "--fail-fast"),
    ],
    ids=["compare", "input-shapes", "fp16", "median", "mark-all", "fail-fast"],
)
def test_the_tutorials_tensorrt_commands_reach_the_one_line_no_gpu_error(model, tmp_path, args):
    proc = run_cli("run", model, *args, "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("accuracy-gate: error: No NVIDIA GPU is visible"), line
