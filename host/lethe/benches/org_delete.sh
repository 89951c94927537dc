#!/usr/bin/env bash
# Deleting an org, step by step, in a world that is busy but idle: ORGS orgs of SPACES spaces and
# DEPLOYMENTS data-job deployments, made through lethe's own APIs, on the embedded cluster and the
# shipped `spin.toml` (its limits as a deployment has them). Then DELETIONS orgs are deleted
# through the CF API, one at a time, and each is timed, from the DELETE's answer, until:
#
#   spaces' namespaces gone  every namespace of its spaces is gone (lethe deleted the spaces'
#                            namespaces and the namespace controller emptied them)
#   spaces gone              every Space object is gone (lethe released their finalizers)
#   org namespace gone       the org's own namespace is gone
#   org gone                 the Org object is gone (lethe released its finalizer): converged
#
# The cluster is read directly (its HTTPS API, as lethe's own token, every 20 ms), not with
# kubectl, whose ~60 ms a call would blur the steps.
#
#   cargo build --release -p lethe && BIN=target/release/lethe bash host/lethe/benches/org_delete.sh
#
# LOG=<file> keeps lethe's log (LETHE_LOG=lethe=debug shows each pass, and
# LETHE_LOG=lethe::caps::kube=trace each request). PAUSE=0 deletes the orgs back to back; by
# default it waits PAUSE=2 s between them, so each starts with a full token bucket.
set -euo pipefail
ORGS=${ORGS:-100}; SPACES=${SPACES:-4}; DEPLOYMENTS=${DEPLOYMENTS:-300}; DELETIONS=${DELETIONS:-5}
PARALLEL=${PARALLEL:-8}; PAUSE=${PAUSE:-2}
BIN=${BIN:-target/debug/lethe}
cd "$(dirname "$0")/../../.."
D=$(mktemp -d)
$BIN up ${MANIFEST:+--manifest "$MANIFEST"} --data-dir "$D/up" --listen 127.0.0.1:3301 --admin-listen 127.0.0.1:9391 > "$D/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait 2>/dev/null; [ -n "${LOG:-}" ] && cp "$D/log" "$LOG"; rm -rf "$D"' EXIT
for _ in $(seq 1 600); do curl -sf 127.0.0.1:9391/readyz >/dev/null && break; sleep 0.2; done
KC=$(find "$D/up" -name kubeconfig | head -1)
python3 - "$KC" "$ORGS" "$SPACES" "$DEPLOYMENTS" "$DELETIONS" "$PARALLEL" "$PAUSE" <<'PY'
import base64, json, ssl, statistics, subprocess, sys, tempfile, time, urllib.error, urllib.request
from concurrent.futures import ThreadPoolExecutor

kc, orgs, spaces, deployments, deletions, parallel, pause = sys.argv[1], *map(int, sys.argv[2:7]), float(sys.argv[7])
view = lambda path: subprocess.run(["kubectl", "--kubeconfig", kc, "config", "view", "--raw", "-o",
                                    f"jsonpath={path}"], check=True, capture_output=True, text=True).stdout
server, token = view("{.clusters[0].cluster.server}"), view("{.users[0].user.token}")
ca = tempfile.NamedTemporaryFile(delete=False)
ca.write(base64.b64decode(view("{.clusters[0].cluster.certificate-authority-data}")))
ca.close()
tls = ssl.create_default_context(cafile=ca.name)

def call(url, method="GET", body=None, context=None):
    req = urllib.request.Request(url, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, context=context, timeout=30) as r:
            text = r.read()
            return r.status, json.loads(text) if text else None
    except urllib.error.HTTPError as e:
        return e.code, None

lethe = "http://127.0.0.1:3301"
def api(method, path, body=None):
    # One caller's share of the host is bounded (`caller_qps`): a 429 is waited out.
    for _ in range(600):
        status, answer = call(lethe + path, method, body)
        if status != 429:
            break
        time.sleep(0.2)
    if status >= 300 and status != 404:
        raise SystemExit(f"{method} {path}: {status}")
    return answer

