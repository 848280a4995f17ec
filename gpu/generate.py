#!/usr/bin/env python3
"""Generate gpu/action.yml, the GPU variant of the action, from ../action.yml.

The GPU variant is a composite action that runs the action's GPU image (the Dockerfile's ``gpu``
target) itself with ``docker run --gpus`` (GitHub starts a Docker action's container without GPUs).
It declares every input of action.yml (same names, order, defaults and descriptions) plus ``image``,
``gpus`` and ``docker_args``, forwards each input to the container as ``INPUT_<NAME>`` through the
step's ``env:`` (never ``${{ }}`` inside the script), and mirrors action.yml's outputs.

    python gpu/generate.py          # rewrite gpu/action.yml
    python gpu/generate.py --check  # exit 1 when gpu/action.yml is not what action.yml generates
    python gpu/generate.py --image docker://ghcr.io/o/accuracy-gate-gpu@sha256:...  # a release's pin

Needs only PyYAML. tests/test_packaging.py fails when gpu/action.yml is out of date.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import textwrap
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
ACTION_YML = HERE.parent / "action.yml"
GPU_ACTION_YML = HERE / "action.yml"
REGENERATE = "python gpu/generate.py"
WIDTH = 100

# Inputs of the GPU variant only; never forwarded to the container.
EXTRA_INPUTS = {
    "image": {
        "description": (
            "Image to run. Empty: build the `gpu` target of the repository's Dockerfile (in the folder above "
            "this action, `$GITHUB_ACTION_PATH/..`) with `docker build --target gpu` on every run, which "
            "Docker's layer cache makes quick after the first build on a persistent runner. Or a prebuilt "
            "image reference (`ghcr.io/owner/accuracy-gate-gpu@sha256:...`, pinned by digest; a `docker://` "
            "prefix is accepted), which `docker run` pulls when it is not on the runner (add `--pull=always` "
            "to `docker_args` for a moving tag). A release of this action sets the default to the GPU image "
            "published with it; on a branch the default is empty."
        ),
        "required": False,
    },
    "gpus": {
        "description": (
            "Value of `docker run --gpus`: `all` (default), a count such as `1`, or devices such as "
            "`device=0` (several: `'\"device=0,1\"'`, with the inner double quotes Docker wants). Empty: "
            "run without `--gpus` (ONNX Runtime on the CPU). The runner needs the NVIDIA Container Toolkit."
        ),
        "required": False,
        "default": "all",
    },
    "docker_args": {
        "description": (
            "Extra `docker run` options, separated by spaces or new lines (no shell quoting), e.g. "
            "`--shm-size=1g --ipc=host` or `--pull=always`. Placed before the image."
        ),
        "required": False,
    },
}
EXTRA_ENV = {"image": "GATE_IMAGE", "gpus": "GATE_GPUS", "docker_args": "GATE_DOCKER_ARGS"}

# Runner variables the container sees besides the inputs (the gate reads GITHUB_OUTPUT,
# GITHUB_STEP_SUMMARY, GITHUB_EVENT_PATH, GITHUB_EVENT_NAME, GITHUB_REPOSITORY, GITHUB_SHA,
# GITHUB_API_URL, GITHUB_SERVER_URL, GITHUB_RUN_ID, GITHUB_WORKFLOW and RUNNER_DEBUG; the others are
# what a Docker action gets too). Forwarded by name, so values never appear on the command line.
FORWARDED = (
    "GITHUB_OUTPUT",
    "GITHUB_STEP_SUMMARY",
    "GITHUB_EVENT_PATH",
    "GITHUB_EVENT_NAME",
    "GITHUB_REPOSITORY",
    "GITHUB_REPOSITORY_OWNER",
    "GITHUB_SHA",
    "GITHUB_REF",
    "GITHUB_REF_NAME",
    "GITHUB_HEAD_REF",
    "GITHUB_BASE_REF",
    "GITHUB_WORKFLOW",
    "GITHUB_JOB",
    "GITHUB_RUN_ID",
    "GITHUB_RUN_NUMBER",
    "GITHUB_RUN_ATTEMPT",
    "GITHUB_ACTOR",
    "GITHUB_SERVER_URL",
    "GITHUB_API_URL",
    "GITHUB_GRAPHQL_URL",
    "RUNNER_OS",
    "RUNNER_ARCH",
    "RUNNER_NAME",
    "RUNNER_TEMP",
    "RUNNER_DEBUG",
)

HEADER = """\
# GENERATED from ../action.yml by gpu/generate.py: do not edit by hand. After changing action.yml's
# inputs or outputs, run `python gpu/generate.py` (tests/test_packaging.py fails until you do).
#
# The GPU variant of accuracy-gate: a composite action that runs the action's GPU image (the
# Dockerfile's `gpu` target, or the image a release pins) itself with `docker run --gpus` (GitHub
# starts a Docker action's container without GPUs, so TensorRT cannot run there). Use it as
# `your-org/accuracy-gate/gpu@v1` on a self-hosted Linux GPU runner with Docker and the NVIDIA
# Container Toolkit, in a job that does not use `container:` (see gpu/README.md).
name: accuracy-gate (GPU)
description: >-
  The accuracy gate on a GPU runner: the same inputs, outputs and reports as the accuracy-gate Docker
  action, with the image run through `docker run --gpus` so that TensorRT (`runners = ["trt"]`) and
  GPU execution providers work. Needs a Linux runner with Docker and the NVIDIA Container Toolkit,
  and a job without `container:`.
