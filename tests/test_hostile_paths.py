"""Paths a hostile pull request controls (issue 14): external data of sparse tensors, a golden folder
that is a symlink leading outside, and symlinks at report paths."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from gate.data.external import check_external_data, external_tensors
from gate.errors import GateError
from gate.job import model_io_names


def _external(tensor: TensorProto, location: str) -> None:
    tensor.ClearField("raw_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location


def _model_with_sparse(path, location: str, where: str = "initializer"):
    """A real ONNX model y = Identity(x) that also holds a sparse tensor whose values live in the
    external file ``location`` (a sparse initializer, or a Constant's ``sparse_value`` in the main
    graph or in an If branch)."""
    values = numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "sparse_values")
    indices = numpy_helper.from_array(np.array([0, 3], np.int64), "sparse_indices")
    sparse = helper.make_sparse_tensor(values, indices, [4])
    _external(sparse.values, location)
    nodes = [helper.make_node("Identity", ["x"], ["y"])]
    graph_sparse = []
    if where == "initializer":
        graph_sparse = [sparse]
    elif where == "constant":
        nodes.append(helper.make_node("Constant", [], ["c"], sparse_value=sparse))
    else:  # an If branch
        branch = helper.make_graph(
            [helper.make_node("Constant", [], ["c"], sparse_value=sparse)],
            "branch",
            [],
            [helper.make_tensor_value_info("c", TensorProto.FLOAT, [4])],
        )
        nodes.append(helper.make_node("If", ["cond"], ["z"], then_branch=branch, else_branch=branch))
        graph_sparse = []
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        initializer=[numpy_helper.from_array(np.array(True), "cond")] if where == "if" else [],
        sparse_initializer=graph_sparse,
    )
    model = helper.make_model(graph)
    path.write_bytes(model.SerializeToString())
    return model


@pytest.mark.parametrize("where", ["initializer", "constant", "if"])
def test_external_data_of_a_sparse_tensor_outside_the_model_folder_is_refused(tmp_path, where):
    (tmp_path / "secret.bin").write_bytes(np.array([5.0, 6.0], np.float32).tobytes())
    folder = tmp_path / "repo"
    folder.mkdir()
    _model_with_sparse(folder / "model.onnx", "../secret.bin", where)
    with pytest.raises(GateError, match=r"external data of tensor 'sparse_values' resolves outside"):
        model_io_names(folder / "model.onnx")  # on main: accepted


def test_external_data_of_a_sparse_tensor_through_a_symlink_is_refused(tmp_path):
    (tmp_path / "secret.bin").write_bytes(b"\0" * 8)
    folder = tmp_path / "repo"
    folder.mkdir()
    os.symlink(tmp_path / "secret.bin", folder / "weights.bin")
    _model_with_sparse(folder / "model.onnx", "weights.bin")
    with pytest.raises(GateError, match=r"resolves outside .* \(through a symlink\)"):
        model_io_names(folder / "model.onnx")


def test_external_data_of_a_sparse_tensor_beside_the_model_is_accepted(tmp_path):
    (tmp_path / "weights.bin").write_bytes(np.array([5.0, 6.0], np.float32).tobytes())
    model = _model_with_sparse(tmp_path / "model.onnx", "weights.bin")
    assert [t.name for t in external_tensors(model)] == ["sparse_values"]
    check_external_data(tmp_path / "model.onnx", model)
    assert model_io_names(tmp_path / "model.onnx") == (["x"], ["y"])
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(GateError, match=r"external data file 'weights.bin' of tensor 'sparse_values' not found"):
        check_external_data(tmp_path / "model.onnx", onnx.load(str(tmp_path / "model.onnx"), load_external_data=False))


# --- record never deletes or writes through a symlink in the golden folder ------------------------


@pytest.fixture
def record_setup(example, tmp_path):
    """The example with ``golden = "gold"``: gold/test_data_set_0 is a symlink to a folder outside
    holding a file of the user's (``output_0.pb``, not a TensorProto of ours)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "output_0.pb").write_bytes(b"precious")
    config = example / "gate.toml"
    config.write_text(config.read_text().replace('golden = "data"', 'golden = "gold"'))
    (example / "gold").mkdir()
    os.symlink(outside, example / "gold" / "test_data_set_0")
    return config, outside


@pytest.mark.parametrize("force", [False, True], ids=["plain", "force"])
def test_record_never_deletes_or_writes_through_a_symlink_in_the_golden_folder(record_setup, force):
    from conftest import run_cli

    config, outside = record_setup
    proc = run_cli("record", config, *(["--force"] if force else []))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "the golden folder holds a symbolic link" in proc.stderr
    assert sorted(os.listdir(outside)) == ["output_0.pb"]  # on main: replaced (force) or joined by outputs
    assert (outside / "output_0.pb").read_bytes() == b"precious"
    assert sorted(os.listdir(config.parent / "gold")) == ["test_data_set_0"]


def test_refuse_symlinks_passes_real_folders_and_a_missing_one(tmp_path):
    from gate.paths import refuse_symlinks

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "f").write_text("x")
    refuse_symlinks(tmp_path / "a", "the golden folder")
    refuse_symlinks(tmp_path / "missing", "the golden folder")
    os.symlink("nowhere", tmp_path / "a" / "b" / "dangling")
    with pytest.raises(GateError, match=r"dangling: the golden folder holds a symbolic link \(to nowhere\)"):
        refuse_symlinks(tmp_path / "a", "the golden folder")
