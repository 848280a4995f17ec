"""TrtRunner's binding logic: shapes set only when they change, buffer reuse, allocation strategies,
the output allocator's growth, profiles and errors.

The tests marked ``gpu`` run on a real GPU through the real cuda-python layer (device and pinned
buffers, the stream, device-to-device copies); only TensorRT's engine and execution context are the
test double below. Run them on the device machine: ``PYTHONPATH=. python -m pytest -m gpu
tests/test_trt_runner.py``. The unmarked tests need no GPU.
"""

from __future__ import annotations

import enum
import gc
import logging
import weakref

import numpy as np
import pytest

from gate.backend.trt import TrtRunner
from gate.errors import GateError

# ---------------------------------------------------------------------------------------------------
# The test double. TrtRunner finds the TensorRT module through the engine's class (flavour.module_of),
# so the enums and the IOutputAllocator base it uses are defined here, at module level, as the
# bindings module of either TensorRT flavour defines them.


class TensorIOMode(enum.Enum):
    NONE = 0
    INPUT = 1
    OUTPUT = 2


class DataType(enum.Enum):
    FLOAT = 0


class ExecutionContextAllocationStrategy(enum.Enum):
    STATIC = 0
    ON_PROFILE_CHANGE = 1
    USER_MANAGED = 2


class IOutputAllocator:
    def __init__(self):
        pass


class ICudaEngine:
    """A stand-in for a TensorRT engine and its execution context, because TensorRT cannot execute on
    any machine here: ``tensorrt`` cannot be installed, and ``tensorrt_rtx`` does not run on the
    H200's compute capability 9.0. It is the only thing faked in these tests: memory, copies and the
    stream are the real cuda-python layer.

    The "model": input ``x`` float32 ``[N, 4]``; output ``y = x`` (a device-to-device copy) and output
    ``z`` = ``x`` repeated ``repeat`` times along axis 0, whose size is known only at execution (a
    data-dependent shape, as NonZero gives). Profile ``i`` allows ``N`` in ``profiles[i]``; execution
    needs 1024 bytes of context memory per row, so a profile needs 1024 times its largest ``N``. Like
    TensorRT, execution asks the output allocator for each output's memory and reports its shape.
    """

    def __init__(self, profiles=((1, 2, 8), (1, 16, 64))):
        self.profiles = [tuple(p) for p in profiles]
        self.repeat = 2
        self.fail_execution = False
        self.contexts = []

    # engine API
    num_io_tensors = 3
    _names = ("x", "y", "z")

    @property
    def num_optimization_profiles(self):
        return len(self.profiles)

    def get_tensor_name(self, index):
        return self._names[index]

    def get_tensor_mode(self, name):
        return TensorIOMode.INPUT if name == "x" else TensorIOMode.OUTPUT

    def get_tensor_dtype(self, name):
        return DataType.FLOAT

    def get_tensor_shape(self, name):
        return (-1, 4)

    def get_tensor_profile_shape(self, name, profile):
        low, opt, high = self.profiles[profile]
        return [(low, 4), (opt, 4), (high, 4)]

    def is_shape_inference_io(self, name):
        return False

    def get_device_memory_size_for_profile_v2(self, profile):
        return 1024 * self.profiles[profile][2]

    def create_execution_context(self, strategy=ExecutionContextAllocationStrategy.STATIC):
        context = IExecutionContext(self, strategy)
        self.contexts.append(context)
        return context


