"""The cuda-python layer under TrtRunner (gate/backend/trt/cuda.py), the output allocator's grow path,
the INT8 calibration feed and the GPU probe, on a real NVIDIA GPU.

Marked ``gpu`` (excluded by default); on the device machine:
``PYTHONPATH=. python -m pytest -m gpu tests/test_trt_cuda.py``. The unmarked tests need no GPU.
"""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

from gate.backend.trt.probe import GpuInfo, check_rtx_support, probe_gpu
from gate.errors import GateError

from conftest import gpu_visible

gpu = pytest.mark.gpu


# ---------------------------------------------------------------------------------------------------
# No GPU needed


@pytest.mark.skipif(gpu_visible(), reason="a GPU is visible here: the no-GPU message cannot be seen")
def test_probe_without_a_gpu_says_the_container_lacks_gpus():
    with pytest.raises(GateError) as caught:
        probe_gpu()
    message = str(caught.value)
    assert "No NVIDIA GPU is visible" in message
    assert "the container was probably started without --gpus" in message
    assert "\n" not in message


def test_tensorrt_rtx_refuses_a_hopper_gpu():
    trt = pytest.importorskip("tensorrt_rtx", reason="tensorrt-rtx-cu13 is not installed")
    h200 = GpuInfo(0, "NVIDIA H200", (9, 0), 141 << 30, (13, 0))
    with pytest.raises(
        GateError, match=r"tensorrt_rtx cannot run on NVIDIA H200 \(compute capability 9.0\).*use flavour tensorrt"
    ):
        check_rtx_support(h200, trt)
    check_rtx_support(GpuInfo(0, "NVIDIA GeForce RTX 4090", (8, 9), 24 << 30, (13, 0)), trt)


# ---------------------------------------------------------------------------------------------------
# Real GPU


@gpu
def test_probe_names_the_gpu():
    info = probe_gpu()
    assert info.name and info.compute_capability[0] >= 5
    assert info.total_memory > 1 << 30
    assert info.driver_cuda_version >= (11, 0)
    from gate.backend.trt import cuda

    assert cuda.device_count() >= 1
    with pytest.raises(GateError, match="GPU 99 is not visible"):
        probe_gpu(99)
    print(f"GPU: {info}")


@gpu
def test_device_and_pinned_round_trip_on_one_stream_is_bitwise():
    from gate.backend.trt import cuda

    stream = cuda.Stream()
    assert stream.handle != 0
    data = np.random.default_rng(0).integers(0, 256, 16 << 20, dtype=np.uint8)
    source = cuda.PinnedBuffer(data.nbytes)
    source.write(data)
    first = cuda.DeviceBuffer(data.nbytes)
    second = cuda.DeviceBuffer(data.nbytes)
    back = cuda.PinnedBuffer(data.nbytes)
    back.view(np.uint8, (data.nbytes,))[...] = 0
    first.copy_from_host_async(source.ptr, data.nbytes, stream)
    cuda.copy_async(second.ptr, first.ptr, data.nbytes, "dtod", stream)
    second.copy_to_host_async(back.ptr, data.nbytes, stream)
    stream.synchronize()
    assert np.array_equal(back.view(np.uint8, (data.nbytes,)), data)
    floats = back.view(np.float32, (1024, 1024))
    assert floats.shape == (1024, 1024) and floats.dtype == np.float32
    for buffer in (first, second):
        buffer.free()
    stream.free()
    assert stream.handle == 0


@gpu
def test_synchronous_copy_and_empty_copies():
    from gate.backend.trt import cuda

    array = np.arange(10, dtype=np.int64)
    device = cuda.DeviceBuffer(0)
    assert device.nbytes == 1 and device.ptr != 0  # never a null address
    device.ensure(array.nbytes)
    cuda.copy(device.ptr, array.ctypes.data, array.nbytes, "htod")
    out = np.zeros_like(array)
    cuda.copy(out.ctypes.data, device.ptr, array.nbytes, "dtoh")
    assert np.array_equal(out, array)
    stream = cuda.Stream()
    cuda.copy_async(out.ctypes.data, device.ptr, 0, "dtoh", stream)  # 0 bytes: nothing enqueued
    stream.synchronize()
    stream.free()
    device.free()


