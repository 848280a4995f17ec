"""The streaming comparator: Polygraphy-compatible ``Comparator``, compare functions and the
result data model. Runners come from ``gate.backend``; this package never reaches back to reporters.
"""

from gate.comparator.comparator import Comparator
from gate.comparator.compare import OutputCompareResult, SimpleCompareFunc, SimpleThreshold
from gate.comparator.data_loader import DataLoader, coerce_feed_dict
from gate.comparator.indices import IndicesCompareFunc, IndicesCompareResult
from gate.comparator.metrics import (
    CosineSimilarityCompareFunc,
    CosineSimilarityResult,
    CosineSimilarityThreshold,
    L2CompareFunc,
    L2Result,
    L2Threshold,
    PsnrCompareFunc,
    PsnrResult,
    PsnrThreshold,
    SnrCompareFunc,
    SnrResult,
    SnrThreshold,
)
from gate.comparator.postprocess import TopKPostprocessFunc
from gate.comparator.struct import AccuracyResult, AccuracyResults, IterationResult, RunResults

__all__ = [
    "AccuracyResult",
    "AccuracyResults",
    "Comparator",
    "IterationResult",
    "OutputCompareResult",
    "RunResults",
    "SimpleCompareFunc",
    "SimpleThreshold",
    "IndicesCompareFunc",
    "IndicesCompareResult",
    "L2CompareFunc",
    "L2Result",
    "L2Threshold",
    "CosineSimilarityCompareFunc",
    "CosineSimilarityResult",
    "CosineSimilarityThreshold",
    "PsnrCompareFunc",
    "PsnrResult",
    "PsnrThreshold",
    "SnrCompareFunc",
    "SnrResult",
    "SnrThreshold",
    "DataLoader",
    "coerce_feed_dict",
    "TopKPostprocessFunc",
]
