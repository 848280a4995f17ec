"""The comparator's data model: IterationResult, RunResults, AccuracyResult, AccuracyResults.

Semantics follow Polygraphy 0.53.6 ``polygraphy/comparator/struct.py`` (see
``shared/spec/polygraphy-0.53.6.md`` sections 2.4 and 4.1), except that arrays are held as they
are (no swapping to disk) and averaging a result that has no statistics is an error naming the
output and the reason.
"""

from __future__ import annotations

import copy
import os
import tempfile
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator

import numpy as np

from gate.errors import GateError

ARRAY_SWAP_THRESHOLD_MB = -1
"""Arrays larger than this many MiB are moved to a temporary file by ``LazyArray`` (-1: never).
Polygraphy's ``polygraphy.config.ARRAY_SWAP_THRESHOLD_MB``, here a setting of this module."""


class LazyArray:
    """An array that may live in a temporary file (Polygraphy's ``LazyArray``): larger than
    ``ARRAY_SWAP_THRESHOLD_MB`` MiB (when that is >= 0) it is written there in Polygraphy's JSON
    (``arr`` is None, ``tmpfile`` the file), else kept as it is (``arr``). ``load()`` returns it."""

    def __init__(self, arr):
        self.arr = None
        self.tmpfile = None
        threshold = ARRAY_SWAP_THRESHOLD_MB
        if threshold >= 0 and np.asarray(arr).nbytes > (int(threshold) << 20):
            from gate.comparator import serde

            self.tmpfile = tempfile.NamedTemporaryFile(suffix=".json")
            serde.save_json(np.asarray(arr), self.tmpfile.name)
        else:
            self.arr = arr

    def load(self):
        """The array (read back from the temporary file if it was swapped out)."""
        if self.arr is not None:
            return self.arr
        from gate.comparator import serde

        return serde.load_json(self.tmpfile.name)


def _check_decoded(obj, cls, source):
    if not isinstance(obj, cls):
        raise GateError(
            f"{source}: Provided JSON cannot be decoded into a {cls.__name__}. "
            f"Note: JSON was decoded into a {type(obj)}"
        )
    return obj


class _JsonMethods:
    """Polygraphy's ``add_json_methods``: ``to_json``, ``from_json``, ``save``, ``load`` in Polygraphy's
    JSON (``gate.comparator.serde``, byte for byte)."""

    def to_json(self) -> str:
        """This object as Polygraphy's JSON text."""
        from gate.comparator import serde, serde_results  # noqa: F401  (registers the result types)

        return serde.to_json(self)

    @classmethod
    def from_json(cls, src):
        """Decodes JSON text ``src``.

        Raises:
            GateError: the JSON does not decode into this class."""
        from gate.comparator import serde, serde_results  # noqa: F401

        return _check_decoded(serde.from_json(src), cls, "<string>")

    def save(self, dest) -> None:
        """Writes this object to ``dest`` (a path or a writable file object)."""
        from gate.comparator import serde, serde_results  # noqa: F401

        if hasattr(dest, "write"):
            dest.write(serde.to_json(self))
        else:
            serde.save_json(self, dest)

    @classmethod
    def load(cls, src):
        """Reads an object of this class from ``src`` (a path or a readable file object).

        Raises:
            GateError: a missing or unreadable file, or JSON that is not this class."""
        from gate.comparator import serde, serde_results  # noqa: F401

        if hasattr(src, "read"):
            return _check_decoded(serde.from_json(src.read()), cls, "<file>")
        return _check_decoded(serde.load_json(os.fspath(src)), cls, src)


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


