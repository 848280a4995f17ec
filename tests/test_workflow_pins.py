"""The example workflows and the README's snippets pin every third-party action by commit SHA, with
the version as a comment, to the current major of each action, and every pinned action runs on Node 24
(GitHub's runners forced Node 24 from June 2026 and removed Node 20 in September 2026).

PINNED is what each action's repository said when it was last read (the tag's commit and its
``action.yml``'s ``runs.using`` and ``inputs``): update it together with the workflows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
READ_ON = "2026-12-01"  # the date PINNED was read from each repository's tags and action.yml
PINNED = {
    # action: (tag, commit of the tag, runs.using, inputs of action.yml)
    "actions/checkout": (
        "v7.0.1", "3d3c42e5aac5ba805825da76410c181273ba90b1", "node24",
        {"allow-unsafe-pr-checkout", "clean", "fetch-depth", "fetch-tags", "filter", "github-server-url", "lfs",
         "path", "persist-credentials", "ref", "repository", "set-safe-directory", "show-progress",
         "sparse-checkout", "sparse-checkout-cone-mode", "ssh-key", "ssh-known-hosts", "ssh-strict", "ssh-user",
         "submodules", "token"},
    ),
    "actions/upload-artifact": (
        "v7.0.0", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "node24",
        {"archive", "compression-level", "if-no-files-found", "include-hidden-files", "name", "overwrite", "path",
         "retention-days"},
    ),
    "actions/download-artifact": (
        "v8.0.1", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "node24",
        {"artifact-ids", "digest-mismatch", "github-token", "merge-multiple", "name", "path", "pattern",
         "repository", "run-id", "skip-decompress"},
    ),
    "actions/cache": (
        "v5.0.5", "27d5ce7f107fe9357f9df03efb73ab90386fccae", "node24",
        {"enableCrossOsArchive", "fail-on-cache-miss", "key", "lookup-only", "path", "restore-keys", "save-always",
         "upload-chunk-size"},
    ),
    "actions/setup-python": (
        "v7.0.0", "5fda3b95a4ea91299a34e894583c3862153e4b97", "node24",
        {"allow-prereleases", "architecture", "cache", "cache-dependency-path", "check-latest", "freethreaded",
         "pip-version", "python-version", "python-version-file", "token", "update-environment"},
    ),
}  # fmt: skip
PLACEHOLDER = "your-org/accuracy-gate"  # the action itself: users pin their copy
USES = re.compile(r"^\s*-?\s*uses:\s*(?P<action>[^@\s#]+)@(?P<ref>\S+)(?:\s*#\s*(?P<comment>.*))?$")
WORKFLOWS = sorted((ROOT / "examples" / "workflows").glob("*.yml"))


def uses_lines(text: str) -> list[re.Match]:
    return [m for line in text.splitlines() if (m := USES.match(line))]


def readme_snippets() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```ya?ml\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("path", WORKFLOWS + [ROOT / "README.md"], ids=lambda p: p.name)
def test_every_action_is_pinned_to_its_current_node24_major(path):
    texts = [path.read_text(encoding="utf-8")] if path.suffix == ".yml" else readme_snippets()
    found = [m for text in texts for m in uses_lines(text)]
    assert found, f"{path.name} uses no action"
    for m in found:
        action = m["action"]
        if action.startswith(PLACEHOLDER) or action.startswith("./"):
            continue
        assert action in PINNED, f"{path.name}: {action} is not in PINNED (read its tag, commit and runs.using)"
        tag, sha, using, _ = PINNED[action]
        assert m["ref"] == sha, f"{path.name}: {action}@{m['ref']} is not the commit of {tag} ({sha})"
        assert (m["comment"] or "").split()[0] == tag, f"{path.name}: {action} needs the comment '# {tag}'"
        assert using == "node24"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_inputs_given_to_pinned_actions_exist_there(path):
    workflow = yaml.safe_load(path.read_text(encoding="utf-8"))
    for job in workflow["jobs"].values():
        for step in job.get("steps", []):
            action = str(step.get("uses", "")).split("@")[0]
            if action in PINNED:
                unknown = set(step.get("with") or {}) - PINNED[action][3]
                assert not unknown, f"{path.name}: {action} {PINNED[action][0]} has no input {sorted(unknown)}"


def test_the_list_says_when_it_was_read():
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", READ_ON)
    assert all(
        re.fullmatch(r"v\d+\.\d+\.\d+", tag) and re.fullmatch(r"[0-9a-f]{40}", sha) for tag, sha, *_ in PINNED.values()
    )
