"""Bounds on hostile input that every reader shares: how deeply a parsed TOML or JSON document may
nest, and sums of floats that are exact and cannot overflow.

Python's ``tomllib`` and ``json`` parse nesting by recursion, so a document nested a few thousand
levels raises ``RecursionError`` (not their decode errors), and one nested a few hundred levels
parses but makes every later recursive walk fragile. The gate's own documents nest a few levels
(gate.toml: 3; Polygraphy JSON: about 8), so the limits here are far above any real file.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from gate.errors import GateError

TOML_DEPTH = 32
"""The deepest a gate.toml may nest (tables and arrays)."""
JSON_DEPTH = 64
"""The deepest a JSON document the gate reads may nest (objects and arrays)."""


def nesting_depth(value, limit: int) -> int:
    """How deeply ``value`` nests (a scalar 0, ``[]`` 1, ``[[1]]`` 2; mappings and lists/tuples
    count), walked without recursion and given up at ``limit + 1``."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, Mapping) else node if isinstance(node, (list, tuple)) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_nested(parse, text, limit: int, source: str, what: str):
    """``parse(text)`` (``tomllib.loads``, ``json.loads``, ...), refused when the document nests more
    than ``limit`` levels.

    Raises:
        GateError: nested too deeply (the parser's RecursionError, or a depth over ``limit`` after
            parsing), naming ``source`` and ``what`` it is; whatever ``parse`` raises otherwise.
    """
    too_deep = GateError(f"{source}: {what} nests more than {limit} levels deep; expected at most {limit}.")
    try:
        value = parse(text)
    except RecursionError:
        raise too_deep from None
    if nesting_depth(value, limit) > limit:
        raise too_deep
    return value


def exact_mean(values: Iterable[float]) -> float:
    """The mean of finite ``values``, exactly rounded (``math.fsum(values) / n`` where that works).

    ``math.fsum`` raises OverflowError when a partial sum passes the largest float (errors near
    1e308), though the mean of finite floats is always finite; then the sum is taken exactly in
    integers (each float is an integer multiple of 2**-1074) and divided once, correctly rounded.
    Infinities and NaN propagate as IEEE arithmetic gives them (``inf - inf`` is NaN, where
    ``math.fsum`` raises ValueError).

    Raises:
        ZeroDivisionError: ``values`` is empty.
    """
    values = [float(v) for v in values]
    try:
        return math.fsum(values) / len(values)
    except (OverflowError, ValueError):  # ValueError: inf - inf, which IEEE addition makes NaN
        pass
    if not all(math.isfinite(v) for v in values):
        return sum(values) / len(values)
    scale = 1 << 1074
    total = sum(num * (scale // den) for num, den in (v.as_integer_ratio() for v in values))
    return total / (scale * len(values))
