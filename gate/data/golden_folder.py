"""What ``record`` leaves in a golden folder: golden outputs of one layout, which ``check`` reads.

``record --force --layout npz`` over model-zoo golden outputs removes the ``output_<K>.pb`` files the
gate wrote and the ``test_data_set_<N>/`` folders they leave empty; anything else (a file the gate
does not write) is never removed. Where such a file would leave the folder holding two layouts
(``gate.data.storage.detect_layout`` refuses that), ``record`` says so before it writes anything.
"""

from __future__ import annotations

import os
from pathlib import Path

from gate.data.storage import _NPZ_FILE, _ZOO_DIR, MODEL_ZOO, NPZ, POLYGRAPHY_JSON, zoo_position
from gate.errors import GateError


def _layout_of_name(name: str) -> str | None:
    """The layout a folder entry counts for in ``detect_layout`` (None: it counts for none)."""
    if _ZOO_DIR.match(name):
        return MODEL_ZOO
    if _NPZ_FILE.match(name):
        return NPZ
    if name.endswith(".json"):
        return POLYGRAPHY_JSON
    return None


def recorded_golden_files(directory: Path) -> list[Path]:
    """The golden files of any writable layout in ``directory`` (never input files): exactly the
    names the readers take (``test_data_set_<N>/output_<K>.pb``, ``<N>.npz``, ``<N>.json``), so that
    ``record --force`` never deletes anything else there (``test_data_set_old/``, ``output_backup.pb``:
    the user's)."""
    if not directory.is_dir():
        return []
    zoo = [
        file
        for folder in directory.glob("test_data_set_*")
        if _ZOO_DIR.match(folder.name) and folder.is_dir()
        for file in folder.glob("output_*.pb")
        if zoo_position(file.name, "output") is not None
    ]
    flat = [p for p in directory.iterdir() if _NPZ_FILE.match(p.name) or (p.suffix == ".json" and p.stem.isdigit())]
    return sorted(zoo) + sorted(flat)


def check_leftovers(directory: Path, layout: str, removed: list[Path]) -> None:
    """After ``removed`` (golden files the gate wrote) are deleted, ``directory`` must hold nothing
    that ``detect_layout`` reads as a layout other than ``layout``.

    Raises:
        GateError: one line naming the first file the gate did not write that would make the folder
            hold several layouts (check would refuse it), and both layouts.
    """
    if not directory.is_dir():
        return
    gone = {os.path.normpath(path) for path in removed}
    for name in sorted(os.listdir(directory)):
        other = _layout_of_name(name)
        if other is None or other == layout:
            continue
        path = directory / name
        if os.path.normpath(path) in gone:
            continue
        if other == MODEL_ZOO and path.is_dir() and not path.is_symlink():
            kept = sorted(p for p in path.rglob("*") if os.path.normpath(p) not in gone and not p.is_dir())
            if not kept and not any(p.is_dir() for p in path.iterdir()):
                continue  # emptied and removed with the golden files
            path = kept[0] if kept else path
        raise GateError(
            f"{path}: not a golden file the gate writes, so record leaves it; beside {layout} golden outputs "
            f"{directory} would hold several layouts ({layout}, {other}), which check refuses; move it out first."
        )


def remove_golden_files(directory: Path, files: list[Path]) -> None:
    """Deletes ``files`` (golden files the gate wrote) and the ``test_data_set_<N>/`` folders of
    ``directory`` that they leave empty (an empty one would count as an iteration).

    Raises:
        OSError: a file cannot be deleted (the caller names it).
    """
    for path in files:
        path.unlink()
    for folder in sorted({path.parent for path in files}):
        if folder.parent == directory and _ZOO_DIR.match(folder.name):
            try:
                folder.rmdir()
            except OSError:  # not empty: it keeps the stored inputs (golden beside the inputs) or user files
                pass
