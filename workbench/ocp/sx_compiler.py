"""CasADi SX functions compiled to C once and loaded from a disk cache.

CasADi's virtual machine evaluates a large SX expression about 15 times
slower than the same expression compiled (66k instructions per knot for
the spherical five-bar's torque Hessian: 18 ms against 1.2 ms for 100
knots). :func:`compiled` generates the C code of a function, compiles it
with the system C compiler into ``CACHE / <name>-<hash>.so`` (once: about
10 s of the compiler per function for that Hessian; every later run loads it in
milliseconds) and returns the loaded function. Without a C compiler, or if
compiling fails, the function itself is returned (the same values, slower).
The hash is that of CasADi's serialization of the function (the exact
expression, about 3x cheaper than generating its C code, which is done only
on a cache miss), the CasADi version and the compiler flags.

:func:`compile_soon` does the same in a background thread and returns a
future: the compiler runs as its own process, so the caller's own work (the
numba compilation of the kernels, on a first run) proceeds meanwhile;
:func:`wait` waits for every compilation started in this process.

The cache directory is ``$WORKBENCH_CACHE``, else ``$XDG_CACHE_HOME/workbench``,
else ``~/.cache/workbench``; files are written atomically.
"""

from __future__ import annotations

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


def compile_soon(function: ca.Function) -> Future:
    """A future of :func:`compiled` ``(function)``: done at once when the cache has the
    library (or there is no compiler), else compiled in a background thread."""
    compiler = shutil.which(os.environ.get("CC", "cc"))
    done: Future = Future()
    if compiler is None:
        done.set_result(function)
        return done
    key = f"{function.serialize()} casadi {ca.__version__} {' '.join(FLAGS)}"
    library = (
        cache_directory() / f"{function.name()}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.so"
    )
    if library.is_file():
        done.set_result(ca.external(function.name(), str(library)))
        return done
    future = _compiler_threads().submit(_compile_and_load, compiler, function, library)
    _PENDING.append(future)
    return future


def wait() -> None:
    """Wait for every compilation :func:`compile_soon` started in this process."""
    wait_all(list(_PENDING))
    _PENDING[:] = [future for future in _PENDING if not future.done()]


_PENDING: list[Future] = []


@functools.cache
def _compiler_threads() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="workbench-cc")


def _compile_and_load(compiler: str, function: ca.Function, library: Path) -> ca.Function:
    generator = ca.CodeGenerator(function.name(), {"with_header": False})
    generator.add(function)
    if not _compile(compiler, generator.dump(), library):
        return function
    return ca.external(function.name(), str(library))


def _compile(compiler: str, code: str, library: Path) -> bool:
    """Compile C ``code`` into ``library`` (atomically); False if that fails."""
    try:
        library.parent.mkdir(parents=True, exist_ok=True)
        _announce()
        with tempfile.TemporaryDirectory(dir=library.parent) as scratch:
            source, output = Path(scratch) / "function.c", Path(scratch) / "function.so"
            source.write_text(code)
            subprocess.run(
                [compiler, *FLAGS, str(source), "-o", str(output), "-lm"],
                check=True,
                capture_output=True,
            )
            os.replace(output, library)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


@functools.cache
def _announce() -> None:
    print(COMPILE_MESSAGE, file=sys.stderr, flush=True)
