"""Typed reading of TOML files: problem files, design files, log descriptions.

One validation layer for every file a user writes by hand. :func:`read_toml`
turns a missing file, a directory, non-UTF-8 bytes or a syntax error into a
:class:`~workbench.errors.WorkbenchError` naming the file; :class:`Section`
hands out values by key with their type checked (a boolean is not a number,
``100.7`` is not an integer, the string ``"false"`` is not a boolean), and
:meth:`Section.done` rejects keys nobody asked for, so a typo never passes
silently. Every message names the file and the key, as ``FILE: [section]
key``.
"""

from __future__ import annotations

import math
import os
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.io import check_input_file
from workbench.lie import Array

_MISSING = object()
MEMORY_BUDGET = 8 * 2**30  # bytes: the most that one size in a problem file may ask for


def check_memory(where: str, estimate: float, how: str) -> None:
    """Refuse a size from a file or option before anything is allocated for it.

    ``where`` names the key (``FILE: [section] key = value``), ``estimate`` is
    the memory it implies in bytes and ``how`` the terms of that estimate;
    above :data:`MEMORY_BUDGET` the error shows both.
    """
    if estimate > MEMORY_BUDGET:
        raise WorkbenchError(
            f"{where} needs about {estimate / 2**30:.3g} GiB of memory ({how}); at most "
            f"{MEMORY_BUDGET / 2**30:.0f} GiB: lower it"
        )


def read_toml(path: str | os.PathLike, what: str = "file") -> dict[str, Any]:
    """The parsed TOML document at ``path``; ``what`` names the kind of file in messages."""
    path = Path(path)
    if path.is_dir():
        raise WorkbenchError(f"{what} {path} is a directory, not a TOML file")
    check_input_file(path, what)  # a FIFO or a device: not a regular file
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except FileNotFoundError:
        raise WorkbenchError(f"{what} not found: {path}") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise WorkbenchError(f"{path}: line {line} is not UTF-8 text") from None
    except OSError as exc:
        raise WorkbenchError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise WorkbenchError(f"{path}: {exc}") from None
    except RecursionError:
        raise WorkbenchError(f"{path}: arrays or inline tables nested too deeply to read") from None


