"""fp16 / bf16 / int8 on strongly typed TensorRT (``gate.backend.trt.precision``), for real with
TensorRT-RTX on the CPU: ``--fp16`` converts the ONNX model (onnxconverter-common, or ModelOpt AutoCast
where installed) and the converted model parses and builds, for the shipped PP-OCR classifier and
PP-OCRv4 recognition (rapidocr-onnxruntime); the conversion is cached with the engine and keyed by the
converter's version and settings; ``--int8`` says what it needs. The converted model also runs under
ONNX Runtime CPU: ``check --preview-precision fp16`` on the shipped example."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from gate.backend.trt import TrtBuildSettings, build_engine
from gate.backend.trt.precision import convert_model, converter, prepare_build, strongly_typed_only
from gate.errors import GateError

from conftest import EXAMPLE, EXAMPLE_OUTPUT, run_cli

trt = pytest.importorskip("tensorrt_rtx", reason="TensorRT-RTX is not installed (pip install tensorrt-rtx-cu13)")
pytest.importorskip("onnxconverter_common", reason="the precision extra is not installed (pip install '.[precision]')")

CLS = EXAMPLE / "model.onnx"
HAS_MODELOPT = importlib.util.find_spec("modelopt") is not None


def _rec() -> Path:
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    path = Path(spec.submodule_search_locations[0]) / "models" / "ch_PP-OCRv4_rec_infer.onnx" if spec else None
    if path is None or not path.is_file():
        pytest.skip("ppocr_v4_rec needs rapidocr-onnxruntime (pip install --no-deps rapidocr-onnxruntime==1.4.4)")
    return path


def _float_types(model) -> set[int]:
    """The float types (1 float32, 10 float16, 16 bfloat16) of the model's weights: initializers and
    Constant nodes."""
    tensors = list(model.graph.initializer) + [
        attr.t for node in model.graph.node if node.op_type == "Constant" for attr in node.attribute if attr.t.dims
    ]
    return {t.data_type for t in tensors if t.data_type in (1, 10, 16)}


def test_tensorrt_rtx_is_strongly_typed_only():
    assert strongly_typed_only(trt)
    assert not hasattr(trt.BuilderFlag, "FP16")


@pytest.mark.parametrize(
    ("model", "shape"),
    [(lambda: CLS, [1, 3, 48, 192]), (_rec, [2, 3, 48, 320])],
    ids=["ppocr_cls", "ppocr_v4_rec"],
)
def test_fp16_converts_the_model_and_tensorrt_rtx_builds_it(model, shape, tmp_path):
    path = model()
    settings = TrtBuildSettings(flavour="tensorrt_rtx", fp16=True, input_shapes={"x": shape})
    built = build_engine(path, settings, cache_dir=tmp_path / "cache")
    assert len(built.serialized) > 100_000 and not built.from_cache
    assert built.inputs["x"]["dtype"] == "FLOAT"  # keep_io_types: stored inputs still fit
    converted = list((tmp_path / "cache" / "converted").glob("*.onnx"))
    assert len(converted) == 1
    model16 = onnx.load(str(converted[0]))
    assert _float_types(model16) == {10}  # every float initializer is float16 now (was {1})
    assert _float_types(onnx.load(str(path))) == {1}
    assert [i.type.tensor_type.elem_type for i in model16.graph.input] == [1]
    entry = json.loads((built.engine_path.parent / "entry.json").read_text())
    conv = entry["key_fields"]["precision_conversion"]
    expected = converter("fp16")
    assert conv == {"precision": "fp16", **expected}
    assert conv["version"]  # the converter's version is in the engine-cache key
    again = build_engine(path, settings, cache_dir=tmp_path / "cache")
    assert again.from_cache and again.key == built.key


def test_the_conversion_is_cached_by_model_converter_and_settings(tmp_path):
    first, conv = convert_model(CLS, "fp16", tmp_path)
    stamp = first.stat().st_mtime_ns
    second, _ = convert_model(CLS, "fp16", tmp_path)
    assert second == first and second.stat().st_mtime_ns == stamp  # from the cache, not converted again
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)
    a = ort.InferenceSession(str(CLS), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    b = ort.InferenceSession(str(first), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert b.dtype == np.float32 and 0 < np.abs(a - b).max() < 5e-2  # fp16 rounding, not garbage


def test_int8_and_bf16_say_what_they_need(tmp_path):
    with pytest.raises(GateError, match=r"--int8 is not available with TensorRT flavour tensorrt_rtx: .*explicit"):
        TrtBuildSettings(flavour="tensorrt_rtx", int8=True)

    class Settings:  # what TensorRT 11 (flavour tensorrt) would be given
        int8, fp16, bf16 = True, False, False

    with pytest.raises(GateError, match=r"--int8 on strongly typed TensorRT \(tensorrt_rtx .*QuantizeLinear"):
        prepare_build(trt, CLS, Settings(), tmp_path)
    bf16 = TrtBuildSettings(flavour="tensorrt_rtx", bf16=True, input_shapes={"x": [1, 3, 48, 192]})
    if not HAS_MODELOPT:
        with pytest.raises(GateError, match=r"--bf16 on strongly typed TensorRT needs ModelOpt AutoCast"):
            build_engine(CLS, bf16)
    else:  # ModelOpt AutoCast converts to bf16 too, and TensorRT-RTX builds it
        assert build_engine(CLS, bf16, cache_dir=tmp_path / "cache").serialized
        (converted,) = (tmp_path / "cache" / "converted").glob("*.onnx")
        assert 16 in _float_types(onnx.load(str(converted)))


def test_tensorrt_without_conversion_keeps_its_settings(tmp_path):
    path, settings, conversion = prepare_build(trt, CLS, TrtBuildSettings(flavour="tensorrt_rtx", tf32=True), tmp_path)
    assert path == CLS and settings.tf32 and conversion is None
    assert not (tmp_path / "converted").exists()


def test_fp16_preview_of_the_shipped_example(example):
    proc = run_cli(
        "check",
        example / "gate.toml",
        "--preview-precision",
        "fp16",
        "--engine-cache",
        example / "cache",
        "--report",
        example / "r.json",
        "--markdown",
        example / "r.md",
        cwd=example,  # the default JUnit path ([report] junit) is the working directory's
    )
    assert proc.returncode == 1, proc.stderr  # fp16 moves the softmax outputs past atol 1e-5
    report = json.loads((example / "r.json").read_text())
    row = report["rows"][0]
    assert row["output"] == EXAMPLE_OUTPUT and row["iterations"] == 8
    assert 1e-4 < row["abs_value"] < 5e-2
    assert report["model"] == "model.onnx"
    facts = report["facts"]
    name = converter("fp16")["name"]
    assert facts["preview_precision"].startswith(f"fp16 ({name} ")
    assert facts["preview_of"] == "model.onnx" and facts["execution_providers"] == "CPUExecutionProvider"
    assert f"fp16 preview: the model converted by {name}, run by ONNX Runtime CPU" in proc.stdout
    assert "fp16 preview" in report["scope"]
    assert f"preview\\_precision: `{facts['preview_precision']}`" in (example / "r.md").read_text()
    plain = run_cli("check", example / "gate.toml", "--report", example / "p.json", cwd=example)
    assert plain.returncode == 0  # the golden set passes in float32
    assert json.loads((example / "p.json").read_text())["rows"][0]["abs_value"] == 0.0
