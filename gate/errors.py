"""The project's own exception type for everything a user can get wrong."""


class GateError(Exception):
    """A user-facing error: one sentence saying what is wrong, where (file, tensor, setting) and what
    was expected. The CLI and the action print it on one line, without a traceback, and exit with 2
    ("could not evaluate")."""
