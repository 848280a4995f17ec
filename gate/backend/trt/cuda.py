"""The CUDA layer under ``TrtRunner``, on cuda-python (``cuda.bindings.runtime``; imported on first
use): one stream, device buffers, pinned (page-locked) host buffers, and asynchronous copies.

Pinned host memory is what makes ``cudaMemcpyAsync`` truly asynchronous (a copy from pageable memory
is staged by the driver and blocks). A ``PinnedBuffer`` is freed when the last numpy view of it is
garbage collected, not when the runner deactivates, so an output array kept by a caller never points
at freed memory; it is *reused* (overwritten) by the runner's next ``infer`` of at most its size.

Every call is checked; a failure raises ``CudaError`` (a ``GateError``: one line naming the call and
CUDA's error name).
"""

from __future__ import annotations

import weakref

import numpy as np

from gate.errors import GateError

_runtime = None


class CudaError(GateError):
    """A CUDA runtime call failed (one line: the call, CUDA's error name and description)."""


def runtime():
    """``cuda.bindings.runtime`` (cuda-python >= 12.6), or ``cuda.cudart`` of older releases.

    Raises:
        GateError: cuda-python is not installed (says what to install).
    """
    global _runtime
    if _runtime is None:
        try:
            from cuda.bindings import runtime as rt
        except ImportError:
            try:
                from cuda import cudart as rt
            except ImportError as err:
                raise GateError(
                    "TensorRT runs need cuda-python, which is not installed; install it: "
                    "pip install 'accuracy-gate[trt]' (or pip install cuda-python)."
                ) from err
        _runtime = rt
    return _runtime


def check(result, call: str):
    """Unpacks cuda-python's ``(error, *values)``: returns None, the value, or the values.

    Raises:
        CudaError: the error is not ``cudaSuccess``.
    """
    rt = runtime()
    err, *values = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        _, name = rt.cudaGetErrorName(err)
        _, text = rt.cudaGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else str(name)
        text = text.decode() if isinstance(text, bytes) else str(text)
        raise CudaError(f"CUDA call {call} failed: {name} ({text}).")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def _ptr(handle) -> int:
    return int(handle)


def device_count() -> int:
    """GPUs the CUDA runtime sees (after ``CUDA_VISIBLE_DEVICES``)."""
    return int(check(runtime().cudaGetDeviceCount(), "cudaGetDeviceCount"))


class Stream:
    """One non-blocking CUDA stream. ``handle`` is the integer TensorRT's ``execute_async_v3`` and
    ``set_optimization_profile_async`` take."""

    def __init__(self):
        rt = runtime()
        self._stream = check(rt.cudaStreamCreateWithFlags(rt.cudaStreamNonBlocking), "cudaStreamCreateWithFlags")
        self.handle = _ptr(self._stream)

    def synchronize(self) -> None:
        check(runtime().cudaStreamSynchronize(self._stream), "cudaStreamSynchronize")

    def free(self) -> None:
        if self._stream is not None:
            check(runtime().cudaStreamDestroy(self._stream), "cudaStreamDestroy")
            self._stream = None
            self.handle = 0

    @property
    def raw(self):
        """The cuda-python ``cudaStream_t``."""
        return self._stream


def _free_device(ptr: int) -> None:
    try:
        runtime().cudaFree(ptr)
    except Exception:  # interpreter shutdown: the CUDA context may already be gone
        pass


def _free_host(ptr: int) -> None:
    try:
        runtime().cudaFreeHost(ptr)
    except Exception:
        pass


