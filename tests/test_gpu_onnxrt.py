"""ONNX Runtime's CUDA execution provider for real (marked ``gpu``; on the device machine with
onnxruntime-gpu: ``PYTHONPATH=. python -m pytest -m gpu tests/test_gpu_onnxrt.py``): the provider is
active, ``use_tf32`` on / off changes the error of a real model (ppocr_v4_rec) by orders of magnitude
and flips the verdict at atol 1e-4, the GPU facts are in every report, and ``--devices 0`` equals an
unsharded run."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from conftest import EXAMPLE, ROOT, run_cli

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(
        "CUDAExecutionProvider" not in ort.get_available_providers(), reason="needs onnxruntime-gpu (CUDA provider)"
    ),
]

CUDA = "CUDAExecutionProvider"


def _rec_model() -> Path | None:
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None:
        return None
    path = Path(spec.submodule_search_locations[0]) / "models" / "ch_PP-OCRv4_rec_infer.onnx"
    return path if path.is_file() else None


def _config(folder: Path, providers: str, tf32: int, atol="1e-4", extra: str = "") -> Path:
    text = (
        'model = "model.onnx"\ninputs = "inputs"\ngolden = "golden"\n'
        f"[onnxrt]\nexecution_providers = {providers}\n{extra}"
        f"[compare]\natol = {atol}\nrtol = 1e-5\n"
    )
    if tf32 is not None:
        text = text.replace(
            "[compare]", f"provider_options = {{ {CUDA} = {{ device_id = 0, use_tf32 = {tf32} }} }}\n[compare]"
        )
    cfg = folder / f"gate-tf32-{tf32}.toml"
    cfg.write_text(text)
    return cfg


@pytest.fixture(scope="module")
def rec(tmp_path_factory) -> Path:
    """ppocr_v4_rec with 32 rendered text lines and golden outputs from ONNX Runtime CPU."""
    model = _rec_model()
    if model is None:
        pytest.skip("ppocr_v4_rec needs rapidocr-onnxruntime (pip install --no-deps rapidocr-onnxruntime==1.4.4)")
    sys.path.insert(0, str(ROOT / "bench"))
    from golden_job import text_line

    folder = tmp_path_factory.mktemp("rec")
    (folder / "inputs").mkdir()
    rng = np.random.default_rng(0)
    for i in range(32):
        np.savez(folder / "inputs" / f"{i:05d}.npz", x=text_line(rng))
    shutil.copy(model, folder / "model.onnx")
    cpu = _config(folder, '["CPUExecutionProvider"]', None)
    proc = run_cli("record", cpu, "--root", folder)
    assert proc.returncode == 0, proc.stderr
    return folder


def _check(cfg: Path, *flags) -> tuple[object, dict, dict]:
    out = cfg.parent / f"{cfg.stem}{''.join(flags).replace('-', '_')}"
    proc = run_cli(
        "check",
        cfg,
        "--root",
        cfg.parent,
        "--junit",
        f"{out}.xml",
        "--report",
        f"{out}.json",
        "--markdown",
        f"{out}.md",
        *flags,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    report = json.loads(Path(f"{out}.json").read_text())
    props = {p.get("name"): p.get("value") for p in ET.parse(f"{out}.xml").iter("property")}
    return proc, report, props


def test_cuda_provider_is_active_with_its_options():
    from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx

    session = SessionFromOnnx(
        EXAMPLE / "model.onnx", [CUDA, "CPUExecutionProvider"], provider_options={CUDA: {"use_tf32": 0}}
    )
    with OnnxrtRunner(session) as runner:
        assert runner.sess.get_providers()[0] == CUDA
        assert runner.sess.get_provider_options()[CUDA]["use_tf32"] == "0"
    assert runner.providers_in_use[CUDA]["use_tf32"] == "0"
    assert runner.providers_in_use[CUDA]["device_id"] == "0"


def test_tf32_on_off_changes_the_error_by_orders_of_magnitude_and_flips_the_verdict(rec):
    providers = f'["{CUDA}", "CPUExecutionProvider"]'
    on_proc, on, on_props = _check(_config(rec, providers, 1))
    off_proc, off, off_props = _check(_config(rec, providers, 0))
    abs_on, abs_off = on["rows"][0]["abs_value"], off["rows"][0]["abs_value"]
    print(f"ppocr_v4_rec, 32 lines, max |CUDA - CPU|: use_tf32=1 {abs_on:.3g}, use_tf32=0 {abs_off:.3g}")
    assert on_proc.returncode == 1 and on["status"] == "regressed"
    assert off_proc.returncode == 0 and off["status"] == "passed"
    assert abs_on > 1e-4 > abs_off
    assert abs_on / abs_off >= 100  # orders of magnitude
    # The failing TF32 run says why, in every report
    assert "note: the CUDA execution provider ran with TF32 on" in on_proc.stdout
    assert on["facts"]["note"].startswith("the CUDA execution provider ran with TF32 on")
    assert on_props["note"] == on["facts"]["note"]
    assert "TF32 on" in Path(rec / "gate-tf32-1.md").read_text()
    assert "note" not in off["facts"]
    assert on["facts"]["onnxrt_providers"].startswith(f"{CUDA}(device_id=0, use_tf32=1")
    assert off["facts"]["onnxrt_providers"].startswith(f"{CUDA}(device_id=0, use_tf32=0")


def test_gpu_facts_in_every_report(rec):
    proc, report, props = _check(_config(rec, f'["{CUDA}", "CPUExecutionProvider"]', 0))
    facts = report["facts"]
    print({k: v for k, v in facts.items() if k not in ("model_sha256",)})
    assert facts["gpu_name"] and "NVIDIA" in facts["gpu_name"]
    assert re.fullmatch(r"\d+\.\d+", facts["gpu_compute_capability"])
    assert re.fullmatch(r"\d+\.\d+(\.\d+)?", facts["gpu_driver"])
    assert re.fullmatch(r"\d+\.\d+", facts["cuda_runtime_version"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", facts["cudnn_version"])
    assert facts["execution_providers"] == f"{CUDA},CPUExecutionProvider"
    for key in ("gpu_name", "gpu_compute_capability", "gpu_driver", "cuda_runtime_version", "cudnn_version"):
        assert props[key] == facts[key]  # JUnit properties
    assert f"runtime: GPU {facts['gpu_name']}, compute capability {facts['gpu_compute_capability']}" in proc.stdout
    assert facts["cudnn_version"] in (rec / "gate-tf32-0.md").read_text()


def test_devices_0_equals_an_unsharded_run(rec):
    # TF32 on: errors well away from zero, so equality is number for number, not 0 == 0
    extra = f'provider_options = {{ {CUDA} = {{ use_tf32 = 1, cudnn_conv_algo_search = "DEFAULT" }} }}\n'
    cfg = _config(rec, f'["{CUDA}", "CPUExecutionProvider"]', None, extra=extra)
    _, whole, _ = _check(cfg)
    proc, merged, _ = _check(cfg, "--devices", "0")
    print(f"--devices 0: abs {merged['rows'][0]['abs_value']!r} vs unsharded {whole['rows'][0]['abs_value']!r}")
    assert "1 shard in parallel on devices 0" in proc.stdout
    assert merged["rows"] == whole["rows"]
    assert merged["rows"][0]["abs_value"] > 1e-4
    assert merged["facts"]["cuda_visible_devices"] == "0"
