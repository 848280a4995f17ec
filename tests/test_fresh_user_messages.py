"""One-line messages a fresh user met that sent them the wrong way (a missing --golden path told to
re-record, a file given as --inputs called a missing directory, ...): each says what is wrong with
what the user gave, and what is expected. Real CLI runs on a small generated model."""

from __future__ import annotations

import sys

from conftest import recorded_case, run_cli

ACCEPTED = (
    "a folder of <N>.npz files, a folder of test_data_set_<N>/ folders (ONNX model-zoo layout), "
    "or a Polygraphy JSON file or folder"
)


def one_line_error(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_a_missing_golden_path_given_by_flag_is_not_found_not_unrecorded(tmp_path):
    cfg = recorded_case(tmp_path)
    for given in ("two.json", "elsewhere"):
        line = one_line_error(run_cli("check", cfg, "--golden", tmp_path / given))
        assert line == (
            f"accuracy-gate: error: {tmp_path}/{given}: not found (--golden); "
            f"expected golden outputs there: {ACCEPTED}."
        )
    cfg.write_text(cfg.read_text().replace('golden = "golden"', 'golden = "unrecorded"'))
    line = one_line_error(run_cli("check", cfg))  # the configured folder, not yet recorded: record it
    assert (
        line == f"accuracy-gate: error: {tmp_path}/unrecorded: no golden outputs yet; "
        f"record them with 'accuracy-gate record {cfg}'."
    )


def test_missing_or_file_inputs_say_which_layouts_are_read(tmp_path):
    cfg = recorded_case(tmp_path)
    line = one_line_error(run_cli("check", cfg, "--inputs", tmp_path / "nope"))
    assert line == f"accuracy-gate: error: {tmp_path}/nope: not found; expected stored inputs there: {ACCEPTED}."
    line = one_line_error(run_cli("check", cfg, "--inputs", tmp_path / "inputs" / "0.npz"))
    assert line == (
        f"accuracy-gate: error: {tmp_path}/inputs/0.npz: is a file, not a folder; stored inputs are read from "
        f"{ACCEPTED} (.json)."
    )
    line = one_line_error(run_cli("check", cfg, "--inputs", tmp_path / "nope.json"))
    assert (
        line == f"accuracy-gate: error: {tmp_path}/nope.json: file not found; "
        "expected a Polygraphy JSON file of stored inputs."
    )
    proc = run_cli("run", "m.onnx", "--onnxrt", "--load-inputs", "inputs", "--load-outputs", "gone", cwd=tmp_path)
    assert (
        one_line_error(proc)
        == f"accuracy-gate: error: {tmp_path}/gone: not found; expected golden outputs there: {ACCEPTED}."
    )


def test_a_gap_in_the_golden_files_names_the_missing_file_and_those_found(tmp_path):
    cfg = recorded_case(tmp_path, iterations=4)
    golden = tmp_path / "golden"
    golden.joinpath("1.npz").unlink()  # 0, 2, 3 are left
    line = one_line_error(run_cli("check", cfg))
    assert line == (
        f"accuracy-gate: error: {golden}/1.npz is missing (found 0, 2, 3: iterations are numbered from 0 without gaps)."
    )
    for i in (0, 2, 3):
        golden.joinpath(f"{i}.npz").rename(golden / f"{i:03d}.npz")  # zero-padded names: named alike
    assert one_line_error(run_cli("check", cfg)).endswith(f"{golden}/001.npz is missing (found 0, 2, 3: iterations "
                                                          "are numbered from 0 without gaps).")  # fmt: skip


def test_an_unreadable_per_output_value_says_what_is_expected_not_pythons_int_text(tmp_path):
    cfg = recorded_case(tmp_path)
    assert run_cli("check", cfg, "--report", tmp_path / "r.json").returncode == 0
    cases = {
        ("--max-failed-iterations", "y:1.5"): "a count such as 2 or a share of the iterations such as 0.5%",
        ("--atol", "y:abc"): "a number such as 1e-05",
        ("--error-quantile", "q"): "a number from 0 to 1 such as 0.99",
        ("--top-k", "y:1.5"): "an integer such as 5",
        ("--regression-margin", "5x"): "an abs error margin such as 1e-4 or a share such as 5%",
    }
    for (flag, value), expected in cases.items():
        extra = ("--baseline", tmp_path / "r.json", "--fail-on", "regression") if flag == "--regression-margin" else ()
        line = one_line_error(run_cli("check", cfg, flag, value, *extra))
        assert (
            line
            == f"accuracy-gate: error: {flag}: cannot read {value!r}; expected {expected} (NAME:VALUE for one output)."
        )


def test_preview_precision_without_a_converter_names_the_flag_given_and_the_extra(tmp_path, monkeypatch, capsys):
    # onnxconverter-common (and ModelOpt) absent, as in a plain 'pip install accuracy-gate': Python's
    # own import blocker (a None entry in sys.modules) makes find_spec report them missing.
    from gate.cli import main

    cfg = recorded_case(tmp_path)
    monkeypatch.chdir(tmp_path)  # the default report paths are the working directory's
    monkeypatch.setitem(sys.modules, "onnxconverter_common", None)
    monkeypatch.setitem(sys.modules, "modelopt", None)
    assert main(["check", str(cfg), "--preview-precision", "fp16", "--junit", str(tmp_path / "j.xml")]) == 2
    line = capsys.readouterr().err.strip()
    assert line == (
        "accuracy-gate: error: --preview-precision fp16 converts the model first, which needs onnxconverter-common "
        "(pip install 'accuracy-gate[precision]') or ModelOpt (pip install 'nvidia-modelopt[onnx]')."
    )
    assert main(["check", str(cfg), "--preview-precision", "bf16", "--junit", str(tmp_path / "j.xml")]) == 2
    assert capsys.readouterr().err.strip() == (
        "accuracy-gate: error: --preview-precision bf16 needs ModelOpt AutoCast (pip install 'nvidia-modelopt[onnx]'); "
        "onnxconverter-common converts to fp16 only."
    )
