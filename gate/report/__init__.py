"""Reporters: render a ``gate.results.GateResult`` as JUnit XML, Markdown or a plain-text table.
They never call GitHub (that is ``gate.github``) and never touch arrays."""

from gate.report.junit import write_junit
from gate.report.markdown import render_markdown
from gate.report.text import render_text

__all__ = ["render_markdown", "render_text", "write_junit"]
