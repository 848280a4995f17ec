"""INT8 calibration: the feed_dicts TensorRT's calibrator reads, its cache, and the calibrator built
from them (Polygraphy ``backend/trt/calibrator.py``)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from gate.backend.trt.cache import _write_atomic
from gate.errors import GateError

log = logging.getLogger("gate.backend.trt")


def feeds_sha256(data: Iterable) -> str:
    """sha256 over a re-iterable of feed_dicts (names, dtypes, shapes, bytes), for the cache key."""
    digest = hashlib.sha256()
    for feed in data:
        for name in sorted(feed):
            array = np.ascontiguousarray(feed[name])
            digest.update(f"{name}|{array.dtype.str}|{array.shape}|".encode())
            digest.update(array.tobytes())
    return digest.hexdigest()


class CalibrationFeed:
    """Feeds stored inputs to TensorRT's INT8 calibrator: one feed_dict per calibration batch,
    copied into one device buffer per input (grown when a later feed is larger), and the calibration
    cache file read and written next to the engine.

    Args:
        data: a re-iterable of feed_dicts (a list, a DataLoader, stored inputs), each with every input.
        cache_path: the calibration cache file, or None for none.
    """

    def __init__(self, data, cache_path=None):
        self._data = data
        self._iter = None
        self._buffers = {}
        self.cache_path = Path(cache_path) if cache_path is not None else None
        self.batches = 0

    def next_batch(self, names) -> list[int] | None:
        """Device addresses of the next feed's inputs in ``names`` order, or None when done.

        Raises:
            GateError: a feed lacks one of ``names``.
        """
        from gate.backend.trt import cuda

        if self._iter is None:
            self._iter = iter(self._data)
        feed = next(self._iter, None)
        if feed is None:
            return None
        missing = [n for n in names if n not in feed]
        if missing:
            raise GateError(f"INT8 calibration input {self.batches} lacks {missing}; it has {list(feed)}.")
        pointers = []
        for name in names:
            array = np.ascontiguousarray(feed[name])
            buffer = self._buffers.get(name)
            if buffer is None:
                buffer = self._buffers[name] = cuda.DeviceBuffer(array.nbytes)
            buffer.ensure(array.nbytes)
            cuda.copy(buffer.ptr, array.ctypes.data, array.nbytes, "htod")
            pointers.append(buffer.ptr)
        self.batches += 1
        return pointers

    def read_cache(self) -> bytes | None:
        if self.cache_path is not None and self.cache_path.is_file():
            log.info("Using INT8 calibration cache %s.", self.cache_path)
            return self.cache_path.read_bytes()
        return None

    def write_cache(self, data: bytes) -> None:
        if self.cache_path is not None:
            _write_atomic(self.cache_path, bytes(data))
            log.info("Wrote INT8 calibration cache %s.", self.cache_path)

    def free(self) -> None:
        for buffer in self._buffers.values():
            buffer.free()
        self._buffers.clear()


def make_calibrator(trt, feed: CalibrationFeed):
    """A ``trt.IInt8EntropyCalibrator2`` over ``feed``. An exception inside a callback is kept in
    ``.error`` (and the batch ends) instead of crossing into TensorRT.

    Raises:
        GateError: this TensorRT has no INT8 calibrator (TensorRT-RTX, TensorRT 11).
    """
    base = getattr(trt, "IInt8EntropyCalibrator2", None)
    if base is None:
        raise GateError(f"--int8 needs an INT8 calibrator, which {trt.__name__} {trt.__version__} does not have.")

    class Calibrator(base):
        def __init__(self):
            base.__init__(self)
            self.error = None

        def get_batch_size(self):
            return 1

        def get_batch(self, names):
            try:
                return feed.next_batch(list(names))
            except Exception as err:  # noqa: BLE001 - re-raised after the build
                self.error = err
                return None

        def read_calibration_cache(self):
            return feed.read_cache()

        def write_calibration_cache(self, cache):
            try:
                feed.write_cache(bytes(cache))
            except Exception as err:
                self.error = err

    return Calibrator()
