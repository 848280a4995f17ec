"""External data of an ONNX model: every file a tensor of the model names must lie beside it.

ONNX keeps large tensors outside the model file (``TensorProto.data_location == EXTERNAL``, the
file named by its ``external_data`` entry ``location``, relative to the model's folder; onnx's
``external_data_helper``). ONNX Runtime follows those names when it loads the model, so a model from a
pull request could make the gate read any file through ``../`` or a symlink. Dense tensors are found by
onnx's own walk (initializers, node attributes, subgraphs, functions); sparse tensors
(``SparseTensorProto``: ``graph.sparse_initializer``, and the ``sparse_tensor`` attributes, e.g.
``Constant``'s ``sparse_value``) keep their ``values`` and ``indices`` as TensorProtos that may be
external too, and onnx's walk skips them, so they are walked here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx

from gate.errors import GateError
from gate.paths import require_inside


def _graphs(model: onnx.ModelProto) -> Iterator:
    """The main graph, every subgraph (``If``/``Loop``/``Scan`` bodies, at any depth) and every
    function, each once; walked without recursion."""
    stack = [model.graph, *model.functions]
    while stack:
        graph = stack.pop()
        yield graph
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    stack.append(attribute.g)
                stack.extend(attribute.graphs)


def sparse_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """The ``values`` and ``indices`` TensorProtos of every sparse tensor of ``model``: sparse
    initializers and sparse-tensor attributes, in every graph, subgraph and function."""
    for graph in _graphs(model):
        sparse = list(getattr(graph, "sparse_initializer", ()))
        for node in graph.node:
            for attribute in node.attribute:
                if attribute.HasField("sparse_tensor"):
                    sparse.append(attribute.sparse_tensor)
                sparse.extend(attribute.sparse_tensors)
        for tensor in sparse:
            yield tensor.values
            yield tensor.indices


def external_tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every TensorProto of ``model``, dense and sparse, that keeps its data in an external file."""
    from onnx.external_data_helper import _get_all_tensors

    for tensor in (*_get_all_tensors(model), *sparse_tensors(model)):
        if tensor.data_location == onnx.TensorProto.EXTERNAL or len(tensor.external_data):
            yield tensor


def check_external_data(model_path: Path, model: onnx.ModelProto) -> None:
    """Every external-data file that a tensor of ``model`` (loaded from ``model_path``, without its
    external data) names must lie inside the model's folder (symlinks resolved) and exist.

    Raises:
        GateError: a file outside the folder (by ``..``, an absolute path or a symlink), a tensor
            marked external without a location, or a missing file; naming the model and the tensor.
    """
    from onnx.external_data_helper import ExternalDataInfo

    folder = Path(model_path).resolve().parent
    for tensor in external_tensors(model):
        location = ExternalDataInfo(tensor).location
        if not location:
            raise GateError(f"{model_path}: tensor '{tensor.name}' is marked external but names no data file.")
        path = require_inside(folder / location, folder, f"external data of tensor '{tensor.name}'")
        if not path.is_file():
            raise GateError(
                f"{model_path}: external data file '{location}' of tensor '{tensor.name}' not found next to the model."
            )
