"""``[onnxrt] provider_options`` (gate.toml, ``--provider-options``, the ``provider_options`` input),
passed to ONNX Runtime; every requested execution provider must be active in the session, else one
line naming it and ONNX Runtime's reason (exit 2). Real ONNX Runtime CPU sessions on the shipped
example; the CUDA provider is requested where this onnxruntime build lacks it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import onnxruntime as ort
import pytest

from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
from gate.backend.providers import (
    check_provider_options,
    describe_providers,
    merge_provider_options,
    parse_provider_options,
)
from gate.config import load_config
from gate.errors import GateError

from conftest import run_cli

pytestmark = pytest.mark.skipif(
    "CUDAExecutionProvider" in ort.get_available_providers(), reason="needs an onnxruntime build without CUDA"
)


def _write_onnxrt(example, table: str):
    text = (example / "gate.toml").read_text()
    text = text.replace('execution_providers = ["CPUExecutionProvider"]\n', table)
    (example / "gate.toml").write_text(text)


def test_parse_provider_options_entries():
    assert parse_provider_options(
        ["CUDAExecutionProvider:device_id=0,use_tf32=0", "CUDAExecutionProvider:gpu_mem_limit=1024"], "--x"
    ) == {"CUDAExecutionProvider": {"device_id": "0", "use_tf32": "0", "gpu_mem_limit": "1024"}}
    assert parse_provider_options("A:k=v\nB:x=1", "in") == {"A": {"k": "v"}, "B": {"x": "1"}}
    with pytest.raises(GateError, match=r"^--x: 'use_tf32=0' is not PROVIDER:KEY=VALUE"):
        parse_provider_options(["use_tf32=0"], "--x")
    with pytest.raises(GateError, match=r"^--x: option 'use_tf32' of CUDAExecutionProvider is not KEY=VALUE\.$"):
        parse_provider_options(["CUDAExecutionProvider:use_tf32"], "--x")


def test_check_provider_options_types_and_names():
    eps = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert check_provider_options({"CUDAExecutionProvider": {"device_id": 0, "use_tf32": False}}, eps, "g") == {
        "CUDAExecutionProvider": {"device_id": "0", "use_tf32": "0"}
    }
    with pytest.raises(GateError, match=r"names 'TensorrtExecutionProvider', which is not one of the execution"):
        check_provider_options({"TensorrtExecutionProvider": {}}, eps, "g")
    with pytest.raises(GateError, match=r"provider_options\.CUDAExecutionProvider\.device_id must be a string"):
        check_provider_options({"CUDAExecutionProvider": {"device_id": [0]}}, eps, "g")
    assert merge_provider_options({"A": {"x": "1", "y": "2"}}, {"A": {"y": "3"}, "B": {"z": "4"}}) == {
        "A": {"x": "1", "y": "3"},
        "B": {"z": "4"},
    }
    assert describe_providers({"CUDAExecutionProvider": {"use_tf32": "0"}, "CPUExecutionProvider": {}}) == (
        "CUDAExecutionProvider(use_tf32=0), CPUExecutionProvider"
    )


def test_gate_toml_provider_options_reach_onnxruntime(example):
    _write_onnxrt(
        example,
        'execution_providers = ["CPUExecutionProvider"]\n'
        'provider_options = { CPUExecutionProvider = { arena_extend_strategy = "kSameAsRequested" } }\n',
    )
    cfg = load_config(example / "gate.toml")
    assert cfg.provider_options == {"CPUExecutionProvider": {"arena_extend_strategy": "kSameAsRequested"}}
    session = SessionFromOnnx(cfg.model, cfg.execution_providers, provider_options=cfg.provider_options)
    assert session.provider_options == cfg.provider_options
    # ONNX Runtime's CPU provider takes no options (it reports none and ignores any): refused, not dropped
    with pytest.raises(GateError, match=r"provider_options\.CPUExecutionProvider\.arena_extend_strategy would be"):
        OnnxrtRunner(session).activate()
    with OnnxrtRunner(SessionFromOnnx(cfg.model, cfg.execution_providers)) as runner:
        assert runner.sess.get_providers() == ["CPUExecutionProvider"]
    assert runner.execution_providers == ["CPUExecutionProvider"]  # kept after deactivation, for the facts
    assert runner.providers_in_use == {"CPUExecutionProvider": {}}


def test_check_reports_the_providers_in_use_with_their_options(example):
    proc = run_cli("check", example / "gate.toml", "--junit", example / "j.xml", "--report", example / "r.json")
    assert proc.returncode == 0, proc.stderr
    expected = "CPUExecutionProvider"  # options in effect appear as CUDAExecutionProvider(use_tf32=0): GPU tests
    assert "execution providers:" not in proc.stdout  # shown only where a provider has options in effect
    facts = json.loads((example / "r.json").read_text())["facts"]
    assert facts["onnxrt_providers"] == expected
    assert facts["execution_providers"] == "CPUExecutionProvider"
    assert "gpu_name" not in facts  # no GPU was used
    props = {p.get("name"): p.get("value") for p in ET.parse(example / "j.xml").iter("property")}
    assert props["onnxrt_providers"] == expected


def test_requested_cuda_provider_that_is_not_active_is_an_error_with_onnxruntimes_reason(example):
    _write_onnxrt(
        example,
        'execution_providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]\n'
        "provider_options = { CUDAExecutionProvider = { device_id = 0, use_tf32 = 0 } }\n",
    )
    proc = run_cli("check", example / "gate.toml", "--junit", example / "j.xml")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "execution provider CUDAExecutionProvider is not active in the ONNX Runtime session" in lines[0]
    assert "(it runs on CPUExecutionProvider)" in lines[0]
    # ONNX Runtime's own words (its warning while making the session), not a guess of ours
    assert (
        "ONNX Runtime says: Specified provider 'CUDAExecutionProvider' is not in available provider names" in lines[0]
    )
    assert "EP Error" not in proc.stdout and "UserWarning" not in proc.stderr.replace(lines[0], "")


def test_provider_options_flag_overrides_gate_toml_and_is_checked(example):
    _write_onnxrt(
        example,
        'execution_providers = ["CPUExecutionProvider"]\n'
        'provider_options = { CPUExecutionProvider = { arena_extend_strategy = "kNextPowerOfTwo" } }\n',
    )
    cfg = load_config(
        example / "gate.toml",
        {"provider_options": parse_provider_options(["CPUExecutionProvider:arena_extend_strategy=x"], "--p")},
        {"provider_options": "--provider-options"},
    )
    assert cfg.provider_options == {"CPUExecutionProvider": {"arena_extend_strategy": "x"}}
    proc = run_cli("check", example / "gate.toml", "--provider-options", "CUDAExecutionProvider:use_tf32=0")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "accuracy-gate: error: --provider-options: provider_options names 'CUDAExecutionProvider', which is not one "
        "of the execution providers ['CPUExecutionProvider']."
    )
    proc = run_cli("check", example / "gate.toml", "--provider-options", "use_tf32=0")
    assert proc.returncode == 2
    assert "--provider-options: 'use_tf32=0' is not PROVIDER:KEY=VALUE" in proc.stderr


def test_gate_toml_provider_options_errors_name_the_file(example):
    _write_onnxrt(example, 'execution_providers = ["CPUExecutionProvider"]\nprovider_options = { X = { a = 1 } }\n')
    with pytest.raises(GateError, match=r"gate\.toml: provider_options names 'X', which is not one of"):
        load_config(example / "gate.toml")


def test_action_input_provider_options(example):
    from gate.action import overrides_from_inputs

    env = {"INPUT_PROVIDER_OPTIONS": "CUDAExecutionProvider:device_id=1,use_tf32=0\nCPUExecutionProvider:a=b"}
    overrides = overrides_from_inputs(env)
    assert overrides["provider_options"] == {
        "CUDAExecutionProvider": {"device_id": "1", "use_tf32": "0"},
        "CPUExecutionProvider": {"a": "b"},
    }
    with pytest.raises(GateError, match=r"^Input `provider_options`: 'x' is not PROVIDER:KEY=VALUE"):
        overrides_from_inputs({"INPUT_PROVIDER_OPTIONS": "x"})
