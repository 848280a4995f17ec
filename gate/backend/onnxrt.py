"""ONNX Runtime runner (Polygraphy 0.53.6 ``backend/onnxrt/runner.py``; spec section 6.3)."""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

from gate.backend import ort_dtypes
from gate.backend.base import BaseLoader, BaseRunner, TensorMetadata
from gate.backend.ort_install import import_onnxruntime
from gate.backend.providers import (
    captured_messages,
    check_provider_options,
    providers_in_use,
    require_active,
    require_known_options,
)
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


def structured_output(value, ort_type: str):
    """An onnxruntime output as ``gate.structured`` holds it, guided by its type string
    (``seq(map(int64,tensor(float)))``): a tensor as it is; a sequence as a list; a map with ``int``
    or ``str`` keys and each value a 0-d array of the declared dtype (onnxruntime returns Python
    ``float`` / ``int`` there, e.g. ZipMap's float32 probabilities as float64 numbers, which convert
    back exactly); an empty optional as None."""
    if value is None or ort_type.startswith("tensor("):
        return value
    if ort_type.startswith("optional("):
        return structured_output(value, ort_type[len("optional(") : -1])
    if ort_type.startswith("seq("):
        inner = ort_type[len("seq(") : -1]
        return [structured_output(item, inner) for item in value]
    if ort_type.startswith("map(") and isinstance(value, dict):
        key_type, value_type = ort_type[len("map(") : -1].split(",", 1)
        dtype = _ORT_TYPES.get(value_type)
        return {
            (str(key) if key_type == "string" else int(key)): (
                np.asarray(item, dtype=dtype) if dtype is not None else structured_output(item, value_type)
            )
            for key, item in value.items()
        }
    return value


def match_providers(requested, available, known=()) -> list:
    """Each requested execution provider (a name, or a ``(name, options)`` tuple) matched to an
    available one as Polygraphy does: the exact name, else the first available name that contains it
    or is contained in it, case-insensitively (``"cpu"`` -> ``CPUExecutionProvider``). An exact name
    in ``known`` (every provider ONNX Runtime knows, e.g. CUDA on a CPU-only build) is kept as it is:
    the session is made and ``require_active`` then says why it is not active, in ONNX Runtime's words.

    Raises:
        GateError: a provider matches none (Polygraphy's wording, listing the available ones)."""
    matched = []
    for prov in requested:
        name = prov[0] if isinstance(prov, tuple) else prov
        found = (
            name
            if name in available or name in known
            else next((a for a in available if name.lower() in a.lower() or a.lower() in name.lower()), None)
        )
        if found is None:
            raise GateError(
                "Could not find specified ONNX-Runtime execution provider. "
                f"Note: Requested provider was: {prov}, but available providers are: {available}"
            )
        matched.append((found, prov[1]) if isinstance(prov, tuple) else found)
    return matched