class DeviceBuffer:
    """Linear device memory (``cudaMalloc``, 256-byte aligned), at least one byte so that TensorRT
    never gets a null address for an empty tensor.

    ``ensure(nbytes)`` grows it (free + malloc, contents dropped) only when ``nbytes`` is larger than
    the capacity, and returns the address; ``grow_count`` counts the allocations after the first.
    """

    def __init__(self, nbytes: int = 1):
        self.nbytes = 0
        self.ptr = 0
        self.grow_count = -1
        self._finalizer = None
        self.ensure(nbytes)

    def ensure(self, nbytes: int) -> int:
        nbytes = max(int(nbytes), 1)
        if nbytes <= self.nbytes:
            return self.ptr
        self.free()
        self.ptr = _ptr(check(runtime().cudaMalloc(nbytes), f"cudaMalloc({nbytes})"))
        self.nbytes = nbytes
        self.grow_count += 1
        self._finalizer = weakref.finalize(self, _free_device, self.ptr)
        return self.ptr

    def free(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
            check(runtime().cudaFree(self.ptr), "cudaFree")
        self.ptr, self.nbytes = 0, 0

    def copy_from_host_async(self, host_ptr: int, nbytes: int, stream: Stream) -> None:
        """``nbytes`` from host address ``host_ptr`` (pinned, for the copy to be asynchronous)."""
        copy_async(self.ptr, host_ptr, nbytes, "htod", stream)

    def copy_to_host_async(self, host_ptr: int, nbytes: int, stream: Stream) -> None:
        copy_async(host_ptr, self.ptr, nbytes, "dtoh", stream)


def _memcpy_kind(rt, kind: str):
    return {
        "htod": rt.cudaMemcpyKind.cudaMemcpyHostToDevice,
        "dtoh": rt.cudaMemcpyKind.cudaMemcpyDeviceToHost,
        "dtod": rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice,
    }[kind]


def copy_async(dst: int, src: int, nbytes: int, kind: str, stream: Stream) -> None:
    """``cudaMemcpyAsync`` of ``nbytes`` on ``stream``; ``kind`` is ``htod``, ``dtoh`` or ``dtod``.
    Nothing is enqueued for 0 bytes."""
    if nbytes <= 0:
        return
    rt = runtime()
    check(
        rt.cudaMemcpyAsync(dst, src, nbytes, _memcpy_kind(rt, kind), stream.raw), f"cudaMemcpyAsync({kind}, {nbytes} B)"
    )


def copy(dst: int, src: int, nbytes: int, kind: str) -> None:
    """Synchronous ``cudaMemcpy`` (used where no stream exists, e.g. INT8 calibration batches)."""
    if nbytes <= 0:
        return
    rt = runtime()
    check(rt.cudaMemcpy(dst, src, nbytes, _memcpy_kind(rt, kind)), f"cudaMemcpy({kind}, {nbytes} B)")


class _HostMemory:
    """What a numpy view of pinned memory hangs on to (its ``base``): keeps the PinnedBuffer alive."""

    def __init__(self, owner: PinnedBuffer, nbytes: int):
        self._owner = owner
        self.__array_interface__ = {"data": (owner.ptr, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}


class PinnedBuffer:
    """Page-locked host memory (``cudaMallocHost``) of a fixed capacity (at least one byte).

    ``view(dtype, shape)`` is a numpy array over its first bytes; the memory is freed (``cudaFreeHost``)
    when the buffer *and* every view are gone. To grow, make a new ``PinnedBuffer``: views of the old
    one stay valid.
    """

    def __init__(self, nbytes: int):
        self.nbytes = max(int(nbytes), 1)
        self.ptr = _ptr(check(runtime().cudaMallocHost(self.nbytes), f"cudaMallocHost({self.nbytes})"))
        self._finalizer = weakref.finalize(self, _free_host, self.ptr)

    def view(self, dtype, shape) -> np.ndarray:
        dtype = np.dtype(dtype)
        shape = tuple(int(d) for d in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes > self.nbytes:
            raise ValueError(f"view of {nbytes} bytes does not fit in a pinned buffer of {self.nbytes}")
        raw = np.asarray(_HostMemory(self, self.nbytes))
        return raw[:nbytes].view(dtype).reshape(shape)

    def write(self, array: np.ndarray) -> int:
        """Copies ``array`` (any shape, C order) into the start of the buffer; returns its byte count."""
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        self.view(np.uint8, (flat.size,))[...] = flat
        return flat.size

    @property
    def is_freed(self) -> bool:
        return not self._finalizer.alive
