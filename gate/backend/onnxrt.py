"""ONNX Runtime runner (Polygraphy 0.53.6 ``backend/onnxrt/runner.py``; spec section 6.3)."""

from __future__ import annotations

import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from gate.backend.base import BaseRunner, TensorMetadata
from gate.errors import GateError

_ORT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(float16)": np.float16,
    "tensor(double)": np.float64,
    "tensor(int8)": np.int8,
    "tensor(int16)": np.int16,
    "tensor(int32)": np.int32,
    "tensor(int64)": np.int64,
    "tensor(uint8)": np.uint8,
    "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32,
    "tensor(uint64)": np.uint64,
    "tensor(bool)": np.bool_,
    "tensor(string)": np.object_,
}

GRAPH_OPTIMIZATION_LEVELS = ("disable", "basic", "extended", "all")


class SessionFromOnnx:
    """A callable that creates an ``onnxruntime.InferenceSession`` from a model file when called
    (at runner activation).

    Args:
        path: the ``.onnx`` file.
        execution_providers: e.g. ``["CPUExecutionProvider"]`` (the default).
        graph_optimization_level: ``disable``, ``basic``, ``extended`` or ``all`` (default ``all``,
            onnxruntime's default).
        intra_op_num_threads: 0 lets onnxruntime choose.

    Raises:
        GateError: the file is missing or not a model onnxruntime can load; an unknown execution
            provider.
    """

    def __init__(self, path, execution_providers=None, graph_optimization_level="all", intra_op_num_threads=0):
        self.path = Path(path)
        self.execution_providers = list(execution_providers or ["CPUExecutionProvider"])
        if graph_optimization_level not in GRAPH_OPTIMIZATION_LEVELS:
            raise GateError(
                f"graph_optimization_level '{graph_optimization_level}' is not one of "
                f"{', '.join(GRAPH_OPTIMIZATION_LEVELS)}."
            )
        self.graph_optimization_level = graph_optimization_level
        self.intra_op_num_threads = intra_op_num_threads

    def __call__(self):
        import onnxruntime as ort

        # Errors reach the user as one GateError line; onnxruntime's own multi-line, coloured error
        # logs would repeat them.
        ort.set_default_logger_severity(4)
        available = ort.get_available_providers()
        providers = [match_provider(p, available) for p in self.execution_providers]
        unknown = [p for p, match in zip(self.execution_providers, providers) if match is None]
        if unknown:
            raise GateError(
                f"Execution provider(s) {unknown} are not available in this onnxruntime build; available: {available}."
            )
        self.execution_providers = providers
        if not self.path.is_file():
            raise GateError(f"{self.path}: model file not found.")
        options = ort.SessionOptions()
        options.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[self.graph_optimization_level]
        options.intra_op_num_threads = self.intra_op_num_threads
        options.log_severity_level = 4  # errors reach the user as one GateError line instead
        try:
            return ort.InferenceSession(str(self.path), sess_options=options, providers=providers)
        except Exception as err:  # onnxruntime raises its own Fail / InvalidProtobuf / NoSuchFile types
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise GateError(f"{self.path}: onnxruntime cannot load the model ({message}).") from err


def match_provider(name: str, available) -> str | None:
    """The available execution provider ``name`` means, as Polygraphy's ``SessionFromOnnx`` finds it
    (``util.find_str_in_iterable``): an exact name, else the first whose lower-cased name contains
    ``name``'s or is contained in it (``cpu`` -> ``CPUExecutionProvider``); None if none."""
    if name in available:
        return name
    return next((p for p in available if name.lower() in p.lower() or p.lower() in name.lower()), None)


class OnnxrtRunner(BaseRunner):
    """Runs an ONNX model with onnxruntime.

    Args:
        sess: an ``onnxruntime.InferenceSession``, or a callable returning one (e.g.
            ``SessionFromOnnx``), called at activation.
        name: the runner's name.

    ``infer`` returns every session output in session order, as fresh arrays each call.
    """

    prefix = "onnxrt-runner"

    def __init__(self, sess, name=None):
        super().__init__(name)
        self._sess_arg = sess
        self.sess = None

    def activate_impl(self):
        self.sess = self._sess_arg() if callable(self._sess_arg) else self._sess_arg
        self._output_names = [o.name for o in self.sess.get_outputs()]
        self._metadata = TensorMetadata()
        for node in self.sess.get_inputs():
            self._metadata.add(node.name, _ORT_TYPES.get(node.type), node.shape)

    def deactivate_impl(self):
        self.sess = None

    def get_input_metadata_impl(self):
        return self._metadata

    def output_names(self) -> list[str]:
        """The session's output names, in order (only while active)."""
        self._require_active("output_names")
        return list(self._output_names)

    @property
    def execution_providers(self) -> list[str]:
        return self.sess.get_providers() if self.sess is not None else []

    def infer_impl(self, feed_dict):
        start = time.perf_counter()
        try:
            outputs = self.sess.run(None, dict(feed_dict))
        except Exception as err:
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise GateError(f"{self.name}: onnxruntime failed during inference ({first}).") from err
        self.inference_time = time.perf_counter() - start
        return OrderedDict(zip(self._output_names, outputs))
