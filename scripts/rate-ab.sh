#!/usr/bin/env bash
# rate-ab.sh — two builds or two settings of Warren compared at a fixed rate: ROUNDS rounds of
# rate-cost.sh, side A then side B, then each side's CPU µs per message and confirm p99 per
# run and their medians. On a machine whose load moves Warren's CPU per message by a quarter
# within minutes (docs/performance.md#method), only alternating runs compare.
#
#   A=HEAD~1 ./scripts/rate-ab.sh                          # the commit before against the working tree
#   B_ENV="WARREN_PUBLISH_LINGER=2ms" ./scripts/rate-ab.sh  # one build, two settings
#
# Environment: A, B (a git revision to build that side's node from; empty: the working
# tree), A_ENV, B_ENV (VAR=value words for that side's nodes), ROUNDS (3), and rate-cost.sh's
# RATE, DURATION, PORT_BASE, EXTRA. Both sides use the working tree's load tool.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
work=$(mktemp -d)
cleanup() {
  local side
  for side in A B; do
    [ -d "$work/src-$side" ] && git worktree remove --force "$work/src-$side"
  done
  rm -rf "$work"
}
trap cleanup EXIT

# build SIDE REV: that side's node binary into $work/SIDE/, from REV or the working tree.
build() {
  local side=$1 rev=$2 src=.
  if [ -n "$rev" ]; then
    src=$work/src-$side
    git worktree add --detach -q "$src" "$rev"
  fi
  (cd "$src" && go build -o "$work/$side/" ./cmd/warren)
  echo "side $side: ${rev:-working tree}${3:+, $3}"
}
build A "${A:-}" "${A_ENV:-}"
build B "${B:-}" "${B_ENV:-}"

for round in $(seq "$ROUNDS"); do
  for side in A B; do
    settings=${side}_ENV
    echo "== round $round of $ROUNDS, side $side"
    # shellcheck disable=SC2086 # the settings are words on purpose
    out=$(env ${!settings:-} NODE_BIN="$work/$side" ./scripts/rate-cost.sh 2>&1)
    echo "$out" | grep -E '^(CPU µs per message|received)'
    cpu=$(echo "$out" | awk '/^CPU µs per message/ {print $NF}')
    p99=$(echo "$out" | sed -n 's/.*confirm p50 [0-9.]* ms, p99 \([0-9.]*\) ms.*/\1/p')
    [ -n "$cpu" ] && [ -n "$p99" ] || { echo "rate-ab: no figures from side $side's run:" >&2; echo "$out" >&2; exit 1; }
    echo "$side $cpu $p99" >>"$work/results"
  done
done

python3 - "$work/results" <<'PYEOF'
import statistics, sys
runs = {"A": [], "B": []}
for line in open(sys.argv[1]):
    side, cpu, p99 = line.split()
    runs[side].append((float(cpu), float(p99)))
med = {}
print("| side | CPU µs per message, in run order | median | confirm p99 ms | median |")
print("| --- | --- | ---: | --- | ---: |")
for side, rs in runs.items():
    cpu, p99 = [r[0] for r in rs], [r[1] for r in rs]
    med[side] = statistics.median(cpu)
    print("| %s | %s | %.0f | %s | %.2f |" % (side, ", ".join("%.0f" % c for c in cpu), med[side],
                                             ", ".join("%.2f" % p for p in p99), statistics.median(p99)))
print("B / A, median CPU per message: %.3f" % (med["B"] / med["A"]))
PYEOF