class RunResults(_JsonMethods):
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

    def append(self, elem):
        """Appends one ``(runner_name, [IterationResult, ...])`` pair.

        Raises:
            GateError: ``elem`` is not a pair (a tuple of 2)."""
        if not (isinstance(elem, tuple) and len(elem) == 2):
            raise GateError(f"Unsupported value type: {type(elem)}. Note: Expected a (runner_name, list) tuple.")
        self.lst.append(elem)

    def extend(self, elems):
        """Appends every pair of ``elems`` (see ``append``)."""
        for elem in elems:
            self.append(elem)

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
        raise GateError(f"{key} does not exist in this RunResults instance. Note: Available runners: {self.keys()}")

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
    def load_streaming(path, allow_dirs=True) -> Iterator[RunResults]:
        """Yields single-iteration RunResults from a file, a directory of per-iteration files or a
        list of either (``gate.comparator.serde.load_run_results_streaming``).

        Raises:
            GateError: ``allow_dirs=False`` and a path is a directory; see the serde loader."""
        from gate.comparator import serde

        paths = [path] if isinstance(path, (str, os.PathLike)) else list(path)
        if not allow_dirs:
            for p in paths:
                if os.path.isdir(p):
                    raise GateError(f"{p}: is a directory, and directories are not allowed here (allow_dirs=False).")
        yield from serde.load_run_results_streaming(paths)

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
        """Fraction of matched iterations (1.0 when nothing was compared). Deprecated in Polygraphy
        0.53.6 (removed in 0.55.0; use ``stats``): issues its ``DeprecationWarning``."""
        warnings.warn(
            "AccuracyResult.percentage is deprecated and will be removed in Polygraphy 0.55.0. Use stats instead.",
            DeprecationWarning,
            stacklevel=2,
        )
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

    def describe_average(self, runner_pair=None) -> OrderedDict:
        """``output -> (line, passed)`` for each averaged result that has a one-line description (the
        single-metric compare functions; none for ``SimpleCompareFunc``), Polygraphy's wording."""
        described = OrderedDict()
        for name, result in self.average_results(runner_pair).items():
            description = result.describe() if hasattr(result, "describe") else None
            if description is not None:
                described[name] = description
        return described

    def metric_fields(self) -> list[str]:
        """The metric fields of the stored results (the first that has any); [] for bare verdicts."""
        for iterations in self.values():
            for it in iterations:
                for result in it.values():
                    if hasattr(result, "metric_fields") and result.metric_fields():
                        return list(result.metric_fields())
        return []

    def reevaluate(self, thresholds, aggregation=None):
        """Re-checks every stored result against ``thresholds`` (one ``Threshold``, or a per-output
        dict with ``""`` as the default), in place; ``aggregation`` may change the mode. Returns self.

        Raises:
            GateError: an output without a threshold; a result that cannot be re-checked (a bare
                verdict: a shape mismatch, an indices comparison) or lacks the threshold's fields."""
        if aggregation is not None:
            if aggregation not in ("per_sample", "average"):
                raise GateError(f"Unknown aggregation '{aggregation}'; expected 'per_sample' or 'average'.")
            self.aggregation = aggregation
        for iterations in self.values():
            for it in iterations:
                for name, result in it.items():
                    threshold = thresholds.get(name, thresholds.get("")) if isinstance(thresholds, dict) else thresholds
                    if threshold is None:
                        raise GateError(f"No threshold was provided for output: '{name}'.")
                    have = result.metric_fields() if hasattr(result, "metric_fields") else []
                    if getattr(result, "error", None) or not have:
                        raise GateError(
                            f"Output: '{name}' has no re-thresholdable metrics (e.g. it was a shape mismatch or an "
                            "'indices' comparison), so it cannot be re-evaluated against new thresholds."
                        )
                    missing = [f for f in threshold.metric_fields() if f not in have]
                    if missing:
                        raise GateError(
                            f"The requested comparison expects metric field(s) {missing} which are not present in "
                            f"the saved results for output: '{name}' (it has: {have})."
                        )
                    result.set_thresholds(threshold)
        return self

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


class AccuracyResults(_JsonMethods):
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

    def append(self, elem):
        self.lst.append(elem)

    def extend(self, elems):
        self.lst.extend(elems)

    def reevaluate(self, thresholds, aggregation=None):
        """Re-checks the stored comparisons against new thresholds, in place: each threshold (or
        per-output dict of thresholds) selects the comparison whose metric fields it checks; the
        comparisons no threshold selects are dropped (Polygraphy's rule). Returns self.

        Raises:
            GateError: a threshold that matches no stored comparison; an empty per-output dict."""
        requested = list(thresholds) if isinstance(thresholds, (list, tuple)) else [thresholds]
        remaining, checked = list(self.lst), []
        for threshold in requested:
            sample = threshold
            if isinstance(threshold, dict):
                if not threshold:
                    raise GateError("A per-output threshold dictionary cannot be empty.")
                sample = next(iter(threshold.values()))
            fields = list(sample.metric_fields())
            match = next((r for r in remaining if r.metric_fields() == fields), None)
            if match is None:
                raise GateError(
                    f"No saved comparison results match the requested threshold (metric fields: {fields}). "
                    f"Note: the saved results contain these metric fields: {[r.metric_fields() for r in self.lst]}."
                )
            remaining.remove(match)
            checked.append(match.reevaluate(threshold, aggregation=aggregation))
        self.lst = checked
        return self

    def output_names(self) -> list[str]:
        names = {}
        for result in self.lst:
            names.update(dict.fromkeys(result.output_names()))
        return list(names)

    def __deepcopy__(self, memo):
        return AccuracyResults(copy.deepcopy(self.lst, memo))
