"""Non-tensor outputs end to end: sequences (ragged too), maps, sequences of maps and optionals,
through record, check and run, stored as ONNX's backend tests store them (SequenceProto, MapProto,
OptionalProto) and in npz without pickles. Real models run in ONNX Runtime; reports are read back
with junitparser."""

from __future__ import annotations

import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import onnx
import pytest
from junitparser import Error, Failure, JUnitXml
from onnx import TensorProto, helper, numpy_helper

from conftest import run_cli, write_gate_toml


def one_line_error(proc) -> str:
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def save_model(path: Path, nodes, inputs, outputs, opset=18) -> Path:
    graph = helper.make_graph(nodes, path.stem, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def split_case(folder: Path, split=(1, 2)) -> Path:
    """SplitToSequence of a [3, 6] tensor into a ragged sequence (rows 1 + 2), as ONNX's
    test_split_to_sequence_2; one stored input set (model-zoo layout); returns gate.toml."""
    save_model(
        folder / "split.onnx",
        [helper.make_node("SplitToSequence", ["data", "split"], ["seq"], axis=0)],
        [
            helper.make_tensor_value_info("data", TensorProto.FLOAT, [3, 6]),
            helper.make_tensor_value_info("split", TensorProto.INT64, ["n"]),
        ],
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)],
    )
    data = folder / "data" / "test_data_set_0"
    data.mkdir(parents=True)
    values = np.arange(18, dtype=np.float32).reshape(3, 6) / 7
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(values, "data").SerializeToString())
    (data / "input_1.pb").write_bytes(numpy_helper.from_array(np.array(split, np.int64), "split").SerializeToString())
    return write_gate_toml(folder, 'model = "split.onnx"\ninputs = "data"\ngolden = "data"\n')


def write_sequence(path: Path, name: str, items) -> None:
    path.write_bytes(numpy_helper.from_list(items, name).SerializeToString())


def junit_cases(path: Path) -> dict:
    suite = next(iter(JUnitXml.fromfile(str(path))))
    return {case.name.partition(".onnx/")[2]: case for case in suite}  # "<model>/<output>"


