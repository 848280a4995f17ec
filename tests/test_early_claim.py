"""The early claim (``gate.early_claim``): before numpy, onnx or ONNX Runtime is imported, each report
file an earlier run left at this run's report paths holds this run's "running / could not evaluate"
claim, in the CLI and the action alike; the claim's bytes are the writers' own; it replaces only a
report of the same kind, inside the root, off every path the run reads, and creates nothing.
The order is observed with an audit hook (``sys.addaudithook``: each rename, the first heavy import)
in a real subprocess; files are read back with junitparser and json."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import junitparser
import pytest

from gate import cli, report_files
from gate.early_claim import DEFAULT_REPORT, UNFINISHED, claim_bytes, claim_for_action, claim_for_cli
from gate.options import DEFAULTS

from conftest import EXAMPLE, ROOT

HOOK = r"""
import os, sys
heavy = []
def hook(event, args):
    if event == "import" and not heavy and args[0].split(".")[0] in ("numpy", "onnx", "onnxruntime", "google"):
        heavy.append(args[0])
        sys.stderr.write(f"@@heavy {args[0]}\n")
    elif event == "os.rename":
        sys.stderr.write(f"@@rename {os.path.basename(os.fsdecode(args[1]))}\n")
sys.addaudithook(hook)
"""
CLAIM_HOOK = r"""
import os, sys
def hook(event, args):
    name = os.path.basename(os.fsdecode(args[0])) if event == "open" and isinstance(args[0], (str, bytes)) else ""
    if event == "open" and name.startswith(".") and name.endswith(".tmp"):
        sys.stderr.write(f"@@write {name.split('.')[1]}.{name.split('.')[2]}\n")
    elif event == "os.rename":
        sys.stderr.write(f"@@rename {os.path.basename(os.fsdecode(args[1]))}\n")
sys.addaudithook(hook)
"""
CLI = HOOK + "sys.argv = ['accuracy-gate', *sys.argv[1:]]\nfrom gate.cli import main\nsys.exit(main())\n"
ACTION = HOOK + f"import runpy\nrunpy.run_path({str(ROOT / 'entrypoint.py')!r}, run_name='__main__')\n"


def junit_error(path: Path) -> str:
    xml = junitparser.JUnitXml.fromfile(str(path))
    cases = [case for suite in ([xml] if isinstance(xml, junitparser.TestSuite) else xml) for case in suite]
    assert len(cases) == 1 and len(cases[0].result) == 1
    return str(cases[0].result[0].message)


@pytest.mark.parametrize("model", ["model.onnx", "resnet-50.v2.onnx", "ch_ppocr*cls.onnx", 'a&b<"c.onnx', "ü.onnx"])
@pytest.mark.parametrize("kind", ["junit", "markdown", "report", "partial"])
def test_claim_bytes_are_the_writers_bytes(kind, model):
    safe = all(c.isascii() and (c.isalnum() or c in ".-") for c in model)
    assert claim_bytes(kind, model) == report_files._unfinished_bytes(kind, model if safe else "model")


def test_the_action_default_report_path_is_the_option_tables():
    assert DEFAULT_REPORT == DEFAULTS["report_path"]


def passing_set(space: Path, out: Path) -> dict:
    """An earlier passing run's JUnit, Markdown, results and partial files in ``out``: ``name -> bytes``."""
    flags = ["--junit", out / "j.xml", "--markdown", out / "m.md", "--report", out / "r.json"]
    flags += ["--write-partial", out / "p.json", "--root", space]
    assert cli.main(["check", str(space / "gate.toml"), *map(str, flags)]) == 0
    return {path.name: path.read_bytes() for path in out.iterdir() if not path.name.startswith(".")}


def events(stderr: str) -> list[str]:
    return [line[2:] for line in stderr.splitlines() if line.startswith("@@")]


