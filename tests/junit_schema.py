"""The rules of the Jenkins xunit plugin's JUnit schema, ``junit-10.xsd``, encoded as a checker.

Source of the rules: jenkinsci/xunit-plugin, ``src/main/resources/org/jenkinsci/plugins/xunit/types/
model/xsd/junit-10.xsd`` (MIT licence, Copyright 2014 Gregory Boissinot), read 2026-12-01. That schema
is what Jenkins validates a JUnit file against and what most readers of the format follow; it declares
no ``anyAttribute``, so an attribute it does not list (``disabled``, or ``file`` on ``<testcase>``)
makes the file invalid. ``schema_errors`` returns every violation, so that a test shows them all.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

# <xs:simpleType name="SUREFIRE_TIME">: digits with optional thousands commas, an optional fraction.
SUREFIRE_TIME = re.compile(r"(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?")

_RESULT = {"attrs": {"type", "message"}, "required": set(), "children": set(), "text": True}
_RERUN = {"attrs": {"type", "message"}, "required": {"type"}, "children": {"stackTrace", "system-out", "system-err"}}
_STRING = {"attrs": set(), "required": set(), "children": set(), "text": True}
RULES = {
    "testsuites": {
        "attrs": {"name", "time", "tests", "failures", "errors"},
        "required": set(),
        "children": {"testsuite"},
        "times": {"time"},
    },
    "testsuite": {
        "attrs": {
            "name",
            "tests",
            "failures",
            "errors",
            "group",
            "time",
            "skipped",
            "timestamp",
            "hostname",
            "id",
            "package",
            "file",
            "log",
            "url",
        },  # fmt: skip
        "required": {"name", "tests", "failures", "errors"},
        "children": {"testsuite", "properties", "testcase", "system-out", "system-err"},
        "times": {"time"},
    },
    "properties": {"attrs": set(), "required": set(), "children": {"property"}},
    "property": {"attrs": {"name", "value"}, "required": {"name", "value"}, "children": set()},
    "testcase": {
        "attrs": {"name", "time", "classname", "group"},
        "required": {"name"},
        "children": {
            "skipped",
            "error",
            "failure",
            "rerunFailure",
            "rerunError",
            "flakyFailure",
            "flakyError",
            "system-out",
            "system-err",
        },  # fmt: skip
    },
    "failure": _RESULT,
    "error": _RESULT,
    "skipped": _RESULT,
    "system-out": _STRING,
    "system-err": _STRING,
    "stackTrace": _STRING,
    "rerunFailure": _RERUN,
    "rerunError": _RERUN,
    "flakyFailure": _RERUN,
    "flakyError": _RERUN,
}


def schema_errors(xml_text: str | bytes) -> list[str]:
    """Every way the document breaks junit-10.xsd (empty: valid)."""
    root = ET.fromstring(xml_text)
    if root.tag not in ("testsuites", "testsuite"):
        return [f"root element <{root.tag}> is not <testsuites> or <testsuite>"]
    errors: list[str] = []
    _check(root, f"/{root.tag}", errors)
    return errors


def _check(element: ET.Element, where: str, errors: list[str]) -> None:
    rules = RULES[element.tag]
    for name in sorted(set(element.attrib) - rules["attrs"]):
        errors.append(f"{where}: attribute '{name}' is not allowed")
    for name in sorted(rules["required"] - set(element.attrib)):
        errors.append(f"{where}: attribute '{name}' is required")
    for name in rules.get("times", ()):
        value = element.get(name)
        if value is not None and not SUREFIRE_TIME.fullmatch(value):
            errors.append(f"{where}: {name}={value!r} is not a SUREFIRE_TIME")
    texts = [element.text] + [child.tail for child in element]
    if not rules.get("text") and any((text or "").strip() for text in texts):
        errors.append(f"{where}: text content is not allowed")
    for index, child in enumerate(element):
        spot = f"{where}/{child.tag}[{index}]"
        if child.tag not in rules["children"] or child.tag not in RULES:
            errors.append(f"{spot}: element <{child.tag}> is not allowed in <{element.tag}>")
            continue
        _check(child, spot, errors)


def junit_files(folder: Path, limit: int = 50) -> list[Path]:
    """The JUnit files under ``folder`` (``*.xml`` whose root is ``<testsuites>`` or ``<testsuite>``)."""
    found = []
    for path in sorted(folder.rglob("*.xml"))[:limit]:
        try:
            if path.is_file() and path.stat().st_size < 5_000_000:
                root = ET.parse(path).getroot()
                if root.tag in ("testsuites", "testsuite"):
                    found.append(path)
        except (ET.ParseError, OSError):
            continue
    return found
