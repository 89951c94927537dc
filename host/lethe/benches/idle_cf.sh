#!/usr/bin/env bash
# Idle load of the cf-reconciler: N orgs with S spaces each, created through the CF API, then what
# an idle `lethe up` costs the cluster over WINDOW seconds, counted two ways: by the cluster itself
# (`GET /lethe/requests`: every request it answered, by verb and resource) and by lethe
# (lethe_kube_requests_total{component="cf-reconciler"}, `changes` aside: answered from the host's
# memory); and the CPU of lethe and of the cluster, each its own process (`lethe cluster`, as a
# real cluster would be). Then the latency of a change: an org deleted through the API until its
# Org is gone (its namespace and its spaces' deleted, its finalizer released), CHANGES times.
#
#   cargo build --release -p lethe && BIN=target/release/lethe N=2000 S=5 WINDOW=60 \
#     bash host/lethe/benches/idle_cf.sh
#
# The window starts once the reconciler's own requests (the Lease's aside) stayed still for 15 s:
# the start-up pass and the upkeep are done, and what is measured is idle.
#
# SEED=kubectl makes, before lethe starts, the Org and Space objects (as the API would write them)
# and their namespaces (as lethe marks them) with kubectl, for sizes the API's N² seeding cannot
# reach; the window then starts after lethe's start-up full pass.
#
# With SEED=api the manifest is the repository's with the client-side rate limits raised, so that
# seeding N*(S+1) objects through the API does not take hours (the idle window is unaffected by
# them); with SEED=kubectl it is the repository's as shipped, so lethe's start-up full pass meets
# the limits a deployment has.
set -euo pipefail
N=${N:-200}; S=${S:-2}; WINDOW=${WINDOW:-30}; CHANGES=${CHANGES:-20}; PARALLEL=${PARALLEL:-8}
BIN=${BIN:-target/debug/lethe}
cd "$(dirname "$0")/../../.."
D=$(mktemp -d)
MANIFEST=$(mktemp ./spin-bench-XXXXXX.toml)
if [ "${SEED:-api}" = api ]; then
  sed -e 's/^kube_qps = .*/kube_qps = 100000/' -e 's/^kube_burst = .*/kube_burst = 100000/' \
    spin.toml > "$MANIFEST"
else
  cp spin.toml "$MANIFEST"
fi
$BIN cluster --data-dir "$D/c" --listen 127.0.0.1:6543 > "$D/cluster.log" 2>&1 &
CPID=$!
trap 'kill $PID $CPID 2>/dev/null; wait 2>/dev/null; rm -rf "$D" "$MANIFEST"' EXIT
PID=$CPID
KC="$D/c/cluster/kubeconfig"
for _ in $(seq 1 240); do [ -f "$KC" ] && kubectl --kubeconfig "$KC" get ns >/dev/null 2>&1 && break; sleep 0.5; done
for f in components/cf-core/kubernetes/crds.json components/cf-core/kubernetes/roles.json deploy/rbac.json \
    components/{cf-api,cf-job-status,cf-reconciler,data-jobs}/kubernetes/rbac.json; do
  kubectl --kubeconfig "$KC" apply -f "$f" >/dev/null
done
t0=$(date +%s)
if [ "${SEED:-api}" = kubectl ]; then
  # The world as lethe leaves it, made with kubectl before lethe starts: the Org and Space
  # objects as the API writes them, and each one's namespace with the mark lethe gives it (its
  # owner's type, name and uid, read back after the create). The API's create checks every name
  # against all of its kind, so seeding through it grows with N²; lethe's start-up full pass then
  # finds everything in place.
  python3 - "$N" "$S" "$D" "$KC" "$PARALLEL" <<'PY'
import json, subprocess, sys, uuid
from concurrent.futures import ThreadPoolExecutor
n, s, d, kc, parallel = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
kubectl = ["kubectl", "--kubeconfig", kc]
fin = ["cf.lethe.dev/cleanup"]
def create_chunk(k, chunk):
    path = f"{d}/seed-{k}.json"
    with open(path, "w") as f:
        json.dump({"apiVersion": "v1", "kind": "List", "items": chunk}, f)
    subprocess.run(kubectl + ["create", "-f", path], check=True, stdout=subprocess.DEVNULL)
def create(items):
    # A few kubectl processes at once: each sends its objects one request at a time.
    with ThreadPoolExecutor(parallel) as pool:
        for done in [pool.submit(create_chunk, k, items[k:k + 1000])
                     for k in range(0, len(items), 1000)]:
            done.result()
def namespaces_of(type_name, resource):
    listed = json.loads(subprocess.run(kubectl + ["get", resource, "-A", "-o", "json"],
                                       check=True, capture_output=True).stdout)
    create([{"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": o["metadata"]["name"], "labels": {
                 "cf.lethe.dev/owner": f"{type_name}.{o['metadata']['name']}",
                 "cf.lethe.dev/owner-uid": o["metadata"]["uid"],
                 "app.kubernetes.io/managed-by": "lethe"}}}
            for o in listed["items"]])
orgs = [str(uuid.uuid4()) for _ in range(n)]
with open(f"{d}/orgs", "w") as f:
    f.writelines(o + "\n" for o in orgs)
create([{"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
         "metadata": {"name": org, "namespace": "cf", "finalizers": fin},
         "spec": {"displayName": f"idle-{i}", "suspended": False}} for i, org in enumerate(orgs)])
namespaces_of("org", "orgs.cf.lethe.dev")
create([{"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Space",
         "metadata": {"name": str(uuid.uuid4()), "namespace": org, "finalizers": fin,
                      "labels": {"cf.lethe.dev/owner": f"org.{org}"}},
         "spec": {"displayName": f"s{j}", "orgGUID": org}}
        for org in orgs for j in range(1, s + 1)])
