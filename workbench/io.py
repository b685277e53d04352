"""Atomic output: files appear whole or not at all; inputs are never touched.

Every writer in the project goes through :func:`atomic_write` (one file) or
:func:`results_directory` (a set of files that lands together).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from workbench.errors import WorkbenchError


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then rename it over ``path``.

    The rename is atomic on POSIX file systems, so readers see either the old
    file or the complete new one. On any exception the temporary file is removed.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkbenchError(f"cannot create output directory {path.parent}: {exc}") from exc
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        tmp.chmod(0o666 & ~_umask())  # mkstemp creates 0600; give the file the usual mode
        os.replace(tmp, path)
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


def check_output_directory(out: str | os.PathLike) -> Path:
    """Fail early, before any computation, when ``out`` cannot become a results directory."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise WorkbenchError(f"--out {out} exists and is not a directory")
    parent = out if out.exists() else next((p for p in out.parents if p.exists()), Path("."))
    if not parent.is_dir():
        raise WorkbenchError(f"--out {out}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise WorkbenchError(f"--out {out}: no permission to write in {parent}")
    return out


@contextlib.contextmanager
def results_directory(out: str | os.PathLike) -> Iterator[Path]:
    """Stage a results directory and publish it only if the block succeeds.

    Yields a fresh staging directory beside ``out``. When the block exits
    normally every staged file is moved into ``out`` (created if needed) with
    an atomic rename, replacing files of the same name; when it raises, the
    staging directory is deleted and ``out`` is left exactly as it was.
    """
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkbenchError(f"cannot create output directory {out.parent}: {exc}") from exc
    stage = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".staging", dir=out.parent))
    try:
        yield stage
        out.mkdir(parents=True, exist_ok=True)
        for item in sorted(stage.rglob("*")):
            if item.is_file():
                target = out / item.relative_to(stage)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(item, target)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
