"""The public API of polygraphy 0.53.6's ``polygraphy.comparator``, ``polygraphy.backend.base`` and
``polygraphy.backend.onnxrt``, looked up in ``gate.comparator``, ``gate.backend.base`` and
``gate.backend.onnxrt``.

    python bench/api_surface.py [--table]

For every public name (``dir()`` of the module without a leading underscore) it prints whether ours
has it, and for classes and functions whether every parameter of Polygraphy's signature (of the
callable, or of a class's ``__init__`` and public methods) is one of ours, with the same default
where ours says so (``same``), or why not (a documented deviation ``Dn`` or ``not applicable``).
``--table`` prints the README's Markdown table instead. Exit code 0 when nothing is missing.
Polygraphy is the test-only oracle here (the test extra installs it); gate never imports it.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import sys
import warnings

MODULES = [
    ("polygraphy.comparator", "gate.comparator"),
    ("polygraphy.backend.base", "gate.backend.base"),
    ("polygraphy.backend.onnxrt", "gate.backend.onnxrt"),
]

# Names that are present in Polygraphy's module and not in ours, on purpose.
NOT_APPLICABLE = {
    "polygraphy.backend.base.loader": "submodule (D15): `BaseLoader` is in `gate.backend.base`",
    "polygraphy.backend.base.runner": "submodule (D15): `BaseRunner` is in `gate.backend.base`",
    "polygraphy.backend.base.util": "submodule (D15): `check_inputs` is `gate.backend.base.check_inputs_against`",
    "polygraphy.backend.onnxrt.loader": "submodule (D15): `SessionFromOnnx` is in `gate.backend.onnxrt`",
    "polygraphy.backend.onnxrt.runner": "submodule (D15): `OnnxrtRunner` is in `gate.backend.onnxrt`",
}

# Names we have whose behaviour differs on purpose (the README's deviation table).
DEVIATIONS = {
    "polygraphy.comparator.SimpleCompareFunc": "D1 D2 D3 D4 D5 D8; plot options refused (D16)",
    "polygraphy.comparator.Comparator": "D6 D7 D12 D13",
    "polygraphy.comparator.DataLoader": "D11; data_loader_backend_module='torch' (D16)",
    "polygraphy.comparator.L2CompareFunc": "D9",
    "polygraphy.comparator.CosineSimilarityCompareFunc": "D9",
    "polygraphy.comparator.PsnrCompareFunc": "D9",
    "polygraphy.comparator.SnrCompareFunc": "D9",
    "polygraphy.comparator.IndicesCompareFunc": "D10; IndicesCompareResult, not a bare bool (D16)",
    "polygraphy.comparator.struct": "D14 (LazyArray's swap threshold)",
    "polygraphy.comparator.util": "D3 (compute_mean); no matplotlib plots (not applicable)",
    "polygraphy.comparator.compare": "D15 (split over compare, metrics, indices, funcs)",
    "polygraphy.comparator.data_loader": "D11 D16",
    "polygraphy.backend.base.BaseRunner": "D16 (numpy dtypes)",
    "polygraphy.backend.onnxrt.OnnxrtRunner": "D16 (numpy dtypes)",
    "polygraphy.backend.onnxrt.SessionFromOnnx": "D16 (intra-op threads)",
}

# Polygraphy parameters we do not take, on purpose (checked by name).
PARAMETERS_NOT_APPLICABLE: set[str] = set()

# Names inside Polygraphy's submodules that we do not provide.
SUBMODULE_NOT_APPLICABLE = {
    "polygraphy.comparator.util.build_heatmaps": "matplotlib figures: the gate reports tables",
    "polygraphy.comparator.util.scatter_plot_error_magnitude": "matplotlib figures: the gate reports tables",
}


def _find_in_package(package, name):
    """``name`` in ``package`` or any of its already imported submodules."""
    if hasattr(package, name):
        return True
    prefix = package.__name__ + "."
    return any(mod_name.startswith(prefix) and hasattr(mod, name) for mod_name, mod in list(sys.modules.items()))


def public_names(module) -> list[str]:
    return sorted(name for name in dir(module) if not name.startswith("_"))


def _params(obj):
    try:
        return inspect.signature(obj).parameters
    except (TypeError, ValueError):
        return None


def _callables(obj):
    """``[(label, callable)]``: a function itself; a class's ``__init__`` and public methods."""
    if inspect.isclass(obj):
        found = [("__init__", obj.__init__)] if "__init__" in vars(obj) or obj.__init__ is not object.__init__ else []
        for name, member in inspect.getmembers(obj):
            if not name.startswith("_") and (inspect.isfunction(member) or inspect.ismethod(member)):
                found.append((name, member))
        return found
    if inspect.isfunction(obj):
        return [("", obj)]
    return []


