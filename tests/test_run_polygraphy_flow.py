"""``accuracy-gate run`` as a ``polygraphy run`` user types it: the "Comparing Frameworks" tutorial's
commands (shared/spec/seeds/comparing-frameworks.txt) and polygraphy's flags, run with polygraphy
0.53.6's CLI and with ours side by side (ONNX Runtime only), and Polygraphy's JSON both ways."""

from __future__ import annotations

import shutil
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
def built_model(tmp_path_factory) -> Path:
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


@pytest.fixture
def model(built_model, tmp_path) -> Path:
    """``built_model`` copied into the test's folder, the working directory and so the root that
    ``run``'s paths must stay inside."""
    path = tmp_path / built_model.name
    shutil.copyfile(built_model, path)
    return path


@pytest.mark.parametrize("shapes", [(), SHAPES], ids=["default-shapes", "input-shapes"])
def test_one_runner_runs_and_reports_as_polygraphy(model, tmp_path, shapes):
    theirs = polygraphy(model, "--onnxrt", *shapes, cwd=tmp_path)
    ours = run_cli("run", model, "--onnxrt", *shapes, "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert theirs.returncode == 0 and ours.returncode == 0, ours.stderr
    size = "4,4" if shapes else "1,1"
    assert f"inputs: synthetic inputs, --seed 1: X float32 [1,2,{size}]" in ours.stdout
    assert f"RAN: onnxrt, 1 iteration (outputs: Y float32 [1,2,{size}]); nothing compared (one runner" in ours.stdout
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


def _same_verdict(model, tmp_path, args, expected):
    theirs = polygraphy(model, *args, cwd=tmp_path)
    ours = run_cli("run", model, *args, "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert (theirs.returncode, ours.returncode) == (expected, expected), (
        theirs.stdout[-2000:],
        ours.stdout,
        ours.stderr,
    )
    return theirs, ours


@pytest.mark.parametrize(
    "args",
    [
        ("--onnxrt",),
        ("--onnxrt", *SHAPES),
        ("--onnxrt", "--onnxrt"),
        ("--onnxrt", "--onnxrt", *SHAPES),
        ("--onnxrt", "--onnxrt", *SHAPES, "--atol", "0.001", "--rtol", "0.001", "--check-error-stat", "median"),
        ("--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all"),
        ("--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all", "--fail-fast"),
        ("--onnxrt", "--onnxrt", "--onnx-outputs", "Y"),
        ("--onnxrt", "--onnxrt", "--providers", "cpu", "--graph-optimization-level", "ORT_DISABLE_ALL"),
        ("--onnxrt", "--onnxrt", "--inputs", "X:[1,2,3,5]", "--iterations", "3", "--seed", "7", "--validate"),
        ("--onnxrt", "--onnxrt", "--val-range", "X:[-1,1]", "--check-error-stat", "quantile", "--error-quantile",
         "0.5", "--compare", "simple"),
        ("--onnxrt", "--onnxrt", "--sequential-runners", "--warm-up", "2", "--use-subprocess"),
    ],
)  # fmt: skip
def test_onnx_runtime_commands_give_polygraphys_verdict(model, tmp_path, args):
    _same_verdict(model, tmp_path, args, 0)


def test_a_mismatch_fails_both_and_fail_fast_stops_at_the_first_failing_iteration(model, tmp_path):
    golden = tmp_path / "golden.json"
    saved = polygraphy(model, "--onnxrt", *SHAPES, "--iterations", "3", "--save-outputs", golden, cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    args = ("--onnxrt", *SHAPES, "--seed", "2", "--load-outputs", golden)
    _same_verdict(model, tmp_path, args, 1)
    theirs, ours = _same_verdict(model, tmp_path, (*args, "--fail-fast"), 1)
    assert theirs.stdout.count("[I] Iteration: ") == 1  # polygraphy compared one iteration only; so do we
    assert "1 iteration, onnxrt vs golden" in ours.stdout and "1/1" in ours.stdout
    assert "--fail-fast: stopped at the first failing iteration, 1 of 3 compared" in ours.stdout


def test_exclude_outputs_leave_tensors_out_of_mark_all(tmp_path):
    from conftest import make_small_model

    model = make_small_model(tmp_path / "m.onnx")
    args = ("--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all", "--onnx-exclude-outputs", "pre")
    _, ours = _same_verdict(model, tmp_path, args, 0)
    assert "per-layer (onnxrt vs onnxrt-reference, 3 tensors in node order; diagnostics only)" in ours.stdout
    named = run_cli("run", model, "--onnxrt", "--onnxrt", "--onnx-outputs", "nosuch", "--junit", "j", cwd=tmp_path)
    assert named.returncode == 2
    assert (
        named.stderr.strip().splitlines()[-1]
        == "accuracy-gate: error: --onnx-outputs: 'nosuch' matches no tensor of m.onnx."
    )
    alone = run_cli("run", model, "--onnxrt", "--onnx-exclude-outputs", "pre", "--onnxrt", "--junit", "j", cwd=tmp_path)
    assert "--onnx-exclude-outputs leaves tensors out of 'mark all'" in alone.stderr


def test_validate_checks_inf_as_polygraphy(tmp_path):
    import onnx
    from onnx import TensorProto, helper

    # y = 1 / x: an input of 0 gives Inf (no NaN).
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    graph = helper.make_graph([helper.make_node("Div", ["one", "x"], ["y"])], "reciprocal", [x], [y], [one])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    proto.ir_version = 8
    model = tmp_path / "reciprocal.onnx"
    onnx.save(proto, model)
    from gate.comparator.serde import save_inputs

    save_inputs([{"x": np.array([0.0, 2.0], np.float32)}], tmp_path / "in.json")
    theirs = polygraphy(model, "--onnxrt", "--load-inputs", "in.json", "--validate", cwd=tmp_path)
    assert theirs.returncode != 0
    ours = run_cli("run", model, "--onnxrt", "--load-inputs", "in.json", "--validate", "--junit", "j", cwd=tmp_path)
    assert ours.returncode == 2 and "output 'y' contains Inf" in ours.stderr
    assert run_cli("run", model, "--onnxrt", "--load-inputs", "in.json", "--junit", "j", cwd=tmp_path).returncode == 0


@pytest.mark.parametrize(
    "args, line",
    [
        (("--onnxrt", "--bogus"), "run: unrecognized arguments: --bogus (see 'accuracy-gate run --help')."),
        (("--onnxrt", "--compare", "l3"), "--compare-func: unknown compare function 'l3'"),
        (("--onnxrt", "--data-loader-script", "dl.py"), "--data-loader-script is not applicable: accuracy-gate runs"),
        (("--onnxrt", "--no-shape-check"), "--no-shape-check is not applicable: every output must have the golden"),
        (("--onnxrt", "--save-engine", "e.plan"), "--save-engine is not applicable: engines are kept in the engine"),
        (("--trt", "--onnxrt", "--pool-limit", "dla_local_dram:1e9"), "--pool-limit: pool 'dla_local_dram' is not"),
        (("--onnxrt", "--graph-optimization-level", "ORT_ENABLE_LAYOUT"), "argument --graph-optimization-level:"),
        (("--onnxrt", "--providers", "nosuch"), "Requested provider was: nosuch"),
        (("--onnxrt", "--onnxrt", "--onnx-outputs", "mark", "all", "Y"), "--onnx-outputs: 'mark all' marks every"),
    ],
)
def test_flag_mistakes_are_one_line_naming_the_flag(model, tmp_path, args, line):
    proc = run_cli("run", model, *args, "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("accuracy-gate: error: ") and line in last, last
    assert "accuracy-gate: error: accuracy-gate" not in last


def test_polygraphys_aliases_read_the_same_values(model, tmp_path):
    from gate.comparator.serde import save_inputs

    save_inputs([{"X": np.full((1, 2, 3, 5), 0.5, np.float32)}], tmp_path / "in.json")
    proc = run_cli("run", model, "--onnxrt", "--onnxrt", "--load-input-data", tmp_path / "in.json", "--providers",
                   "cpu", "--graph-optimization-level", "ORT_DISABLE_ALL", "--save-results", tmp_path / "o.json",
                   "--junit", tmp_path / "j.xml", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"inputs: {tmp_path / 'in.json'}: X float32 [1,2,3,5]" in proc.stdout
    assert (tmp_path / "o.json").is_file()
    shapes = run_cli("run", model, "--onnxrt", "--inputs", "X:[1,2,3,5]", "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert "inputs: synthetic inputs, --seed 1: X float32 [1,2,3,5]" in shapes.stdout, shapes.stderr


def test_run_help_lists_every_flag_of_the_table():
    from gate import options

    proc = run_cli("run", "--help")
    expected = {flag for option in options.OPTIONS if "run" in option.commands for flag in option.flags}
    expected |= {flag for option in options.OPTIONS for flag in option.flags_for.get("run", ())}
    missing = [flag for flag in expected if flag.startswith("-") and flag not in proc.stdout]
    assert proc.returncode == 0 and missing == []
    for flag in ("--fail-fast", "--save-outputs", "--onnx-outputs", "--providers", "--pool-limit", "--inputs", "-q"):
        assert flag in proc.stdout


def test_a_per_output_flag_for_an_output_the_model_lacks_names_the_flag_not_gate_toml(model, tmp_path):
    from conftest import EXAMPLE

    ours = run_cli("run", model, "--onnxrt", "--onnxrt", "--atol", "logits:1e-3", "--junit", "j", cwd=tmp_path)
    assert ours.stderr.strip().splitlines()[-1] == (
        "accuracy-gate: error: --atol logits:0.001: dynamic_identity.onnx has no output 'logits'; its outputs are "
        "['Y']."
    )
    checked = run_cli("check", EXAMPLE / "gate.toml", "--rtol", "logits:1e-3", "--junit", tmp_path / "j.xml",
                      "--root", "/")  # fmt: skip
    last = checked.stderr.strip().splitlines()[-1]
    assert checked.returncode == 2 and last.startswith("accuracy-gate: error: --rtol logits:0.001: model.onnx has no")
    assert "gate.toml" not in last


def _polygraphy_stats(text: str, kind: str) -> dict:
    import re

    line = next(line for line in text.splitlines() if f"{kind} Difference | Stats:" in line)
    return dict(re.findall(r"(mean|std-dev|median|max)=([-+0-9.e]+)", line))


def test_the_failure_report_has_polygraphys_statistics_and_q_keeps_one_line_per_output(model, tmp_path):
    golden = tmp_path / "golden.json"
    assert polygraphy(model, "--onnxrt", *SHAPES, "--save-outputs", golden, cwd=tmp_path).returncode == 0
    args = ("--onnxrt", *SHAPES, "--seed", "2", "--load-outputs", golden)
    theirs, ours = _same_verdict(model, tmp_path, args, 1)
    for kind, label in (("Absolute", "abs error"), ("Relative", "rel error")):
        stats = _polygraphy_stats(theirs.stdout, kind)
        line = next(line for line in ours.stdout.splitlines() if line.startswith(f"    {label} in iteration 0: mean "))
        assert line == (
            f"    {label} in iteration 0: mean {stats['mean']}, median {stats['median']}, "
            f"max {stats['max'].rstrip('0')}, std {stats['std-dev']}"
        )
    assert "minimum tolerance to pass (elemwise): atol >= 0.90298 or rtol >= 4804.8" in ours.stdout
    assert "out of tolerance in iteration 0: 32 of 32 elements (100%)" in ours.stdout
    assert "element [0, 1, 1, 1] (onnxrt 0.0652865 vs golden 0.9682616, abs error 0.90298" in ours.stdout
    bars = [line for line in ours.stdout.splitlines() if line.startswith("      [")]
    assert len(bars) == 10 and sum(int(line.split("]")[1].split()[0]) for line in bars) == 32
    quiet = run_cli("run", model, *args, "-q", "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert quiet.returncode == 1 and "minimum tolerance" not in quiet.stdout and "histogram" not in quiet.stdout
    assert [line for line in quiet.stdout.splitlines() if line.startswith("Y ")] != []
    verbose = run_cli("run", model, "--onnxrt", "--onnxrt", *SHAPES, "-v", "--junit", tmp_path / "j.xml", cwd=tmp_path)
    assert verbose.returncode == 0 and "minimum tolerance to pass (elemwise): atol >= 0 or rtol >= 0" in verbose.stdout


def test_the_readme_table_names_every_polygraphy_run_flag_that_run_takes():
    import re

    from gate.cli import build_parser

    from conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## `polygraphy run` flags in `accuracy-gate run`", 1)[1].split("\n## ", 1)[0]
    help_text = subprocess.run([POLYGRAPHY, "run", "--help"], capture_output=True, text=True, timeout=120).stdout
    theirs = set(re.findall(r"^  (?:-\w, )?(--[a-z0-9-]+)", help_text, re.M))
    ours = {flag for action in build_parser().commands["run"]._actions for flag in action.option_strings}
    missing = sorted(flag for flag in theirs & ours if f"`{flag}" not in table and flag != "--help")
    assert missing == []


def test_saving_never_writes_over_the_model_or_the_loaded_data(model, tmp_path):
    before = model.read_bytes()
    for args in (("--save-outputs", model), ("--save-inputs", model.parent)):
        proc = run_cli("run", model, "--onnxrt", *args, "--junit", tmp_path / "j.xml", cwd=tmp_path)
        assert proc.returncode == 2 and "would write over the model or the data this run reads" in proc.stderr
    assert model.read_bytes() == before


def test_no_flag_the_readme_calls_not_available_is_taken_by_run():
    """The table listed --index-tolerance, --l2-threshold, --cosine-similarity-threshold and the psnr/snr
    thresholds as "not available" while `run` takes them; a flag in a *not available* row must be one
    `run` refuses, and the threshold flags that `run` takes are listed as taken."""
    import re

    from gate.cli import build_parser

    from conftest import ROOT

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## `polygraphy run` flags in `accuracy-gate run`", 1)[1].split("\n## ", 1)[0]
    ours = {flag for action in build_parser().commands["run"]._actions for flag in action.option_strings}
    rows = [
        line for line in table.splitlines() if line.startswith("| ") and line.rstrip().endswith("| not available |")
    ]
    assert rows
    flags = {flag for row in rows for flag in re.findall(r"`(--[a-z0-9-]+)", row)}
    assert sorted(flags & ours) == []
    taken = (
        "--index-tolerance",
        "--cosine-similarity-threshold",
        "--l2-threshold",
        "--psnr-threshold",
        "--snr-threshold",
    )
    assert set(taken) <= ours
    row = next(line for line in table.splitlines() if line.startswith("| `--index-tolerance`"))
    assert all(f"`{flag}`" in row for flag in taken) and "| same" in row
