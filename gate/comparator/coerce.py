"""Input coercion: ``coerce_buffer`` / ``coerce_feed_dict`` adapt a feed_dict to a runner's inputs
(Polygraphy 0.53.6 ``comparator/data_loader.py``, spec section 1.4), made strict: names match
exactly (the spirit of deviation D5), a dtype is cast only when the cast loses nothing, and a shape
is never transposed or reshaped to fit (deviation D11).
"""

from __future__ import annotations

import logging
import operator
from collections import OrderedDict

import numpy as np

from gate.common import is_valid_shape_override, to_numpy_dtype
from gate.errors import GateError

log = logging.getLogger("gate.comparator")


def _format_shape(shape):
    return "None" if shape is None else "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _normalize_shape(shape, where):
    """A model shape: ints (numpy ints become ints), with str / None / negative ints kept as dynamic."""
    if shape is None:
        return None
    if isinstance(shape, str):
        raise GateError(f"{where} has shape {shape!r}, expected a sequence of dims.")
    try:
        dims = list(shape)
    except TypeError:
        raise GateError(f"{where} has shape {shape!r}, expected a sequence of dims.") from None
    out = []
    for dim in dims:
        if dim is None or isinstance(dim, str):
            out.append(dim)
            continue
        try:
            out.append(operator.index(dim))
        except TypeError:
            raise GateError(f"{where} has a dim {dim!r} in shape {dims!r}; expected an int, a str or None.") from None
    return tuple(out)


def _normalize_dtype(dtype, where):
    """A numpy dtype (also from a Polygraphy ``DataType``), or None.

    Raises:
        GateError: no numpy dtype corresponds (e.g. bfloat16 without ml_dtypes)."""
    if dtype is None:
        return None
    try:
        return to_numpy_dtype(dtype)
    except (TypeError, GateError):
        raise GateError(f"{where} has dtype {dtype!r}, which is not a numpy dtype.") from None


def _first_lossy(value, target):
    """The first element of ``value`` that a cast to ``target`` changes, or None if the cast is
    lossless for these values (NaN to NaN and infinities to infinities count as lossless)."""
    source = value.dtype
    if value.size == 0 or (source.kind == "b" and target.kind in "biuf"):
        return None
    flat = value.reshape(-1)
    with np.errstate(all="ignore"):
        if target.kind == "b" and source.kind in "iuf":
            bad = ~((flat == 0) | (flat == 1))
        elif target.kind in "iu" and source.kind in "iu":
            info = np.iinfo(target)
            # Compare as Python ints: numpy would promote int64 against uint64 to float64.
            if int(flat.min()) >= info.min and int(flat.max()) <= info.max:
                return None
            bad = np.array([not info.min <= int(v) <= info.max for v in flat.tolist()])
        elif target.kind in "iu" and source.kind == "f":
            info = np.iinfo(target)
            # iinfo.min and iinfo.max + 1 are powers of two (or 0), exact in every float type.
            wide = flat.astype(np.float64)
            bad = ~(np.isfinite(wide) & (wide == np.floor(wide)) & (wide >= info.min) & (wide < info.max + 1.0))
        elif target.kind == "f" and source.kind in "iuf":
            cast = flat.astype(target)
            if source.kind == "f":
                back = cast.astype(source)
                bad = ~((back == flat) | (np.isnan(back) & np.isnan(flat)))
            else:
                info = np.iinfo(source)
                wide = cast.astype(np.float64)
                in_range = np.isfinite(wide) & (wide >= info.min) & (wide < info.max + 1.0)
                back = np.where(in_range, cast, 0).astype(source)
                bad = ~(in_range & (back == flat))
        else:
            return None if np.can_cast(source, target, casting="safe") else flat[0].item()
    positions = np.flatnonzero(bad)
    return flat[positions[0]].item() if positions.size else None


