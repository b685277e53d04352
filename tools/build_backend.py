"""PEP 517 build backend: setuptools', with the compiled kernels made while ``pip install -e .``
runs (issue 37: the first command after install within 30 s).

An editable install runs the package from this source tree, where numba keeps its
disk cache (``__pycache__`` beside the kernels' modules), and the C libraries of
the reach's second derivatives go to the user's cache
(:mod:`workbench.ocp.sx_compiler`). :func:`build_editable` builds setuptools'
editable wheel, then runs ``python -m workbench.warm_up`` on this tree, which
compiles every kernel into those caches; without it, the first command compiles
what it uses (85 s for the default reach on a 2-core machine, BENCHMARKS.md). The
build environment gets the dependencies the warm up imports (:data:`WARM_UP`, with
the specifiers of ``pyproject.toml``; :func:`get_requires_for_build_editable`; 40 s
of pip's time from its cache). The warm up never fails the install: if it cannot
run (``--no-build-isolation`` without the dependencies, no C compiler), the first
command compiles as before. ``WORKBENCH_NO_WARM_UP=1`` skips it. A
regular (non-editable) wheel is built as setuptools builds it: its files move to
site-packages, away from a cache made here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401  (the hooks pip calls, unchanged)
    build_sdist,
    build_wheel,
    get_requires_for_build_sdist,
    get_requires_for_build_wheel,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

ROOT = Path(__file__).resolve().parent.parent
# the dependencies (pyproject.toml names) that `python -m workbench.warm_up` imports
WARM_UP = ("pin", "casadi", "numpy", "numba", "scipy", "rosbags", "threadpoolctl", "tqdm", "pyyaml")


def get_requires_for_build_editable(config_settings: dict | None = None) -> list[str]:
    """setuptools' requirements and the dependencies of :data:`WARM_UP`."""
    return [*_setuptools.get_requires_for_build_editable(config_settings), *warm_up_requirements()]


def warm_up_requirements() -> list[str]:
    """The requirements of ``pyproject.toml`` named in :data:`WARM_UP`."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        dependencies = tomllib.load(file)["project"]["dependencies"]
    return [d for d in dependencies if requirement_name(d) in WARM_UP]


def requirement_name(requirement: str) -> str:
    """The normalised distribution name of a requirement (``PyYAML>=6`` -> ``pyyaml``)."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9._-]+", requirement)[0]).lower()


def build_editable(
    wheel_directory: str, config_settings: dict | None = None, metadata_directory: str | None = None
) -> str:
    """setuptools' editable wheel, then every kernel compiled into the caches it will read."""
    wheel = _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
    if os.environ.get("WORKBENCH_NO_WARM_UP", "") in ("", "0"):
        _warm_up()
    return wheel


def _warm_up(timeout: float = 1800.0) -> None:
    """``python -m workbench.warm_up`` on this tree, in its own process group, stopped with
    every process it started if it outlives ``timeout``, if pip goes away (interrupted or
    killed: this hook's parent changes) or if this hook is interrupted or terminated; a
    failure is reported, never raised."""
    print("workbench: compiling the kernels for this machine (a first install: 2-3 min)...")
    parent, deadline = os.getppid(), time.monotonic() + timeout
    with tempfile.TemporaryFile("w+") as stderr:
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "workbench.warm_up"], cwd=ROOT, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=stderr, text=True, start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            print(f"workbench: warm up not run ({exc}); the first command compiles instead")
            return
        handlers = {s: signal.signal(s, _interrupted) for s in (signal.SIGTERM, signal.SIGHUP)}
        try:
            while process.poll() is None:
                if os.getppid() != parent or time.monotonic() > deadline:
                    print("workbench: warm up stopped; the first command compiles instead")
                    return
                try:
                    process.wait(timeout=0.5)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            for number, handler in handlers.items():
                signal.signal(number, handler)
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if process.returncode != 0:
            stderr.seek(0)
            reason = (stderr.read().strip().splitlines() or ["no message"])[-1]
            print(f"workbench: warm up failed ({reason}); the first command compiles instead")


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
