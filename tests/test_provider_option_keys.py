"""Provider options ONNX Runtime would ignore are one-line errors, never dropped in silence: an option
that ONNX Runtime does not report for its provider (``session.get_provider_options()``: the CPU
provider reports none and ignores any, so ``use_tf23`` or ``use_tf32`` given to it had no effect),
options for a provider that is not among the execution providers (``run`` too), and options under a
provider name given in short form (``cpu``). Real ONNX Runtime CPU sessions on the shipped example."""

from __future__ import annotations

import pytest

from gate.backend.onnxrt import OnnxrtRunner, SessionFromOnnx
from gate.errors import GateError

from conftest import run_cli

CPU = "CPUExecutionProvider"
CPU_NONE = f"would be ignored: ONNX Runtime reports no options for {CPU}, so none takes effect."


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_check_refuses_a_cpu_provider_option_flag(example):
    # before the fix: exit 0, "execution providers: CPUExecutionProvider(use_tf23=0)", the option ignored
    proc = run_cli(
        "check", example / "gate.toml", "--provider-options", f"{CPU}:use_tf23=0", "--junit", example / "j.xml"
    )
    line = _one_error_line(proc)
    assert line.endswith(f"model.onnx: provider_options.{CPU}.use_tf23 {CPU_NONE}"), line
    assert "PASSED" not in proc.stdout


def test_check_refuses_a_gate_toml_cpu_provider_option(example):
    table = f"provider_options = {{ {CPU} = {{ use_tf32 = 0 }} }}\n"
    text = (example / "gate.toml").read_text().replace("[compare]", f"{table}[compare]", 1)
    (example / "gate.toml").write_text(text)
    line = _one_error_line(run_cli("check", example / "gate.toml", "--junit", example / "j.xml"))
    assert line.endswith(f"provider_options.{CPU}.use_tf32 {CPU_NONE}"), line


@pytest.mark.parametrize(
    "providers, options",
    [
        ([CPU], {CPU: {"use_tf23": 0}}),
        ([(CPU, {"use_tf23": "0"})], None),  # Polygraphy's (name, options) tuple
        (["cpu"], {"cpu": {"use_tf23": 0}}),  # the short name as given: before the fix dropped in silence
    ],
)
def test_session_refuses_options_the_provider_does_not_report(example, providers, options):
    session = SessionFromOnnx(example / "model.onnx", providers, provider_options=options)
    with pytest.raises(GateError) as err:
        OnnxrtRunner(session).activate()
    assert str(err.value) == f"{example / 'model.onnx'}: provider_options.{CPU}.use_tf23 {CPU_NONE}"


class _ReportedOptions:
    """Stands for a CUDA session (no GPU here): only the options table ONNX Runtime 1.31 reports."""

    def get_provider_options(self):
        return {
            "CUDAExecutionProvider": {"device_id": "0", "use_tf32": "1", "gpu_mem_limit": "184467"},
            CPU: {},
        }


def test_unknown_key_names_the_provider_the_key_and_the_valid_keys():
    from gate.backend.providers import require_known_options

    session = _ReportedOptions()
    require_known_options(session, {"CUDAExecutionProvider": {"use_tf32": "0", "device_id": "0"}}, "m.onnx")
    with pytest.raises(GateError) as err:
        require_known_options(session, {"CUDAExecutionProvider": {"use_tf23": "0"}}, "m.onnx")
    assert str(err.value) == (
        "m.onnx: provider_options.CUDAExecutionProvider.use_tf23 is not an option of CUDAExecutionProvider "
        "(did you mean 'use_tf32'?) and would be ignored; ONNX Runtime reports device_id, gpu_mem_limit, use_tf32."
    )
    require_known_options(session, {"TensorrtExecutionProvider": {"x": "1"}}, "m.onnx")  # inactive: require_active


def test_run_checks_provider_options_against_execution_providers(example):
    # before the fix: the error came from the session, named the model, not the flag
    proc = run_cli(
        "run", "model.onnx", "--onnxrt", "--provider-options", "CUDAExecutionProvider:use_tf32=0", cwd=example
    )  # fmt: skip
    assert _one_error_line(proc) == (
        "accuracy-gate: error: --provider-options: provider_options names 'CUDAExecutionProvider', which is not one "
        "of the execution providers ['CPUExecutionProvider']."
    )


def test_run_refuses_an_option_under_a_short_provider_name(example):
    # before the fix: exit 0 and the option under 'cpu' never reached ONNX Runtime
    proc = run_cli(
        "run", "model.onnx", "--onnxrt", "--execution-providers", "cpu", "--provider-options", "cpu:use_tf32=0",
        cwd=example,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stdout
    assert f"provider_options.{CPU}.use_tf32 {CPU_NONE}" in proc.stderr.strip().splitlines()[-1]


def test_reason_quotes_onnxruntimes_ep_error_not_its_banner():
    """ONNX Runtime's fallback notice (onnxruntime_inference_collection.py, InferenceSession.__init__:
    a banner line, ``EP Error {e} when using {providers}``, ``Falling back to ...``, a closing line) is
    what a CUDA session with an unknown option prints on a GPU machine. No GPU here, so this feeds that
    captured text to the extraction function: the reason is the error between "EP Error" and "when
    using", not the banner."""
    from gate.backend.providers import _reason

    lines = [
        "*************** EP Error ***************",
        'EP Error [ONNXRuntimeError] : 1 : FAIL : Unknown provider option: "use_tf23". '
        "when using ['CUDAExecutionProvider', 'CPUExecutionProvider']",
        "Falling back to ['CPUExecutionProvider'] and retrying.",
        "****************************************",
    ]
    assert _reason("CUDAExecutionProvider", lines) == (
        '[ONNXRuntimeError] : 1 : FAIL : Unknown provider option: "use_tf23"'
    )
    # the same notice with a multi-line error, after an unrelated log line
    lines = [
        "2026-12-01 W:onnxruntime: some log line",
        lines[0],
        "EP Error first part",
        "second part. when using ['CUDAExecutionProvider', 'CPUExecutionProvider']",
        *lines[2:],
    ]
    assert _reason("CUDAExecutionProvider", lines) == "first part second part"
    # the run-time fallback (InferenceSession._run: "EP Error: {err} using {providers}")
    assert _reason(
        "CUDAExecutionProvider",
        [
            "EP Error: CUDA failure 2: out of memory using ['CUDAExecutionProvider']",
            "Falling back to ['CPUExecutionProvider'] and retrying.",
        ],
    ) == ("CUDA failure 2: out of memory")
    # a banner alone is no reason
    assert (
        _reason("CUDAExecutionProvider", ["*************** EP Error ***************"]) == "ONNX Runtime gave no reason"
    )
