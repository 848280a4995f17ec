"""The pull request and commit that triggered the workflow, read from the runner's event payload.

References: GitHub docs "Events that trigger workflows" and "Webhook events and payloads"
(https://docs.github.com/webhooks/webhook-events-and-payloads#pull_request). For ``pull_request``
events ``GITHUB_SHA`` is the test merge commit, so the PR head SHA comes from the payload.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from gate.errors import GateError

PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")


def _is_pull_request_event(environ: Mapping[str, str]) -> bool:
    return environ.get("GITHUB_EVENT_NAME", "") in PULL_REQUEST_EVENTS


def _load_event(environ: Mapping[str, str]) -> dict[str, Any]:
    path = environ.get("GITHUB_EVENT_PATH")
    if not path:
        raise GateError("GITHUB_EVENT_PATH is not set; expected the runner's event file for a pull-request event.")
    try:
        with open(path, encoding="utf-8") as f:
            event = json.load(f)
    except (OSError, ValueError) as exc:
        raise GateError(f"Cannot read the GitHub event file {path}: {exc}.") from exc
    if not isinstance(event, dict):
        raise GateError(f"The GitHub event file {path} does not hold a JSON object.")
    return event


def _object(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _positive_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        number = int(value.strip())
        return number if number > 0 else None
    return None


def pull_request_number(environ: Mapping[str, str] = os.environ, explicit: str | int | None = None) -> int | None:
    """Return the number of the pull request to comment on, or None when there is none.

    ``explicit`` (the ``pr_number`` input) wins when given; an empty string counts as not given.
    Otherwise, for ``pull_request`` and ``pull_request_target`` events, the number is
    ``pull_request.number`` (or the top-level ``number``) of the JSON file at ``GITHUB_EVENT_PATH``.
    Other events (``push``, ``schedule``, ...) give None.

    Raises:
        GateError: when ``explicit`` is not a positive integer, or when the event file of a
            pull-request event is missing, unreadable or has no valid number.
    """
    if explicit is not None and not (isinstance(explicit, str) and not explicit.strip()):
        number = _positive_int(explicit)
        if number is None:
            raise GateError(f"Input `pr_number` must be a positive integer, got {explicit!r}.")
        return number
    if not _is_pull_request_event(environ):
        return None
    event = _load_event(environ)
    pull_request = _object(event.get("pull_request"))
    number = _positive_int(pull_request.get("number", event.get("number")))
    if number is None:
        raise GateError(
            f"The GitHub event file {environ['GITHUB_EVENT_PATH']} has no pull_request.number; "
            "expected a positive integer for a pull-request event."
        )
    return number


def head_sha(environ: Mapping[str, str] = os.environ) -> str | None:
    """Return the commit to report on: ``pull_request.head.sha`` for pull-request events (falling back
    to ``GITHUB_SHA`` when the payload lacks it), else ``GITHUB_SHA``; None when neither is known.

    Raises:
        GateError: when the event file of a pull-request event is missing or unreadable.
    """
    if _is_pull_request_event(environ):
        pull_request = _object(_load_event(environ).get("pull_request"))
        sha = _object(pull_request.get("head")).get("sha")
        if isinstance(sha, str) and sha:
            return sha
    return environ.get("GITHUB_SHA") or None
