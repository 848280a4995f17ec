"""``BaseRunner``: the Runner contract shared by every backend (Polygraphy 0.53.6
``backend/base/runner.py``; ``shared/spec/polygraphy-0.53.6.md`` section 6.1)."""

from __future__ import annotations

import itertools
import logging
import time

from gate.common import (  # noqa: F401 (re-exported: Polygraphy's names under backend.base)
    BoundedShape,
    MetadataTuple,
    TensorMetadata,
    is_dynamic_dim,
    is_valid_shape_override,
    to_numpy_dtype,
)
from gate.errors import GateError
from gate.structured import is_structured

log = logging.getLogger("gate.backend")
_counters: dict[str, itertools.count] = {}


class BaseRunner:
    """A runner: activate (allocate), ``infer(feed_dict)`` any number of times, deactivate.

    Use it as a context manager: ``with Runner(...) as runner: outputs = runner.infer(feed_dict)``.
    ``infer`` returns ``OrderedDict[output name, numpy.ndarray]``. A runner may reuse its output
    buffers between calls: copy what you keep.
    """

    prefix = "runner"
    # True for a runner whose ``infer`` returns views of buffers its next ``infer`` overwrites
    # (``TrtRunner``): a caller holding outputs across calls copies them (``gate.ahead``).
    reuses_output_buffers = False

    def __init__(self, name=None, prefix=None):
        if name is None:
            prefix = self.prefix if prefix is None else prefix
            count = next(_counters.setdefault(prefix, itertools.count()))
            name = f"{prefix}-N{count}-{time.strftime('%x')}-{time.strftime('%X')}"
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
            raise GateError(f"{self.name} | Must be activated prior to calling {what}().")

    def get_input_metadata(self, use_numpy_dtypes=None) -> TensorMetadata:
        """The model's inputs: ``TensorMetadata`` of name -> (numpy dtype, shape). Dtypes are numpy
        dtypes whatever ``use_numpy_dtypes`` says (Polygraphy returns its ``DataType`` for False).

        Raises:
            GateError: the runner is not active."""
        self._require_active("get_input_metadata")
        return _numpy_metadata(self.get_input_metadata_impl())

    def infer(self, feed_dict, check_inputs=True, *args, **kwargs):
        """Runs inference on ``feed_dict`` (``name -> numpy.ndarray``).

        Raises:
            GateError: the runner is not active; with ``check_inputs``, a missing or extra input, a
                dtype that differs, or a shape that is not a valid override of the model's (names
                the input; Polygraphy's wording, ``check_inputs``).
        """
        self._require_active("infer")
        if check_inputs:
            check_inputs_against(feed_dict, _numpy_metadata(self.get_input_metadata_impl()), self.name)
        return self.infer_impl(feed_dict, *args, **kwargs)

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


def _numpy_metadata(meta):
    """``meta`` with every dtype a numpy dtype where one corresponds (a runner's ``get_input_metadata_impl``
    may give Polygraphy ``DataType`` s, as Polygraphy allows); ``meta`` itself when nothing changes."""
    converted = TensorMetadata()
    changed = False
    for name, entry in meta.items():
        dtype, shape = entry
        try:
            numpy_dtype = to_numpy_dtype(dtype)
        except GateError:
            numpy_dtype = dtype
        changed = changed or numpy_dtype is not dtype
        converted[name] = MetadataTuple(numpy_dtype, shape, getattr(entry, "docstring", None))
    return converted if changed else meta


def check_inputs_against(feed_dict, input_metadata, runner_name=None):
    """Checks ``feed_dict`` against ``input_metadata`` (Polygraphy's ``backend.base.util.check_inputs``):
    the same names, and for each array (an int is a device pointer: skipped) the metadata's dtype and a
    shape that is a valid override of its shape.

    Raises:
        GateError: in Polygraphy's wording: "The following inputs were not found in input data: ...",
            "Extra inputs in input data: ...", "Input tensor: x | Received unexpected dtype: ...",
            "Input tensor: x | Received incompatible shape: ..."."""
    prefix = f"{runner_name} | " if runner_name else ""
    names, expected = set(feed_dict), set(input_metadata)
    note = f"Note: inputs requested were: {expected}, but all inputs are: {names}"
    if expected - names:
        raise GateError(f"{prefix}The following inputs were not found in input data: {expected - names}. {note}")
    if names - expected:
        raise GateError(f"{prefix}Extra inputs in input data: {names - expected}. {note}")
    for name, value in feed_dict.items():
        dtype, shape = input_metadata[name]
        if isinstance(value, int) or is_structured(value):  # a sequence, map or optional: the backend checks it
            continue
        if dtype is not None and value.dtype != dtype:
            raise GateError(
                f"{prefix}Input tensor: {name} | Received unexpected dtype: {value.dtype}. Note: Expected type: {dtype}"
            )
        if not is_valid_shape_override(value.shape, shape):
            raise GateError(
                f"{prefix}Input tensor: {name} | Received incompatible shape: {tuple(value.shape)}. "
                f"Note: Expected a shape compatible with: {list(shape)}"
            )


class BaseLoader:
    """Base of the loaders (Polygraphy's ``BaseLoader``): a callable whose ``__call__`` runs
    ``call_impl``, e.g. ``SessionFromOnnx``. Subclasses implement ``call_impl``."""

    def call_impl(self, *args, **kwargs):
        raise NotImplementedError

    def __call__(self, *args, **kwargs):
        return self.call_impl(*args, **kwargs)
