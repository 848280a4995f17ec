"""The catalogue of user mistakes (issue 8): each one ends in exit code 2 and ONE line on stderr that
names the file, tensor or setting and what was expected, with no traceback.

Each entry builds a small real case in a temp folder (a generated ONNX model run by onnxruntime,
stored inputs, recorded golden outputs), breaks one thing, and runs ``accuracy-gate check`` (or
``record``) as a user would.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from conftest import gpu_visible, make_small_model, run_cli, write_gate_toml

BASE = 'model = "m.onnx"\ninputs = "inputs"\ngolden = "golden"\n'


def case(tmp: Path, iterations=3, config=BASE) -> Path:
    """A valid npz case: m.onnx, inputs/<i>.npz, golden/ recorded. Returns gate.toml."""
    make_small_model(tmp / "m.onnx")
    (tmp / "inputs").mkdir()
    for i in range(iterations):
        np.savez(tmp / "inputs" / f"{i}.npz", x=np.full((1, 64), 0.25 * i, np.float32))
    cfg = write_gate_toml(tmp, BASE)
    assert run_cli("record", cfg).returncode == 0
    return write_gate_toml(tmp, config)


def zoo_case(tmp: Path, iterations=3) -> Path:
    """The same in the ONNX model-zoo layout: data/test_data_set_<i>/input_0.pb + output_<k>.pb."""
    make_small_model(tmp / "m.onnx")
    for i in range(iterations):
        folder = tmp / "data" / f"test_data_set_{i}"
        folder.mkdir(parents=True)
        array = np.full((1, 64), 0.25 * i, np.float32)
        (folder / "input_0.pb").write_bytes(numpy_helper.from_array(array, "x").SerializeToString())
    cfg = write_gate_toml(tmp, 'model = "m.onnx"\ninputs = "data"\n')
    assert run_cli("record", cfg).returncode == 0
    return cfg


def config_case(text):
    def setup(tmp):
        make_small_model(tmp / "m.onnx")
        return write_gate_toml(tmp, text), ()

    return setup


def flag_case(*args, config=BASE):
    """A bad flag value: caught before anything runs, like gate.toml's values."""

    def setup(tmp):
        make_small_model(tmp / "m.onnx")
        return write_gate_toml(tmp, config), args

    return setup


def with_case(change, layout="npz"):
    def setup(tmp):
        cfg = case(tmp) if layout == "npz" else zoo_case(tmp)
        extra = change(tmp)
        return cfg, tuple(extra) if isinstance(extra, list) else ()

    return setup


def truncate(path):
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def external_data_missing(tmp):
    model = onnx.load(str(tmp / "m.onnx"))
    onnx.save_model(model, str(tmp / "m.onnx"), save_as_external_data=True, location="weights.bin", size_threshold=0)
    (tmp / "weights.bin").unlink()


def symlink_outside(tmp):
    np.savez(tmp.parent / "elsewhere.npz", x=np.ones((1, 64), np.float32))
    (tmp / "inputs" / "1.npz").unlink()
    (tmp / "inputs" / "1.npz").symlink_to(tmp.parent / "elsewhere.npz")


def duplicate_index(tmp):
    shutil.copy(tmp / "inputs" / "1.npz", tmp / "inputs" / "001.npz")


def golden_extra_output(tmp):
    golden = dict(np.load(tmp / "golden" / "0.npz"))
    np.savez(tmp / "golden" / "0.npz", **golden, logits=np.zeros(3, np.float32))


def golden_wrong_shape(tmp):
    golden = dict(np.load(tmp / "golden" / "1.npz"))
    golden["y"] = golden["y"][:, :32]
    np.savez(tmp / "golden" / "1.npz", **golden)


def stored_input_unknown_name(tmp):
    np.savez(tmp / "inputs" / "0.npz", x=np.ones((1, 64), np.float32), mask=np.ones(3, np.int64))


def stored_input_missing(tmp):
    np.savez(tmp / "inputs" / "0.npz", mask=np.ones(3, np.int64))


def stored_input_bad_shape(tmp):
    np.savez(tmp / "inputs" / "2.npz", x=np.ones((1, 32), np.float32))


