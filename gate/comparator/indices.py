"""``IndicesCompareFunc``: compares index outputs, e.g. the indices of a TopK, position by position
with an index tolerance (Polygraphy 0.53.6 ``IndicesCompareFunc``, ``shared/spec/
polygraphy-0.53.6.md`` section 3.7), plus an opt-in tie-aware mode that accepts indices the two
runners ordered differently among equal scores.

Deliberate differences: the result is an ``IndicesCompareResult`` (truthy or falsy, with the
mismatch count and the first mismatch) instead of a bare bool; a shape mismatch carries both shapes
(D8); outputs are paired by exact name (D5); a 0-d output is compared as one value (Polygraphy
raises TypeError).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from gate.comparator.compare import BaseCompareFunc, value_or_from_dict
from gate.comparator.metrics import compare_outputs, shape_mismatch_error
from gate.comparator.struct import IterationResult
from gate.errors import GateError


@dataclass
class IndicesCompareResult:
    """The comparison of one index output. Truthy when ``passed`` and no ``error``.

    Fields: ``passed``; ``mismatch_count`` (positions outside the tolerance; with ``fail_fast`` the
    count stops at the first); ``first_mismatch`` (``(batch index tuple, position)`` or None);
    ``tie_count`` (positions accepted only because the scores tie); ``index_tolerance``; ``error``
    (why nothing was compared, e.g. a shape mismatch: the result fails); ``shapes`` and ``dtypes`` of
    both sides; ``output0_name``, ``output1_name``. It has no ``averaged``: indices have no metric
    to average (check_average rejects this compare function).
    """

    passed: bool
    mismatch_count: int = 0
    first_mismatch: tuple | None = None
    tie_count: int = 0
    index_tolerance: int = 0
    error: str | None = None
    shapes: tuple | None = None
    dtypes: tuple | None = None
    output0_name: str | None = None
    output1_name: str | None = None

    def __bool__(self):
        return self.error is None and bool(self.passed)

    def __eq__(self, other):
        # Polygraphy's IndicesCompareFunc gives bare bools: ``result == True`` must keep working.
        if isinstance(other, (bool, np.bool_)):
            return bool(self) == bool(other)
        if not isinstance(other, IndicesCompareResult):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None


def compare_indices(a, b, index_tolerance=0, *, scores=None, tie_atol=0.0, fail_fast=False) -> IndicesCompareResult:
    """Compares index arrays ``a`` (first runner) and ``b`` of equal shape ``(..., K)`` (any dtype;
    0-d is one value). Every row over the leading dims is a batch. Position ``i`` of a row matches
    when ``a[i] == b[i]``, or when the first position ``j`` of ``a[i]`` in ``b``'s row has
    ``|j - i| <= index_tolerance``; the last ``index_tolerance`` positions of ``a`` are not checked
    (Polygraphy 0.53.6 ``IndicesCompareFunc``). A tolerance of at least the last axis's length
    would check nothing: the result fails with ``error`` (``vacuous_tolerance``; Polygraphy passes,
    deviation D20).

    ``scores``: optional ``(scores0, scores1)``, arrays of ``a``'s shape (e.g. TopK's ``values``); a
    position that does not match is still accepted when ``|scores0[i] - scores1[i]| <= tie_atol``
    (equal infinities tie; NaN never does).

    Raises:
        GateError: ``scores`` of a shape other than ``a``'s.
    """
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise GateError(f"Index outputs of shapes {a.shape} and {b.shape} cannot be compared.")
    if scores is not None:
        scores = tuple(np.asarray(s) for s in scores)
        for s in scores:
            if s.shape != a.shape:
                raise GateError(f"Tie scores of shape {s.shape} do not match the indices' shape {a.shape}.")
    if a.ndim == 0:
        a, b = a.reshape(1), b.reshape(1)
        scores = scores and tuple(s.reshape(1) for s in scores)
    if error := vacuous_tolerance(a.shape[-1], index_tolerance):
        return IndicesCompareResult(passed=False, error=error, index_tolerance=index_tolerance)
    checked = max(a.shape[-1] - index_tolerance, 0)
    mismatches, first, ties = 0, None, 0
    # Only positions that differ need the search; argwhere walks them in Polygraphy's order.
    for where in np.argwhere(a[..., :checked] != b[..., :checked]):
        batch, i = tuple(int(k) for k in where[:-1]), int(where[-1])
        found = np.flatnonzero(b[batch] == a[batch][i])
        if found.size and abs(int(found[0]) - i) <= index_tolerance:
            continue
        if scores is not None and _tie(scores[0][batch][i], scores[1][batch][i], tie_atol):
            ties += 1
            continue
        mismatches += 1
        first = first or (batch, i)
        if fail_fast:
            break
    return IndicesCompareResult(
        passed=mismatches == 0,
        mismatch_count=mismatches,
        first_mismatch=first,
        tie_count=ties,
        index_tolerance=index_tolerance,
    )


def vacuous_tolerance(length: int, index_tolerance: int, axis: str = "its last axis") -> str | None:
    """Why ``index_tolerance`` checks nothing on a last axis of ``length`` positions (the last
    ``index_tolerance`` positions are not checked), or None: a tolerance > 0 of at least the length."""
    if index_tolerance > 0 and length <= index_tolerance:
        return (f"has {length} position(s) along {axis}, but index_tolerance is {index_tolerance}: the last "
                f"{index_tolerance} positions are not checked, so nothing would be; use an index_tolerance below "
                f"{length}")  # fmt: skip
    return None


def _tie(score0, score1, atol) -> bool:
    with np.errstate(invalid="ignore"):
        return bool(score0 == score1 or abs(float(score0) - float(score1)) <= atol)


class IndicesCompareFunc(BaseCompareFunc):
    """Compares index outputs (e.g. TopK indices) of two IterationResults; see ``compare_indices``
    for the rule (Polygraphy 0.53.6 ``IndicesCompareFunc``).

    Args:
        index_tolerance: how many positions an index may move (int >= 0, or a per-output dict whose
            ``""`` entry is the default); the last ``index_tolerance`` positions are not checked, so
            compare a Top-(K + tolerance) to check K. Default 0.
        fail_fast: stop at the first mismatch.
        find_output_func: opt-in fuzzy pairing (default: exact names, deviation D5).
        ties_compare_equal: accept a mismatch at position ``i`` when the two runners' scores at
            ``i`` are equal within ``tie_atol``: backends break ties between equal scores
            differently, and that is not an accuracy error. Needs ``tie_values``.
        tie_values: ``{indices output: (runner 0's scores output, runner 1's scores output)}`` (a
            single str names the same output on both sides), the scores being outputs of the
            indices' shape in the same IterationResults. The scores outputs are not compared here
            (compare them with ``SimpleCompareFunc``).
        tie_atol: the largest score difference still a tie (default 0: equal scores).

    Example, an ONNX ``TopK`` with outputs ``values`` and ``indices``, where a TensorRT engine
    orders two equal scores the other way round from onnxruntime::

        IndicesCompareFunc(ties_compare_equal=True, tie_values={"indices": ("values", "values")})
        # x = [0.1, 0.9, 0.5, 0.9], K=3: indices [1, 3, 2] vs [3, 1, 2] -> passes (0.9 == 0.9);
        # indices [1, 3, 2] vs [1, 2, 3] -> fails (0.9 != 0.5).

    Calling it with two IterationResults returns ``OrderedDict[output name, IndicesCompareResult]``
    (an output only one side has, or a missing scores output, gives a failed result with
    ``error``). ``thresholds_for`` raises NotImplementedError: nothing here can be averaged.

    Raises:
        GateError: (construction) a negative or non-integer tolerance; ``ties_compare_equal``
            without ``tie_values`` or the reverse; (call) no output could be paired.
    """

    def __init__(
        self,
        index_tolerance=0,
        fail_fast=False,
        find_output_func=None,
        ties_compare_equal=False,
        tie_values=None,
        tie_atol=0.0,
    ):
        self.index_tolerance = 0 if index_tolerance is None else index_tolerance
        tolerances = self.index_tolerance.values() if isinstance(self.index_tolerance, dict) else [self.index_tolerance]
        for tol in tolerances:
            if not isinstance(tol, (int, np.integer)) or isinstance(tol, bool) or tol < 0:
                raise GateError(f"index_tolerance must be an integer >= 0, got {tol!r}.")
        if bool(ties_compare_equal) != bool(tie_values):
            raise GateError("ties_compare_equal=True and tie_values (the scores outputs) must be given together.")
        if not isinstance(tie_atol, (int, float)) or isinstance(tie_atol, bool) or math.isnan(tie_atol) or tie_atol < 0:
            raise GateError(f"tie_atol must be a non-negative number, got {tie_atol!r}.")
        self.fail_fast = bool(fail_fast)
        self.find_output_func = find_output_func
        self.ties_compare_equal = bool(ties_compare_equal)
        self.tie_values = {
            name: (pair, pair) if isinstance(pair, str) else tuple(pair) for name, pair in (tie_values or {}).items()
        }
        self.tie_atol = float(tie_atol)

    def thresholds_for(self, output_name):
        """Raises NotImplementedError: index comparisons have no averageable metric."""
        raise NotImplementedError("IndicesCompareFunc has no averageable metric")

    def __call__(self, iter_result0: IterationResult, iter_result1: IterationResult) -> OrderedDict:
        scores0 = {pair[0] for pair in self.tie_values.values()}
        scores1 = {pair[1] for pair in self.tie_values.values()}

        def compare_output(name0, array0, name1, array1):
            tol = int(value_or_from_dict(self.index_tolerance, name0, 0))
            a, b = np.asarray(array0), np.asarray(array1)
            info = {"shapes": (a.shape, b.shape), "dtypes": (str(a.dtype), str(b.dtype)), "index_tolerance": tol}
            if a.shape != b.shape:
                error = shape_mismatch_error(a.shape, b.shape, iter_result0.runner_name, iter_result1.runner_name)
                return IndicesCompareResult(passed=False, error=error, **info)
            scores, error = self._scores(name0, a.shape, iter_result0, iter_result1)
            if error:
                return IndicesCompareResult(passed=False, error=error, **info)
            result = compare_indices(a, b, tol, scores=scores, tie_atol=self.tie_atol, fail_fast=self.fail_fast)
            result.shapes, result.dtypes = info["shapes"], info["dtypes"]
            return result

        return compare_outputs(
            _without(iter_result0, scores0),
            _without(iter_result1, scores1),
            compare_output,
            find_output_func=self.find_output_func,
            fail_fast=self.fail_fast,
        )

    def _scores(self, name, shape, iter_result0, iter_result1):
        if name not in self.tie_values:
            return None, None
        scores = []
        for score_name, it in zip(self.tie_values[name], (iter_result0, iter_result1)):
            if score_name not in it:
                return None, f"needs tie scores '{score_name}', which is missing from '{it.runner_name}'"
            array = np.asarray(it[score_name])
            if array.shape != tuple(shape):
                return None, (
                    f"has shape {tuple(shape)} but its tie scores '{score_name}' in '{it.runner_name}' have "
                    f"shape {array.shape}"
                )
            scores.append(array)
        return tuple(scores), None


def _without(iter_result: IterationResult, names) -> IterationResult:
    if not names.intersection(iter_result):
        return iter_result
    kept = OrderedDict((k, v) for k, v in iter_result.items() if k not in names)
    return IterationResult(kept, iter_result.runtime, iter_result.runner_name)
