#!/usr/bin/env bash
# Measures the tests with generated mutants (cargo-mutants): each mutant of the safety guards'
# code is built and run against the tests of the mutated crate plus the simulator, and the
# outcome recorded (caught, missed, unviable, timeout). sim/MUTANTS.md holds the last report and
# what became of every missed mutant.
#
#   cargo install cargo-mutants --locked          # once (v27.1.0 was used)
#   SHARD=sdk bash sim/mutants.sh                  # one shard; see the list below
#   SHARD=cf FILES="components/cf-core/src/reconcile.rs" bash sim/mutants.sh   # part of one
#   SHARD=cf FILES=components/cf-core/src/ownership.rs RE=create_until_known bash sim/mutants.sh
#
# It works in a git worktree of HEAD under $WORK (default /tmp/lethe-mutants), in place, so the
# checkout you edit is never mutated and its target directory is not copied. The simulator runs
# SEEDS seeds per mutant (default 1000: about 20 s in the test profile); `sim/mutate.py`'s own
# check is skipped, since a mutant on a line that script patches would fail it by its text rather
# than by its behaviour.
set -euo pipefail
SHARD=${SHARD:-sdk}; SEEDS=${SEEDS:-1000}; WORK=${WORK:-/tmp/lethe-mutants}
cd "$(dirname "$0")/.."
case "$SHARD" in
  # The controller SDK's guards: the Lease, the finalizer patches, the change feed, backoff.
  sdk) crate=lethe-guest
       files=(components/guest/src/lease.rs components/guest/src/finalizer.rs
              components/guest/src/feed.rs components/guest/src/backoff.rs) ;;
  # The data-jobs pass, its deletion jobs, and the API that accepts them.
  data-jobs) crate=data-jobs-core
             files=(components/data-jobs-core/src/sync.rs components/data-jobs-core/src/status.rs
                    components/data-jobs-core/src/api.rs) ;;
  # The CF reconcile, job status, access and ownership (with the name claims lethe deletes).
  cf) crate=cf-core
      files=(components/cf-core/src/reconcile.rs components/cf-core/src/jobs.rs
             components/cf-core/src/access.rs components/cf-core/src/ownership.rs
             components/cf-core/src/names.rs) ;;
  *) echo "unknown SHARD $SHARD (sdk, data-jobs, cf)" >&2; exit 2 ;;
esac
# FILES (space-separated paths) narrows a shard to some of its files, so a long shard can be run
# in parts that each fit in a session.
if [ -n "${FILES:-}" ]; then read -r -a files <<< "$FILES"; fi
# RE (a regex of function names, cargo-mutants' `-F`) narrows it further, to functions rewritten
# since the shard's last run.
rm -rf "$WORK"; git worktree prune
git worktree add -q --detach "$WORK" HEAD
args=()
for f in "${files[@]}"; do args+=(-f "$f"); done
if [ -n "${RE:-}" ]; then args+=(-F "$RE"); fi
cd "$WORK"
LETHE_SIM_SEEDS=$SEEDS LETHE_SIM_COMMIT_SEEDS=0 cargo mutants --in-place \
  --test-package "$crate" --test-package lethe-sim --features lethe-guest/fake \
  "${args[@]}" -E 'tests::' -E 'impl std::fmt::Debug' \
  --timeout 240 --no-shuffle -o "$WORK/out" \
  -- -- --skip every_mutation_still_finds_its_guard || true
echo "report: $WORK/out/mutants.out/{caught,missed,unviable,timeout}.txt"
