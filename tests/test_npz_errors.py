"""A golden or input ``.npz`` that is no archive of ``.npy`` arrays is one line naming the file, why,
and what was expected (exit 2): random bytes got numpy's pickle advice, a truncated archive a bare
zipfile message, a zip with a member not named ``*.npy`` an internal error (numpy returns its raw
bytes). Real ONNX Runtime on the shipped example."""

from __future__ import annotations

import io
import os
import warnings
import zipfile

import numpy as np
import pytest

from conftest import run_cli

OUT = "save_infer_model/scale_0.tmp_1"
EXPECTED = "; expected an .npz archive of .npy arrays as numpy.savez writes it, without pickled objects."


def _npy(array, allow_pickle=False) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=allow_pickle)
    return buffer.getvalue()


def _zip(path, members: dict) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _zip_twice(path, name: str, first: bytes, second: bytes, compression=zipfile.ZIP_STORED) -> None:
    """An archive holding ``name`` twice (zipfile allows it, with a warning; numpy.load keeps one)."""
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w", compression) as archive:
        warnings.simplefilter("ignore")
        archive.writestr(name, first)
        archive.writestr(name, second)


CASES = {
    "random bytes": (lambda p, good: p.write_bytes(os.urandom(300)), "it does not start as a zip archive"),
    "truncated zip": (
        lambda p, good: p.write_bytes(good[: len(good) // 2]),
        "a damaged or truncated zip archive: File is not a zip file",
    ),
    "empty file": (lambda p, good: p.write_bytes(b""), "the file is empty"),
    "a text member": (lambda p, good: _zip(p, {"readme.txt": "hi"}), "its member 'readme.txt' is not a .npy array"),
    "a stray member beside the array": (
        lambda p, good: _zip(p, {f"{OUT}.npy": _npy(np.zeros((1, 2), np.float32)), "extra.bin": b"xx"}),
        "its member 'extra.bin' is not a .npy array",
    ),
    "a lone .npy file": (
        lambda p, good: p.write_bytes(_npy(np.zeros((1, 2), np.float32))),
        "it is a single .npy array, not an archive of them",
    ),
    "a pickled object array": (
        lambda p, good: _zip(p, {f"{OUT}.npy": _npy(np.array([{"a": 1}], dtype=object), allow_pickle=True)}),
        "it holds pickled Python objects, an object array",
    ),
    # Failed before: exit 0, the second (good) copy read in silence; the other order exit 1.
    "a member stored twice": (
        lambda p, good: _zip_twice(p, f"{OUT}.npy", _npy(np.full((1, 2), 9, np.float32)), _npy(np.load(p)[OUT])),
        f"its member '{OUT}.npy' is stored twice; expected each array once",
    ),
    "a member stored twice, compressed": (
        lambda p, good: _zip_twice(
            p, f"{OUT}.npy", _npy(np.full((1, 2), 9, np.float32)), _npy(np.load(p)[OUT]), zipfile.ZIP_DEFLATED
        ),
        f"its member '{OUT}.npy' is stored twice; expected each array once",
    ),
    "a member that is no .npy": (
        lambda p, good: _zip(p, {f"{OUT}.npy": b"garbage"}),
        "a member is not a .npy array: the magic string is not correct",
    ),
}


@pytest.fixture
def npz_golden(example):
    cfg = example / "gate.toml"
    cfg.write_text(cfg.read_text().replace('golden = "data"', 'golden = "golden"'))
    assert run_cli("record", cfg, "--layout", "npz").returncode == 0
    return cfg


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_npz_is_one_line_naming_the_file_and_what_was_expected(npz_golden, case):
    make, reason = CASES[case]
    path = npz_golden.parent / "golden" / "000003.npz"
    make(path, path.read_bytes())
    proc = run_cli("check", npz_golden, "--junit", npz_golden.parent / "j.xml")
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"{path}: not a readable .npz file ({reason}" in lines[0], lines[0]
    assert lines[0].endswith(EXPECTED), lines[0]
    assert "allow_pickle" not in lines[0] and "internal error" not in lines[0]
