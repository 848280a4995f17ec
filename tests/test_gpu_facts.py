"""GPU facts and the TF32 note (``gate.backend.gpu_facts``) where no GPU is used: nothing GPU-related
is reported for a CPU run, the loaded-library reader finds ONNX Runtime's own library, and the TF32
note appears exactly when the CUDA provider ran with TF32 on and a float output failed (real rows
of a real failing check of the shipped example). The facts on a real GPU: tests/test_gpu_onnxrt.py."""

from __future__ import annotations

import ctypes.util

import onnxruntime as ort

from gate.backend.gpu_facts import (
    TF32_NOTE,
    device_facts,
    library_facts,
    loaded_library,
    precision_note,
    runtime_facts,
    tf32_in_use,
)
from gate.config import load_config
from gate.job import check
from gate.report.text import render_text

from conftest import EXAMPLE, perturb_golden


def test_tf32_in_use_reads_the_cuda_providers_options():
    assert tf32_in_use({"onnxrt_providers": "CUDAExecutionProvider(device_id=0, use_tf32=1), CPUExecutionProvider"})
    assert tf32_in_use({"onnxrt_providers": "CUDAExecutionProvider, CPUExecutionProvider"})  # ORT's default: on
    assert not tf32_in_use({"onnxrt_providers": "CUDAExecutionProvider(device_id=0, use_tf32=0)"})
    assert not tf32_in_use({"onnxrt_providers": "CPUExecutionProvider(use_tf32=1)"})
    assert not tf32_in_use({})


def test_loaded_library_and_cpu_facts():
    ort.InferenceSession(str(EXAMPLE / "model.onnx"), providers=["CPUExecutionProvider"])
    path = loaded_library("libonnxruntime")
    assert path is not None and "onnxruntime" in path  # /proc/self/maps read for real
    assert loaded_library("libcudart.so") is None
    facts = library_facts()  # no CUDA library is loaded by a CPU session (TensorRT-RTX may be, by other tests)
    assert "cuda_runtime_version" not in facts and "cudnn_version" not in facts
    if ctypes.util.find_library("cuda") is None:
        assert device_facts() == {}


def test_the_tf32_note_and_the_runtime_lines(example):
    perturb_golden(example / "data" / "test_data_set_2" / "output_0.pb", (0, 0), 1e-2)
    result = check(load_config(example / "gate.toml"))
    assert result.status == "regressed"
    assert "note" not in result.facts and "runtime:" not in render_text(result)  # a CPU run: nothing added
    assert runtime_facts([]) == {}
    cuda_on = {"onnxrt_providers": "CUDAExecutionProvider(device_id=0, use_tf32=1), CPUExecutionProvider"}
    assert precision_note(cuda_on, result.rows) == TF32_NOTE
    assert precision_note({"onnxrt_providers": "CUDAExecutionProvider(use_tf32=0)"}, result.rows) is None
    passing = check(load_config(EXAMPLE / "gate.toml"))
    assert precision_note(cuda_on, passing.rows) is None  # nothing failed
    result.facts.update(cuda_on, gpu_name="NVIDIA H200", gpu_compute_capability="9.0", cudnn_version="9.13.0")
    result.facts["note"] = TF32_NOTE
    text = render_text(result)
    assert "runtime: GPU NVIDIA H200, compute capability 9.0, cuDNN 9.13.0" in text
    assert f"execution providers: {cuda_on['onnxrt_providers']}" in text
    assert f"note: {TF32_NOTE}" in text
