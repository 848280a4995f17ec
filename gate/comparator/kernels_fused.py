"""The compiled block of the compare kernel (``gate/comparator/_fused.c``), loaded with ctypes.

One pass over a block of two float32 or two float16 arrays gives what ``BlockDiffs`` otherwise
computes with about twenty numpy passes (each a trip through memory, and for float16 a conversion
per operand), element for element the same: ``absdiff``, ``reldiff``, their maxima, the zeros of
the reference, the elements outside both tolerances, the indices ``np.argmax`` gives, and the
float64 sums of both differences in numpy's pairwise order (``block_sum``). ctypes releases the
GIL for the call, so blocks on several threads and a GPU runner's thread run alongside.

It is built, when a C compiler is there, by ``pip install`` (pyproject.toml
``[tool.setuptools] ext-modules``, optional: without a compiler the install still succeeds) into
``gate/comparator/_fused*.so``; without it, or with ``ACCURACY_GATE_COMPARE_KERNEL=numpy``, the
numpy passes run instead, with the same results (``tests/test_kernels_fused.py``).
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from pathlib import Path

import numpy as np

from gate.errors import GateError

KERNEL_ENV = "ACCURACY_GATE_COMPARE_KERNEL"
FUSED_ABI = 6  # GATE_FUSED_ABI of _fused.c: the functions and arguments this module calls
_LIB = []
_UNUSABLE = []  # why a built library was not used


def _load():
    """The loaded library (``ctypes.CDLL``), or None (not built, refused by ``ACCURACY_GATE_COMPARE_KERNEL``)."""
    if not _LIB:
        _LIB.append(_open())
    return _LIB[0]


def _open():
    choice = os.environ.get(KERNEL_ENV, "").strip().lower() or "auto"  # set but empty: auto
    if choice not in ("auto", "compiled", "numpy"):
        raise GateError(f"{KERNEL_ENV}={os.environ[KERNEL_ENV]!r}: expected auto, compiled or numpy")
    if choice == "numpy":
        _UNUSABLE.append(f"{KERNEL_ENV}=numpy")
        return None
    built = _built()
    if not built:
        _UNUSABLE.append("not built: pip install builds it where a C compiler is")
        if choice == "compiled":
            raise GateError(
                f"{KERNEL_ENV}=compiled, but the compiled kernel was not built (pip install needs a C compiler)"
            )
        return None
    try:
        lib = ctypes.CDLL(str(built[0]))  # CDLL: the GIL is released during each call
    except OSError as err:  # built for another machine (copied along): numpy's passes instead
        if choice == "compiled":
            raise GateError(f"{KERNEL_ENV}=compiled, but {built[0].name} does not load: {err}") from None
        _UNUSABLE.append(f"{built[0].name} does not load: {err}")
        return None
    abi = getattr(lib, "gate_fused_abi", None)
    found = abi() if abi is not None else None
    if found != FUSED_ABI:
        reason = (
            f"{built[0].name} was built from another version of _fused.c "
            f"(ABI {found}, expected {FUSED_ABI}; rebuild: pip install .)"
        )
        if choice == "compiled":
            raise GateError(f"{KERNEL_ENV}=compiled, but {reason}")
        _UNUSABLE.append(reason)
        return None
    p = ctypes.c_void_p
    lib.gate_compare_block.argtypes = [ctypes.c_int, p, p, ctypes.c_int64] + [ctypes.c_uint32] * 3 + [p] * 7
    lib.gate_compare_block.restype = ctypes.c_int
    u32, i64 = ctypes.c_uint32, ctypes.c_int64
    lib.gate_bracket_block.argtypes = [p, i64, u32, u32, p, ctypes.c_int]
    lib.gate_bracket_block.restype = i64
    lib.gate_convert_half.argtypes = [p, p, ctypes.c_int64, ctypes.c_int]
    lib.gate_convert_half.restype = None
    lib.gate_gather.argtypes = [ctypes.c_int, p, p, p, ctypes.c_int64, p, p]
    lib.gate_gather.restype = None
    return lib


def _built() -> list[Path]:
    """The built libraries beside this module, else in the first other ``gate/comparator`` on
    sys.path that has one (a non-editable install's, when a source tree of gate comes first on
    sys.path, as with ``python -m gate`` in a clone); any found must pass the ABI check."""
    here = Path(__file__).resolve().parent
    for folder in [here] + [Path(entry or ".") / "gate" / "comparator" for entry in sys.path]:
        built = sorted(folder.glob("_fused*.so"))
        if built:
            return built
    return []


def kernel_name() -> str:
    """``compiled`` or ``numpy``: which block kernel this process compares float16/float32 with."""
    if _load() is not None:
        return "compiled"
    return f"numpy ({_UNUSABLE[0]})" if _UNUSABLE else "numpy"


def available() -> bool:
    return _load() is not None


def threshold_bits(tolerance) -> int:
    """The float32 bits of the smallest non-negative float32 ``x`` with ``np.greater(x, tolerance)``
    (numpy's comparison of a float32 array with ``tolerance``, whatever its casting rules: a Python
    float is compared in float32, a numpy float64 scalar in float64 by numpy 2), or ``0x7f800001``
    (no value but NaN) when there is none. For the non-negative differences, ``x > tolerance`` in
    numpy is then ``bits(x) >= threshold_bits(tolerance)``. Found by numpy's own comparisons on this
    thread, so cached per value, type and whether this thread reads subnormals as zero (DAZ, which
    changes numpy's answer for a subnormal tolerance)."""
    from gate.comparator.kernels_float16 import subnormals_honoured

    return _threshold_bits(tolerance, type(tolerance), subnormals_honoured())


@functools.lru_cache(maxsize=64)
def _threshold_bits(tolerance, _type, _subnormals) -> int:
    probe = np.zeros(1, np.uint32)

    def greater(bits: int) -> bool:
        probe[0] = bits
        with np.errstate(over="ignore"):  # numpy casts a tolerance above float32's range to inf
            return bool(np.greater(probe.view(np.float32), tolerance)[0])

    low, high = 0, 0x7F800001  # the answer is in [low, high]; greater() is monotone below NaN
    if greater(low):
        return low
    if not greater(0x7F800000):
        return high
    high = 0x7F800000
    while high - low > 1:  # greater(low) is False, greater(high) is True
        mid = (low + high) // 2
        if greater(mid):
            high = mid
        else:
            low = mid
    return high


def compare_block(ac, bc, eps, lo_abs: int, lo_rel: int, absdiff, reldiff, u, idx, sums, brackets=None) -> bool:
    """Runs the compiled block on ``ac``, ``bc`` (1-D, contiguous, native byte order, both float32 or
    both float16, size >= 1) into ``absdiff``, ``reldiff`` (float32, the same size) and ``u``
    (uint32[5]: the bits of max absdiff and max reldiff, zeros of the reference, elements over both
    thresholds, the bits of the largest absdiff among those), ``idx`` (int64[2]: ``np.argmax`` of
    absdiff, and of absdiff among the elements over both thresholds, -1 if none), ``sums``
    (float64[2]: ``np.add.reduce`` of absdiff and reldiff as float64). ``eps``: the float32 added
    to a zero of the reference; ``lo_abs``, ``lo_rel``: ``threshold_bits`` of atol and rtol, or
    ``NO_THRESHOLD``. ``brackets``: None, or ``(thresholds, counts)``: uint32[8] order-statistics
    thresholds on the bits of absdiff (0-3) and reldiff (4-7) (0: unused, costing nothing), and
    int64[8] that receives the number of elements below each (the same pass; ``bracket_block``
    then copies the kept values). Returns False when a difference is NaN: then only ``u[0]``,
    ``u[1]`` are set and the caller takes numpy's passes."""
    status = _load().gate_compare_block(
        1 if ac.dtype.itemsize == 2 else 0,
        ac.ctypes.data,
        bc.ctypes.data,
        ac.size,
        int(np.asarray(eps, np.float32).view(np.uint32)),
        lo_abs,
        lo_rel,
        absdiff.ctypes.data,
        reldiff.ctypes.data,
        u.ctypes.data,
        idx.ctypes.data,
        sums.ctypes.data,
        None if brackets is None else brackets[0].ctypes.data,
        None if brackets is None else brackets[1].ctypes.data,
    )
    return status == 0


NO_THRESHOLD = 0xFFFFFFFF  # no float32's bits reach it: count nothing


def bits_below(x) -> int:
    """``T`` with ``d < x`` equal to ``bits(d) < T`` for every non-negative, non-NaN float32 ``d``."""
    x = np.float32(x)
    return int(x.view(np.uint32)) if x > 0 else 0  # (NaN and x <= 0: no d is below)


def bits_at_or_below(x) -> int:
    """``T`` with ``d <= x`` equal to ``bits(d) < T`` for every non-negative, non-NaN float32 ``d``."""
    x = np.float32(x)
    if not x >= 0:  # NaN, negative: none
        return 0
    return int(np.abs(x).view(np.uint32)) + 1  # -0.0 <= 0 only for zeros, as +0.0


def bracket_block(d, low: int, high: int, out, method: int = 0) -> int:
    """The kept values of one block of ``kernels_select.Bracket`` by the compiled kernel: of ``d``, a
    contiguous float32 difference of ``compare_block`` (non-negative, no NaN), the elements with
    ``low <= bits < high`` copied in order to ``out`` (uint32, room for ``d.size``); returns how
    many. ``method``: 0 the fastest the CPU has; 1 scalar, 2 AVX2, 3 AVX-512 (tests)."""
    return _load().gate_bracket_block(d.ctypes.data, d.size, low, high, out.ctypes.data, method)


def gather(a: np.ndarray, b: np.ndarray, positions: np.ndarray):
    """``(a.reshape(-1)[positions], b.reshape(-1)[positions])`` by the compiled kernel, or None where it
    cannot (not built, ``a``/``b`` not contiguous or of different dtypes, not bool, integer or
    float, itemsize not 1, 2, 4 or 8). ``positions``: int64 in ``[0, a.size)``, contiguous. The
    same values as numpy's fancy indexing, about 3x faster on scattered positions (each read a
    cache miss; the C loop prefetches ahead)."""
    lib = _load()
    itemsize = a.dtype.itemsize
    if (
        lib is None
        or not (a.flags.c_contiguous and b.flags.c_contiguous)
        or a.dtype != b.dtype
        or a.dtype.kind not in "biuf"
        or itemsize not in (1, 2, 4, 8)
        or positions.dtype != np.int64
        or not positions.flags.c_contiguous
    ):
        return None
    sample_a, sample_b = np.empty(positions.size, a.dtype), np.empty(positions.size, b.dtype)
    lib.gate_gather(
        itemsize,
        a.ctypes.data,
        b.ctypes.data,
        positions.ctypes.data,
        positions.size,
        sample_a.ctypes.data,
        sample_b.ctypes.data,
    )
    return sample_a, sample_b
