#!/usr/bin/env bash
# Runs the same fixed-seed simulator commands with two `nessie` binaries and
# shows, side by side, whether their outputs are identical: the check that a
# change meant to move no simulated outcome (a refactor of the engine) moved
# none. Wall-clock figures are dropped before comparing; everything else
# (every report field of `nessie sim --json`, every swarm summary and
# failing case) must match byte for byte.
#
#   tools/sim-same-outputs.sh OLD_NESSIE NEW_NESSIE
#
# e.g. build the old commit in a worktree with its own target directory:
#   git worktree add /tmp/old <rev>
#   (cd /tmp/old && CARGO_TARGET_DIR=/tmp/old-target cargo build --release -p nessie-cli)
#   tools/sim-same-outputs.sh /tmp/old-target/release/nessie target/release/nessie
set -euo pipefail

old=${1:?usage: $0 OLD_NESSIE NEW_NESSIE}
new=${2:?usage: $0 OLD_NESSIE NEW_NESSIE}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Each line: a name and the arguments of one command.
commands=(
  "sim-default|sim --json --seconds 0.01"
  "sim-modern-ycsb-a|sim --json --profile modern --nodes 3,15 --clients 4 --depth 4 --workload ycsb-a --seconds 0.002"
  "sim-ycsb-d-background|sim --json --systems nessie,race,rcuckoo --workload ycsb-d --background 2 --seconds 0.005"
  "sim-cell-ycsb-e|sim --json --systems cell --workload ycsb-e --seconds 0.005"
  "sim-rcuckoo-8b|sim --json --systems rcuckoo,race,nessie --key-size 8 --value-sizes 7 --workload ycsb-b --seconds 0.003"
  "swarm-nessie|swarm --system nessie --cases 60 --shrink-budget 0"
  "swarm-nessie-late-landing|swarm --system nessie --late-landing --cases 30 --shrink-budget 0"
  "swarm-nessie-hy|swarm --system nessie-hy --cases 30 --shrink-budget 0"
  "swarm-pilaf|swarm --system pilaf --cases 30 --shrink-budget 0"
  "swarm-race|swarm --system race --without-inserts --cases 40 --shrink-budget 0"
  "swarm-rcuckoo|swarm --system rcuckoo --without-duplicate-writes --cases 60 --shrink-budget 0"
  "swarm-cell|swarm --system cell --cases 20 --shrink-budget 0"
  "swarm-broken-incarnations|swarm --system nessie --late-landing --faults ignore-incarnations --cases 40 --shrink-budget 5"
  "swarm-broken-leak|swarm --system nessie --faults skip-recycle-mark --first-seed 1 --cases 1 --shrink-budget 0"
  "swarm-broken-margin|swarm --system nessie --faults unfenced-migrate-install --first-seed 120 --cases 1 --shrink-budget 0"
  "swarm-broken-deadline|swarm --system nessie --faults ignore-deadline --first-seed 3 --cases 1 --shrink-budget 0"
  "swarm-broken-sweep|swarm --system nessie --faults rollback-destination-to-previous --first-seed 77 --cases 1 --shrink-budget 0"
  "swarm-broken-mark|swarm --system nessie --size-classes --faults mark-by-main-class-offset --first-seed 1 --cases 1 --shrink-budget 0"
  "swarm-broken-orphans|swarm --system cell --server-faults recovery-keeps-orphans --first-seed 1 --cases 1 --shrink-budget 0"
  "swarm-broken-rcuckoo|swarm --system rcuckoo --without-duplicate-writes --long-pauses --server-faults unfenced-writes --first-seed 2824 --cases 1 --shrink-budget 0"
  "swarm-broken-race|swarm --system race --server-faults reuse-without-hold --cases 60 --shrink-budget 0"
)

# Drops what a wall clock decides: seconds of wall time and rates per wall
# second.
scrub() {
  sed -E -e 's/"(wall_seconds|events_per_wall_sec)": [0-9.e+-]+/"\1": _/' \
    -e 's/in [0-9.]+ s:/in _ s:/' -e 's/[0-9.]+ (s|ms) wall/_ wall/g'
}

printf '%-28s %-10s %-10s %s\n' command old new same
fails=0
for entry in "${commands[@]}"; do
  name=${entry%%|*}
  args=${entry#*|}
  # A failing swarm exits non-zero by design: compare what it printed.
  # shellcheck disable=SC2086
  "$old" $args >"$out/$name.old" 2>&1 || true
  # shellcheck disable=SC2086
  "$new" $args >"$out/$name.new" 2>&1 || true
  scrub <"$out/$name.old" >"$out/$name.old.s"
  scrub <"$out/$name.new" >"$out/$name.new.s"
  if cmp -s "$out/$name.old.s" "$out/$name.new.s"; then
    same=identical
  else
    same=DIFFERENT
    fails=$((fails + 1))
  fi
  printf '%-28s %-10s %-10s %s\n' "$name" "$(wc -l <"$out/$name.old.s") lines" \
    "$(wc -l <"$out/$name.new.s") lines" "$same"
  if [ "$same" = DIFFERENT ]; then
    diff "$out/$name.old.s" "$out/$name.new.s" | head -20 || true
  fi
done
[ "$fails" -eq 0 ] && echo "all outputs identical" || { echo "$fails command(s) differ"; exit 1; }
