"""The option table (``gate.options``) is the one source of gate.toml's schema, the CLI's flags and
the action's inputs: these tests check that each is generated from it and that a flag and an input
read the same value alike."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from gate import option_readers, options
from gate.cli import build_parser
from gate.config import _SCHEMA, GateConfig
from gate.errors import GateError

from conftest import ROOT

ACTION = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))


def test_every_gate_toml_setting_is_a_field_of_the_settings_object():
    fields = {field.name for field in dataclasses.fields(GateConfig)}
    missing = [name for name in options.SETTINGS if not name.startswith("trt.") and name not in fields]
    assert missing == [], f"gate.config.GateConfig lacks {missing}"


def test_the_toml_schema_is_the_tables_keys():
    keys = {f"{table}.{key}" if table else key for table, entries in _SCHEMA.items() for key in entries}
    assert keys == {option.toml for option in options.OPTIONS if option.toml}


def test_action_yml_declares_the_tables_inputs_in_order_with_its_defaults():
    assert list(ACTION["inputs"]) == list(options.INPUTS)
    declared = {name: spec["default"] for name, spec in ACTION["inputs"].items() if "default" in spec}
    assert {name: value for name, value in declared.items() if name != "github_token"} == options.DEFAULTS


def _subparser(command):
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices[command]


@pytest.mark.parametrize("command", ["check", "record", "run", "merge"])
def test_each_command_takes_exactly_the_flags_of_its_options(command):
    flags = {flag for action in _subparser(command)._actions for flag in action.option_strings} - {"-h", "--help"}
    flags |= {action.dest for action in _subparser(command)._actions if not action.option_strings}
    expected = {flag for option in options.OPTIONS if command in option.commands for flag in option.flags}
    if command in ("check", "run"):
        expected |= set(options.PROFILE_FLAGS.values())
    negated = [option for option in options.OPTIONS if option.kind == options.BOOL and not option.group]
    expected |= {"--no-" + o.flags[0][2:] for o in negated if command in o.commands}
    assert flags == expected


@pytest.mark.parametrize(
    "name, raw",
    [
        ("atol", "1e-3"),
        ("atol", "y:1e-3 5e-6"),
        ("rtol", "a:b:2,1e-4"),
        ("check_error_stat", "max y:mean"),
        ("runners", "onnxrt trt"),
        ("execution_providers", "CUDAExecutionProvider CPUExecutionProvider"),
        ("graph_optimization_level", "basic"),
        ("check_average", "true"),
        ("validate", "false"),
        ("nan_compare_equal", "true"),
        ("provider_options", "CUDAExecutionProvider:device_id=0,use_tf32=0"),
        ("title", "Nightly"),
    ],
)
def test_a_flag_and_an_input_read_the_same_value(name, raw, monkeypatch):
    option = options.BY_NAME[name]
    flag = option.flags[0]
    if option.kind == options.BOOL:
        argv = [flag if raw == "true" else "--no-" + flag[2:]]
    elif option.kind in (options.PER_OUTPUT_FLOAT, options.PER_OUTPUT_STR, options.LIST):
        argv = [flag, *raw.split()]
    else:
        argv = [flag, raw]
    args = build_parser().parse_args(["check", "gate.toml", *argv])
    from_flag = option_readers.overrides_from_args(args, "check")[name]
    from_input = option_readers.overrides_from_inputs({f"INPUT_{option.input.upper()}": raw})[name]
    assert from_flag == from_input


@pytest.mark.parametrize("raw", ["-1", "inf", "nan", "1e400", "y:-2"])
def test_the_tolerance_rule_is_the_same_for_flags_inputs_and_gate_toml(raw, tmp_path):
    from gate.config import load_config

    args = build_parser().parse_args(["check", "gate.toml", "--atol", raw])
    with pytest.raises(GateError, match=r"^--atol must be a non-negative finite number, got "):
        option_readers.overrides_from_args(args, "check")
    with pytest.raises(GateError, match=r"^Input `atol` must be a non-negative finite number, got "):
        option_readers.overrides_from_inputs({"INPUT_ATOL": raw})
    name, _, value = raw.rpartition(":")
    toml = f'"{name}" = {value}' if name else value
    toml = {"inf": "inf", "nan": "nan"}.get(toml, toml)
    (tmp_path / "gate.toml").write_text(
        f'model = "m.onnx"\ninputs = "i"\n[compare]\natol = {"{ " + toml + " }" if name else toml}\n'
    )
    with pytest.raises(GateError, match=r"'atol' must be a non-negative finite number, got "):
        load_config(tmp_path / "gate.toml")


def test_adding_an_option_is_one_entry(monkeypatch):
    """Like the example of gate.options' docstring (nan_compare_equal was added so), a made-up option:
    one Option gives the gate.toml key, the flag of the commands that compare, and the action input,
    read alike."""
    from gate.option_readers import add_arguments

    new = options.Option(
        "zeros_compare_equal",
        toml="compare.zeros_compare_equal",
        flags=("--zeros-compare-equal",),
        input="zeros_compare_equal",
        kind=options.BOOL,
        commands=options.COMPARE,
        default=False,
        help="a made-up switch",
    )
    monkeypatch.setattr(options, "OPTIONS", (*options.OPTIONS, new))
    monkeypatch.setitem(options.BY_NAME, new.name, new)
    monkeypatch.setattr(options, "SETTINGS", (*options.SETTINGS, new.name))
    monkeypatch.setattr(option_readers, "OPTIONS", options.OPTIONS)
    monkeypatch.setattr(option_readers, "SETTINGS", options.SETTINGS)
    assert options.toml_schema()["compare"]["zeros_compare_equal"] is bool
    import argparse

    for command in ("check", "run"):
        parser = argparse.ArgumentParser()
        add_arguments(parser, command)
        args = parser.parse_args(["--zeros-compare-equal"] + (["gate.toml"] if command == "check" else ["m.onnx"]))
        assert option_readers.overrides_from_args(args, command)["zeros_compare_equal"] is True
    assert option_readers.overrides_from_inputs({"INPUT_ZEROS_COMPARE_EQUAL": "true"})["zeros_compare_equal"] is True
