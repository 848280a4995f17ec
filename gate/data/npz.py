"""Reading one ``.npz`` iteration with one copy per array.

``numpy.load`` reads an ``.npz`` member through ``zipfile`` in 256 KiB pieces, each copied twice
and checked in Python; for the gate's golden job that costs about 4 % of ppocr_v4_rec's inference
time per iteration (``bench/golden_job.py``). ``read_npz`` reads the same files the same way but
copies each array's bytes straight from the file into the array:

- the archive's central directory is parsed by ``zipfile`` and each ``.npy`` header by
  ``numpy.lib.format`` (``read_magic``, ``read_array_header_1_0`` / ``_2_0``);
- the member's data starts after its local file header (30 bytes, then the file name and the
  extra field: PKWARE's APPNOTE.TXT 4.3.7, ``zipfile.structFileHeader``);
- the member's CRC-32 is checked as ``zipfile`` checks it, over the stored bytes, so a corrupt
  file is refused as ``numpy.load`` refuses it; the CRC is zlib-ng's (the same polynomial and
  value as ``zlib.crc32``, with carry-less multiplication: 0.02 ms per MiB instead of 0.37 here).

Only what that covers takes this path: every member stored (not compressed), not encrypted, named
``*.npy``, with a version 1.0 or 2.0 header. Any other archive (``np.savez_compressed``, for one)
is read by ``numpy.load`` itself. Either way the result is the same ``OrderedDict`` of arrays, in
the archive's order, with numpy's dtypes, shapes and memory order. A compressed archive is checked
before anything is inflated (``check_inflated_size``): each member must hold what its shape needs,
and all of them together at most ``inflation_limit`` bytes, so a small file cannot claim gigabytes.
"""

from __future__ import annotations

import io
import math
import os
import struct
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
from numpy.lib import format as npy_format
from zlib_ng.zlib_ng import crc32

from gate.paths import open_regular

MAX_INFLATED_BYTES = 1 << 30
"""A compressed ``.npz`` may always inflate to 1 GiB (see :func:`inflation_limit`)."""
MAX_INFLATION = 32
"""... and to 32 times its own size (float outputs compress by ~6 %, zeros by 1000 times)."""

_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # zipfile.structFileHeader
_LOCAL_SIGNATURE = b"PK\x03\x04"
_ZIP_STARTS = (_LOCAL_SIGNATURE, b"PK\x05\x06")  # numpy.lib._npyio_impl's _ZIP_PREFIX, _ZIP_SUFFIX
_FLAGS, _NAME_LENGTH, _EXTRA_LENGTH = 3, 10, 11  # fields of the local header
_HEADER_READERS = {(1, 0): npy_format.read_array_header_1_0, (2, 0): npy_format.read_array_header_2_0}
_LENGTH_FIELDS = {(1, 0): struct.Struct("<H"), (2, 0): struct.Struct("<I")}  # the header's length
_PARSED_HEADERS: dict[tuple, tuple] = {}  # (version, length + header bytes) -> (shape, fortran_order, dtype)


class NotAnNpzArchive(ValueError):
    """A file that is no ``.npz`` archive of ``.npy`` arrays, with the reason in plain words (where
    ``numpy.load`` would try to unpickle it, return a lone ``.npy`` array, or return a non-``.npy``
    member as raw bytes)."""


def read_npz(path: Path) -> OrderedDict:
    """The arrays of an ``.npz`` file, ``OrderedDict[name, numpy.ndarray]`` (names without ``.npy``),
    as ``numpy.load(path, allow_pickle=False)`` gives them.

    Raises:
        NotAnNpzArchive: the file is empty, does not start as a zip archive (``numpy.load`` would
            try it as a pickle, or read a lone ``.npy`` array), or has a member not named ``*.npy``
            (``numpy.load`` would return its raw bytes).
        ValueError: a member name stored twice (``numpy.load`` would keep one in silence).
        zipfile.BadZipFile, ValueError, OSError, EOFError: whatever else makes the file unreadable (a
            bad archive, a CRC-32 mismatch, a truncated member, an object array, a compressed member
            over its shape or the inflation limit), as ``numpy.load`` raises them; the caller turns
            them into one line naming the file.
        GateError: ``path`` is not a regular file (a FIFO, say).
    """
    with open_regular(path, "the .npz file") as f:
        # numpy.load takes a file for a zip archive only when it starts as one (zipfile would also
        # find an archive after other bytes).
        start = f.read(len(npy_format.MAGIC_PREFIX))
        if start[:4] not in _ZIP_STARTS:
            if not start:
                raise NotAnNpzArchive("the file is empty")
            if start == npy_format.MAGIC_PREFIX:
                raise NotAnNpzArchive("it is a single .npy array, not an archive of them")
            raise NotAnNpzArchive("it does not start as a zip archive")
        f.seek(0)
        with zipfile.ZipFile(f) as archive:
            names = archive.namelist()
        stray = next((name for name in names if not name.endswith(".npy")), None)
        if stray is not None:
            raise NotAnNpzArchive(f"its member {stray!r} is not a .npy array")
        if len(set(names)) < len(names):  # numpy.load would keep one of them in silence
            twice = next(name for name in names if names.count(name) > 1)
            raise ValueError(f"its member {twice!r} is stored twice; expected each array once")
        arrays = _read_stored(f)
        if arrays is not None:
            return arrays
        check_inflated_size(f)
        f.seek(0)
        with np.load(f, allow_pickle=False) as archive:
            return OrderedDict((name, archive[name]) for name in archive.files)


