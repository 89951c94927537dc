#!/usr/bin/env bash
# The plugin kit, timed as an author meets it, and the Python smoke twin beside its Rust twin.
#
#   cargo build --release -p lethe && BIN=target/release/lethe ROUNDS=3 REQUESTS=500 \
#     bash host/lethe/benches/plugin_kit.sh
#
# PARTS picks what runs (default: all of `http reconciler twins`).
#
# 1. `lethe new http` to the first request served (a PUT answered 201), in a fresh application
#    directory: cold (the new crate's dependencies compiled from scratch, the crates already
#    downloaded) and warm (the same component edited and served again: an incremental build,
#    then `lethe up` with its compiled-component cache).
# 2. `lethe new reconciler --kind v1/ConfigMap` to the first object made: the generated
#    manifest as written (its cron trigger, its RBAC and ServiceAccount), a PUT as the cluster's
#    admin answered 201, then the ConfigMap in the cluster, made by the pass the PUT woke. Cold,
#    then warm after a one-line edit (a second object).
# 3. smoke (Rust) and smoke-py (Python, componentize-py): the .wasm sizes, the start of `lethe up`
#    on a manifest with only the one component and an empty data dir (compiling it) and with the
#    cache it left (loading it), alternating ROUNDS times, and REQUESTS sequential GETs of one
#    note through one kept-alive connection, side by side in one run (the VM's speed drifts).
# Needs componentize-py (pip install componentize-py==0.25.1) for the Python half.
set -euo pipefail
BIN=${BIN:-target/debug/lethe}
ROUNDS=${ROUNDS:-3}; REQUESTS=${REQUESTS:-500}; PARTS=${PARTS:-http reconciler twins}
cd "$(dirname "$0")/../../.."
ROOT=$PWD
BIN=$(realpath "$BIN")
W=$(mktemp -d)
trap 'pkill -f "lethe up --listen 127.0.0.1:3197" 2>/dev/null; rm -rf "$W"' EXIT

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
# Starts `lethe up` in $1 (extra args after), waits for $2 to answer, and sets SERVED to the
# seconds it took. (Not a function to call inside `$(...)`: the server would hold its pipe.)
serve() {
  local dir=$1 path=$2; shift 2
  local t0; t0=$(now)
  (cd "$dir" && exec "$BIN" up --listen 127.0.0.1:3197 --admin-listen 127.0.0.1:0 "$@" \
    > "$dir/lethe.log" 2>&1 < /dev/null) &
  for _ in $(seq 1 3000); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "localhost:3197$path")" != 000 ] && break
    sleep 0.05
  done
  SERVED=$(since "$t0")
}
stop() { pkill -f "lethe up --listen 127.0.0.1:3197" || true; sleep 0.5; }

part() { case " $PARTS " in *" $1 "*) return 0;; *) return 1;; esac; }

if part http; then
echo "== lethe new http: to the first request served"
APP="$W/app"; mkdir -p "$APP"
t0=$(now)
"$BIN" new http hello --dir "$APP" > /dev/null
(cd "$APP" && "$BIN" build > "$W/build.log" 2>&1)
built=$(since "$t0")
serve "$APP" /hello/items; up=$SERVED
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data hi localhost:3197/hello/items/first)
total=$(since "$t0")
echo "cold: new+build ${built}s, lethe up to serving ${up}s, first PUT $code; total ${total}s"
stop
sed -i 's/"Item not found"/"No such item"/' "$APP/components/hello/src/lib.rs"
t0=$(now)
(cd "$APP" && "$BIN" build > "$W/build.log" 2>&1)
rebuilt=$(since "$t0")
serve "$APP" /hello/items; up=$SERVED
code=$(curl -s -o /dev/null -w '%{http_code}' localhost:3197/hello/items/absent)
echo "warm: rebuild after an edit ${rebuilt}s, lethe up to serving ${up}s (answer $code); total $(since "$t0")s"
stop
fi

