"""Crafted files (issue 14): FIFOs, a compressed-npz bomb, deep nesting, NUL in a path and float sums
near the largest float end in one GateError line (or the right number), never a hang, a traceback
or gigabytes of memory."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import threading
import tracemalloc
import zipfile

import numpy as np
import pytest
from numpy.lib import format as npy_format

from gate.comparator.compare import OutputCompareResult, SimpleThreshold
from gate.comparator.serde import from_json, load_json
from gate.data.npz import MAX_INFLATED_BYTES, read_npz
from gate.data.storage import TensorSet, read_tensor_proto
from gate.errors import GateError
from gate.limits import exact_mean, nesting_depth
from gate.paths import open_regular, read_regular

from conftest import EXAMPLE, ROOT


def _check(config, *extra, timeout=60):
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_WORKSPACE"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "gate", "check", str(config), *extra],
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


def _one_error_line(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("accuracy-gate: error:")]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


@pytest.fixture
def example_copy(tmp_path):
    dest = tmp_path / "ex"
    shutil.copytree(EXAMPLE, dest)
    return dest


# --- only regular files are read ---------------------------------------------------------------


def _unblock_after(fifo, seconds=15.0):
    """Opens ``fifo`` for writing after ``seconds`` (so a reader blocked on it on main gets unstuck
    and the test fails instead of hanging); returns the thread."""

    def writer():
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        os.close(fd)

    timer = threading.Timer(seconds, writer)
    timer.daemon = True
    timer.start()
    return timer


def test_a_fifo_as_the_config_is_one_error_line(example_copy):
    fifo = example_copy / "fifo.toml"
    os.mkfifo(fifo)
    _unblock_after(fifo)
    proc = _check(fifo)
    _one_error_line(proc, "fifo.toml: the config file is a FIFO, not a regular file")


def test_a_fifo_as_a_golden_file_is_one_error_line(example_copy):
    golden = example_copy / "data" / "test_data_set_3" / "output_0.pb"
    golden.unlink()
    os.mkfifo(golden)
    _unblock_after(golden)
    proc = _check(example_copy / "gate.toml")
    _one_error_line(proc, "output_0.pb", "is a FIFO, not a regular file")


@pytest.mark.parametrize("kind", ["npz", "pb", "json"])
def test_the_readers_refuse_a_fifo_without_blocking(tmp_path, kind):
    fifo = tmp_path / f"0.{kind}"
    os.mkfifo(fifo)
    _unblock_after(fifo)
    read = {"npz": read_npz, "pb": read_tensor_proto, "json": load_json}[kind]
    with pytest.raises(GateError, match="is a FIFO, not a regular file"):
        read(fifo)


def test_open_regular_reads_a_file_and_refuses_a_directory(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"abc")
    with open_regular(tmp_path / "a.bin") as f:
        assert f.read() == b"abc"
    assert read_regular(tmp_path / "a.bin", limit=1) == b"ab"
    with pytest.raises(GateError, match="is a directory, not a regular file"):
        open_regular(tmp_path)
    with pytest.raises(FileNotFoundError):
        open_regular(tmp_path / "missing")


# --- compressed npz members are bounded before inflating ---------------------------------------


def _deflated_npz(path, shape, data_bytes=None, dtype=np.float32):
    """A compressed .npz with one member ``y.npy`` whose header declares ``shape`` and whose data is
    ``data_bytes`` zero bytes (by default what the shape needs): zeros deflate ~1000 to 1."""
    header = io.BytesIO()
    npy_format.write_array_header_1_0(
        header, {"descr": npy_format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False, "shape": shape}
    )
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize if data_bytes is None else data_bytes
    chunk = bytes(1 << 24)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open("y.npy", "w", force_zip64=True) as member:
            member.write(header.getvalue())
            while n > 0:
                member.write(chunk[: min(n, len(chunk))])
                n -= len(chunk)
    return path


def test_a_small_npz_that_inflates_past_the_limit_is_refused_before_inflating(tmp_path):
    bomb = _deflated_npz(tmp_path / "000000.npz", (MAX_INFLATED_BYTES // 4,))  # 1 GiB + header
    assert os.path.getsize(bomb) < 8 << 20
    tracemalloc.start()
    try:
        with pytest.raises(GateError, match=r"000000.npz: not a readable .npz file .*inflate to \d+ bytes"):
            TensorSet(tmp_path, "output")[0]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak  # on main: 1 GiB allocated and filled


def test_a_compressed_member_larger_than_its_shape_needs_is_refused(tmp_path):
    path = _deflated_npz(tmp_path / "000000.npz", (4,), data_bytes=64 << 20)
    with pytest.raises(ValueError, match=r"member 'y.npy' holds 67108864 bytes of data, but its header describes 16"):
        read_npz(path)


def test_a_compressed_npz_within_its_bounds_reads_as_numpy_does(tmp_path):
    arrays = {"a": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.zeros((1000, 100), np.int64)}
    np.savez_compressed(tmp_path / "0.npz", **arrays)
    read = read_npz(tmp_path / "0.npz")
    assert list(read) == ["a", "b"]
    np.testing.assert_array_equal(read["a"], arrays["a"])
    np.testing.assert_array_equal(read["b"], arrays["b"])


# --- nesting depth -------------------------------------------------------------------------------


def test_a_config_nested_3000_levels_is_one_error_line(example_copy):
    config = example_copy / "deep.toml"
    text = (example_copy / "gate.toml").read_text()
    config.write_text(text.replace("[onnxrt]", "deep = " + "[" * 3000 + "]" * 3000 + "\n[onnxrt]"))
    _one_error_line(_check(config), "deep.toml: the config nests more than 32 levels deep")


def test_a_config_nested_100_inline_tables_is_one_error_line(example_copy):
    config = example_copy / "deep.toml"
    text = (example_copy / "gate.toml").read_text()
    config.write_text(text.replace("[onnxrt]", "deep = " + "{a=" * 100 + "1" + "}" * 100 + "\n[onnxrt]"))
    _one_error_line(_check(config), "nests more than 32 levels deep")


@pytest.mark.parametrize("depth", [2000, 200])
def test_polygraphy_json_nested_deeply_is_a_gate_error(tmp_path, depth):
    with pytest.raises(GateError, match="the JSON document nests more than 64 levels deep"):
        from_json("[" * depth + "]" * depth, source="deep.json")
    path = tmp_path / "golden.json"
    path.write_text('{"a": ' + "[" * depth + "]" * depth + "}")
    with pytest.raises(GateError, match="golden.json: the JSON document nests more than 64"):
        load_json(path)


def test_nesting_depth_counts_lists_and_mappings():
    assert nesting_depth(1, 5) == 0
    assert nesting_depth([], 5) == 1
    assert nesting_depth({"a": [{"b": 1}]}, 5) == 3
    deep = current = []
    for _ in range(10_000):
        current.append([])
        current = current[0]
    assert nesting_depth(deep, 64) == 65  # stops early, no recursion
    assert json.loads(json.dumps({"x": [[1]]})) == from_json('{"x": [[1]]}')


# --- NUL in a gate.toml path -----------------------------------------------------------------------


@pytest.mark.parametrize("key", ["model", "golden", "inputs"])
def test_nul_in_a_config_path_is_one_error_line(example_copy, key):
    config = example_copy / "nul.toml"
    lines = [
        f'{key} = "x\\u0000y"' if line.startswith(f"{key} =") else line
        for line in (example_copy / "gate.toml").read_text().splitlines()
    ]
    config.write_text("\n".join(lines) + "\n")
    _one_error_line(_check(config), "holds a NUL character; a path cannot hold one")


def test_nul_in_the_junit_path_is_one_error_line(example_copy):
    config = example_copy / "nul.toml"
    config.write_text((example_copy / "gate.toml").read_text().replace('junit = "', 'junit = "a\\u0000'))
    _one_error_line(_check(config), "'report.junit' holds a NUL character")


# --- exact sums that cannot overflow ------------------------------------------------------------------


def test_exact_mean_near_the_largest_float():
    assert exact_mean([1e308, 1e308, 1.5e308]) == 1.1666666666666667e308
    assert exact_mean([1e308, 1e308, -1e308, -1e308, 1e-300]) == 2e-301  # exact: nothing is lost
    assert exact_mean([1.0, 2.0]) == 1.5
    assert exact_mean([float("inf"), 1.0]) == float("inf")
    assert np.isnan(exact_mean([float("inf"), -float("inf")]))
    values = [0.1] * 10
    assert exact_mean(values) == 0.1


def test_check_average_over_errors_near_1e308_gives_the_mean():
    threshold = SimpleThreshold("max", atol=1.0, rtol=1.0)
    results = [
        OutputCompareResult(*(1.5e308, 1.5e308, 1e308, 1e308), thresholds=threshold, num_elements=4),
        OutputCompareResult(*(1.7e308, 1.7e308, 1.2e308, 1.2e308), thresholds=threshold, num_elements=4),
    ]
    averaged = OutputCompareResult.averaged(results)  # on main: OverflowError in math.fsum
    assert averaged.max_absdiff == 1.6e308
    assert averaged.mean_absdiff == 1.1e308
    assert not averaged