def coerce_buffer(buffer, name, dtype, shape):
    """Adapts one input array to the model's ``dtype`` (numpy dtype, Polygraphy ``DataType`` or None)
    and ``shape`` (Polygraphy's ``coerce_buffer``, strict): the dtype is cast only when the cast is
    lossless for the values held (int64 values that fit int32, float64 values exactly representable
    in float32, ints 0/1 to bool; NaN and infinities survive float-to-float casts); the shape is
    checked to be a valid override of the model's (same rank, every static dim equal) and is never
    transposed or reshaped. A value that is not an ``ndarray`` goes through ``np.asarray``.

    Returns:
        numpy.ndarray: ``buffer`` itself when nothing needs to change, else the cast copy.

    Raises:
        GateError: a cast that would change a value (names the input, both dtypes and an offending
            value); a shape that does not fit (names the input and both shapes).
    """
    where = f"Input '{name}'"
    dtype, shape = _normalize_dtype(dtype, where), _normalize_shape(shape, where)
    value = buffer if isinstance(buffer, np.ndarray) else np.asarray(buffer)
    if not is_valid_shape_override(value.shape, shape):
        raise GateError(
            f"Input '{name}' has shape {_format_shape(value.shape)}, which does not fit the model's "
            f"{_format_shape(shape)} (same rank and equal static dims expected)."
        )
    if dtype is not None and value.dtype != dtype:
        offending = _first_lossy(value, dtype)
        if offending is not None:
            raise GateError(
                f"Input '{name}' has dtype {value.dtype} and the model expects {dtype}, but casting would change "
                f"its values (e.g. {offending!r})."
            )
        log.info("Input '%s': casting %s to %s (lossless for these values).", name, value.dtype, dtype)
        value = value.astype(dtype)
    return value


def coerce_feed_dict(feed_dict, input_metadata, fallback=None):
    """Adapts a feed_dict to a runner's inputs (Polygraphy 0.53.6 ``coerce_feed_dict``, spec 1.4,
    made strict): for each model input, in ``input_metadata`` order, the feed entry of exactly that
    name (no case-insensitive, substring or positional fallback) through ``coerce_buffer``. Feed
    entries that match no input are dropped with one warning naming them.

    Args:
        feed_dict (Mapping[str, numpy.ndarray]): the input arrays.
        input_metadata (Mapping[str, (dtype or None, shape)]): the runner's inputs, e.g.
            ``runner.get_input_metadata()``; a dtype of None or a dynamic dim accepts anything.
        fallback (Callable[[str], numpy.ndarray] | None): called with an input's name when its entry
            is missing or cannot be coerced (Polygraphy's ``DataLoaderCache`` reloads it from the data
            loader); its array is used as it is. Without it such an input is an error.

    Returns:
        OrderedDict[str, numpy.ndarray]: one entry per model input, in metadata order; an array that
        needs no cast is the caller's object itself (not copied).

    Raises:
        GateError: (without ``fallback``) a model input missing from the feed (names it, lists the
            feed's keys); see ``coerce_buffer``.
    """
    missing = [name for name in input_metadata if name not in feed_dict]
    if missing and fallback is None:
        raise GateError(
            f"Input{'s' if len(missing) > 1 else ''} {', '.join(repr(n) for n in missing)} "
            f"{'are' if len(missing) > 1 else 'is'} missing from the feed_dict, which has {list(feed_dict)}."
        )
    extra = [name for name in feed_dict if name not in input_metadata]
    if extra:
        log.warning(
            "Dropping feed_dict entries %s: the model has no such inputs (it has %s).", extra, list(input_metadata)
        )

    coerced = OrderedDict()
    for name, entry in input_metadata.items():
        dtype, shape = entry
        try:
            if name not in feed_dict:
                raise GateError(f"Input tensor: {name} | Does not exist in the provided input data.")
            coerced[name] = coerce_buffer(feed_dict[name], name, dtype, shape)
        except GateError as err:
            if fallback is None:
                raise
            log.warning(
                "Could not use the provided buffer for input '%s' (%s); reloading it from the data loader.", name, err
            )
            coerced[name] = fallback(name)
    return coerced
