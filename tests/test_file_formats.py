"""docs/file_formats.md stays true: its key tables against what the readers ask for.

For every hand-written TOML format the project reads:

* each shipped file of that format (``problems/``, ``models/``, ``examples/``;
  every shipped TOML file belongs to exactly one format) is read by the
  format's reader with :class:`workbench.config.Section`'s getters wrapped, so
  that every ``(table, key)`` a reader asks for is recorded and attributed to the
  file it came from (a problem file reads its closure file and design file too);
  each must match a row of the format's key table in the document;
* conversely every literal key of the document's tables is one a reader asks
  for: either recorded above, or a string literal the reader modules pass as a
  key, collected from their syntax tree (the first argument of a ``Section``
  getter call, an argument bound to a parameter named ``key`` of a function
  defined in those modules, the default value of such a parameter, or the
  literals of a tuple a loop or comprehension binds to a name passed as a key);
* every such literal key in the reader modules is documented (so keys of
  branches no shipped file takes are documented too);
* each format's one TOML example in the document reads with its reader, asking
  documented keys only, and files the project writes in these formats (a drive
  file with every term, ``payload.toml``) read back the same way;
* every file and column name in the document's tables of outputs is spelled
  as in the source of a module its section names.

Key cells are written as the readers' messages name them: ```[table] key```,
```[[array]] key``` for arrays of tables, ```key``` at the top level;
``<name>`` stands for any table or key name (joints, dotted problem keys).
Every module and shipped file the document names must exist.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from workbench import config, models
from workbench.closed_chains import read as read_closure_file
from workbench.excitation.problem import read_problem
from workbench.fivebar_design import FiveBarDesign
from workbench.identification import drives as drive_files
from workbench.ocp import kinds
from workbench.recordings import recording
from workbench.sweep.spec import Sweep
from workbench.urdf import load_urdf

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "file_formats.md"
GETTERS = ("section", "sections", "number", "integer", "boolean", "string", "strings", "array",
           "raw")  # fmt: skip
ROBOT_OF = {"staubli_tx40": "staubli_tx40", "ur10": "ur10e"}  # models/ folder -> model name


@cache
def _chain(name: str):
    return models.load(name)


def _read_log_description(path: Path) -> None:
    recording.described_joints(path)  # what the command asks first, to load a whole robot
    recording.read_description(path, _chain(ROBOT_OF[path.parent.name]))


def _read_drive_file(path: Path) -> None:
    urdf = path.with_name(path.name.removesuffix(".drives.toml") + ".urdf")
    drive_files.read_drive_file(path, load_urdf(urdf).n)


@dataclasses.dataclass(frozen=True)
class Format:
    title: str  # the heading of its section in docs/file_formats.md
    modules: tuple[str, ...]  # the reader modules, relative to the repository
    files: tuple[str, ...]  # globs of its shipped files, relative to the repository
    read: Callable[[Path], None]


FORMATS = (
    Format(
        "Log description",
        ("workbench/recordings/recording.py",),
        ("models/*/identification*.toml", "models/ur10/calibration.toml"),
        _read_log_description,
    ),
    Format(
        "Drive file",
        ("workbench/identification/drives.py",),
        ("models/*/*.drives.toml",),
        _read_drive_file,
    ),
    Format(
        "Optimal-control problem file",
        ("workbench/ocp/kinds.py", "workbench/ocp/problem.py", "workbench/ocp/design.py"),
        ("problems/*_reach.toml", "problems/*_codesign.toml"),
        kinds.read,
    ),
    Format(
        "Excitation problem file",
        ("workbench/excitation/problem.py",),
        ("problems/excite_*.toml",),
        lambda path: read_problem(path, _chain("staubli_tx40")),
    ),
    Format("Sweep file", ("workbench/sweep/spec.py",), ("problems/*_sweep.toml",), Sweep.from_toml),
    Format(
        "Closure file",
        ("workbench/closed_chains/__init__.py",),
        ("models/delta/delta.toml", "models/*fivebar/*fivebar.toml", "models/fourbar/*.toml"),
        read_closure_file,
    ),
    Format(
        "Five-bar design file",
        ("workbench/fivebar_design.py",),
        ("models/fivebar/design.toml",),
        FiveBarDesign.from_toml,
    ),
)


def _shipped_files(fmt: Format) -> list[Path]:
    return sorted({p.resolve() for pattern in fmt.files for p in ROOT.glob(pattern)})


# ----------------------------------------------------------------------------- the document
@dataclasses.dataclass(frozen=True)
class Row:
    cell: str  # as written, for messages
    table: re.Pattern  # the Section name it matches ("" at the top level)
    key: re.Pattern
    literal: str | None  # the key when it is not a placeholder


def _pattern(text: str, array: bool = False) -> re.Pattern:
    parts = re.split(r"(<[^>]+>)", text)
    body = "".join(".+" if p.startswith("<") else re.escape(p) for p in parts)
    return re.compile(body + (r"\[\d+\]" if array else ""))


def _row(cell: str) -> Row:
    """A key cell: ```[table] key```, ```[[array]] key```, ```key```, or a table itself,
    ```[table]``` / ```[[array]]``` (the key ``table`` of its parent)."""
    heading = re.fullmatch(r"`\[\[?([^\]\s]+)\]\]?`", cell.strip())
    if heading:
        parent, _, key = heading.group(1).rpartition(".")
        return Row(cell.strip(), _pattern(parent), _pattern(key), None if "<" in key else key)
    match = re.fullmatch(r"`(?:(\[\[?)([^\]\s]+)\]\]?\s+)?([^`\s]+)`", cell.strip())
    assert match, f"docs/file_formats.md: key cell {cell!r} is not `[table] key` or `key`"
    brackets, table, key = match.groups()
    return Row(
        cell.strip(),
        _pattern(table or "", array=brackets == "[["),
        _pattern(key),
        None if "<" in key else key,
    )


def _doc_sections() -> dict[str, str]:
    sections, title, lines = {}, None, []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            if title is not None:
                sections[title] = "\n".join(lines)
            title, lines = line[3:].strip(), []
        else:
            lines.append(line)
    if title is not None:
        sections[title] = "\n".join(lines)
    return sections


def _key_rows(text: str) -> list[Row]:
    """The rows of every table whose first header cell is ``key``."""
    rows, in_keys, previous = [], False, ""
    for line in text.splitlines():
        if not line.startswith("|"):
            in_keys, previous = False, line
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not previous.startswith("|"):  # a header
            in_keys = cells[0].lower() == "key"
        elif in_keys and not set(cells[0]) <= {"-", ":"}:
            rows.append(_row(cells[0]))
        previous = line
    return rows


def _section_of(fmt: Format) -> str:
    sections = _doc_sections()
    found = [title for title in sections if title.split(" (")[0] == fmt.title]
    assert len(found) == 1, f"docs/file_formats.md needs one section '## {fmt.title} (...)'"
    return sections[found[0]]


# ----------------------------------------------------------------------------- the readers
def _source_keys(paths: tuple[str, ...]) -> set[str]:
    """String literals the modules pass as keys (module docstring)."""
    trees = [ast.parse((ROOT / p).read_text(encoding="utf-8")) for p in paths]
    key_params = {}  # function name -> index of its parameter named key (self excluded)
    keys = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args.posonlyargs + node.args.args
                names = [a.arg for a in args if a.arg not in ("self", "cls")]
                if "key" in names:
                    key_params[node.name] = names.index("key")
                    defaults = dict(
                        zip([a.arg for a in args][::-1], node.args.defaults[::-1], strict=False)
                    )
                    default = defaults.get("key")
                    if isinstance(default, ast.Constant) and isinstance(default.value, str):
                        keys.add(default.value)
    for tree in trees:
        for node in ast.walk(tree):
            # for c in ("x", "y", "z"): ... key = c: the literals the loop binds
            loops = [(g.target, g.iter) for g in getattr(node, "generators", ())]  # comprehensions
            if isinstance(node, ast.For):
                loops.append((node.target, node.iter))
            for target, values in loops:
                if isinstance(target, ast.Name) and isinstance(values, ast.Tuple | ast.List):
                    bound = [a for a in _key_arguments(node, key_params) if isinstance(a, ast.Name)]
                    if any(a.id == target.id for a in bound):
                        keys |= {v.value for v in values.elts if isinstance(v, ast.Constant)}
            keys |= {
                a.value
                for a in _key_arguments(node, key_params, deep=False)
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            }
    return keys


def _key_arguments(node: ast.AST, key_params: dict[str, int], deep: bool = True) -> list[ast.expr]:
    """The arguments in key position of the calls in ``node`` (``deep``) or of ``node``."""
    found = []
    for call in ast.walk(node) if deep else [node]:
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if isinstance(func, ast.Attribute) and name in GETTERS:
            index = 0
        elif name in key_params:
            index = key_params[name]  # positions after self, as in the call
        else:
            continue
        found += [kw.value for kw in call.keywords if kw.arg == "key"]
        if len(call.args) > index:
            found.append(call.args[index])
    return found


@contextlib.contextmanager
def _recording() -> Iterator[list[tuple[str, str, str]]]:
    """Section's getters wrapped: (source, table, key) of every key asked, in a list."""
    records: list[tuple[str, str, str]] = []

    def recorder(original):
        def getter(self, key, *args, **kwargs):
            records.append((self.source, self.name, key))
            return original(self, key, *args, **kwargs)

        return getter

    with pytest.MonkeyPatch.context() as patch:
        for name in GETTERS:
            patch.setattr(config.Section, name, recorder(getattr(config.Section, name)))
        yield records


