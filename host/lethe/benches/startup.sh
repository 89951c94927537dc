#!/usr/bin/env bash
# `lethe up` from its start to the first request answered, as a user meets it: always on a fresh
# data dir (a new checkout, a new test), once with an empty compiled-component cache (cold) and
# once with the cache the cold start left (warm), for the shipped `spin.toml` (five Rust
# components, the embedded cluster, SQLite) and for the twins' manifest
# (`components/smoke-py/spin.toml`: the Rust smoke and the Python smoke-py, 20 MB of CPython).
#
#   BINS="target/debug/lethe target/release/lethe" ROUNDS=3 bash host/lethe/benches/startup.sh
#
# BINS are compared side by side, alternating in each round (the VM's speed drifts within a
# minute). APPS picks the applications (default: `shipped python`). Each start's log line
# "configured in … s" says where its time went. Needs curl and bc; the Python app needs
# target/wasm/wasm32-wasip2/wasm/smoke_py.wasm (built by `cargo build -p lethe`).
set -euo pipefail
BINS=${BINS:-target/debug/lethe}
ROUNDS=${ROUNDS:-3}
APPS=${APPS:-shipped python}
cd "$(dirname "$0")/../../.."
ROOT=$PWD
W=$(mktemp -d)
PORT=3198
trap 'pkill -f "up --listen 127.0.0.1:$PORT" 2>/dev/null; rm -rf "$W"' EXIT

now() { date +%s.%N; }

manifest() { case $1 in shipped) echo "$ROOT/spin.toml";; python) echo "$ROOT/components/smoke-py/spin.toml";; esac; }
route() { case $1 in shipped) echo /smoke/notes;; python) echo /smoke-py/notes;; esac; }

# Starts BIN on MANIFEST with a fresh data dir and the cache CACHE, waits for ROUTE to answer 200,
# prints the seconds it took and the "configured in" line of its log, and stops it.
start() {
  local bin=$1 manifest=$2 path=$3 cache=$4
  local data; data=$(mktemp -d "$W/data.XXXX")
  local t0; t0=$(now)
  LETHE_CACHE_DIR=$cache "$bin" up --manifest "$manifest" --data-dir "$data" \
    --listen 127.0.0.1:$PORT --admin-listen 127.0.0.1:0 > "$data/log" 2>&1 < /dev/null &
  local pid=$!
  for _ in $(seq 1 6000); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT$path")" = 200 ] && break
    sleep 0.01
  done
  local took; took=$(echo "$(now) - $t0" | bc)
  kill -TERM $pid; wait $pid 2>/dev/null || true
  local line; line=$(grep -o 'configured in .*' "$data/log" | head -n 1 || true)
  printf '%6.2f s  %s\n' "$took" "${line:-(no configured line: an older lethe)}"
}

for app in $APPS; do
  echo "== $app ($(manifest "$app"))"
  for round in $(seq 1 "$ROUNDS"); do
    for bin in $BINS; do
      cache="$W/cache-$round-$(echo "$bin" | tr / _)"
      printf 'round %s %-28s cold: ' "$round" "$bin"; start "$bin" "$(manifest "$app")" "$(route "$app")" "$cache"
      printf 'round %s %-28s warm: ' "$round" "$bin"; start "$bin" "$(manifest "$app")" "$(route "$app")" "$cache"
    done
  done
done
