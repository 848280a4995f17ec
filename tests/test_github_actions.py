"""GitHub Actions runner conventions: inputs, workflow commands, GITHUB_OUTPUT and the job summary."""

from __future__ import annotations

import pytest

from gate.errors import GateError
from gate.github import actions
from gate.github.actions import (
    STEP_SUMMARY_LIMIT,
    annotate_capped,
    append_step_summary,
    escape_data,
    escape_property,
    parse_bool,
    parse_choice,
    parse_positive_int,
    read_input,
    set_outputs,
    step_summary_room,
    stop_commands,
    workflow_command,
    workspace_path,
)

from fake_github import parse_github_output

# --- inputs -------------------------------------------------------------------------------------


def test_read_input_hyphenated_name_as_the_runner_exports_it():
    env = {"INPUT_GOLDEN-DIR": "goldens/"}
    assert read_input("golden-dir", env) == "goldens/"
    assert read_input("golden_dir", env) == "goldens/"


def test_read_input_underscored_and_spaces():
    assert read_input("golden-dir", {"INPUT_GOLDEN_DIR": "a"}) == "a"
    assert read_input("model path", {"INPUT_MODEL_PATH": "m.onnx"}) == "m.onnx"


def test_read_input_falls_back_to_bare_variable_and_empty_is_none():
    # A declared input left empty is unset: an unrelated job-level RTOL must not fill it in.
    assert read_input("rtol", {"INPUT_RTOL": "", "RTOL": "1e-3"}) is None
    assert read_input("rtol", {"RTOL": "1e-3"}) == "1e-3"
    assert read_input("golden-dir", {"GOLDEN_DIR": "g"}) == "g"
    assert read_input("rtol", {"INPUT_RTOL": ""}) is None
    assert read_input("rtol", {"INPUT_RTOL": "  \n"}) is None
    assert read_input("rtol", {}) is None


def test_read_input_prefers_the_input_and_strips():
    assert read_input("rtol", {"INPUT_RTOL": " 0.5\n", "RTOL": "9"}) == "0.5"


@pytest.mark.parametrize(("text", "expected"), [("true", True), ("False", False), (" TRUE ", True)])
def test_parse_bool(text, expected):
    assert parse_bool("comment", text) is expected


@pytest.mark.parametrize("text", ["yes", "1", "", "on"])
def test_parse_bool_rejects_others_naming_the_input(text):
    with pytest.raises(GateError, match=r"^Input `fail_on_error` must be `true` or `false`, got .*\.$"):
        parse_bool("fail_on_error", text)


@pytest.mark.parametrize(("text", "expected"), [("7", 7), (" 12 ", 12)])
def test_parse_positive_int(text, expected):
    assert parse_positive_int("pr_number", text) == expected


@pytest.mark.parametrize("text", ["0", "-3", "7.5", "#7", "\u0663", ""])
def test_parse_positive_int_rejects(text):
    with pytest.raises(GateError, match=r"^Input `pr_number` must be a positive integer, got .*\.$"):
        parse_positive_int("pr_number", text)


def test_parse_choice():
    assert parse_choice("comment_mode", " On-Change ", ("always", "on-change")) == "on-change"
    with pytest.raises(GateError, match=r"^Input `comment_mode` must be one of `always`, `on-change`, got 'never'\.$"):
        parse_choice("comment_mode", "never", ("always", "on-change"))


# --- paths inside the workspace -------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path):
    workspace = tmp_path / "workspace"
    (workspace / "models").mkdir(parents=True)
    (workspace / "models" / "m.onnx").write_bytes(b"x")
    (tmp_path / "secret").mkdir()
    (workspace / "link-out").symlink_to(tmp_path / "secret", target_is_directory=True)
    (workspace / "link-in").symlink_to(workspace / "models", target_is_directory=True)
    return workspace, {"GITHUB_WORKSPACE": str(workspace)}


