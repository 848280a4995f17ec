"""TensorRT build settings and their flag parsers, the build-progress lines, the engine cache's own
checks, and the flavour helpers: pure Python, no TensorRT needed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gate.backend.trt import (
    BuildProgress,
    EngineCache,
    Profile,
    TrtBuildSettings,
    parse_shape_args,
    parse_size,
    profiles_from_shapes,
)
from gate.backend.trt.flavour import check_flavour, from_bf16_bits, import_trt, to_bf16_bits
from gate.errors import GateError


def test_shape_args_split_on_the_last_colon():
    assert parse_shape_args(["x:[1,3,224,224]", "serving:input:0:[batch,8]", "sr:[]"]) == {
        "x": [1, 3, 224, 224],
        "serving:input:0": ["batch", 8],
        "sr": [],
    }
    with pytest.raises(GateError, match=r"--trt-min-shapes: 'x' is not name:\[d0,d1,...\]"):
        parse_shape_args(["x"], "--trt-min-shapes")
    with pytest.raises(GateError, match=r"--input-shapes x: '1,2' is not a shape like \[1,3,224,224\]"):
        parse_shape_args(["x:1,2"])


@pytest.mark.parametrize(
    ("text", "size"),
    [("1G", 1 << 30), ("512M", 512 << 20), ("64k", 64 << 10), ("1048576", 1 << 20), (4096, 4096), ("1.5G", 3 << 29)],
)
def test_sizes_in_powers_of_1024(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["1T", "-1", "lots", True])
def test_bad_sizes(text):
    with pytest.raises(GateError, match="is not a byte count like 1G"):
        parse_size(text)


def test_profiles_from_repeated_min_opt_max_flags():
    profiles = profiles_from_shapes(
        [{"x": [1, 3]}, {"x": [8, 3]}], [{"x": [2, 3]}, {"x": [16, 3]}], [{"x": [4, 3]}, {"x": [32, 3]}]
    )
    assert [p.shapes for p in profiles] == [{"x": ((1, 3), (2, 3), (4, 3))}, {"x": ((8, 3), (16, 3), (32, 3))}]
    with pytest.raises(GateError, match="were given 2, 1 and 1 times; each profile needs all three"):
        profiles_from_shapes([{"x": [1]}, {"x": [1]}], [{"x": [1]}], [{"x": [1]}])
    with pytest.raises(GateError, match=r"Profile 0: inputs \['y'\] need a min, an opt and a max shape"):
        profiles_from_shapes([{"x": [1], "y": [1]}], [{"x": [1]}], [{"x": [1]}])


@pytest.mark.parametrize(
    ("triple", "message"),
    [
        (([4], [2], [8]), r"min \[4\] <= opt \[2\] <= max \[8\] does not hold"),
        (([1], [2, 2], [3]), "have different ranks"),
        (([1, "batch"], [1, 2], [1, 2]), "every dim must be a non-negative int"),
        (([1], [2]), r"expected \(min, opt, max\) shapes"),
    ],
)
def test_bad_profiles(triple, message):
    with pytest.raises(GateError, match=message):
        Profile({"x": triple})


def test_settings_defaults_and_effective_profiles():
    settings = TrtBuildSettings()
    assert settings.flavour == "tensorrt" and not settings.tf32 and settings.effective_profiles() == ()
    fixed = TrtBuildSettings(input_shapes={"x": [1, 3]})
    assert fixed.effective_profiles() == (Profile({"x": ((1, 3), (1, 3), (1, 3))}),)
    both = TrtBuildSettings(
        input_shapes={"x": [1, 3]}, profiles=profiles_from_shapes([{"x": [1, 3]}], [{"x": [2, 3]}], [{"x": [4, 3]}])
    )
    assert both.effective_profiles()[0].shapes["x"][2] == (4, 3)  # profiles win over input_shapes
    assert TrtBuildSettings(outputs=["*"]).mark_all and TrtBuildSettings(outputs="y").outputs == ("y",)
    assert TrtBuildSettings(workspace="2G").workspace == 2 << 30
    json.dumps(TrtBuildSettings(outputs="*", profiles=both.profiles, compute_capabilities=None).key_fields())


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"flavour": "onnxrt"}, "TensorRT flavour 'onnxrt' is not one of tensorrt, tensorrt_rtx"),
        ({"flavour": "tensorrt_rtx", "int8": True}, "--int8 is not available with TensorRT flavour tensorrt_rtx"),
        ({"strongly_typed": True, "int8": True}, "--int8 cannot be combined with --strongly-typed"),
        ({"compute_capabilities": ["8.6"]}, "compute_capabilities is a TensorRT-RTX setting"),
        (
            {"flavour": "tensorrt_rtx", "compute_capabilities": ["sm86"]},
            "'sm86' is not 'current' or a version like 8.6",
        ),
        ({"builder_optimization_level": 6}, "expected an int from 0 to 5"),
        ({"outputs": []}, "outputs is empty"),
        ({"input_shapes": {"x": [1, -1]}}, "every dim must be a non-negative int"),
        ({"profiles": [{"x": ([1], [1], [1])}]}, "expected Profile objects"),
    ],
)
def test_settings_errors(kwargs, message):
    with pytest.raises(GateError, match=message):
        TrtBuildSettings(**kwargs)


def test_progress_lines_are_throttled_and_plain():
    now = [0.0]
    lines = []
    progress = BuildProgress(interval_s=5, clock=lambda: now[0], emit=lines.append)
    progress.phase_start(None, "Building engine", 6)
    progress.phase_start("Building engine", "Timing tactics", 3)
    for step in range(3):
        now[0] += 2.0
        assert progress.step_complete("Timing tactics", step) is True
    assert lines == ["TensorRT build, 6 s: Building engine 0/6 > Timing tactics 3/3"]  # one line in 6 s
    progress.phase_finish("Timing tactics")
    now[0] += 5
    progress.step_complete("Building engine", 0)
    assert lines[-1] == "TensorRT build, 11 s: Building engine 1/6"
    assert progress.lines == 2


def test_cache_entries_round_trip_and_a_changed_key_field_is_a_corrupt_entry(tmp_path, caplog):
    cache = EngineCache(tmp_path / "c")
    fields = {"model_sha256": "ab", "settings": {"fp16": True}}
    path = cache.store("k1", fields, b"ENGINE", {"inputs": {"x": {}}}, files={"calibration.cache": b"calib"})
    assert path.read_bytes() == b"ENGINE" and cache.calibration_cache_path("k1").read_bytes() == b"calib"
    entry = cache.load("k1", fields)
    assert entry.engine == b"ENGINE" and entry.info["inputs"] == {"x": {}}
    assert cache.load("other", fields) is None
    assert cache.load("k1", {**fields, "settings": {"fp16": False}}) is None
    assert "is unusable (corrupt: its key fields differ from this build's); rebuilding it." in caplog.text
    assert not cache.entry_dir("k1").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(GateError, match="exists and is not a directory"):
        EngineCache(tmp_path / "file")


def test_timing_cache_is_per_tensorrt_version_and_gpu(tmp_path):
    cache = EngineCache(tmp_path)
    path = cache.timing_cache_path("tensorrt", "10.13.0.35", "NVIDIA H200 NVL", "9.0")
    assert path == tmp_path / "timing" / "tensorrt-10.13.0.35-NVIDIA-H200-NVL-9.0.cache"
    assert cache.read_timing_cache(path) == b""
    cache.write_timing_cache(path, b"timings")
    assert cache.read_timing_cache(path) == b"timings"


def test_flavour_import_errors_say_what_to_install(monkeypatch):
    assert check_flavour("tensorrt_rtx") == "tensorrt_rtx"
    import builtins

    real_import = builtins.__import__

    def no_tensorrt(name, *args, **kwargs):
        if name == "tensorrt":
            raise ImportError("No module named 'tensorrt'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorrt)
    with pytest.raises(
        GateError, match=r"'tensorrt' cannot be imported .*install it: pip install 'accuracy-gate\[trt\]'"
    ):
        import_trt("tensorrt")


def test_bf16_conversion_rounds_to_nearest_even():
    values = np.array([1.0, -2.5, 1.00390625, 1.01171875, 3.0e38, np.inf, np.nan], np.float32)
    bits = to_bf16_bits(values)
    back = from_bf16_bits(bits)
    assert back[0] == 1.0 and back[1] == -2.5
    assert back[2] == 1.0  # halfway between 1.0 and 1.0078125: to even
    assert back[3] == 1.015625  # halfway: rounds up to the even mantissa
    assert np.isinf(back[5]) and np.isnan(back[6])
    assert bits.dtype == np.uint16 and back.dtype == np.float32