def _by_file(records: list[tuple[str, str, str]]) -> dict[Path, set[tuple[str, str]]]:
    """The (table, key) pairs of the records by the TOML file their source names."""
    by_file: dict[Path, set[tuple[str, str]]] = {}
    for source, table, key in records:
        file = re.match(r"(.*?\.toml)", source)
        assert file, f"a Section of {source!r} does not name a TOML file"
        by_file.setdefault(Path(file.group(1)).resolve(), set()).add((table, key))
    return by_file


def _undocumented(pairs: set[tuple[str, str]], rows: list[Row]) -> list[str]:
    return sorted(
        f"[{table}] {key}"
        for table, key in pairs
        if not any(r.table.fullmatch(table) and r.key.fullmatch(key) for r in rows)
    )


@pytest.fixture(scope="module")
def asked() -> dict[Path, set[tuple[str, str]]]:
    """(table, key) asked by the readers of every shipped file, by the file they came from."""
    with _recording() as records:
        for fmt in FORMATS:
            for path in _shipped_files(fmt):
                fmt.read(path)
    return _by_file(records)


def _format_of(path: Path) -> Format:
    owners = [fmt for fmt in FORMATS if path in _shipped_files(fmt)]
    assert len(owners) == 1, f"{path}: read by {len(owners)} formats of this test"
    return owners[0]


