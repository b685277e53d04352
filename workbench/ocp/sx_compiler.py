"""CasADi SX functions compiled to C once and loaded from a disk cache.

CasADi's virtual machine evaluates a large SX expression about 15 times
slower than the same expression compiled (66k instructions per knot for
the spherical five-bar's torque Hessian: 18 ms against 1.2 ms for 100
knots). :func:`compiled` generates the C code of a function, compiles it
with the system C compiler into ``CACHE / <name>-<hash of the code>.so``
(once: about 20 s for that Hessian; every later run loads it in
milliseconds) and returns the loaded function. Without a C compiler, or if
compiling fails, the function itself is returned (the same values, slower).

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
    compiler = shutil.which(os.environ.get("CC", "cc"))
    if compiler is None:
        return function
    generator = ca.CodeGenerator(function.name(), {"with_header": False})
    generator.add(function)
    code = generator.dump()
    digest = hashlib.sha256((code + " ".join(FLAGS)).encode()).hexdigest()[:16]
    library = cache_directory() / f"{function.name()}-{digest}.so"
    if not library.is_file() and not _compile(compiler, code, library):
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
