"""Flags are never abbreviated (argparse's ``allow_abbrev`` is off on every parser): ``--at 0.1`` was
taken as ``--atol 0.1``, and a flag added later could silently change what an abbreviation means.
An abbreviation is a one-line error naming it and the flag it abbreviates (exit 2)."""

from __future__ import annotations

import pytest

from gate.cli import build_parser

from conftest import run_cli

POSITIONAL = {"check": "gate.toml", "record": "gate.toml", "run": "model.onnx", "merge": "p.json"}


def test_an_abbreviated_flag_is_an_error_naming_it(example):
    # before the fix: exit 0, "PASSED ..." with atol 0.1
    proc = run_cli("check", example / "gate.toml", "--at", "0.1", "--junit", example / "j.xml")
    assert proc.returncode == 2
    assert proc.stderr == (
        "accuracy-gate: error: check: unrecognized arguments: --at 0.1; flags are not abbreviated: --at for "
        "--atol? (see 'accuracy-gate check --help').\n"
    )
    assert "PASSED" not in proc.stdout


def test_an_abbreviation_before_the_subcommand_names_it():
    proc = run_cli("--vers")
    assert proc.returncode == 2
    assert proc.stderr == (
        "accuracy-gate: error: unrecognized arguments: --vers; flags are not abbreviated: --vers for --version? "
        "(see 'accuracy-gate --help').\n"
    )


@pytest.mark.parametrize("command", list(POSITIONAL))
def test_no_prefix_of_any_flag_is_accepted(command, capsys):
    parser = build_parser()
    flags = [flag for flag in parser.commands[command]._option_string_actions if flag.startswith("--")]
    assert not any(p.allow_abbrev for p in [parser, *parser.commands.values()])
    for flag in flags:
        prefix = flag[:-1]
        if prefix in flags or prefix == "--":
            continue
        with pytest.raises(SystemExit) as stop:
            parser.parse_args([command, POSITIONAL[command], prefix])
        assert stop.value.code == 2, flag
        err = capsys.readouterr().err
        assert f"unrecognized arguments: {prefix}; flags are not abbreviated: {prefix} for " in err, err
        assert flag in err.split("for ", 1)[1], err
