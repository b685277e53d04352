"""The rooms of ``workbench/``: each package's modules and lines, and the private names one
package imports from another (there should be none).

Run from the project root::

    python tools/rooms.py

A package is a folder of ``workbench/`` (its ``__init__.py`` and the modules directly in
it; a sub-package is a package of its own). A private import is a name with one leading
underscore taken from a module of another package, by ``from M import _name`` or as
``M._name`` of a module bound by an import. Exits 1 when there is one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "workbench"


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of ``workbench/``."""
    found = {}
    for path in sorted(SOURCE.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def package_of(module: str, known: dict[str, Path]) -> str:
    """The package a module lives in (a package's ``__init__`` lives in the package)."""
    if known[module].name == "__init__.py":
        return module
    return module.rpartition(".")[0]


def _foreign(module: str, here: str, known: dict[str, Path]) -> bool:
    return module in known and package_of(module, known) != here


def private_imports(known: dict[str, Path]) -> list[tuple[str, int, str]]:
    """(file, line, what) of every private name a module takes from another package."""
    found = []
    for module, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        here = package_of(module, known)
        bound: dict[str, str] = {}  # local name -> project module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workbench"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    if full in known:  # a module imported from its package
                        bound[alias.asname or alias.name] = full
                    elif _private(alias.name) and _foreign(node.module, here, known):
                        found.append((str(path.relative_to(ROOT)), node.lineno, full))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in known and alias.asname:
                        bound[alias.asname] = alias.name
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and _private(node.attr)
                and isinstance(node.value, ast.Name)
                and node.value.id in bound
                and _foreign(bound[node.value.id], here, known)
            ):
                what = f"{bound[node.value.id]}.{node.attr}"
                found.append((str(path.relative_to(ROOT)), node.lineno, what))
    return sorted(set(found))


def rooms(known: dict[str, Path]) -> dict[str, tuple[int, int]]:
    """Package -> (modules directly in it, their lines)."""
    table: dict[str, list[int]] = {}
    for module, path in known.items():
        counts = table.setdefault(package_of(module, known), [0, 0])
        counts[0] += 1
        counts[1] += len(path.read_text().splitlines())
    return {package: (m, lines) for package, (m, lines) in sorted(table.items())}


def main() -> int:
    known = modules()
    print(f"{'package':40s} {'modules':>7s} {'lines':>7s}")
    for package, (count, lines) in rooms(known).items():
        print(f"{package:40s} {count:7d} {lines:7d}")
    private = private_imports(known)
    print(f"\ncross-package private imports: {len(private)}")
    for file, line, what in private:
        print(f"  {file}:{line}: {what}")
    return 1 if private else 0


if __name__ == "__main__":
    sys.exit(main())
