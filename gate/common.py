"""What every layer shares about tensors (Polygraphy 0.53.6 ``common/struct.py``): ``TensorMetadata``
and the dynamic-dim rules. Imports nothing of the gate but errors, so that the data readers, the
runners (``backend``) and the comparator's synthetic inputs (``comparator.data_loader``) can all
use it without reaching into one another."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np


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
