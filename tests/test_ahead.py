"""``gate.ahead.StreamAhead``: ``check`` on a GPU runs iteration i + 1 while iteration i is compared.
The stream's order, values and errors stay those of the plain stream: checked on the CPU by turning
it on there (real ONNX Runtime sessions, real golden sets), against the same check without it."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

import numpy as np
import pytest
from test_cli import gather_golden_set_failing_at_2

import gate.job
from gate.ahead import StreamAhead, on_gpu
from gate.backend.base import BaseRunner
from gate.config import load_config
from gate.errors import GateError

from conftest import perturb_golden


def test_stream_ahead_keeps_order_values_and_errors():
    seen = []

    def stream():
        try:
            for i in range(5):
                seen.append((i, threading.current_thread().name))
                if i == 3:
                    raise GateError("iteration 3 failed")
                yield i
        finally:
            seen.append(("closed", threading.current_thread().name))

    ahead = StreamAhead(stream())
    assert [next(ahead), next(ahead), next(ahead)] == [0, 1, 2]
    assert all(name.startswith("gate-stream-ahead") for _, name in seen[:3])  # computed on the worker
    with pytest.raises(GateError, match="iteration 3 failed"):
        next(ahead)
    with pytest.raises(StopIteration):
        next(ahead)
    ahead.close()
    assert list(StreamAhead(iter([]))) == []
    closed = StreamAhead(stream())
    assert next(closed) == 0
    closed.close()  # waits for item 1 in flight, then closes the generator (its finally runs)
    assert seen[-1][0] == "closed"


def test_on_gpu():
    class Cfg:
        runners, execution_providers = ["onnxrt"], ["CPUExecutionProvider"]

    assert not on_gpu(Cfg)
    Cfg.execution_providers = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert on_gpu(Cfg)
    Cfg.runners, Cfg.execution_providers = ["trt"], ["CPUExecutionProvider"]
    assert on_gpu(Cfg)


@pytest.fixture
def ahead_on(monkeypatch):
    def turn(on: bool):
        monkeypatch.setattr(gate.job, "inference_ahead", lambda cfg: on)

    return turn


def plain_and_ahead_on_perturbed_golden(example, ahead_on):
    """(check without, check with the stream ahead) of the example with three golden iterations
    perturbed (two of them beyond its tolerances); both must regress alike."""
    for k, delta in ((1, 3e-5), (4, 2e-3), (6, 1e-6)):
        perturb_golden(example / "data" / f"test_data_set_{k}" / "output_0.pb", (0, 1), delta)
    cfg = load_config(example / "gate.toml")
    ahead_on(False)
    plain = gate.job.check(cfg)
    ahead_on(True)
    ahead = gate.job.check(cfg)
    assert plain.status == ahead.status == "regressed"
    assert ahead.rows == plain.rows and ahead.message == plain.message
    return plain, ahead


def test_check_with_the_stream_ahead_gives_the_same_result(example, ahead_on):
    _, ahead = plain_and_ahead_on_perturbed_golden(example, ahead_on)
    assert ahead.rows[0].abs_value > 1e-3


def test_an_error_at_iteration_k_names_iteration_k_with_the_stream_ahead(tmp_path, ahead_on):
    toml = gather_golden_set_failing_at_2(tmp_path)
    cfg = load_config(toml)
    results = []
    for on in (False, True):
        ahead_on(on)
        results.append(gate.job.check(cfg))
    plain, ahead = results
    assert ahead.message == plain.message and ahead.stopped_at == plain.stopped_at == 2
    assert ahead.message.startswith("stopped after 2 of 5 iterations: iteration 2 (")
    assert ahead.rows == plain.rows and ahead.iterations == plain.iterations == 2


class ReusingBuffers(BaseRunner):
    """The real ONNX Runtime runner behind TensorRT's output contract: ``infer`` returns views of
    buffers that the next ``infer`` overwrites (``reuses_output_buffers``), as ``TrtRunner`` does."""

    reuses_output_buffers = True

    def __init__(self, inner):
        super().__init__(inner.name)
        self.inner = inner
        self.buffers = {}

    def __getattr__(self, name):  # the facts and providers of the real runner
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def activate_impl(self):
        self.inner.activate()

    def deactivate_impl(self):
        self.inner.deactivate()

    def get_input_metadata_impl(self):
        return self.inner.get_input_metadata()

    def infer_impl(self, feed_dict):
        out = OrderedDict()
        for key, value in self.inner.infer(feed_dict).items():
            buffer = self.buffers.setdefault(key, np.empty_like(value))
            buffer[...] = value
            out[key] = buffer
        time.sleep(0.01)  # the worker runs ahead while iteration i is compared
        self.inference_time = self.inner.last_inference_time()
        return out


def test_outputs_of_a_runner_reusing_its_buffers_are_compared_as_inferred(example, ahead_on, monkeypatch):
    """Iteration i's outputs are copied before the worker runs iteration i + 1 on a runner whose
    buffers it reuses (TensorRT); before, i + 1 overwrote the arrays iteration i was compared with."""
    make = gate.job.make_runner
    monkeypatch.setattr(gate.job, "make_runner", lambda *args: ReusingBuffers(make(*args)))
    _, ahead = plain_and_ahead_on_perturbed_golden(example, ahead_on)
    assert ahead.rows[0].abs_value > 1e-3


def test_close_stops_the_worker_and_closes_the_stream():
    produced = []

    def stream():
        try:
            for i in range(100):
                produced.append(i)
                yield i
        finally:
            produced.append("closed")

    ahead = StreamAhead(stream(), depth=2)
    assert next(ahead) == 0
    time.sleep(0.2)  # the worker fills its queue and waits
    ahead.close()
    assert produced[-1] == "closed" and len(produced) <= 6  # 0, 1, 2 (queued), 3 (in flight), closed
    assert not ahead._thread.is_alive()


def test_an_error_in_detach_is_the_streams_error_not_a_hang():
    def detach(item):
        if item == 2:
            raise MemoryError("copying output y")
        return item

    ahead = StreamAhead(iter(range(5)), detach=detach)
    assert [next(ahead), next(ahead)] == [0, 1]
    done = []

    def consume():
        try:
            next(ahead)
        except MemoryError as err:
            done.append(str(err))

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    thread.join(5)
    assert done == ["copying output y"]  # before: next() waited forever for the dead worker
    ahead.close()


def test_an_error_closing_the_stream_is_raised_by_close():
    def stream():
        try:
            yield from range(10)
        finally:
            raise GateError("trt: deactivation failed (CUDA error 700)")

    ahead = StreamAhead(stream())
    assert next(ahead) == 0
    with pytest.raises(GateError, match="deactivation failed"):
        ahead.close()  # before: dropped on the worker


def test_fail_fast_with_the_stream_ahead_sends_only_compared_iterations_to_the_sink(tmp_path, ahead_on):
    """--save-outputs (the sink) on a GPU with --fail-fast got up to three iterations past the stop
    (the worker runs ahead); it gets what the plain run gets."""
    from test_fail_fast import X, identity_gate

    cfg = load_config(
        identity_gate(tmp_path / "g", [X + 1] * 8, "[compare]\nmax_failed_iterations = 1\nfail_fast = true\n")
    )
    seen = {}
    for on in (False, True):
        ahead_on(on)
        sunk = []
        result = gate.job.check(cfg, sink=sunk.append)
        seen[on] = (len(sunk), result.status, result.iterations)
    assert seen[True] == seen[False] and seen[False][0] < 8, seen
