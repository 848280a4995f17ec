"""The compiled block of the compare kernel (gate/comparator/_fused.c, kernels_fused) against the
numpy passes it replaces: the same bits for every float16 pattern, random float32/float16 blocks,
zeros, infinities, NaN (which fall back), thresholds at numpy's own comparison, and every statistic
of ``diff_statistics`` through several blocks and threads."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gate.comparator import kernels, kernels_fused
from gate.comparator.kernels import diff_statistics
from gate.comparator.kernels_blocks import BlockDiffs
from gate.errors import GateError

compiled = pytest.mark.skipif(not kernels_fused.available(), reason="compiled compare kernel not built here")


def test_built_where_a_compiler_is():
    """pip install -e . builds it wherever a C compiler is (CI's runners have one)."""
    if shutil.which("cc") or shutil.which("gcc"):
        assert kernels_fused.available(), "a C compiler is here but gate/comparator/_fused*.so was not built"
        assert kernels_fused.kernel_name() == "compiled"


@contextlib.contextmanager
def numpy_kernel():
    saved = list(kernels_fused._LIB)
    kernels_fused._LIB[:] = [None]
    try:
        yield
    finally:
        kernels_fused._LIB[:] = saved


def both_blocks(a, b, tolerances=(1e-5, 1e-5), inf_eq=True, nan_eq=False):
    """(compiled Block, numpy Block) of one block, arrays copied out of the scratch buffers."""
    blocks = []
    for use_numpy in (False, True):
        with numpy_kernel() if use_numpy else contextlib.nullcontext(), np.errstate(all="ignore"):
            diffs = BlockDiffs(a, b, inf_eq, nan_eq, tolerances)
            assert diffs.compiled == (not use_numpy)
            block = diffs(a, b)
            blocks.append(block._replace(absdiff=block.absdiff.copy(), reldiff=block.reldiff.copy()))
    return blocks


def assert_same_block(fused, reference, tolerances=(1e-5, 1e-5)):
    assert fused.absdiff.dtype == reference.absdiff.dtype == np.float32
    assert np.array_equal(fused.absdiff.view(np.uint32), reference.absdiff.view(np.uint32))
    assert np.array_equal(fused.reldiff.view(np.uint32), reference.reldiff.view(np.uint32))
    assert fused.zero_count == reference.zero_count
    top, top_rel = fused.top, fused.top_rel
    assert (top.view(np.uint32), top_rel.view(np.uint32)) == (
        reference.top.view(np.uint32),
        reference.top_rel.view(np.uint32),
    )
    if fused.fused is None:  # a NaN difference: the numpy passes ran
        return
    first_max, mismatches, sum_abs, sum_rel, _ = fused.fused
    assert first_max == int(np.argmax(reference.absdiff))
    assert sum_abs == float(np.add.reduce(reference.absdiff.astype(np.float64)))
    assert sum_rel == float(np.add.reduce(reference.reldiff.astype(np.float64)))
    over = np.greater(reference.absdiff, tolerances[0]) & np.greater(reference.reldiff, tolerances[1])
    count = int(np.count_nonzero(over))
    assert mismatches[0] == count
    if count:
        masked = np.where(over, reference.absdiff, -1)
        assert mismatches[2] == int(np.argmax(masked)) and mismatches[1] == masked.max()


@compiled
@pytest.mark.parametrize("method", [0, 1])
def test_every_float16_pattern_converts_as_numpy(method):
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    out = np.empty(bits.size, np.float32)
    kernels_fused._load().gate_convert_half(bits.ctypes.data, out.ctypes.data, bits.size, method)
    expected = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(expected)
    assert np.array_equal(out[~nan].view(np.uint32), expected[~nan].view(np.uint32))
    assert np.isnan(out[nan]).all()
    if method == 0:  # the integer formula keeps NaN payloads as numpy does
        assert np.array_equal(out.view(np.uint32), expected.view(np.uint32))


@compiled
def test_every_float16_pattern_against_others():
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    finite = bits[np.isfinite(bits.view(np.float16))]
    rng = np.random.default_rng(7)
    a = finite.view(np.float16)
    for b in (rng.permutation(finite).view(np.float16), np.zeros_like(a), a.copy(), -a):
        fused, reference = both_blocks(a, b)
        assert fused.fused is not None
        assert_same_block(fused, reference)


@compiled
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("size", [1, 7, 8, 9, 127, 129, 511, 512, 513, 4097, 1 << 18])
def test_random_blocks(dtype, size):
    rng = np.random.default_rng(size)
    a = (rng.standard_normal(size) * 10).astype(dtype)
    b = (a.astype(np.float64) + rng.standard_normal(size) * 1e-3).astype(dtype)
    b[rng.integers(0, size, max(1, size // 50))] = 0  # zeros of the reference
    a[rng.integers(0, size, max(1, size // 90))] = 0
    for tolerances in ((1e-5, 1e-5), (1e-3, 1e-2), (0.0, 0.0), (np.inf, 0.0), (1e30, 1e30)):
        fused, reference = both_blocks(a, b, tolerances)
        assert fused.fused is not None
        assert_same_block(fused, reference, tolerances)


@compiled
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_specials(dtype):
    """Infinities on one side give inf differences (compiled); on both sides or NaN anywhere the
    differences hold a NaN and the numpy passes run (fused is None), with the same numbers."""
    big = np.finfo(dtype).max
    a = np.array([1, np.inf, 2, -0.0, 0.0, big, -big, 3], dtype)
    b = np.array([1, 2, 2, 0.0, -0.0, -big, big, 0], dtype)
    fused, reference = both_blocks(a, b)
    assert fused.fused is not None and np.isinf(fused.top)
    assert_same_block(fused, reference)
    for a2, b2 in (
        (np.array([1, np.inf], dtype), np.array([1, np.inf], dtype)),
        (np.array([1, 2], dtype), np.array([np.nan, 2], dtype)),
        (np.array([1, 2], dtype), np.array([1, -np.inf], dtype)),
    ):
        for nan_eq in (False, True):
            fused, reference = both_blocks(a2, b2, nan_eq=nan_eq)
            assert fused.fused is None
            assert_same_block(fused, reference)


@compiled
@pytest.mark.parametrize("tolerance", [0.0, 1e-5, 1e-4, 0.1, 1 / 3, 2.0**-126, 2.0**-149, 1e-45, 3.5e38, 1e39, np.inf])
def test_threshold_bits_is_numpys_comparison(tolerance):
    lo = kernels_fused.threshold_bits(tolerance)
    around = np.arange(max(0, lo - 3), min(0x7F800001, lo + 3), dtype=np.uint32)
    near = np.float32(tolerance) if tolerance < 3.4e38 else np.float32(np.inf)
    around = np.concatenate([around, np.arange(-2, 3, dtype=np.int64) + int(near.view(np.uint32))]).astype(np.uint32)
    around = around[around <= 0x7F800000]
    with np.errstate(over="ignore"):
        assert np.array_equal(np.greater(around.view(np.float32), tolerance), around >= lo)


def test_negative_tolerance_leaves_mismatches_to_numpy():
    a = np.zeros(4, np.float32)
    diffs = BlockDiffs(a, a, True, False, (-1.0, 0.0))
    assert diffs.thresholds is None


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("stat", ["elemwise", "mean", "median", "max", "quantile"])
@pytest.mark.parametrize("threads", ["1", "3"])
@pytest.mark.parametrize("ties", [False, True])
def test_statistics_equal_numpys(dtype, stat, threads, ties, monkeypatch):
    """Every statistic of diff_statistics, through several blocks and threads, is the same with the
    compiled block as with the numpy passes (the whole dict, means to the last bit)."""
    monkeypatch.setattr(kernels, "CHUNK", 1000)
    monkeypatch.setenv("ACCURACY_GATE_COMPARE_THREADS", threads)
    rng = np.random.default_rng(3)
    n = 10_500
    a = rng.standard_normal(n).astype(dtype)
    b = (a + rng.standard_normal(n) * 2e-3).astype(dtype)
    if ties:  # differences of a few values: the brackets' point and exclusive modes
        a = (rng.integers(0, 4, n) / 4).astype(dtype)
        b = (a + (rng.integers(0, 3, n) - 1) * 0.25).astype(dtype)
    b[::97] = 0
    a[5000] = 40  # one far element: the worst index is decided across blocks
    if dtype == np.float32:
        b[7003] = np.nan  # one block takes the numpy passes
    results = []
    for use_numpy in (False, True):
        with numpy_kernel() if use_numpy else contextlib.nullcontext(), np.errstate(all="ignore"):
            results.append(diff_statistics(a, b, check_error_stat=stat, atol=1e-3, rtol=1e-3, quantile=0.9))
    assert results[0].keys() == results[1].keys()
    for key, value in results[0].items():
        other = results[1][key]
        assert type(value) is type(other) and (value == other or (value != value and other != other)), key


def test_kernel_choice_by_environment():
    code = "from gate.comparator import kernels_fused as k; print(k.kernel_name())"
    env_numpy = {"ACCURACY_GATE_COMPARE_KERNEL": "numpy"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env_numpy | _base_env())
    assert out.returncode == 0 and out.stdout.strip() == "numpy (ACCURACY_GATE_COMPARE_KERNEL=numpy)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"ACCURACY_GATE_COMPARE_KERNEL": "fast"} | _base_env(),
    )
    assert out.returncode != 0 and "ACCURACY_GATE_COMPARE_KERNEL='fast': expected auto, compiled or numpy" in out.stderr


def test_bad_choice_is_a_gate_error(monkeypatch):
    monkeypatch.setenv("ACCURACY_GATE_COMPARE_KERNEL", "fast")
    with pytest.raises(GateError, match="expected auto, compiled or numpy"):
        kernels_fused._open()
    monkeypatch.setenv("ACCURACY_GATE_COMPARE_KERNEL", "compiled")
    monkeypatch.setattr(kernels_fused.Path, "glob", lambda self, pattern: iter(()))
    with pytest.raises(GateError, match="was not built"):
        kernels_fused._open()


def _base_env():
    import os

    return {k: v for k, v in os.environ.items() if k != "ACCURACY_GATE_COMPARE_KERNEL"}


def test_a_library_that_does_not_load_falls_back(tmp_path, monkeypatch):
    """A built library copied to a machine it does not load on: numpy's passes, and the reason is
    shown where the kernel is named; ``compiled`` asked for explicitly is an error."""
    broken = tmp_path / "_fused.abi3.so"
    broken.write_bytes(b"not an ELF file")
    monkeypatch.setattr(kernels_fused.Path, "glob", lambda self, pattern: iter([broken]))
    monkeypatch.setattr(kernels_fused, "_UNUSABLE", [])
    monkeypatch.delenv("ACCURACY_GATE_COMPARE_KERNEL", raising=False)
    assert kernels_fused._open() is None
    assert kernels_fused._UNUSABLE and "_fused.abi3.so does not load" in kernels_fused._UNUSABLE[0]
    monkeypatch.setenv("ACCURACY_GATE_COMPARE_KERNEL", "compiled")
    with pytest.raises(GateError, match="does not load"):
        kernels_fused._open()


@pytest.mark.parametrize("x", [0.0, -0.0, 1e-30, 0.5, 1.0, 3e38, np.inf, -np.inf, -1.0, np.nan, 2.0**-149])
def test_bracket_thresholds_are_ieee_comparisons(x):
    values = np.array([0.0, 2.0**-149, 1e-30, 0.25, 0.5, 1.0, 2.0, 3e38, np.inf], np.float32)
    values = np.concatenate([values, np.nextafter(values, np.float32(np.inf))])
    values = values[~np.isnan(values)]
    bits = values.view(np.uint32)
    x32 = np.float32(x)
    assert np.array_equal(values < x32, bits < kernels_fused.bits_below(x32))
    assert np.array_equal(values <= x32, bits < kernels_fused.bits_at_or_below(x32))


@compiled
def test_a_library_of_another_abi_is_not_called(tmp_path, monkeypatch):
    """A library built from another version of _fused.c (an editable install whose C file changed
    and was not rebuilt) is never called with arguments it does not take (that corrupted memory):
    numpy's passes run, and the reason is named."""
    src = (Path(kernels_fused.__file__).parent / "_fused.c").read_text()
    old = tmp_path / "_fused.abi3.so"
    subprocess.run(
        ["cc", "-O1", "-fPIC", "-shared", "-x", "c", "-", "-o", str(old)],
        input=src.replace("#define GATE_FUSED_ABI ", "#define GATE_FUSED_ABI 1000 + "),
        text=True,
        check=True,
    )
    monkeypatch.setattr(kernels_fused.Path, "glob", lambda self, pattern: iter([old]))
    monkeypatch.setattr(kernels_fused, "_UNUSABLE", [])
    monkeypatch.delenv("ACCURACY_GATE_COMPARE_KERNEL", raising=False)
    assert kernels_fused._open() is None
    assert "built from another version of _fused.c" in kernels_fused._UNUSABLE[0]
    monkeypatch.setenv("ACCURACY_GATE_COMPARE_KERNEL", "compiled")
    with pytest.raises(GateError, match="another version"):
        kernels_fused._open()


@pytest.mark.parametrize("value", ["fast", "compiled-please"])
def test_a_bad_kernel_choice_stops_check_before_the_model_runs(tmp_path, monkeypatch, capsys, value):
    """Whatever the outputs' dtypes: an int64 output never reaches the float blocks, and the setting
    passed (exit 0) there before; a float one stopped only after inference, as an iteration's error."""
    from onnx import TensorProto
    from test_exact_details import identity_gate

    from gate import cli

    (tmp_path / "g").mkdir()
    config = identity_gate(tmp_path / "g", TensorProto.INT64, [np.array([1, 2])], [np.array([1, 2])])
    monkeypatch.setattr(kernels_fused, "_LIB", [])
    monkeypatch.setenv("ACCURACY_GATE_COMPARE_KERNEL", value)
    assert cli.main(["check", str(config), "--junit", str(config.parent / "j.xml")]) == 2
    err = capsys.readouterr().err
    assert f"ACCURACY_GATE_COMPARE_KERNEL='{value}': expected auto, compiled or numpy" in err
    assert "iteration" not in err and "Traceback" not in err


def test_an_empty_kernel_choice_is_auto(monkeypatch):
    monkeypatch.setattr(kernels_fused, "_LIB", [])
    monkeypatch.setattr(kernels_fused, "_UNUSABLE", [])
    monkeypatch.setenv("ACCURACY_GATE_COMPARE_KERNEL", " ")
    assert kernels_fused.kernel_name() == ("compiled" if kernels_fused._open() is not None else "numpy")


def test_a_numpy_float64_tolerance_is_compared_as_polygraphy_compares_it():
    """``atol=np.float64(1e-3)`` against a difference of float32(1e-3) (which is above 1e-3): numpy 2
    compares in float64, so Polygraphy fails it; ours turned the tolerance into a Python float,
    compared in float32 (equal: passed), with either kernel."""
    pg_compare = pytest.importorskip("polygraphy.comparator.compare")
    from polygraphy.comparator import struct as pg_struct

    from gate.comparator import IterationResult, SimpleCompareFunc

    a, b = np.array([1e-3, 0], np.float32), np.zeros(2, np.float32)
    kwargs = dict(check_error_stat="elemwise", atol=np.float64(1e-3), rtol=np.float64(0))
    theirs = pg_compare.CompareFunc.simple(**kwargs)(
        pg_struct.IterationResult({"y": a}, runner_name="a"), pg_struct.IterationResult({"y": b}, runner_name="b")
    )["y"]
    expected = not bool(np.greater(a[:1], np.float64(1e-3))[0])
    for use_numpy in (False, True):
        with numpy_kernel() if use_numpy else contextlib.nullcontext():
            ours = SimpleCompareFunc(**kwargs)(
                IterationResult({"y": a}, runner_name="a"), IterationResult({"y": b}, runner_name="b")
            )["y"]
        assert bool(ours) == bool(theirs) == expected
    with np.errstate(all="ignore"):
        results = [diff_statistics(a, b, check_error_stat="elemwise", atol=np.float64(1e-3), rtol=0.0)]
        with numpy_kernel():
            results.append(diff_statistics(a, b, check_error_stat="elemwise", atol=np.float64(1e-3), rtol=0.0))
    assert results[0]["mismatch_count"] == results[1]["mismatch_count"] == (0 if expected else 1)


@compiled
def test_thresholds_found_on_a_thread_that_reads_subnormals_as_zero_are_kept_apart(tmp_path):
    """numpy's comparisons on a thread with MXCSR.DAZ set read a subnormal as 0: a threshold found
    there (0.0 -> the smallest normal) was cached for every thread, and a subnormal difference on a
    normal thread then mismatched under numpy's passes but not in the compiled block."""
    import ctypes
    import threading

    lib = tmp_path / "mxcsr.so"
    subprocess.run(
        ["cc", "-O1", "-fPIC", "-shared", "-x", "c", "-", "-o", str(lib)],
        input="#include <xmmintrin.h>\nvoid set_daz(int on) { unsigned m = _mm_getcsr(); "
        "_mm_setcsr(on ? (m | 0x40u) : (m & ~0x40u)); }\n",
        text=True,
        check=True,
    )
    set_daz = ctypes.CDLL(str(lib)).set_daz
    tolerance = 0.0 + 0.0  # a float of its own (the cache holds values, not objects)
    found = []

    def on_daz_thread():
        set_daz(1)
        found.append(kernels_fused.threshold_bits(tolerance))

    thread = threading.Thread(target=on_daz_thread)
    thread.start()
    thread.join()
    assert found == [0x00800000]  # numpy there: no subnormal is greater than 0
    assert kernels_fused.threshold_bits(tolerance) == 1  # here: the smallest subnormal is
    a, b = np.array([1e-40, 0], np.float32), np.zeros(2, np.float32)
    with np.errstate(all="ignore"):
        results = [diff_statistics(a, b, check_error_stat="elemwise", atol=0.0, rtol=0.0)]
        with numpy_kernel():
            results.append(diff_statistics(a, b, check_error_stat="elemwise", atol=0.0, rtol=0.0))
    assert results[0]["mismatch_count"] == results[1]["mismatch_count"] == 1


@compiled
def test_a_build_of_an_installed_gate_is_found_behind_a_source_tree(tmp_path, monkeypatch):
    """``python -m gate`` in a clone after a non-editable install: the clone's gate/ comes first on
    sys.path and has no built library; the installed one's is used (it was numpy's passes)."""
    import shutil

    source = tmp_path / "clone" / "gate" / "comparator"
    source.mkdir(parents=True)
    installed = tmp_path / "site" / "gate" / "comparator"
    installed.mkdir(parents=True)
    shutil.copy(sorted(Path(kernels_fused.__file__).parent.glob("_fused*.so"))[0], installed / "_fused.abi3.so")
    monkeypatch.setattr(kernels_fused, "__file__", str(source / "kernels_fused.py"))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "clone"), str(tmp_path / "site")])
    monkeypatch.setattr(kernels_fused, "_UNUSABLE", [])
    monkeypatch.delenv("ACCURACY_GATE_COMPARE_KERNEL", raising=False)
    assert kernels_fused._open() is not None


def test_the_reason_for_numpys_passes_is_named(monkeypatch):
    monkeypatch.setattr(kernels_fused, "_LIB", [])
    monkeypatch.setattr(kernels_fused, "_UNUSABLE", [])
    monkeypatch.setenv("ACCURACY_GATE_COMPARE_KERNEL", "numpy")
    assert kernels_fused.kernel_name() == "numpy (ACCURACY_GATE_COMPARE_KERNEL=numpy)"


@compiled
@pytest.mark.parametrize(
    "dtype", [np.bool_, np.int8, np.uint16, np.float16, np.int32, np.float32, np.int64, np.float64]
)
def test_the_sample_gather_is_numpys_fancy_indexing(dtype):
    """The order-statistics sample read by the compiled gather (prefetching ahead) is
    ``a.reshape(-1)[positions]``, for every itemsize, including the first and last elements."""
    rng = np.random.default_rng(11)
    a = rng.integers(0, 200, (37, 113)).astype(dtype)
    b = rng.integers(0, 200, (37, 113)).astype(dtype)
    positions = np.sort(rng.integers(0, a.size, 500)).astype(np.int64)
    positions[0], positions[-1] = 0, a.size - 1
    got = kernels_fused.gather(a, b, positions)
    assert got is not None
    assert got[0].dtype == a.dtype and np.array_equal(got[0], a.reshape(-1)[positions])
    assert np.array_equal(got[1], b.reshape(-1)[positions])


@compiled
def test_the_gather_leaves_what_it_cannot_read_to_numpy():
    a = np.arange(100, dtype=np.float32).reshape(10, 10)
    positions = np.arange(0, 50, 7, dtype=np.int64)
    assert kernels_fused.gather(a.T, a, positions) is None  # not contiguous
    assert kernels_fused.gather(a, a.astype(np.float64), positions) is None  # dtypes differ
    objects = np.array([object()] * 4)
    assert kernels_fused.gather(objects, objects, np.arange(2, dtype=np.int64)) is None
    assert kernels_fused.gather(a, a, positions.astype(np.int32)) is None


@compiled
@pytest.mark.parametrize("method", [0, 1, 2, 3])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 1000, 4099])
@pytest.mark.parametrize("share", [0.0, 0.01, 0.3, 1.0])
def test_kept_values_are_those_in_the_bracket_in_order(method, n, share):
    """gate_bracket_block's scalar, AVX2 and AVX-512 copies (each where the CPU has it, else the
    scalar one) give the values with lo <= bits < hi in order, and write nothing past them."""
    rng = np.random.default_rng(n)
    d = np.abs(rng.standard_normal(n)).astype(np.float32)
    bits = d.view(np.uint32)
    inside = rng.random(n) < share
    lo, hi = int(np.uint32(np.float32(2.0).view(np.uint32))), int(np.float32(3.0).view(np.uint32))
    d[inside] = rng.uniform(2.0, 3.0, int(inside.sum())).astype(np.float32)
    d[0] = 2.0  # lo itself is kept, hi is not
    if n > 1:
        d[-1] = 3.0
    expected = bits[(bits >= lo) & (bits < hi)]
    out = np.full(n + 16, 0xDEADBEEF, np.uint32)
    assert kernels_fused.bracket_block(d, lo, hi, out, method) == expected.size
    assert np.array_equal(out[: expected.size], expected)
    assert np.all(out[n:] == 0xDEADBEEF)


@compiled
@pytest.mark.parametrize("four", [False, True])
def test_the_pass_counts_below_each_bracket_threshold(four):
    """The compiled pass's counts below the bracket thresholds (two per difference, or four),
    with thresholds at 0 (counting nothing) and above every float32 (clamped: counting all)."""
    rng = np.random.default_rng(5)
    n = 5000
    a = rng.standard_normal(n).astype(np.float32)
    b = (a + rng.standard_normal(n) * 1e-3).astype(np.float32)
    with np.errstate(all="ignore"):
        absdiff, reldiff = reference_float32(a, b)
    q = [np.quantile(absdiff, 0.3), np.quantile(absdiff, 0.6), np.quantile(reldiff, 0.4)]
    abs_t = [kernels_fused.bits_below(q[0]), 0xFFFFFFFF] + (
        [kernels_fused.bits_at_or_below(q[1]), 0] if four else [0, 0]
    )
    rel_t = [0, kernels_fused.bits_at_or_below(q[2])] + (
        [0x80000000, kernels_fused.bits_below(q[2])] if four else [0, 0]
    )
    thresholds = np.array(abs_t + rel_t, np.uint32)
    counts = np.zeros(8, np.int64)
    u, idx, sums = np.zeros(5, np.uint32), np.zeros(2, np.int64), np.zeros(2)
    out_abs, out_rel = np.empty(n, np.float32), np.empty(n, np.float32)
    nt = kernels_fused.NO_THRESHOLD
    assert kernels_fused.compare_block(a, b, 1e-38, nt, nt, out_abs, out_rel, u, idx, sums, (thresholds, counts))
    for j, t in enumerate(thresholds):
        values = (absdiff if j < 4 else reldiff).view(np.uint32)
        assert counts[j] == np.count_nonzero(values < t), j


def reference_float32(a, b):
    absdiff = np.abs(a - b)
    return absdiff, absdiff / np.abs(b)


@pytest.mark.parametrize("values", ["continuous", "ties", "one"])
def test_select_in_place_puts_each_rank_in_place(values):
    from gate.comparator.kernels_select import select_in_place

    rng = np.random.default_rng(2)
    x = {
        "continuous": rng.random(3001).astype(np.float32),
        "ties": (rng.integers(0, 3, 3001) * 0.5).astype(np.float32),
        "one": np.ones(7, np.float32),
    }[values]
    kth = [0, x.size // 2, x.size // 2 + 1, x.size - 1] if x.size > 2 else [0]
    expected = np.sort(x)
    y = x.copy()
    select_in_place(y, kth)
    assert [y[k] for k in kth] == [expected[k] for k in kth]
    assert np.array_equal(np.sort(y), expected)
