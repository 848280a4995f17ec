"""Shards: one matrix leg's part of the golden set, and the views a check reads it through.

A shard ``i/n`` (1-based) takes the iterations whose index ``k`` has ``k % n == i - 1``. Adding
iterations at the end of the golden set never moves an existing iteration to another shard (contiguous
blocks of ``ceil(total / n)`` would move almost all of them), and the shards stay balanced to within
one iteration. Each shard's comparisons go to a partial result file (``gate.partial_file``) and
``gate.merge`` combines them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np

from gate.errors import GateError
from gate.structured import all_leaves, is_structured, skeleton


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` of ``count`` (1-based, as written ``"2/3"``)."""

    index: int = 1
    count: int = 1

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def indices(self, total: int) -> range:
        """The golden-set indices of this shard, ascending: ``k`` with ``k % count == index - 1``."""
        return range(self.index - 1, total, self.count)

    def check_total(self, total: int, where) -> None:
        """Raises GateError when the golden set has fewer iterations than shards (a shard would be
        empty), naming ``where`` (the golden folder)."""
        if self.count > total:
            raise GateError(
                f"{where}: shard {self} splits {total} iterations into {self.count} shards; use at most {total} shards."
            )


def parse_shard(text: str, setting: str = "--shard") -> Shard:
    """``"i/n"`` -> Shard(i, n), with 1 <= i <= n.

    Raises:
        GateError: anything else, naming the setting.
    """
    raw = str(text).strip()
    index, sep, count = raw.partition("/")
    if not (sep and index.strip().isdigit() and count.strip().isdigit()):
        raise GateError(f"{setting} must look like 1/3 (shard i of n, 1-based), got {text!r}.")
    shard = Shard(int(index), int(count))
    if shard.count < 1:
        raise GateError(f"{setting} {raw}: the number of shards n must be at least 1 (shard i of n).")
    if not 1 <= shard.index <= shard.count:
        raise GateError(f"{setting} {raw}: the shard must be 1 to {shard.count} of {shard.count}.")
    return shard


class ShardView:
    """The iterations of one shard of a stored tensor set (``gate.data.TensorSet``): ``view[j]`` is
    iteration ``indices[j]``; ``location`` and every other attribute are the wrapped set's."""

    def __init__(self, stored, indices):
        self.stored = stored
        self.indices = list(indices)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, position: int):
        if position < 0 or position >= len(self.indices):
            raise IndexError(position)
        return self.stored[self.indices[position]]

    def __iter__(self):
        for position in range(len(self)):
            yield self[position]

    def location(self, position: int):
        return self.stored.location(self.indices[position])

    def __getattr__(self, name):
        return getattr(self.stored, name)


class DigestingView:
    """Wraps a tensor set; every iteration read through it gets a content digest
    (:func:`iteration_sha256`) in ``digests[position]``, computed as it streams by."""

    def __init__(self, stored):
        self.stored = stored
        self.digests: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.stored)

    def __getitem__(self, position: int):
        tensors = self.stored[position]
        self.digests[position] = iteration_sha256(tensors)
        return tensors

    def __iter__(self):
        for position in range(len(self)):
            yield self[position]

    def __getattr__(self, name):
        return getattr(self.stored, name)


def iteration_sha256(tensors) -> str:
    """sha256 (hex) of one iteration's tensors: each name, dtype, shape and the values' bytes, in order."""
    digest = hashlib.sha256()
    structure = {name: skeleton(value) for name, value in tensors.items() if is_structured(value)}
    if structure:  # a sequence, map or optional: its shape of items and keys, then its tensors
        digest.update(json.dumps(structure, sort_keys=True).encode("utf-8"))
    for name, array in all_leaves(tensors):
        array = np.asarray(array)
        digest.update(f"{name}\0{array.dtype.str}\0{array.shape}\0".encode())
        if array.dtype.hasobject:  # strings: their text, not pointers
            digest.update(repr(array.tolist()).encode("utf-8"))
        else:
            digest.update(np.ascontiguousarray(array).view(np.uint8).reshape(-1).data)
    return digest.hexdigest()


def default_partial_name(shard: Shard) -> str:
    """``accuracy-gate-partial-<i>-of-<n>.json``: distinct per matrix leg, so artifacts do not clash."""
    return f"accuracy-gate-partial-{shard.index}-of-{shard.count}.json"