# PUTs object $2 through the keeper in app $1 as the embedded cluster's admin, then waits for
# the pass to make its ConfigMap; sets CODE to the PUT's status.
make_object() {
  local app=$1 name=$2 token
  token=$(awk '/token:/ {print $2; exit}' "$app/.lethe/cluster/kubeconfig" | tr -d '"')
  CODE=$(curl -s -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $token" \
    --data '{"data":{"greeting":"hello"}}' "localhost:3197/keeper/objects/default/$name")
  for _ in $(seq 1 1200); do
    kubectl --kubeconfig "$app/.lethe/cluster/kubeconfig" -n default get configmap "$name" \
      > /dev/null 2>&1 && return 0
    sleep 0.05
  done
  echo "the ConfigMap $name was never made" >&2; return 1
}

if part reconciler; then
echo "== lethe new reconciler: to the first object made"
RAPP="$W/rapp"; mkdir -p "$RAPP"
t0=$(now)
"$BIN" new reconciler keeper --kind v1/ConfigMap --dir "$RAPP" > /dev/null
(cd "$RAPP" && "$BIN" build > "$W/build.log" 2>&1)
built=$(since "$t0")
serve "$RAPP" /keeper/objects/default; up=$SERVED
t1=$(now); make_object "$RAPP" first; made=$(since "$t1")
echo "cold: new+build ${built}s, lethe up to serving ${up}s, PUT $CODE to ConfigMap made ${made}s; total $(since "$t0")s"
stop
sed -i 's/"made as desired"/"made as stated"/' "$RAPP/components/keeper/src/reconcile.rs"
t0=$(now)
(cd "$RAPP" && "$BIN" build > "$W/build.log" 2>&1)
rebuilt=$(since "$t0")
serve "$RAPP" /keeper/objects/default; up=$SERVED
t1=$(now); make_object "$RAPP" second; made=$(since "$t1")
echo "warm: rebuild after an edit ${rebuilt}s, lethe up to serving ${up}s, PUT $CODE to ConfigMap made ${made}s; total $(since "$t0")s"
stop
fi

if part twins; then
echo "== smoke (Rust) beside smoke-py (Python)"
ls -l target/wasm/wasm32-wasip2/wasm/smoke.wasm target/wasm/wasm32-wasip2/wasm/smoke_py.wasm \
  | awk '{printf "%s %.2f MB\n", $NF, $5 / 1e6}'
for twin in smoke smoke-py; do
  mkdir -p "$W/$twin"
  python3 - "$ROOT/components/smoke-py/spin.toml" "$twin" "$ROOT" > "$W/$twin/spin.toml" <<'PY'
import re, sys
text, keep, root = open(sys.argv[1]).read(), sys.argv[2], sys.argv[3]
other = "smoke-py" if keep == "smoke" else "smoke"
# Drop the other twin's trigger and component tables; make paths absolute.
blocks = re.split(r"\n(?=\[)", text)
kept = [b for b in blocks
        if f'component = "{other}"' not in b and not b.startswith(f"[component.{other}]")
        and not b.startswith(f"[component.{other}.")]
out = "\n".join(kept).replace('"../../', f'"{root}/').replace('"../smoke/', f'"{root}/components/smoke/')
out = out.replace('"migrations"', f'"{root}/components/smoke-py/migrations"')
print(out)
PY
done
for round in $(seq 1 "$ROUNDS"); do
  for twin in smoke smoke-py; do
    rm -rf "$W/$twin/.lethe"
    serve "$W/$twin" "/$twin/notes" --manifest spin.toml; cold=$SERVED; stop
    serve "$W/$twin" "/$twin/notes" --manifest spin.toml; warm=$SERVED; stop
    echo "round $round $twin: lethe up serving after ${cold}s compiling, ${warm}s from the cache"
  done
done
for twin in smoke smoke-py; do
  serve "$W/$twin" "/$twin/notes" --manifest spin.toml
  curl -s -o /dev/null -X PUT --data note "localhost:3197/$twin/notes/first"
  python3 - "$twin" "$REQUESTS" <<'PY'
import http.client, statistics, sys, time
twin, n = sys.argv[1], int(sys.argv[2])
c = http.client.HTTPConnection("127.0.0.1", 3197)
times = []
for _ in range(n):
    t = time.perf_counter()
    c.request("GET", f"/{twin}/notes/first")
    r = c.getresponse(); r.read()
    assert r.status == 200, r.status
    times.append((time.perf_counter() - t) * 1000)
times.sort()
print(f"{twin}: {n} GETs, p50 {statistics.median(times):.2f} ms, "
      f"p99 {times[int(n * 0.99) - 1]:.2f} ms, mean {statistics.mean(times):.2f} ms")
PY
  stop
done
fi
