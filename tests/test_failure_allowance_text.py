"""``max_failed_iterations`` reads ASCII counts and shares only, and a share exactly from its decimal
text. Failed before: ``int()`` / ``float()`` also read "1_0" (as 10), a fullwidth "１" and Arabic-Indic
digits, and "33.333333333333333%" of 3 iterations allowed 1 failure (the float share times 3 rounds
to 1.0000000000000002)."""

from __future__ import annotations

import pytest

from gate.compare_funcs import allowed_failures, parse_count
from gate.errors import GateError

from conftest import run_cli


@pytest.mark.parametrize("value", ["1_0", "\uff11", "\u0663\u0664%", "1_0%", "nan%", "inf%", "-1", "1.5", ""])
def test_other_text_is_refused(value):
    with pytest.raises(GateError, match="max_failed_iterations: expected a count >= 0 or a share|a share must be"):
        parse_count(value, "max_failed_iterations")


@pytest.mark.parametrize(
    ("value", "iterations", "allowed"),
    [("33.333333333333333%", 3, 0), ("33.333333333333334%", 3, 1), ("50%", 3, 1), ("0.5%", 1000, 5), (" 2 ", 9, 2)],
)
def test_a_share_is_taken_exactly(value, iterations, allowed):
    assert allowed_failures(value, iterations) == allowed


def test_the_flag_refuses_what_gate_toml_refuses(example):
    cfg = example / "gate.toml"
    proc = run_cli("check", cfg, "--max-failed-iterations", "1_0", "--junit", example / "j.xml", cwd=example)
    assert proc.returncode == 2 and "--max-failed-iterations" in proc.stderr and "1_0" in proc.stderr
