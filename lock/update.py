#!/usr/bin/env python3
"""Regenerate the lock files of the images (lock/*.txt) from pyproject.toml.

Each lock is pip's own resolution (``pip install --dry-run --report``) of the package's dependencies
and one extra for the image's Python and platform, written as ``name==version --hash=sha256:...``
lines, so that ``pip install --no-deps --require-hashes -r lock/<image>.txt`` installs the same files
on every build:

- ``cpu.txt``: dependencies + ``[cpu]``, for Debian trixie's python3 (3.13, glibc 2.41), the
  Dockerfile's last stage.
- ``gpu.txt``: dependencies + ``[gpu]``, for Ubuntu 24.04's python3 (3.12, glibc 2.39), the ``gpu``
  stage, with the versions of ``GPU_PINS`` (which match the stage's CUDA 12.8 base image).
  TensorRT's ``tensorrt-cu12`` is a small source package whose ``tensorrt`` module imports
  ``tensorrt_cu12_bindings`` (a wheel on PyPI, locked here) and ``tensorrt_cu12_libs``, whose wheel
  exists only on NVIDIA's index: ``gpu-nvidia.txt`` pins its version, without a hash (that index is
  not reachable from where this runs).
- ``build.txt``: setuptools and wheel, which build accuracy-gate itself (and tensorrt-cu12) with
  ``--no-build-isolation``, so that no unpinned build dependency is fetched.

    python lock/update.py          # rewrite lock/*.txt
    python lock/update.py --check  # exit 1 when a lock file differs from a fresh resolution

Needs PyPI and pip >= 25 (older pip checks a wheel's Requires-Python against the Python running pip,
not the ``--python-version`` asked for); e.g. ``python -m pip install --target /tmp/pip 'pip>=25'``
and ``PYTHONPATH=/tmp/pip python lock/update.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
PYPROJECT = HERE.parent / "pyproject.toml"
PROJECT = "accuracy-gate"
MIN_PIP = (25, 0)

# The gpu stage's versions: CUDA 12.8 + cuDNN 9 come from its base image (nvidia/cuda:12.8.1-cudnn-
# runtime-ubuntu24.04); TensorRT 10.8 is the CUDA 12.8 build (host driver >= 535); onnxruntime-gpu 1.22
# is a CUDA 12 build supporting CUDA 12.0-12.8 with cuDNN 9. cuda-python is left to [gpu] (< 13).
GPU_PINS = ("onnxruntime-gpu==1.22.0", "tensorrt-cu12==10.8.0.43")
TRT_META = "tensorrt-cu12"  # a source package: locked by its sdist's hash, built with --no-build-isolation
TRT_BINDINGS = "tensorrt-cu12-bindings"
TRT_LIBS = "tensorrt-cu12-libs"  # wheels only on NVIDIA's index (https://pypi.nvidia.com)
# tensorrt-cu12-libs's own dependency (not resolvable through it here), at the base image's CUDA minor.
TRT_LIBS_REQUIRES = ("nvidia-cuda-runtime-cu12==12.8.*",)


@dataclass(frozen=True)
class Target:
    """One image's Python: ``python`` (``X.Y``), glibc ``(2, minor)`` of its distribution, x86_64."""

    name: str
    python: str
    glibc_minor: int
    description: str

    def platforms(self) -> list[str]:
        """pip's ``--platform`` values in the priority a pip running on that system gives them."""
        tags = [f"manylinux_2_{minor}_x86_64" for minor in range(self.glibc_minor, 16, -1)]
        return tags + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]


CPU = Target("cpu", "3.13", 41, "the CPU image (Dockerfile's last stage): Debian trixie, Python 3.13, x86_64")
GPU = Target("gpu", "3.12", 39, "the GPU image (Dockerfile's `gpu` stage): Ubuntu 24.04, Python 3.12, x86_64")


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str:
    return normalize(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)[1])


