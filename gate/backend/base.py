"""``BaseRunner``: the Runner contract shared by every backend (Polygraphy 0.53.6
``backend/base/runner.py``; ``shared/spec/polygraphy-0.53.6.md`` section 6.1)."""

from __future__ import annotations

import itertools
import logging
import time
from collections import OrderedDict

import numpy as np

from gate.errors import GateError
from gate.structured import is_structured

log = logging.getLogger("gate.backend")
_counters: dict[str, itertools.count] = {}


class TensorMetadata(OrderedDict):
    """``name -> (numpy dtype, shape)``; a dynamic dim is a str, None or a negative int."""

    def add(self, name, dtype, shape):
        self[name] = (None if dtype is None else np.dtype(dtype), tuple(shape) if shape is not None else None)
        return self


def is_dynamic_dim(dim) -> bool:
    return dim is None or isinstance(dim, str) or (isinstance(dim, int) and dim < 0)


def is_valid_shape_override(shape, expected) -> bool:
    """Same rank, and every static dim of ``expected`` equal (Polygraphy's rule)."""
    if expected is None:
        return True
    return len(shape) == len(expected) and all(is_dynamic_dim(e) or int(s) == int(e) for s, e in zip(shape, expected))


class BaseRunner:
    """A runner: activate (allocate), ``infer(feed_dict)`` any number of times, deactivate.

    Use it as a context manager: ``with Runner(...) as runner: outputs = runner.infer(feed_dict)``.
    ``infer`` returns ``OrderedDict[output name, numpy.ndarray]``. A runner may reuse its output
    buffers between calls: copy what you keep.
    """

    prefix = "runner"

    def __init__(self, name=None):
        if name is None:
            count = next(_counters.setdefault(self.prefix, itertools.count()))
            name = f"{self.prefix}-N{count}-{time.strftime('%x')}-{time.strftime('%X')}"
        self.name = name
        self.is_active = False
        self.inference_time = None

    def activate(self):
        if self.is_active:
            log.warning("%s is already active; ignoring activate()", self.name)
            return
        self.activate_impl()
        self.is_active = True

    def deactivate(self):
        if not self.is_active:
            log.warning("%s is not active; ignoring deactivate()", self.name)
            return
        self.inference_time = None
        try:
            self.deactivate_impl()
        finally:
            self.is_active = False

    def __enter__(self):
        self.activate()
        return self

    def __exit__(self, *exc):
        self.deactivate()

    def _require_active(self, what):
        if not self.is_active:
            raise GateError(f"{self.name} must be activated before calling {what}().")

    def get_input_metadata(self, use_numpy_dtypes=True) -> TensorMetadata:
        """The model's inputs: ``TensorMetadata`` of name -> (numpy dtype, shape)."""
        self._require_active("get_input_metadata")
        return self.get_input_metadata_impl()

    def infer(self, feed_dict, check_inputs=True):
        """Runs inference on ``feed_dict`` (``name -> numpy.ndarray``).

        Raises:
            GateError: with ``check_inputs``, a missing or extra input, a dtype that differs, or a
                shape that is not a valid override of the model's (names the input).
        """
        self._require_active("infer")
        if check_inputs:
            self._check_inputs(feed_dict)
        return self.infer_impl(feed_dict)

    def _check_inputs(self, feed_dict):
        metadata = self.get_input_metadata_impl()
        missing = [name for name in metadata if name not in feed_dict]
        extra = [name for name in feed_dict if name not in metadata]
        if missing or extra:
            raise GateError(
                f"{self.name}: inputs do not match the model: missing {missing}, unexpected {extra}; "
                f"the model's inputs are {list(metadata)}."
            )
        for name, (dtype, shape) in metadata.items():
            value = feed_dict[name]
            if isinstance(value, int) or is_structured(value):  # a sequence, map or optional: the backend checks it
                continue
            if dtype is not None and value.dtype != dtype:
                raise GateError(f"{self.name}: input '{name}' has dtype {value.dtype}, the model expects {dtype}.")
            if not is_valid_shape_override(value.shape, shape):
                raise GateError(
                    f"{self.name}: input '{name}' has shape {tuple(value.shape)}, the model expects {tuple(shape)}."
                )

    def last_inference_time(self):
        """Seconds spent in the last ``infer`` call, or None."""
        return self.inference_time

    def activate_impl(self):
        pass

    def deactivate_impl(self):
        pass

    def get_input_metadata_impl(self) -> TensorMetadata:
        raise NotImplementedError

    def infer_impl(self, feed_dict):
        raise NotImplementedError