class SessionFromOnnx(BaseLoader):
    """A loader that creates an ``onnxruntime.InferenceSession`` when called (at runner activation);
    Polygraphy's ``SessionFromOnnx``.

    Args:
        model_bytes: the model as a path (str or ``os.PathLike``), serialized bytes, or a callable
            returning either (e.g. Polygraphy's ``BytesFromPath``), called when the session is made.
        providers: execution providers in priority order, each a name or ``(name, options)``; a name
            may be a case-insensitive part of an available one (``"cpu"``). Default
            ``["CPUExecutionProvider"]``. ``execution_providers`` is the same argument by our name.
        graph_optimization_level: ``disable``, ``basic``, ``extended`` or ``all`` (default, onnxruntime's
            default), or an ``onnxruntime.GraphOptimizationLevel``.
        intra_op_num_threads: 0 lets onnxruntime choose.
        provider_options: ``{provider: {option: value}}`` (``gate.backend.providers``), e.g.
            ``{"CUDAExecutionProvider": {"device_id": 0, "use_tf32": 0}}``.

    Raises:
        GateError: (when called) the file is missing or not a model onnxruntime can load; an
            execution provider that matches none available; a requested provider that is not
            active in the session (``gate.backend.providers.require_active``: names it and ONNX
            Runtime's reason); a provider option that ONNX Runtime does not report for its provider
            (``gate.backend.providers.require_known_options``: it would be ignored silently).
    """

    def __init__(
        self,
        model_bytes,
        providers=None,
        graph_optimization_level=None,
        intra_op_num_threads=0,
        *,
        execution_providers=None,
        provider_options=None,
    ):
        self._model_bytes_or_path = model_bytes
        self.path = Path(model_bytes) if isinstance(model_bytes, (str, os.PathLike)) else None
        chosen = providers if providers is not None else execution_providers
        self.execution_providers = list(chosen or ["CPUExecutionProvider"])
        self.providers = self.execution_providers
        names = [p[0] if isinstance(p, tuple) else p for p in self.execution_providers]
        self.provider_options = check_provider_options(provider_options or {}, names, str(self.path or "model"))
        level = "all" if graph_optimization_level is None else graph_optimization_level
        if isinstance(level, str) and level not in GRAPH_OPTIMIZATION_LEVELS:
            raise GateError(f"graph_optimization_level '{level}' is not one of {', '.join(GRAPH_OPTIMIZATION_LEVELS)}.")
        self.graph_optimization_level = level
        self.intra_op_num_threads = intra_op_num_threads

    def _model(self):
        model = self._model_bytes_or_path() if callable(self._model_bytes_or_path) else self._model_bytes_or_path
        if isinstance(model, (str, os.PathLike)):
            path = Path(model)
            if not path.is_file():
                raise GateError(f"{path}: model file not found.")
            return str(path), str(path)
        if isinstance(model, (bytes, bytearray, memoryview)):
            return bytes(model), "<model bytes>"
        raise GateError(f"SessionFromOnnx: expected a model path or bytes, got a {type(model).__name__}.")

    def call_impl(self):
        ort = import_onnxruntime()  # exactly one ONNX Runtime build, else one GateError line

        # Errors reach the user as one GateError line; onnxruntime's own multi-line, coloured error
        # logs would repeat them.
        ort.set_default_logger_severity(4)
        providers = match_providers(self.execution_providers, ort.get_available_providers(), ort.get_all_providers())
        model, where = self._model()
        options = ort.SessionOptions()
        level = self.graph_optimization_level
        if isinstance(level, str):
            level = {
                "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
                "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
                "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
            }[level]
        options.graph_optimization_level = level
        options.intra_op_num_threads = self.intra_op_num_threads
        options.log_severity_level = 4  # errors reach the user as one GateError line instead
        lines: list = []
        # Warnings while the session is made say why a provider fell back to the CPU: caught, not shown.
        ort.set_default_logger_severity(2)
        requested = self._with_options(providers)
        try:
            with captured_messages(lines):
                session = ort.InferenceSession(model, sess_options=options, providers=requested)
        except Exception as err:  # onnxruntime raises its own Fail / InvalidProtobuf / NoSuchFile types
            message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise GateError(f"{where}: onnxruntime cannot load the model ({message}).") from err
        finally:
            ort.set_default_logger_severity(4)
        require_active(session, [p[0] if isinstance(p, tuple) else p for p in providers], lines, where)
        require_known_options(session, dict(p for p in requested if isinstance(p, tuple)), where)
        return session

    def _with_options(self, providers) -> list:
        """``providers`` (matched to ``self.execution_providers``, one for one) as ``(name, options)``
        tuples where ``provider_options`` (under the name as given, e.g. ``cpu``, or as matched) or
        the tuple gives any."""
        out = []
        for given, prov in zip(self.execution_providers, providers):
            name, options = (prov[0], dict(prov[1])) if isinstance(prov, tuple) else (prov, {})
            given_name = given[0] if isinstance(given, tuple) else given
            options.update(self.provider_options.get(given_name, {}))
            options.update(self.provider_options.get(name, {}))
            out.append((name, options) if options else name)
        return out


def session_from_onnx(model_bytes, providers=None, graph_optimization_level=None):
    """Polygraphy's functional form: ``SessionFromOnnx(model_bytes, providers, ...)()``."""
    return SessionFromOnnx(model_bytes, providers, graph_optimization_level)()


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
        self.providers_in_use: dict = {}  # provider -> options in effect (set at activation; kept after)

    def activate_impl(self):
        self.sess = self._sess_arg() if callable(self._sess_arg) else self._sess_arg
        self.providers_in_use = providers_in_use(self.sess, getattr(self._sess_arg, "provider_options", {}))
        self._output_names = [o.name for o in self.sess.get_outputs()]
        self._output_types = [o.type for o in self.sess.get_outputs()]
        self._metadata = TensorMetadata()
        for node in self.sess.get_inputs():
            # A sequence, map or optional input has no tensor shape to check (onnxruntime checks it).
            shape = node.shape if node.type.startswith("tensor(") else None
            self._metadata.add(node.name, _ORT_TYPES.get(node.type), shape)

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
        """The session's providers (after deactivation: those it used)."""
        return self.sess.get_providers() if self.sess is not None else list(self.providers_in_use)

    def infer_impl(self, feed_dict):
        start = time.perf_counter()
        try:
            outputs = self.sess.run(None, dict(feed_dict))
            outputs = [ort_dtypes.as_declared(out, kind) for out, kind in zip(outputs, self._output_types)]
        except Exception as err:
            if ort_dtypes.refused_by_run(err):  # bfloat16, float8, int4 ...: read as ml_dtypes arrays
                try:
                    outputs = ort_dtypes.run_with_ml_dtypes(
                        self.sess, feed_dict, self._output_names, self._output_types, self.name
                    )
                except GateError:
                    raise
                except Exception as retry_err:
                    err = retry_err
                else:
                    self.inference_time = time.perf_counter() - start
                    return OrderedDict(zip(self._output_names, outputs))
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise GateError(f"{self.name}: onnxruntime failed during inference ({first}).") from err
        self.inference_time = time.perf_counter() - start
        return OrderedDict(
            (name, structured_output(value, ort_type))
            for name, value, ort_type in zip(self._output_names, outputs, self._output_types)
        )
