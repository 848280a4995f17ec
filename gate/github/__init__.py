"""Talking to GitHub: the Actions runner's conventions and the sticky pull-request comment.

- ``gate.github.actions``: inputs, workflow commands, ``GITHUB_OUTPUT`` and the job summary (no HTTP).
- ``gate.github.event``: the pull-request number and head commit from the triggering event.
- ``gate.github.comments``: a small REST client and the one comment per pull request and key.

This package never renders a report; it publishes Markdown that ``gate.report`` produced.
"""