author: accuracy-gate contributors
branding:
  icon: check-circle
  color: green
"""

SCRIPT_HEAD = r"""# Runs the accuracy-gate GPU image as the Docker action runs its image, plus --gpus. Every input
# reaches the container as INPUT_<NAME> through this step's env (forwarded by name with -e NAME, so
# no value is interpolated into this script or shown on the command line).
set -euo pipefail
if [[ "$GITHUB_WORKSPACE" == /__w/* ]]; then
  echo "::error title=accuracy-gate/gpu::This job runs in a container (container:), so the workspace" \
    "$GITHUB_WORKSPACE is not a path on the Docker host. Run the job on the runner itself, without container:."
  exit 2
fi
if ! command -v docker >/dev/null 2>&1; then
  echo "::error title=accuracy-gate/gpu::docker is not on PATH. The GPU variant runs the gate's image with" \
    "docker run --gpus: the runner needs Docker and the NVIDIA Container Toolkit."
  exit 2
fi

image="${GATE_IMAGE#docker://}"
if [[ -z "$image" ]]; then
  context="$GITHUB_ACTION_PATH/.."
  iidfile="$(mktemp "$RUNNER_TEMP/accuracy-gate-image.XXXXXX")"
  echo "::group::docker build --target gpu $context"
  if ! docker build --target gpu --iidfile "$iidfile" --tag accuracy-gate:gpu "$context"; then
    echo "::endgroup::"
    echo "::error title=accuracy-gate/gpu::docker build of $context failed (see the log above)."
    rm -f "$iidfile"
    exit 2
  fi
  echo "::endgroup::"
  image="$(<"$iidfile")"  # run this build by its ID: a parallel job may retag accuracy-gate:gpu
  rm -f "$iidfile"
fi

# One uniquely named container per run. `docker run --rm` removes it when it exits; the EXIT trap
# removes it (and the probe files) however the step ends, also when the job is cancelled: the runner
# then sends SIGINT and SIGTERM to this script, which waits for `docker run` in the background so
# that the trap runs at once, and `docker rm --force` stops a TensorRT build that would keep the GPU.
run_id="${GITHUB_RUN_ID:-0}"
attempt="${GITHUB_RUN_ATTEMPT:-1}"
name="accuracy-gate-${run_id//[^0-9]/}-${attempt//[^0-9]/}-$$-$RANDOM$RANDOM"
probe_files=()
cleanup() {
  docker rm --force "$name" "$name-probe" >/dev/null 2>&1 || true
  rm -f "${probe_files[@]}"
}
trap cleanup EXIT
trap 'echo "::warning title=accuracy-gate/gpu::cancelled: removing container $name"; exit 130' INT
trap 'echo "::warning title=accuracy-gate/gpu::cancelled: removing container $name"; exit 143' TERM

# --init: a real PID 1 (tini) forwards signals to the gate and reaps its children. --user: files
# written to the workspace and RUNNER_TEMP belong to the runner's user, not root.
run_args=(--rm --init --user "$(id -u):$(id -g)" --workdir /github/workspace -e HOME=/tmp)
run_args+=(-v "$GITHUB_WORKSPACE":/github/workspace)
# RUNNER_TEMP at the same path keeps GITHUB_OUTPUT, GITHUB_STEP_SUMMARY and GITHUB_EVENT_PATH valid
# (the runner keeps them under RUNNER_TEMP); a folder of one of them outside it is mounted as well.
run_args+=(-v "$RUNNER_TEMP":"$RUNNER_TEMP")
mounted=("$RUNNER_TEMP")
for file in "${GITHUB_OUTPUT:-}" "${GITHUB_STEP_SUMMARY:-}" "${GITHUB_EVENT_PATH:-}"; do
  [[ -n "$file" ]] || continue
  folder="$(dirname "$file")"
  inside=false
  for done_folder in "${mounted[@]}"; do
    if [[ "$folder/" == "$done_folder"/* ]]; then inside=true; fi
  done
  if [[ "$inside" == false ]]; then
    run_args+=(-v "$folder":"$folder")
    mounted+=("$folder")
  fi
done

# The Docker daemon mounts paths of its own host: when this runner runs in a container itself (or
# talks to a remote daemon), the workspace path there is another, usually empty, folder. A probe
# container checks that a file just made in the workspace and one in RUNNER_TEMP are visible.
probe_files+=("$(mktemp "$GITHUB_WORKSPACE/.accuracy-gate-probe.XXXXXX")")
probe_files+=("$(mktemp "$RUNNER_TEMP/accuracy-gate-probe.XXXXXX")")
probe_status=0
docker run "${run_args[@]}" --name "$name-probe" --entrypoint /bin/sh "$image" \
  -c 'test -f "$1" || exit 3; test -f "$2" || exit 4' probe \
  "/github/workspace/${probe_files[0]##*/}" "${probe_files[1]}" || probe_status=$?
if [[ "$probe_status" -eq 3 || "$probe_status" -eq 4 ]]; then
  what="the workspace $GITHUB_WORKSPACE"
  [[ "$probe_status" -eq 3 ]] || what="RUNNER_TEMP $RUNNER_TEMP"
  echo "::error title=accuracy-gate/gpu::$what is not visible inside the container: the Docker daemon mounts" \
    "that path from its own host, where it holds other files. This happens when the runner itself runs in a" \
    "container (or uses a remote Docker daemon). Run the runner on the Docker host, or give the runner's work" \
    "folder the same path on the Docker host and in the runner's container."
  exit 2
elif [[ "$probe_status" -ne 0 ]]; then
  echo "::error title=accuracy-gate/gpu::docker run could not start the image $image (exit $probe_status, see" \
    "the message above): check the image reference and that the runner can pull it."
  exit 2
fi

if [[ -n "$GATE_GPUS" ]]; then
  run_args+=(--gpus "$GATE_GPUS")
fi
extra=()
if [[ -n "$GATE_DOCKER_ARGS" ]]; then
  read -r -d '' -a extra <<<"$GATE_DOCKER_ARGS" || true
fi

# No --entrypoint: the image's own (NVIDIA's entrypoint, then the gate) runs.
docker run "${run_args[@]}" --name "$name" \
"""

SCRIPT_TAIL = r"""  -e GITHUB_WORKSPACE=/github/workspace \
  -e GITHUB_ACTIONS=true \
  -e CI=true \
  ${extra[@]+"${extra[@]}"} \
  "$image" &
docker_pid=$!
status=0
wait "$docker_pid" || status=$?
if [[ "$status" -eq 125 ]]; then
  echo "::error title=accuracy-gate/gpu::docker run could not start the container (exit 125, see the message" \
    "above). With --gpus this usually means the runner lacks the NVIDIA Container Toolkit" \
    "(nvidia-ctk runtime configure --runtime=docker, then restart Docker) or an NVIDIA driver."
  status=2
fi
exit "$status"
"""

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/-]*")


def scalar(value) -> str:
    """A YAML scalar for a short value: plain when unambiguous, else a JSON (double-quoted) string."""
    text = str(value)
    if _PLAIN.fullmatch(text) and yaml.safe_load(text) == text:
        return text
    return json.dumps(text, ensure_ascii=False)


def folded(key: str, text: str, indent: int) -> list[str]:
    """``key: >-`` and ``text`` wrapped at WIDTH, or ``key: "..."`` when folding would change it."""
    pad = " " * indent
    lines = textwrap.wrap(text, width=WIDTH - indent - 2, break_long_words=False, break_on_hyphens=False)
    block = [f"{pad}{key}: >-"] + [f"{pad}  {line}" for line in lines]
    if lines and yaml.safe_load("\n".join(block)) == {key: text}:
        return block
    return [f"{pad}{key}: {json.dumps(text, ensure_ascii=False)}"]


def render_input(name: str, spec: dict) -> list[str]:
    lines = [f"  {name}:"]
    lines += folded("description", str(spec["description"]), 4)
    lines.append(f"    required: {'true' if spec.get('required') else 'false'}")
    if "default" in spec:
        lines.append(f"    default: {scalar(spec['default'])}")
    if "deprecationMessage" in spec:
        lines += folded("deprecationMessage", str(spec["deprecationMessage"]), 4)
    unknown = set(spec) - {"description", "required", "default", "deprecationMessage"}
    if unknown:
        raise SystemExit(f"action.yml input {name} has keys generate.py does not copy: {sorted(unknown)}")
    return lines


def render(action: dict, image: str | None = None) -> str:
    """The text of gpu/action.yml for the parsed action.yml ``action``; ``image``: the default of the
    ``image`` input (a release's published GPU image), or None for none."""
    inputs, outputs = action["inputs"], action["outputs"]
    clash = set(inputs) & set(EXTRA_INPUTS)
    if clash:
        raise SystemExit(f"action.yml declares {sorted(clash)}, which the GPU variant adds itself")
    out = [HEADER.rstrip("\n"), "", "# Every input of ../action.yml, in its order, then the GPU variant's own."]
    out.append("inputs:")
    extra = {**EXTRA_INPUTS, "image": {**EXTRA_INPUTS["image"], **({"default": image} if image else {})}}
    for name, spec in {**inputs, **extra}.items():
        out += render_input(name, spec)
    out += ["", "outputs:"]
    for name, spec in outputs.items():
        out.append(f"  {name}:")
        out += folded("description", str(spec["description"]), 4)
        out.append(f"    value: ${{{{ steps.gate.outputs.{name} }}}}")
    out += [
        "",
        "runs:",
        "  using: composite",
        "  steps:",
        "    - name: Accuracy gate (docker run --gpus)",
        "      id: gate",
        "      shell: bash",
        "      env:",
    ]
    out += [f"        INPUT_{name.upper()}: ${{{{ inputs.{name} }}}}" for name in inputs]
    out += [f"        {var}: ${{{{ inputs.{name} }}}}" for name, var in EXTRA_ENV.items()]
    out.append("      run: |")
    script = SCRIPT_HEAD
    script += "".join(f"  -e INPUT_{name.upper()} \\\n" for name in inputs)
    script += "".join(f"  -e {var} \\\n" for var in FORWARDED)
    script += SCRIPT_TAIL
    out += [f"        {line}" if line else "" for line in script.splitlines()]
    text = "\n".join(out) + "\n"
    check(yaml.safe_load(text), action)
    return text


def check(gpu: dict, action: dict) -> None:
    """The generated action declares action.yml's inputs and outputs unchanged (guards the emitter)."""
    for name, spec in action["inputs"].items():
        assert gpu["inputs"][name] == spec, f"input {name} did not survive generation"
    for name, spec in action["outputs"].items():
        assert gpu["outputs"][name]["description"] == spec["description"], f"output {name} did not survive generation"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when gpu/action.yml is out of date")
    parser.add_argument(
        "--image",
        help="default of the `image` input (the release workflow's published GPU image, docker://...@sha256:...); "
        "without it the current file's default is kept (none on a branch)",
    )
    args = parser.parse_args(argv)
    current = GPU_ACTION_YML.read_text(encoding="utf-8") if GPU_ACTION_YML.exists() else None
    image = args.image
    if image is None and current is not None:
        image = (yaml.safe_load(current).get("inputs", {}).get("image") or {}).get("default")
    if image is not None and not re.fullmatch(r"(docker://)?[a-z0-9./_-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}", image):
        raise SystemExit(f"--image {image}: expected an image reference pinned by digest (name@sha256:<64 hex>)")
    text = render(yaml.safe_load(ACTION_YML.read_text(encoding="utf-8")), image=image)
    if args.check:
        if current != text:
            print(f"gpu/action.yml is out of date with action.yml; regenerate it with `{REGENERATE}`.")
            return 1
        return 0
    if current != text:
        GPU_ACTION_YML.write_text(text, encoding="utf-8")
        print(f"wrote {GPU_ACTION_YML}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