@gpu
def test_device_buffer_grows_only_when_larger():
    from gate.backend.trt import cuda

    buffer = cuda.DeviceBuffer(1000)
    address = buffer.ptr
    assert buffer.ensure(10) == address and buffer.ensure(1000) == address
    assert buffer.grow_count == 0
    assert buffer.ensure(1 << 20) != 0 and buffer.nbytes == 1 << 20
    assert buffer.grow_count == 1
    buffer.free()
    assert buffer.ptr == 0


@gpu
def test_a_failed_cuda_call_is_a_one_line_error():
    from gate.backend.trt import cuda

    with pytest.raises(cuda.CudaError, match=r"CUDA call cudaMalloc\(\d+\) failed: cudaErrorMemoryAllocation"):
        cuda.DeviceBuffer(1 << 60)


@gpu
def test_pinned_memory_lives_as_long_as_a_view():
    from gate.backend.trt import cuda

    buffer = cuda.PinnedBuffer(64)
    view = buffer.view(np.float32, (4, 4))
    view[...] = 7
    alive = weakref.ref(buffer)
    del buffer
    gc.collect()
    assert alive() is not None and float(view.sum()) == 112.0
    del view
    gc.collect()
    assert alive() is None
    with pytest.raises(ValueError, match="does not fit"):
        cuda.PinnedBuffer(8).view(np.float64, (2,))


@gpu
def test_output_buffers_grow_path():
    from gate.backend.trt.runner import OutputBuffers

    buffers = OutputBuffers()
    first = buffers.reallocate("out", 4096)
    assert buffers.reallocate("out", 100) == first  # smaller: same memory
    grown = buffers.reallocate("out", 1 << 22)
    assert grown != 0 and buffers.buffers["out"].nbytes == 1 << 22 and buffers.buffers["out"].grow_count == 1
    buffers.notify_shape("out", [2, 3])
    assert buffers.shapes["out"] == (2, 3)
    assert buffers.reallocate("huge", 1 << 60) == 0 and "cudaErrorMemoryAllocation" in str(buffers.error)
    buffers.free()
    assert not buffers.buffers


@gpu
def test_calibration_feed_puts_each_stored_input_on_the_gpu(tmp_path):
    from gate.backend.trt import cuda
    from gate.backend.trt.builder import CalibrationFeed

    rng = np.random.default_rng(3)
    data = [{"x": rng.standard_normal((n, 8)).astype(np.float32), "k": np.arange(n, dtype=np.int32)} for n in (2, 5, 1)]
    feed = CalibrationFeed(data, tmp_path / "calibration.cache")
    for expected in data:
        pointers = feed.next_batch(["x", "k"])
        for name, pointer in zip(["x", "k"], pointers):
            back = np.empty_like(expected[name])
            cuda.copy(back.ctypes.data, pointer, back.nbytes, "dtoh")
            assert np.array_equal(back, expected[name])
    assert feed.next_batch(["x", "k"]) is None and feed.batches == 3
    assert feed.read_cache() is None
    feed.write_cache(b"TRT-calibration")
    assert feed.read_cache() == b"TRT-calibration"
    feed.free()
    with pytest.raises(GateError, match=r"INT8 calibration input 0 lacks \['y'\]"):
        CalibrationFeed(data).next_batch(["y"])


@pytest.mark.skipif(gpu_visible(), reason="a GPU is visible here: the no-GPU message cannot be seen")
def test_probe_outside_a_container_does_not_blame_one(monkeypatch):
    # Failed before: "the container was probably started without --gpus" on any machine without a GPU.
    from gate.backend.trt import probe

    monkeypatch.setattr(probe, "_CONTAINER_MARKS", ())
    with pytest.raises(GateError) as caught:
        probe_gpu()
    message = str(caught.value)
    assert "No NVIDIA GPU is visible" in message and "container" not in message
    assert "TensorRT needs an NVIDIA GPU and its driver, and this machine shows none" in message