namespaces_of("space", "spaces.cf.lethe.dev")
PY
fi
$BIN up --manifest "$MANIFEST" --data-dir "$D/up" --kubeconfig "$KC" --listen 127.0.0.1:3300 \
  --admin-listen 127.0.0.1:9390 > "$D/log" 2>&1 &
PID=$!
for _ in $(seq 1 240); do curl -sf 127.0.0.1:9390/readyz >/dev/null && break; sleep 0.5; done
TOKEN=$(awk '/token:/ {print $2}' "$KC")
export TOKEN S D
if [ "${SEED:-api}" = api ]; then
# A caller's share of the API is bounded (`caller_qps`): curl waits out each 429's Retry-After.
seq 1 "$N" | xargs -P "$PARALLEL" -I{} bash -c '
  org=$(curl -sf --retry 50 -X POST 127.0.0.1:3300/v3/organizations -H "Authorization: Bearer $TOKEN" \
    -d "{\"name\":\"idle-{}\"}" | python3 -c "import sys,json; print(json.load(sys.stdin)[\"guid\"])")
  echo "$org" >> "$D/orgs"
  for j in $(seq 1 "$S"); do
    curl -sf --retry 50 -o /dev/null -X POST 127.0.0.1:3300/v3/spaces -H "Authorization: Bearer $TOKEN" \
      -d "{\"name\":\"s$j\",\"relationships\":{\"organization\":{\"data\":{\"guid\":\"$org\"}}}}"
  done'
fi
echo "seeded $N orgs and $((N*S)) spaces in $(( $(date +%s) - t0 )) s"
if [ "${SEED:-api}" = kubectl ]; then
  # The start-up full pass visited every org and space (a pass that changes nothing logs nothing).
  items() { curl -s 127.0.0.1:9390/metrics | awk '/^lethe_reconcile_items_total\{.*cf-reconciler/ {s+=$NF} END {print s+0}'; }
  until [ "$(items)" -ge $((N * (S + 1))) ]; do sleep 1; done
fi
# Let the reconciler finish what the creates started (finalizers, its first full pass, and the
# upkeep: conditions and name claims, at most 100 writes a pass): the window starts once its
# requests, the Lease's aside, stayed still for 15 s (SETTLE=0 waits 20 s instead, as before).
work() { curl -s 127.0.0.1:9390/metrics | awk '/^lethe_kube_requests_total\{component="cf-reconciler"/ && !/verb="changes"/ && !/kind="Lease"/ {s+=$NF} END {print s+0}'; }
if [ "${SETTLE:-1}" = 0 ]; then
  sleep 20
else
  settle0=$(date +%s)
  while :; do w=$(work); sleep 15; [ "$(work)" = "$w" ] && break; done
  echo "the reconciler settled $(( $(date +%s) - settle0 )) s after the seeding"
fi
served() { kubectl --kubeconfig "$KC" get --raw /lethe/requests; }
calls() { curl -s 127.0.0.1:9390/metrics | awk '/^lethe_kube_requests_total\{component="cf-reconciler"/ && !/verb="changes"/ {s+=$NF} END {print s+0}'; }
cpu() { awk '{print $14+$15}' /proc/$1/stat; }
s1=$(served); c1=$(calls); t1=$(cpu $PID); k1=$(cpu $CPID)
sleep "$WINDOW"
s2=$(served); c2=$(calls); t2=$(cpu $PID); k2=$(cpu $CPID)
hz=$(getconf CLK_TCK)
python3 - "$s1" "$s2" <<EOF
import json, sys
before, after = json.loads(sys.argv[1]), json.loads(sys.argv[2])
diff = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
leases = sum(v for k, v in diff.items() if k.endswith(" leases"))
watches = sum(v for k, v in diff.items() if k.startswith("WATCH "))
rest = sum(diff.values()) - leases - watches
print(f"orgs {$N}, spaces {$N*$S}, idle {$WINDOW} s: the cluster answered {rest/$WINDOW:.2f} requests/s "
      f"(Leases {leases/$WINDOW:.2f}/s and {watches} watch requests aside: {diff}); "
      f"cf-reconciler's own count {($c2-$c1)/$WINDOW:.2f}/s; lethe CPU {100*($t2-$t1)/$hz/$WINDOW:.1f}% of one core, "
      f"the cluster's {100*($k2-$k1)/$hz/$WINDOW:.1f}%")
EOF
# Change -> converged: delete an org; done when the Org object is gone (lethe released its
# finalizer after its namespace and its spaces' were deleted).
lat=()
for guid in $(head -n "$CHANGES" "$D/orgs"); do
  start=$(date +%s%N)
  curl -sf -o /dev/null -X DELETE "127.0.0.1:3300/v3/organizations/$guid" -H "Authorization: Bearer $TOKEN"
  until ! kubectl --kubeconfig "$KC" get orgs.cf.lethe.dev -n cf "$guid" >/dev/null 2>&1; do sleep 0.05; done
  lat+=($(( ($(date +%s%N) - start) / 1000000 )))
done
python3 - "${lat[@]}" <<EOF
import sys
v = sorted(int(x) for x in sys.argv[1:])
q = lambda p: v[min(len(v) - 1, round((len(v) - 1) * p))]
print(f"org delete -> Org gone (namespaces of the org and its {$S} spaces deleted, finalizer released), "
      f"{len(v)} deletions: p50 {q(0.5)} ms, p99 {q(0.99)} ms, max {v[-1]} ms (kubectl polls every 50 ms and costs ~60 ms a call)")
EOF
