"""Data flows one way: every import between the gate's modules (at module level or inside a function)
goes from a layer to the same or a lower one. The layers, lowest first, are the README's
(Development): shared helpers, stored data, runners, the comparator, the verdict and its files,
reporters, the glue that runs a job, and the two front ends."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAYERS = (
    ("shared", ("gate", "gate.errors", "gate.paths", "gate.common", "gate.strict_json", "gate.per_output",
                "gate.options", "gate.limits", "gate.compare_options", "gate.option_model",
                "gate.options_run")),
    ("data", ("gate.data",)),
    ("backend", ("gate.backend",)),
    ("comparator", ("gate.comparator",)),
    ("verdict", ("gate.dtype_rules", "gate.results", "gate.shards", "gate.compared_run", "gate.partial_file",
                 "gate.results_file", "gate.merge", "gate.baseline", "gate.compare_funcs", "gate.partial_funcs",
                 "gate.task_metrics")),
    ("reporters", ("gate.report", "gate.github")),
    ("glue", ("gate.config", "gate.option_readers", "gate.ahead", "gate.stream_progress", "gate.job", "gate.parallel",
              "gate.preview", "gate.run", "gate.run_outputs", "gate.layerwise", "gate.report_files", "gate.pipeline",
              "gate.early_claim")),
    ("front ends", ("gate.cli", "gate.action", "gate.__main__")),
)  # fmt: skip

KNOWN: set[tuple[str, str]] = set()  # (module, target): upward imports still allowed (none)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    """The index of the layer of ``module``: its longest matching prefix in :data:`LAYERS`."""
    best, index = -1, None
    for position, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, index = len(prefix), position
    assert index is not None, f"{module} is in no layer of tests/test_layers.py"
    return index


def imports(path: Path) -> set[str]:
    """The gate modules ``path`` imports (``from gate.x import y`` counts ``gate.x.y`` when it is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "gate":
            found.add(node.module)
            for alias in node.names:
                sub = ROOT.joinpath(*node.module.split("."), alias.name)
                if sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file():
                    found.add(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.split(".")[0] == "gate"}
    return found


def test_no_module_imports_a_layer_above_it():
    upward = []
    for path in sorted((ROOT / "gate").rglob("*.py")):
        module = module_name(path)
        for target in imports(path):
            if layer_of(target) > layer_of(module) and (module, target) not in KNOWN:
                upward.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} ({LAYERS[layer_of(target)][0]})"
                )
    assert upward == []


def test_the_known_exceptions_still_exist():
    """An exception that was fixed is taken off the list."""
    for module, target in KNOWN:
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        assert target in imports(path), f"{module} no longer imports {target}: remove it from KNOWN"


def test_no_module_is_over_500_lines():
    long = {module_name(p): n for p in (ROOT / "gate").rglob("*.py") if (n := len(p.read_text().splitlines())) > 500}
    assert long == {}