def project_requirements(extras: list[str], pyproject: Path = PYPROJECT) -> list[str]:
    """The project's dependencies plus those of ``extras``, self-references (``accuracy-gate[x]``)
    expanded, in pyproject.toml's order without repeats."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    optional = project.get("optional-dependencies", {})
    out: list[str] = []

    def add(requirements, seen_extras):
        for requirement in requirements:
            match = re.fullmatch(rf"\s*{re.escape(PROJECT)}\s*\[([^\]]+)\]\s*", requirement)
            if match:
                for extra in (e.strip() for e in match[1].split(",")):
                    if extra not in seen_extras:
                        seen_extras.add(extra)
                        add(optional[extra], seen_extras)
            elif requirement not in out:
                out.append(requirement)

    add(project.get("dependencies", []), set())
    for extra in extras:
        add(optional[extra], {extra})
    return out


def check_pip(pip: list[str]) -> None:
    text = subprocess.run([*pip, "--version"], capture_output=True, text=True, check=True).stdout
    version = tuple(int(part) for part in re.match(r"pip (\d+)\.(\d+)", text).groups())
    if version < MIN_PIP:
        raise SystemExit(
            f"{text.strip()}: pip >= {'.'.join(map(str, MIN_PIP))} is needed (older pip checks Requires-Python "
            "against the Python running pip); see `python lock/update.py --help`."
        )


def resolve(pip: list[str], target: Target, requirements: list[str], *, no_deps: bool = False) -> list[dict]:
    """pip's ``install --dry-run --report`` for ``target``: one dict per distribution (name, version,
    url, sha256), in the report's order. ``no_deps`` also allows source distributions."""
    with tempfile.TemporaryDirectory(prefix="accuracy-gate-lock-") as scratch:
        report = Path(scratch) / "report.json"
        cmd = [*pip, "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report)]
        cmd += ["--target", str(Path(scratch) / "target"), "--python-version", target.python, "--implementation", "cp"]
        cmd += [arg for platform in target.platforms() for arg in ("--platform", platform)]
        cmd += ["--no-deps"] if no_deps else ["--only-binary=:all:"]
        proc = subprocess.run(cmd + requirements, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"pip could not resolve {requirements} for {target.name}:\n{proc.stderr}")
        items = json.loads(report.read_text(encoding="utf-8"))["install"]
    resolved = []
    for item in items:
        archive = item["download_info"].get("archive_info", {})
        sha256 = archive.get("hashes", {}).get("sha256") or archive.get("hash", "").removeprefix("sha256=")
        resolved.append(
            {
                "name": normalize(item["metadata"]["name"]),
                "version": item["metadata"]["version"],
                "url": item["download_info"]["url"],
                "sha256": sha256,
            }
        )
    return resolved


def lock_text(target_text: str, install: str, resolved: list[dict]) -> str:
    lines = [
        f"# GENERATED by lock/update.py from pyproject.toml: do not edit by hand. {target_text}",
        f"# {install}",
    ]
    for item in sorted(resolved, key=lambda item: item["name"]):
        lines.append(f"{item['name']}=={item['version']} --hash=sha256:{item['sha256']}")
    return "\n".join(lines) + "\n"


def generate(pip: list[str]) -> dict[str, str]:
    """File name -> text of every lock file."""
    files = {}
    build = resolve(pip, GPU, ["setuptools>=77", "wheel"])
    files["build.txt"] = lock_text(
        "Build tools of both images (pure Python).",
        "pip install --no-deps --require-hashes -r lock/build.txt, before the others",
        build,
    )

    cpu = resolve(pip, CPU, project_requirements(["cpu"]))
    files["cpu.txt"] = lock_text(
        f"Python packages of {CPU.description}.", "pip install --no-deps --require-hashes -r lock/cpu.txt", cpu
    )

    pins = {requirement_name(pin): pin for pin in GPU_PINS}
    trt_version = pins[TRT_META].split("==")[1]
    requirements = []
    for requirement in project_requirements(["gpu"]):
        name = requirement_name(requirement)
        if name == TRT_META:  # resolved through its bindings wheel; the source package is added below
            requirements.append(f"{TRT_BINDINGS}=={trt_version}")
        else:
            requirements.append(pins.get(name, requirement))
    gpu = resolve(pip, GPU, requirements + list(TRT_LIBS_REQUIRES))
    gpu += resolve(pip, GPU, [f"{TRT_META}=={trt_version}"], no_deps=True)
    files["gpu.txt"] = lock_text(
        f"Python packages of {GPU.description}, from PyPI.",
        "pip install --no-deps --require-hashes --no-build-isolation -r lock/gpu.txt (after lock/build.txt)",
        gpu,
    )
    files["gpu-nvidia.txt"] = (
        "# GENERATED by lock/update.py: do not edit by hand. The part of TensorRT that only NVIDIA's index\n"
        "# (https://pypi.nvidia.com) has: its wheel's version is pinned, its hash cannot be locked here.\n"
        "# pip install --no-deps --index-url https://pypi.nvidia.com -r lock/gpu-nvidia.txt\n"
        f"{TRT_LIBS}=={trt_version}\n"
    )
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a lock file is out of date")
    args = parser.parse_args(argv)
    pip = [sys.executable, "-m", "pip"]
    check_pip(pip)
    stale = []
    for name, text in generate(pip).items():
        path = HERE / name
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        stale.append(name)
        if not args.check:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    if args.check and stale:
        print(f"out of date: {', '.join(stale)}; regenerate with `python lock/update.py`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
