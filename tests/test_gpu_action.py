"""gpu/action.yml's container handling, run as the runner runs the step, against tests/fake_docker.py:
--init, the runner's user, one uniquely named container removed however the step ends (also on
cancellation), the workspace probe, and the GPU image's own entrypoint."""

from __future__ import annotations

import os
import re
import signal

import pytest
import yaml

import dockerfile
from fake_docker import ROOT, cancel_gpu_step, is_gate_run, is_probe, option, run_gpu_step

DIGEST = "sha256:" + "ab" * 32
DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+")  # what `docker run --name` accepts


def describe(proc) -> str:
    return f"exit {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def removed(calls: list[dict]) -> list[str]:
    return [name for c in calls if c["args"][:2] == ["rm", "--force"] for name in c["args"][2:]]


def test_gate_runs_with_init_the_runner_user_and_a_unique_name_removed_at_the_end(tmp_path):
    (tmp_path / "a").mkdir()
    proc, calls, _ = run_gpu_step(tmp_path / "a", {"image": "img"})
    assert proc.returncode == 0, describe(proc)
    [probe], [gate] = [c for c in calls if is_probe(c)], [c for c in calls if is_gate_run(c)]
    args = gate["args"]
    assert "--init" in args, "a real PID 1 forwards signals and reaps"
    assert option(args, "--user") == f"{os.getuid()}:{os.getgid()}", "files written belong to the runner's user"
    name = option(args, "--name")
    assert DOCKER_NAME.fullmatch(name) and name.startswith("accuracy-gate-4242-1-"), name
    assert "--entrypoint" not in args, "the image's entrypoint (NVIDIA's, then the gate) runs"
    assert option(probe["args"], "--name") == f"{name}-probe"
    assert option(probe["args"], "--user") == option(args, "--user") and "--init" in probe["args"]
    assert "--gpus" not in probe["args"], "the probe needs no GPU"
    assert removed(calls) == [name, f"{name}-probe"], "the EXIT trap removes both, whatever happened"
    assert calls[-1]["args"][0] == "rm"
    workspace = tmp_path / "a" / "workspace"
    assert list(workspace.iterdir()) == [], "the probe file is removed from the workspace"

    (tmp_path / "b").mkdir()
    proc, calls_b, _ = run_gpu_step(tmp_path / "b", {"image": "img"})
    assert proc.returncode == 0, describe(proc)
    [gate_b] = [c for c in calls_b if is_gate_run(c)]
    assert option(gate_b["args"], "--name") != name, "each run names its own container"


def test_an_invisible_workspace_stops_the_step_with_one_error(tmp_path):
    """A runner inside a container: the Docker daemon mounts GITHUB_WORKSPACE from its own host."""
    daemon_host = tmp_path / "daemon_host"
    daemon_host.mkdir()
    proc, calls, env = run_gpu_step(tmp_path, {"image": "img"}, host_root=daemon_host)
    assert proc.returncode == 2, describe(proc)
    errors = [line for line in proc.stdout.splitlines() if line.startswith("::error")]
    assert len(errors) == 1, proc.stdout
    assert f"the workspace {env['GITHUB_WORKSPACE']} is not visible inside the container" in errors[0]
    assert "runner itself runs in a" in errors[0]
    assert not [c for c in calls if is_gate_run(c)], "the gate never runs on an empty workspace"
    assert list((tmp_path / "workspace").iterdir()) == [] and len(removed(calls)) == 2


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["INT", "TERM"])
def test_cancelling_the_step_removes_the_running_container(tmp_path, signum, code):
    """The runner cancels a step with SIGINT, then SIGTERM: the container (say, a long TensorRT build
    holding the GPU) is removed at once, not left running after the job."""
    returncode, stdout, seconds, calls = cancel_gpu_step(tmp_path, {"image": "img"}, signum)
    assert returncode == code, stdout
    [gate] = [c for c in calls if is_gate_run(c)]
    name = option(gate["args"], "--name")
    assert name in removed(calls), calls[-1]
    assert seconds < 10, f"the step took {seconds:.1f} s to stop"
    assert f"::warning title=accuracy-gate/gpu::cancelled: removing container {name}" in stdout


def test_generator_pins_the_image_input_to_a_digest_for_a_release():
    generate = dockerfile.load_script("gpu/generate.py")
    action = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
    image = f"docker://ghcr.io/octo/accuracy-gate-gpu@{DIGEST}"
    pinned = yaml.safe_load(generate.render(action, image=image))
    assert pinned["inputs"]["image"]["default"] == image
    unpinned = yaml.safe_load(generate.render(action))
    assert "default" not in unpinned["inputs"]["image"]
    assert {k: v for k, v in pinned.items() if k != "inputs"} == {k: v for k, v in unpinned.items() if k != "inputs"}
    with pytest.raises(SystemExit, match="pinned by digest"):
        generate.main(["--check", "--image", "ghcr.io/octo/accuracy-gate-gpu:v1"])


def test_a_pinned_image_is_run_as_given(tmp_path):
    proc, calls, _ = run_gpu_step(tmp_path, {"image": f"docker://ghcr.io/octo/accuracy-gate-gpu@{DIGEST}"})
    assert proc.returncode == 0, describe(proc)
    assert not [c for c in calls if c["args"][0] == "build"]
    [gate] = [c for c in calls if is_gate_run(c)]
    assert gate["args"][-1] == f"ghcr.io/octo/accuracy-gate-gpu@{DIGEST}"