class Section:
    """Typed access to one table of a TOML document, for messages ``SOURCE: [name] key``."""

    def __init__(self, table: Any, source: str, name: str = "") -> None:
        if not isinstance(table, dict):
            where = f"[{name}]" if name else "the file"
            raise WorkbenchError(f"{source}: {where} must be a table of key = value pairs")
        self.table = dict(table)
        self.source = source
        self.name = name
        self._used: set[str] = set()

    def where(self, key: str) -> str:
        """'SOURCE: [name] key' for messages about ``key``."""
        prefix = f"[{self.name}] " if self.name else ""
        return f"{self.source}: {prefix}{key}"

    def __contains__(self, key: str) -> bool:
        return key in self.table

    def _get(self, key: str, default: Any) -> Any:
        self._used.add(key)
        if key in self.table:
            return self.table[key]
        if default is _MISSING:
            raise WorkbenchError(f"{self.where(key)} is required")
        return default

    def _absent(self, key: str, default: Any) -> bool:
        """True (after registering ``key``) when it is absent and has a default to return."""
        self._used.add(key)
        if key in self.table:
            return False
        if default is _MISSING:
            raise WorkbenchError(f"{self.where(key)} is required")
        return True

    def section(self, key: str, required: bool = False) -> Section:
        """The sub-table ``key`` (empty when absent and not required)."""
        value = self._get(key, _MISSING if required else {})
        name = f"{self.name}.{key}" if self.name else key
        return Section(value, self.source, name)

    def sections(self, key: str) -> list[Section]:
        """An array of tables (``[[key]]``); empty when absent."""
        value = self._get(key, [])
        if not isinstance(value, list):
            raise WorkbenchError(f"{self.where(key)} must be an array of tables ([[{key}]])")
        name = f"{self.name}.{key}" if self.name else key
        return [Section(v, self.source, f"{name}[{i}]") for i, v in enumerate(value)]

    def number(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        positive: bool = False,
    ) -> float:
        """A finite real number (an integer is accepted; a boolean or a string is not)."""
        if self._absent(key, default):
            return default
        value = self.table[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise WorkbenchError(f"{self.where(key)} = {value!r} must be a number")
        value = float(value)
        if not math.isfinite(value):
            raise WorkbenchError(f"{self.where(key)} = {value} must be finite")
        self._check_range(key, value, minimum, maximum, positive)
        return value

    def integer(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        minimum: int | None = None,
        maximum: int | None = None,
    ) -> int:
        """An integer (``3.0`` is accepted, ``100.7`` and booleans are not)."""
        if self._absent(key, default):
            return default
        value = self.table[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise WorkbenchError(f"{self.where(key)} = {value!r} must be an integer")
        if isinstance(value, float) and not value.is_integer():
            raise WorkbenchError(f"{self.where(key)} = {value!r} must be an integer")
        value = int(value)
        self._check_range(key, value, minimum, maximum, False)
        return value

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        """``true`` or ``false`` (not the strings "true" / "false")."""
        if self._absent(key, default):
            return default
        value = self.table[key]
        if not isinstance(value, bool):
            raise WorkbenchError(f"{self.where(key)} = {value!r} must be true or false")
        return value

    def string(
        self, key: str, default: Any = _MISSING, *, choices: Iterable[str] | None = None
    ) -> str:
        """A string, optionally one of ``choices``."""
        if self._absent(key, default):
            return default
        value = self.table[key]
        if not isinstance(value, str):
            raise WorkbenchError(f"{self.where(key)} = {value!r} must be a string")
        if choices is not None and value not in (choices := tuple(choices)):
            raise WorkbenchError(
                f"{self.where(key)} = {value!r} must be one of {', '.join(map(repr, choices))}"
            )
        return value

    def strings(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        length: int | None = None,
        choices: Iterable[str] | None = None,
    ) -> list:
        """A list of strings, optionally of a given length, each optionally one of ``choices``."""
        if self._absent(key, default):
            return default
        value = self.table[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise WorkbenchError(f"{self.where(key)} = {value!r} must be a list of strings")
        if length is not None and len(value) != length:
            raise WorkbenchError(f"{self.where(key)} has {len(value)} entries; expected {length}")
        if choices is not None:
            choices = tuple(choices)
            unknown = [v for v in value if v not in choices]
            if unknown:
                raise WorkbenchError(
                    f"{self.where(key)}: unknown {', '.join(map(repr, unknown))}; choose from "
                    f"{', '.join(map(repr, choices))}"
                )
        return value

    def array(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        shape: Sequence[int | None] | None = None,
        positive: bool = False,
    ) -> Array:
        """A finite numeric array (nested lists); ``None`` in ``shape`` accepts any length."""
        if self._absent(key, default):
            return default
        value = self.table[key]
        if not _numeric(value):
            raise WorkbenchError(f"{self.where(key)} = {value!r} must be numbers")
        try:
            a = np.array(value, dtype=float)
        except ValueError:
            raise WorkbenchError(
                f"{self.where(key)} must be a regular array (rows of equal length)"
            ) from None
        if shape is not None and (
            a.ndim != len(shape)
            or any(s is not None and s != d for s, d in zip(shape, a.shape, strict=True))
        ):
            want = " x ".join("N" if s is None else str(s) for s in shape)
            raise WorkbenchError(
                f"{self.where(key)} has shape {' x '.join(map(str, a.shape)) or 'scalar'}; "
                f"expected {want}"
            )
        if not np.all(np.isfinite(a)):
            raise WorkbenchError(f"{self.where(key)} contains NaN or inf")
        if positive and np.any(a <= 0):
            raise WorkbenchError(f"{self.where(key)} must be positive")
        return a

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        """The value as TOML gave it, for keys that take several types."""
        return self._get(key, default)

    def done(self) -> None:
        """Reject keys that no accessor asked for (typos), listing the known ones."""
        unknown = sorted(set(self.table) - self._used)
        if unknown:
            known = ", ".join(sorted(self._used)) or "none"
            where = f"[{self.name}]" if self.name else "top level"
            raise WorkbenchError(
                f"{self.source}: {where}: unknown key(s) {', '.join(unknown)}; known: {known}"
            )

    def _check_range(self, key, value, minimum, maximum, positive) -> None:
        if positive and value <= 0:
            raise WorkbenchError(f"{self.where(key)} = {value} must be positive")
        if minimum is not None and value < minimum:
            raise WorkbenchError(f"{self.where(key)} = {value} must be at least {minimum}")
        if maximum is not None and value > maximum:
            raise WorkbenchError(f"{self.where(key)} = {value} must be at most {maximum}")


def _numeric(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, list) and all(_numeric(v) for v in value)
