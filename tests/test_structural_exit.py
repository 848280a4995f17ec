"""A structural difference against the golden outputs (another sequence length, a missing map key, an
empty optional against a value) gets the verdict a tensor shape mismatch gets: could not evaluate
(exit 2, a JUnit error naming both sides), deviation D8 (Polygraphy fails the comparison with a bare
False; the gate cannot judge the accuracy of an output whose golden holds another shape or structure).
The README's D18 row says so."""

from __future__ import annotations

import re

import numpy as np
from junitparser import Error
from onnx import TensorProto
from test_exact_details import identity_gate
from test_structured_outputs import junit_cases, split_case, write_sequence

from conftest import ROOT, run_cli


def test_a_sequence_length_and_a_tensor_shape_mismatch_get_the_same_verdict(tmp_path):
    seq_folder, tensor_folder = tmp_path / "seq", tmp_path / "tensor"
    seq_folder.mkdir()
    tensor_folder.mkdir()
    config = split_case(seq_folder)
    values = np.arange(18, dtype=np.float32).reshape(3, 6) / 7
    write_sequence(seq_folder / "data/test_data_set_0/output_0.pb", "seq", [values[:1], values[1:2], values[2:]])
    sequence = run_cli("check", config, "--junit", seq_folder / "j.xml")
    x = np.zeros((1, 4), np.float32)
    tensor_config = identity_gate(tensor_folder, TensorProto.FLOAT, [x], [np.zeros((1, 3), np.float32)])
    tensor = run_cli("check", tensor_config, "--junit", tensor_folder / "j.xml")
    assert sequence.returncode == tensor.returncode == 2, sequence.stdout + tensor.stdout
    assert "could not compare 'seq' (has 2 items but the reference has 3 items at iteration 0" in sequence.stdout
    assert "could not compare 'y' (has shape (1, 4) but the reference has shape (1, 3) at iteration 0" in tensor.stdout
    for folder, name in ((seq_folder, "seq"), (tensor_folder, "y")):
        assert isinstance(junit_cases(folder / "j.xml")[name].result[0], Error)


def test_the_readme_d18_row_gives_the_structural_verdict():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = re.search(r"^\| D18 \|.*$", readme, re.M).group(0)
    assert "could not evaluate (exit 2), as a tensor shape mismatch (D8)" in row
