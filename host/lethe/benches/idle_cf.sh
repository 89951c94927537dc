#!/usr/bin/env bash
# Idle load of the cf-reconciler: N orgs with S spaces each, then the Kubernetes calls the
# reconciler makes (lethe_kube_requests_total, `changes` aside: answered from the host's memory)
# and the CPU lethe uses, over WINDOW seconds of idling.
set -euo pipefail
N=${N:-200}; S=${S:-2}; WINDOW=${WINDOW:-30}
BIN=${BIN:-target/debug/lethe}
D=$(mktemp -d)
$BIN up --data-dir "$D" --listen 127.0.0.1:3300 --admin-listen 127.0.0.1:9390 > "$D/log" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 1 240); do curl -sf 127.0.0.1:9390/readyz >/dev/null && break; sleep 0.5; done
TOKEN=$(awk '/token:/ {print $2}' "$D/cluster/kubeconfig")
for i in $(seq 1 "$N"); do
  org=$(curl -sf -X POST 127.0.0.1:3300/v3/organizations -H "Authorization: Bearer $TOKEN" -d "{\"name\":\"idle-$i\"}" | python3 -c 'import sys,json; print(json.load(sys.stdin)["guid"])')
  for j in $(seq 1 "$S"); do
    curl -sf -X POST 127.0.0.1:3300/v3/spaces -H "Authorization: Bearer $TOKEN" \
      -d "{\"name\":\"s$j\",\"relationships\":{\"organization\":{\"data\":{\"guid\":\"$org\"}}}}" >/dev/null
  done
done
sleep 15
calls() { curl -s 127.0.0.1:9390/metrics | awk '/^lethe_kube_requests_total\{component="cf-reconciler"/ && !/verb="changes"/ {s+=$NF} END {print s+0}'; }
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
c1=$(calls); t1=$(cpu)
sleep "$WINDOW"
c2=$(calls); t2=$(cpu)
hz=$(getconf CLK_TCK)
python3 -c "print(f'orgs {$N}, spaces {$N*$S}: cf-reconciler Kubernetes requests/s {($c2-$c1)/$WINDOW:.2f}; lethe CPU {100*($t2-$t1)/$hz/$WINDOW:.1f}% of one core over {$WINDOW} s')"
