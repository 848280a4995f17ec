"""The TensorRT logger bridge (``gate.backend.trt.flavour``) against the real ``tensorrt_rtx`` module:
the runner looks TensorRT's reason up by the module of an engine's class
(``tensorrt_rtx_bindings.tensorrt_rtx``), the builder by the package (``tensorrt_rtx``); both must
reach the same logger, and a custom ``ILogger``'s ``min_severity`` must filter (TensorRT does not
filter for it)."""

from __future__ import annotations

import logging

import pytest

from gate.backend.trt import TrtBuildSettings, build_engine
from gate.backend.trt.flavour import last_error, module_of, trt_logger
from gate.errors import GateError

from conftest import make_small_model

trt = pytest.importorskip("tensorrt_rtx", reason="TensorRT-RTX is not installed (pip install tensorrt-rtx-cu13)")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return make_small_model(tmp_path_factory.mktemp("models") / "small.onnx")


def _failed_build(small) -> str:
    # TensorRT-RTX cannot compile an fp32 MatMul for Turing: a real build failure on every machine.
    with pytest.raises(GateError) as caught:
        build_engine(
            small, TrtBuildSettings(flavour="tensorrt_rtx", input_shapes={"x": [1, 64]}, compute_capabilities=["7.5"])
        )
    return str(caught.value)


def test_the_bindings_module_and_the_package_share_one_logger(small):
    builder = trt.Builder(trt_logger(trt))
    bindings = module_of(builder)
    assert bindings.__name__ == "tensorrt_rtx_bindings.tensorrt_rtx"  # what the runner passes
    assert trt_logger(bindings) is trt_logger(trt)
    message = _failed_build(small)
    reason = last_error(bindings, "no reason given")
    assert reason != "no reason given"  # before the fix: the runner's lookup found no logger
    assert "Turing" in reason and reason.split()[0] in message


def test_min_severity_filters_a_custom_logger(small, caplog):
    logger = trt_logger(trt)
    saved = logger.min_severity
    try:
        with caplog.at_level(logging.DEBUG, logger="gate.backend.trt"):
            logger.min_severity = trt.ILogger.Severity.VERBOSE
            build_engine(small, TrtBuildSettings(flavour="tensorrt_rtx", input_shapes={"x": [1, 64]}))
            verbose = [r for r in caplog.records if r.getMessage().startswith("TensorRT: ")]
            caplog.clear()
            logger.min_severity = trt.ILogger.Severity.ERROR
            build_engine(small, TrtBuildSettings(flavour="tensorrt_rtx", input_shapes={"x": [2, 64]}))
            quiet = [r for r in caplog.records if r.getMessage().startswith("TensorRT: ")]
            errors_kept = _failed_build(small)
    finally:
        logger.min_severity = saved
    assert len(verbose) > 10  # TensorRT's info and verbose messages reached the Python log
    assert quiet == []  # before the fix every one of them did, whatever min_severity said
    assert "Turing" in errors_kept  # errors are kept whatever min_severity says
