"""CasADi SX functions compiled to C once and loaded from a disk cache.

CasADi's virtual machine evaluates a large SX expression about 15 times
slower than the same expression compiled (66k instructions per knot for
the spherical five-bar's torque Hessian: 18 ms against 1.2 ms for 100
knots). :func:`compiled` generates the C code of a function, compiles it
with the system C compiler into ``CACHE / <name>-<hash>.so`` (once: about
10 s of the compiler per function for that Hessian; every later run loads it in
milliseconds) and returns the loaded function. Without a C compiler, or if
compiling fails, the function itself is returned (the same values, slower); a
failure leaves a marker beside the library, so later runs neither say they
compile nor try that compiler on that code again.
The hash is that of CasADi's serialization of the function (the exact
expression, about 3x cheaper than generating its C code, which is done only
on a cache miss), the CasADi version and the compiler flags.

:func:`compile_soon` runs the compiler (its own process) from a background
thread, so that the caller's own work (the numba compilation of the kernels,
on a first run) proceeds meanwhile, and returns a :class:`Compilation`;
:func:`wait` waits for every compiler started in this process.

The cache directory is ``$WORKBENCH_CACHE``, else ``$XDG_CACHE_HOME/workbench``,
else ``~/.cache/workbench``; files are written atomically.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from pathlib import Path

import casadi as ca

from workbench.io import atomic_write_text

FLAGS = ("-O1", "-shared", "-fPIC")
COMPILE_MESSAGE = (
    "workbench: compiling the reaching problem's second derivatives (first run only)..."
)


def cache_directory() -> Path:
    """Where compiled functions are kept (module docstring)."""
    if "WORKBENCH_CACHE" in os.environ:
        return Path(os.environ["WORKBENCH_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "workbench"


def compiled(function: ca.Function) -> ca.Function:
    """``function`` compiled to C and loaded from the cache, or itself without a compiler."""
    return compile_soon(function).result()


class Compilation:
    """A function compiled to C, perhaps still compiling: :meth:`result` waits for the
    compiler and loads the library (in the calling thread: CasADi itself is never
    used from the compiler's thread)."""

    def __init__(self, function: ca.Function, library: Path | None, job: Future | None = None):
        self._function, self._library, self._job = function, library, job
        self._loaded: ca.Function | None = None

    def done(self) -> bool:
        """Whether :meth:`result` returns without waiting for the compiler."""
        return self._job is None or self._job.done()

    def result(self) -> ca.Function:
        """The loaded library, or the function itself when there is none."""
        if self._loaded is None:
            built = self._library is not None and (self._job is None or self._job.result())
            self._loaded = (
                ca.external(self._function.name(), str(self._library)) if built else self._function
            )
        return self._loaded


def compile_soon(function: ca.Function) -> Compilation:
    """:func:`compiled` with the compiler run in a background thread: loaded at once when
    the cache has the library (or there is no compiler), else compiling until
    :meth:`Compilation.result` or :func:`wait`."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return Compilation(function, None)
    key = f"{function.serialize()} casadi {ca.__version__} {' '.join(FLAGS)}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    library = cache_directory() / f"{function.name()}-{digest}.so"
    if library.is_file():
        compilation = Compilation(function, library)
        compilation.result()
        return compilation
    if _failed(compiler, library).is_file():  # this compiler failed on this code before
        return Compilation(function, None)
    generator = ca.CodeGenerator(function.name(), {"with_header": False})
    generator.add(function)
    code = generator.dump()
    _announce()
    job = _compiler_threads().submit(_compile, compiler, code, library)
    _PENDING.append(job)
    return Compilation(function, library, job)


def wait() -> None:
    """Wait for every compiler :func:`compile_soon` started in this process."""
    wait_all(list(_PENDING))
    _PENDING[:] = [job for job in _PENDING if not job.done()]


_PENDING: list[Future] = []


@functools.cache
def _compiler_threads() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="workbench-cc")


def _compile(compiler: str, code: str, library: Path) -> bool:
    """Compile C ``code`` into ``library`` (atomically); False if that fails, and then a
    marker (:func:`_failed`, the compiler's message in it) keeps later runs from trying
    the same compiler on the same code again."""
    try:
        library.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
            source, output = Path(scratch) / "function.c", Path(scratch) / "function.so"
            source.write_text(code)
            subprocess.run(
                [compiler, *FLAGS, str(source), "-o", str(output), "-lm"],
                check=True,
                capture_output=True,
            )
            os.replace(output, library)
    except subprocess.CalledProcessError as exc:
        message = (exc.stderr or b"").decode(errors="replace")[-2000:]
        with contextlib.suppress(OSError):
            atomic_write_text(_failed(compiler, library), f"{compiler}: {message}")
        return False
    except OSError:
        return False
    return True


def _failed(compiler: str, library: Path) -> Path:
    """The marker of ``compiler`` (this file: path, size and time) failing on ``library``'s
    code: another compiler, or this one updated, tries again."""
    try:
        stat = Path(compiler).stat()
        identity = f"{compiler} {stat.st_size} {stat.st_mtime_ns}"
    except OSError:
        identity = compiler
    tag = hashlib.sha256(identity.encode()).hexdigest()[:8]
    return library.with_name(f"{library.stem}.{tag}.failed")


@functools.cache
def _announce() -> None:
    print(COMPILE_MESSAGE, file=sys.stderr, flush=True)
