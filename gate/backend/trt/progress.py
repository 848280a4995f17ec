"""TensorRT build progress as CI log lines (``IProgressMonitor``)."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("gate.backend.trt")


class BuildProgress:
    """What TensorRT's ``IProgressMonitor`` reports, as at most one log line every ``interval_s``
    seconds (CI logs are not terminals: no carriage returns, no redrawn bars), e.g.
    ``TensorRT build, 12 s: Building engine 3/6 > Computing profile costs 1/5 > Timing tactics 2/3``.

    Args:
        interval_s: seconds between lines (0: a line at every event).
        clock: a monotonic clock in seconds (injectable for tests).
        emit: where lines go (default: ``log.info``).
    """

    def __init__(self, interval_s: float = 5.0, clock=time.monotonic, emit=None):
        self.interval_s = interval_s
        self._clock = clock
        self._emit = emit or log.info
        self._phases: list[list] = []  # [name, steps, done]
        self._start = None
        self._last = None
        self.lines = 0

    def phase_start(self, parent_phase, phase_name, num_steps) -> None:
        if self._start is None:
            self._start = self._last = self._clock()
        self._phases.append([str(phase_name), int(num_steps), 0])
        self._maybe_emit()

    def step_complete(self, phase_name, step) -> bool:
        for phase in reversed(self._phases):
            if phase[0] == phase_name:
                phase[2] = int(step) + 1
                break
        self._maybe_emit()
        return True  # False would cancel the build

    def phase_finish(self, phase_name) -> None:
        for index in range(len(self._phases) - 1, -1, -1):
            if self._phases[index][0] == phase_name:
                del self._phases[index]
                break

    def line(self) -> str:
        elapsed = 0.0 if self._start is None else self._clock() - self._start
        phases = " > ".join(f"{name} {done}/{steps}" for name, steps, done in self._phases) or "finishing"
        return f"TensorRT build, {elapsed:.0f} s: {phases}"

    def _maybe_emit(self) -> None:
        now = self._clock()
        if self._last is not None and now - self._last >= self.interval_s:
            self._last = now
            self.lines += 1
            self._emit(self.line())


def make_progress_monitor(trt, progress: BuildProgress):
    """A ``trt.IProgressMonitor`` that forwards to ``progress`` (and never lets an exception out into
    TensorRT's builder threads)."""

    class ProgressMonitor(trt.IProgressMonitor):
        def __init__(self):
            trt.IProgressMonitor.__init__(self)

        def phase_start(self, phase_name, parent_phase, num_steps):
            try:
                progress.phase_start(parent_phase, phase_name, num_steps)
            except Exception:  # noqa: BLE001 - a log line must never abort a build
                log.debug("progress monitor failed", exc_info=True)

        def step_complete(self, phase_name, step):
            try:
                return progress.step_complete(phase_name, step)
            except Exception:
                return True

        def phase_finish(self, phase_name):
            try:
                progress.phase_finish(phase_name)
            except Exception:
                log.debug("progress monitor failed", exc_info=True)

    return ProgressMonitor()
