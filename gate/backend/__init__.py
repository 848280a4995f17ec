"""Runners: one small base class (``BaseRunner``) and one module per backend. Heavy backends
(onnxruntime, tensorrt) are imported lazily."""

from gate.backend.base import BaseRunner, TensorMetadata

__all__ = ["BaseRunner", "TensorMetadata"]
