"""Iterations ahead: the next items of a stream are computed on a worker thread while the caller
works on the current one. ``check`` wraps the runners' stream in it when a runner uses a GPU, so the
comparison of iteration ``i`` (on the CPU) overlaps the inference of ``i + 1`` and ``i + 2`` (ONNX
Runtime, numpy and the compiled compare kernel release the GIL while they compute). The worker runs
on by itself up to ``depth`` items ahead instead of waiting to be asked for each one: on the H200,
ppocr_v4_rec at N = 512, check / pure CUDA inference went from a median of 1.23 to 1.06 over 17
rounds (``bench/gpu_job.py``). Order, values and errors are those of the wrapped stream; ``depth``
more iterations are held in memory.

A runner may return views of buffers its next ``infer`` overwrites (TensorRT's pinned host buffers,
``BaseRunner.reuses_output_buffers``): the worker hands over items through ``detach``, which must
copy such outputs before the next inference starts (``check``: ``runner_outputs_copied``).
"""

from __future__ import annotations

import queue
import threading

_END = object()


class StreamAhead:
    """Iterates ``stream`` up to ``depth`` items ahead on a worker thread.

    ``next()`` returns the next item computed in the background (or raises what computing it raised,
    exactly as the wrapped stream would, after the items before it). ``detach(item)`` (optional)
    runs on the worker on each item before the worker computes the next one; its result is what
    ``next()`` returns. ``close()`` stops the worker after the item in flight and closes the wrapped
    stream (a generator) on the worker, where it runs; an error raised by closing it is raised by
    ``close()``.
    """

    def __init__(self, stream, depth: int = 2, detach=None):
        self._stream = stream
        self._detach = detach
        self._queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finished = False
        self._close_error = None
        self._thread = threading.Thread(target=self._produce, name="gate-stream-ahead", daemon=True)
        self._thread.start()

    def _produce(self) -> None:
        try:
            iterator = iter(self._stream)
            while not self._stop.is_set():
                try:
                    item = next(iterator)
                except StopIteration:
                    self._put((True, _END))
                    return
                if self._detach is not None:
                    item = self._detach(item)  # (a MemoryError copying an output is the stream's error)
                self._put((True, item))
        except BaseException as err:
            self._put((False, err))
        finally:
            close = getattr(self._stream, "close", None)
            if close is not None:
                try:
                    close()
                except BaseException as err:  # raised by close(), in the caller's thread
                    self._close_error = err

    def _put(self, entry) -> None:
        """Queues ``entry``, giving up when ``close()`` was called (nobody will read it)."""
        while not self._stop.is_set():
            try:
                self._queue.put(entry, timeout=0.05)
                return
            except queue.Full:
                continue

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        ok, item = self._queue.get()
        if not ok:
            self._finished = True
            raise item
        if item is _END:
            self._finished = True
            raise StopIteration
        return item

    def close(self) -> None:
        """Stops the worker (after the item in flight) and waits until the stream is closed."""
        self._finished = True
        self._stop.set()
        while self._thread.is_alive():
            try:
                self._queue.get(timeout=0.05)  # make room for an item the worker is putting
            except queue.Empty:
                pass
        self._thread.join()
        if self._close_error is not None:  # e.g. a runner's deactivation failing, as without the worker
            error, self._close_error = self._close_error, None
            raise error


def runner_outputs_copied(runners):
    """A ``detach`` for ``StreamAhead`` over ``Comparator.run(..., streaming=True)``: copies the
    output arrays of the runners among ``runners`` whose ``reuses_output_buffers`` is true (their next
    ``infer`` overwrites them), in each RunResults item; None when no runner reuses its buffers."""
    reusing = {runner.name for runner in runners if getattr(runner, "reuses_output_buffers", False)}
    if not reusing:
        return None

    def detach(run_results):
        for name, iterations in run_results.items():
            if name in reusing:
                for iteration in iterations:
                    for key, value in list(iteration.items()):
                        iteration[key] = value.copy() if hasattr(value, "copy") else value
        return run_results

    return detach


def on_gpu(cfg) -> bool:
    """Whether ``cfg`` (a ``gate.config.GateConfig``) runs a runner on a GPU: TensorRT, or an ONNX
    Runtime execution provider other than the CPU's. CPU runs are not wrapped: there the inference
    already uses every core."""
    from gate.backend.gpu_facts import CPU_PROVIDERS

    onnxrt = "onnxrt" in cfg.runners and any(p not in CPU_PROVIDERS for p in cfg.execution_providers)
    return "trt" in cfg.runners or onnxrt