# ----------------------------------------------------------------------------- the tests
def test_the_getters_wrapped_are_every_getter_of_section():
    taking_key = {
        name
        for name, member in vars(config.Section).items()
        if not name.startswith("_")
        and callable(member)
        and list(inspect.signature(member).parameters)[1:2] == ["key"]
    }
    assert taking_key - {"where"} == set(GETTERS)


def test_every_shipped_toml_file_belongs_to_one_format():
    shipped = {
        p.resolve() for d in ("problems", "models", "examples") for p in (ROOT / d).rglob("*.toml")
    }
    claimed = [p for fmt in FORMATS for p in _shipped_files(fmt)]
    assert len(claimed) == len(set(claimed)), "a shipped file is claimed by two formats"
    assert set(claimed) == shipped


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.title)
def test_every_key_a_reader_asks_is_documented(fmt, asked):
    rows = _key_rows(_section_of(fmt))
    assert rows, f"docs/file_formats.md: '{fmt.title}' has no key table"
    missing = [
        f"{path.relative_to(ROOT)}: {pair}"
        for path, pairs in asked.items()
        if _format_of(path) is fmt
        for pair in _undocumented(pairs, rows)
    ]
    assert not missing, "asked by the reader, not in docs/file_formats.md:\n" + "\n".join(missing)
    assert any(_format_of(path) is fmt for path in asked), f"no shipped {fmt.title} was read"


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.title)
def test_every_documented_key_is_read(fmt, asked):
    recorded = {key for path, pairs in asked.items() if _format_of(path) is fmt for _, key in pairs}
    known = recorded | _source_keys(fmt.modules)
    stale = [r.cell for r in _key_rows(_section_of(fmt)) if r.literal and r.literal not in known]
    assert not stale, f"{fmt.title}: documented keys no reader asks for: {stale}"


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.title)
def test_every_key_in_the_reader_source_is_documented(fmt):
    """Keys by name (the syntax tree does not say which table): each in a row of its own."""
    documented = {r.literal for r in _key_rows(_section_of(fmt))}
    undocumented = sorted(_source_keys(fmt.modules) - documented)
    assert not undocumented, f"{fmt.title}: keys in {fmt.modules} not documented: {undocumented}"


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.title)
def test_each_format_names_its_reader_modules(fmt):
    text = _section_of(fmt)
    absent = [m for m in fmt.modules if f"`{m}`" not in text]
    assert not absent, f"docs/file_formats.md '{fmt.title}' does not name {absent}"