class IExecutionContext:
    """The execution context of ``ICudaEngine`` (part of the same double); ``calls`` records each API
    call as ``(method, args)``."""

    def __init__(self, engine, strategy):
        self.engine = engine
        self.strategy = strategy
        self.calls = []
        self.active_optimization_profile = 0
        self.shapes = {}
        self.addresses = {}
        self.allocators = {}
        self.device_memory = None

    def count(self, method):
        return sum(1 for name, _ in self.calls if name == method)

    def set_optimization_profile_async(self, index, stream):
        self.calls.append(("set_optimization_profile_async", (index, stream)))
        self.active_optimization_profile = index
        self.shapes.clear()  # TensorRT needs the input shapes again after a profile switch
        return True

    def get_tensor_shape(self, name):
        return self.shapes.get(name, (-1, 4))

    def set_input_shape(self, name, shape):
        self.calls.append(("set_input_shape", (name, tuple(shape))))
        low, _, high = self.engine.profiles[self.active_optimization_profile]
        if len(shape) != 2 or shape[1] != 4 or not low <= shape[0] <= high:
            return False
        self.shapes[name] = tuple(shape)
        return True

    def set_tensor_address(self, name, address):
        self.calls.append(("set_tensor_address", (name, address)))
        self.addresses[name] = address
        return True

    def set_output_allocator(self, name, allocator):
        self.calls.append(("set_output_allocator", (name,)))
        self.allocators[name] = allocator
        return True

    def update_device_memory_size_for_shapes(self):
        self.calls.append(("update_device_memory_size_for_shapes", ()))
        return 1024 * self.shapes["x"][0]

    def set_device_memory(self, address, nbytes):
        self.calls.append(("set_device_memory", (address, nbytes)))
        self.device_memory = (address, nbytes)

    def execute_async_v3(self, stream):
        from gate.backend.trt import cuda

        self.calls.append(("execute_async_v3", (stream,)))
        if self.engine.fail_execution or "x" not in self.shapes or "x" not in self.addresses:
            return False
        if self.strategy == ExecutionContextAllocationStrategy.USER_MANAGED:
            assert self.device_memory is not None and self.device_memory[1] >= 1024 * self.shapes["x"][0]
        rows = self.shapes["x"][0]
        row_bytes = 4 * 4
        rt = cuda.runtime()
        handle = rt.cudaStream_t(stream)
        d2d = rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        y = self.allocators["y"].reallocate_output("y", 0, rows * row_bytes, 256)
        self.allocators["y"].notify_shape("y", (rows, 4))
        cuda.check(rt.cudaMemcpyAsync(y, self.addresses["x"], rows * row_bytes, d2d, handle), "d2d")
        z_rows = rows * self.engine.repeat
        z = self.allocators["z"].reallocate_output("z", 0, z_rows * row_bytes, 256)
        self.allocators["z"].notify_shape("z", (z_rows, 4))
        for copy in range(self.engine.repeat):
            offset = copy * rows * row_bytes
            cuda.check(rt.cudaMemcpyAsync(z + offset, self.addresses["x"], rows * row_bytes, d2d, handle), "d2d")
        return True


def feed(rows, seed=0):
    return {"x": np.random.default_rng(seed).standard_normal((rows, 4)).astype(np.float32)}


# ---------------------------------------------------------------------------------------------------
# No GPU needed


def test_unknown_allocation_strategy_is_refused_at_construction():
    with pytest.raises(GateError, match="allocation_strategy 'lazy' is not one of static, profile, runtime"):
        TrtRunner(ICudaEngine(), allocation_strategy="lazy")


@pytest.mark.parametrize("profile", [-1, 1.5, True])
def test_bad_profile_index_is_refused_at_construction(profile):
    with pytest.raises(GateError, match="optimization_profile"):
        TrtRunner(ICudaEngine(), optimization_profile=profile)


def test_something_else_than_an_engine_is_a_one_line_error():
    runner = TrtRunner(lambda: object(), name="trt")
    with pytest.raises(GateError, match="trt: expected a TensorRT engine or execution context, got object"):
        runner.activate()
    assert not runner.is_active


# ---------------------------------------------------------------------------------------------------
# Real GPU memory, test-double engine

gpu = pytest.mark.gpu


@gpu
def test_outputs_are_computed_on_the_gpu_and_metadata_comes_from_the_engine():
    engine = ICudaEngine()
    with TrtRunner(lambda: engine, name="trt") as runner:
        meta = runner.get_input_metadata()
        assert list(meta) == ["x"] and meta["x"] == (np.dtype(np.float32), (-1, 4))
        assert runner.output_names() == ["y", "z"]
        x = feed(3)["x"]
        outputs = runner.infer({"x": x})
        assert list(outputs) == ["y", "z"]
        np.testing.assert_array_equal(outputs["y"], x)
        np.testing.assert_array_equal(outputs["z"], np.concatenate([x, x]))
        assert outputs["y"].dtype == np.float32
        assert runner.last_inference_time() > 0
    assert engine.contexts[0].strategy == ExecutionContextAllocationStrategy.STATIC


@gpu
def test_input_shape_is_set_only_when_it_changes():
    engine = ICudaEngine()
    with TrtRunner(engine) as runner:
        context = engine.contexts[0]
        for seed in range(3):
            runner.infer(feed(2, seed))
        assert context.count("set_input_shape") == 1
        assert context.count("set_tensor_address") == 1  # the device buffer did not move
        runner.infer(feed(5))
        assert context.count("set_input_shape") == 2
        assert runner._input_device["x"].grow_count == 1
        # grown for 5 rows: the address is set again only if CUDA gave the larger block another address
        addresses = {args[1] for name, args in context.calls if name == "set_tensor_address"}
        assert context.count("set_tensor_address") == len(addresses)
        assert context.addresses["x"] == runner._input_device["x"].ptr
        runner.infer(feed(5, 1))
        runner.infer(feed(4))  # smaller: same buffer, new shape
        assert context.count("set_input_shape") == 3
        assert context.count("set_tensor_address") == len(addresses)
        assert context.count("set_output_allocator") == 2  # once per output, at activation


