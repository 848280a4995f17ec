"""A tensor, runner or field named twice in one file is one line naming the file and the name (exit 2
for the gate), never the last copy read in silence. Failed before: an ``.npz`` holding ``y.npy`` twice
(bad copy first) and a Polygraphy JSON golden file with ``"y"`` twice passed (exit 0); a results file
used as a baseline took the last of two ``"rows"``."""

from __future__ import annotations

import json

import pytest

from gate.data.polygraphy_codec import from_json
from gate.errors import GateError
from gate.strict_json import load_json

from conftest import run_cli, save_example_as_json


def test_a_polygraphy_json_object_with_a_key_twice_is_an_error():
    with pytest.raises(GateError, match=r"^doc.json: the JSON document names 'y' twice in one object; expected"):
        from_json('{"y": 1, "y": 2}', "doc.json")
    assert from_json('{"y": 1, "z": {"y": 2}}', "doc.json") == {"y": 1, "z": {"y": 2}}  # other objects: fine


def test_a_strict_json_file_with_a_key_twice_is_an_error(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{"rows": [], "rows": [1]}')
    with pytest.raises(GateError, match=r"names 'rows' twice in one object; expected each once\.$"):
        load_json(path, "baseline file")


def test_a_golden_json_with_an_output_twice_stops_check(example):
    iterations = save_example_as_json(example, "golden.json")
    (name,) = iterations[0].keys()
    document = json.loads((example / "golden.json").read_text())
    good = json.dumps(document["lst"][0][1][0]["outputs"][name])  # iteration 0's output, as saved
    document["lst"][0][1][0]["outputs"] = {}
    rendered = json.dumps(document).replace('"outputs": {}', f'"outputs": {{"{name}": {good}, "{name}": {good}}}', 1)
    (example / "golden.json").write_text(rendered)
    cfg = example / "gate.toml"
    cfg.write_text(
        cfg.read_text()
        .replace('inputs = "data"', 'inputs = "inputs.json"')
        .replace('golden = "data"', 'golden = "golden.json"')
    )
    proc = run_cli("check", cfg, "--junit", example / "j.xml")
    assert proc.returncode == 2, proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"names '{name}' twice in one object" in lines[0] and "golden.json" in lines[0], lines
