"""README's gate.toml snippets: every key is a gate.toml key in the table it is written under (a
fresh user put `labels` at the top level: "'labels' belongs in the [compare] table"), and a value
that is not the key's default says so in its comment (the compare-functions snippet showed
``cosine_similarity_threshold = 0.999`` among defaults; the default is 0.997)."""

from __future__ import annotations

import re

import tomllib

from gate import options

from conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
BY_TOML = {option.toml: option for option in options.OPTIONS if option.toml}


def _settings():
    """``(key, value, comment)`` for every ``key = value`` line of README's toml blocks; ``key`` is
    ``table.key`` under a table header."""
    found = []
    for block in re.findall(r"```toml\n(.*?)```", README, re.S):
        table = ""
        for line in block.splitlines():
            header = re.match(r"\s*\[([a-z_.]+)\]", line)
            if header:
                table = header.group(1)
                continue
            setting = re.match(r"\s*([a-z_0-9]+)\s*=\s*(.*?)\s*(#.*)?$", line)
            if setting:
                key = f"{table}.{setting.group(1)}" if table else setting.group(1)
                value = tomllib.loads(f"x = {setting.group(2)}")["x"]
                found.append((key, value, setting.group(3) or ""))
    return found


def test_every_readme_toml_key_is_a_gate_toml_key_in_its_table():
    found = _settings()
    assert ("compare.labels", "labels", "# relative to gate.toml's folder") in found
    unknown = [key for key, _, _ in found if key not in BY_TOML]
    assert unknown == []


def test_a_readme_toml_value_other_than_the_default_names_the_default():
    found = _settings()
    assert ("compare.cosine_similarity_threshold", 0.997, "# cosine: minimum similarity") in found
    misleading = [
        (key, value, BY_TOML[key].default)
        for key, value, comment in found
        if BY_TOML[key].default is not None and value != BY_TOML[key].default and "default" not in comment
    ]
    assert misleading == []