@gpu
def test_output_buffers_are_reused_between_calls():
    engine = ICudaEngine()
    with TrtRunner(engine) as runner:
        first = runner.infer(feed(4, 0))
        kept = first["y"].copy()
        second = runner.infer(feed(4, 1))
        assert np.shares_memory(first["y"], second["y"])
        np.testing.assert_array_equal(first["y"], second["y"])  # overwritten: copy what you keep
        assert not np.array_equal(kept, second["y"])
        smaller = runner.infer(feed(2, 2))
        assert smaller["y"].__array_interface__["data"][0] == second["y"].__array_interface__["data"][0]
        input_device = runner._input_device["x"]
        assert input_device.grow_count == 0


@gpu
def test_output_allocator_grows_only_when_a_larger_output_is_asked_for():
    engine = ICudaEngine()
    with TrtRunner(engine) as runner:
        runner.infer(feed(2))
        z = runner._output_buffers.buffers["z"]
        address = z.ptr
        engine.repeat = 1  # smaller data-dependent output: no reallocation
        out = runner.infer(feed(2))
        assert out["z"].shape == (2, 4) and z.ptr == address and z.grow_count == 0
        engine.repeat = 6  # larger: one reallocation, right contents
        x = feed(2, 7)["x"]
        out = runner.infer({"x": x})
        assert out["z"].shape == (12, 4) and z.grow_count == 1 and z.nbytes == 12 * 4 * 4
        np.testing.assert_array_equal(out["z"], np.concatenate([x] * 6))


@gpu
def test_profile_strategy_sizes_context_memory_for_the_active_profile():
    engine = ICudaEngine()
    with TrtRunner(engine, allocation_strategy="profile") as runner:
        context = engine.contexts[0]
        assert context.strategy == ExecutionContextAllocationStrategy.USER_MANAGED
        runner.infer(feed(2))
        runner.infer(feed(3))
        assert context.count("set_device_memory") == 1
        assert context.device_memory[1] >= 8192
        runner.set_profile(1)
        runner.infer(feed(20))  # profile 1 needs 65536 bytes: the block grows and is set again
        assert context.count("set_device_memory") == 2
        assert context.device_memory[1] >= 65536
        assert context.count("set_input_shape") == 3  # shapes set again after the profile switch


@gpu
def test_runtime_strategy_sizes_context_memory_for_the_current_shapes():
    engine = ICudaEngine()
    with TrtRunner(engine, allocation_strategy="runtime") as runner:
        context = engine.contexts[0]
        runner.infer(feed(2))
        assert context.device_memory[1] >= 2048
        runner.infer(feed(1))  # smaller: no new block
        assert context.count("set_device_memory") == 1
        runner.infer(feed(8))
        assert context.count("set_device_memory") == 2 and context.device_memory[1] >= 8192
        assert context.count("update_device_memory_size_for_shapes") == 3


@gpu
def test_optimization_profile_is_set_at_activation_and_checked():
    engine = ICudaEngine()
    with TrtRunner(engine, optimization_profile=1) as runner:
        assert engine.contexts[0].active_optimization_profile == 1
        out = runner.infer(feed(40))
        assert out["y"].shape == (40, 4)
    runner = TrtRunner(engine, optimization_profile=2, name="trt")
    with pytest.raises(
        GateError, match=r"trt: optimization profile 2 does not exist; the engine has 2 \(indices 0..1\)"
    ):
        runner.activate()
    assert not runner.is_active


@gpu
def test_shape_outside_the_profile_names_the_input_and_the_bounds():
    with TrtRunner(ICudaEngine(), name="trt") as runner:
        with pytest.raises(
            GateError,
            match=r"trt: input 'x' has shape \[9, 4\], which TensorRT refuses: optimization profile 0 allows "
            r"min \[1, 4\] to max \[8, 4\]",
        ):
            runner.infer(feed(9))


@gpu
def test_failed_execution_is_a_one_line_error():
    engine = ICudaEngine()
    engine.fail_execution = True
    with TrtRunner(engine, name="trt") as runner:
        with pytest.raises(GateError, match="trt: TensorRT failed to execute the engine"):
            runner.infer(feed(2))


@gpu
def test_kept_outputs_stay_readable_after_deactivation():
    engine = ICudaEngine()
    runner = TrtRunner(engine)
    with runner:
        x = feed(3, 4)["x"]
        outputs = runner.infer({"x": x})
        host = weakref.ref(runner._output_host["y"])
    gc.collect()
    assert host() is not None  # the view keeps the pinned buffer alive
    np.testing.assert_array_equal(outputs["y"], x)
    del outputs
    gc.collect()
    assert host() is None  # and it is freed once no view is left


@gpu
def test_a_context_passed_in_is_used_and_a_strategy_warns(caplog):
    engine = ICudaEngine()
    context = engine.create_execution_context()
    with caplog.at_level(logging.WARNING, logger="gate.backend.trt"):
        with TrtRunner(context, allocation_strategy="runtime") as runner:
            np.testing.assert_array_equal(runner.infer(feed(2))["y"], feed(2)["x"])
    assert "allocation_strategy 'runtime' was given with an execution context" in caplog.text
    assert context.count("set_device_memory") == 1  # as Polygraphy: the runner still provides the memory
