"""The bases of the comparator's criteria, results and compare functions (Polygraphy 0.53.6
``polygraphy/comparator/compare.py``: ``Threshold``, ``CompareResult``, ``BaseCompareFunc``), and
Polygraphy's per-output lookup ``value_or_from_dict``. ``gate.comparator.compare`` (elementwise
differences) and ``gate.comparator.metrics`` (single metrics) build on them."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping


def value_or_from_dict(obj, name, default=None):
    """Polygraphy's per-output lookup: a non-dict is the value for every output; a dict gives
    ``obj[name]``, else ``obj[""]`` (the default entry), else ``default``."""
    if not isinstance(obj, dict):
        return obj
    if name in obj:
        return obj[name]
    return obj.get("", default)


class Threshold:
    """Base of the comparison criteria (Polygraphy's ``Threshold``): the metric fields it checks
    (``metric_fields``) and the verdict for a result (``passed``). ``describe`` gives a one-line
    summary where the criterion has one (None here)."""

    METRIC_FIELDS: tuple = ()

    @classmethod
    def metric_fields(cls) -> list[str]:
        return list(cls.METRIC_FIELDS)

    def passed(self, metric_values) -> bool:
        """The verdict for ``metric_values``: a ``field -> value`` mapping, or a result object."""
        raise NotImplementedError

    def describe(self, metric_values):
        return None


def metric_value(metric_values, field):
    """``metric_values[field]`` for a mapping (Polygraphy passes one), else the result's attribute."""
    if isinstance(metric_values, Mapping):
        return metric_values.get(field)
    return getattr(metric_values, field, None)


class CompareResult:
    """Base of the per-output comparison results (Polygraphy's ``CompareResult``): ``thresholds``
    (the ``Threshold`` it was checked against), ``output0_name``/``output1_name``, and ``bool()`` as
    the threshold's verdict."""

    _THRESHOLD_CLASS = None

    def __init__(self, thresholds=None):
        self.thresholds = thresholds
        self.output0_name = None
        self.output1_name = None

    def __bool__(self):
        return self.thresholds.passed(self)

    def set_thresholds(self, thresholds):
        """Re-checks this result against ``thresholds`` from now on."""
        self.thresholds = thresholds

    @classmethod
    def metric_fields(cls) -> list[str]:
        return cls._THRESHOLD_CLASS.metric_fields() if cls._THRESHOLD_CLASS else []

    def metric_values(self) -> OrderedDict:
        """``field -> value`` of every metric field (see ``metric_fields``)."""
        return OrderedDict((field, getattr(self, field)) for field in self.metric_fields())

    def describe(self):
        return self.thresholds.describe(self.metric_values()) if self.thresholds is not None else None


class BaseCompareFunc:
    """Base of the compare functions (Polygraphy's ``BaseCompareFunc``): ``__call__(iter_result0,
    iter_result1) -> OrderedDict[output name, result]`` and ``thresholds_for(output name) ->
    Threshold`` (what ``check_average`` needs). Subclass it for a custom comparison."""

    _RESULT_CLASS = None

    def __call__(self, iter_result0, iter_result1):
        raise NotImplementedError

    def thresholds_for(self, output_name):
        raise NotImplementedError