def stored_input_lossy_dtype(tmp):
    np.savez(tmp / "inputs" / "2.npz", x=np.full((1, 64), 0.1, np.float64))


def latin1_config(tmp):
    (tmp / "gate.toml").write_bytes(b'# caf\xe9\nmodel = "m.onnx"\n')
    return tmp / "gate.toml", ()


def bom_latin1_config(tmp):
    (tmp / "gate.toml").write_bytes(b'\xef\xbb\xbf# caf\xe9\nmodel = "m.onnx"\n')
    return tmp / "gate.toml", ()


def report_case(flag, where):
    """A report flag naming ``where(tmp)``: refused before anything runs, naming the flag."""

    def setup(tmp):
        make_small_model(tmp / "m.onnx")
        return write_gate_toml(tmp, BASE), (flag, str(where(tmp)))

    return setup


def corrupt_json(tmp):
    make_small_model(tmp / "m.onnx")
    (tmp / "golden.json").write_text('{"lst": [', encoding="utf-8")
    return write_gate_toml(tmp, 'model = "m.onnx"\ninputs = "golden.json"\ngolden = "golden.json"\n'), ()


CATALOGUE = {
    # config
    "config: unknown key": (
        config_case(BASE + "[compare]\natoll = 1\n"),
        ["gate.toml", "unknown setting 'compare.atoll'; did you mean 'atol'?"],
    ),
    "config: wrong type": (config_case('model = "m.onnx"\ninputs = 3\n'), ["gate.toml", "'inputs' must be a string"]),
    "config: model not set": (config_case('inputs = "inputs"\n'), ["gate.toml", "'model' is not set"]),
    "config: not TOML": (config_case("model = ["), ["gate.toml", "not valid TOML"]),
    "config: not UTF-8": (
        latin1_config,
        ["gate.toml", "not UTF-8 text (byte 5)"],
    ),
    "config: unknown top-level key": (
        config_case(BASE + "modle = 1\n"),
        ["gate.toml", "unknown setting 'modle'; did you mean 'model'?"],
    ),
    "config: section given as a value": (
        config_case(BASE + "compare = 1\n"),
        ["gate.toml", "'compare' must be a table"],
    ),
    "config: setting outside its section": (
        config_case(BASE + "atol = 1\n"),
        ["gate.toml", "'atol' belongs in the [compare] table"],
    ),
    "config: tolerance of the wrong type": (
        config_case(BASE + '[compare]\natol = "x"\n'),
        ["gate.toml", "'compare.atol' must be a number or table"],
    ),
    "config: no execution provider": (
        config_case(BASE + "[onnxrt]\nexecution_providers = []\n"),
        ["gate.toml", "'execution_providers' is empty"],
    ),
    "config: execution provider of the wrong type": (
        config_case(BASE + "[onnxrt]\nexecution_providers = [1]\n"),
        ["gate.toml", "must be a list of non-empty strings"],
    ),
    "config: check_average without a default stat": (
        config_case(BASE + '[compare]\ncheck_average = true\ncheck_error_stat = { y = "max" }\n'),
        ["gate.toml", "check_average needs a default check_error_stat"],
    ),
    "config: negative tolerance": (
        config_case(BASE + "[compare]\natol = -1\n"),
        ["gate.toml", "'atol' must be a non-negative finite number, got -1"],
    ),
    "config: NaN tolerance": (
        config_case(BASE + "[compare]\nrtol = nan\n"),
        ["gate.toml", "'rtol' must be a non-negative finite number, got nan"],
    ),
    "config: infinite tolerance": (
        config_case(BASE + "[compare]\natol = inf\n"),
        ["gate.toml", "'atol' must be a non-negative finite number, got inf."],
    ),
    "config: tolerance too large for a float": (
        config_case(BASE + "[compare]\nrtol = 1e400\n"),
        ["gate.toml", "'rtol' must be a non-negative finite number, got inf."],
    ),
    "config: infinite tolerance for one output": (
        config_case(BASE + '[compare]\natol = { "" = 1e-5, "y" = inf }\n'),
        ["gate.toml", "'atol' must be a non-negative finite number, got inf (output 'y')."],
    ),
    "config: not UTF-8 after a byte-order mark": (
        bom_latin1_config,
        ["gate.toml", "not UTF-8 text (byte 8); save the config as UTF-8."],
    ),
    "config: check_average with elemwise": (
        config_case(BASE + "[compare]\ncheck_average = true\n"),
        ["gate.toml", "check_average needs check_error_stat max, mean, median or quantile, not elemwise"],
    ),
    "config: per-output tolerance for an output the model lacks": (
        with_case(lambda tmp: ["--atol", "outptu:1"]),
        ["--atol outptu:1.0: m.onnx has no output 'outptu'; its outputs are ['y', 's']"],
    ),
    # flags: named instead of gate.toml
    "flag: negative tolerance": (
        flag_case("--atol", "-1"),
        ["--atol must be a non-negative finite number, got -1.0."],
    ),
    "flag: NaN tolerance for one output": (
        flag_case("--rtol", "1e-3", "y:nan"),
        ["--rtol must be a non-negative finite number, got nan (output 'y')."],
    ),
    "flag: infinite tolerance": (flag_case("--atol", "inf"), ["--atol must be a non-negative finite number, got inf."]),
    "flag: tolerance too large for a float": (
        flag_case("--rtol", "s:1e400"),
        ["--rtol must be a non-negative finite number, got inf (output 's')."],
    ),
    # report paths: inside the confinement root, never over what the gate reads
    "report path: --junit outside the config's folder": (
        report_case("--junit", lambda tmp: tmp.parent / "escape.xml"),
        ["escape.xml: --junit resolves outside", "; paths must stay inside it."],
    ),
    "report path: --markdown outside the config's folder": (
        report_case("--markdown", lambda tmp: "/tmp/accuracy-gate-catalogue.md"),
        ["/tmp/accuracy-gate-catalogue.md: --markdown resolves outside", "; paths must stay inside it."],
    ),
    "report path: --report over the config": (
        report_case("--report", lambda tmp: tmp / "gate.toml"),
        ["gate.toml: --report would overwrite the config file; reports must stay out of the files and folders"],
    ),
    "report path: --junit over the model": (
        report_case("--junit", lambda tmp: tmp / "m.onnx"),
        ["m.onnx: --junit would overwrite the model; reports must stay out of the files and folders the gate reads."],
    ),
    "report path: --write-partial inside the inputs": (
        report_case("--write-partial", lambda tmp: tmp / "inputs" / "p.json"),
        ["inputs/p.json: --write-partial lies inside the stored inputs (", "/inputs); reports must stay out of"],
    ),
    "flag: unknown statistic": (
        flag_case("--check-error-stat", "max", "s:maximum"),
        ["--check-error-stat: 'maximum' is not one of max, mean, median, elemwise, quantile (output 's')."],
    ),
    "flag: check_average with elemwise": (
        flag_case("--check-average"),
        ["--check-average: check_average needs check_error_stat max, mean, median or quantile, not elemwise"],
    ),
    "flag: elemwise where gate.toml averages": (
        flag_case(
            "--check-error-stat",
            "y:elemwise",
            config=BASE + '[compare]\ncheck_average = true\ncheck_error_stat = "max"\n',
        ),
        ["--check-error-stat: check_average needs check_error_stat max, mean, median or quantile", "(for y)."],
    ),
    "flag: unknown runner": (
        flag_case("--runners", "onnxrt", "tensorrt"),
        ["--runners: unknown runner 'tensorrt'; available: onnxrt, trt."],
    ),
    # model
    "model: missing file": (config_case('model = "nope.onnx"\ninputs = "inputs"\n'), ["nope.onnx", "not found"]),
    "model: not ONNX": (
        with_case(lambda tmp: (tmp / "m.onnx").write_bytes(b"\x08\xff\xff garbage")),
        ["m.onnx", "not an ONNX model"],
    ),
    "model: truncated": (with_case(lambda tmp: truncate(tmp / "m.onnx")), ["m.onnx"]),
    "model: external-data file missing": (
        with_case(external_data_missing),
        ["m.onnx", "external data file 'weights.bin' of tensor 'W' not found next to the model"],
    ),
    "model: stored input the model lacks": (
        with_case(stored_input_unknown_name),
        ["inputs/0.npz", "stored input 'mask' is not an input of the model; its inputs are ['x']"],
    ),
    "model: missing input": (
        with_case(stored_input_missing),
        ["inputs/0.npz", "the stored inputs lack 'x'; the model's inputs are ['x'], the file holds ['mask']"],
    ),
    "model: dtype that cannot be cast losslessly": (
        with_case(stored_input_lossy_dtype),
        ["inputs/2.npz", "'x'", "float64", "float32", "0.1"],
    ),
    "model: shape outside the model's static dims": (
        with_case(stored_input_bad_shape),
        ["inputs/2.npz", "'x'", "(1, 32)"],
    ),
    # stored inputs and golden data
    "data: truncated .pb": (
        with_case(lambda tmp: truncate(tmp / "data" / "test_data_set_1" / "output_0.pb"), layout="zoo"),
        ["test_data_set_1/output_0.pb", "not a valid ONNX TensorProto"],
    ),
    "data: truncated .npz": (
        with_case(lambda tmp: truncate(tmp / "golden" / "2.npz")),
        ["golden/2.npz", "not a readable .npz file"],
    ),
    "data: corrupt Polygraphy JSON": (corrupt_json, ["golden.json", "not a JSON file"]),
    "data: golden shape disagrees with the model": (
        with_case(golden_wrong_shape),
        ["'y'", "(1, 64)", "(1, 32)", "at iteration 1", "golden/1.npz"],
    ),
    "data: golden output the model does not have": (
        with_case(golden_extra_output),
        ["'logits'", "is missing from 'onnxrt'", "golden/0.npz"],
    ),
    "data: missing iteration in the middle": (
        with_case(lambda tmp: (tmp / "inputs" / "1.npz").unlink()),
        ["inputs/1.npz is missing (found 0, 2: iterations are numbered from 0 without gaps)"],
    ),
    "data: duplicate indices": (with_case(duplicate_index), ["inputs", "iteration 1 is stored twice"]),
    "data: symlink leading outside the data folder": (
        with_case(symlink_outside),
        ["inputs/1.npz", "resolves outside"],
    ),
    "data: golden missing one iteration": (
        with_case(lambda tmp: (tmp / "golden" / "2.npz").unlink()),
        ["golden", "2 golden iterations for 3 stored inputs"],
    ),
}


