"""The streaming comparator: Polygraphy-compatible ``Comparator``, compare functions and the
result data model (the public names of Polygraphy 0.53.6's ``polygraphy.comparator``). Runners come
from ``gate.backend``; this package never reaches back to reporters.
"""

# Registers the accuracy result types with ``serde`` (Polygraphy's JSON for AccuracyResults).
from gate.comparator import serde_results  # noqa: F401
from gate.comparator.comparator import Comparator
from gate.comparator.compare import (
    BaseCompareFunc,
    CompareResult,
    OutputCompareResult,
    SimpleCompareFunc,
    SimpleThreshold,
    Threshold,
)
from gate.comparator.data_loader import DataLoader, coerce_feed_dict
from gate.comparator.funcs import (
    CompareFunc,
    LpipsThreshold,
    PerceptualMetricsCompareFunc,
    PerceptualMetricsResult,
    PostprocessFunc,
)
from gate.comparator.indices import IndicesCompareFunc, IndicesCompareResult
from gate.comparator.loaders import StreamingDataLoader
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
from gate.comparator.postprocess import BasePostprocessFunc, TopKPostprocessFunc
from gate.comparator.struct import AccuracyResult, AccuracyResults, IterationResult, LazyArray, RunResults

__all__ = [
    "AccuracyResult",
    "AccuracyResults",
    "BaseCompareFunc",
    "BasePostprocessFunc",
    "Comparator",
    "CompareFunc",
    "CompareResult",
    "CosineSimilarityCompareFunc",
    "CosineSimilarityResult",
    "CosineSimilarityThreshold",
    "DataLoader",
    "IndicesCompareFunc",
    "IndicesCompareResult",
    "IterationResult",
    "L2CompareFunc",
    "L2Result",
    "L2Threshold",
    "LazyArray",
    "LpipsThreshold",
    "OutputCompareResult",
    "PerceptualMetricsCompareFunc",
    "PerceptualMetricsResult",
    "PostprocessFunc",
    "PsnrCompareFunc",
    "PsnrResult",
    "PsnrThreshold",
    "RunResults",
    "SimpleCompareFunc",
    "SimpleThreshold",
    "SnrCompareFunc",
    "SnrResult",
    "SnrThreshold",
    "StreamingDataLoader",
    "Threshold",
    "TopKPostprocessFunc",
    "coerce_feed_dict",
]
