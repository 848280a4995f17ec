"""accuracy-gate: a CI accuracy gate for deep-learning inference.

Data flows one way: inputs (``gate.data``) -> runners (``gate.backend``) -> ``gate.comparator``
-> results (``gate.results``) -> reporters (``gate.report``, ``gate.github``) and the action glue.
"""

__version__ = "0.1.0"
