"""Where a streaming check is (``Progress``: the iteration being run, how many were compared, the
first error, a progress line every few seconds for CI logs) and the compare-function wrapper that
turns a comparison's GateError into the stream's stopping error (``Guarded``). Used by
``gate.job.check``."""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from gate.errors import GateError

log = logging.getLogger("gate")

PROGRESS_INTERVAL_S = 5.0


def progress_line(done: int, total: int, elapsed_s: float) -> str:
    """One progress line for CI logs (no carriage returns): iterations done, it/s and ETA."""
    rate = done / elapsed_s if elapsed_s > 0 else 0.0
    eta = (total - done) / rate if rate > 0 else float("inf")
    eta_text = f"{eta:.0f} s" if eta != float("inf") else "unknown"
    return f"progress: {done}/{total} iterations ({100 * done / max(total, 1):.0f}%), {rate:.1f} it/s, ETA {eta_text}"


class Progress:
    """Where a streaming check is: the iteration being run (its position in the shard), how many were
    fully compared, and the first error (a runner or a reader failing, a comparison that cannot be
    made). The stream stops at that error, so everything compared before it is kept and reported."""

    def __init__(self, inputs, golden, input_names):
        self.inputs = inputs
        self.input_names = list(input_names)
        self.golden = golden
        self.current = None
        self.compared = 0
        self.error: GateError | None = None
        self.error_iteration = None
        self.failed_at: int | None = None  # --fail-fast: the position of the first failing judging comparison

    def feed(self):
        for index in range(len(self.inputs)):
            self.current = index
            feed_dict = self.inputs[index]
            missing = [name for name in self.input_names if name not in feed_dict]
            if missing:
                raise GateError(
                    f"{self.inputs.location(index)}: the stored inputs lack '{missing[0]}'; the model's inputs are "
                    f"{self.input_names}, the file holds {list(feed_dict)}."
                )
            unknown = [name for name in feed_dict if name not in self.input_names]
            if unknown:
                raise GateError(
                    f"{self.inputs.location(index)}: stored input '{unknown[0]}' is not an input of the model; "
                    f"its inputs are {self.input_names}."
                )
            yield feed_dict

    def stop(self, err: GateError, position: int | None = None):
        """Records the first error; ``position``: the iteration it concerns (default: the one being run)."""
        if self.error is None:
            self.error, self.error_iteration = err, self.current if position is None else position
            log.debug("the stream stopped at iteration %s:", self.current, exc_info=err)  # --verbose: the traceback

    def until_error(self, stream):
        """Yields the stream's items until it raises a GateError or ``stop`` was called; logs progress."""
        start = last = time.perf_counter()
        try:
            for run in stream:
                if self.error is not None:
                    break
                yield run
                if self.error is None:
                    self.compared += 1
                if self.failed_at is not None:  # --fail-fast: this iteration failed a judging comparison
                    break
                now = time.perf_counter()
                if now - last >= PROGRESS_INTERVAL_S:
                    last = now
                    print(progress_line(self.compared, len(self.inputs), now - start), flush=True)
        except GateError as err:
            self.stop(err)
        finally:
            stream.close()



class Guarded:
    """A compare function that records a GateError (e.g. no common outputs) as the stream's stopping
    error instead of losing the results gathered so far. With ``judging(output) -> bool`` (--fail-fast)
    a failing result for an output this function judges stops the stream after the iteration
    (``Progress.failed_at``); a failing report-only comparison does not."""

    def __init__(self, func, progress, judging=None):
        self.func = func
        self.progress = progress
        self.judging = judging
        self.thresholds_for = func.thresholds_for

    def __call__(self, result0, result1):
        try:
            results = self.func(result0, result1)
        except GateError as err:
            self.progress.stop(err, self.progress.compared)  # the stream may already run the next one
            return OrderedDict()
        if self.judging is not None and self.progress.failed_at is None:
            if any(not bool(result) and self.judging(output) for output, result in results.items()):
                self.progress.failed_at = self.progress.compared
        return results
