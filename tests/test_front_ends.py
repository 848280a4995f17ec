"""The CLI and the action are two front ends of one pipeline (``gate.pipeline``): for each rule they
share (report-path policy, path confinement, tolerance validation) the same case is run through
both, in process, and they must agree. The action runs with the environment a runner gives a Docker
action (no token, no comment: nothing here talks to GitHub)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from junitparser import Error, JUnitXml

from gate import action, cli

from conftest import ROOT, make_small_model, write_gate_toml

ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
TOML = 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n'


@pytest.fixture
def project(tmp_path, monkeypatch):
    """m.onnx, two stored inputs and their golden outputs in ``tmp_path/ws`` (the workspace and the
    working directory); returns the folder."""
    folder = tmp_path / "ws"
    folder.mkdir()
    monkeypatch.chdir(folder)
    make_small_model(folder / "m.onnx")
    (folder / "inputs").mkdir()
    for i in range(2):
        np.savez(folder / "inputs" / f"{i}.npz", x=np.full((1, 64), 0.5 * i, np.float32))
    write_gate_toml(folder, TOML)
    assert cli.main(["record", str(folder / "gate.toml")]) == 0
    return folder


def run_cli(folder, *args) -> int:
    return cli.main([args[0], str(folder / "gate.toml"), *map(str, args[1:])])


def run_action(folder, tmp_path, **inputs) -> int:
    """``gate.action.main`` with every declared input at its action.yml default (or empty) and ``inputs``."""
    env = {f"INPUT_{name.upper()}": str(spec.get("default", "")) for name, spec in ACTION["inputs"].items()}
    env = {key: ("" if "${{" in value else value) for key, value in env.items()}
    output, summary = tmp_path / "github_output", tmp_path / "step_summary"
    output.touch()
    summary.touch()
    env.update(
        {
            "INPUT_CONFIG": "gate.toml",
            "INPUT_COMMENT_MODE": "off",
            "GITHUB_WORKSPACE": str(folder),
            "GITHUB_OUTPUT": str(output),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_REPOSITORY": "octo/repo",
            "GITHUB_EVENT_NAME": "push",
        }
    )
    env.update({f"INPUT_{name.upper()}": value for name, value in inputs.items()})
    return action.main(env)


def junit_case(path) -> tuple[str, list]:
    [suite] = JUnitXml.fromfile(str(path))
    case = list(suite)[-1]
    return case.name, list(case.result)


def front_ends(folder, tmp_path):
    """``(name, run(cli_flags, action_inputs))`` for each front end."""
    return [
        ("cli", lambda flags, inputs: run_cli(folder, "check", *flags)),
        ("action", lambda flags, inputs: run_action(folder, tmp_path, **inputs)),
    ]


# --- the report-path policy ------------------------------------------------------------------------


@pytest.mark.parametrize("front", ["cli", "action"])
def test_an_early_error_replaces_the_green_junit_file_of_report_junit(project, tmp_path, front):
    """A bad flag or input stops the gate before gate.toml is loaded; its error still goes to the JUnit
    path the run would have used, gate.toml's ``[report] junit``, replacing the green file of the last
    run there (on main both front ends wrote it to the default path and left the green file)."""
    write_gate_toml(project, TOML + '[report]\njunit = "reports/j.xml"\n')
    run = dict(front_ends(project, tmp_path))[front]
    assert run([], {}) == 0
    assert junit_case(project / "reports" / "j.xml")[1] == []  # green
    assert run(["--atol", "abc"], {"atol": "abc"}) == 2
    name, [error] = junit_case(project / "reports" / "j.xml")
    assert isinstance(error, Error) and "abc" in error.message and name == "gate.toml/(no outputs)"
    assert not (project / "accuracy-gate-junit.xml").exists()


@pytest.mark.parametrize(
    "flag, name, target, refusal",
    [
        ("--report", "report_path", "m.onnx", "would overwrite the model"),
        ("--report", "report_path", "gate.toml", "would overwrite the config file"),
        ("--report", "report_path", "golden/0.npz", "lies inside the golden outputs"),
        ("--write-partial", "partial_path", "m.onnx", "would overwrite the model"),
        ("--write-partial", "partial_path", "inputs/0.npz", "lies inside the stored inputs"),
    ],
)
def test_report_paths_never_overwrite_what_the_gate_reads(project, tmp_path, capsys, flag, name, target, refusal):
    """On main the action's ``report_path`` / ``partial_path`` inputs overwrote the model, the config
    or a golden file; the CLI refused. Both refuse now, naming the flag or the input."""
    before = {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}
    shard = {"shard": "1/2"} if name == "partial_path" else {}
    assert run_cli(project, "check", flag, target) == 2
    assert f"{target}: {flag} {refusal}" in capsys.readouterr().err
    assert run_action(project, tmp_path, **{name: target}, **shard) == 2
    out = capsys.readouterr().out
    assert f"{target}: input `{name}` {refusal}" in out, out
    after = {p: p.read_bytes() for p in project.rglob("*") if p.is_file() and p in before}
    assert after == before


@pytest.mark.parametrize("front", ["cli", "action"])
def test_report_paths_stay_inside_the_confinement_root(project, tmp_path, capsys, front):
    outside = tmp_path / "outside.json"
    run = dict(front_ends(project, tmp_path))[front]
    assert run(["--report", outside], {"report_path": str(outside)}) == 2
    assert not outside.exists()
    text = capsys.readouterr()
    assert "outside" in text.out + text.err and str(project) in text.out + text.err


@pytest.mark.parametrize("front", ["cli", "action"])
def test_an_unreadable_config_leaves_a_file_that_is_no_report_alone(project, tmp_path, front):
    model = (project / "m.onnx").read_bytes()
    (project / "gate.toml").write_bytes(b'model = "m.onnx"\n# caf\xe9\n')
    run = dict(front_ends(project, tmp_path))[front]
    assert run(["--junit", "m.onnx"], {"junit_path": "m.onnx"}) == 2
    assert (project / "m.onnx").read_bytes() == model


def test_a_merge_never_writes_over_the_partial_files_it_merges(project, tmp_path, capsys):
    for i in (1, 2):
        assert run_cli(project, "check", "--shard", f"{i}/2") == 0
    part = project / "accuracy-gate-partial-1-of-2.json"
    before = part.read_bytes()
    assert (
        cli.main(["merge", str(part), str(project / "accuracy-gate-partial-2-of-2.json"), "--report", str(part)]) == 2
    )
    assert "--report would overwrite the partial result files being merged" in capsys.readouterr().err
    assert run_action(project, tmp_path, mode="merge", config="", partial_path=".", report_path=part.name) == 2
    assert "input `report_path` lies inside the partial result files being merged" in capsys.readouterr().out
    assert part.read_bytes() == before


# --- tolerance validation --------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["-1", "inf", "nan", "1e400", "y:-1e-3"])
def test_a_tolerance_out_of_range_is_refused_by_both(project, tmp_path, capsys, value):
    assert run_cli(project, "check", "--atol", value) == 2
    err = capsys.readouterr().err
    assert "--atol" in err and "non-negative finite number" in err
    assert run_action(project, tmp_path, atol=value) == 2
    report = json.loads((project / "accuracy-gate-report.json").read_text(encoding="utf-8"))
    assert "`atol`" in report["message"] and "non-negative finite number" in report["message"]


# --- path confinement ------------------------------------------------------------------------------


@pytest.mark.parametrize("front", ["cli", "action"])
def test_a_model_outside_the_root_is_refused_by_both(project, tmp_path, capsys, front):
    outside = tmp_path / "outside.onnx"
    outside.write_bytes((project / "m.onnx").read_bytes())
    run = dict(front_ends(project, tmp_path))[front]
    assert run(["--model", outside], {"model": str(outside)}) == 2
    text = capsys.readouterr()
    assert "outside" in text.out + text.err and str(project) in text.out + text.err
    name, [error] = junit_case(project / "accuracy-gate-junit.xml")  # the error is still reported
    assert isinstance(error, Error) and "outside" in error.message
