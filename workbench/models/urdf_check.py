"""A URDF file checked before Pinocchio's parser (urdfdom) sees it.

urdfdom reads ``nan``, ``inf`` and ``1e999`` as numbers, accepts a zero
joint axis and ``lower > upper``, and on a joint that is its own ancestor or
ten thousand joints deep it loops, recurses or allocates without bound.
:func:`check_urdf` parses the file first with Python's expat (entity
declarations refused, so no entity expansion and no external entity is ever
read) keeping line numbers, and raises :class:`~workbench.errors.WorkbenchError`
naming the file, the line, the link or joint and the attribute for:

* a number that does not parse or is not finite, in every numeric attribute
  urdfdom reads: ``origin`` xyz/rpy, ``axis`` xyz, ``mass`` value,
  ``inertia`` ixx..izz, ``limit`` lower/upper/effort/velocity,
  ``dynamics`` damping/friction, ``mimic`` multiplier/offset,
  ``calibration``, ``safety_controller`` and geometry sizes, with the count
  of numbers each must hold;
* a joint axis shorter than :data:`MIN_AXIS_LENGTH` (zero, or so short that its
  squared length underflows and the parsers normalise it to NaN), a limit with lower > upper;
* joints that do not form one tree: a joint whose parent or child link does
  not exist, a link that is the child of two joints, a joint whose child is
  its parent or an ancestor of it, or more than one root link;
* more than :data:`MAX_JOINTS` joints, or a file over :data:`MAX_BYTES`.

:func:`parse_quietly` runs a Pinocchio parse with the C-level standard
output and error (file descriptors 1 and 2) sent to a temporary file, so that
urdfdom's console messages are not printed; when the parse fails they become
part of the error. Continuous, fixed, floating and planar joints pass here
(which joints a Chain supports is decided on conversion).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import re
import sys
import tempfile
import xml.parsers.expat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from workbench.errors import WorkbenchError, excerpt
from workbench.io import check_input_file

MAX_JOINTS = 2000  # joints of one URDF; a 2,000-joint chain loads in about 0.7 s and 220 MB
MAX_BYTES = 100_000_000  # a URDF larger than this is refused before it is read
JOINT_TYPES = ("revolute", "continuous", "prismatic", "fixed", "floating", "planar")

# (element, attribute) -> how many numbers it holds
NUMBERS = {
    ("origin", "xyz"): 3, ("origin", "rpy"): 3, ("axis", "xyz"): 3,
    ("mass", "value"): 1,
    **{("inertia", k): 1 for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")},
    **{("limit", k): 1 for k in ("lower", "upper", "effort", "velocity")},
    ("dynamics", "damping"): 1, ("dynamics", "friction"): 1,
    ("mimic", "multiplier"): 1, ("mimic", "offset"): 1,
    ("calibration", "rising"): 1, ("calibration", "falling"): 1,
    **{("safety_controller", k): 1
       for k in ("soft_lower_limit", "soft_upper_limit", "k_position", "k_velocity")},
    ("box", "size"): 3, ("cylinder", "radius"): 1, ("cylinder", "length"): 1,
    ("sphere", "radius"): 1, ("mesh", "scale"): 3,
}  # fmt: skip
MIN_AXIS_LENGTH = 1e-6  # shorter axes underflow when squared or are typing errors
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")

T = TypeVar("T")


@dataclass
class _Element:
    tag: str
    attrib: dict[str, str]
    line: int
    children: list[_Element] = field(default_factory=list)

    def find(self, tag: str) -> _Element | None:
        return next((c for c in self.children if c.tag == tag), None)


def check_urdf(path: str | os.PathLike) -> None:
    """Raise a WorkbenchError for the first problem of the URDF at ``path`` (module docstring)."""
    path = check_input_file(path, "URDF file")
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise WorkbenchError(f"URDF file {path} has {size} bytes; at most {MAX_BYTES} are read")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WorkbenchError(f"cannot read URDF file {path}: {exc.strerror or exc}") from None
    robot = _parse(path, data)
    if robot.tag != "robot":
        raise WorkbenchError(f"{path}: line {robot.line}: the root element is <{robot.tag}>, "
                             "not <robot>")  # fmt: skip
    links = _named(path, robot, "link")
    joints = _named(path, robot, "joint")
    if len(joints) > MAX_JOINTS:
        raise WorkbenchError(
            f"{path}: {len(joints)} joints; at most {MAX_JOINTS} are loaded "
            "(memory and time grow faster than the joint count)"
        )
    for name, link in links.items():
        _check_numbers(path, link, f"link '{name}'")
    for name, joint in joints.items():
        _check_joint(path, name, joint)
    _check_tree(path, links, joints)


def _parse(path: Path, data: bytes) -> _Element:
    """The element tree of ``data`` with line numbers; no entity is declared or expanded."""
    parser = xml.parsers.expat.ParserCreate()
    root = _Element("", {}, 0)
    stack = [root]

    def start(tag: str, attrib: dict[str, str]) -> None:
        element = _Element(tag, attrib, parser.CurrentLineNumber)
        stack[-1].children.append(element)
        stack.append(element)

    def end(tag: str) -> None:
        stack.pop()

    def entity(name: str, *args) -> None:
        raise WorkbenchError(
            f"{path}: line {parser.CurrentLineNumber}: the entity declaration "
            f"{excerpt(name)} is refused (URDF files need no entities)"
        )

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.EntityDeclHandler = entity
    parser.UnparsedEntityDeclHandler = entity
    try:
        parser.Parse(data, True)
    except xml.parsers.expat.ExpatError as exc:
        raise WorkbenchError(
            f"{path}: line {exc.lineno}, column {exc.offset + 1}: not well-formed XML "
            f"({xml.parsers.expat.ErrorString(exc.code)})"
        ) from None
    if not root.children:
        raise WorkbenchError(f"{path}: no XML element")
    return root.children[0]


def _named(path: Path, robot: _Element, tag: str) -> dict[str, _Element]:
    """The robot's ``tag`` elements by name; a missing or repeated name is an error."""
    found: dict[str, _Element] = {}
    for element in robot.children:
        if element.tag != tag:
            continue
        name = element.attrib.get("name")
        if not name:
            raise WorkbenchError(f"{path}: line {element.line}: <{tag}> without a name")
        if name in found:
            raise WorkbenchError(
                f"{path}: line {element.line}: {tag} {excerpt(name)} is defined twice "
                f"(first on line {found[name].line})"
            )
        found[name] = element
    return found


