"""Array statistics used by the comparator (Polygraphy 0.53.6 ``polygraphy/comparator/util.py``), numpy only.

``cast_up`` widens narrow types as the compare kernel does (float16 -> float32, 8/16-bit integers ->
int32); the ``compute_*`` helpers reduce one array after that widening, as Polygraphy's do, except
``compute_mean``, which accumulates in float64 (deviation D3). ``try_match_shape`` is Polygraphy's
permute-then-reshape used by ``SimpleCompareFunc(check_shapes=False)``. The plotting helpers of
Polygraphy (``build_heatmaps``, ``scatter_plot_error_magnitude``) need matplotlib and are not
provided (not applicable: the gate reports tables, not figures).
"""

from __future__ import annotations

import functools
import logging
import math

import numpy as np

from gate.comparator.kernels import cast_up as cast_up

log = logging.getLogger("gate.comparator")


def use_higher_precision(func):
    """Decorator: ``func(*arrays)`` is called with every array passed through ``cast_up``."""

    @functools.wraps(func)
    def wrapped(*buffers):
        return func(*(cast_up(np.asarray(b)) for b in buffers))

    return wrapped


@use_higher_precision
def compute_max(buffer):
    return np.amax(buffer)


@use_higher_precision
def compute_argmax(buffer):
    return np.unravel_index(np.argmax(buffer), buffer.shape)


@use_higher_precision
def compute_min(buffer):
    return np.amin(buffer)


@use_higher_precision
def compute_argmin(buffer):
    return np.unravel_index(np.argmin(buffer), buffer.shape)


def compute_mean(buffer):
    """The mean, accumulated in float64 for float and integer inputs (D3; Polygraphy sums in the
    input's type)."""
    buffer = np.asarray(buffer)
    if buffer.dtype.kind in "biuf":
        return np.mean(buffer, dtype=np.float64)
    return np.mean(buffer)


@use_higher_precision
def compute_std(buffer):
    return np.std(buffer)


@use_higher_precision
def compute_variance(buffer):
    return np.var(buffer)


@use_higher_precision
def compute_median(buffer):
    return np.median(buffer)


def compute_quantile(buffer, q):
    return np.quantile(cast_up(np.asarray(buffer)), q)


def compute_average_magnitude(buffer):
    return compute_mean(np.abs(cast_up(np.asarray(buffer))))


def str_histogram(output, hist_range=None):
    """A 10-bin text histogram of ``output`` (Polygraphy's layout: one line per bin, a bar of ``#``)."""
    output = cast_up(np.asarray(output))
    if output.size == 0:
        return "(empty)"
    finite = output[np.isfinite(output)] if output.dtype.kind == "f" else output
    if finite.size == 0:
        return "(no finite values)"
    hist, bin_edges = np.histogram(finite, range=hist_range)
    max_num = max(int(hist.max()), 1)
    lines = [f"{'Bin Range':^26}|  Num Elems | Visualization"]
    for num, low, high in zip(hist, bin_edges, bin_edges[1:]):
        bar = "#" * int(math.ceil(40 * num / max_num)) if num else ""
        lines.append(f"({low:<9.3g}, {high:<9.3g}) | {num:10} | {bar}")
    return "\n".join(lines)


def str_output_stats(output, runner_name=None):
    """``mean=..., std-dev=..., var=..., median=..., min=... at ..., max=... at ..., avg-magnitude=...``."""
    output = np.asarray(output)
    if output.size == 0:
        return "<empty>"
    prefix = f"{runner_name} | Stats: " if runner_name else ""
    return (
        f"{prefix}mean={compute_mean(output):.5g}, std-dev={compute_std(output):.5g}, "
        f"var={compute_variance(output):.5g}, median={compute_median(output):.5g}, "
        f"min={compute_min(output):.5g} at {compute_argmin(output)}, "
        f"max={compute_max(output):.5g} at {compute_argmax(output)}, "
        f"avg-magnitude={compute_average_magnitude(output):.5g}"
    )


def log_output_stats(output, info_hist=False, runner_name=None, hist_range=None):
    """Logs ``str_output_stats`` (info) and the histogram (info with ``info_hist``, else debug) on the
    ``gate.comparator`` logger."""
    log.info("%s", str_output_stats(output, runner_name))
    log.log(logging.INFO if info_hist else logging.DEBUG, "%s", str_histogram(output, hist_range))


def log_compared_output_stats(runner0_name, runner1_name, output0, output1, absdiff=None, reldiff=None):
    """Logs the statistics of both outputs and, when given, of their absolute and relative differences."""
    log_output_stats(output0, runner_name=runner0_name)
    log_output_stats(output1, runner_name=runner1_name)
    for label, diff in (("Absolute Difference", absdiff), ("Relative Difference", reldiff)):
        if diff is not None:
            log.info("%s | %s", label, str_output_stats(diff))


def _is_dynamic(dim) -> bool:
    return dim is None or isinstance(dim, str) or (isinstance(dim, int) and dim < 0)


def try_match_shape(arr, shape):
    """Permutes, then reshapes, ``arr`` so that its shape is ``shape`` when it can (Polygraphy's
    ``util.try_match_shape``; a shape may hold one dynamic dim, filled from ``arr``). Returns the
    array unchanged where neither works."""
    arr = np.asarray(arr)
    shape = list(shape)
    dynamic = [i for i, d in enumerate(shape) if _is_dynamic(d)]
    if len(dynamic) == 1:
        static = math.prod(d for d in shape if not _is_dynamic(d))
        shape[dynamic[0]] = arr.size // static if static else 0
    elif len(shape) == arr.ndim:
        shape = [a if _is_dynamic(d) else d for d, a in zip(shape, arr.shape)]
    if sorted(arr.shape) == sorted(shape) and tuple(arr.shape) != tuple(shape):
        free = dict(enumerate(arr.shape))
        perm = []
        for dim in shape:
            axis = next(i for i, d in free.items() if d == dim)
            del free[axis]
            perm.append(axis)
        arr = np.transpose(arr, perm)
    if tuple(arr.shape) != tuple(shape):
        try:
            arr = np.ascontiguousarray(arr).reshape(shape)
        except ValueError:
            log.warning("Could not reshape array from shape: %s to %s. Skipping reshape.", arr.shape, shape)
    return arr
