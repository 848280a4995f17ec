"""Polygraphy's JSON for accuracy results: ``AccuracyResults``, ``AccuracyResult``, the compare results and
their thresholds, registered into ``gate.comparator.serde`` (the encoders of Polygraphy 0.53.6
``comparator/struct.py`` and ``comparator/compare.py``).

- ``AccuracyResults`` -> ``{"lst": [<AccuracyResult>, ...]}``;
- ``AccuracyResult`` -> ``{"lst": [[[runner0, runner1], [{output: <result>}, ...]], ...],
  "aggregation": str}``;
- ``OutputCompareResult`` -> the eight metric fields, ``"thresholds"`` (a ``SimpleThreshold``:
  ``check_error_stat``, ``atol``, ``rtol``) and ``"passed"`` (the stored elemwise verdict, else
  null); ``L2Result`` / ``CosineSimilarityResult`` / ``PsnrResult`` / ``SnrResult`` /
  ``PerceptualMetricsResult`` -> ``{<metric>: value, "thresholds": {"threshold": value}}``;
- every object ends with ``"polygraphy_class": "<TypeName>"``.

Where Polygraphy's result is a bare bool (an ``IndicesCompareFunc`` result; a shape mismatch or a
missing output, which we keep as a result carrying ``error``, D5 / D8), the bool is written, as
Polygraphy writes it. Our extra fields (``num_elements``, ``worst_index``, ...) are not written.
"""

from __future__ import annotations

from collections import OrderedDict

from gate.comparator import serde
from gate.comparator.compare import METRIC_FIELDS, OutputCompareResult, SimpleThreshold
from gate.comparator.funcs import LpipsThreshold, PerceptualMetricsResult
from gate.comparator.indices import IndicesCompareResult
from gate.comparator.metrics import (
    CosineSimilarityResult,
    CosineSimilarityThreshold,
    L2Result,
    L2Threshold,
    PsnrResult,
    PsnrThreshold,
    SnrResult,
    SnrThreshold,
)
from gate.comparator.struct import AccuracyResult, AccuracyResults
from gate.errors import GateError


def _encode_output_result(result):
    if result.error is not None:
        return False
    dct = {field: getattr(result, field) for field in METRIC_FIELDS}
    dct["thresholds"] = result.thresholds
    dct["passed"] = result.passed
    return dct


def _decode_output_result(dct):
    return OutputCompareResult(
        *(dct[field] for field in METRIC_FIELDS), thresholds=dct["thresholds"], passed=dct["passed"]
    )


def _register_metric(result_type):
    field = result_type.threshold_type.metric

    def encode(result):
        if result.error is not None:
            return False
        return {field: getattr(result, field), "thresholds": result.thresholds}

    def decode(dct):
        return result_type(dct[field], thresholds=dct["thresholds"])

    serde.ENCODERS[result_type] = encode
    serde.DECODERS[result_type.__name__] = decode


def _register() -> None:
    serde.ENCODERS[SimpleThreshold] = lambda t: {"check_error_stat": t.check_error_stat, "atol": t.atol, "rtol": t.rtol}
    serde.DECODERS["SimpleThreshold"] = lambda d: SimpleThreshold(d["check_error_stat"], d["atol"], d["rtol"])
    for threshold_type in (L2Threshold, CosineSimilarityThreshold, PsnrThreshold, SnrThreshold, LpipsThreshold):
        serde.ENCODERS[threshold_type] = lambda t: {"threshold": t.threshold}
        serde.DECODERS[threshold_type.__name__] = lambda d, typ=threshold_type: typ(d["threshold"])
    serde.ENCODERS[OutputCompareResult] = _encode_output_result
    serde.DECODERS["OutputCompareResult"] = _decode_output_result
    for result_type in (PerceptualMetricsResult, L2Result, CosineSimilarityResult, PsnrResult, SnrResult):
        _register_metric(result_type)
    serde.ENCODERS[IndicesCompareResult] = bool
    serde.ENCODERS[AccuracyResult] = lambda r: {
        "lst": [[list(pair), iterations] for pair, iterations in r.items()],
        "aggregation": r.aggregation,
    }
    serde.DECODERS["AccuracyResult"] = lambda d: AccuracyResult(
        OrderedDict((tuple(pair), iterations) for pair, iterations in d["lst"]), aggregation=d["aggregation"]
    )
    serde.ENCODERS[AccuracyResults] = lambda r: {"lst": list(r.lst)}
    serde.DECODERS["AccuracyResults"] = lambda d: AccuracyResults(d["lst"])


_register()


def load_accuracy_results(path) -> AccuracyResults:
    """Loads an ``AccuracyResults`` JSON file (``AccuracyResults.load``).

    Raises:
        GateError: the file is missing or unreadable, or does not hold AccuracyResults.
    """
    obj = serde.load_json(path)
    if not isinstance(obj, AccuracyResults):
        raise GateError(f"{path}: holds a {type(obj).__name__}, expected AccuracyResults.")
    return obj
