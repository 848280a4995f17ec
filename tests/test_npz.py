"""The one-copy ``.npz`` reader (gate/data/npz.py) gives what ``numpy.load`` gives, and refuses what
it refuses: every dtype, memory order and shape, compressed archives (numpy's own path), and
corrupt, truncated or object-holding files."""

from __future__ import annotations

import re
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import FUZZ, NPZ, mutations

from gate.data import open_tensor_set
from gate.data.npz import NotAnNpzArchive, _read_stored, read_npz
from gate.errors import GateError

ARRAYS = {
    "f32": np.arange(12, dtype=np.float32).reshape(3, 4) / 7,
    "f16": np.array([0.5, -0.0, np.inf, np.nan], np.float16),
    "big_endian": np.arange(5, dtype=">f8"),
    "fortran": np.asfortranarray(np.arange(24, dtype=np.int64).reshape(2, 3, 4)),
    "scalar": np.array(3.25),
    "empty": np.zeros((0, 7), np.uint8),
    "bools": np.array([[True, False], [False, True]]),
    "text": np.array(["a", "bcd"]),
    "bf16_bits": np.arange(6, dtype=np.uint16).reshape(2, 3),
    "complex": np.array([1 + 2j, -3j], np.complex64),
}


def numpy_load(path):
    with np.load(path, allow_pickle=False) as archive:
        return {name: archive[name] for name in archive.files}


def same(got, expected):
    assert list(got) == list(expected)
    for name, array in expected.items():
        assert got[name].dtype == array.dtype, name
        assert got[name].shape == array.shape, name
        assert got[name].flags.f_contiguous == array.flags.f_contiguous, name
        assert got[name].tobytes(order="A") == array.tobytes(order="A"), name
        assert got[name].flags.writeable, name


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_reads_what_numpy_load_reads(tmp_path, save):
    path = tmp_path / "0.npz"
    save(path, **ARRAYS)
    same(read_npz(path), numpy_load(path))
    with open(path, "rb") as f:  # stored members take the one-copy path, compressed ones numpy's
        assert (_read_stored(f) is not None) == (save is np.savez)


def test_fortran_order_is_kept(tmp_path):
    np.savez(tmp_path / "0.npz", x=ARRAYS["fortran"])
    got = read_npz(tmp_path / "0.npz")["x"]
    assert got.flags.f_contiguous and not got.flags.c_contiguous
    assert np.array_equal(got, ARRAYS["fortran"])


def test_a_flipped_data_byte_fails_the_crc(tmp_path):
    path = tmp_path / "0.npz"
    np.savez(path, x=np.arange(1000, dtype=np.float32))
    data = bytearray(path.read_bytes())
    data[1000] ^= 0x01  # inside the array's data
    path.write_bytes(bytes(data))
    with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32 for file 'x.npy'"):
        read_npz(path)
    with pytest.raises(
        GateError, match=r"0.npz: not a readable .npz file \(a damaged or truncated zip archive: Bad CRC-32"
    ):
        open_tensor_set(tmp_path, "output")[0]


def test_a_header_that_disagrees_with_the_member_size_is_refused(tmp_path):
    path = tmp_path / "0.npz"
    np.savez(path, x=np.arange(8, dtype=np.float32))
    data = path.read_bytes().replace(b"'shape': (8,)", b"'shape': (9,)")
    path.write_bytes(data)
    with pytest.raises(ValueError, match=r"member 'x.npy' holds 32 bytes of data, but its header describes 36"):
        read_npz(path)


def test_object_arrays_are_refused_as_numpy_refuses_them(tmp_path):
    path = tmp_path / "0.npz"
    np.savez(path, x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="Object arrays cannot be loaded when allow_pickle=False"):
        read_npz(path)
    with pytest.raises(ValueError, match="Object arrays cannot be loaded when allow_pickle=False"):
        numpy_load(path)


def test_a_truncated_file_is_refused(tmp_path):
    path = tmp_path / "0.npz"
    np.savez(path, x=np.arange(100, dtype=np.float64))
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(GateError, match="0.npz: not a readable .npz file"):
        open_tensor_set(tmp_path, "output")[0]


def test_what_numpy_load_refuses_is_refused(tmp_path):
    """Found by a differential fuzz against numpy.load (4,000 mutations, 0 differences after these):
    bytes before the archive (zipfile finds it, numpy.load does not) and a member whose local
    header names another file than the central directory."""
    path = tmp_path / "0.npz"
    np.savez(path, y=np.arange(4, dtype=np.float32))
    good = path.read_bytes()
    path.write_bytes(b"junk" + good)
    with pytest.raises(NotAnNpzArchive, match="it does not start as a zip archive"):  # numpy: a pickle
        read_npz(path)
    path.write_bytes(good.replace(b"y.npy", b"z.npy", 1))  # the local header's copy comes first
    with pytest.raises(zipfile.BadZipFile, match="File name in directory 'y.npy' and header 'z.npy' differ"):
        read_npz(path)


@FUZZ
@given(st.sampled_from(NPZ).flatmap(mutations))
def test_differential_against_numpy_load(tmp_path_factory, data):
    """Mutated archives: both readers succeed with the same arrays, or both refuse."""
    path = tmp_path_factory.mktemp("npz") / "0.npz"
    path.write_bytes(data)
    outcomes = []
    for reader in (read_npz, numpy_load):
        try:
            outcomes.append(reader(path))
        except Exception as err:  # noqa: BLE001 - any refusal counts as one
            outcomes.append(err)
    ours, theirs = outcomes
    if isinstance(ours, NotAnNpzArchive) and not isinstance(theirs, Exception):
        # Deliberate: a member not named *.npy (numpy.load returns its raw bytes) or a lone .npy file
        # (numpy.load returns the array) is no .npz archive of arrays.
        assert "is not a .npy array" in str(ours) or "single .npy array" in str(ours), ours
        return
    if isinstance(ours, ValueError) and not isinstance(theirs, Exception):
        # Deliberate (issue 14): a member whose declared size is not what its shape needs is refused
        # before inflating; numpy.load reads the shape's bytes and ignores the rest.
        assert re.search(r"holds -?\d+ bytes of data, but its header describes \d+", str(ours)), ours
        return
    assert isinstance(ours, Exception) == isinstance(theirs, Exception), (ours, theirs)
    if not isinstance(ours, Exception):
        same(ours, theirs)