def test_workspace_path_resolves_relative_paths_against_the_workspace(tree, tmp_path, monkeypatch):
    workspace, env = tree
    monkeypatch.chdir(tmp_path)  # not the workspace
    assert workspace_path("model", "models/m.onnx", env) == workspace / "models" / "m.onnx"
    assert workspace_path("model", "models/../models/m.onnx", env) == workspace / "models" / "m.onnx"
    assert workspace_path("junit_path", "new/dir/j.xml", env) == workspace / "new" / "dir" / "j.xml"
    assert workspace_path("model", str(workspace / "models" / "m.onnx"), env) == workspace / "models" / "m.onnx"
    assert workspace_path("model", "link-in/m.onnx", env) == workspace / "link-in" / "m.onnx"  # stays inside
    assert workspace_path("inputs", ".", env) == workspace


@pytest.mark.parametrize(
    "value", ["../secret/x", "models/../../secret/x", "link-out/x", "link-out/new/y.xml", "/etc/passwd"]
)
def test_workspace_path_refuses_escapes(tree, value):
    workspace, env = tree
    with pytest.raises(GateError, match=r"^Input `model` names .*, outside the workspace .*; expected a path inside"):
        workspace_path("model", value, env)


def test_workspace_path_refuses_a_sibling_with_the_same_prefix(tree, tmp_path):
    workspace, env = tree
    (tmp_path / "workspace-evil").mkdir()
    with pytest.raises(GateError, match="outside the workspace"):
        workspace_path("config", str(tmp_path / "workspace-evil" / "gate.toml"), env)


def test_workspace_path_without_a_workspace_is_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert workspace_path("model", "../m.onnx", {}) == tmp_path.parent / "m.onnx"


# --- workflow commands --------------------------------------------------------------------------


def test_escaping():
    assert escape_data("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext: a,b"
    assert escape_property("100% done\r\nnext: a,b") == "100%25 done%0D%0Anext%3A a%2Cb"
    assert escape_data("%0A") == "%250A"  # '%' first, so an escape sequence is not undone


def test_workflow_command_with_and_without_properties():
    assert workflow_command("debug", "x") == "::debug::x"
    line = workflow_command("error", "max |diff| 0.5\nat output:0", file="a,b.onnx", line=3, title="T: 1")
    assert line == "::error file=a%2Cb.onnx,line=3,title=T%3A 1::max |diff| 0.5%0Aat output:0"
    assert workflow_command("warning", "m", file=None, title=None) == "::warning::m"


def test_annotation_helpers_print(capsys):
    actions.error("bad\nthing", title="Accuracy", file="model.onnx")
    actions.warning("w")
    actions.notice("n", title="t")
    actions.add_mask("s3cr3t%")
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "::error file=model.onnx,title=Accuracy::bad%0Athing",
        "::warning::w",
        "::notice title=t::n",
        "::add-mask::s3cr3t%25",
    ]


def test_group_prints_endgroup_even_on_error(capsys):
    with pytest.raises(RuntimeError), actions.group("Run model"):
        print("inside")
        raise RuntimeError
    assert capsys.readouterr().out.splitlines() == ["::group::Run model", "inside", "::endgroup::"]


def test_annotate_capped_prints_all_when_within_the_limit(capsys):
    assert annotate_capped("error", [("t: 1", "a"), ("t2", "b\nc")], 3, "{count} more") == 2
    assert capsys.readouterr().out.splitlines() == ["::error title=t%3A 1::a", "::error title=t2::b%0Ac"]


def test_annotate_capped_summarizes_the_rest_in_one_line(capsys):
    items = [(f"o{i}", f"m{i}") for i in range(15)]
    assert annotate_capped("warning", items, 10, "{count} more outputs") == 10
    out = capsys.readouterr().out.splitlines()
    assert out[:9] == [f"::warning title=o{i}::m{i}" for i in range(9)]
    assert out[9] == "::warning title=accuracy-gate::6 more outputs"


def test_stop_commands_wraps_with_a_random_token(capsys):
    with stop_commands():
        print("::error::not a command")
    with stop_commands():
        pass
    first, inside, end, second, second_end = capsys.readouterr().out.splitlines()
    token = first.removeprefix("::stop-commands::")
    assert len(token) >= 32 and inside == "::error::not a command" and end == f"::{token}::"
    assert second != first and second_end != end


