"""The comparator's data model: IterationResult, RunResults, AccuracyResult, AccuracyResults.

Semantics follow Polygraphy 0.53.6 ``polygraphy/comparator/struct.py`` (see
``shared/spec/polygraphy-0.53.6.md`` sections 2.4 and 4.1), except that arrays are held as they
are (no swapping to disk) and averaging a result that has no statistics is an error naming the
output and the reason.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Iterable, Iterator

import numpy as np

from gate.errors import GateError


class IterationResult(OrderedDict):
    """The outputs of one runner for one inference: an ordered ``name -> numpy.ndarray`` map in the
    runner's output order.

    Args:
        outputs: output name -> array (any shape and dtype).
        runtime: inference time in seconds, or None.
        runner_name: the runner that produced the outputs (default ``"custom_runner"``).
    """

    def __init__(self, outputs=None, runtime=None, runner_name=None):
        super().__init__(outputs or {})
        self.runtime = runtime
        self.runner_name = "custom_runner" if runner_name is None else runner_name

    def __eq__(self, other):
        # Polygraphy's equality: same runtime and runner name, and every key of the left side
        # present on the right with equal values (one-directional).
        if not isinstance(other, IterationResult):
            return NotImplemented
        if self.runtime != other.runtime or self.runner_name != other.runner_name:
            return False
        return all(k in other and np.array_equal(v, other[k]) for k, v in self.items())

    __hash__ = None

    def __reduce__(self):
        return (type(self), (OrderedDict(self), self.runtime, self.runner_name))


class RunResults:
    """Results of one or more runners: a list of ``(runner_name, [IterationResult, ...])`` pairs that
    also behaves like a dict keyed by runner name. Duplicate runner names are allowed; a ``str`` key
    returns the first match.

    Raises:
        GateError: indexing with a runner name that is not present.
    """

    def __init__(self, lst=None):
        self.lst = list(lst) if lst is not None else []

    def items(self):
        return iter(self.lst)

    def keys(self):
        return [name for name, _ in self.lst]

    def values(self):
        return [results for _, results in self.lst]

    def add(self, out_list, runtime=None, runner_name=None):
        """Appends one runner's results, given as a list of ``name -> array`` dicts (one per
        iteration)."""
        runner_name = "custom_runner" if runner_name is None else runner_name
        self.lst.append((runner_name, [IterationResult(outputs, runtime, runner_name) for outputs in out_list]))

    def update(self, other):
        for name, results in other.items():
            self[name] = results
        return self

    def __getitem__(self, key):
        if isinstance(key, int):
            return self.lst[key]
        for name, results in self.lst:
            if name == key:
                return results
        raise GateError(f"Runner '{key}' does not exist in this RunResults; runners are: {self.keys()}.")

    def __setitem__(self, key, value):
        if isinstance(key, int):
            self.lst[key] = value
            return
        for index, (name, _) in enumerate(self.lst):
            if name == key:
                self.lst[index] = (key, value)
                return
        self.lst.append((key, value))

    def __contains__(self, name):
        return any(n == name for n, _ in self.lst)

    def __len__(self):
        return len(self.lst)

    def __iter__(self):
        return iter(self.lst)

    def __eq__(self, other):
        if not isinstance(other, RunResults):
            return NotImplemented
        return all(
            n0 == n1 and len(r0) == len(r1) and all(a == b for a, b in zip(r0, r1))
            for (n0, r0), (n1, r1) in zip(self.lst, other.lst)
        )

    __hash__ = None

    def __repr__(self):
        return f"RunResults({self.keys()}, iterations={[len(r) for r in self.values()]})"

    def split(self) -> Iterator[RunResults]:
        """Yields single-iteration RunResults up to the longest runner; a runner that has run out of
        iterations is left out of the later items."""
        longest = max((len(results) for results in self.values()), default=0)
        for index in range(longest):
            yield RunResults([(name, [results[index]]) for name, results in self.lst if index < len(results)])

    @staticmethod
    def concat(runs: Iterable[RunResults]) -> RunResults:
        """Merges RunResults by runner name (the inverse of ``split``)."""
        merged = RunResults()
        for run in runs:
            for name, results in run.items():
                if name in merged:
                    merged[name].extend(results)
                else:
                    merged.lst.append((name, list(results)))
        return merged


class AccuracyResult(OrderedDict):
    """Comparison results of one compare function: ``(runner0, runner1) -> [OrderedDict[output,
    result]]``, one dict per iteration.

    ``bool()`` is True when everything passed: every result of every iteration for
    ``aggregation == "per_sample"``; every averaged result for ``aggregation == "average"``. An empty
    AccuracyResult is True (Polygraphy's semantics; the gate itself treats "nothing compared" as an
    error, deviation D7).
    """

    def __init__(self, dct=None, aggregation="per_sample"):
        super().__init__(dct or {})
        if aggregation not in ("per_sample", "average"):
            raise GateError(f"Unknown aggregation '{aggregation}'; expected 'per_sample' or 'average'.")
        self.aggregation = aggregation

    def __reduce__(self):
        return (type(self), (OrderedDict(self), self.aggregation))

    def __bool__(self):
        if self.aggregation == "average":
            return all(bool(r) for pair in self for r in self.average_results(pair).values())
        return all(bool(r) for iterations in self.values() for it in iterations for r in it.values())

    def stats(self, runner_pair=None) -> tuple[int, int, int]:
        """Returns ``(matched, mismatched, total)`` iterations for a runner pair (default: the first).
        An iteration matches when every output passed. Always per iteration.

        Raises:
            IndexError: no pair has been compared.
        """
        if runner_pair is None:
            if len(self) == 0:
                raise IndexError("AccuracyResult has no runner pairs")
            runner_pair = next(iter(self.keys()))
        iterations = self[runner_pair]
        matched = sum(1 for it in iterations if all(bool(r) for r in it.values()))
        return matched, len(iterations) - matched, len(iterations)

    def percentage(self, runner_pair=None) -> float:
        """Fraction of matched iterations (1.0 when nothing was compared)."""
        if not len(self):
            return 1.0
        matched, _, total = self.stats(runner_pair)
        return 1.0 if total == 0 else matched / total

    def output_names(self, runner_pair=None) -> list[str]:
        """Output names in order of first appearance over the pair's iterations (default: all pairs)."""
        pairs = [runner_pair] if runner_pair is not None else list(self.keys())
        names = {}
        for pair in pairs:
            for it in self[pair]:
                names.update(dict.fromkeys(it))
        return list(names)

    def average_results(self, runner_pair=None) -> OrderedDict:
        """Averages every metric field of each output over the iterations that contain it, and
        returns ``output -> result`` with the verdict taken from the first sample's thresholds.

        Averaged "max" is the mean of the per-iteration maxima (Polygraphy's definition).

        Raises:
            GateError: a result of that output has no statistics (a shape mismatch, a missing
                output, or a compare function without averageable metrics).
        """
        if runner_pair is None:
            if len(self) == 0:
                return OrderedDict()
            runner_pair = next(iter(self.keys()))
        iterations = self[runner_pair]
        averaged = OrderedDict()
        for name in self.output_names(runner_pair):
            samples = [(index, it[name]) for index, it in enumerate(iterations) if name in it]
            averaged[name] = _average(samples, name)
        return averaged


def _average(samples, name):
    first = samples[0][1]
    for index, result in samples:
        if getattr(result, "error", None) or not hasattr(result, "averaged"):
            reason = getattr(result, "error", None) or "it has no averageable statistics"
            raise GateError(f"check_average cannot average output '{name}': iteration {index} {reason}.")
    return type(first).averaged([r for _, r in samples])


class AccuracyResults:
    """One AccuracyResult per compare function. ``bool()`` is True only when every entry passed
    (empty: True)."""

    def __init__(self, lst=None):
        self.lst = list(lst) if lst is not None else []

    def __bool__(self):
        return all(bool(r) for r in self.lst)

    def __len__(self):
        return len(self.lst)

    def __iter__(self):
        return iter(self.lst)

    def __getitem__(self, index):
        return self.lst[index]

    def append(self, result):
        self.lst.append(result)

    def output_names(self) -> list[str]:
        names = {}
        for result in self.lst:
            names.update(dict.fromkeys(result.output_names()))
        return list(names)

    def __deepcopy__(self, memo):
        return AccuracyResults(copy.deepcopy(self.lst, memo))