def test_every_module_and_file_the_document_names_exists():
    text = DOC.read_text(encoding="utf-8")
    paths = set(re.findall(r"`((?:workbench|problems|models|examples|tests)/[\w./-]+)`", text))
    dotted = set(re.findall(r"`(workbench(?:\.\w+)+)`", text))
    for name in dotted:  # a module, or a name in one: workbench.config.Section
        parts = name.split(".")
        assert any(
            (ROOT / Path(*parts[:k])).with_suffix(".py").is_file()
            or (ROOT / Path(*parts[:k]) / "__init__.py").is_file()
            for k in range(len(parts), 1, -1)
        ), f"docs/file_formats.md names {name}, which is not a module"
    missing = sorted(p for p in paths if "<" not in p and not (ROOT / p).exists())
    assert paths and not missing, f"docs/file_formats.md names missing files: {missing}"


def test_a_written_drive_file_is_documented(tmp_path):
    """The drive file calibrate writes, with every term, reads back with documented keys."""
    n = 6
    drives = drive_files.Drives(
        n,
        tuple(drive_files.TERMS),
        np.eye(n) + np.eye(n, k=-1),
        stribeck_speed=np.full(n, 0.1),
        delay=2e-3,
    )
    path = tmp_path / "calibrated.drives.toml"
    path.write_text(
        drive_files.drive_file_text(drives, np.ones(len(drives.names))), encoding="utf-8"
    )
    with _recording() as records:
        _, values = drive_files.read_drive_file(path, n)
    assert set(values) == set(drives.names)
    asked = _by_file(records)
    assert list(asked) == [path.resolve()]
    assert not _undocumented(asked[path.resolve()], _key_rows(_section_of(FORMATS[1])))


def _subsections() -> dict[str, str]:
    """Each '## ' section, and each '### ' subsection on its own, by heading."""
    found = {}
    for title, text in _doc_sections().items():
        parts = re.split(r"^### (.+)$", text, flags=re.M)
        found[title] = parts[0]
        found |= {f"{title} / {parts[k]}": parts[k + 1] for k in range(1, len(parts), 2)}
    return found


