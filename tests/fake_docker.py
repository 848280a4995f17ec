"""gpu/action.yml's step, run as the runner runs it, against a stand-in ``docker`` on PATH.

No Docker engine is available here. The stand-in records every call (argv and the value of each
``-e NAME`` it was given) as one JSON line and behaves like Docker where the step depends on it:

- ``docker build --iidfile F`` writes an image ID to F;
- ``docker run ... --entrypoint SH IMAGE -c SCRIPT NAME ARGS...`` (the workspace probe) runs SCRIPT
  with the real ``sh``, each container path in ARGS mapped to its host path through the ``-v``
  mounts. ``host_root`` puts the daemon's host elsewhere (as for a runner inside a container, whose
  Docker daemon mounts paths of its own host): the mounted paths then hold nothing;
- ``docker run`` of the gate exits with ``docker_exit``, or with ``run_seconds`` runs until that
  time is up or ``docker rm --force`` removes its container (then it exits 137, as Docker does);
- ``docker rm --force NAME...`` marks those containers removed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
GPU_ACTION_YML = ROOT / "gpu" / "action.yml"

FAKE_DOCKER = """#!{python}
import json, os, subprocess, sys, time
args = sys.argv[1:]
env = {{}}
for flag, value in zip(args, args[1:]):
    if flag == "-e" and "=" not in value:
        env[value] = os.environ.get(value)
with open(os.environ["FAKE_DOCKER_LOG"], "a", encoding="utf-8") as log:
    log.write(json.dumps({{"args": args, "env": env}}) + "\\n")
removed = os.environ["FAKE_DOCKER_LOG"] + ".removed."
if args[0] == "build":
    with open(args[args.index("--iidfile") + 1], "w", encoding="utf-8") as f:
        f.write("sha256:0123abcd")
    sys.exit(0)
if args[0] == "rm":
    for name in args[1:]:
        if not name.startswith("-"):
            open(removed + name, "w").close()
    sys.exit(0)
name = args[args.index("--name") + 1] if "--name" in args else ""
if "--entrypoint" in args:
    host_root = os.environ.get("FAKE_DOCKER_HOST_ROOT", "")
    mounts = [value.split(":", 1) for flag, value in zip(args, args[1:]) if flag == "-v"]
    def on_host(path):
        for source, target in sorted(mounts, key=lambda m: -len(m[1])):
            if path == target or path.startswith(target.rstrip("/") + "/"):
                return host_root + source + path[len(target):]
        return host_root + path
    dash_c = len(args) - 1 - args[::-1].index("-c")
    script, argv0, paths = args[dash_c + 1], args[dash_c + 2], args[dash_c + 3:]
    shell = args[args.index("--entrypoint") + 1]
    sys.exit(subprocess.run([shell, "-c", script, argv0] + [on_host(p) for p in paths]).returncode)
deadline = time.monotonic() + float(os.environ.get("FAKE_DOCKER_RUN_SECONDS", "0"))
while time.monotonic() < deadline:
    if os.path.exists(removed + name):
        sys.exit(137)
    time.sleep(0.05)
sys.exit(int(os.environ.get("FAKE_DOCKER_EXIT", "0")))
"""


def load_gpu_action() -> dict:
    return yaml.safe_load(GPU_ACTION_YML.read_text(encoding="utf-8"))


def gpu_step() -> dict:
    steps = load_gpu_action()["runs"]["steps"]
    assert len(steps) == 1, "gpu/action.yml runs one step"
    return steps[0]


def prepare(tmp_path: Path, with_values: dict, *, workspace=None, docker_exit=0, host_root=None, run_seconds=0):
    """The step's script file and its environment: ``with_values`` over the inputs' defaults, the
    runner's variables, the stand-in docker first on PATH."""
    spec, step = load_gpu_action()["inputs"], gpu_step()
    values = {name: str(s.get("default", "")) for name, s in spec.items()}
    values["github_token"] = "ghs_fake token"
    values.update(with_values)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INPUT_", "GITHUB_", "RUNNER_", "GATE_"))}
    for var, expr in step["env"].items():
        match = re.fullmatch(r"\$\{\{ inputs\.(\w+) \}\}", expr)
        assert match, f"env {var}: {expr!r} is not an input"
        env[var] = values[match[1]]
    bin_dir, temp = tmp_path / "bin", tmp_path / "runner_temp"
    bin_dir.mkdir()
    (bin_dir / "docker").write_text(FAKE_DOCKER.format(python=sys.executable), encoding="utf-8")
    (bin_dir / "docker").chmod(0o755)
    commands, elsewhere = temp / "_runner_file_commands", tmp_path / "elsewhere" / "_github_workflow"
    for folder in (commands, elsewhere, tmp_path / "workspace"):
        folder.mkdir(parents=True)
    env.update(
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        FAKE_DOCKER_LOG=str(tmp_path / "docker.log"),
        FAKE_DOCKER_EXIT=str(docker_exit),
        FAKE_DOCKER_RUN_SECONDS=str(run_seconds),
        GITHUB_WORKSPACE=workspace or str(tmp_path / "workspace"),
        GITHUB_ACTION_PATH=str(GPU_ACTION_YML.parent),
        RUNNER_TEMP=str(temp),
        GITHUB_OUTPUT=str(commands / "set_output_1"),
        GITHUB_STEP_SUMMARY=str(commands / "step_summary_1"),
        GITHUB_EVENT_PATH=str(elsewhere / "event.json"),  # outside RUNNER_TEMP: must be mounted too
        GITHUB_REPOSITORY="octo/repo",
        GITHUB_EVENT_NAME="pull_request",
        GITHUB_RUN_ID="4242",
        GITHUB_RUN_ATTEMPT="1",
    )
    if host_root is not None:
        env["FAKE_DOCKER_HOST_ROOT"] = str(host_root)
    script = tmp_path / "step.sh"
    script.write_text(step["run"], encoding="utf-8")
    # how the runner runs a `shell: bash` step
    return ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)], env


def calls(tmp_path: Path) -> list[dict]:
    log = tmp_path / "docker.log"
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


def run_gpu_step(tmp_path, with_values: dict, **kwargs):
    """Run the step to its end: ``(CompletedProcess, docker calls, env)``."""
    cmd, env = prepare(tmp_path, with_values, **kwargs)
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    return proc, calls(tmp_path), env


def cancel_gpu_step(tmp_path, with_values: dict, signum: int, **kwargs):
    """Start the step, send ``signum`` to it (as the runner does on cancellation) once the gate's
    container runs, and wait: ``(returncode, stdout, seconds from the signal to the exit, calls)``."""
    cmd, env = prepare(tmp_path, with_values, run_seconds=60, **kwargs)
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not [c for c in calls(tmp_path) if is_gate_run(c)]:
        assert proc.poll() is None and time.monotonic() < deadline, "the gate's docker run never started"
        time.sleep(0.05)
    time.sleep(0.3)
    signalled = time.monotonic()
    proc.send_signal(signum)
    stdout, _ = proc.communicate(timeout=30)
    return proc.returncode, stdout, time.monotonic() - signalled, calls(tmp_path)


def is_gate_run(call: dict) -> bool:
    return call["args"][0] == "run" and "--entrypoint" not in call["args"]


def is_probe(call: dict) -> bool:
    return call["args"][0] == "run" and "--entrypoint" in call["args"]


def mounts(args: list[str]) -> list[str]:
    return [value for flag, value in zip(args, args[1:]) if flag == "-v"]


def option(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]
