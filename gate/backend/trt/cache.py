"""The engine cache: serialized engines under a directory, keyed by everything that decides the
engine, so that a CI cache (``actions/cache`` of the directory) makes the second run skip the build.

Layout under the cache directory::

    engines/<key>/engine.plan          the serialized engine
    engines/<key>/entry.json           key fields, engine sha256 and size, what the build reported
    engines/<key>/calibration.cache    INT8 calibration cache (int8 builds)
    timing/<flavour>-<version>-<gpu>-<cc>.cache   TensorRT's timing cache

``<key>`` is the sha256 of the key fields as canonical JSON: model sha256 (with its external data),
TensorRT flavour and version, GPU name and compute capability, every ``TrtBuildSettings`` field, and
for int8 the calibration inputs' sha256. The timing cache (flavour ``tensorrt``; TensorRT-RTX uses
none) is shared by all engines of one TensorRT version and GPU, which is what TensorRT keys its entries
by, so that a changed model or flag rebuilds faster; a per-engine timing cache would only ever be read
by a rebuild of the same key.

Writes are atomic (a temporary file, then ``os.replace``; ``entry.json`` last), so an interrupted or
concurrent run leaves either a whole entry or one that fails its checks. An entry that fails its
checks (missing or unreadable files, a different size or sha256, key fields that differ) is removed
with a warning and the engine is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gate.errors import GateError

log = logging.getLogger("gate.backend.trt")

CACHE_FORMAT = 1


def sha256_file(path, digest=None) -> str:
    digest = digest or hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def model_sha256(path) -> str:
    """sha256 of an ONNX file and, in order, of every external-data file it names (so that changed
    weights stored next to the model change the key).

    Raises:
        GateError: the file is missing.
    """
    import onnx

    path = Path(path)
    if not path.is_file():
        raise GateError(f"{path}: model file not found.")
    digest = hashlib.sha256()
    sha256_file(path, digest)
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception:  # not loadable by onnx: TensorRT's parser will say why
        return digest.hexdigest()
    locations = set()
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            locations.update(e.value for e in tensor.external_data if e.key == "location")
    for location in sorted(locations):
        extra = path.parent / location
        digest.update(location.encode())
        if extra.is_file():
            sha256_file(extra, digest)
    return digest.hexdigest()


def cache_key(fields: dict) -> str:
    """sha256 of ``fields`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", str(text)).strip("-") or "none"


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temp, path)
    except BaseException:
        with_suppressed_unlink(temp)
        raise


def with_suppressed_unlink(path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@dataclass
class CacheEntry:
    """A cache hit: the engine's bytes, where it lies, and what ``store`` recorded with it."""

    key: str
    directory: Path
    engine: bytes
    info: dict


class EngineCache:
    """Engines and timing caches under ``directory`` (created on first store).

    Raises (constructor):
        GateError: ``directory`` exists and is not a directory.
    """

    def __init__(self, directory):
        self.directory = Path(directory)
        if self.directory.exists() and not self.directory.is_dir():
            raise GateError(f"Engine cache directory {self.directory} exists and is not a directory.")

    def entry_dir(self, key: str) -> Path:
        return self.directory / "engines" / key

    def engine_path(self, key: str) -> Path:
        return self.entry_dir(key) / "engine.plan"

    def calibration_cache_path(self, key: str) -> Path:
        return self.entry_dir(key) / "calibration.cache"

    def load(self, key: str, fields: dict) -> CacheEntry | None:
        """The entry for ``key``, or None on a miss. An entry that fails its checks is removed with
        a warning (saying why), and None is returned so that the caller rebuilds."""
        directory = self.entry_dir(key)
        if not directory.exists():
            return None
        try:
            info = json.loads((directory / "entry.json").read_text(encoding="utf-8"))
            if not isinstance(info, dict):
                raise ValueError("entry.json is not a JSON object")
            if info.get("format") != CACHE_FORMAT:
                raise ValueError(f"cache format {info.get('format')!r}, expected {CACHE_FORMAT}")
            if info.get("key_fields") != fields:
                raise ValueError("its key fields differ from this build's")
            engine = (directory / "engine.plan").read_bytes()
            if len(engine) != info.get("engine_bytes"):
                raise ValueError(f"engine.plan has {len(engine)} bytes, entry.json says {info.get('engine_bytes')}")
            if hashlib.sha256(engine).hexdigest() != info.get("engine_sha256"):
                raise ValueError("engine.plan's sha256 differs from entry.json's")
        except (OSError, ValueError) as err:  # json.JSONDecodeError is a ValueError
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            self.invalidate(key, f"corrupt: {reason}")
            return None
        log.info("Engine cache hit: %s (%d bytes).", directory, len(engine))
        return CacheEntry(key, directory, engine, info)

    def invalidate(self, key: str, reason: str) -> None:
        """Removes an entry with a warning naming it and ``reason`` (its engine is then rebuilt)."""
        directory = self.entry_dir(key)
        log.warning("Cached TensorRT engine %s is unusable (%s); rebuilding it.", directory, reason)
        shutil.rmtree(directory, ignore_errors=True)

    def store(self, key: str, fields: dict, engine: bytes, info: dict, files: dict | None = None) -> Path:
        """Writes an entry: ``files`` (name -> bytes, e.g. the calibration cache), the engine, then
        ``entry.json`` with ``fields``, the engine's size and sha256, and ``info``. Returns the engine path.

        Raises:
            GateError: the directory cannot be written (names it).
        """
        directory = self.entry_dir(key)
        try:
            for name, data in (files or {}).items():
                _write_atomic(directory / name, data)
            _write_atomic(directory / "engine.plan", bytes(engine))
            entry = {
                "format": CACHE_FORMAT,
                "key": key,
                "key_fields": fields,
                "engine_bytes": len(engine),
                "engine_sha256": hashlib.sha256(engine).hexdigest(),
                **info,
            }
            _write_atomic(directory / "entry.json", json.dumps(entry, indent=2, sort_keys=True).encode())
        except OSError as err:
            raise GateError(f"Engine cache {directory} cannot be written ({err.strerror or err}).") from err
        return directory / "engine.plan"

    def timing_cache_path(self, flavour: str, version: str, gpu_name: str, compute_capability: str) -> Path:
        name = "-".join(_slug(part) for part in (flavour, version, gpu_name, compute_capability))
        return self.directory / "timing" / f"{name}.cache"

    def read_timing_cache(self, path: Path) -> bytes:
        """The stored timing cache, or ``b""`` (TensorRT then starts an empty one)."""
        try:
            return path.read_bytes()
        except OSError:
            return b""

    def write_timing_cache(self, path: Path, data: bytes) -> None:
        try:
            _write_atomic(path, bytes(data))
        except OSError as err:
            log.warning("Timing cache %s cannot be written (%s); the next build starts without it.", path, err)
