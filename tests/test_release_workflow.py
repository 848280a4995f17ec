""".github/workflows/release.yml: linted like the example workflows, its actions pinned to commits of
their current (Node 24) majors, and its pin step run for real on a copy of the repository: the
release commit pins action.yml and gpu/action.yml to the pushed images' digests and the tags move."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / ".github" / "workflows" / "release.yml"
CPU_IMAGE = "ghcr.io/octo/accuracy-gate@sha256:" + "c0" * 32
GPU_IMAGE = "ghcr.io/octo/accuracy-gate-gpu@sha256:" + "9b" * 32
# The oldest major of each action that runs on Node 24 (GitHub retires Node 20 actions).
NODE24_MAJORS = {
    "actions/checkout": 5,
    "docker/setup-buildx-action": 4,
    "docker/login-action": 4,
    "docker/build-push-action": 7,
}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"`{name}` is not on PATH; it comes with the test extra (pip install -e '.[test]').")
    return path


def run(cmd, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("cwd", ROOT)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kwargs)


def describe(proc) -> str:
    return f"{proc.args} exited {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def test_actionlint_passes_release_workflow():
    proc = run([tool("actionlint"), "-no-color", str(RELEASE)])
    assert proc.returncode == 0, describe(proc)


def test_release_workflow_matches_github_workflows_schema():
    proc = run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(RELEASE)])
    assert proc.returncode == 0, describe(proc)


def test_zizmor_finds_nothing_in_release_workflow():
    proc = run([tool("zizmor"), "--offline", "--no-progress", "--format", "json", str(RELEASE)])
    assert proc.returncode == 0, describe(proc)
    assert json.loads(proc.stdout) == []


def test_release_workflow_pins_every_action_to_a_node24_major_by_commit():
    uses = re.findall(r"uses: ([\w./-]+)@(\S+)(?: # (v[\d.]+))?", RELEASE.read_text(encoding="utf-8"))
    assert {name for name, _, _ in uses} == set(NODE24_MAJORS)
    for name, ref, comment in uses:
        assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{name}@{ref}: pin a full commit SHA"
        assert comment and int(comment[1:].split(".")[0]) >= NODE24_MAJORS[name], f"{name} {comment}"


def test_release_workflow_builds_both_targets_and_pins_with_their_digests():
    jobs = yaml.safe_load(RELEASE.read_text(encoding="utf-8"))["jobs"]
    builds = {
        job: next(s for s in spec["steps"] if str(s.get("uses", "")).startswith("docker/build-push-action"))
        for job, spec in jobs.items()
        if job.endswith("-image")
    }
    assert builds["cpu-image"]["with"].get("target") is None, "the CPU image is the default target"
    assert builds["gpu-image"]["with"]["target"] == "gpu"
    assert all(b["with"]["push"] is True for b in builds.values())
    assert jobs["pin"]["needs"] == ["cpu-image", "gpu-image"]
    assert jobs["pin"]["permissions"] == {"contents": "write"}


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True).stdout


@pytest.mark.slow  # the step installs PyYAML from PyPI into a fresh venv, as it does on the runner
def test_pin_step_pins_both_actions_in_a_release_commit_and_moves_the_tags(tmp_path):
    origin, repo = tmp_path / "origin.git", tmp_path / "repo"
    git(tmp_path, "init", "--quiet", "--bare", str(origin))
    repo.mkdir()
    for path in ("action.yml", "gpu/action.yml", "gpu/generate.py", "Dockerfile"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / path, repo / path)
    git(repo, "init", "--quiet", "--initial-branch=main")
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "release candidate")
    tagged = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "tag", "v1.2.3")
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "--quiet", "origin", "main", "v1.2.3")

    step = next(s for s in yaml.safe_load(RELEASE.read_text(encoding="utf-8"))["jobs"]["pin"]["steps"] if "run" in s)
    (tmp_path / "step.sh").write_text(step["run"], encoding="utf-8")
    summary, temp = tmp_path / "summary.md", tmp_path / "runner_temp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_", "GIT_"))}
    env.update(CPU_IMAGE=CPU_IMAGE, GPU_IMAGE=GPU_IMAGE, TAG="v1.2.3", GH_TOKEN="ghs_fake")
    env.update(RUNNER_TEMP=str(temp), GITHUB_STEP_SUMMARY=str(summary), HOME=str(tmp_path))
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(tmp_path / "step.sh")],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, describe(proc)

    release = git(origin, "rev-parse", "v1.2.3^{commit}").strip()
    assert git(origin, "rev-parse", "v1^{commit}").strip() == release
    assert git(origin, "rev-parse", f"{release}^").strip() == tagged, "one commit on top of the tagged one"
    assert git(origin, "rev-parse", "main").strip() == tagged, "the branch keeps image: Dockerfile"
    assert git(origin, "cat-file", "-t", "v1.2.3").strip() == "tag", "an annotated release tag"
    action = yaml.safe_load(git(origin, "show", f"{release}:action.yml"))
    assert action["runs"] == {"using": "docker", "image": f"docker://{CPU_IMAGE}"}
    gpu = yaml.safe_load(git(origin, "show", f"{release}:gpu/action.yml"))
    assert gpu["inputs"]["image"]["default"] == f"docker://{GPU_IMAGE}"
    changed = git(origin, "diff", "--name-only", tagged, release).split()
    assert changed == ["action.yml", "gpu/action.yml"]
    diff = git(origin, "diff", "--unified=0", tagged, release, "--", "action.yml")
    assert [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")] == [
        "-  image: Dockerfile",
        f"+  image: docker://{CPU_IMAGE}",
    ]
    pinned = tmp_path / "pinned-action.yml"
    pinned.write_text(git(origin, "show", f"{release}:action.yml"), encoding="utf-8")
    check = run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(pinned)])
    assert check.returncode == 0, describe(check)
    assert f"docker://{GPU_IMAGE}" in summary.read_text(encoding="utf-8")