def test_output_files_and_columns_are_spelled_as_the_writers_spell_them():
    """Every name in a table of files or columns is in the source of a module its section
    names (``<...>`` parts, chosen at run time, left out)."""
    checked, wrong = 0, []
    for title, text in _subsections().items():
        modules = set(re.findall(r"`(workbench/[\w/]+\.py)`", text))
        source = "".join((ROOT / m).read_text(encoding="utf-8") for m in modules)
        in_table, previous = False, ""
        for line in text.splitlines():
            if not line.startswith("|"):
                in_table, previous = False, line
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not previous.startswith("|"):
                in_table = cells[0].lower() in ("file", "column")
            elif in_table and not set(cells[0]) <= {"-", ":"}:
                for name in re.findall(r"`([^`]+)`", line):
                    pieces = [p for p in re.split(r"<[^>]+>|\.\.\.?", name) if p.strip(" ,.")]
                    if not modules or any(p not in source for p in pieces):
                        wrong.append(f"{title}: `{name}` not in {sorted(modules)}")
                    checked += 1
            previous = line
    assert not wrong, "\n".join(wrong)
    assert checked > 50


def _write_log_table(folder: Path) -> None:
    """log.csv for the log description's example: t, q1, q2, tau1, tau2, 10 s at 100 Hz."""
    t = np.arange(1001) * 0.01
    q = np.column_stack([np.sin(t), 0.5 * np.cos(0.7 * t)])
    tau = np.column_stack([2.0 * np.cos(t) + 0.3, np.sin(1.3 * t)])
    table = np.column_stack([t, q, tau])
    np.savetxt(folder / "log.csv", table, delimiter=",", header="t,q1,q2,tau1,tau2", comments="")


def _beside(source: Path, folder: Path) -> None:
    for path in source.iterdir():
        if path.suffix != ".toml":
            (folder / path.name).symlink_to(path)


EXAMPLES: dict[str, Callable[[Path], None]] = {  # format -> reading its example at path
    "Log description": lambda path: (
        _write_log_table(path.parent),
        recording.read_description(path, _chain("planar_2r")),
    ),
    "Drive file": lambda path: drive_files.read_drive_file(path, 1),
    "Optimal-control problem file": kinds.read,
    "Excitation problem file": lambda path: read_problem(path, _chain("staubli_tx40")),
    "Sweep file": lambda path: (
        (path.parent / "fivebar_reach.toml").write_bytes(
            (ROOT / "problems" / "fivebar_reach.toml").read_bytes()
        ),
        Sweep.from_toml(path),
    ),
    "Closure file": lambda path: (
        _beside(ROOT / "models" / "planar_fivebar", path.parent),
        read_closure_file(path),
    ),
    "Five-bar design file": FiveBarDesign.from_toml,
}


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.title)
def test_the_documented_example_reads_with_documented_keys(fmt, tmp_path):
    blocks = re.findall(r"```toml\n(.*?)```", _section_of(fmt), flags=re.S)
    assert len(blocks) == 1, f"docs/file_formats.md '{fmt.title}' needs one TOML example"
    path = tmp_path / "example.toml"
    path.write_text(blocks[0], encoding="utf-8")
    with _recording() as records:
        EXAMPLES[fmt.title](path)
    asked = _by_file(records)
    assert not _undocumented(asked[path.resolve()], _key_rows(_section_of(fmt)))


def test_a_written_payload_table_reads_as_documented(tmp_path):
    """payload.toml (workbench payload identify) appended to the documented log description
    reads back with documented keys, as the known payload of the description."""
    from workbench import inertia
    from workbench.calibration.fitting.payload import payload_table

    fmt = FORMATS[0]
    (example,) = re.findall(r"```toml\n(.*?)```", _section_of(fmt), flags=re.S)
    phi = inertia.phi_from_com(0.8, np.array([0.01, 0.02, 0.05]), np.diag([2e-3, 3e-3, 1e-3]))
    path = tmp_path / "with_payload.toml"
    path.write_text(example + "\n" + payload_table(phi, "link_2"), encoding="utf-8")
    _write_log_table(tmp_path)
    with _recording() as records:
        log = recording.read_description(path, _chain("planar_2r"))
    assert not _undocumented(_by_file(records)[path.resolve()], _key_rows(_section_of(fmt)))
    link, read_phi = log.payload
    assert link == 1
    np.testing.assert_allclose(read_phi, phi, rtol=1e-12, atol=1e-15)
