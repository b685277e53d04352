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


def test_no_package_imports_a_private_name_of_another():
    """``tools/rooms.py``, the command that prints the rooms, finds no private import across
    packages; checked against an import it must catch."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "rooms.py")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout
    assert "cross-package private imports: 0" in done.stdout


def test_rooms_finds_a_private_import_across_packages(tmp_path, monkeypatch):
    import importlib.util

    spec = importlib.util.spec_from_file_location("rooms", ROOT / "tools" / "rooms.py")
    rooms = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rooms)
    for folder in ("a", "b"):
        (tmp_path / "workbench" / folder).mkdir(parents=True)
        (tmp_path / "workbench" / folder / "__init__.py").write_text("")
    (tmp_path / "workbench" / "a" / "x.py").write_text("_hidden = 1\n")
    (tmp_path / "workbench" / "a" / "y.py").write_text("from workbench.a.x import _hidden\n")
    (tmp_path / "workbench" / "b" / "z.py").write_text(
        "from workbench.a.x import _hidden\nfrom workbench.a import x\nx._hidden\n"
    )
    monkeypatch.setattr(rooms, "ROOT", tmp_path)
    monkeypatch.setattr(rooms, "SOURCE", tmp_path / "workbench")
    found = rooms.private_imports(rooms.modules())
    assert [(f, line) for f, line, _ in found] == [("workbench/b/z.py", 1), ("workbench/b/z.py", 3)]


def test_recordings_and_the_identification_model_import_without_calibration():
    import subprocess
    import sys

    code = (
        "import sys; import workbench.recordings.log_files, workbench.identification.least_squares;"
        "print(sorted(m for m in sys.modules if m.startswith('workbench.calibration')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    assert done.stdout.strip() == "[]"
