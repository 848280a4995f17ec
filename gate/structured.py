"""Non-tensor values (ONNX sequences, maps and optionals) as the gate holds them, and how they are
compared: structure first, then every tensor inside (a leaf) by the ordinary tensor comparator.

In memory a value is one of (what ``onnxruntime`` returns and ``onnx.numpy_helper.to_list`` /
``to_dict`` / ``to_optional`` read):

- a tensor: ``numpy.ndarray``;
- a sequence: a ``list`` of values (its items may differ in shape: ``SplitToSequence``);
- a map: a ``dict`` from ``int`` or ``str`` keys to values (``ZipMap``: ``str`` or ``int`` class
  labels to 0-d float32 tensors);
- an optional: its value when it holds one, ``None`` when it is empty.

Every leaf has a name built from the output's name (``leaf_name``), readable and one-to-one:

- ``seq[i]``: item ``i`` of a sequence (``probabilities[0]``);
- ``map{key}``: the value at ``key`` of a map (``probabilities[0]{1}``, ``scores{setosa}``); a string
  key is written bare unless it is empty, looks like an integer, has surrounding spaces or holds one
  of ``{}[]"`` or a control character, in which case it is JSON-quoted (``scores{"3"}``, ``scores{"a}b"}``);
- an optional holding a value adds nothing to the name.

Structural differences are failures of the enclosing name, never broadcast or skipped: a sequence
length (``'seq' has 3 items but the reference has 2 items``; its items are then not compared), a
map's key set (its common keys are still compared), an optional's presence, and a value of another
kind. Where both sides hold nothing (an empty sequence or map, an empty optional)
the output still gets a (passing) comparison, so an output is never silently left out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

_BARE_KEY = re.compile(r'^(?!\s)(?!.*\s$)(?!-?\d+$)[^{}\[\]"\x00-\x1f]+$')


def is_structured(value) -> bool:
    """True for a sequence, map or empty optional (anything the tensor comparator cannot take)."""
    return value is None or isinstance(value, (list, tuple, dict))


def item_name(name: str, index: int) -> str:
    return f"{name}[{index}]"


def key_name(name: str, key) -> str:
    if isinstance(key, str) and _BARE_KEY.match(key):
        return f"{name}{{{key}}}"
    if isinstance(key, str):
        return f"{name}{{{json.dumps(key, ensure_ascii=False)}}}"
    return f"{name}{{{int(key)}}}"


def kind_of(value) -> str:
    if value is None:
        return "empty optional"
    if isinstance(value, (list, tuple)):
        return "sequence"
    if isinstance(value, dict):
        return "map"
    return "tensor"


def describe(value) -> str:
    """``value`` in words: ``a tensor``, ``a sequence of 3 items``, ``a map of 2 keys``, ``an empty
    optional``."""
    kind = kind_of(value)
    if kind == "sequence":
        return f"a sequence of {_count(len(value), 'item')}"
    if kind == "map":
        return f"a map of {_count(len(value), 'key')}"
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def leaves(name: str, value) -> Iterator[tuple[str, np.ndarray]]:
    """Every tensor inside ``value`` as ``(leaf name, numpy.ndarray)``, depth first in order (a map
    in its own key order)."""
    kind = kind_of(value)
    if kind == "sequence":
        for index, item in enumerate(value):
            yield from leaves(item_name(name, index), item)
    elif kind == "map":
        for key, item in value.items():
            yield from leaves(key_name(name, key), item)
    elif kind == "tensor":
        yield name, np.asarray(value)


def all_leaves(values) -> Iterator[tuple[str, np.ndarray]]:
    """``leaves`` of every entry of ``values`` (``name -> value``, e.g. an IterationResult), in order."""
    for name, value in values.items():
        yield from leaves(name, value)


def skeleton(value):
    """The structure of ``value`` without its numbers, JSON-serializable: ``"tensor"``, ``None`` (an
    empty optional), a list of skeletons, or ``{"keys": [...], "values": [...]}``."""
    kind = kind_of(value)
    if kind == "sequence":
        return [skeleton(item) for item in value]
    if kind == "map":
        return {"keys": list(value), "values": [skeleton(item) for item in value.values()]}
    return None if kind == "empty optional" else "tensor"


class LeafPair(NamedTuple):
    """One thing to judge inside an output: two tensors to compare (``live``, ``reference``), a
    structural ``difference`` (a sentence about ``suffix``), or, with neither, structures that agree
    and hold nothing to compare (``agreement`` says what both hold)."""

    suffix: str
    live: np.ndarray | None = None
    reference: np.ndarray | None = None
    difference: str | None = None
    agreement: str | None = None


def leaf_pairs(live, reference, suffix: str = "") -> Iterator[LeafPair]:
    """Walks ``live`` and ``reference`` together and yields what to judge, in the reference's order.
    ``suffix`` is what ``leaf_name`` appends to the output's name (``"[0]{setosa}"``); two tensors
    give one LeafPair with suffix ``""``. Sequences that differ in length give that difference
    alone (which items pair up is unknown); maps whose key sets differ still compare their common
    keys."""
    live_kind, reference_kind = kind_of(live), kind_of(reference)
    if live_kind != reference_kind:
        yield LeafPair(suffix, difference=f"is {describe(live)} but the reference is {describe(reference)}")
        return
    if live_kind == "tensor":
        yield LeafPair(suffix, np.asarray(live), np.asarray(reference))
    elif live_kind == "empty optional":
        yield LeafPair(suffix, agreement="an empty optional on both sides")
    elif live_kind == "sequence":
        if len(live) != len(reference):  # items are not compared: which pairs up with which is unknown
            yield LeafPair(
                suffix,
                difference=f"has {_count(len(live), 'item')} but the reference has {_count(len(reference), 'item')}",
            )
            return
        if not live:
            yield LeafPair(suffix, agreement="an empty sequence on both sides")
        for index, (a, b) in enumerate(zip(live, reference)):
            yield from leaf_pairs(a, b, f"{suffix}[{index}]")
    else:
        missing = [k for k in reference if k not in live]
        extra = [k for k in live if k not in reference]
        if missing or extra:
            parts = []
            if missing:
                parts.append(f"lacks {_keys(missing)} that the reference has")
            if extra:
                parts.append(f"has {_keys(extra)} that the reference lacks")
            yield LeafPair(suffix, difference=" and ".join(parts))
        elif not live:
            yield LeafPair(suffix, agreement="an empty map on both sides")
        for key, b in reference.items():
            if key in live:
                yield from leaf_pairs(live[key], b, suffix + key_name("", key))


def _keys(keys) -> str:
    shown = ", ".join(key_name("", k) for k in keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
    return f"key{'s' if len(keys) > 1 else ''} {shown}"