def signature_gaps(theirs, ours) -> list[str]:
    """Parameters of Polygraphy's callables that ours lack (``method(param)``)."""
    gaps = []
    for label, func in _callables(theirs):
        mine = getattr(ours, label, None) if label else ours
        if mine is None:
            gaps.append(f"{label or 'call'}() missing")
            continue

        their_params, my_params = _params(func), _params(mine)
        if their_params is None or my_params is None:
            continue
        takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in my_params.values())
        for name, param in their_params.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in ("self", "cls"):
                continue
            if name not in my_params and not takes_kwargs:
                gaps.append(f"{label or 'call'}({name})")
    return gaps


def survey():
    """``[(polygraphy name, status, note)]`` with status ``same`` / ``deviation`` / ``n/a`` / ``MISSING``."""
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for theirs_name, ours_name in MODULES:
            theirs, ours = importlib.import_module(theirs_name), importlib.import_module(ours_name)
            for name in public_names(theirs):
                full = f"{theirs_name}.{name}"
                if full in NOT_APPLICABLE:
                    rows.append((full, "n/a", NOT_APPLICABLE[full]))
                    continue
                if not hasattr(ours, name):
                    rows.append((full, "MISSING", f"not in {ours_name}"))
                    continue
                theirs_obj, ours_obj = getattr(theirs, name), getattr(ours, name)
                gaps = []
                if inspect.ismodule(theirs_obj) and inspect.ismodule(ours_obj):
                    for sub in public_names(theirs_obj):
                        value = getattr(theirs_obj, sub)
                        own = (inspect.isclass(value) or inspect.isfunction(value)) and (
                            value.__module__ == theirs_obj.__name__
                        )
                        if own and f"{theirs_obj.__name__}.{sub}" not in SUBMODULE_NOT_APPLICABLE:
                            if not hasattr(ours_obj, sub) and not _find_in_package(ours, sub):
                                gaps.append(f"{sub} missing")
                elif full not in PARAMETERS_NOT_APPLICABLE:
                    gaps = signature_gaps(theirs_obj, ours_obj)
                if gaps:
                    rows.append((full, "MISSING", "; ".join(gaps)))
                elif full in DEVIATIONS:
                    rows.append((full, "deviation", DEVIATIONS[full]))
                else:
                    rows.append((full, "same", ""))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--table", action="store_true", help="print the README's Markdown table")
    args = parser.parse_args(argv)
    rows = survey()
    if args.table:
        print("| Polygraphy 0.53.6 | ours |")
        print("|---|---|")
        for full, status, note in rows:
            print(f"| `{full}` | {status}{': ' + note if note else ''} |")
    else:
        for full, status, note in rows:
            print(f"{status:9s} {full}{'  -- ' + note if note else ''}")
    missing = [row for row in rows if row[1] == "MISSING"]
    counts = {s: sum(1 for r in rows if r[1] == s) for s in ("same", "deviation", "n/a", "MISSING")}
    print(
        f"# {len(rows)} public names: {counts['same']} same, {counts['deviation']} deviation, "
        f"{counts['n/a']} not applicable, {counts['MISSING']} missing",
        file=sys.stderr if args.table else sys.stdout,
    )
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
