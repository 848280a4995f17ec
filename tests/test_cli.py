"""The main job through the CLI, as a user runs it: the shipped real model passes, a perturbed or
mismatched golden set regresses (exit 1), missing data or bad config cannot evaluate (exit 2)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from junitparser import Error, Failure, JUnitXml

from conftest import (
    EXAMPLE,
    EXAMPLE_OUTPUT,
    make_nan_gate,
    make_small_model,
    perturb_golden,
    recorded_case,
    run_cli,
    write_gate_toml,
)


def one_line_error(proc) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def small_case(folder, x, golden):
    """The generated model, one stored input ``x`` and one golden iteration; returns gate.toml."""
    make_small_model(folder / "m.onnx")
    (folder / "inputs").mkdir()
    (folder / "golden").mkdir()
    np.savez(folder / "inputs" / "0.npz", x=x)
    np.savez(folder / "golden" / "0.npz", **golden)
    return write_gate_toml(folder, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')


def test_shipped_example_passes(tmp_path):
    # From a working directory outside the config's folder: [report] junit names the default path there.
    junit = tmp_path / "accuracy-gate-junit.xml"
    proc = run_cli("check", EXAMPLE / "gate.toml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.rstrip().endswith("JUnit: accuracy-gate-junit.xml")
    assert EXAMPLE_OUTPUT in proc.stdout
    assert "8 iterations" in proc.stdout and "PASSED" in proc.stdout
    xml = JUnitXml.fromfile(str(junit))
    suites = list(xml)
    assert len(suites) == 1 and suites[0].name == "onnxrt vs golden"
    assert suites[0].tests == 1 and suites[0].failures == 0 and suites[0].errors == 0
    cases = list(suites[0])
    assert [c.name for c in cases] == [f"model.onnx/{EXAMPLE_OUTPUT}"] and cases[0].is_passed
    props = {p.name: p.value for p in suites[0].properties()}
    assert props["execution_providers"] == "CPUExecutionProvider"
    assert len(props["model_sha256"]) == 64 and props["iterations"] == "8"
    assert {"onnxruntime_version", "numpy_version", "accuracy_gate_version"} <= set(props)


def test_perturbed_golden_regresses_and_names_the_output(example, tmp_path):
    perturb_golden(example / "data" / "test_data_set_5" / "output_0.pb")
    junit = example / "junit.xml"
    proc = run_cli("check", example / "gate.toml", "--junit", junit)
    assert proc.returncode == 1, proc.stderr
    assert f"REGRESSED: 1 of 1 outputs out of tolerance: '{EXAMPLE_OUTPUT}'" in proc.stdout
    case = next(iter(next(iter(JUnitXml.fromfile(str(junit))))))
    (failure,) = [r for r in case.result if isinstance(r, Failure)]
    assert "at iteration 5, element [0, 0]" in failure.message
    assert "1/8 iterations failed" in failure.message
    assert "worst max abs error 0.01 (atol 1e-05)" in failure.message


def test_zero_tolerance_against_golden_from_another_session_setting(example):
    # Golden recorded with graph optimizations disabled differs by ~1e-6 from the default session.
    proc = run_cli("record", example / "gate.toml", "--force", "--graph-optimization-level", "disable")
    assert proc.returncode == 0, proc.stderr
    assert run_cli("check", example / "gate.toml", "--junit", example / "j.xml").returncode == 0
    proc = run_cli("check", example / "gate.toml", "--atol", "0", "--rtol", "0", "--junit", example / "j.xml")
    assert proc.returncode == 1
    assert EXAMPLE_OUTPUT in proc.stdout and "FAIL" in proc.stdout


def test_removed_golden_file_cannot_evaluate(example):
    (example / "data" / "test_data_set_3" / "output_0.pb").unlink()
    proc = run_cli("check", example / "gate.toml", "--junit", example / "j.xml")
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line == (
        f"accuracy-gate: error: stopped after 3 of 8 iterations: {example}/data/test_data_set_3/output_0.pb: "
        f"file not found (output '{EXAMPLE_OUTPUT}')."
    )
    # Nothing lost: the three iterations compared before the error are reported, and JUnit exists.
    assert "0/3" in proc.stdout
    suite = next(iter(JUnitXml.fromfile(str(example / "j.xml"))))
    assert suite.tests == 2 and suite.errors == 1 and suite.failures == 0


def test_record_refuses_to_overwrite(example):
    proc = run_cli("record", example / "gate.toml")
    assert proc.returncode == 2
    assert "golden outputs already exist (8 files); pass --force" in one_line_error(proc)
    assert run_cli("record", example / "gate.toml", "--force").returncode == 0


def test_npz_layout_record_and_check(tmp_path):
    model = make_small_model(tmp_path / "m.onnx")
    rng = np.random.default_rng(1)
    (tmp_path / "inputs").mkdir()
    for i in range(3):
        np.savez(tmp_path / "inputs" / f"{i:03d}.npz", x=rng.standard_normal((2, 64)).astype(np.float32))
    cfg = write_gate_toml(tmp_path, f'model = "{model.name}"\ninputs = "inputs"\ngolden = "golden"\n')
    assert run_cli("record", cfg).returncode == 0
    assert sorted(p.name for p in (tmp_path / "golden").iterdir()) == ["000.npz", "001.npz", "002.npz"]
    proc = run_cli("check", cfg, "--check-error-stat", "max", "s:mean", "--atol", "1e-6", "--junit", tmp_path / "j")
    assert proc.returncode == 0, proc.stderr
    assert "y       max" in proc.stdout and "s       mean" in proc.stdout
    np.savez(tmp_path / "golden" / "001.npz", y=np.zeros((2, 64), np.float32), s=np.zeros(2, np.float32))
    proc = run_cli("check", cfg, "--junit", tmp_path / "j")
    assert proc.returncode == 1 and "2 of 2 outputs out of tolerance" in proc.stdout


def test_shape_mismatch_cannot_evaluate(tmp_path):
    cfg = small_case(
        tmp_path, np.ones((2, 64), np.float32), {"y": np.ones((1, 64), np.float32), "s": np.ones(2, np.float32)}
    )
    junit = tmp_path / "j.xml"
    proc = run_cli("check", cfg, "--junit", junit)
    assert proc.returncode == 2
    assert "could not compare 'y' (has shape (2, 64) but the reference has shape (1, 64) at iteration 0" in proc.stdout
    errors = [r for case in next(iter(JUnitXml.fromfile(str(junit)))) for r in case.result if isinstance(r, Error)]
    assert len(errors) == 1


def test_golden_count_mismatch_names_both_counts(tmp_path):
    model = make_small_model(tmp_path / "m.onnx")
    (tmp_path / "inputs").mkdir()
    for i in range(3):
        np.savez(tmp_path / "inputs" / f"{i}.npz", x=np.ones((1, 64), np.float32))
    cfg = write_gate_toml(tmp_path, f'model = "{model.name}"\ninputs = "inputs"\ngolden = "golden"\n')
    assert run_cli("record", cfg).returncode == 0
    (tmp_path / "golden" / "2.npz").unlink()
    proc = run_cli("check", cfg)
    assert proc.returncode == 2
    assert "2 golden iterations for 3 stored inputs" in one_line_error(proc)


def test_golden_dtype_that_disagrees_with_the_model_cannot_evaluate(tmp_path):
    # The comparator compares in the wider type (and says so); the gate treats golden data stored in
    # another dtype than the model produces as bad golden data: exit 2, naming the output.
    make_small_model(tmp_path / "m.onnx")
    (tmp_path / "inputs").mkdir()
    np.savez(tmp_path / "inputs" / "0.npz", x=np.ones((1, 64), np.float32))
    cfg = write_gate_toml(tmp_path, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    assert run_cli("record", cfg).returncode == 0
    golden = dict(np.load(tmp_path / "golden" / "0.npz"))
    golden["y"] = golden["y"].astype(np.float64) + 1.0  # wrong dtype and wrong values
    np.savez(tmp_path / "golden" / "0.npz", **golden)
    junit = tmp_path / "j.xml"
    proc = run_cli("check", cfg, "--junit", junit)
    assert proc.returncode == 2
    assert "could not compare 'y' (is float64 in the golden outputs but onnxrt produces float32" in proc.stdout
    (error,) = [r for case in next(iter(JUnitXml.fromfile(str(junit)))) for r in case.result]
    assert isinstance(error, Error) and "is float64 in the golden outputs" in error.message


def test_cli_tolerances_merge_over_gate_toml_and_split_like_the_readme_says(tmp_path):
    from gate.cli import build_parser, overrides_from_args
    from gate.config import load_config
    from gate.errors import GateError

    make_small_model(tmp_path / "m.onnx")
    cfg = write_gate_toml(
        tmp_path, 'model = "m.onnx"\ninputs = "i"\n[compare]\natol = { "" = 0.0, "s" = 1e-4 }\nrtol = 0.0\n'
    )
    args = build_parser().parse_args(["check", str(cfg), "--atol", "y:1e-3,a:b:2", "--atol", "5e-6"])
    loaded = load_config(cfg, overrides_from_args(args))
    assert loaded.atol == {"": 5e-6, "s": 1e-4, "y": 1e-3, "a:b": 2.0}
    assert loaded.rtol == 0.0
    args = build_parser().parse_args(["check", str(cfg), "--atol", "y:1", "y:2"])
    with pytest.raises(GateError, match="--atol: output 'y' is given twice"):
        overrides_from_args(args)


@pytest.mark.parametrize(
    "config, args, message",
    [
        # gate.toml's bad entry stays gate.toml's, whatever flags set the other outputs
        ('[compare]\natol = { "" = 1e-5, "s" = -1 }\n', ("--atol", "1e-3"),
         "{cfg}: 'atol' must be a non-negative finite number, got -1 (output 's')."),
        # a flag's entry for an output is the flag's, over a good one in gate.toml
        ('[compare]\natol = { "" = 1e-5, "s" = 1e-4 }\n', ("--atol", "s:-1"),
         "--atol must be a non-negative finite number, got -1.0 (output 's')."),
        # an infinite tolerance would pass every finite output
        ("[compare]\natol = inf\n", (), "{cfg}: 'atol' must be a non-negative finite number, got inf."),
        ("[compare]\nrtol = 1e400\n", (), "{cfg}: 'rtol' must be a non-negative finite number, got inf."),
        ('[compare]\natol = { "" = 1e-5, "s" = inf }\n', ("--atol", "1e-3"),
         "{cfg}: 'atol' must be a non-negative finite number, got inf (output 's')."),
        ("", ("--rtol", "1e-3", "y:inf"), "--rtol must be a non-negative finite number, got inf (output 'y')."),
        ('[compare]\ncheck_average = true\n', ("--check-error-stat", "y:max"),
         "--check-error-stat: check_average needs a default check_error_stat (an entry without an output name, "
         "e.g. max): outputs not listed would be checked elemwise, which cannot be averaged."),
        ('[compare]\ncheck_average = true\n', ("--atol", "0"),
         "{cfg}: check_average needs check_error_stat max, mean, median or quantile, not elemwise (for the default)."),
        ('runners = ["tensorrt"]\n', ("--rtol", "0"), "{cfg}: unknown runner 'tensorrt'; available: onnxrt, trt."),
        ("", ("--runners", "trt", "onnx"), "--runners: unknown runner 'onnx'; available: onnxrt, trt."),
    ],
)  # fmt: skip
def test_a_bad_value_names_the_flag_that_set_it_or_gate_toml(tmp_path, config, args, message):
    cfg = write_gate_toml(tmp_path, 'model = "m.onnx"\ninputs = "inputs"\n' + config)
    proc = run_cli("check", cfg, *args)
    assert proc.returncode == 2
    assert one_line_error(proc) == "accuracy-gate: error: " + message.format(cfg=cfg)


def test_a_model_flag_outside_the_root_names_the_flag(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    cfg = write_gate_toml(project, 'model = "m.onnx"\ninputs = "inputs"\n')
    for command in ("check", "record"):
        proc = run_cli(command, cfg, "--model", tmp_path / "other.onnx")
        assert proc.returncode == 2
        assert one_line_error(proc) == (
            f"accuracy-gate: error: {tmp_path}/other.onnx: --model resolves outside {project}; paths must stay "
            "inside it."
        )


def test_per_output_tolerance_for_an_output_the_model_lacks(tmp_path):
    cfg = small_case(
        tmp_path, np.ones((1, 64), np.float32), {"y": np.ones((1, 64), np.float32), "s": np.ones(1, np.float32)}
    )
    proc = run_cli("check", cfg, "--atol", "1e-3", "outptu:0.5")
    assert proc.returncode == 2
    assert "--atol outptu:0.5: m.onnx has no output 'outptu'; its outputs are ['y', 's']" in one_line_error(proc)


def test_record_never_touches_inputs_and_is_atomic(tmp_path):
    make_small_model(tmp_path / "m.onnx")
    (tmp_path / "data").mkdir()
    for i in range(3):
        np.savez(tmp_path / "data" / f"{i:03d}.npz", x=np.ones((1, 64), np.float32))
    cfg = write_gate_toml(tmp_path, 'model = "m.onnx"\ninputs = "data"\n')  # golden defaults to inputs
    for args in ((), ("--force",)):
        proc = run_cli("record", cfg, *args)
        assert proc.returncode == 2
        assert "golden outputs in the npz layout need a folder of their own" in one_line_error(proc)
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["000.npz", "001.npz", "002.npz"]
    cfg = write_gate_toml(tmp_path, 'model = "m.onnx"\ninputs = "data"\ngolden = "golden"\n')
    assert run_cli("record", cfg).returncode == 0
    before = {p.name: p.read_bytes() for p in (tmp_path / "golden").iterdir()}
    np.savez(tmp_path / "data" / "002.npz", x=np.full((1, 64), 0.1, np.float64))  # fails at iteration 2
    proc = run_cli("record", cfg, "--force")
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith(f"accuracy-gate: error: iteration 2 ({tmp_path}/data/002.npz): ")
    assert {p.name: p.read_bytes() for p in (tmp_path / "golden").iterdir()} == before  # old golden kept
    assert not list(tmp_path.glob(".golden-*"))
    proc = run_cli("record", cfg, "--layout", "onnx-zoo")  # another layout's golden files count too
    assert proc.returncode == 2 and "golden outputs already exist (3 files)" in one_line_error(proc)


def test_check_before_record_says_to_record(example):
    for pb in example.glob("data/test_data_set_*/output_0.pb"):
        pb.unlink()
    proc = run_cli("check", example / "gate.toml")
    assert proc.returncode == 2
    assert f"no golden outputs yet; record them with 'accuracy-gate record {example}/gate.toml'" in one_line_error(proc)


def make_gather_model(path):
    """y = table[ids]: onnxruntime raises when an index is out of range."""
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"])],
        "gather",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [table],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def gather_golden_set_failing_at_2(tmp_path):
    """The Gather model with 5 recorded iterations, whose stored input 2 is then made out of range
    (onnxruntime raises there); returns the gate.toml path."""
    make_gather_model(tmp_path / "m.onnx")
    (tmp_path / "inputs").mkdir()
    for i in range(5):
        np.savez(tmp_path / "inputs" / f"{i}.npz", ids=np.array([i, 9 - i], np.int64))
    cfg = write_gate_toml(tmp_path, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    assert run_cli("record", cfg).returncode == 0
    np.savez(tmp_path / "inputs" / "2.npz", ids=np.array([1, 99], np.int64))  # out of range for the table
    return cfg


def test_backend_raising_at_iteration_k_keeps_what_was_compared(tmp_path):
    cfg = gather_golden_set_failing_at_2(tmp_path)
    junit, summary = tmp_path / "j.xml", tmp_path / "summary.md"
    proc = run_cli("check", cfg, "--junit", junit, "--markdown", summary)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line.startswith(f"accuracy-gate: error: stopped after 2 of 5 iterations: iteration 2 (inputs {tmp_path}")
    assert "2.npz" in line and "onnxruntime failed during inference" in line
    suite = next(iter(JUnitXml.fromfile(str(junit))))
    cases = list(suite)
    assert [c.name for c in cases] == ["m.onnx/y", "m.onnx/iteration 2"]
    assert cases[0].is_passed and "iterations=2 " in cases[0].system_out
    (error,) = cases[1].result
    assert isinstance(error, Error) and "stopped after 2 of 5 iterations" in error.message and "2.npz" in error.message
    text = summary.read_text(encoding="utf-8")
    assert "stopped after 2 of 5 iterations" in text and "2.npz" in text


def test_paths_cannot_escape_the_config_folder_or_the_data_folder(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    make_small_model(tmp_path / "outside.onnx")
    make_small_model(project / "m.onnx")
    (project / "inputs").mkdir()
    np.savez(project / "inputs" / "0.npz", x=np.ones((1, 64), np.float32))
    for model in ("../outside.onnx", str(tmp_path / "outside.onnx")):
        cfg = write_gate_toml(project, f'model = "{model}"\ninputs = "inputs"\n')
        proc = run_cli("check", cfg)
        assert proc.returncode == 2
        assert f"'model' resolves outside {project}; paths must stay inside it" in one_line_error(proc)
    (project / "link.onnx").symlink_to(tmp_path / "outside.onnx")
    cfg = write_gate_toml(project, 'model = "link.onnx"\ninputs = "inputs"\n')
    assert "resolves outside" in one_line_error(run_cli("check", cfg)) and "(through a symlink)" in one_line_error(
        run_cli("check", cfg)
    )
    widened = run_cli("check", cfg, "--root", tmp_path)  # --root widens the confinement
    assert "resolves outside" not in widened.stderr
    assert "golden outputs in the npz layout need a folder of their own" in widened.stderr
    # A stored iteration that is a symlink to a file outside the data folder is refused too.
    np.savez(tmp_path / "secret.npz", x=np.ones((1, 64), np.float32))
    (project / "inputs" / "1.npz").symlink_to(tmp_path / "secret.npz")
    cfg = write_gate_toml(project, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    proc = run_cli("record", cfg)
    assert proc.returncode == 2
    assert f"{project}/inputs/1.npz: a stored iteration resolves outside {project}/inputs" in one_line_error(proc)


def test_validate_stops_at_a_nan_output_naming_it(tmp_path):
    cfg = make_nan_gate(tmp_path)
    assert run_cli("check", cfg).returncode == 1  # without validate a NaN is an accuracy failure
    proc = run_cli("check", cfg, "--validate", "--junit", tmp_path / "j.xml")
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "stopped after 1 of 3 iterations" in line and "1.npz" in line
    assert "runner 'onnxrt', output 'y' contains NaN" in line


def test_progress_lines_for_long_jobs(example, monkeypatch, capsys):
    from gate import job, stream_progress
    from gate.config import load_config

    monkeypatch.setattr(stream_progress, "PROGRESS_INTERVAL_S", 0.0)  # a line after every iteration
    result = job.check(load_config(example / "gate.toml"))
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("progress: ")]
    assert result.status == "passed" and len(lines) == 8
    assert lines[0].startswith("progress: 1/8 iterations (12%), ") and " it/s, ETA " in lines[0]
    assert lines[-1].startswith("progress: 8/8 iterations (100%)") and lines[-1].endswith("ETA 0 s")
    assert all("\r" not in line for line in lines)
    assert job.progress_line(0, 10, 0.0) == "progress: 0/10 iterations (0%), 0.0 it/s, ETA unknown"


def test_a_config_saved_with_a_byte_order_mark_is_read(tmp_path):
    cfg = recorded_case(tmp_path)
    cfg.write_bytes("\ufeff".encode() + cfg.read_bytes())
    proc = run_cli("check", cfg, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "PASSED: 2 of 2 outputs within tolerance over 2 iterations" in proc.stdout
    cfg.write_bytes("\ufeff".encode() + b"# caf\xe9\n")  # a wrong byte after the mark is counted from the file's start
    assert one_line_error(run_cli("check", cfg)) == (
        f"accuracy-gate: error: {cfg}: not UTF-8 text (byte 8); save the config as UTF-8."
    )


# --- report paths: confined like every other path, never over what the gate reads ---------------

REPORT_TAIL = "; reports must stay out of the files and folders the gate reads."


def files_under(folder) -> dict:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_report_junit_in_gate_toml_cannot_leave_the_root(tmp_path):
    project = tmp_path / "ci" / "project"
    cfg = recorded_case(project)
    (tmp_path / "elsewhere").mkdir()
    (project / "reports").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    base = cfg.read_text()
    for junit, via in (
        ("../../escape.xml", ""),
        (str(tmp_path / "abs.xml"), ""),
        ("reports/j.xml", " (through a symlink)"),
    ):
        write_gate_toml(project, base + f'[report]\njunit = "{junit}"\n')
        proc = run_cli("check", cfg, cwd=project)
        assert proc.returncode == 2
        assert one_line_error(proc) == (
            f"accuracy-gate: error: {junit}: 'report.junit' resolves outside {project}{via}; paths must stay inside it."
        )
    # Nothing written outside, and no error file anywhere else either (the JUnit path was refused).
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.xml")) == []
    write_gate_toml(project, base + '[report]\njunit = "../../escape.xml"\n')
    assert run_cli("check", cfg, "--root", tmp_path, cwd=project).returncode == 0  # --root widens it
    assert (tmp_path / "escape.xml").is_file()


def test_the_default_junit_path_is_written_from_any_working_directory(tmp_path):
    cfg = recorded_case(tmp_path / "project")
    work = tmp_path / "work"
    work.mkdir()
    proc = run_cli("check", cfg, cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert (work / "accuracy-gate-junit.xml").is_file()
    (work / "accuracy-gate-junit.xml").unlink()
    (work / "accuracy-gate-junit.xml").symlink_to(tmp_path / "elsewhere.xml")  # but not through a symlink:
    proc = run_cli("check", cfg, cwd=work)  # the link is replaced by the report, nothing goes where it led
    assert proc.returncode == 0, proc.stderr
    assert not (tmp_path / "elsewhere.xml").exists()
    assert not (work / "accuracy-gate-junit.xml").is_symlink() and (work / "accuracy-gate-junit.xml").is_file()
    (work / "accuracy-gate-junit.xml").unlink()
    proc = run_cli("check", cfg, "--shard", "1/2", cwd=work)  # the default partial result file too
    assert proc.returncode == 0, proc.stderr
    assert (work / "accuracy-gate-partial-1-of-2.json").is_file()


@pytest.mark.parametrize("flag", ["--junit", "--markdown", "--report", "--write-partial"])
def test_check_report_flags_cannot_leave_the_root(tmp_path, flag):
    project = tmp_path / "project"
    cfg = recorded_case(project)
    proc = run_cli("check", cfg, flag, tmp_path / "out", cwd=project)
    assert proc.returncode == 2
    assert one_line_error(proc) == (
        f"accuracy-gate: error: {tmp_path}/out: {flag} resolves outside {project}; paths must stay inside it."
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "config, flag, target, expected",
    [
        ("", "--report", "gate.toml", "--report would overwrite the config file"),
        ("", "--junit", "m.onnx", "--junit would overwrite the model"),
        ("", "--markdown", "inputs/report.md", "--markdown lies inside the stored inputs ({folder}/inputs)"),
        ("", "--write-partial", "golden/p.json", "--write-partial lies inside the golden outputs ({folder}/golden)"),
        ("", "--junit", "golden", "--junit would overwrite the golden outputs"),
        ('[report]\njunit = "m.onnx"\n', None, "m.onnx", "'report.junit' would overwrite the model"),
    ],
)
def test_report_paths_never_overwrite_what_the_gate_reads(tmp_path, config, flag, target, expected):
    cfg = recorded_case(tmp_path, extra=config)
    before = files_under(tmp_path)
    proc = run_cli("check", cfg, *([flag, target] if flag else []), cwd=tmp_path)
    assert proc.returncode == 2
    assert one_line_error(proc) == f"accuracy-gate: error: {target}: {expected.format(folder=tmp_path)}{REPORT_TAIL}"
    after = files_under(tmp_path)
    junit = after.pop(tmp_path / "accuracy-gate-junit.xml", None)
    assert after == before  # nothing the gate reads was touched
    # The error went to the default JUnit file unless the JUnit path itself was refused.
    assert (junit is None) == ("junit" in expected)


def error_case(path):
    """The one testcase of a JUnit file and its result: (name, Error)."""
    [suite] = JUnitXml.fromfile(str(path))
    [case] = suite
    [error] = case.result
    assert isinstance(error, Error) and error.type == "could-not-evaluate"
    return case.name, error.message


@pytest.mark.parametrize(
    "broken, message, model",
    [
        ('model = "m.onnx"\ninputs = [\n', "{cfg}: not valid TOML (Invalid value (at end of document)).", "gate.toml"),
        ("\ufeffmodle = 1\n", "{cfg}: unknown setting 'modle'; did you mean 'model'?", "gate.toml"),
        (
            'model = "gone.onnx"\ninputs = "inputs"\ngolden = "golden"\n',
            "{folder}/gone.onnx: model file not found.",
            "gone.onnx",
        ),
        (
            'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n[compare]\natol = inf\n',
            "{cfg}: 'atol' must be a non-negative finite number, got inf.",
            "gate.toml",
        ),
    ],
    ids=["not TOML", "unknown key", "missing model", "infinite atol"],
)
def test_an_error_before_a_result_replaces_the_reports_of_an_earlier_pass(tmp_path, broken, message, model):
    from gate.report.markdown import md_text

    cfg = recorded_case(tmp_path)
    flags = ("--junit", "out/j.xml", "--markdown", "out/m.md", "--report", "out/r.json")
    assert run_cli("check", cfg, *flags, cwd=tmp_path).returncode == 0  # green evidence
    write_gate_toml(tmp_path, broken)
    proc = run_cli("check", cfg, *flags, cwd=tmp_path)
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert line == "accuracy-gate: error: " + message.format(cfg=cfg, folder=tmp_path)
    name, text = error_case(tmp_path / "out" / "j.xml")
    assert (name, text) == (f"{model}/(no outputs)", line.removeprefix("accuracy-gate: error: "))
    markdown = (tmp_path / "out" / "m.md").read_text(encoding="utf-8")
    # The Markdown names files relative to the working directory (here tmp_path), as in the repository.
    assert f"**error (could not evaluate)**: {md_text(text.replace(f'{tmp_path}/', ''))}" in markdown
    assert str(tmp_path) not in markdown
    report = json.loads((tmp_path / "out" / "r.json").read_text(encoding="utf-8"))
    assert (report["status"], report["message"]) == ("error", text)
    assert proc.stdout.startswith("JUnit: ") and proc.stdout.rstrip().endswith("out/j.xml")  # nothing else on stdout


def test_an_error_goes_to_the_junit_path_of_gate_toml_once_it_is_known(tmp_path):
    cfg = recorded_case(tmp_path, extra='[report]\njunit = "reports/j.xml"\n')
    assert run_cli("check", cfg, cwd=tmp_path).returncode == 0
    write_gate_toml(tmp_path, cfg.read_text() + "[compare]\nrtol = 1e400\n")
    proc = run_cli("check", cfg, cwd=tmp_path)
    line = one_line_error(proc)
    assert line == f"accuracy-gate: error: {cfg}: 'rtol' must be a non-negative finite number, got inf."
    assert error_case(tmp_path / "reports" / "j.xml")[1] == line.removeprefix("accuracy-gate: error: ")
    assert not (tmp_path / "accuracy-gate-junit.xml").exists()


def test_an_unreadable_config_replaces_only_files_that_are_reports(tmp_path):
    # gate.toml cannot be read, so the gate cannot know its model: a report path that holds another
    # file (here the model) is left alone; one that holds an earlier report gets the error.
    cfg = recorded_case(tmp_path)
    assert run_cli("check", cfg, "--markdown", "m.md", cwd=tmp_path).returncode == 0
    model = (tmp_path / "m.onnx").read_bytes()
    cfg.write_bytes(b'model = "m.onnx"\n# caf\xe9\n')
    proc = run_cli("check", cfg, "--junit", "m.onnx", "--markdown", "m.md", cwd=tmp_path)
    assert one_line_error(proc) == f"accuracy-gate: error: {cfg}: not UTF-8 text (byte 22); save the config as UTF-8."
    assert (tmp_path / "m.onnx").read_bytes() == model
    assert "**error (could not evaluate)**" in (tmp_path / "m.md").read_text(encoding="utf-8")


def test_merge_report_paths_stay_inside_the_working_directory_and_off_the_partials(tmp_path):
    project = tmp_path / "project"
    cfg = recorded_case(project)
    for i in (1, 2):
        assert run_cli("check", cfg, "--shard", f"{i}/2", cwd=project).returncode == 0
    parts = ["accuracy-gate-partial-1-of-2.json", "accuracy-gate-partial-2-of-2.json"]
    before = files_under(project)
    proc = run_cli("merge", *parts, "--junit", tmp_path / "j.xml", cwd=project)
    assert one_line_error(proc) == (
        f"accuracy-gate: error: {tmp_path}/j.xml: --junit resolves outside {project}; paths must stay inside it."
    )
    proc = run_cli("merge", *parts, "--report", parts[0], cwd=project)
    assert one_line_error(proc) == (
        f"accuracy-gate: error: {parts[0]}: --report would overwrite the partial result files being merged"
        + REPORT_TAIL
    )
    before.pop(project / "accuracy-gate-junit.xml")
    assert {p: b for p, b in files_under(project).items() if p.name != "accuracy-gate-junit.xml"} == before
    proc = run_cli("merge", parts[0], "--junit", "merged.xml", cwd=project)  # a shard is missing
    line = one_line_error(proc)
    assert "missing shard 2/2" in line
    assert error_case(project / "merged.xml") == ("merge/(no outputs)", line.removeprefix("accuracy-gate: error: "))
    proc = run_cli("merge", *parts, "--junit", tmp_path / "j.xml", "--root", tmp_path, cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "j.xml").is_file()
