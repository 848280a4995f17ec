"""Synthetic inputs (``DataLoader``), and the names of Polygraphy 0.53.6's ``comparator/data_loader.py``.

``DataLoader`` reproduces Polygraphy 0.53.6's synthetic data loader (``polygraphy/comparator/
data_loader.py``, numpy backend; ``shared/spec/polygraphy-0.53.6.md`` section 5) value for value:
the same seed gives the same arrays (drawn by ``sampler.ArraySampler``). The module's other names
live beside it and are importable from here: ``coerce_feed_dict`` / ``coerce_buffer``
(``coerce.py``: spec section 1.4, strict where Polygraphy guesses: names match exactly, the spirit of
deviation D5, a dtype is cast only when the cast loses nothing, and a shape is never transposed or
reshaped to fit), ``StreamingDataLoader``, ``DataLoaderCache`` and ``check_feed_dict``
(``loaders.py``).

Where we differ from Polygraphy on purpose (each is an error, or a value Polygraphy cannot produce):

- a ``val_range`` bound of None falls back to the default (Polygraphy's documented behaviour; the
  code raises TypeError); a range with min > max, a NaN or a non-numeric bound is a ``GateError`` at
  construction, naming the input;
- an ``input_shapes`` name that matches no model input, a dynamic user shape, or a user shape that
  is not a valid override of the model's is a ``GateError`` (Polygraphy warns and uses the default
  shape);
- an integer range that does not fit the input's dtype, an infinite integer bound, or a bool range
  that is empty once cast to bool is a ``GateError`` naming the input (Polygraphy raises numpy's
  ValueError / OverflowError).
"""

from __future__ import annotations

import logging
import math
import numbers
import operator
from collections import OrderedDict
from collections.abc import Mapping
from fnmatch import fnmatchcase

import numpy as np

from gate.common import is_dynamic_dim, is_valid_shape_override
from gate.comparator.coerce import _format_shape, _normalize_dtype, _normalize_shape, coerce_buffer, coerce_feed_dict
from gate.comparator.loaders import DataLoaderCache, StreamingDataLoader, check_feed_dict
from gate.comparator.sampler import ArraySampler
from gate.errors import GateError

__all__ = [
    "DEFAULT_SEED",
    "DEFAULT_SHAPE_VALUE",
    "DEFAULT_VAL_RANGE",
    "ArraySampler",
    "DataLoader",
    "DataLoaderCache",
    "StreamingDataLoader",
    "check_feed_dict",
    "coerce_buffer",
    "coerce_feed_dict",
]
BACKEND_MODULES = ("numpy", "torch")

log = logging.getLogger("gate.comparator")

DEFAULT_SEED = 1
"""Polygraphy's ``constants.DEFAULT_SEED``."""
DEFAULT_VAL_RANGE = (0.0, 1.0)
"""Polygraphy's default ``val_range``: floats in [0, 1), ints and bools in {0, 1}."""
DEFAULT_SHAPE_VALUE = 1
"""The size given to a dynamic dim that no user shape sets (Polygraphy's ``DEFAULT_SHAPE_VALUE``)."""

_GENERATED_DTYPES = tuple(
    np.dtype(t)
    for t in (
        np.float16,
        np.float32,
        np.float64,
        np.int8,
        np.int16,
        np.int32,
        np.int64,
        np.uint8,
        np.uint16,
        np.uint32,
        np.uint64,
        np.bool_,
    )
)
_MAX_SEED = 2**32 - 1  # np.random.RandomState accepts seeds in [0, 2**32 - 1]


def _check_bound(value, where):
    """One end of a range: None (use the default), or a finite-or-infinite real number (not NaN)."""
    if value is None:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if not isinstance(value, numbers.Real):
        raise GateError(f"{where} has a non-numeric bound {value!r}; expected a number or None.")
    if isinstance(value, float) and math.isnan(value):
        raise GateError(f"{where} has a NaN bound; expected a number or None.")
    return value