def exists(path):
    return call(server + path, context=tls)[0] != 404

t0 = time.time()
def make_org(i):
    org = api("POST", "/v3/organizations", {"name": f"busy-{i}"})["guid"]
    made = [api("POST", "/v3/spaces", {"name": f"s{j}", "relationships": {"organization": {"data": {"guid": org}}}})["guid"]
            for j in range(spaces)]
    return org, made
with ThreadPoolExecutor(parallel) as pool:
    world = list(pool.map(make_org, range(orgs)))
def deploy(i):
    job = f"job-{i}"
    api("POST", "/data-jobs/for-team/bench/jobs", {"job_name": job, "config": {"schedule": {"schedule_cron": "0 * * * *"}}})
    api("POST", f"/data-jobs/for-team/bench/jobs/{job}/deployments",
        {"job_version": "v1", "enabled": True, "schedule": {"schedule_cron": "0 * * * *"}})
with ThreadPoolExecutor(parallel) as pool:
    list(pool.map(deploy, range(deployments)))
print(f"seeded {orgs} orgs of {spaces} spaces and {deployments} deployments in {time.time() - t0:.0f} s")
# Idle: every org's namespace, every space's, and every CronJob made; then a quiet minute.
def settled():
    return all(exists(f"/api/v1/namespaces/{s}") for _, made in world for s in made[-1:])
while not settled():
    time.sleep(1)
time.sleep(30)

def requests():
    """The cf reconciler's Kubernetes calls so far, by verb and kind (lethe's own count)."""
    text = urllib.request.urlopen("http://127.0.0.1:9391/metrics", timeout=10).read().decode()
    counts = {}
    for line in text.splitlines():
        if line.startswith("lethe_kube_requests_total{") and 'component="cf-reconciler"' in line:
            labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:line.index("}")].split(","))
            key = f'{labels["verb"].strip(chr(34))} {labels["kind"].strip(chr(34))}'
            counts[key] = counts.get(key, 0) + float(line.rsplit(" ", 1)[1])
    return counts

steps = {"spaces' namespaces gone": [], "spaces gone": [], "org namespace gone": [], "org gone": []}
for org, made in world[:deletions]:
    before = requests()
    start = time.time()
    api("DELETE", f"/v3/organizations/{org}")
    seen = {}
    while "org gone" not in seen and time.time() - start < 120:
        now = time.time() - start
        checks = {
            "spaces' namespaces gone": lambda: not any(exists(f"/api/v1/namespaces/{s}") for s in made),
            "spaces gone": lambda: not any(exists(f"/apis/cf.lethe.dev/v1alpha1/namespaces/{org}/spaces/{s}") for s in made),
            "org namespace gone": lambda: not exists(f"/api/v1/namespaces/{org}"),
            "org gone": lambda: not exists(f"/apis/cf.lethe.dev/v1alpha1/namespaces/cf/orgs/{org}"),
        }
        for step, done in checks.items():
            if step not in seen and done():
                seen[step] = now
        time.sleep(0.02)
    for step in steps:
        steps[step].append(seen.get(step, float("nan")) * 1000)
    print(f"org {org}: " + ", ".join(f"{s} {seen.get(s, float('nan')) * 1000:.0f} ms" for s in steps))
    if not pause:
        continue
    # The calls of that deletion (the Lease's aside), once the passes it woke are done.
    time.sleep(1.5)
    made = {k: v - before.get(k, 0) for k, v in requests().items() if v - before.get(k, 0) and "Lease" not in k}
    print(f"  the cf reconciler's calls: {int(sum(made.values()))}: " + ", ".join(f"{k} {int(v)}" for k, v in sorted(made.items())))
    # A full token bucket again (kube_burst at kube_qps), as for a deletion in an idle world.
    time.sleep(pause)
for step, ms in steps.items():
    print(f"{step}: median {statistics.median(ms):.0f} ms, min {min(ms):.0f}, max {max(ms):.0f} (n={len(ms)})")
PY
