"""Task metrics against labels: the share of iterations whose output gets its label right, for every
live runner and for the golden outputs (the reference), judged by a floor (``task_min``), a share of the
reference (``task_min_relative``, MLPerf's rule: at least 99% of the fp32 reference's accuracy) or a
largest drop in percentage points (``task_max_drop``).

Labels (``labels``): one tensor ``label`` per iteration in a stored-data layout (``<N>.npz`` files, or
``test_data_set_<N>/input_0.pb`` holding a tensor named ``label``). Metrics (``task_metric``, per
output), along the class axis ``top_k_axis``:

- ``accuracy``: the label (an integer class, or one per batch row) is among the top ``task_top_k``
  classes of the output (a float scores output), or equals it (an integer output, e.g. an ArgMax);
- ``exact_match``: the argmax sequence (one class per position) equals the label sequence;
- ``ctc_exact_match``: the same after CTC's collapse: repeats merged, then ``ctc_blank`` removed.

Each iteration's comparison is a ``TaskResult`` (``correct``, ``reference_correct``), kept in the partial
result file like any compare function's, so a merge of shards gives the same counts.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from gate.comparator.compare import value_or_from_dict
from gate.comparator.output_funcs import STRUCTURED_ERROR, axis_error, nan_rows
from gate.comparator.postprocess import top_k_indices
from gate.dtype_rules import iteration_error
from gate.errors import GateError
from gate.per_output import value_for_output
from gate.results import OutputVerdict, fmt_threshold
from gate.structured import is_structured


@dataclass
class TaskResult:
    """One iteration of one output: did the live runner (``correct``) and the reference
    (``reference_correct``) get the label right; ``error`` why it could not be judged."""

    correct: bool = False
    reference_correct: bool = False
    error: str | None = None
    output0_name: str | None = None
    output1_name: str | None = None
    dtypes: tuple | None = None
    shapes: tuple | None = None

    def __bool__(self):
        return self.error is None


def _argmax(output: np.ndarray, axis: int) -> np.ndarray:
    return output if output.dtype.kind in "iu" else np.argmax(output, axis=axis)


def ctc_collapse(sequence) -> list:
    """Repeats merged into one (CTC's greedy decoding), before the blank is removed."""
    seq = [int(v) for v in np.ravel(sequence)]
    return [v for i, v in enumerate(seq) if i == 0 or v != seq[i - 1]]


def is_correct(output, label, metric: str, k: int = 1, axis: int = -1, blank: int = 0, where: str = "") -> bool:
    """Whether ``output`` (scores with classes along ``axis``, or integer classes) gets ``label`` right
    under ``metric`` (module docstring); a batch is right when every row is, and scores that hold
    NaN are never right (an argmax or a sort would pick index 0 of an all-NaN row).

    Raises:
        GateError: a label that is not integer, of the wrong shape, or a class out of range.
    """
    output, label = np.asarray(output), np.asarray(label)
    if label.dtype.kind not in "iu":
        raise GateError(f"{where}: labels must be integer classes, got {label.dtype}.")
    classes = output.shape[axis] if output.dtype.kind not in "iu" and output.ndim else None
    if classes is not None and label.size and (label.min() < 0 or label.max() >= classes):
        bad = int(label.min() if label.min() < 0 else label.max())
        raise GateError(f"{where}: label {bad} is out of range for the {classes} classes of the output (axis {axis}).")
    if classes is not None and np.any(nan_rows(output, axis)):  # a NaN score gets no label right (D19)
        if metric == "accuracy" and label.size != output.size // max(classes, 1):
            raise GateError(f"{where}: expected {output.size // max(classes, 1)} label(s), one per batch row, "
                            f"got shape {label.shape}.")  # fmt: skip
        return False
    if metric == "accuracy":
        rows = np.moveaxis(output, axis, -1) if classes is not None else output
        rows = rows.reshape(-1, rows.shape[-1]) if classes is not None else rows.reshape(-1, 1)
        if label.size != rows.shape[0]:
            raise GateError(f"{where}: expected {rows.shape[0]} label(s), one per batch row, got shape {label.shape}.")
        top = top_k_indices(rows, k, -1) if classes is not None else rows
        return bool(np.all(np.any(top == label.reshape(-1, 1), axis=-1)))
    predicted = np.ravel(_argmax(output, axis))
    if metric == "ctc_exact_match":
        predicted = np.array([v for v in ctc_collapse(predicted) if v != blank])
        expected = np.array([int(v) for v in np.ravel(label) if v != blank])  # repeats kept; blanks are padding
        return predicted.shape == expected.shape and bool(np.all(predicted == expected))
    if label.ndim != 1 or label.size != predicted.size:
        raise GateError(f"{where}: expected a label sequence of {predicted.size} classes, got shape {label.shape}.")
    return bool(np.all(predicted == label))


class TaskCompareFunc:
    """A compare function over the outputs that have a ``task_metric``: each call judges the live
    runner's output and the reference's against the label of the iteration being compared
    (``label_at(position) -> (array, where)``; the comparator calls it once per runner pair per
    iteration, ``pairs`` of them). ``thresholds_for`` raises NotImplementedError (never averaged)."""

    def __init__(self, settings, label_at, pairs: int):
        self.settings, self.label_at, self.pairs, self.calls = settings, label_at, pairs, 0

    def thresholds_for(self, name):
        raise NotImplementedError("task metrics are counted, not averaged")

    def __call__(self, iter_result0, iter_result1) -> OrderedDict:
        from gate.compare_funcs import setting

        position, self.calls = self.calls // self.pairs, self.calls + 1
        label, where = self.label_at(position)
        results = OrderedDict()
        for name in iter_result1:
            metric = value_or_from_dict(setting(self.settings, "task_metric"), name, None)
            if not metric:
                continue
            if name not in iter_result0:
                results[name] = TaskResult(error=f"is missing from '{iter_result0.runner_name}'", output0_name=name)
                continue
            options = {key: int(value_or_from_dict(setting(self.settings, key), name, d))
                       for key, d in (("task_top_k", 1), ("top_k_axis", -1), ("ctc_blank", 0))}  # fmt: skip
            args = (metric, options["task_top_k"], options["top_k_axis"], options["ctc_blank"], where)
            if is_structured(iter_result0[name]) or is_structured(iter_result1[name]):
                results[name] = TaskResult(error=STRUCTURED_ERROR, output0_name=name, output1_name=name)
                continue
            a, b = np.asarray(iter_result0[name]), np.asarray(iter_result1[name])
            if error := axis_error(a, options["top_k_axis"]) if a.dtype.kind not in "iu" else None:
                results[name] = TaskResult(error=error, output0_name=name, output1_name=name)
                continue
            results[name] = TaskResult(is_correct(a, label, *args), is_correct(b, label, *args), None, name, name,
                                       (str(a.dtype), str(b.dtype)), (a.shape, b.shape))  # fmt: skip
        return results


def task_passed(value: float, reference: float, settings, output: str) -> tuple[bool, str]:
    """``(passed, criterion)``: ``value`` (0..1) against ``task_min``, ``task_min_relative`` times
    ``reference`` and ``task_max_drop`` points below it; every criterion given must hold. ``criterion``
    names them (``"min 0.95, min_relative 0.99 (>= 0.9801)"``); none given: passes, ``"none"``."""
    from gate.compare_funcs import setting

    checks = []
    low = value_for_output(setting(settings, "task_min"), output, None)
    if low is not None:
        checks.append((value >= low, f"min {fmt_threshold(low)}"))
    ratio = value_for_output(setting(settings, "task_min_relative"), output, None)
    if ratio is not None:
        checks.append((value >= ratio * reference, f"min_relative {fmt_threshold(ratio)} (>= {ratio * reference:.4g})"))
    drop = value_for_output(setting(settings, "task_max_drop"), output, None)
    if drop is not None:
        checks.append((100 * (reference - value) <= drop + 1e-9, f"max_drop {fmt_threshold(drop)} points"))
    return all(ok for ok, _ in checks), ", ".join(text for _, text in checks) or "none"


def task_rows(accuracy, indices, settings) -> list[OutputVerdict]:
    """One row per (runner pair, output) with a task metric: ``abs_value`` the live runner's share of
    correct iterations, ``reference`` the golden outputs'."""
    from gate.compare_funcs import setting

    rows = []
    for pair, iterations in accuracy.items():
        for output in accuracy.output_names(pair):
            samples = [(i, it[output]) for i, it in enumerate(iterations) if output in it]
            metric = value_for_output(setting(settings, "task_metric"), output, None)
            k = value_for_output(setting(settings, "task_top_k"), output, 1)
            label = f"top-{k} accuracy" if metric == "accuracy" else metric
            stopped = iteration_error(pair, samples)  # the comparator's error, else any iteration's dtypes
            row = OutputVerdict(pair, output, True, stat=label, func="task", averaged=True, iterations=len(samples))
            if stopped is not None:
                row.passed, row.worst_iteration, row.error, row.dtypes = False, *stopped
            else:
                row.abs_value = sum(r.correct for _, r in samples) / len(samples)
                row.reference = sum(r.reference_correct for _, r in samples) / len(samples)
                row.failed_iterations = sum(not r.correct for _, r in samples)
                row.passed, row.criterion = task_passed(row.abs_value, row.reference, settings, output)
            if indices is not None and row.worst_iteration is not None:
                row.worst_iteration = indices[row.worst_iteration]
            rows.append(row)
    return rows


def open_labels(cfg, count: int):
    """The label store of ``cfg`` (None without ``labels``), checked to hold ``count`` iterations.

    Raises:
        GateError: a task metric without labels, or labels for another number of iterations.
    """
    from gate.compare_funcs import setting
    from gate.data import open_tensor_set

    metrics = setting(cfg, "task_metric")
    if cfg.labels is None:
        if metrics:
            raise GateError(f"{cfg.source}: task_metric needs labels: set [compare] labels to the label store.")
        return None
    labels = open_tensor_set(cfg.labels, "input", ["label"])
    if len(labels) != count:
        raise GateError(f"{cfg.labels}: {len(labels)} labels for {count} stored inputs; every iteration needs one.")
    return LabelStore(labels)


class LabelStore:
    """A label store's tensor sets (``TensorSet`` or ``PolygraphyJsonSet``) whose every iteration must
    hold a tensor ``label``: ``store[i]`` is the iteration's tensors, ``store.location(i)`` its file.

    Raises:
        GateError: (``store[i]``) an iteration without a tensor ``label``, naming the file and what it holds.
    """

    def __init__(self, tensor_set):
        self.tensor_set = tensor_set

    def __len__(self):
        return len(self.tensor_set)

    def location(self, index):
        return self.tensor_set.location(index)

    def __getitem__(self, index):
        tensors = self.tensor_set[index]
        if "label" not in tensors:
            raise GateError(f"{self.location(index)}: has no tensor 'label' (it holds {sorted(tensors)}); a label "
                            "store holds one tensor named 'label' per iteration.")  # fmt: skip
        return tensors