@pytest.mark.parametrize("entry", list(CATALOGUE), ids=list(CATALOGUE))
def test_user_mistake_is_one_clear_line(tmp_path, entry):
    setup, expected = CATALOGUE[entry]
    cfg, extra = setup(tmp_path)
    proc = run_cli("check", cfg, "--junit", tmp_path / "junit.xml", *extra)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("accuracy-gate: error: ")
    for text in expected:
        assert text in lines[0], (text, lines[0])
    if entry.startswith("flag: "):  # the flag's value is wrong, not the file
        assert "gate.toml" not in lines[0], lines[0]


@pytest.mark.skipif(gpu_visible(), reason="this machine has a GPU: the no-GPU probe cannot fire")
def test_tensorrt_without_a_gpu_is_one_line_about_gpus(tmp_path):
    cfg = case(tmp_path, config=BASE + 'runners = ["trt"]\n[trt]\nfp16 = true\ninput_shapes = { x = [1, 64] }\n')
    proc = run_cli("check", cfg)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "No NVIDIA GPU is visible" in line and "--gpus" in line


def test_tensorrt_settings_are_checked_before_the_gpu_probe(tmp_path):
    # (fp16 with tensorrt_rtx converts the model now: int8 is the setting that flavour cannot honour)
    cfg = case(tmp_path, config=BASE + 'runners = ["trt"]\n[trt]\nflavour = "tensorrt_rtx"\nint8 = true\n')
    proc = run_cli("check", cfg)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert str(cfg) in line and "[trt]" in line and "int8" in line, line
