"""Talking to GitHub: the Actions runner's conventions, the event, and the sticky pull-request comment.

- ``gate.github.actions``: inputs (validated, paths confined to the workspace), workflow commands
  (annotations, groups, masks, stop-commands), ``GITHUB_OUTPUT`` and the job summary (no HTTP).
- ``gate.github.event``: the pull request and head commit for every event, with the REST lookups for
  ``workflow_run`` of forks and for ``push``-like events, and fork detection.
- ``gate.github.comments``: a small REST client (retries, rate limits, GHES) and the one comment per
  pull request and key.

This package never renders a report; it publishes Markdown that ``gate.report`` produced.
"""
