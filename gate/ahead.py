"""One iteration ahead: the next item of a stream is computed on a worker thread while the caller
works on the current one. ``check`` wraps the runners' stream in it when a runner uses a GPU, so the
comparison of iteration ``i`` (numpy, on the CPU) overlaps the inference of ``i + 1`` (ONNX Runtime
and numpy release the GIL while they compute): on an H200 the comparison otherwise leaves the GPU
idle for ~0.5 ms per ppocr_v4_rec iteration (bench/gpu_job.py). Order, values and errors are those
of the wrapped stream; one more iteration is held in memory.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor


class StreamAhead:
    """Iterates ``stream`` one item ahead on a worker thread.

    ``next()`` returns the item computed in the background (or raises what computing it raised,
    exactly as the wrapped stream would) and starts computing the one after. ``close()`` waits for
    the item in flight, then closes the wrapped stream (a generator) in this thread.
    """

    def __init__(self, stream):
        self._stream = stream
        self._iterator = iter(stream)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gate-stream-ahead")
        self._pending = self._pool.submit(self._pull)
        self._finished = False

    def _pull(self):
        try:
            return True, next(self._iterator)
        except StopIteration:
            return False, None

    def __iter__(self):
        return self

    def __next__(self):
        if self._finished:
            raise StopIteration
        pending, self._pending = self._pending, None
        try:
            more, item = pending.result()
        except BaseException:
            self._finished = True
            raise
        if not more:
            self._finished = True
            raise StopIteration
        self._pending = self._pool.submit(self._pull)
        return item

    def close(self) -> None:
        self._finished = True
        if self._pending is not None:
            try:
                self._pending.result()  # an error of an item nobody asked for is dropped with it
            except BaseException:  # dropped: see above
                pass
            self._pending = None
        self._pool.shutdown(wait=True)
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


def on_gpu(cfg) -> bool:
    """Whether ``cfg`` (a ``gate.config.GateConfig``) runs a runner on a GPU: TensorRT, or an ONNX
    Runtime execution provider other than the CPU's. CPU runs are not wrapped: there the inference
    already uses every core."""
    from gate.backend.gpu_facts import CPU_PROVIDERS

    onnxrt = "onnxrt" in cfg.runners and any(p not in CPU_PROVIDERS for p in cfg.execution_providers)
    return "trt" in cfg.runners or onnxrt
