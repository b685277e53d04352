"""The ``[[fixtures]]`` and ``[[distances]]`` of a log description: samples that rest on things.

A fixture replaces a measuring device: in the samples whose ``column`` of
the positions' file equals ``value``, the origin of marker ``marker`` (a
``[[markers]]`` entry with a ``frame`` and no measured columns) rests at one
unknown world point (``type = "point"``, e.g. a ball in a socket) or on one
unknown world plane (``type = "plane"``, a table, a wall)::

    [[markers]]
    name = "ball"
    frame = "ball_link"
    [[fixtures]]
    name = "socket_0"
    type = "point"
    marker = "ball"
    column = "socket"
    value = 0
    [[distances]]
    between = ["socket_0", "socket_1"]
    value = 0.05
    unit = "m"                          # or "mm"

A distance is known between two point fixtures (a tool's two sockets); it
fixes the scale, which the fixtures alone do not see
(:mod:`workbench.calibration.fitting.fixtures`). Fixtures and measured markers may
share a log.
"""

from __future__ import annotations

import warnings

import numpy as np

from workbench.config import Section
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.recordings.log import Distance, Fixture, Marker
from workbench.recordings.tables import Table

KINDS = ("point", "plane")
_LENGTH = {"m": 1.0, "mm": 1e-3}


def read_fixtures(
    top: Section, table: Table, markers: list[Marker]
) -> tuple[tuple[Fixture, ...], tuple[Distance, ...]]:
    """The fixtures (rows of ``table``, the positions' file, before any row selection) and
    distances of a description; every unmeasured marker must rest in some fixture."""
    names = {m.name: m for m in markers}
    fixtures: list[Fixture] = []
    declared: list[tuple[str, float]] = []  # each fixture's (column, value)
    for section in top.sections("fixtures"):
        name = section.string("name")
        if any(f.name == name for f in fixtures):
            raise WorkbenchError(f"{section.where('name')} = {name!r} names two fixtures")
        kind = section.string("type", choices=KINDS)
        marker = section.string("marker")
        if marker not in names:
            raise WorkbenchError(
                f"{section.where('marker')} = {marker!r} is not a [[markers]] name "
                f"({', '.join(names) or 'none'})"
            )
        if names[marker].position is not None or names[marker].rotation is not None:
            raise WorkbenchError(
                f"{section.where('marker')} = {marker!r} is measured (position or rotation "
                "columns); a fixture's marker rests on it unmeasured"
            )
        column = section.string("column")
        value = section.number("value")
        rows = table.values[:, table.index(column)] == value
        if not rows.any():
            raise WorkbenchError(
                f"{section.where('value')} = {value:g}: no row of {table.path} has {column} = "
                f"{value:g}"
            )
        fixtures.append(Fixture(name, kind, marker, rows))
        declared.append((column, value))
        section.done()
    _check_overlap(fixtures, top)
    _warn_repeated(fixtures, table)
    if fixtures and all(m.position is None and m.rotation is None for m in markers):
        _check_resting(fixtures, declared, table)
    used = {f.marker for f in fixtures}
    for m in markers:
        if m.position is None and m.rotation is None and m.name not in used:
            raise WorkbenchError(
                f"{top.source}: marker {m.name!r} has no position or rotation columns and no "
                "fixture rests it anywhere: give it measured columns or a [[fixtures]] entry"
            )
    distances = []
    kinds = {f.name: f.kind for f in fixtures}
    for section in top.sections("distances"):
        between = section.strings("between", length=2)
        for name in between:
            if kinds.get(name) != "point":
                raise WorkbenchError(
                    f"{section.where('between')}: {name!r} is not a point fixture "
                    f"({', '.join(k for k, v in kinds.items() if v == 'point') or 'none'})"
                )
        if between[0] == between[1]:
            raise WorkbenchError(f"{section.where('between')} names one fixture twice")
        if any(set(d.between) == set(between) for d in distances):
            raise WorkbenchError(
                f"{section.where('between')}: a second distance between {between[0]!r} and "
                f"{between[1]!r}; give each pair one distance"
            )
        scale = _LENGTH[section.string("unit", "m", choices=tuple(_LENGTH))]
        distances.append(Distance(tuple(between), section.number("value", positive=True) * scale))
        section.done()
    return tuple(fixtures), tuple(distances)


def _warn_repeated(fixtures: list[Fixture], table: Table) -> None:
    """Warn of a fixture's rows that repeat one of its earlier rows exactly (a logger that
    wrote a pose twice): each repeat counts that pose again in the fit, and a repeat held
    out is scored against its own twin among the training samples."""
    for f in fixtures:
        rows = np.flatnonzero(f.rows)
        _, first = np.unique(table.values[rows], axis=0, return_index=True)
        if first.size < rows.size:
            row = int(rows[np.setdiff1d(np.arange(rows.size), first)[0]])
            warnings.warn(
                f"{table.where(row)} repeats an earlier row of fixture {f.name!r} exactly "
                f"({rows.size - first.size} of its {rows.size} rows do): each repeat counts "
                "that pose again, and held out it is scored against its own twin; remove the "
                "repeated rows",
                WorkbenchWarning,
                stacklevel=2,
            )


def _check_resting(
    fixtures: list[Fixture], declared: list[tuple[str, float]], table: Table
) -> None:
    """With no measured marker, a row that rests in no fixture carries nothing: refused (a
    fixture value mistyped in the file, or a fixture missing from the description)."""
    resting = np.logical_or.reduce([f.rows for f in fixtures])
    if resting.all():
        return
    row = int(np.flatnonzero(~resting)[0])
    cells = ", ".join(
        f"{column} = {table.values[row, table.index(column)]:g}"
        for column in dict.fromkeys(column for column, _ in declared)
    )
    pairs = zip(fixtures, declared, strict=True)
    values = ", ".join(f"{f.name}: {column} = {value:g}" for f, (column, value) in pairs)
    raise WorkbenchError(
        f"{table.where(row)} ({cells}) rests in no fixture ({values}) and no marker is "
        f"measured, so it carries nothing ({int((~resting).sum())} of {resting.size} rows rest "
        "in none): correct its value or add its [[fixtures]] entry"
    )


def _check_overlap(fixtures: list[Fixture], top: Section) -> None:
    """A sample of one marker rests in one fixture at most."""
    for i, a in enumerate(fixtures):
        for b in fixtures[i + 1 :]:
            if a.marker == b.marker and np.any(a.rows & b.rows):
                raise WorkbenchError(
                    f"{top.source}: fixtures {a.name!r} and {b.name!r} both hold marker "
                    f"{a.marker!r} in row {int(np.argmax(a.rows & b.rows))} of the positions"
                )
