"""Shared fixtures: the shipped example copied to a temp folder, and a small generated ONNX model."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "ppocr-cls"
EXAMPLE_OUTPUT = "save_infer_model/scale_0.tmp_1"


@pytest.fixture
def example(tmp_path) -> Path:
    """A writable copy of examples/ppocr-cls (real model, 8 inputs, golden outputs)."""
    dest = tmp_path / "ppocr-cls"
    shutil.copytree(EXAMPLE, dest)
    return dest


@pytest.fixture(autouse=True)
def _junit_files_follow_the_schema(request):
    """Every JUnit file a test leaves in its tmp_path is valid against junit-10.xsd (tests/junit_schema.py)."""
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp is None:
        return
    from junit_schema import junit_files, schema_errors

    for path in junit_files(tmp):
        if path.name.startswith("hostile-"):  # a test's own deliberately invalid file
            continue
        errors = schema_errors(path.read_bytes())
        assert not errors, f"{path} breaks junit-10.xsd: {errors}"


@pytest.fixture(autouse=True)
def _no_github_workspace(monkeypatch):
    """Tests set GITHUB_WORKSPACE themselves where they mean to (a run inside GitHub Actions has it)."""
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)


@pytest.fixture
def httpserver(httpserver_ipv4):
    """pytest-httpserver's server, bound to 127.0.0.1 (the plain fixture may bind to 'localhost')."""
    return httpserver_ipv4


@pytest.fixture
def fake(httpserver):
    """A fake GitHub REST API (tests/fake_github.py) on that server."""
    from fake_github import FakeGitHub

    return FakeGitHub(httpserver)


def perturb_golden(path: Path, index=(0, 0), delta=0.01) -> None:
    tensor = onnx.load_tensor(str(path))
    array = numpy_helper.to_array(tensor).copy()
    array[index] += delta
    path.write_bytes(numpy_helper.from_array(array, tensor.name).SerializeToString())


@contextlib.contextmanager
def scratch_cwd():
    """While the working directory is the repository's root: a fresh empty one, removed afterwards, for
    an in-process ``cli.main`` (the default report paths are the working directory's: no test leaves a
    file in the repository). A test that changed the working directory keeps its own."""
    if Path.cwd().resolve() != ROOT:
        yield Path.cwd()
        return
    with tempfile.TemporaryDirectory(prefix="accuracy-gate-cwd-") as scratch, contextlib.chdir(scratch):
        yield Path(scratch)


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """Runs ``python -m gate ARGS`` as a user would; returns the completed process (text). It runs in
    ``cwd``, by default in a fresh empty folder removed afterwards (the default report paths are the
    working directory's: no test leaves a file in the repository); this checkout's ``gate`` first."""
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_WORKSPACE"}  # confine to the config's folder
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    with tempfile.TemporaryDirectory(prefix="accuracy-gate-cwd-") as scratch:
        return subprocess.run(
            [sys.executable, "-m", "gate", *map(str, args)],
            cwd=cwd or scratch,
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )


def save_example_as_json(example: Path, outputs: str) -> list:
    """The example's inputs and golden outputs as Polygraphy JSON (``inputs.json`` and ``outputs``),
    saved by ``accuracy-gate run --onnxrt`` over its stored inputs; returns the runner's iterations."""
    from gate.comparator.serde import load_run_results

    saved = run_cli(
        "run", "model.onnx", "--onnxrt", "--load-inputs", "data", "--save-inputs", "inputs.json",
        "--save-outputs", outputs, cwd=example,
    )  # fmt: skip
    assert saved.returncode == 0, saved.stderr
    ((_, iterations),) = load_run_results(example / outputs).items()
    return iterations


def make_small_model(path: Path, size: int = 64, seed: int = 0) -> Path:
    """A real two-output ONNX model: y = relu(x @ W + b), s = reduce_sum(y) over the last axis.
    x: float32 [batch, size]."""
    rng = np.random.default_rng(seed)
    weight = numpy_helper.from_array(rng.standard_normal((size, size)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(size).astype(np.float32), "b")
    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["xw"]),
        helper.make_node("Add", ["xw", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["y"]),
        helper.make_node("ReduceSum", ["y", "axes"], ["s"], keepdims=0),
    ]
    graph = helper.make_graph(
        nodes,
        "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", size])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", size]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, ["batch"]),
        ],
        [weight, bias, axes],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def write_gate_toml(folder: Path, text: str) -> Path:
    path = folder / "gate.toml"
    path.write_text(text, encoding="utf-8")
    return path


def recorded_case(folder, iterations=2, extra=""):
    """m.onnx, ``iterations`` stored inputs and their recorded golden outputs; returns gate.toml."""
    folder.mkdir(parents=True, exist_ok=True)
    make_small_model(folder / "m.onnx")
    (folder / "inputs").mkdir()
    for i in range(iterations):
        np.savez(folder / "inputs" / f"{i}.npz", x=np.full((1, 64), 0.5 * i, np.float32))
    cfg = write_gate_toml(folder, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    assert run_cli("record", cfg).returncode == 0
    return write_gate_toml(folder, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n' + extra)


def gpu_visible() -> bool:
    """Whether an NVIDIA GPU is visible here (``gate.backend.trt.probe_gpu`` succeeds)."""
    from gate.backend.trt import probe_gpu
    from gate.errors import GateError

    try:
        probe_gpu()
    except GateError:
        return False
    return True


def make_nan_gate(folder: Path) -> Path:
    """A gate of ``make_small_model`` over 3 stored inputs (npz) with golden outputs recorded, then
    input 1 set to NaN: a check fails on it, a check with ``--validate`` stops there. Returns gate.toml."""
    make_small_model(folder / "m.onnx")
    (folder / "inputs").mkdir()
    for i in range(3):
        np.savez(folder / "inputs" / f"{i}.npz", x=np.full((1, 64), i, np.float32))
    config = write_gate_toml(folder, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    assert run_cli("record", config).returncode == 0
    np.savez(folder / "inputs" / "1.npz", x=np.full((1, 64), np.nan, np.float32))
    return config
