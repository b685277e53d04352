"""Run one ``workbench`` command in this process and print numba's compile time per function.

    NUMBA_CACHE_DIR=$(mktemp -d) WORKBENCH_CACHE=$(mktemp -d) \
        python benchmarks/cold_compile.py reach --out /tmp/cold --quiet

With both caches empty this is the first command after an install: wall time, the
functions numba compiled (inclusive wall time of each, with the helpers compiled for it,
and its number of signatures), largest first.
"""

from __future__ import annotations

import atexit
import runpy
import sys
import time

from numba.core import event

TIMES: dict[str, list[float]] = {}


class Compiles(event.Listener):
    """Inclusive wall time of every numba compilation, by function."""

    def __init__(self) -> None:
        self.started: list[float] = []

    def on_start(self, event_: event.Event) -> None:
        self.started.append(time.perf_counter())

    def on_end(self, event_: event.Event) -> None:
        f = event_.data["dispatcher"].py_func
        name = f"{f.__module__}.{f.__qualname__}"
        TIMES.setdefault(name, []).append(time.perf_counter() - self.started.pop())


def report(start: float) -> None:
    total = sorted(((sum(v), k, len(v)) for k, v in TIMES.items()), reverse=True)
    print(f"wall {time.perf_counter() - start:.1f} s; compiled {len(total)} functions, "
          f"{sum(t[2] for t in total)} signatures", file=sys.stderr)  # fmt: skip
    for seconds, name, count in total[:25]:
        print(f"  {seconds:7.2f} s {count} {name}", file=sys.stderr)


def main() -> None:
    event.register("numba:compile", Compiles())
    atexit.register(report, time.perf_counter())
    sys.argv = ["workbench", *sys.argv[1:]]
    runpy.run_module("workbench.cli", run_name="__main__")


if __name__ == "__main__":
    main()
