"""Atomic output: files appear whole or not at all; inputs are never touched.

Every writer in the project goes through :func:`atomic_write` (one file) or
:func:`results_directory` (a set of files that lands together). Readers of
user files check them with :func:`check_input_file` (a FIFO, a device or a
directory is "not a regular file"), commands their outputs with
:func:`check_not_input` (an output never replaces an input).

Interrupts leave nothing behind: the command line turns SIGTERM into
:class:`Terminated` (a :class:`KeyboardInterrupt`, so that every ``finally``
block runs and removes its temporary files, :func:`raise_on_sigterm`), and a
process killed outright (SIGKILL, power loss) leaves a staging folder named
after its process id, which the next :func:`results_directory` beside it
removes once that process is gone. A library that catches the interrupt
(IPOPT inside a callback) is followed by :func:`reraise_interrupt`, which
raises it again as the signal it was.

JSON results are written by :func:`json_text`: NaN and infinities (a figure
that could not be computed) become ``null``, which every JSON parser reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it over ``path``.

    The rename is atomic on POSIX file systems, so readers see either the old
    file or the complete new one. On any exception the temporary file is removed.
    An existing ``path`` that is not a regular file (a FIFO, a device such as
    ``/dev/null``, a socket, or a symbolic link to one) is refused, never replaced
    (:func:`check_replaceable`).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkbenchError(f"cannot create output directory {path.parent}: {exc}") from exc
    check_replaceable(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise WorkbenchError(f"cannot write {path}: {exc.strerror or exc}") from None
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        tmp.chmod(0o666 & ~_umask())  # mkstemp creates 0600; give the file the usual mode
        os.replace(tmp, path)
    except OSError as exc:
        raise WorkbenchError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    return atomic_write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def json_ready(value: Any) -> Any:
    """``value`` with NumPy scalars and arrays as numbers and lists, NaN or inf as None (JSON
    has neither)."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_ready(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def json_text(value: Any) -> str:
    """``value`` as JSON (:func:`json_ready`; two-space indent, a final newline)."""
    return json.dumps(json_ready(value), indent=2, allow_nan=False) + "\n"


