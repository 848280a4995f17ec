"""Files the action writes into the workspace: paths a later step can use (relative to the
workspace) and handing them to the workspace's owner (the container runs as root)."""

from __future__ import annotations

import os

from gate.github import actions


def _workspace(environ) -> str:
    return os.path.abspath(environ.get("GITHUB_WORKSPACE") or os.getcwd())


def chown_to_workspace_owner(path, environ) -> None:
    """Gives a file we wrote to the workspace's owner: the container runs as root, and root-owned files
    break the next ``actions/checkout`` on persistent self-hosted runners (actions/runner#434)."""
    workspace = _workspace(environ)
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    try:
        owner = os.stat(workspace)
        if os.path.abspath(path).startswith(workspace + os.sep):
            for folder in _created_parents(path, workspace):
                os.chown(folder, owner.st_uid, owner.st_gid)
            os.chown(path, owner.st_uid, owner.st_gid)
    except OSError as err:
        actions.warning(f"Could not hand {path} to the workspace owner: {err}")


def chown_tree_to_workspace_owner(folder, environ) -> None:
    """``chown_to_workspace_owner`` for every file and folder below ``folder`` (e.g. the engine cache)."""
    folder = os.path.abspath(folder)
    if not os.path.isdir(folder):
        return
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            chown_to_workspace_owner(os.path.join(root, name), environ)
    chown_to_workspace_owner(folder, environ)


def _created_parents(path, workspace):
    parent = os.path.dirname(os.path.abspath(path))
    while parent.startswith(workspace + os.sep):
        yield parent
        parent = os.path.dirname(parent)
