"""What every layer shares about tensors (Polygraphy 0.53.6 ``common/struct.py``): ``TensorMetadata``
(``BoundedShape``, ``MetadataTuple``), numpy dtype conversion and the dynamic-dim rules. Imports nothing
of the gate but errors, so that the data readers, the runners (``backend``) and the comparator
(``comparator.data_loader``, ``comparator.coerce``) can all use it without reaching into one another."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from gate.errors import GateError


def to_numpy_dtype(dtype):
    """``dtype`` as a numpy dtype: a numpy dtype or type, a str, or a Polygraphy ``DataType`` (any
    object with a ``numpy()`` method, or whose ``name`` ml_dtypes knows, e.g. bfloat16). None stays None.

    Raises:
        GateError: no numpy dtype corresponds."""
    if dtype is None or isinstance(dtype, np.dtype):
        return dtype
    to_numpy = getattr(dtype, "numpy", None)
    if callable(to_numpy) and not isinstance(dtype, type):
        try:
            converted = to_numpy()
        except Exception:  # Polygraphy raises DataTypeConversionException (e.g. bfloat16)
            converted = None
        if converted is not None:
            return np.dtype(converted)
        name = str(getattr(dtype, "name", dtype)).lower()
        try:
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, name))
        except (ImportError, AttributeError, TypeError):
            raise GateError(f"Could not convert data type: {dtype} to a numpy data type.") from None
    try:
        return np.dtype(dtype)
    except TypeError:
        raise GateError(f"Could not convert data type: {dtype!r} to a numpy data type.") from None


class BoundedShape(list):
    """A shape (a list of dims; a dynamic dim is a str, None or a negative int) with optional
    ``min`` / ``max`` shapes (Polygraphy's ``BoundedShape``). Equal to a tuple of the same dims."""

    def __init__(self, shape, min=None, max=None):  # noqa: A002 (Polygraphy's names)
        super().__init__(shape)
        self.min = min
        self.max = max

    def __eq__(self, other):
        if isinstance(other, (list, tuple)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self):
        return f"BoundedShape({list(self)}, min={self.min}, max={self.max})"


class MetadataTuple(tuple):
    """``(dtype, shape)`` of one tensor, with ``.dtype``, ``.shape`` and ``.docstring`` (Polygraphy's
    ``MetadataTuple``); unpacks as a pair."""

    def __new__(cls, dtype, shape, docstring=None):
        self = super().__new__(cls, (dtype, shape))
        self.docstring = docstring
        return self

    def __getnewargs__(self):
        return (self[0], self[1], self.docstring)

    @property
    def dtype(self):
        return self[0]

    @property
    def shape(self):
        return self[1]


class TensorMetadata(OrderedDict):
    """``name -> MetadataTuple(dtype, shape)`` (Polygraphy's ``TensorMetadata``): the dtype a numpy
    dtype (a Polygraphy ``DataType`` is converted; one numpy has no equivalent for is kept as given),
    the shape a ``BoundedShape`` list whose dynamic dims are str, None or negative ints, or None."""

    def add(self, name, dtype, shape, min_shape=None, max_shape=None, docstring=None):
        """Adds (or replaces) input ``name`` and returns ``self``. ``min_shape``/``max_shape``: the
        bounds of a dynamic shape (static dims), used by ``DataLoader`` for dynamic dims."""
        try:
            dtype = to_numpy_dtype(dtype)
        except GateError:
            pass  # kept as given: an error arises where a numpy dtype is needed
        bounded = BoundedShape(shape, min=min_shape, max=max_shape) if shape is not None else None
        self[name] = MetadataTuple(dtype, bounded, docstring)
        return self

    @staticmethod
    def from_feed_dict(feed_dict):
        """The metadata of the arrays of ``feed_dict``."""
        meta = TensorMetadata()
        for name, array in feed_dict.items():
            array = np.asarray(array)
            meta.add(name, array.dtype, array.shape)
        return meta


def is_dynamic_dim(dim) -> bool:
    return dim is None or isinstance(dim, str) or (isinstance(dim, int) and dim < 0)


def is_valid_shape_override(shape, expected) -> bool:
    """Same rank, and every static dim of ``expected`` equal (Polygraphy's rule)."""
    if expected is None:
        return True
    return len(shape) == len(expected) and all(is_dynamic_dim(e) or int(s) == int(e) for s, e in zip(shape, expected))
