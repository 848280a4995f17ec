"""One ONNX Runtime build, or one clear line: gate.backend.ort_install.

The packaging keeps onnxruntime and onnxruntime-gpu apart (the `cpu` and `gpu` extras); when a user
installs both anyway, or none, the gate stops with exit code 2 and one line saying what to do. Each
case runs the real CLI in a subprocess on the shipped example: "both installed" by putting a second
build's metadata (a .dist-info folder, what pip writes) on sys.path, "none installed" by making
`import onnxruntime` fail the way Python does for a missing module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnxruntime

from gate.backend.ort_install import installed_distributions, onnxruntime_version

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ppocr-cls"


def run_cli(tmp_path: Path, *, extra_path: Path | None = None, block_import: bool = False):
    """``accuracy-gate check`` on a copy of the example in tmp_path."""
    work = tmp_path / "example"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("__pycache__"))
    paths = [str(extra_path)] if extra_path else []
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths + [str(ROOT)])}
    env.pop("RUNNER_DEBUG", None)
    block = "sys.modules['onnxruntime'] = None  # what Python does for a module that is not there\n"
    run = "from gate.cli import main\nsys.exit(main(['check', 'gate.toml']))\n"
    code = "import sys\n" + (block if block_import else "") + run
    return subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=120)


def _dist_info(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: {version}\n", encoding="utf-8"
    )


def fake_second_build(tmp_path: Path, name: str = "onnxruntime_gpu", version: str = "1.22.0") -> Path:
    """A folder where two builds were installed over each other, first on sys.path: the installed
    ``onnxruntime`` package (a symlink to it) with its own metadata and a second build's."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "onnxruntime").symlink_to(Path(onnxruntime.__file__).parent, target_is_directory=True)
    _dist_info(site, "onnxruntime", onnxruntime.__version__)
    _dist_info(site, name, version)
    return site


def test_a_build_in_another_folder_that_shadows_this_one_is_no_conflict(tmp_path, monkeypatch):
    # onnxruntime-gpu in PYTHONPATH=/tmp/site over the system's CPU onnxruntime (how the GPU machine
    # here runs it): the import finds /tmp/site's package, whose files are intact. Before, every
    # onnxruntime-gpu run there stopped with "Several ONNX Runtime builds are installed".
    site = tmp_path / "site"
    (site / "onnxruntime").mkdir(parents=True)
    (site / "onnxruntime" / "__init__.py").write_text("", encoding="utf-8")
    _dist_info(site, "onnxruntime_gpu", "1.31.1")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "onnxruntime")  # else find_spec answers with the module imported above
    assert installed_distributions() == ["onnxruntime-gpu"]


def test_the_test_environment_has_exactly_the_cpu_build():
    assert installed_distributions() == ["onnxruntime"]
    assert onnxruntime_version() == onnxruntime.__version__


def test_two_builds_installed_stop_the_gate_with_one_line(tmp_path):
    proc = run_cli(tmp_path, extra_path=fake_second_build(tmp_path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Several ONNX Runtime builds are installed (onnxruntime, onnxruntime-gpu)" in lines[0]
    assert "pip uninstall -y onnxruntime onnxruntime-gpu" in lines[0]
    assert "accuracy-gate[cpu]" in lines[0] and "accuracy-gate[gpu]" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert "PASSED" not in proc.stdout


def test_no_build_installed_stops_the_gate_with_one_line(tmp_path):
    proc = run_cli(tmp_path, block_import=True)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].count("ONNX Runtime is not installed") == 1, lines[0]
    assert "pip install 'accuracy-gate[cpu]' (CPU) or 'accuracy-gate[gpu]'" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr


def test_version_fact_is_empty_without_onnxruntime(tmp_path):
    code = (
        "import sys; sys.modules['onnxruntime'] = None\n"
        "from gate.backend.ort_install import onnxruntime_version\n"
        "print(repr(onnxruntime_version()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "''"


def test_only_the_builds_own_metadata_folders_count(tmp_path, monkeypatch):
    # Found by the metadata folders' names beside the package: onnxruntime-extensions (another
    # project that shares the prefix) is no build; an egg-info of a source build is one.
    site = tmp_path / "site"
    (site / "onnxruntime").mkdir(parents=True)
    (site / "onnxruntime" / "__init__.py").write_text("", encoding="utf-8")
    _dist_info(site, "onnxruntime_extensions", "0.14.0")
    _dist_info(site, "onnxruntime_gpu", "1.31.1")
    (site / "onnxruntime_directml-1.20.0-py3.12.egg-info").mkdir()
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "onnxruntime")
    assert installed_distributions() == ["onnxruntime-gpu", "onnxruntime-directml"]
