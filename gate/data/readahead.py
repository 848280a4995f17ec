"""Reading stored iterations ahead on a background thread, so that disk reads and decompression
(zlib and numpy release the GIL) overlap inference. Memory stays bounded: at most ``depth``
iterations are held beyond the one being used."""

from __future__ import annotations

from collections import OrderedDict
from concurrent.futures import Future, ThreadPoolExecutor


class ReadAhead:
    """Wraps a lazily read sequence of iterations (a ``gate.data.TensorSet``) for in-order use.

    ``ra[i]`` returns iteration ``i`` (read by then, or read now) and starts reading ``i+1 ..
    i+depth`` in the background. Out-of-order access works, it only loses the head start. An error
    while reading is raised by the ``ra[i]`` that asks for that iteration, exactly as the wrapped
    sequence would raise it. Every other attribute (``location``, ``layout``, ``len()``) is the
    wrapped sequence's.
    """

    def __init__(self, stored, depth: int = 2):
        self.stored = stored
        self.depth = depth
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gate-read-ahead")
        self._pending: OrderedDict[int, Future] = OrderedDict()

    def __len__(self) -> int:
        return len(self.stored)

    def __getattr__(self, name):
        return getattr(self.stored, name)

    def __getitem__(self, index: int):
        future = self._pending.pop(index, None)
        for stale in [i for i in self._pending if i < index]:  # skipped iterations are not kept
            self._pending.pop(stale).cancel()
        for ahead in range(index + 1, min(index + 1 + self.depth, len(self.stored))):
            if ahead not in self._pending:
                self._pending[ahead] = self._pool.submit(self.stored.__getitem__, ahead)
        return future.result() if future is not None else self.stored[index]

    def __iter__(self):
        for index in range(len(self)):
            yield self[index]

    def close(self) -> None:
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=True)
