"""Fuzzing the readers of every stored-data format and the config parser with mutated files: the only
allowed outcomes are a correct read or the project's own one-line GateError (never another exception,
never a hang)."""

from __future__ import annotations

import io
from collections import OrderedDict

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import numpy_helper

from gate.comparator import serde
from gate.comparator.struct import IterationResult, RunResults
from gate.config import load_config
from gate.data.storage import TensorSet, read_tensor_proto
from gate.errors import GateError

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def mutations(draw, data: bytes):
    """A valid file's bytes, truncated, with bytes flipped, and/or with bytes inserted."""
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["truncate", "flip", "insert", "splice"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if kind == "truncate":
            del data[at:]
        elif kind == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            data[at : at + draw(st.integers(1, 16))] = draw(st.binary(max_size=16))
    return bytes(data)


def only_gate_errors(read):
    try:
        read()
    except GateError as err:
        assert "\n" not in str(err), str(err)


def tensor_bytes():
    arrays = {
        "f": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
        "i": np.arange(5, dtype=np.int64),
        "s": np.array(["ab", "ü"], dtype=object),
    }
    return [numpy_helper.from_array(a, name).SerializeToString() for name, a in arrays.items()]


PB = tensor_bytes()


@FUZZ
@given(st.sampled_from(PB).flatmap(mutations))
def test_tensor_proto_reader(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("pb") / "output_0.pb"
    path.write_bytes(data)
    only_gate_errors(lambda: read_tensor_proto(path))


def test_tensor_proto_with_external_data_is_refused(tmp_path):
    # A TensorProto may point at an external file by name; a golden file must never make us read one.
    (tmp_path / "secret").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    tensor = numpy_helper.from_array(np.zeros(4, np.float32), "y")
    tensor.ClearField("raw_data")
    tensor.data_location = tensor.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", "../secret"
    path = tmp_path / "d" / "output_0.pb"
    path.parent.mkdir()
    path.write_bytes(tensor.SerializeToString())
    try:
        read_tensor_proto(path)
    except GateError as err:
        assert "external data" in str(err) and str(path) in str(err)
    else:
        raise AssertionError("external data must be refused")


def npz_bytes():
    buffers = []
    for save in (np.savez, np.savez_compressed):
        buffer = io.BytesIO()
        save(buffer, y=np.linspace(0, 1, 64, dtype=np.float32), ids=np.arange(3))
        buffers.append(buffer.getvalue())
    return buffers


NPZ = npz_bytes()


@FUZZ
@given(st.sampled_from(NPZ).flatmap(mutations))
def test_npz_reader(tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("npz")
    (folder / "0.npz").write_bytes(data)
    only_gate_errors(lambda: TensorSet(folder, "output")[0])


def json_bytes():
    run = RunResults([("r", [IterationResult(OrderedDict(y=np.arange(6, dtype=np.float32).reshape(2, 3)), 0.1, "r")])])
    return [serde.to_json(run).encode(), serde.to_json([OrderedDict(x=np.ones(3, np.int32))]).encode()]


JSON = json_bytes()


@FUZZ
@given(st.sampled_from(JSON).flatmap(mutations))
def test_polygraphy_json_reader(tmp_path_factory, data):
    from gate.data import open_tensor_set

    path = tmp_path_factory.mktemp("json") / "golden.json"
    path.write_bytes(data)

    def read():
        stored = open_tensor_set(path, "output")
        for index in range(len(stored)):
            stored[index]

    only_gate_errors(read)


CONFIG = b"""model = "m.onnx"
inputs = "data"
golden = "golden"
runners = ["onnxrt"]

[onnxrt]
execution_providers = ["CPUExecutionProvider"]
graph_optimization_level = "all"

[compare]
atol = { "" = 1e-5, "y" = 1e-3 }
rtol = 1e-5
check_error_stat = "max"
check_average = false

[report]
junit = "j.xml"
title = "t"
"""


@FUZZ
@given(mutations(CONFIG))
def test_config_parser(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("cfg") / "gate.toml"
    path.write_bytes(data)
    only_gate_errors(lambda: load_config(path))


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["model", "inputs", "golden", "runners", "compare", "onnxrt", "report", "atol", "x"]),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
            lambda children: (
                st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=6,
    )
)
def test_config_values_of_any_type(tmp_path_factory, table):
    import json

    def toml_value(value):
        if value is None:
            return '""'
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, (int, float)):
            return (
                "nan"
                if value != value
                else ("inf" if value == float("inf") else "-inf" if value == -float("inf") else repr(value))
            )
        if isinstance(value, str):
            return json.dumps(value)
        if isinstance(value, list):
            return "[" + ", ".join(toml_value(v) for v in value) + "]"
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"

    text = "\n".join(f"{key} = {toml_value(value)}" for key, value in table.items())
    path = tmp_path_factory.mktemp("cfg") / "gate.toml"
    path.write_text(text, encoding="utf-8")
    only_gate_errors(lambda: load_config(path))