def test_cli_claims_an_earlier_passing_set_before_the_first_heavy_import(tmp_path):
    space = Path(shutil.copytree(EXAMPLE, tmp_path / "ws"))
    out = space / "out"
    out.mkdir()
    earlier = passing_set(space, out)
    flags = ["--junit", out / "j.xml", "--markdown", out / "m.md", "--report", out / "r.json"]
    flags += ["--write-partial", out / "p.json", "--root", space]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_WORKSPACE", None)
    args = [sys.executable, "-c", CLI, "check", str(space / "gate.toml"), *map(str, flags)]
    proc = subprocess.run(args, cwd=space, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = events(proc.stderr)
    heavy = next(i for i, event in enumerate(seen) if event.startswith("heavy "))
    assert sorted(seen[:heavy]) == ["rename j.xml", "rename m.md", "rename p.json", "rename r.json"], seen
    assert seen[heavy] in ("heavy numpy", "heavy onnx", "heavy google")
    # then the full claim and the final file: three renames of each, the last one this run's passing file
    assert {name: seen.count(f"rename {name}") for name in earlier} == dict.fromkeys(earlier, 3)
    assert json.loads((out / "r.json").read_text())["status"] == "passed"


def test_the_claim_writes_every_file_then_renames_them_one_right_after_the_other(tmp_path):
    """No earlier report at the paths (files that are no report: the early claim leaves them), so the
    full claim (``gate.report_files.claim``) replaces them: every file written, then the renames."""
    space = Path(shutil.copytree(EXAMPLE, tmp_path / "ws"))
    out = space / "out"
    out.mkdir()
    for name in ("j.xml", "m.md", "r.json", "p.json"):
        (out / name).write_text("not a report\n")
    flags = ["--junit", out / "j.xml", "--markdown", out / "m.md", "--report", out / "r.json"]
    flags += ["--write-partial", out / "p.json", "--root", space]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("GITHUB_WORKSPACE", None)
    code = CLAIM_HOOK + CLI.removeprefix(HOOK)
    args = [sys.executable, "-c", code, "check", str(space / "gate.toml"), *map(str, flags)]
    proc = subprocess.run(args, cwd=space, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = ("j.xml", "m.md", "r.json", "p.json")
    seen = [event for event in events(proc.stderr) if event.split(" ", 1)[1] in names]  # not the renderers' scratch
    assert seen[:8] == [f"write {n}" for n in names] + [f"rename {n}" for n in names], seen


def test_action_claims_an_earlier_passing_set_before_the_first_heavy_import(tmp_path):
    space = Path(shutil.copytree(EXAMPLE, tmp_path / "ws"))
    out = space / "out"
    out.mkdir()
    passing_set(space, out)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        GITHUB_WORKSPACE=str(space),
        GITHUB_OUTPUT=str(tmp_path / "output"),
        GITHUB_STEP_SUMMARY=str(tmp_path / "summary"),
        INPUT_CONFIG="gate.toml",
        INPUT_COMMENT_MODE="off",
        INPUT_JUNIT_PATH="out/j.xml",
        INPUT_REPORT_PATH="out/r.json",
    )
    args = [sys.executable, "-c", ACTION]
    proc = subprocess.run(args, cwd=space, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen = events(proc.stderr)
    heavy = next(i for i, event in enumerate(seen) if event.startswith("heavy "))
    assert sorted(seen[:heavy]) == ["rename j.xml", "rename r.json"], seen


def parse(*argv) -> object:
    return cli.build_parser().parse_args([str(a) for a in argv])


@pytest.fixture
def stale(tmp_path, monkeypatch):
    """An earlier passing set in ``tmp_path/ws/out`` (the example's workspace), cwd ``tmp_path/ws``."""
    space = Path(shutil.copytree(EXAMPLE, tmp_path / "ws"))
    out = space / "out"
    out.mkdir()
    earlier = passing_set(space, out)
    monkeypatch.chdir(space)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    return space, out, earlier


def flags_of(out: Path, *names) -> list:
    flag = {"j.xml": "--junit", "m.md": "--markdown", "r.json": "--report", "p.json": "--write-partial"}
    return [item for name in names for item in (flag[name], out / name)]


def test_cli_early_claim_replaces_each_earlier_report_with_the_claim(stale):
    space, out, earlier = stale
    (out / "j.xml").chmod(0o640)
    args = parse("check", space / "gate.toml", *flags_of(out, *earlier))
    assert sorted(Path(p).name for p in claim_for_cli(args)) == sorted(earlier)
    assert junit_error(out / "j.xml") == UNFINISHED
    assert json.loads((out / "r.json").read_text())["status"] == "error"
    assert json.loads((out / "p.json").read_text())["schema"] == "accuracy-gate-unfinished-run"
    assert (out / "m.md").read_bytes() == claim_bytes("markdown", "model.onnx")
    assert (out / "j.xml").stat().st_mode & 0o777 == 0o640  # the earlier file's mode
    assert sorted(p.name for p in out.iterdir()) == sorted(earlier)  # no temporary file left


def test_cli_early_claim_leaves_what_is_not_an_earlier_report_of_its_kind(stale, tmp_path):
    space, out, earlier = stale
    (out / "m.md").write_text("# my notes\n")  # not a report
    (out / "r.json").write_bytes(earlier["j.xml"])  # a report of another kind
    (out / "p.json").unlink()
    (out / "j.xml").unlink()
    (out / "j.xml").symlink_to(tmp_path / "elsewhere.xml")  # a dangling symlink
    args = parse("check", space / "gate.toml", *flags_of(out, "j.xml", "m.md", "r.json", "p.json"))
    assert claim_for_cli(args) == []
    assert (out / "m.md").read_text() == "# my notes\n" and (out / "r.json").read_bytes() == earlier["j.xml"]
    assert not (out / "p.json").exists() and not (tmp_path / "elsewhere.xml").exists()  # nothing created


def test_cli_early_claim_stays_inside_the_root_and_off_what_the_run_reads(stale, tmp_path):
    space, out, earlier = stale
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "j.xml").write_bytes(earlier["j.xml"])
    (space / "data" / "r.json").write_bytes(earlier["r.json"])  # inside the golden folder
    args = parse("check", space / "gate.toml", "--junit", outside / "j.xml", "--report", space / "data" / "r.json")
    assert claim_for_cli(args) == []
    args = parse("check", space / "gate.toml", "--report", out / "r.json", "--baseline", out / "r.json")
    assert claim_for_cli(args) == []  # the baseline is read
    args = parse("merge", out / "p.json", "--write-partial", out / "p.json", "--junit", out / "j.xml")
    assert [Path(p).name for p in claim_for_cli(args)] == ["j.xml"]  # merge reads its partial result files
    assert (outside / "j.xml").read_bytes() == earlier["j.xml"]
    assert (space / "data" / "r.json").read_bytes() == earlier["r.json"]
    assert (out / "r.json").read_bytes() == earlier["r.json"] and (out / "p.json").read_bytes() == earlier["p.json"]
    assert claim_for_cli(parse("record", space / "gate.toml")) == []


def test_cli_early_claim_finds_the_junit_path_of_gate_toml_and_the_shard_default(stale):
    space, _, earlier = stale
    (space / "accuracy-gate-junit.xml").write_bytes(earlier["j.xml"])  # [report] junit, in the working directory
    (space / "accuracy-gate-partial-2-of-3.json").write_bytes(earlier["p.json"])
    replaced = claim_for_cli(parse("check", space / "gate.toml", "--shard", "2/3"))
    assert sorted(replaced) == ["accuracy-gate-junit.xml", "accuracy-gate-partial-2-of-3.json"]
    assert junit_error(space / "accuracy-gate-junit.xml") == UNFINISHED


def action_env(space: Path, **inputs) -> dict:
    return {"GITHUB_WORKSPACE": str(space), **{f"INPUT_{k.upper()}": v for k, v in inputs.items()}}


def test_action_early_claim_per_mode(stale):
    space, out, earlier = stale
    shutil.copy(out / "r.json", space / DEFAULT_REPORT)
    env = action_env(space, config="gate.toml", junit_path="out/j.xml", shard="1/2", partial_path="out/p.json")
    assert sorted(Path(p).name for p in claim_for_action(env)) == sorted(["j.xml", DEFAULT_REPORT, "p.json"])
    (out / "j.xml").write_bytes(earlier["j.xml"])
    (out / "p.json").write_bytes(earlier["p.json"])
    (out / "r.json").write_bytes(earlier["r.json"])
    env = action_env(space, mode="merge", partial_path="out/p.json", junit_path="out/j.xml", report_path="out/r.json")
    assert sorted(Path(p).name for p in claim_for_action(env)) == ["j.xml", "r.json"]  # not the partials merged
    assert (out / "p.json").read_bytes() == earlier["p.json"]
    (out / "r.json").write_bytes(earlier["r.json"])
    env = action_env(space, mode="comment", report_path="out/r.json", junit_path="out/j.xml")
    assert claim_for_action(env) == []  # comment mode reads the results file and writes no report
    assert (out / "r.json").read_bytes() == earlier["r.json"]
    env = action_env(space, config="gate.toml", report_path="../elsewhere.json")
    (space.parent / "elsewhere.json").write_bytes(earlier["r.json"])
    claim_for_action(env)
    assert (space.parent / "elsewhere.json").read_bytes() == earlier["r.json"]  # outside the workspace


def test_help_imports_no_heavy_module():
    """``--help`` and a flag error return before numpy, onnx or ONNX Runtime is imported (lazy imports)."""
    code = (
        "import sys\nfrom gate.cli import main\n"
        "for argv in (['check', '--help'], ['run', '--help'], ['check', 'gate.toml', '--atoll', '1']):\n"
        "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'onnx', 'onnxruntime', 'google'}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.stdout.splitlines()[-1] == "[]", proc.stdout + proc.stderr


@pytest.mark.parametrize(
    ("text", "junit"),
    [
        ('model = "m.onnx"\n[report]\njunit = "out/junit.xml"\nruners=[\n', "out/junit.xml"),
        ("[ report ]  # reports\n  junit='out/j.xml'  # the CI's\n[compare\n", "out/j.xml"),
        ('report.junit = "top.xml"\nmodel = [\n', "top.xml"),
        ('[compare]\njunit = "not.xml"\n[report]\ntitle = "t"\n[x\n', None),  # another table's key
        ('[[report]]\njunit = "arr.xml"\n', None),
        ('[report]\njunit = "a\\"b.xml"\n', 'a"b.xml'),  # escapes read as TOML reads them
        # forms a line scan missed (a second attacker's finding: the earlier passing JUnit stayed green)
        ('report = { junit = "out/j.xml" }\nruners=[\n', "out/j.xml"),
        ('[report]\n"junit" = "out/j.xml"\nruners=[\n', "out/j.xml"),
        ('"report".junit = "out/j.xml"\nruners=[\n', "out/j.xml"),
        ('[report]\njunit = "out/\\u006a.xml"\nruners=[\n', "out/j.xml"),
        ('["report"]\njunit = "q.xml"\n[x\n', "q.xml"),
        ('[report.sub]\njunit = "sub.xml"\n[x\n', None),  # a subtable's key
        ('junit = "top-level.xml"\n[report\n', None),
    ],
)
def test_the_report_junit_of_gate_toml_that_is_not_toml_is_found_by_a_line_scan(text, junit):
    from gate.early_claim import guess_report_junit

    assert guess_report_junit(text) == junit


def test_gate_toml_syntax_error_claims_and_replaces_its_report_junit(stale, capsys):
    # Failed before: after a passing run to [report] junit, a TOML syntax error left that passing JUnit
    # file untouched (errors="0") and wrote the error to accuracy-gate-junit.xml only.
    space, _, earlier = stale
    config = space / "gate.toml"
    text = config.read_text().replace('junit = "accuracy-gate-junit.xml"', 'junit = "out/junit.xml"')
    config.write_text(text)
    assert cli.main(["check", str(config)]) == 0
    assert 'errors="0"' in (space / "out" / "junit.xml").read_text()
    config.write_text(text.replace('runners = ["onnxrt"]', 'runners = ["onnxrt"'))
    assert claim_for_cli(parse("check", config)) == ["out/junit.xml"]  # the early claim
    assert junit_error(space / "out" / "junit.xml") == UNFINISHED
    capsys.readouterr()
    assert cli.main(["check", str(config)]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert "not valid TOML" in junit_error(space / "out" / "junit.xml")  # the full claim's error report
    assert not (space / "accuracy-gate-junit.xml").exists()
    # A guessed path that holds another file is left alone; the error goes to the default path.
    (space / "out" / "junit.xml").write_text("my notes\n")
    assert claim_for_cli(parse("check", config)) == []
    assert cli.main(["check", str(config)]) == 2
    assert (space / "out" / "junit.xml").read_text() == "my notes\n"
    assert "not valid TOML" in junit_error(space / "accuracy-gate-junit.xml")
