"""Runs one runner in a child process (``Comparator.run(use_subprocess=True)``), so that each runner
has the GPU to itself and a crash or hang in a backend cannot take the caller down.

Polygraphy 0.53.6 (``comparator/comparator.py``, ``shared/spec/polygraphy-0.53.6.md`` section 1.2.6)
forks a ``multiprocessing.Process`` and polls a Queue; a child that dies is reported as
"Terminated prematurely", and a child that dies while polling is disabled hangs the caller. Here the
child is started with the ``spawn`` method (no inherited CUDA or thread state), the result comes
back over a one-way Pipe, and the parent waits on "result ready" and "child exited" together, so a
crash is reported at once (with its exit code) even when polling is disabled, and
``subprocess_timeout`` bounds the child's whole run.
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
import time
import traceback
from multiprocessing.connection import wait

from gate.errors import GateError

log = logging.getLogger("gate.comparator")

_KILL_GRACE_S = 5.0


def _child_main(conn, func, args):
    try:
        result = ("ok", func(*args), None)
    except GateError as err:
        result = ("error", str(err), None)
    except BaseException as err:  # whatever the backend raises is reported, not lost with the child
        result = ("error", f"{type(err).__name__}: {err}", traceback.format_exc())
    try:
        conn.send(result)
    except Exception as err:  # the result could not be pickled
        conn.send(("error", f"its results could not be sent back ({type(err).__name__}: {err})", None))
    finally:
        conn.close()


def run_in_subprocess(name: str, func, args: tuple, timeout: float | None = None, polling_interval: float = 30):
    """Calls ``func(*args)`` in a ``spawn`` child process and returns its result.

    ``func`` must be a module-level function and ``args`` and the result must be picklable (runners
    and data loaders are pickled: a generator or a lambda cannot be sent). The caller's objects are
    never modified: the child works on copies. As with any ``spawn`` child, the child re-imports the
    caller's main module, so a script must guard its entry point with ``if __name__ == "__main__":``.

    Args:
        name: the runner's name, for messages.
        timeout: seconds the child may run in total before it is killed; None: no limit.
        polling_interval: seconds between liveness checks (logged at DEBUG); 0 disables the periodic
            wake-ups (the parent still notices a result, an exit or the timeout at once).

    Raises:
        GateError: the arguments cannot be pickled; the child raised (its message), exited before
            sending a result (its exit code), or ran longer than ``timeout`` ("timed out after N s").
    """
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child_main, args=(sender, func, args), name=f"gate-runner-{name}", daemon=True)
    try:
        process.start()
    except (pickle.PicklingError, TypeError, AttributeError) as err:
        receiver.close()
        sender.close()
        raise GateError(
            f"Runner '{name}' cannot run in a subprocess: it or the data loader cannot be pickled "
            f"({type(err).__name__}: {err}); use picklable runners and loaders, or use_subprocess=False."
        ) from err
    sender.close()  # the child holds the only writer, so its death ends the pipe
    start = time.monotonic()
    try:
        while True:
            waited = time.monotonic() - start
            step = None if not polling_interval or polling_interval <= 0 else polling_interval
            if timeout is not None:
                remaining = max(0.0, timeout - waited)
                step = remaining if step is None else min(step, remaining)
            ready = wait([receiver, process.sentinel], timeout=step)
            if receiver in ready or receiver.poll():
                try:
                    status, payload, trace = receiver.recv()
                except (EOFError, OSError):
                    process.join(_KILL_GRACE_S)
                    raise GateError(_exited(name, process.exitcode)) from None
                if status != "ok":
                    if trace:
                        log.debug("Runner '%s' subprocess traceback:\n%s", name, trace)
                    raise GateError(f"Runner '{name}' failed in its subprocess: {payload}")
                return payload
            if process.sentinel in ready:
                process.join(_KILL_GRACE_S)
                raise GateError(_exited(name, process.exitcode))
            if timeout is not None and time.monotonic() - start >= timeout:
                process.kill()
                raise GateError(f"Runner '{name}' subprocess timed out after {timeout:g} s and was killed.")
            log.debug("Runner '%s' subprocess still running after %.0f s", name, time.monotonic() - start)
    finally:
        receiver.close()
        _stop(process)


def _exited(name, exitcode) -> str:
    return f"Runner '{name}' subprocess exited with code {exitcode} before sending its results."


def _stop(process) -> None:
    # A child that sent its result is exiting on its own: give it a moment before terminating it.
    process.join(_KILL_GRACE_S)
    if process.is_alive():
        process.terminate()
        process.join(_KILL_GRACE_S)
    if process.is_alive():
        process.kill()
        process.join()
    process.close()
