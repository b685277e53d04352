#!/usr/bin/env bash
# Whole commands of two source trees alternated run by run on the same machine:
#
#     bash benchmarks/compare_trees.sh OLD_TREE [NEW_TREE] [RUNS]
#
# (a tree: a checkout, e.g. `git worktree add --detach /tmp/old 8d9c31b`). Each tree runs
# from its own root with PYTHONPATH set to it; one untimed run of each command first
# (numba's cache, the compiled Hessians); then RUNS (default 5) timed runs of the default
# reach and of the TX40 identification, old and new in turn. Prints min and median of wall
# and CPU (user + sys, children included) per command and tree. Bytecode is written
# (PYTHONDONTWRITEBYTECODE unset), as on a user's machine.
set -euo pipefail
OLD=$(cd "$1" && pwd); NEW=$(cd "${2:-$(dirname "$0")/..}" && pwd); RUNS=${3:-5}
unset PYTHONDONTWRITEBYTECODE
OUT=$(mktemp -d)
REACH="python -m workbench.cli reach --out $OUT/reach --quiet"
TX40="python -m workbench.cli calibrate --model staubli_tx40 --log models/staubli_tx40/identification.toml --kind dynamic --out $OUT/tx40 --quiet"
timed() { # file tree command...
  local file=$1 tree=$2; shift 2
  (cd "$tree" && PYTHONPATH="$tree" /usr/bin/time -f "%e %U %S" -a -o "$file" "$@" >/dev/null 2>&1)
}
for tree in "$OLD" "$NEW"; do timed "$OUT/warm" "$tree" $REACH; timed "$OUT/warm" "$tree" $TX40; done
for name in REACH TX40; do
  for _ in $(seq "$RUNS"); do
    timed "$OUT/$name.old" "$OLD" ${!name}
    timed "$OUT/$name.new" "$NEW" ${!name}
  done
  for which in old new; do
    python3 - "$OUT/$name.$which" "$name" "$([ $which = old ] && echo "$OLD" || echo "$NEW")" <<'PY'
import statistics as st, sys
rows = [list(map(float, line.split())) for line in open(sys.argv[1]) if line.strip()]
wall, cpu = [r[0] for r in rows], [r[1] + r[2] for r in rows]
print(f"{sys.argv[2]} {sys.argv[3]}: wall min {min(wall):.2f} median {st.median(wall):.2f} s; "
      f"CPU min {min(cpu):.2f} median {st.median(cpu):.2f} s (n = {len(rows)})")
PY
  done
done
rm -rf "$OUT"
