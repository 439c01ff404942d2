#!/bin/sh
# Mutation testing of the protocol crate's machines with the fast suites
# (issue 24, "Mutation testing as a habit"). Not in CI: a full run is hours
# on 2 cores. The figures and the verdict on every missed mutant are in
# docs/verification.md, "Mutation testing"; refresh them when the protocol
# changes.
#
#   cargo install cargo-mutants --locked
#   tools/mutants.sh                                   # every file below
#   tools/mutants.sh -f protocol/src/machine/recover.rs # one file
#   tools/mutants.sh --list                            # count, don't run
#   tools/mutants.sh --in-diff my.diff                 # only what a diff touched
#   tools/mutants.sh --shard 1/4                       # a quarter of the mutants
#   tools/mutants.sh --in-place -f ...                 # reuse the checkout's target dir
#
# Extra arguments go to cargo-mutants. Without an -f, the machines, the
# router, the cache and the allocator are mutated. Each mutant is tested by
# the protocol crate's unit tests and the nessie-tests stories that run in
# seconds; not the shuttle, proptest, outcomes (18 s) or sim_agreement
# (10 s) suites, nor the model's worlds. The `mutants` profile (Cargo.toml)
# builds at opt-level 0: a rebuild per mutant costs more than slower tests.
# Results land in mutants.out/ (caught.txt, missed.txt, timeout.txt,
# unviable.txt, outcomes.json).
#
# --baseline skip: cargo-mutants 27.1's baseline tests only the mutated
# package and ignores --test-package (so `--test concurrency` is not found);
# the unmutated tree must pass these suites (check first with
#   cargo test --profile mutants -p nessie-protocol -p nessie-tests --lib \
#       --test recovery --test review_holes ...   (the --test list below)
# ), and the timeouts are given instead of measured from a baseline.
#
# --in-place mutates this checkout (restored after each mutant; `git diff`
# after an interrupted run) and builds in its target dir, so no cold build
# per copy; without it cargo-mutants copies the tree and builds it from
# scratch first (minutes), and --jobs 2 can then run two copies side by side.
set -eu
cd "$(dirname "$0")/.."

files=""
case " $* " in
*" -f "* | *" --file "* | *" --file="*) ;;
*)
    files="-f protocol/src/machine/*.rs -f protocol/src/route.rs \
-f protocol/src/cache.rs -f protocol/src/alloc.rs"
    ;;
esac

# A mutant that makes a story loop is caught by the story's time limit
# (nessie_tests::time_limit, 60 s and up, ten times a normal run): a quarter
# of it is still more than twice what these suites take at opt-level 0 on
# 2 busy cores, and saves most of a minute per looping mutant.
export NESSIE_TIME_LIMIT_SCALE="${NESSIE_TIME_LIMIT_SCALE:-0.25}"

set -f # the globs are cargo-mutants', not the shell's
# shellcheck disable=SC2086
exec nice -n 19 cargo mutants \
    --package nessie-protocol \
    --test-package nessie-protocol --test-package nessie-tests \
    --profile mutants \
    --baseline skip --timeout 120 --build-timeout 600 \
    $files "$@" \
    -- --lib \
    --test concurrency --test conformance --test costs --test errors \
    --test inserts --test pipeline --test recorders --test recovery \
    --test review_holes --test scenarios --test sequential --test smoke
