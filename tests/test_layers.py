"""The import graph of ``workbench/``, built from the source, against the layer table of
docs/architecture.md: every module in a layer, no import upward, no cycle."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _modules() -> dict[str, Path]:
    modules = {}
    for path in (ROOT / "workbench").rglob("*.py"):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> project modules it imports (at any level of the file)."""
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workbench"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    found.add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.startswith("workbench")}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _layers() -> list[set[str]]:
    """Per row of the layer table: its packages (``name/``) and top-level modules."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("| layer | modules |") :].split("\n\n")[0]
    rows = []
    for line in table.splitlines()[2:]:
        cells = line.split("|")
        rows.append(
            {n.removeprefix("workbench/") for n in re.findall(r"`([\w/.]+)`", cells[1] + cells[2])}
        )
    return rows


def _layer_of(module: str, layers: list[set[str]]) -> int | None:
    parts = module.split(".")
    if len(parts) == 1:
        return 0  # the package itself: its names are resolved lazily (workbench.exports)
    for index, names in enumerate(layers):
        top = parts[1]
        if f"{top}/" in names or (len(parts) == 2 and (top in names or f"{top}.py" in names)):
            return index
    return None


def test_every_module_has_a_layer_and_imports_only_downwards():
    modules = _modules()
    layers = _layers()
    graph = _graph(modules)
    unplaced = sorted(m for m in modules if _layer_of(m, layers) is None)
    assert not unplaced, f"modules missing from the layer table: {unplaced}"
    upward = [
        (m, d)
        for m, deps in graph.items()
        for d in deps
        if _layer_of(d, layers) > _layer_of(m, layers)
    ]
    assert not upward, f"imports upward: {upward}"


def test_the_import_graph_has_no_cycle():
    graph = _graph(_modules())
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for dep in sorted(graph[module]):
            assert state.get(dep) != 1, f"import cycle: {' -> '.join([*path, module, dep])}"
            if dep not in state:
                visit(dep, [*path, module])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
