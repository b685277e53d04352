"""Largest relative difference between every number of two ``summary.json`` files.

    python benchmarks/compare_summaries.py BEFORE/summary.json AFTER/summary.json

Times (keys ending in ``time_s``) are skipped; other differences (missing keys, text)
are listed.
"""

from __future__ import annotations

import json
import sys


def walk(a, b, path: str, numbers: list, other: list) -> None:
    if isinstance(a, dict):
        for key in a:
            if str(key).endswith("time_s"):
                continue
            if not isinstance(b, dict) or key not in b:
                other.append(f"{path}/{key}: missing")
            else:
                walk(a[key], b[key], f"{path}/{key}", numbers, other)
    elif isinstance(a, list):
        if not isinstance(b, list) or len(a) != len(b):
            other.append(f"{path}: lengths differ")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            walk(x, y, f"{path}[{i}]", numbers, other)
    elif isinstance(a, int | float) and not isinstance(a, bool):
        if not isinstance(b, int | float) or isinstance(b, bool):
            other.append(f"{path}: {a!r} -> {b!r}")
        else:
            numbers.append((0.0 if a == b else abs(a - b) / max(abs(a), abs(b)), path))
    elif a != b:
        other.append(f"{path}: {a!r} -> {b!r}"[:120])


def main() -> None:
    before, after = (json.load(open(p, encoding="utf-8")) for p in sys.argv[1:3])
    numbers, other = [], []
    walk(before, after, "", numbers, other)
    worst = max(numbers, default=(0.0, "-"))
    print(f"{len(numbers)} numbers, max relative difference {worst[0]:.3g} ({worst[1]})")
    for line in other:
        print("differs:", line)


if __name__ == "__main__":
    main()
