"""``GoldenRunner``: replays stored golden outputs as if they were a runner."""

from __future__ import annotations

from gate.backend.base import BaseRunner, TensorMetadata
from gate.errors import GateError


class GoldenRunner(BaseRunner):
    """Replays golden outputs from disk, one iteration per ``infer`` call, in order.

    The golden data is read lazily (one iteration at a time from a ``gate.data.TensorSet``), so a
    golden set of any size is streamed, never loaded whole. ``infer`` ignores the feed_dict's values:
    iteration ``i`` of the inputs is paired with iteration ``i`` of the golden set.

    Args:
        golden: a sequence of ``OrderedDict[name, numpy.ndarray]`` with ``len()`` (a TensorSet).
        input_metadata: what the live model expects (reported as this runner's inputs).
        name: the runner's name (default ``"golden"``).

    Raises:
        GateError: ``infer`` is called more times than there are golden iterations (names both
            counts and the directory).
    """

    prefix = "golden"

    def __init__(self, golden, input_metadata=None, name="golden"):
        super().__init__(name)
        self.golden = golden
        self._metadata = input_metadata if input_metadata is not None else TensorMetadata()
        self._index = 0

    def activate_impl(self):
        self._index = 0

    def get_input_metadata_impl(self):
        return self._metadata

    def infer(self, feed_dict, check_inputs=False):
        return super().infer(feed_dict, check_inputs=False)

    def infer_impl(self, feed_dict):
        if self._index >= len(self.golden):
            where = getattr(self.golden, "directory", "the golden set")
            raise GateError(
                f"{where}: the golden set has {len(self.golden)} iterations but more inputs were fed; "
                "record golden outputs for every stored input."
            )
        outputs = self.golden[self._index]
        self._index += 1
        self.inference_time = 0.0
        return outputs