# --- GITHUB_OUTPUT --------------------------------------------------------------------------------


def test_set_outputs_unset_is_noop():
    assert set_outputs({"a": "1"}, {}) is False


def test_set_outputs_single_and_multiline_round_trip(tmp_path):
    path = tmp_path / "output"
    path.write_text("earlier=1\n", encoding="utf-8")
    report = "## Accuracy\n\n| output | max abs |\n|---|---|\n| logits | 1e-4 |"
    values = {"passed": True, "failed_outputs": 0, "report": report, "empty": None, "eq": "a=b"}

    assert set_outputs(values, {"GITHUB_OUTPUT": str(path)}) is True

    text = path.read_text(encoding="utf-8")
    assert "report<<ghadelimiter_" in text
    assert parse_github_output(text) == {
        "earlier": "1",
        "passed": "true",
        "failed_outputs": "0",
        "report": report,
        "empty": "",
        "eq": "a=b",
    }


def test_set_outputs_random_delimiters(tmp_path):
    path = tmp_path / "output"
    set_outputs({"a": "x\ny", "b": "p\nq"}, {"GITHUB_OUTPUT": str(path)})
    delimiters = [line.split("<<")[1] for line in path.read_text().splitlines() if "<<" in line]
    assert len(set(delimiters)) == 2


def test_set_outputs_rejects_bad_names(tmp_path):
    with pytest.raises(GateError, match="Output name"):
        set_outputs({"a=b": "1"}, {"GITHUB_OUTPUT": str(tmp_path / "o")})


# --- GITHUB_STEP_SUMMARY ------------------------------------------------------------------------


def test_step_summary_unset_is_noop():
    assert append_step_summary("# hi", {}) is False


def test_step_summary_appends(tmp_path):
    path = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(path)}
    assert append_step_summary("# First", env) is True
    assert append_step_summary("second\n", env) is True
    assert path.read_text(encoding="utf-8") == "# First\nsecond\n"


def test_step_summary_is_cut_to_one_mib(tmp_path):
    path = tmp_path / "summary.md"
    path.write_bytes(b"x" * 1000 + b"\n")
    env = {"GITHUB_STEP_SUMMARY": str(path)}
    row = "| tensor \u00b5 | 0.001 |\n"  # a 2-byte UTF-8 character, so bytes != characters
    markdown = row * 60000  # ~1.3 MB

    assert append_step_summary(markdown, env) is True

    data = path.read_bytes()
    assert len(data) <= STEP_SUMMARY_LIMIT
    assert len(data) > STEP_SUMMARY_LIMIT - 200  # nearly all the room is used
    lines = data.decode("utf-8").splitlines()
    assert "truncated" in lines[-1] and "1 MiB" in lines[-1]
    assert set(lines[1:-2]) == {row.rstrip("\n")}  # only whole rows kept


def test_step_summary_exactly_at_limit_is_not_cut(tmp_path):
    path = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(path)}
    text = "a" * (STEP_SUMMARY_LIMIT - 1) + "\n"
    assert append_step_summary(text, env) is True
    assert path.read_text() == text


def test_step_summary_room(tmp_path):
    path = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(path)}
    assert step_summary_room({}) == 0
    assert step_summary_room(env) == STEP_SUMMARY_LIMIT  # not created yet
    path.write_bytes(b"x" * 1000)
    assert step_summary_room(env) == STEP_SUMMARY_LIMIT - 1000
    path.write_bytes(b"x" * (STEP_SUMMARY_LIMIT + 5))
    assert step_summary_room(env) == 0


def test_step_summary_full_file_takes_nothing(tmp_path):
    path = tmp_path / "summary.md"
    path.write_bytes(b"x" * STEP_SUMMARY_LIMIT)
    assert append_step_summary("more", {"GITHUB_STEP_SUMMARY": str(path)}) is False
    assert path.stat().st_size == STEP_SUMMARY_LIMIT