def _check_numbers(path: Path, owner: _Element, who: str) -> dict[tuple[str, str], list[float]]:
    """Check every numeric attribute under ``owner``; return its direct children's values."""
    values: dict[tuple[str, str], list[float]] = {}
    pending = [(child, True) for child in owner.children]
    while pending:
        element, direct = pending.pop()
        pending.extend((child, False) for child in element.children)
        for attribute, text in element.attrib.items():
            count = NUMBERS.get((element.tag, attribute))
            if count is None:
                continue
            numbers = _numbers(text, count)
            if numbers is None:
                plural = "a finite number" if count == 1 else f"{count} finite numbers"
                raise WorkbenchError(
                    f"{path}: line {element.line}: {who}: <{element.tag}> {attribute} = "
                    f"{excerpt(text)} must be {plural}"
                )
            if direct:
                values[(element.tag, attribute)] = numbers
    return values


def _numbers(text: str, count: int) -> list[float] | None:
    """``count`` finite numbers separated by white space, or None."""
    words = text.split()
    if len(words) != count or not all(_NUMBER.fullmatch(w) for w in words):
        return None
    numbers = [float(w) for w in words]
    return numbers if all(math.isfinite(x) for x in numbers) else None


def _check_joint(path: Path, name: str, joint: _Element) -> None:
    who = f"joint '{name}'"
    kind = joint.attrib.get("type")
    if kind not in JOINT_TYPES:
        raise WorkbenchError(
            f"{path}: line {joint.line}: {who}: type {excerpt(kind)} is not one of "
            f"{', '.join(JOINT_TYPES)}"
        )
    for end in ("parent", "child"):
        element = joint.find(end)
        if element is None or not element.attrib.get("link"):
            raise WorkbenchError(f"{path}: line {joint.line}: {who} has no <{end} link=...>")
    values = _check_numbers(path, joint, who)
    axis = values.get(("axis", "xyz"))
    if axis is not None and kind not in ("fixed", "floating"):
        length = math.sqrt(sum(x * x for x in axis))  # as the parsers normalise it
        if not length >= MIN_AXIS_LENGTH:
            line = joint.find("axis").line
            shown = "zero length" if not any(axis) else f"length {length:.3g}"
            raise WorkbenchError(
                f"{path}: line {line}: {who}: <axis> xyz has {shown}, too short to be a "
                f"direction (at least {MIN_AXIS_LENGTH:g}; give a unit vector)"
            )
    lower, upper = values.get(("limit", "lower")), values.get(("limit", "upper"))
    if lower is not None and upper is not None and lower[0] > upper[0]:
        line = joint.find("limit").line
        raise WorkbenchError(
            f"{path}: line {line}: {who}: <limit> lower = {lower[0]:g} is above upper = "
            f"{upper[0]:g}"
        )


