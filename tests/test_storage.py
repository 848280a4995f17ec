"""Stored inputs and golden outputs: both layouts read back what was written, lazily, and every
broken layout is one GateError naming the file or folder."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from gate.data import open_tensor_set, write_iteration
from gate.errors import GateError

from conftest import make_small_model, write_gate_toml


def tensors(i):
    return OrderedDict([("a/b:0", np.full((2, 3), i, np.float32)), ("ids", np.arange(4, dtype=np.int64) + i)])


@pytest.mark.parametrize("layout", ["onnx-zoo", "npz"])
def test_round_trip(tmp_path, layout):
    for i in range(3):
        write_iteration(tmp_path, layout, "output", i, tensors(i))
    stored = open_tensor_set(tmp_path, "output")
    assert len(stored) == 3 and stored.layout == layout
    for i, got in enumerate(stored):
        assert list(got) == ["a/b:0", "ids"]
        assert got["a/b:0"].dtype == np.float32 and got["a/b:0"].tolist() == [[i] * 3] * 2
        assert got["ids"].tolist() == [i, i + 1, i + 2, i + 3]


def test_unnamed_tensor_protos_take_the_model_names(tmp_path):
    from onnx import numpy_helper

    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    (folder / "input_0.pb").write_bytes(numpy_helper.from_array(np.ones(2, np.float32)).SerializeToString())
    assert list(open_tensor_set(tmp_path, "input", ["x"])[0]) == ["x"]
    with pytest.raises(GateError, match="has no name and the model has only 0 input"):
        open_tensor_set(tmp_path, "input")[0]


def test_a_gap_in_model_zoo_folders_names_the_missing_folder(tmp_path):
    for i in (0, 2, 3):
        write_iteration(tmp_path, "onnx-zoo", "output", i, tensors(i))
    with pytest.raises(GateError) as err:
        open_tensor_set(tmp_path, "output")
    assert str(err.value) == (
        f"{tmp_path}/test_data_set_1 is missing (found 0, 2, 3: iterations are numbered from 0 without gaps)."
    )


def test_gap_and_duplicate_indices(tmp_path):
    for i in (0, 2):
        write_iteration(tmp_path, "npz", "output", i, tensors(i))
    with pytest.raises(
        GateError, match=r"1.npz is missing \(found 0, 2: iterations are numbered from 0 without gaps\)"
    ):
        open_tensor_set(tmp_path, "output")
    np.savez(tmp_path / "1.npz", x=np.ones(1))
    np.savez(tmp_path / "0002.npz", x=np.ones(1))
    with pytest.raises(GateError, match="iteration 2 is stored twice"):
        open_tensor_set(tmp_path, "output")


def test_corrupt_files_name_the_file(tmp_path):
    write_iteration(tmp_path / "zoo", "onnx-zoo", "output", 0, tensors(0))
    bad = tmp_path / "zoo" / "test_data_set_0" / "output_1.pb"
    bad.write_bytes(bad.read_bytes()[:7])
    with pytest.raises(GateError, match=f"{bad}: not a valid ONNX TensorProto"):
        open_tensor_set(tmp_path / "zoo", "output")[0]
    (tmp_path / "n").mkdir()
    (tmp_path / "n" / "0.npz").write_bytes(b"PK\x03\x04 truncated")
    with pytest.raises(GateError, match="0.npz: not a readable .npz file"):
        open_tensor_set(tmp_path / "n", "output")[0]


def test_folder_with_neither_layout(tmp_path):
    (tmp_path / "readme.txt").write_text("x")
    with pytest.raises(GateError, match="holds neither test_data_set_<N>/ folders"):
        open_tensor_set(tmp_path, "input")
    with pytest.raises(GateError, match="nope: not found; expected stored inputs there: a folder of <N>.npz files"):
        open_tensor_set(tmp_path / "nope", "input")


def test_reading_is_lazy(tmp_path):
    write_iteration(tmp_path, "npz", "output", 0, tensors(0))
    stored = open_tensor_set(tmp_path, "output")
    (tmp_path / "000000.npz").unlink()
    with pytest.raises(GateError, match="000000.npz"):
        stored[0]


def test_read_ahead_keeps_order_errors_and_bounds(tmp_path):
    from gate.data.readahead import ReadAhead

    for i in range(5):
        write_iteration(tmp_path, "npz", "output", i, tensors(i))
    stored = open_tensor_set(tmp_path, "output")
    ahead = ReadAhead(stored, depth=2)
    try:
        assert len(ahead) == 5 and ahead.layout == "npz" and ahead.location(3) == stored.location(3)
        assert ahead[0]["ids"].tolist() == [0, 1, 2, 3]
        assert sorted(ahead._pending) == [1, 2]  # never more than depth iterations held ahead
        (tmp_path / "000002.npz").write_bytes(b"broken")  # iteration 2 may already be read ahead
        assert [ahead[i]["ids"][0] for i in (1, 3, 4)] == [1, 3, 4]  # out of order works too
        (tmp_path / "000000.npz").write_bytes(b"broken")
        with pytest.raises(GateError, match="000000.npz: not a readable .npz file"):
            ahead[0]  # an error surfaces on the access that asks for that iteration
    finally:
        ahead.close()


def test_symlinks_must_stay_inside_the_data_folder(tmp_path):
    """Only symlinked entries need resolving (gate.data.storage._entries); one that stays inside the
    folder is read, one that leads outside is refused, for iterations and model-zoo files alike."""
    data = tmp_path / "data"
    write_iteration(data, "onnx-zoo", "output", 0, tensors(0))
    write_iteration(tmp_path / "outside", "onnx-zoo", "output", 0, tensors(5))
    folder = data / "test_data_set_0"
    (folder / "output_1.pb").rename(folder / "real_1.pb")
    (folder / "output_1.pb").symlink_to(folder / "real_1.pb")
    assert open_tensor_set(data, "output")[0]["ids"].tolist() == [0, 1, 2, 3]
    (folder / "output_1.pb").unlink()
    (folder / "output_1.pb").symlink_to(tmp_path / "outside" / "test_data_set_0" / "output_1.pb")
    with pytest.raises(GateError, match=r"output_1.pb: output file resolves outside .*\(through a symlink\)"):
        open_tensor_set(data, "output")[0]
    assert open_tensor_set(data, "input")[0] == {}  # the inputs' reader checks only input_<K>.pb files
    (data / "test_data_set_1").symlink_to(tmp_path / "outside" / "test_data_set_0", target_is_directory=True)
    with pytest.raises(GateError, match=r"test_data_set_1: a stored iteration resolves outside"):
        open_tensor_set(data, "output")


def test_big_endian_golden_outputs_are_the_models_dtype(tmp_path):
    """``>f4`` golden values are float32 values: the check compares them (bit for bit equal here)
    instead of refusing a dtype mismatch; a real dtype difference (float64) is still refused."""
    from gate.config import load_config
    from gate.job import check, record

    make_small_model(tmp_path / "m.onnx")
    (tmp_path / "inputs").mkdir()
    rng = np.random.default_rng(1)
    for i in range(2):
        np.savez(tmp_path / "inputs" / f"{i}.npz", x=rng.standard_normal((3, 64)).astype(">f4"))
    cfg = load_config(write_gate_toml(tmp_path, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n'))
    record(cfg)
    for path in (tmp_path / "golden").glob("*.npz"):
        with np.load(path) as stored:
            arrays = {name: stored[name].astype(">f4") for name in stored.files}
        np.savez(path, **arrays)
    result = check(cfg)
    assert result.status == "passed", result.message
    assert [row.dtypes for row in result.rows] == [("float32", ">f4"), ("float32", ">f4")]
    assert all(row.abs_value == 0.0 for row in result.rows)
    np.savez(tmp_path / "golden" / "0.npz", **{name: a.astype(np.float64) for name, a in arrays.items()})
    result = check(cfg)
    assert result.status == "error"
    assert "is float64 in the golden outputs but onnxrt produces float32" in result.message


def test_record_refuses_stored_inputs_that_are_not_the_models(tmp_path):
    """record feeds the model as check does: an unknown stored input is one line naming the file."""
    from gate.config import load_config
    from gate.job import record

    make_small_model(tmp_path / "m.onnx")
    (tmp_path / "inputs").mkdir()
    np.savez(tmp_path / "inputs" / "0.npz", x=np.ones((1, 64), np.float32), z=np.ones(1, np.float32))
    cfg = load_config(write_gate_toml(tmp_path, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n'))
    with pytest.raises(
        GateError, match=r"0.npz: stored input 'z' is not an input of the model; its inputs are \['x'\]"
    ):
        record(cfg)
    assert not list((tmp_path / "golden").glob("*.npz"))


def test_record_warns_once_per_output_about_nan_golden_values(tmp_path, caplog):
    from gate.config import load_config
    from gate.job import record

    graph = helper.make_graph(
        [helper.make_node("Sqrt", ["x"], ["y"])],
        "sqrt",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    (tmp_path / "inputs").mkdir()
    for i in range(3):
        np.savez(tmp_path / "inputs" / f"{i}.npz", x=np.array([4.0, -1.0 if i else 1.0], np.float32))
    cfg = load_config(write_gate_toml(tmp_path, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n'))
    with caplog.at_level("WARNING", logger="gate"):
        record(cfg)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        f"golden output 'y' holds NaN at iteration 1 ({tmp_path / 'inputs' / '1.npz'}); every check will report "
        "it out of tolerance."
    ]


@pytest.mark.parametrize("golden_count, hint", [(1, "every input needs its golden outputs"), (3, "remove them")])
def test_golden_and_input_counts_must_match(tmp_path, golden_count, hint):
    from gate.config import load_config
    from gate.job import check

    make_small_model(tmp_path / "m.onnx")
    for i in range(2):
        write_iteration(tmp_path / "inputs", "npz", "input", i, OrderedDict(x=np.ones((1, 64), np.float32)))
    for i in range(golden_count):
        write_iteration(tmp_path / "golden", "npz", "output", i, tensors(i))
    cfg = load_config(write_gate_toml(tmp_path, 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n'))
    with pytest.raises(GateError, match=f"{golden_count} golden iterations for 2 stored inputs in .*; {hint}"):
        check(cfg)
