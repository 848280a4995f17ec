"""The compare kernel's float16 -> float32 conversion (gate/comparator/kernels_float16.py) against
numpy's own cast, bit for bit, for every one of the 65536 float16 bit patterns."""

from __future__ import annotations

import numpy as np

from gate.comparator.kernels_float16 import float16_to_float32, subnormals_honoured

PATTERNS = np.arange(1 << 16, dtype=np.uint16)
SPECIAL = (PATTERNS & 0x7C00) == 0x7C00  # exponent bits all ones: the infinities and NaNs


def _converted_bits(patterns: np.ndarray) -> np.ndarray:
    out = np.empty(patterns.size, np.float32)
    result = float16_to_float32(patterns.view(np.float16), out)
    assert result is out
    return out.view(np.uint32)


def _numpy_bits(patterns: np.ndarray) -> np.ndarray:
    return patterns.view(np.float16).astype(np.float32).view(np.uint32)


def test_every_finite_pattern_converts_as_numpy_casts_it():
    """The bit-manipulation path: zeros, -0, all 2046 subnormals, all normals, both signs."""
    assert subnormals_honoured()  # no DAZ here, so this is the fast path, not the table
    finite = PATTERNS[~SPECIAL]
    assert finite.size == 63488
    assert np.array_equal(_converted_bits(finite), _numpy_bits(finite))
    subnormal = finite[((finite & 0x7C00) == 0) & ((finite & 0x3FF) != 0)]
    assert subnormal.size == 2046
    values = _converted_bits(subnormal).view(np.float32)
    assert values.min() == -(2.0**-14) * (1023 / 1024) and np.abs(values).min() == 2.0**-24


def test_every_pattern_with_infinities_and_nans_converts_as_numpy_casts_it():
    """A block holding an infinity or a NaN (payloads and signs kept) takes numpy's table."""
    assert np.array_equal(_converted_bits(PATTERNS), _numpy_bits(PATTERNS))
    assert np.count_nonzero(SPECIAL) == 2048
    for pattern in PATTERNS[SPECIAL]:  # each infinity and NaN alone among finite values of both signs
        block = np.array([0xBC00, 0x3C00, pattern, 0x8001, 0x0001, 0x7BFF, 0xFBFF], np.uint16)
        assert np.array_equal(_converted_bits(block), _numpy_bits(block)), hex(pattern)


def test_strided_input_converts_too():
    every = np.linspace(-65504, 65504, 1000, dtype=np.float32).astype(np.float16)
    every[0], every[-1] = -np.inf, np.inf
    halves = every[::3]  # a strided view, +-inf at its ends (999 = 3 * 333)
    assert not halves.flags.c_contiguous and halves[-1] == np.inf
    out = np.empty(halves.size, np.float32)
    float16_to_float32(halves, out)
    assert np.array_equal(out.view(np.uint32), halves.astype(np.float32).view(np.uint32))
    finite = halves[1:-1]
    float16_to_float32(finite, out[: finite.size])
    assert np.array_equal(out[: finite.size], finite.astype(np.float32))


def test_a_thread_that_flushes_subnormals_takes_the_table(monkeypatch):
    """Under DAZ the multiplication would read the float16 subnormals' float32 images as 0; the
    check sends such a thread to the table, which gives numpy's bits."""
    from gate.comparator import kernels_float16

    calls = []
    monkeypatch.setattr(kernels_float16, "subnormals_honoured", lambda: calls.append(1) or False)
    monkeypatch.setattr(
        kernels_float16, "float16_table", lambda: calls.append(2) or _numpy_bits(PATTERNS).view(np.float32)
    )
    finite = PATTERNS[~SPECIAL]
    assert np.array_equal(_converted_bits(finite), _numpy_bits(finite))
    assert calls == [1, 2]


def test_equal_float16_outputs_take_the_shortcut_on_their_bits(monkeypatch):
    """Equal finite float16 outputs skip the differences by comparing bits (numpy's float16
    comparisons converted every element: 64 times the floor at 16 Mi elements, slower than the
    full pass); -0 against +0, or an infinity, still get the full pass, whose numbers are the same."""
    from gate.comparator import kernels
    from gate.comparator.kernels_blocks import BlockDiffs

    monkeypatch.setattr(kernels, "CHUNK", 1000)
    rng = np.random.default_rng(4)
    a = rng.standard_normal(9_500).astype(np.float16)
    a[::7] = 0
    full_passes = []
    real_call = BlockDiffs.__call__
    monkeypatch.setattr(BlockDiffs, "__call__", lambda self, x, y: full_passes.append(1) or real_call(self, x, y))

    def stats(x, y):
        full_passes.clear()
        with np.errstate(all="ignore"):
            result = kernels.diff_statistics(x, y, check_error_stat="elemwise", atol=1e-5, rtol=1e-5)
        return result, len(full_passes)

    shortcut, blocks = stats(a, a.copy())
    assert blocks == 0
    assert shortcut["zero_reference_count"] == int(np.count_nonzero(a == 0)) >= 9_500 // 7
    assert shortcut["max_absdiff"] == 0.0 and shortcut["mismatch_count"] == 0 and shortcut["worst_index"] == 0
    signed = a.copy()
    signed[signed == 0] = -0.0  # equal values, other bits
    full, blocks = stats(a, signed)
    assert blocks == 10 and full == shortcut
    special = a.copy()
    special[-1] = np.inf
    _, blocks = stats(special, special.copy())
    assert blocks == 10