def _check_tree(path: Path, links: dict[str, _Element], joints: dict[str, _Element]) -> None:
    """One root link and every other link the child of exactly one joint, no cycle."""
    parent_joint: dict[str, str] = {}
    parent_link: dict[str, str] = {}
    for name, joint in joints.items():
        parent = joint.find("parent").attrib["link"]
        child = joint.find("child").attrib["link"]
        for end, link in (("parent", parent), ("child", child)):
            if link not in links:
                raise WorkbenchError(
                    f"{path}: line {joint.find(end).line}: joint '{name}': {end} link "
                    f"{excerpt(link)} is not defined"
                )
        if parent == child:
            raise WorkbenchError(
                f"{path}: line {joint.line}: joint '{name}' has link '{child}' as both its "
                "parent and its child"
            )
        if child in parent_joint:
            first = parent_joint[child]
            raise WorkbenchError(
                f"{path}: line {joint.line}: link '{child}' is the child of joint '{name}' and "
                f"of joint '{first}' (line {joints[first].line}); a link has one parent joint"
            )
        parent_joint[child] = name
        parent_link[child] = parent
    _check_acyclic(path, links, joints, parent_link, parent_joint)
    roots = [name for name in links if name not in parent_joint]
    if len(roots) != 1:
        listing = ", ".join(f"'{r}' (line {links[r].line})" for r in roots[:5])
        more = "" if len(roots) <= 5 else f" and {len(roots) - 5} more"
        raise WorkbenchError(
            f"{path}: {len(roots)} root links {listing}{more}; a URDF is one tree with one root"
        )


def _check_acyclic(path, links, joints, parent_link, parent_joint) -> None:
    """Walk up from every link once (linear time, no recursion); a walk that meets itself is a
    cycle, named by a joint on it."""
    done: set[str] = set()
    for start in links:
        on_path: set[str] = set()
        link = start
        while link in parent_link and link not in done:
            if link in on_path:
                joint = parent_joint[link]
                raise WorkbenchError(
                    f"{path}: line {joints[joint].line}: joint '{joint}' has as its child link "
                    f"'{link}', an ancestor of its parent link '{parent_link[link]}': the joints "
                    "form a loop, not a tree"
                )
            on_path.add(link)
            link = parent_link[link]
        done.update(on_path)


def parse_quietly(path: str | os.PathLike, parse: Callable[[], T]) -> T:
    """``parse()`` (a Pinocchio URDF parse of ``path``) with urdfdom's console output captured.

    Errors (RuntimeError, ValueError) become a WorkbenchError naming the
    file, with what the parser printed.
    """
    with _captured_output() as output:
        try:
            return parse()
        except (RuntimeError, ValueError) as exc:
            failure, printed = exc, " ".join(output().split())
    said = f"; the parser printed: {printed[:500]}" if printed else ""
    raise WorkbenchError(f"cannot load URDF {path}: {failure}{said}") from failure


@contextlib.contextmanager
def _captured_output() -> Iterator[Callable[[], str]]:
    """Send file descriptors 1 and 2 to a temporary file; yield a reader of what it got."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    libc = ctypes.CDLL(None)
    with tempfile.TemporaryFile() as sink:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)

            def read() -> str:
                libc.fflush(None)
                sink.seek(0)
                return sink.read().decode("utf-8", "replace")

            yield read
        finally:
            libc.fflush(None)  # C stdio buffers go to the sink, not to the restored streams
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