def test_ragged_sequence_golden_as_onnx_stores_it_passes_item_by_item(tmp_path):
    # On main the SequenceProto was parsed as a TensorProto: "not a valid ONNX TensorProto (...segments)".
    cfg = split_case(tmp_path)
    values = np.arange(18, dtype=np.float32).reshape(3, 6) / 7
    write_sequence(tmp_path / "data/test_data_set_0/output_0.pb", "seq", [values[:1], values[1:]])
    proc = run_cli("check", cfg, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "seq[0]" in proc.stdout and "seq[1]" in proc.stdout
    assert "PASSED: 2 of 2 outputs" in proc.stdout
    assert set(junit_cases(tmp_path / "j.xml")) >= {"seq[0]", "seq[1]"}


def test_a_changed_item_fails_naming_the_item_and_the_element(tmp_path):
    cfg = split_case(tmp_path)
    values = np.arange(18, dtype=np.float32).reshape(3, 6) / 7
    changed = values[1:].copy()
    changed[1, 4] += 0.5
    write_sequence(tmp_path / "data/test_data_set_0/output_0.pb", "seq", [values[:1], changed])
    proc = run_cli("check", cfg, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 of 2 outputs out of tolerance: 'seq[1]'" in proc.stdout
    cases = junit_cases(tmp_path / "j.xml")
    assert isinstance(cases["seq[1]"].result[0], Failure)
    assert "element [1, 4]" in cases["seq[1]"].result[0].message
    assert not cases["seq[0]"].result


def test_a_length_difference_names_both_lengths_and_replaces_a_green_junit(tmp_path):
    # On main a ragged live sequence made check print a traceback and exit 1, leaving the older
    # passing JUnit file in place.
    cfg = split_case(tmp_path)
    values = np.arange(18, dtype=np.float32).reshape(3, 6) / 7
    golden = tmp_path / "data/test_data_set_0/output_0.pb"
    write_sequence(golden, "seq", [values[:1], values[1:]])
    junit = tmp_path / "j.xml"
    assert run_cli("check", cfg, "--junit", junit).returncode == 0
    write_sequence(golden, "seq", [values[:1], values[1:2], values[2:]])
    proc = run_cli("check", cfg, "--junit", junit)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2
    assert "could not compare 'seq' (has 2 items but the reference has 3 items at iteration 0" in proc.stdout
    cases = junit_cases(junit)
    assert set(cases) == {"seq"}  # items are not paired up when the lengths differ
    assert isinstance(cases["seq"].result[0], Error)
    assert "has 2 items but the reference has 3 items" in cases["seq"].result[0].message


def test_record_writes_a_sequence_proto_that_onnx_reads_and_check_passes(tmp_path):
    # On main record crashed on the ragged list (numpy cannot stack it) with a traceback.
    cfg = split_case(tmp_path)
    proc = run_cli("record", cfg)
    assert proc.returncode == 0, proc.stderr
    proto = onnx.SequenceProto()
    proto.ParseFromString((tmp_path / "data/test_data_set_0/output_0.pb").read_bytes())
    items = numpy_helper.to_list(proto)
    assert proto.name == "seq" and [item.shape for item in items] == [(1, 6), (2, 6)]
    assert run_cli("check", cfg, "--junit", tmp_path / "j.xml").returncode == 0


def test_record_npz_then_check_a_ragged_sequence(tmp_path):
    cfg = split_case(tmp_path)
    cfg.write_text('model = "split.onnx"\ninputs = "data"\ngolden = "golden"\n')
    proc = run_cli("record", cfg, "--layout", "npz")
    assert proc.returncode == 0, proc.stderr
    with np.load(tmp_path / "golden" / "000000.npz", allow_pickle=False) as archive:
        assert sorted(archive.files) == ["accuracy-gate:structure", "seq[0]", "seq[1]"]
        assert archive["seq[1]"].shape == (2, 6)
    assert run_cli("check", cfg, "--junit", tmp_path / "j.xml").returncode == 0


def test_a_golden_file_of_another_proto_kind_is_one_line_naming_both(tmp_path):
    # On main: "cannot reshape array of size 26 into shape (111,112,...)" (the name's ASCII codes).
    cfg = split_case(tmp_path)
    (tmp_path / "data/test_data_set_0/output_0.pb").write_bytes(
        numpy_helper.from_array(np.zeros((3, 6), np.float32), "seq").SerializeToString()
    )
    proc = run_cli("check", cfg, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "output_0.pb: holds an ONNX TensorProto, but the model's output 'seq' is seq(tensor(float))" in line


def optional_case(folder: Path, present: bool) -> Path:
    """Identity over an optional(seq(tensor(float))) input, stored as an OptionalProto (ONNX's
    test_identity_opt); present: the optional holds a sequence of two items, else it is empty."""
    elem = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    opt = helper.make_optional_type_proto(elem)
    save_model(
        folder / "opt.onnx",
        [helper.make_node("Identity", ["opt_in"], ["opt_out"])],
        [helper.make_value_info("opt_in", opt)],
        [helper.make_value_info("opt_out", opt)],
    )
    data = folder / "data" / "test_data_set_0"
    data.mkdir(parents=True)
    value = [np.array([1.5, 2.5], np.float32), np.array([3.0], np.float32)] if present else None
    (data / "input_0.pb").write_bytes(numpy_helper.from_optional(value, "opt_in").SerializeToString())
    return write_gate_toml(folder, 'model = "opt.onnx"\ninputs = "data"\ngolden = "data"\n')


@pytest.mark.parametrize("present", [True, False])
def test_optional_values_record_and_check_as_optional_protos(tmp_path, present):
    cfg = optional_case(tmp_path, present)
    assert run_cli("record", cfg).returncode == 0
    proto = onnx.OptionalProto()
    proto.ParseFromString((tmp_path / "data/test_data_set_0/output_0.pb").read_bytes())
    recorded = numpy_helper.to_optional(proto)
    if present:
        assert [list(item) for item in recorded] == [[1.5, 2.5], [3.0]]
    else:
        assert recorded is None and proto.elem_type == onnx.OptionalProto.UNDEFINED
    proc = run_cli("check", cfg, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = {"opt_out[0]", "opt_out[1]"} if present else {"opt_out"}
    assert set(junit_cases(tmp_path / "j.xml")) == rows


def test_an_empty_optional_against_a_value_is_a_structural_failure(tmp_path):
    cfg = optional_case(tmp_path, present=False)
    (tmp_path / "data/test_data_set_0/output_0.pb").write_bytes(
        numpy_helper.from_optional([np.ones(2, np.float32)], "opt_out").SerializeToString()
    )
    proc = run_cli("check", cfg, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 2
    assert "'opt_out' (is an empty optional but the reference is a sequence of 1 item" in proc.stdout


def logreg_iris_case(folder: Path, layout: str) -> Path:
    """onnxruntime's shipped sklearn logistic regression (outputs label int64 and probabilities,
    seq(map(int64, tensor(float))) from ZipMap), two stored iterations of 3 rows."""
    from onnxruntime.datasets import get_example

    model = folder / "logreg_iris.onnx"
    model.write_bytes(Path(get_example("logreg_iris.onnx")).read_bytes())
    rng = np.random.default_rng(3)
    for index in range(2):
        x = (rng.standard_normal((3, 2)) * 2).astype(np.float32)
        if layout == "npz":
            (folder / "inputs").mkdir(exist_ok=True)
            np.savez(folder / "inputs" / f"{index}.npz", float_input=x)
        else:
            data = folder / "inputs" / f"test_data_set_{index}"
            data.mkdir(parents=True)
            (data / "input_0.pb").write_bytes(numpy_helper.from_array(x, "float_input").SerializeToString())
    golden = "golden" if layout == "npz" else "inputs"
    return write_gate_toml(folder, f'model = "{model.name}"\ninputs = "inputs"\ngolden = "{golden}"\n')


@pytest.mark.parametrize("layout", ["onnx-zoo", "npz"])
def test_sequence_of_maps_records_and_checks_key_by_key(tmp_path, layout):
    # On main record crashed on ZipMap's list of dicts.
    cfg = logreg_iris_case(tmp_path, layout)
    proc = run_cli("record", cfg)
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("check", cfg, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = junit_cases(tmp_path / "j.xml")
    assert {"label", "probabilities[0]{0}", "probabilities[2]{2}"} <= set(cases)
    assert len(cases) == 1 + 3 * 3


def recorded_probabilities(tmp_path, iteration: int, change) -> object:
    """logreg_iris recorded in the model-zoo layout, its golden probabilities (a SequenceProto of
    MapProtos) of ``iteration`` edited by ``change(proto)``; returns check's completed process."""
    cfg = logreg_iris_case(tmp_path, "onnx-zoo")
    assert run_cli("record", cfg).returncode == 0
    golden = tmp_path / f"inputs/test_data_set_{iteration}/output_1.pb"
    proto = onnx.SequenceProto()
    proto.ParseFromString(golden.read_bytes())
    assert proto.elem_type == onnx.SequenceProto.MAP and proto.map_values[0].key_type == TensorProto.INT64
    change(proto)
    golden.write_bytes(proto.SerializeToString())
    return run_cli("check", cfg, "--junit", tmp_path / "j.xml")


def test_a_changed_class_probability_fails_naming_row_and_class(tmp_path):
    def nudge(proto):
        values = proto.map_values[2].values.tensor_values
        changed = numpy_helper.to_array(values[1]) + np.float32(0.01)
        values[1].CopyFrom(numpy_helper.from_array(changed.astype(np.float32)))

    proc = recorded_probabilities(tmp_path, 1, nudge)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 of 10 outputs out of tolerance: 'probabilities[2]{1}'" in proc.stdout
    case = junit_cases(tmp_path / "j.xml")["probabilities[2]{1}"]
    assert isinstance(case.result[0], Failure) and "at iteration 1" in case.result[0].message


def test_a_missing_class_key_is_a_structural_failure_naming_the_key(tmp_path):
    def rename(proto):
        proto.map_values[0].keys[2] = 7  # the reference has class 7 where the model has class 2

    proc = recorded_probabilities(tmp_path, 0, rename)
    assert proc.returncode == 2
    assert "'probabilities[0]' (lacks key {7} that the reference has and has key {2} that the reference lacks" in (
        proc.stdout
    )


def string_model(path: Path) -> Path:
    """y = Cast(x, to=STRING): float32 [n] in, tensor(string) out (an object array in onnxruntime)."""
    return save_model(
        path,
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.STRING)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, ["n"])],
    )


def test_record_npz_of_string_outputs_writes_no_pickles_and_check_reads_it(tmp_path):
    # On main record --layout npz wrote a pickled object array, which check refused to read.
    string_model(tmp_path / "s.onnx")
    (tmp_path / "inputs").mkdir()
    np.savez(tmp_path / "inputs" / "0.npz", x=np.array([1.5, -2.0, 3.25], np.float32))
    cfg = write_gate_toml(tmp_path, 'model = "s.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    proc = run_cli("record", cfg, "--layout", "npz")
    assert proc.returncode == 0, proc.stderr
    with np.load(tmp_path / "golden" / "0.npz", allow_pickle=False) as archive:  # the input's file name
        assert archive["y"].dtype.kind == "U" and list(archive["y"]) == ["1.5", "-2", "3.25"]
    proc = run_cli("check", cfg, "--junit", tmp_path / "j.xml")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_run_onnxrt_against_onnxrt_on_string_outputs(tmp_path):
    # On main: "... 000000.npz: not a readable .npz file (... Object arrays cannot be loaded ...)",
    # naming run's deleted scratch file.
    model = string_model(tmp_path / "s.onnx")
    proc = run_cli("run", model, "--onnxrt", "--onnxrt", "--input-shapes", "x:[4]", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "accuracy-gate-run-" not in proc.stdout + proc.stderr


def test_npz_refuses_at_record_what_it_cannot_store_in_one_line(tmp_path):
    from gate.data import write_iteration
    from gate.errors import GateError

    with pytest.raises(GateError, match="'y' holds a string ending in NUL.*--layout onnx-zoo"):
        write_iteration(tmp_path, "npz", "output", 0, OrderedDict(y=np.array(["a\0"], dtype=object)))
    with pytest.raises(GateError, match="'y' holds bytes objects"):
        write_iteration(tmp_path, "npz", "output", 0, OrderedDict(y=np.array([b"a"], dtype=object)))
    with pytest.raises(GateError, match="'s\\[0\\]' would clash"):
        write_iteration(tmp_path, "npz", "output", 0, OrderedDict([("s", [np.ones(1)]), ("s[0]", np.ones(1))]))
    import ml_dtypes

    for dtype in (ml_dtypes.float8_e5m2, ml_dtypes.bfloat16):  # e5m2's numpy kind is "f", not "V"
        with pytest.raises(GateError, match=f"'s\\[0\\]' is {np.dtype(dtype)}, which the npz layout cannot store"):
            write_iteration(tmp_path, "npz", "output", 0, OrderedDict(s=[np.ones(2, dtype)]))
    assert not list(tmp_path.iterdir())  # nothing half-written


def test_npz_key_scheme_round_trips_every_kind(tmp_path):
    from gate.data import open_tensor_set, write_iteration

    values = OrderedDict(
        [
            ("plain", np.arange(3, dtype=np.int64)),
            ("ragged", [np.zeros((1, 2), np.float32), np.ones((3, 2), np.float32)]),
            ("probs", [{"setosa": np.array(0.25, np.float32), "3": np.array(0.75, np.float32)}, {}]),
            ("ids", {7: np.array(["a", "b"], dtype=object)}),
            ("none", None),
            ("empty", []),
        ]
    )
    write_iteration(tmp_path, "npz", "output", 0, values)
    with zipfile.ZipFile(tmp_path / "000000.npz") as archive:
        names = [n[: -len(".npy")] for n in archive.namelist()]
    assert names == [
        "plain",
        "ragged[0]",
        "ragged[1]",
        "probs[0]{setosa}",
        'probs[0]{"3"}',
        "ids{7}",
        "accuracy-gate:structure",
    ]
    back = open_tensor_set(tmp_path, "output")[0]
    assert list(back) == list(values)
    assert back["ragged"][1].shape == (3, 2) and back["none"] is None and back["empty"] == []
    assert back["probs"][1] == {} and list(back["probs"][0]) == ["setosa", "3"]
    assert back["ids"][7].dtype == object and list(back["ids"][7]) == ["a", "b"]


def test_maps_with_string_keys_round_trip_through_map_protos(tmp_path):
    from gate.data.onnx_values import write_value_file
    from gate.data.storage import read_tensor_proto

    seq_map = helper.make_sequence_type_proto(
        helper.make_map_type_proto(TensorProto.STRING, helper.make_tensor_type_proto(TensorProto.FLOAT, []))
    )
    value = [{"setosa": np.array(0.5, np.float32), "virginica": np.array(0.5, np.float32)}, {}]
    write_value_file(tmp_path / "o.pb", "probs", value, seq_map)
    name, back = read_tensor_proto(tmp_path / "o.pb", seq_map)
    assert name == "probs" and list(back[0]) == ["setosa", "virginica"] and back[1] == {}
    proto = onnx.SequenceProto()
    proto.ParseFromString((tmp_path / "o.pb").read_bytes())
    assert numpy_helper.to_dict(proto.map_values[0]) == {b"setosa": 0.5, b"virginica": 0.5}  # onnx's own reader


def test_structural_comparison_in_words():
    from gate.structured import key_name, leaf_pairs

    assert [key_name("p", k) for k in ("setosa", "3", "", "a}b", 3)] == [
        "p{setosa}",
        'p{"3"}',
        'p{""}',
        'p{"a}b"}',
        "p{3}",
    ]
    pairs = list(leaf_pairs({"a": np.ones(1), "b": np.ones(1)}, {"a": np.ones(1), "c": np.ones(1)}))
    assert pairs[0].difference == "lacks key {c} that the reference has and has key {b} that the reference lacks"
    assert [p.suffix for p in pairs[1:]] == ["{a}"]
    assert (
        next(leaf_pairs(np.ones(1), [np.ones(1)])).difference == "is a tensor but the reference is a sequence of 1 item"
    )
    assert next(leaf_pairs([], [])).agreement == "an empty sequence on both sides"


def test_a_ragged_live_sequence_against_a_tensor_golden_is_one_verdict_and_a_fresh_junit(tmp_path):
    # On main: compare_arrays stacked the ragged list, numpy raised, check printed a traceback and
    # exited 1, and the JUnit file of the earlier passing run stayed in place.
    cfg = split_case(tmp_path, split=(1, 1, 1))  # three [1, 6] items: record and check pass
    assert run_cli("record", cfg).returncode == 0
    junit = tmp_path / "j.xml"
    assert run_cli("check", cfg, "--junit", junit).returncode == 0
    # The input now splits 1 + 2 rows; the golden holds a plain tensor.
    (tmp_path / "data/test_data_set_0/input_1.pb").write_bytes(
        numpy_helper.from_array(np.array([1, 2], np.int64), "split").SerializeToString()
    )
    (tmp_path / "golden").mkdir()
    np.savez(tmp_path / "golden" / "0.npz", seq=np.zeros((3, 6), np.float32))
    cfg.write_text('model = "split.onnx"\ninputs = "data"\ngolden = "golden"\n')
    proc = run_cli("check", cfg, "--junit", junit)
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 2
    assert "'seq' (is a sequence of 2 items but the reference is a tensor" in proc.stdout
    assert isinstance(junit_cases(junit)["seq"].result[0], Error)


def test_d15_polygraphy_raises_on_sequences_and_maps_where_we_compare_leaf_by_leaf():
    from polygraphy.comparator import compare as pg_compare
    from polygraphy.comparator import struct as pg_struct
    from polygraphy.exception import PolygraphyException

    from gate.comparator import IterationResult, SimpleCompareFunc

    live = {"seq": [np.zeros((1, 6), np.float32), np.zeros((2, 6), np.float32)], "p": [{0: np.array(0.5, np.float32)}]}
    golden = {"seq": [np.zeros((1, 6), np.float32), np.ones((2, 6), np.float32)], "p": [{0: np.array(0.5, np.float32)}]}
    for name in live:
        with pytest.raises(PolygraphyException, match="dtype is unsupported for objects of type: list"):
            pg_compare.SimpleCompareFunc()(
                pg_struct.IterationResult({name: live[name]}, runner_name="a"),
                pg_struct.IterationResult({name: golden[name]}, runner_name="b"),
            )
    results = SimpleCompareFunc(check_error_stat={"": "elemwise", "p": "max"})(
        IterationResult(live, runner_name="a"), IterationResult(golden, runner_name="b")
    )
    assert list(results) == ["seq[0]", "seq[1]", "p[0]{0}"]
    assert bool(results["seq[0]"]) and not results["seq[1]"] and results["seq[1]"].max_absdiff == 1.0
    assert results["p[0]{0}"] and results["p[0]{0}"].thresholds.check_error_stat == "max"  # the output's settings
    shorter = SimpleCompareFunc()(
        IterationResult({"seq": live["seq"][:1]}, runner_name="a"), IterationResult(golden, runner_name="b")
    )
    assert shorter["seq"].error == "has 1 item but the reference has 2 items" and not shorter["seq"]
    assert "p" in shorter and shorter["p"].error == "is missing from 'a'"


def test_validate_finds_nan_inside_a_ragged_sequence_and_names_the_item():
    # On main validate stacked the list with numpy (ValueError on a ragged one: a traceback).
    from gate.comparator import Comparator, IterationResult, RunResults
    from gate.errors import GateError

    outputs = {"seq": [np.zeros((1, 2), np.float32), np.array([[0, np.nan]] * 2, np.float32)], "none": None}
    run = RunResults([("onnxrt", [IterationResult(outputs, runner_name="onnxrt")])])
    with pytest.raises(GateError, match=r"output 'seq\[1\]' contains NaN"):
        list(Comparator.validate(iter([run]), check_nan=True))


def test_golden_digests_tell_structures_apart():
    from gate.shards import iteration_sha256

    empty = np.zeros(0, np.float32)
    digests = {
        iteration_sha256({"o": value})
        for value in (empty, [], None, [empty], {}, {0: empty}, {"0": empty}, [[empty]], [empty, empty])
    }
    assert len(digests) == 9
    assert iteration_sha256({"o": np.ones(2, np.float32)}) == iteration_sha256({"o": np.ones(2, np.float32)})


def test_record_npz_refuses_a_string_it_cannot_keep_in_one_line_and_writes_nothing(tmp_path):
    save_model(
        tmp_path / "id.onnx",
        [helper.make_node("Identity", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.STRING, [2])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [2])],
    )
    data = tmp_path / "inputs" / "test_data_set_0"
    data.mkdir(parents=True)
    text = np.array(["ok", "nul\0"], dtype=object)
    (data / "input_0.pb").write_bytes(numpy_helper.from_array(text, "x").SerializeToString())
    cfg = write_gate_toml(tmp_path, 'model = "id.onnx"\ninputs = "inputs"\ngolden = "golden"\n')
    proc = run_cli("record", cfg, "--layout", "npz")
    assert proc.returncode == 2
    line = one_line_error(proc)
    assert "iteration 0: output 'y' holds a string ending in NUL" in line and "--layout onnx-zoo" in line
    assert not list((tmp_path / "golden").glob("*"))
    cfg.write_text('model = "id.onnx"\ninputs = "inputs"\ngolden = "inputs"\n')
    assert run_cli("record", cfg).returncode == 0  # the model-zoo layout keeps it
    # numpy_helper.to_array reads "nul\0" back as "nul": compared exactly, that failed a model that had not changed.
    assert run_cli("check", cfg, "--junit", tmp_path / "j.xml").returncode == 0
    from gate.data.storage import read_tensor_proto

    assert list(read_tensor_proto(tmp_path / "inputs/test_data_set_0/output_0.pb")[1]) == ["ok", "nul\0"]


def test_shards_of_a_sequence_of_maps_merge_to_the_unsharded_verdict(tmp_path):
    cfg = logreg_iris_case(tmp_path, "onnx-zoo")
    assert run_cli("record", cfg).returncode == 0
    golden = tmp_path / "inputs/test_data_set_1/output_1.pb"
    proto = onnx.SequenceProto()
    proto.ParseFromString(golden.read_bytes())
    del proto.map_values[2]  # iteration 1's reference has 2 rows where the model gives 3
    golden.write_bytes(proto.SerializeToString())
    full = run_cli("check", cfg, "--junit", "full.xml", cwd=tmp_path)
    for shard in (1, 2):
        proc = run_cli("check", cfg, "--shard", f"{shard}/2", "--write-partial", f"p{shard}.json", cwd=tmp_path)
        assert proc.returncode == (2 if shard == 2 else 0) and (tmp_path / f"p{shard}.json").is_file()
    merged = run_cli("merge", "p1.json", "p2.json", "--junit", "m.xml", cwd=tmp_path)
    assert full.returncode == merged.returncode == 2, merged.stdout + merged.stderr
    assert "'probabilities' (has 3 items but the reference has 2 items at iteration 1" in merged.stdout
    assert set(junit_cases(tmp_path / "m.xml")) == set(junit_cases(tmp_path / "full.xml"))
