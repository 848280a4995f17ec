"""``TrtRunner``: runs a TensorRT engine (Polygraphy 0.53.6 ``backend/trt/runner.py``; spec 6.2), on
cuda-python (``gate.backend.trt.cuda``).

Memory, per runner (made at activation, freed at deactivation):
- one CUDA stream; every copy and ``execute_async_v3`` is enqueued on it, and ``infer`` synchronizes
  it once, at the end;
- per input: a pinned host buffer (the feed is copied into it, then copied to the device
  asynchronously) and a device buffer, each grown only when a feed is larger;
- per output: a device buffer owned by the runner's ``IOutputAllocator`` (so data-dependent output
  shapes work; it grows only when TensorRT asks for more) and a pinned host buffer;
- with ``allocation_strategy`` ``profile`` or ``runtime``: one device block for the context's
  activations, grown in place.

**Output arrays are views of the runner's pinned host buffers, reused by the next ``infer``** (as
Polygraphy's runner documents): copy an output to keep it past the next call. A view stays valid
(the memory is not freed) for as long as it exists, also after deactivation. BF16 outputs are returned
as float32 (fresh arrays); BF16 inputs are fed as float32 and rounded to nearest even.

Deviation from Polygraphy: inputs must be host (numpy) arrays; device arrays, torch tensors and
``FormattedArray`` (vectorized formats) are not accepted, and an engine whose output aliases an input
is refused at activation.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict

import numpy as np

from gate.backend.base import BaseRunner, TensorMetadata
from gate.backend.trt.flavour import (
    device_itemsize,
    from_bf16_bits,
    is_bf16,
    last_error,
    module_of,
    numpy_dtype,
    to_bf16_bits,
)
from gate.errors import GateError

log = logging.getLogger("gate.backend.trt")

ALLOCATION_STRATEGIES = ("static", "profile", "runtime")


class OutputBuffers:
    """Device memory for outputs, one ``DeviceBuffer`` per output name, for TensorRT's
    ``IOutputAllocator``: ``reallocate`` returns the buffer's address, growing it only when TensorRT
    asks for more bytes than it holds; ``notify_shape`` records each output's shape of the last run.

    An exception (e.g. out of device memory) is kept in ``error`` and a null address returned, so that
    it never crosses into TensorRT; the runner raises it after ``execute_async_v3``.
    """

    def __init__(self):
        self.buffers = {}
        self.shapes = {}
        self.error = None

    def reallocate(self, name: str, nbytes: int) -> int:
        from gate.backend.trt import cuda

        try:
            buffer = self.buffers.get(name)
            if buffer is None:
                buffer = self.buffers[name] = cuda.DeviceBuffer(nbytes)
            return buffer.ensure(nbytes)
        except Exception as err:  # noqa: BLE001 - raised by the runner after execution
            self.error = err
            return 0

    def notify_shape(self, name: str, shape) -> None:
        self.shapes[name] = tuple(int(d) for d in shape)

    def free(self) -> None:
        for buffer in self.buffers.values():
            buffer.free()
        self.buffers.clear()
        self.shapes.clear()


def make_output_allocator(trt, buffers: OutputBuffers):
    """A ``trt.IOutputAllocator`` that forwards to ``buffers``."""

    class OutputAllocator(trt.IOutputAllocator):
        def __init__(self):
            trt.IOutputAllocator.__init__(self)

        def reallocate_output(self, tensor_name, memory, size, alignment):
            return buffers.reallocate(tensor_name, size)

        def reallocate_output_async(self, tensor_name, memory, size, alignment, stream):
            return buffers.reallocate(tensor_name, size)

        def notify_shape(self, tensor_name, shape):
            buffers.notify_shape(tensor_name, shape)

    return OutputAllocator()


class TrtRunner(BaseRunner):
    """Runs a TensorRT engine on one GPU.

    Args:
        engine: a ``trt.ICudaEngine``, a ``trt.IExecutionContext``, or a callable returning one, called
            at each activation (``EngineFromOnnx``, ``EngineFromPath``, ``EngineFromBytes``).
        name: the runner's name (default ``trt-runner-N<i>-<date>-<time>``).
        optimization_profile: the profile index to use (``--optimization-profile``); None uses
            profile 0 without setting it. ``set_profile`` changes it while active.
        allocation_strategy: ``static`` (default; TensorRT allocates for the largest shapes of all
            profiles), ``profile`` (the runner allocates enough for the active profile) or ``runtime``
            (the runner allocates for the current input shapes), as ``--allocation-strategy``.
            With a context passed in, a strategy only warns (the context must have been created with
            it, ``USER_MANAGED`` for profile / runtime); the runner still provides that memory.

    Raises:
        GateError: (constructor) an unknown ``allocation_strategy`` or a negative profile index;
            (activation) not an engine or context, a profile index the engine lacks, no GPU or no
            cuda-python; (``infer``) a shape outside the active profile (names the input and the
            profile's min and max), TensorRT failing to execute, a CUDA error.
    """

    prefix = "trt-runner"
    reuses_output_buffers = True  # outputs are views of the pinned host buffers (module docstring)

    def __init__(self, engine, name=None, optimization_profile=None, allocation_strategy=None):
        super().__init__(name)
        if allocation_strategy is not None and allocation_strategy not in ALLOCATION_STRATEGIES:
            raise GateError(
                f"allocation_strategy '{allocation_strategy}' is not one of {', '.join(ALLOCATION_STRATEGIES)}."
            )
        if optimization_profile is not None and (
            isinstance(optimization_profile, bool)
            or not isinstance(optimization_profile, int)
            or optimization_profile < 0
        ):
            raise GateError(
                f"optimization_profile is {optimization_profile!r}; expected a profile index (an int >= 0)."
            )
        self._engine_arg = engine
        self.optimization_profile = optimization_profile
        self.allocation_strategy = allocation_strategy
        self.engine = None
        self.context = None
        self.stream = None

    # ----------------------------------------------------------------------------------------------
    # lifecycle

    def activate_impl(self):
        try:
            self._activate()
        except BaseException:
            self._release()
            raise

    def _activate(self):
        from gate.backend.trt import cuda

        obj = self._engine_arg() if callable(self._engine_arg) else self._engine_arg
        trt = module_of(obj)
        if not hasattr(trt, "ICudaEngine"):
            raise GateError(f"{self.name}: expected a TensorRT engine or execution context, got {type(obj).__name__}.")
        strategy = self.allocation_strategy or "static"
        if isinstance(obj, trt.ICudaEngine):
            self.engine = obj
            if strategy == "static":
                self.context = obj.create_execution_context()
            else:
                self.context = obj.create_execution_context(trt.ExecutionContextAllocationStrategy.USER_MANAGED)
            if not self.context:
                raise GateError(
                    f"{self.name}: TensorRT cannot create an execution context ({last_error(trt, 'no reason given')})."
                )
        elif isinstance(obj, trt.IExecutionContext):
            self.context = obj
            self.engine = obj.engine
            if self.allocation_strategy is not None:
                log.warning(
                    "%s: allocation_strategy '%s' was given with an execution context; make sure the context "
                    "was created with that strategy.",
                    self.name,
                    self.allocation_strategy,
                )
        else:
            raise GateError(f"{self.name}: expected a TensorRT engine or execution context, got {type(obj).__name__}.")
        self._trt = trt
        self._strategy = strategy if isinstance(obj, trt.ICudaEngine) else (self.allocation_strategy or "static")
        engine = self.engine
        names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
        self._inputs = [n for n in names if engine.get_tensor_mode(n).name == "INPUT"]
        self._outputs = [n for n in names if engine.get_tensor_mode(n).name == "OUTPUT"]
        self._trt_dtypes = {n: engine.get_tensor_dtype(n) for n in names}
        self._metadata = TensorMetadata()
        for name in self._inputs:
            shape = tuple(int(d) for d in engine.get_tensor_shape(name))
            self._metadata.add(name, numpy_dtype(self._trt_dtypes[name], f"{self.name}: input '{name}'"), shape)
        self._host_dtypes = {n: numpy_dtype(self._trt_dtypes[n], f"{self.name}: output '{n}'") for n in self._outputs}
        aliased = getattr(engine, "get_aliased_input_tensor", None)
        for name in self._outputs:
            source = aliased(name) if aliased is not None else None
            if source:
                raise GateError(
                    f"{self.name}: output '{name}' aliases input '{source}', which this runner does not support."
                )

        self.stream = cuda.Stream()
        self._input_device = {}
        self._input_host = {}
        self._shape_inputs = {}
        self._output_host = {}
        self._shapes_set = {}
        self._addresses_set = {}
        self._context_memory = None
        self._context_memory_set = None
        self._output_buffers = OutputBuffers()
        self._allocator = make_output_allocator(trt, self._output_buffers)
        for name in self._outputs:
            if not self.context.set_output_allocator(name, self._allocator):
                raise GateError(f"{self.name}: TensorRT refused an output allocator for output '{name}'.")
        if self.optimization_profile is not None:
            self.set_profile(self.optimization_profile)

    def deactivate_impl(self):
        self._release()

    def _release(self):
        self.context = None
        self.engine = None
        self._allocator = None
        for attr in ("_input_device",):
            for buffer in getattr(self, attr, {}).values():
                buffer.free()
        if getattr(self, "_output_buffers", None) is not None:
            self._output_buffers.free()
        if getattr(self, "_context_memory", None) is not None:
            self._context_memory.free()
            self._context_memory = None
        # Pinned host buffers are dropped, not freed: output views a caller kept hold them alive.
        self._input_host, self._output_host, self._shape_inputs = {}, {}, {}
        if self.stream is not None:
            self.stream.free()
            self.stream = None

    # ----------------------------------------------------------------------------------------------
    # settings while active

    def set_profile(self, index: int) -> None:
        """Makes optimization profile ``index`` the active one (on the runner's stream); every input
        shape is set again at the next ``infer``.

        Raises:
            GateError: the runner is not active, the engine has no such profile, or TensorRT refuses.
        """
        if self.context is None:
            raise GateError(f"{self.name} must be activated before calling set_profile().")
        count = self.engine.num_optimization_profiles
        if not 0 <= index < count:
            raise GateError(
                f"{self.name}: optimization profile {index} does not exist; the engine has {count} "
                f"(indices 0..{count - 1})."
            )
        if not self.context.set_optimization_profile_async(index, self.stream.handle):
            raise GateError(
                f"{self.name}: TensorRT refused optimization profile {index} "
                f"({last_error(self._trt, 'no reason given')})."
            )
        self._shapes_set.clear()

    def get_input_metadata_impl(self):
        return self._metadata

    def output_names(self) -> list[str]:
        """The engine's output names, in engine order (only while active)."""
        self._require_active("output_names")
        return list(self._outputs)

    # ----------------------------------------------------------------------------------------------
    # inference

    def _profile_bounds(self, name: str) -> str:
        profile = self.context.active_optimization_profile
        try:
            low, _, high = self.engine.get_tensor_profile_shape(name, profile)
            return f"optimization profile {profile} allows min {list(low)} to max {list(high)}"
        except Exception:  # noqa: BLE001 - only for the message
            return f"optimization profile {profile} does not allow it"

    def _feed_input(self, name: str, value) -> None:
        from gate.backend.trt import cuda

        array = np.asarray(value)
        trt_dtype = self._trt_dtypes[name]
        if is_bf16(trt_dtype):
            array = to_bf16_bits(array)
        else:
            array = np.ascontiguousarray(array, dtype=self._metadata[name][0])
        shape = tuple(int(d) for d in array.shape)
        if self.engine.is_shape_inference_io(name):
            # Shape-tensor inputs are read by TensorRT on the host.
            array = np.array(array, copy=True)
            self._shape_inputs[name] = array
            address = array.ctypes.data
        else:
            nbytes = array.nbytes
            host = self._input_host.get(name)
            if host is None or host.nbytes < nbytes:
                host = self._input_host[name] = cuda.PinnedBuffer(nbytes)
            host.write(array)
            device = self._input_device.get(name)
            if device is None:
                device = self._input_device[name] = cuda.DeviceBuffer(nbytes)
            address = device.ensure(nbytes)
            device.copy_from_host_async(host.ptr, nbytes, self.stream)
        if self._shapes_set.get(name) != shape:
            if not self.context.set_input_shape(name, shape):
                raise GateError(
                    f"{self.name}: input '{name}' has shape {list(shape)}, which TensorRT refuses: "
                    f"{self._profile_bounds(name)}."
                )
            self._shapes_set[name] = shape
        if self._addresses_set.get(name) != address:
            if not self.context.set_tensor_address(name, address):
                raise GateError(f"{self.name}: TensorRT refused the address of input '{name}'.")
            self._addresses_set[name] = address

    def _bind_context_memory(self) -> None:
        from gate.backend.trt import cuda

        if self._strategy == "profile":
            nbytes = self.engine.get_device_memory_size_for_profile_v2(self.context.active_optimization_profile)
        elif self._strategy == "runtime":
            nbytes = self.context.update_device_memory_size_for_shapes()
        else:
            return
        if self._context_memory is None:
            self._context_memory = cuda.DeviceBuffer(nbytes)
        self._context_memory.ensure(nbytes)
        bound = (self._context_memory.ptr, self._context_memory.nbytes)
        if self._context_memory_set != bound:
            self.context.set_device_memory(*bound)
            self._context_memory_set = bound

    def infer_impl(self, feed_dict):
        """Copies the inputs in, runs ``execute_async_v3`` and copies the outputs out, all on the
        runner's stream, then synchronizes once. Returns ``OrderedDict[output name, numpy.ndarray]``
        in engine order: views of reused pinned buffers (module docstring).
        """
        from gate.backend.trt import cuda

        start = time.perf_counter()
        for name in self._inputs:
            self._feed_input(name, feed_dict[name])
        self._bind_context_memory()
        self._output_buffers.error = None
        ok = self.context.execute_async_v3(self.stream.handle)
        if self._output_buffers.error is not None:
            raise self._output_buffers.error
        if not ok:
            raise GateError(
                f"{self.name}: TensorRT failed to execute the engine ({last_error(self._trt, 'no reason given')})."
            )
        pending = []
        for name in self._outputs:
            shape = self._output_buffers.shapes.get(name)
            if shape is None:
                shape = tuple(int(d) for d in self.context.get_tensor_shape(name))
            trt_dtype = self._trt_dtypes[name]
            nbytes = int(math.prod(shape)) * device_itemsize(trt_dtype)
            host = self._output_host.get(name)
            if host is None or host.nbytes < nbytes:
                host = self._output_host[name] = cuda.PinnedBuffer(nbytes)
            device = self._output_buffers.buffers.get(name)
            if device is not None:
                device.copy_to_host_async(host.ptr, nbytes, self.stream)
            pending.append((name, host, shape, trt_dtype))
        self.stream.synchronize()
        outputs = OrderedDict()
        for name, host, shape, trt_dtype in pending:
            if is_bf16(trt_dtype):
                outputs[name] = from_bf16_bits(host.view(np.uint16, shape))
            else:
                outputs[name] = host.view(self._host_dtypes[name], shape)
        self.inference_time = time.perf_counter() - start
        return outputs
