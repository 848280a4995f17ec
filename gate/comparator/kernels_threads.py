"""The compare kernel's blocks on a small thread pool (numpy's ufuncs and reductions release the
GIL while they loop, so blocks of one comparison run in parallel).

The number of threads is ``ACCURACY_GATE_COMPARE_THREADS`` (an integer >= 1; 1 computes every
block on the calling thread), by default ``min(4, CPUs available to this process)``. Every result is
combined in block order afterwards, so the reported numbers do not depend on the thread count
(``tests/test_kernels_threads.py``).
"""

from __future__ import annotations

import contextvars
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from gate.errors import GateError

THREADS_ENV = "ACCURACY_GATE_COMPARE_THREADS"
DEFAULT_MAX_THREADS = 4
_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _forget_pools_after_fork() -> None:
    """A forked child has none of the parent's threads: it starts its own pools when it needs them."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pools_after_fork)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def compare_threads() -> int:
    """Threads per comparison: ``ACCURACY_GATE_COMPARE_THREADS`` if set, else
    ``min(4, CPUs available)``.

    Raises:
        GateError: the variable is set to anything but an integer >= 1."""
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return max(1, min(DEFAULT_MAX_THREADS, usable_cpus()))
    try:
        threads = int(value)
    except ValueError:
        threads = 0
    if threads < 1:
        raise GateError(f"{THREADS_ENV}={value!r}: expected a whole number of threads >= 1")
    return threads


def _pool(threads: int) -> ThreadPoolExecutor:
    with _POOLS_LOCK:
        pool = _POOLS.get(threads)
        if pool is None:
            pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gate-compare")
            _POOLS[threads] = pool
        return pool


def block_map(fn, items, threads: int) -> list:
    """``[fn(item) for item in items]``, on ``threads`` threads when there are more than one (the
    items are started in order), each in a copy of the caller's context (numpy's ``errstate`` is a
    context variable); the first exception is raised after the others were cancelled."""
    items = list(items)
    if threads <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    pool = _pool(threads)
    futures = [pool.submit(contextvars.copy_context().run, fn, item) for item in items]
    try:
        return [future.result() for future in futures]
    finally:
        for future in futures:
            future.cancel()


class Leader:
    """The best ``(value, block start)`` offered so far in ``np.argmax`` order (the first NaN, then
    the first largest value), shared by the threads of one comparison. A block that cannot beat it
    cannot hold the overall winner, so it skips its ``argmax``; with one thread the blocks come in
    order and this is the running best."""

    def __init__(self):
        self.best = None
        self._lock = threading.Lock()

    def may_win(self, value, start: int) -> bool:
        best = self.best
        return best is None or ahead(value, start, *best)

    def offer(self, value, start: int) -> None:
        with self._lock:
            if self.best is None or ahead(value, start, *self.best):
                self.best = (value, start)


def ahead(value, start: int, other, other_start: int) -> bool:
    """Whether ``value`` at ``start`` comes before ``other`` at ``other_start`` in ``np.argmax``
    order."""
    nan, other_nan = value != value, other != other
    if nan or other_nan:
        return nan and (not other_nan or start < other_start)
    return value > other or (value == other and start < other_start)