def _resolve_range(value, default, where):
    """``(min, max)`` with each None replaced by the default's element; validated."""
    if value is None:
        return default
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        raise GateError(f"{where} is {value!r}; expected a (min, max) pair.")
    low, high = (_check_bound(v, where) for v in value)
    low = default[0] if low is None else low
    high = default[1] if high is None else high
    if low > high:
        raise GateError(f"{where} is [{low}, {high}]: its min is greater than its max.")
    return (low, high)


class DataLoader:
    """Generates synthetic feed_dicts, the same values as Polygraphy 0.53.6's ``DataLoader``.

    Item ``i`` draws every input from one ``np.random.RandomState(seed + i)``, in ``input_metadata``
    order, so an input's values depend on the inputs before it. The formulas are Polygraphy's
    (``ArraySampler`` in ``polygraphy/comparator/data_loader.py``):

    - floats (and a dtype of None, which gives float64):
      ``(random_sample(shape) * (max - min) + min).astype(dtype)``, i.e. [min, max); an infinite
      bound is special-cased as Polygraphy does (scale = the infinite bound, shift = 0);
    - signed and unsigned ints: ``randint(int(min), int(max) + 1, size=shape, dtype=dtype)``,
      inclusive, so the default range gives {0, 1};
    - bool: ``randint(bool(min), bool(max) + 1, size=shape, dtype=bool)``.

    Args:
        seed (int): item i uses seed + i. Default 1.
        iterations (int): the number of items. Default 1.
        input_metadata (Mapping[str, (dtype or None, shape)]): the user's metadata (Polygraphy's
            ``user_input_metadata``): the inputs to generate when no runner's metadata is set, and
            once ``Comparator.run`` has set the ``input_metadata`` attribute from the first runner,
            overrides of it: a user dtype replaces the model's, a static user shape is used as an
            ``input_shapes`` entry (a dynamic one is ignored with a warning). Names may use fnmatch
            wildcards. A dim that is None, a str or a negative int is dynamic; a shape's ``min`` /
            ``max`` (``TensorMetadata.add(min_shape=, max_shape=)``) choose a dynamic shape's size.
        val_range ((min, max) or dict[str, (min, max)]): the value range, inclusive for ints and bools.
            A dict gives per-input ranges with ``""`` as the default for inputs it does not list
            (Polygraphy's ``value_or_from_dict``). A bound of None takes the default's bound: the
            ``""`` entry's, else (0.0, 1.0). Integer token / index inputs need their valid range, e.g.
            ``{"input_ids": (0, 30521), "": (0.0, 1.0)}`` for a 30522-token vocabulary; the default
            gives only 0 and 1.
        input_shapes (dict[str, Sequence[int]]): user shapes, like ``polygraphy run --input-shapes``.
            Names may use fnmatch wildcards (``*``, ``?``, ``[...]``). A user shape is used when it is
            a valid override of the model's (same rank, the static dims equal). Shape-tensor guess
            (Polygraphy's): when the model input is a static 1-D integer tensor of N elements and
            the user "shape" has N entries, the user shape becomes the input's **values**. With no
            ``input_metadata``, the user shapes are the inputs (dtype None, so float64).

    Attributes:
        shapes_fed (dict[str, tuple[int, ...]]): the shape of every array in the last item generated
            (empty before the first), so dynamic dims that were defaulted can be reported.

        data_loader_backend_module (str): ``"numpy"`` (default); ``"torch"`` gives the same values
            as torch tensors (``torch.from_numpy``; Polygraphy draws them with torch's generator) and
            needs torch.

    A dynamic shape takes its ``min`` shape, else its ``max`` shape; a dynamic dim that no user shape
    sets becomes 1, with one warning per (input, dim) on the ``gate.comparator`` logger.

    Raises:
        GateError: at construction, a bad seed, iteration count, range (min > max, NaN or
            non-numeric bound, not a pair: names the input) or user shape; when an item is made, a
            user shape name that matches no model input (lists the model's inputs), a user shape
            that does not fit the model's, an input of unknown rank with no user shape, a dtype
            that cannot be generated, or a range that does not fit an integer or bool input.
    """

    shapes_option = "input_shapes"  # how messages name the user shapes (the CLI: its flag)

    def __init__(
        self,
        seed=None,
        iterations=None,
        input_metadata=None,
        val_range=None,
        data_loader_backend_module=None,
        input_shapes=None,
    ):
        self.seed = DEFAULT_SEED if seed is None else seed
        self.iterations = 1 if iterations is None else iterations
        for what, value in (("seed", self.seed), ("iterations", self.iterations)):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
                raise GateError(f"DataLoader {what} is {value!r}; expected an int >= 0.")
        self.seed, self.iterations = int(self.seed), int(self.iterations)
        if self.seed + max(self.iterations - 1, 0) > _MAX_SEED:
            raise GateError(
                f"DataLoader seed {self.seed} with {self.iterations} iterations goes past {_MAX_SEED}, "
                "the largest numpy RandomState seed."
            )
        self.user_input_metadata = input_metadata if input_metadata is not None else {}
        self.input_metadata = None
        self.data_loader_backend_module = "numpy" if data_loader_backend_module is None else data_loader_backend_module
        if self.data_loader_backend_module not in BACKEND_MODULES:
            raise GateError(
                f"Invalid `data_loader_backend_module`. Note: got: {self.data_loader_backend_module} but valid modules "
                f"are: {list(BACKEND_MODULES)}"
            )
        self.val_range = val_range
        self._default_range, self._ranges = self._resolve_val_range(val_range)
        self.input_shapes = self._check_input_shapes(input_shapes)
        self.shapes_fed = {}
        self._warned = set()

    @staticmethod
    def _resolve_val_range(val_range):
        if val_range is None or isinstance(val_range, (tuple, list)):
            return _resolve_range(val_range, DEFAULT_VAL_RANGE, "val_range"), {}
        if not isinstance(val_range, Mapping):
            raise GateError(f"val_range is {val_range!r}; expected a (min, max) pair or a dict of them per input.")
        for key in val_range:
            if not isinstance(key, str):
                raise GateError(f"val_range has a key {key!r}; expected input names (str).")
        default = _resolve_range(val_range.get(""), DEFAULT_VAL_RANGE, "val_range for '' (the default)")
        ranges = {
            name: _resolve_range(value, default, f"val_range for input '{name}'")
            for name, value in val_range.items()
            if name != ""
        }
        return default, ranges

    @staticmethod
    def _check_input_shapes(input_shapes):
        if input_shapes is None:
            return {}
        if not isinstance(input_shapes, Mapping):
            raise GateError(f"input_shapes is {input_shapes!r}; expected a dict of input name to shape.")
        checked = {}
        for name, shape in input_shapes.items():
            if not isinstance(name, str):
                raise GateError(f"input_shapes has a key {name!r}; expected input names (str).")
            where = f"input_shapes['{name}']"
            shape = _normalize_shape(shape, where)
            if shape is None or any(is_dynamic_dim(d) for d in shape):
                raise GateError(
                    f"{where} is {_format_shape(shape)}; a user shape must be static (ints >= 0) to generate data."
                )
            checked[name] = shape
        return checked

    def __repr__(self):
        return (
            f"DataLoader(seed={self.seed}, iterations={self.iterations}, val_range={self.val_range!r}, "
            f"input_shapes={self.input_shapes or None!r})"
        )

    def __len__(self):
        return self.iterations

    def __iter__(self):
        for index in range(self.iterations):
            yield self[index]

    def _warn_once(self, key, message, *args, level=logging.WARNING):
        if key not in self._warned:
            self._warned.add(key)
            log.log(level, message, *args)

    def _model_inputs(self):
        """``[(name, dtype, shape, (min_shape, max_shape))]`` from the runner's ``input_metadata``,
        else from the user's metadata, else from the user shapes."""
        meta = self.input_metadata if self.input_metadata is not None else (self.user_input_metadata or None)
        if meta is None:
            return [(name, None, shape, (None, None)) for name, shape in self.input_shapes.items()]
        if not isinstance(meta, Mapping):
            raise GateError(
                f"DataLoader input_metadata is a {type(meta).__name__}; expected a mapping of "
                "input name to (dtype, shape)."
            )
        inputs = []
        for name, entry in meta.items():
            try:
                dtype, shape = entry
            except (TypeError, ValueError):
                raise GateError(f"input_metadata['{name}'] is {entry!r}; expected (dtype, shape).") from None
            where = f"Input '{name}'"
            bounds = (getattr(shape, "min", None), getattr(shape, "max", None))
            inputs.append((name, _normalize_dtype(dtype, where), _normalize_shape(shape, where), bounds))
        return inputs

    def _user_shapes(self, names):
        """Model input name -> user shape; a later matching ``input_shapes`` key wins (Polygraphy's
        ``match_keys``). A user name that matches no input is an error: a typo must not pass silently."""
        if self.input_metadata is None and not self.user_input_metadata:
            return dict(self.input_shapes)
        matched = {}
        unmatched = []
        for key, shape in self.input_shapes.items():
            hits = [name for name in names if fnmatchcase(name, key)]
            if not hits:
                unmatched.append(key)
            for name in hits:
                matched[name] = shape
        if unmatched:
            raise GateError(
                f"{self.shapes_option} names {unmatched} match no model input; the model's inputs are {list(names)}."
            )
        return matched

    def _user_overrides(self, names):
        """``(dtypes, shapes)``: the user metadata's dtypes and static shapes for the model inputs
        they match (only once a runner's ``input_metadata`` is set; before, they are the model)."""
        dtypes, shapes = {}, {}
        if self.input_metadata is None or not self.user_input_metadata:
            return dtypes, shapes
        for key, entry in self.user_input_metadata.items():
            dtype, shape = entry
            hits = [name for name in names if fnmatchcase(name, key)]
            if not hits:
                self._warn_once(
                    ("user meta", key),
                    "Input tensor: %s | Metadata was provided, but the input does not exist in one or more runners.",
                    key,
                )
            shape = _normalize_shape(shape, f"input_metadata['{key}']")
            for name in hits:
                if dtype is not None:
                    dtypes[name] = _normalize_dtype(dtype, f"input_metadata['{key}']")
                if shape is not None and any(is_dynamic_dim(d) for d in shape):
                    self._warn_once(
                        ("user dynamic", name),
                        "Input tensor: %s | Provided input shape: %s is dynamic; dynamic shapes cannot be used to "
                        "generate inference data. Will use default shape instead.",
                        name,
                        _format_shape(shape),
                    )
                elif shape is not None:
                    shapes[name] = shape
        return dtypes, shapes

    def _range(self, name):
        return self._ranges.get(name, self._default_range)

    def __getitem__(self, index):
        """Item ``index``: ``OrderedDict[input name, numpy.ndarray]`` in ``input_metadata`` order,
        each array of the input's dtype (float64 when None) and its static shape (dynamic dims from
        the user shape, else 1). The same index always gives the same values.

        Raises:
            IndexError: ``index >= iterations`` (or ``< -iterations``).
            GateError: see the class docstring.
        """
        index = operator.index(index)
        if index < 0:
            index += self.iterations
        if not 0 <= index < self.iterations:
            raise IndexError(f"DataLoader index out of range (it has {self.iterations} iterations).")

        inputs = self._model_inputs()
        names = [name for name, _, _, _ in inputs]
        user_dtypes, user_shapes = self._user_overrides(names)
        user_shapes.update(self._user_shapes(names))
        unused = [key for key in self._ranges if key not in names]
        if unused:
            self._warn_once(
                ("val_range", tuple(unused)),
                "val_range names %s match no model input; the model's inputs are %s.",
                unused,
                names,
            )

        rng = ArraySampler("numpy", self.seed + index)
        feed_dict = OrderedDict()
        for name, dtype, shape, bounds in inputs:
            dtype = user_dtypes.get(name, dtype)
            if dtype is not None and dtype not in _GENERATED_DTYPES:
                raise GateError(
                    f"Could not convert data type: {dtype} to numpy, so the default data loader cannot generate "
                    f"a numpy array for input: {name}. Please use a custom data loader to provide inputs."
                )
            user_shape = user_shapes.get(name)
            shape_tensor = False
            if user_shape is not None:
                shape_tensor = self._is_shape_tensor(dtype, shape, user_shape)
                if not shape_tensor and not is_valid_shape_override(user_shape, shape):
                    raise GateError(
                        f"{self.shapes_option} gives input '{name}' the shape {_format_shape(user_shape)}, which does "
                        f"not fit its model shape {_format_shape(shape)} (same rank and equal static dims expected)."
                    )
                shape = user_shape
            elif shape is not None and any(is_dynamic_dim(d) for d in shape) and bounds != (None, None):
                bound = _normalize_shape(bounds[0] if bounds[0] is not None else bounds[1], f"Input '{name}'")
                if not is_valid_shape_override(bound, shape):
                    raise GateError(
                        f"Input tensor: {name} | Cannot override original shape: {_format_shape(shape)} to "
                        f"{_format_shape(bound)}"
                    )
                shape = bound
            if shape_tensor:
                feed_dict[name] = self._shape_tensor_values(name, dtype, user_shape)
            else:
                feed_dict[name] = self._sample(rng, name, dtype, self._static_shape(name, shape))
        self.shapes_fed = {name: tuple(array.shape) for name, array in feed_dict.items()}
        if self.data_loader_backend_module == "torch":
            try:
                import torch
            except ImportError:
                raise GateError("Module: 'torch' is required but could not be imported.") from None
            feed_dict = OrderedDict((name, torch.from_numpy(array)) for name, array in feed_dict.items())
        return feed_dict

    @staticmethod
    def _is_shape_tensor(dtype, shape, user_shape):
        # Polygraphy's guess (a hack for older TensorRT shape-tensor inputs): a static 1-D integer
        # input whose user "shape" has as many entries as the input has elements.
        if dtype is not None and dtype.kind not in "iu":
            return False
        if shape is None or len(shape) != 1 or is_dynamic_dim(shape[0]):
            return False
        return len(user_shape) == shape[0]

    def _shape_tensor_values(self, name, dtype, values):
        try:
            array = np.array(values, dtype=dtype)
        except OverflowError:
            raise GateError(
                f"{self.shapes_option} gives shape-tensor input '{name}' the values {list(values)}, which do not "
                f"fit its dtype {dtype}."
            ) from None
        self._warn_once(
            ("shape tensor", name),
            "Input '%s' looks like a shape tensor (static 1-D integer); its values are set to %s' %s.",
            name,
            self.shapes_option,
            list(values),
            level=logging.INFO,
        )
        return array

    def _static_shape(self, name, shape):
        if shape is None:
            raise GateError(f"Input '{name}' has an unknown rank; give its shape in {self.shapes_option}.")
        static = []
        for axis, dim in enumerate(shape):
            if is_dynamic_dim(dim):
                self._warn_once(
                    ("dynamic dim", name, axis),
                    "Input '%s' %s: dim %d (%r) is dynamic; generating data with size %d there "
                    "(set %s to choose).",
                    name,
                    _format_shape(shape),
                    axis,
                    dim,
                    DEFAULT_SHAPE_VALUE,
                    self.shapes_option,
                )
                dim = DEFAULT_SHAPE_VALUE
            static.append(dim)
        return tuple(static)

    def _sample(self, rng, name, dtype, shape):
        low, high = self._range(name)
        if dtype is not None and dtype.kind in "iu":
            if not (math.isfinite(low) and math.isfinite(high)):
                raise GateError(f"val_range [{low}, {high}] for integer input '{name}' has an infinite bound.")
            imin, imax = int(low), int(high)
            info = np.iinfo(dtype)
            if imin < info.min or imax > info.max:
                raise GateError(
                    f"val_range [{imin}, {imax}] for input '{name}' does not fit its dtype {dtype} "
                    f"([{info.min}, {info.max}])."
                )
            return rng.sample_integer(shape, dtype, imin, imax)
        if dtype is not None and dtype.kind == "b":
            bmin, bmax = bool(low), bool(high)
            if bmin > bmax:
                raise GateError(
                    f"val_range [{low}, {high}] for bool input '{name}' is empty once cast to bool ([{bmin}, {bmax}])."
                )
            return rng.sample_integer(shape, dtype, bmin, bmax)
        return rng.sample_float(shape, dtype, float(low), float(high))