def inflation_limit(file_size: int) -> int:
    """The most bytes the members of a compressed ``.npz`` of ``file_size`` bytes may inflate to:
    :data:`MAX_INFLATED_BYTES` or :data:`MAX_INFLATION` times the file's size, whichever is larger.
    (A stored archive needs no bound: its arrays take the room the file takes on disk.)"""
    return max(MAX_INFLATED_BYTES, MAX_INFLATION * file_size)


def check_inflated_size(f) -> None:
    """Before anything is inflated: each ``.npy`` member of the archive open in ``f`` must hold
    exactly the bytes its header's shape and dtype need (only the header is inflated to see it), and
    all members together at most :func:`inflation_limit` bytes, as the archive's central directory
    declares them (``zipfile`` never inflates a member past its declared size).

    Raises:
        ValueError: a member larger or smaller than its shape needs, or an archive over the limit.
        zipfile.BadZipFile, OSError, EOFError: an unreadable archive.
    """
    file_size = os.fstat(f.fileno()).st_size
    with zipfile.ZipFile(f) as archive:
        infos = archive.infolist()
        declared = sum(info.file_size for info in infos)
        if declared > inflation_limit(file_size):
            raise ValueError(
                f"its members inflate to {declared} bytes, more than {inflation_limit(file_size)} for a "
                f"compressed file of {file_size} bytes; save it uncompressed (numpy.savez)"
            )
        for info in infos:
            if info.filename.endswith(".npy") and not info.flag_bits & 0x1:
                with archive.open(info) as member:
                    _check_member_header(member, info)


def _check_member_header(member, info: zipfile.ZipInfo) -> None:
    version = npy_format.read_magic(member)
    if version not in _HEADER_READERS:
        return  # numpy.load reads the newer headers and bounds them by the member's size
    shape, _, dtype = _HEADER_READERS[version](member)
    nbytes = math.prod(shape) * dtype.itemsize
    header_size = member.tell()
    if not dtype.hasobject and header_size + nbytes != info.file_size:
        raise ValueError(
            f"member {info.filename!r} holds {info.file_size - header_size} bytes of data, but its header "
            f"describes {nbytes} ({dtype}, shape {shape})"
        )


def _read_stored(f) -> OrderedDict | None:
    """The arrays of an archive whose members all take the one-copy path, else None."""
    with zipfile.ZipFile(f) as archive:
        infos = archive.infolist()
    if not all(
        info.compress_type == zipfile.ZIP_STORED and not info.flag_bits & 0x1 and info.filename.endswith(".npy")
        for info in infos
    ):
        return None
    file_size = os.fstat(f.fileno()).st_size
    arrays = OrderedDict()
    for info in infos:
        array = _read_member(f, info, file_size)
        if array is None:
            return None
        arrays[info.filename[: -len(".npy")]] = array
    return arrays


def _parse_header(version, header: bytes) -> tuple:
    """numpy's parse of a ``.npy`` header (``ast.literal_eval`` of a dict, 50 us), remembered: the
    iterations of a golden set repeat the same few headers."""
    key = (version, header)
    parsed = _PARSED_HEADERS.get(key)
    if parsed is None:
        parsed = _HEADER_READERS[version](io.BytesIO(header))
        if len(_PARSED_HEADERS) >= 256:
            _PARSED_HEADERS.clear()
        _PARSED_HEADERS[key] = parsed
    return parsed


def _read_member(f, info: zipfile.ZipInfo, file_size: int) -> np.ndarray | None:
    f.seek(info.header_offset)
    local = f.read(_LOCAL_HEADER.size)
    if len(local) != _LOCAL_HEADER.size or local[:4] != _LOCAL_SIGNATURE:
        raise zipfile.BadZipFile(f"Bad magic number for file header of {info.filename!r}")
    fields = _LOCAL_HEADER.unpack(local)
    name = f.read(fields[_NAME_LENGTH]).decode("utf-8" if fields[_FLAGS] & 0x800 else "cp437")
    if name != info.orig_filename:  # as zipfile.ZipFile.open checks it
        raise zipfile.BadZipFile(f"File name in directory {info.orig_filename!r} and header {name!r} differ.")
    f.seek(fields[_EXTRA_LENGTH], os.SEEK_CUR)
    start = f.tell()
    version = npy_format.read_magic(f)
    if version not in _LENGTH_FIELDS:
        return None  # numpy.load knows the newer headers
    length_field = f.read(_LENGTH_FIELDS[version].size)
    header = length_field + f.read(_LENGTH_FIELDS[version].unpack(length_field)[0])
    shape, fortran_order, dtype = _parse_header(version, header)
    if dtype.hasobject:
        raise ValueError("Object arrays cannot be loaded when allow_pickle=False")
    header_size = f.tell() - start
    count = math.prod(shape)
    nbytes = count * dtype.itemsize
    if header_size + nbytes != info.file_size or start + info.file_size > file_size:
        raise ValueError(
            f"member {info.filename!r} holds {info.file_size - header_size} bytes of data, but its header "
            f"describes {nbytes} ({dtype}, shape {shape})"
        )
    crc = crc32(header, crc32(npy_format.magic(*version)))
    flat = np.empty(count, dtype)
    if nbytes:
        data = flat.view(np.uint8)
        if f.readinto(data) != nbytes:
            raise EOFError(f"member {info.filename!r} is truncated")
        crc = crc32(data, crc)
    if crc != info.CRC:
        raise zipfile.BadZipFile(f"Bad CRC-32 for file {info.filename!r}")
    if fortran_order:
        return flat.reshape(shape[::-1]).transpose()  # as numpy.lib.format.read_array
    return flat.reshape(shape)
