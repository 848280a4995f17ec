"""Stored inputs and golden outputs, read lazily one iteration at a time.

Three layouts (``open_tensor_set`` detects which):

- ONNX model zoo (``onnx/backend/test`` layout): ``<dir>/test_data_set_<N>/input_<K>.pb`` and
  ``output_<K>.pb``, each a serialized ``onnx.TensorProto`` (or the ``SequenceProto``,
  ``MapProto`` or ``OptionalProto`` the model declares there: ``gate.data.onnx_values``). Inputs and
  golden outputs share the directory. A proto with an empty ``name`` takes the model's K-th input
  (output) name.
- A per-iteration directory of ``.npz`` files: ``<dir>/<N>.npz`` (``N`` a decimal index, zero-padding
  allowed), each holding one array per tensor, keyed by tensor name (sequences, maps and optionals
  flattened as ``gate.data.onnx_values`` describes; no pickles).
- Polygraphy's JSON (``gate.data.polygraphy_json``): what ``polygraphy run --save-inputs`` and
  ``--save-outputs`` write, a ``.json`` file or a directory of ``*.json`` files (read only). A single
  file is parsed whole when opened; a directory is read one file per iteration.

Iterations are numbered 0..n-1 without gaps; a gap or a duplicate index is an error naming the
directory.
"""

from gate.data.storage import TensorSet, detect_layout, open_tensor_set, write_iteration

__all__ = ["TensorSet", "detect_layout", "open_tensor_set", "write_iteration"]