def check_output_directory(out: str | os.PathLike, option: str = "--out") -> Path:
    """Fail early, before any computation, when ``out`` cannot become a results directory."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise WorkbenchError(f"{option} {out} exists and is not a directory")
    _check_writable_parent(out, option)
    return out


def check_output_file(path: str | os.PathLike, option: str = "--out") -> Path:
    """Fail early when ``path`` cannot become a file: a directory, or no place to write it."""
    text = os.fspath(path)
    path = Path(path)
    if path.is_dir() or text.endswith(("/", os.sep)):
        raise WorkbenchError(f"{option} {text} is a directory; give a file name")
    check_replaceable(path, option)
    _check_writable_parent(path.parent, option, shown=path)
    return path


def check_replaceable(path: str | os.PathLike, option: str = "output") -> Path:
    """``path`` when nothing is there or it is a regular file (or a link to one): the files an
    output may replace. A FIFO, a device (``/dev/null``), a socket or a link to one is refused:
    renaming a new file over it would replace the special file itself (as root, the machine's
    ``/dev/null``), and writing into it is no result."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path  # nothing there, or a dangling link (the rename replaces the link)
    except OSError as exc:
        raise WorkbenchError(f"{option} {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise WorkbenchError(f"{option} {path} is a directory; give a file name")
    if not stat.S_ISREG(mode):
        raise WorkbenchError(
            f"{option} {path} is {_special_kind(mode)}, not a regular file; outputs only "
            "replace regular files"
        )
    return path


def _check_writable_parent(out: Path, option: str, shown: Path | None = None) -> None:
    """Raise unless the nearest existing directory at or above ``out`` is writable."""
    shown = out if shown is None else shown
    existing = out if out.exists() else next((p for p in out.parents if p.exists()), Path("."))
    if not existing.is_dir():
        raise WorkbenchError(f"{option} {shown}: {existing} is not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".workbench-probe.", dir=existing))
    except OSError as exc:
        raise WorkbenchError(
            f"{option} {shown}: cannot write in {existing}: {exc.strerror or exc}"
        ) from None


def check_input_file(path: str | os.PathLike, what: str = "file") -> Path:
    """``path`` as a Path when it names a regular file; else an error saying what it is.

    A missing path is "not found"; a directory, a FIFO, a device or a socket
    is "not a regular file" (reading a FIFO would block, a device may never end).
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise WorkbenchError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise WorkbenchError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else _special_kind(mode)
        raise WorkbenchError(f"{what} {path} is {kind}, not a regular file")
    return path


_SPECIAL = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _special_kind(mode: int) -> str:
    return next((name for test, name in _SPECIAL if test(mode)), "a special file")


def check_not_input(
    output: str | os.PathLike,
    *inputs: str | os.PathLike | None,
    option: str = "--out",
    directory: bool = False,
) -> Path:
    """Refuse an output path that would replace one of the command's ``inputs``.

    Paths are compared after resolving symbolic links and ``..``. An output
    file must not be an input (file or folder); an output ``directory``
    (a results folder, replaced whole) must not be an input nor hold one.
    ``None`` inputs (options not given) are skipped.
    """
    output = Path(output)
    target = output.resolve()
    for given in inputs:
        if given is None:
            continue
        source = Path(given).resolve()
        if source == target or (directory and source.is_relative_to(target)):
            where = "is" if source == target else "holds"
            raise WorkbenchError(
                f"{option} {output} {where} the input {given}; inputs are never overwritten, "
                "choose another output"
            )
    return output


MANIFEST_SUFFIX = ".workbench-files"  # beside DIR: .DIR.workbench-files lists DIR's results


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that clean-up code runs as for Ctrl-C."""


_received: list[type[KeyboardInterrupt]] = []  # the interrupts the handlers below raised


def _raise_terminated(signum, frame) -> None:
    _received.append(Terminated)
    raise Terminated()


def _raise_interrupted(signum, frame) -> None:
    _received.append(KeyboardInterrupt)
    raise KeyboardInterrupt()


def raise_on_sigterm() -> None:
    """Make SIGTERM raise :class:`Terminated` and Ctrl-C KeyboardInterrupt in the main thread,
    remembering each (:func:`reraise_interrupt`); the command line does this."""
    signal.signal(signal.SIGTERM, _raise_terminated)
    signal.signal(signal.SIGINT, _raise_interrupted)


_settled_on_publish: list[bool] = []  # set by settle_on_publish


def settle_on_publish() -> None:
    """Ignore Ctrl-C and SIGTERM from the moment a results directory is published
    (:func:`results_directory`): what is left of the process is reporting and exiting, and
    an interrupt then reported a run as interrupted whose results had replaced the previous
    ones; the command line does this (a library caller that publishes many directories
    does not)."""
    _settled_on_publish.append(True)


def interrupts_received() -> int:
    """How many SIGTERM and Ctrl-C the handlers of :func:`raise_on_sigterm` have raised."""
    return len(_received)


def reraise_interrupt(since: int, swallowed: bool = False) -> None:
    """Raise again an interrupt that a library caught (IPOPT catches exceptions in callbacks).

    ``since`` is :func:`interrupts_received` before the library call: a later
    SIGTERM raises :class:`Terminated`, a later Ctrl-C KeyboardInterrupt. With
    ``swallowed`` (the library reports an exception it caught that was no
    error of ours) KeyboardInterrupt is raised even when no handler of this
    module saw the signal (Python's own Ctrl-C handler, outside the command line).
    """
    if len(_received) > since:
        raise _received[-1]()
    if swallowed:
        raise KeyboardInterrupt


@contextlib.contextmanager
def results_directory(out: str | os.PathLike) -> Iterator[Path]:
    """Stage a results directory and publish it only if the block succeeds.

    Yields a fresh staging directory beside ``out``. When the block exits
    normally the staged files replace the results of the previous run in
    ``out``: a directory that holds only what its last run listed (in the
    hidden file ``.OUT.workbench-files`` beside it), or nothing, is swapped
    for the staged one as a whole, with two renames; a directory that also
    holds other files (a user's, or results written before the list existed)
    keeps those, loses the files of the last run that this run does not
    write, and gets each new file by an atomic rename. When the block raises (an error, Ctrl-C or
    SIGTERM) the staging directory is deleted and ``out`` is left exactly as
    it was. Stale staging directories of dead processes beside ``out`` are
    removed first. After :func:`settle_on_publish`, a published directory is final: the
    process ignores Ctrl-C and SIGTERM from then on.
    """
    out = Path(os.path.abspath(check_output_directory(out)))  # "." has no name to stage beside
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkbenchError(f"cannot create output directory {out.parent}: {exc}") from exc
    sweep_stale_staging(out)
    stage = Path(
        tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.", suffix=".staging", dir=out.parent)
    )
    try:
        yield stage
        _publish(stage, out)
        if _settled_on_publish and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def sweep_stale_staging(out: Path) -> None:
    """Remove staging directories beside ``out`` left by processes that no longer run."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.(\d+)\.[^.]+\.staging")
    for stale in out.parent.iterdir():
        match = pattern.fullmatch(stale.name)
        if match and stale.is_dir() and not _running(int(match[1])):
            shutil.rmtree(stale, ignore_errors=True)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    return True


def _manifest(out: Path) -> Path:
    return out.parent / f".{out.name}{MANIFEST_SUFFIX}"


def _files(directory: Path) -> set[str]:
    """Paths of the entries under ``directory`` that are not folders (files, links, FIFOs...),
    relative to it."""
    return {
        str(p.relative_to(directory))
        for p in directory.rglob("*")
        if p.is_symlink() or not p.is_dir()
    }


def _signature(out: Path, names: list[str]) -> str:
    """The first line of ``out``'s list of files: a digest of the folder's resolved path and
    the names, so that a list this module did not write for this folder (written by hand,
    copied from another folder, edited) is not trusted."""
    digest = hashlib.sha256("\n".join([str(out.resolve()), *names]).encode("utf-8"))
    return f"# workbench results list {digest.hexdigest()}"


def _manifest_text(out: Path, names: set[str]) -> str:
    ordered = sorted(names)
    return "".join(f"{line}\n" for line in [_signature(out, ordered), *ordered])


def _previous_files(out: Path) -> set[str]:
    """The files the last run listed for ``out``: none without a readable list that this module
    wrote for this folder, and only names of files inside it (not absolute, no ``..``, no
    symbolic link leading out of the folder)."""
    try:
        lines = _manifest(out).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return set()
    if not lines or lines[0] != _signature(out, lines[1:]):
        return set()
    return {name for name in lines[1:] if _inside(out, name)}


def _inside(out: Path, name: str) -> bool:
    """Whether ``out/name`` is a relative name that stays in ``out`` once links are resolved."""
    relative = Path(name)
    if not name or relative.is_absolute() or ".." in relative.parts:
        return False
    return (out / relative).resolve().is_relative_to(out.resolve())


def _publish(stage: Path, out: Path) -> None:
    """Move the staged results into ``out`` (see :func:`results_directory`)."""
    previous = _previous_files(out)
    written = _files(stage)
    for name in written:  # before anything changes: a FIFO or device there stays
        check_replaceable(out / name, "results folder entry")
    atomic_write_text(_manifest(out), _manifest_text(out, written))
    if not out.exists() or (
        not out.is_symlink() and _files(out) <= previous and not _holds_cwd(out)
    ):
        _swap(stage, out)
        return
    for name in sorted(previous - written):
        old = out / name
        if old.is_symlink() or not old.is_dir():  # a folder there now is not the list's file
            old.unlink(missing_ok=True)
    for name in sorted(written):
        target = out / name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(stage / name, target)


def _holds_cwd(out: Path) -> bool:
    """Whether the working directory is ``out`` or inside it (it must not be moved away)."""
    return Path.cwd().resolve().is_relative_to(out.resolve())


def _swap(stage: Path, out: Path) -> None:
    """Put ``stage`` in place of ``out`` (absent, or holding only a previous run's results)."""
    stage.chmod(0o777 & ~_umask())  # mkdtemp creates 0700; give the folder the usual mode
    if not out.exists():
        os.rename(stage, out)
        return
    aside = Path(
        tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.", suffix=".staging", dir=out.parent)
    )
    os.rename(out, aside / "old")
    try:
        os.rename(stage, out)
    except BaseException:
        os.rename(aside / "old", out)
        raise
    finally:
        shutil.rmtree(aside, ignore_errors=True)
