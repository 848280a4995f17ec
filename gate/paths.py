"""Path confinement: a CI gate reads other people's files, so no path from a config, a CLI flag or
a stored-data folder may lead outside the folder it belongs to (by ``..``, an absolute path or a
symlink)."""

from __future__ import annotations

import os
from pathlib import Path

from gate.errors import GateError


def confinement_root(config_path: Path, explicit=None) -> Path:
    """The folder every configured path must stay inside: ``explicit`` (``--root``) if given, else
    ``GITHUB_WORKSPACE`` in GitHub Actions, else the config file's folder."""
    if explicit:
        return Path(explicit).resolve()
    workspace = os.environ.get("GITHUB_WORKSPACE")
    if workspace:
        return Path(workspace).resolve()
    return Path(config_path).resolve().parent


def require_inside(path: Path, root: Path, what: str) -> Path:
    """Returns ``path`` resolved (symlinks followed) when it lies inside ``root``.

    Raises:
        GateError: it resolves outside ``root``, naming both.
    """
    resolved = Path(os.path.realpath(path))
    real_root = Path(os.path.realpath(root))
    if resolved != real_root and real_root not in resolved.parents:
        via = " (through a symlink)" if Path(os.path.abspath(path)) != resolved else ""
        raise GateError(f"{path}: {what} resolves outside {real_root}{via}; paths must stay inside it.")
    return resolved
