#!/usr/bin/env python3
"""Proof that the simulator has teeth: weakens each guard of the data-jobs and CF logic and of the controller runtime in turn, runs
the seeds `cargo test` runs, prints the first seed that breaks an invariant, and restores the
source (also when interrupted). Run from the repository root: `python3 sim/mutate.py [NAME...]` (`SEEDS=1000` for fewer seeds);
`python3 sim/mutate.py --check` only checks that every guard is still in its file.
A guard whose line reads `all seeds passed` is one the simulator does not check."""
import os
import subprocess
import sys

# name: (file, the guard as written, the guard weakened)
MUTATIONS = {
 'finalizers':('components/data-jobs-core/src/sync.rs','        if !finalizers.is_empty() {\n            body["metadata"]["finalizers"]','        if false && !finalizers.is_empty() {\n            body["metadata"]["finalizers"]'),
 'uidprecondition':('components/data-jobs-core/src/sync.rs','            precondition_uid: Some(uid.to_string()),\n        };\n        match self.kube.delete(','            precondition_uid: None.filter(|_: &String| !uid.is_empty()),\n        };\n        match self.kube.delete('),
 'takeover':('components/data-jobs-core/src/sync.rs','        if existing.label(model::JOB_UID_LABEL) != Some(uid) {','        if false && existing.label(model::JOB_UID_LABEL) != Some(uid) {'),
 'lease-not-ours':('components/guest/src/lease.rs','        if current.label(MANAGED_BY.0) != Some(MANAGED_BY.1) {','        if false && current.label(MANAGED_BY.0) != Some(MANAGED_BY.1) {'),
 'lease':('components/guest/src/lease.rs','        if !mine && !holder.is_empty() && renewed.saturating_add(duration_ms) > now {','        if !mine && !holder.is_empty() && renewed.saturating_add(duration_ms) > now + duration_ms {'),
 'status':('components/data-jobs-core/src/status.rs','    let remaining = actual_left || cronjob_left;','    let remaining = actual_left || (cronjob_left && false);'),
 'record':('components/data-jobs-core/src/api.rs','''            "INSERT INTO data_job_deletion (guid, operation, job_uid, team, job_name, requested_at, completed_at) \\
             VALUES ($1, $2, $3, $4, $5, $6, NULL) \\
             ON CONFLICT (guid) DO UPDATE SET requested_at = excluded.requested_at, completed_at = NULL",''','''            "SELECT $1, $2, $3, $4, $5, $6",'''),
 'lease-in-pass':('components/data-jobs-core/src/sync.rs','        lease.keep(host.now_ms()).map_err(|lost| lost.to_string())?;\n        let step = match plan {','        let step = match plan {'),
 'lease-orphans':('components/data-jobs-core/src/sync.rs','        // As before each item below: a leader paused past its Lease stops here.\n        lease.keep(host.now_ms()).map_err(|lost| lost.to_string())?;\n',''),
 'replace-guard':('components/data-jobs-core/src/sync.rs','            resource_version: Some(resource_version),\n        });\n        if !finalizers.is_empty() {','            resource_version: None.filter(|_: &&str| resource_version.is_empty()),\n        });\n        if !finalizers.is_empty() {'),
 'claim':('components/data-jobs-core/src/sync.rs','            match claimed {\n                Ok(0) => return Step::Done,','            match claimed.map(|_| 1) {\n                Ok(0) => return Step::Done,'),
 # Liveness: a reconciler that stops repairing passes every safety invariant.
 'repair-drift':('components/data-jobs-core/src/sync.rs','                    let as_desired = live.annotation_hash.as_deref() == Some(d.hash.as_str())\n                        && live.live_hash.as_deref() == Some(d.hash.as_str());','                    let as_desired = live.annotation_hash.as_deref() == Some(d.hash.as_str());'),
 # The CF side.
 'cf-confirm':('components/cf-core/src/deletion.rs','    let deadline = env.now_ms() + i64::try_from(settings.delete_confirm_ms).unwrap_or(i64::MAX);','    let deadline = env.now_ms() + 0 * i64::try_from(settings.delete_confirm_ms).unwrap_or(i64::MAX);'),
 'cf-ownership':('components/cf-core/src/ownership.rs','        !self.object.metadata.uid.is_empty()\n','        true || !self.object.metadata.uid.is_empty()\n'),
 'cf-finalizer-test':('components/guest/src/finalizer.rs','        { "op": "test", "path": path, "value": name },\n',''),
 'cf-namespace-uid':('components/cf-core/src/reconcile.rs','        precondition_uid: Some(ns.metadata.uid.clone()),\n    };\n    match kube.delete(','        precondition_uid: None.filter(|_: &String| ns.metadata.uid.is_empty()),\n    };\n    match kube.delete('),
 'cf-children-first':('components/cf-core/src/reconcile.rs','        if children_left {','        if children_left && false {'),
 'cf-status-record':('components/cf-core/src/jobs.rs','        if let Some(ts) = &object.metadata.deletion_timestamp {\n            let blocked_by','        if !access::visible(kube, caller, t, &object).unwrap_or(false) {\n            return Ok(complete(&guid, now));\n        }\n        if let Some(ts) = &object.metadata.deletion_timestamp {\n            let blocked_by'),
 'cf-status-reread':('components/cf-core/src/jobs.rs','        if !reread {\n            reread = true;','        if !reread && access::visible(kube, caller, t, &object).unwrap_or(true) {\n            reread = true;'),
 'cf-name-claim':('components/cf-core/src/names.rs','                Ok(_) => return Ok(true),\n                Err(KubeError::Conflict(_)) => {}','                Ok(_) | Err(KubeError::Conflict(_)) => return Ok(true),'),
 'cf-observed-generation':('components/guest/src/conditions.rs','            "observedGeneration": generation,','            "observedGeneration": generation + 1,'),
 'cf-event-regarding':('components/guest/src/events.rs','                "uid": regarding.metadata.uid,','                "uid": regarding.metadata.resource_version,'),
 'head-of-line':('components/data-jobs-core/src/sync.rs','            Step::Failed(e) => p.fail(uid, item, e, report),\n        }\n    }\n    host.progress(total, total);','            Step::Failed(e) => {\n                p.fail(uid, item, e, report);\n                break;\n            }\n        }\n    }\n    host.progress(total, total);'),
 # Liveness of the CF reconciler: what quiescence now checks of claims and conditions.
 'cf-claim-sweep':('components/cf-core/src/names.rs','            if !old_enough(claim.created, started) || listed.contains(&holder) {','            if true || !old_enough(claim.created, started) || listed.contains(&holder) {'),
 'cf-claim-backfill':('components/cf-core/src/reconcile.rs','            Some(claims) => !claims.held(claim, holder) && self.take_upkeep(),','            Some(_) => false,'),
 'cf-conditions-ready':('components/cf-core/src/reconcile.rs','        if released {\n            return;\n        }\n        let visit','        if released || matches!(result, Ok(Outcome::Done)) {\n            return;\n        }\n        let visit'),
 'cf-release-held':('components/cf-core/src/reconcile.rs','    let patch = finalizer::remove_patch(index, FINALIZER);\n    match kube.patch(&Identity::Privileged, &object.target, &patch) {','    if !finalizer::is_last(object, FINALIZER) {\n        return Ok(Outcome::Waiting);\n    }\n    let patch = finalizer::remove_patch(index, FINALIZER);\n    match kube.patch(&Identity::Privileged, &object.target, &patch) {'),
 # Races of one name (the CF world): a claim younger than a create's time limit stays taken.
 'cf-claim-in-flight':('components/cf-core/src/names.rs','        if !old_enough(created_ms(found), env.now_ms()) {\n            return Ok(false);\n        }\n        let Some(holder)','        let Some(holder)'),
 # Polls of the jobs of live resources (the CF and Korifi worlds).
 'live-job-visible':('components/cf-core/src/jobs.rs','            Ok(true) => Err(HttpError::job_not_found()),\n            Err(e) => Err(HttpError::from_kube(e, crate::errors::JOB_NOT_FOUND)),\n        };\n    }\n}','            Ok(true) => Ok(complete(&guid, now)),\n            Err(e) => Err(HttpError::from_kube(e, crate::errors::JOB_NOT_FOUND)),\n        };\n    }\n}'),
 'live-job-hidden':('components/cf-core/src/jobs.rs','            Ok(false) => Ok(complete(&guid, now)),\n            Ok(true) => Err(HttpError::job_not_found()),','            Ok(false) => Err(HttpError::job_not_found()),\n            Ok(true) => Err(HttpError::job_not_found()),'),
 # Korifi's job types (the Korifi world).
 'korifi-state-generation':('components/cf-core/src/jobs.rs','    let current = object.metadata.generation.is_some() && observed == object.metadata.generation;','    let current = object.metadata.generation.is_some() || observed == object.metadata.generation;'),
 'korifi-role-label':('components/cf-core/src/access.rs','    if let Find::Label(label) = &t.find {','    if let (Find::Label(label), false) = (&t.find, true) {'),
 'cf-lease-in-pass':('components/cf-core/src/reconcile.rs','        match self.lease.map(|lease| lease.keep(now)) {','        match self.lease.filter(|_| false).map(|lease| lease.keep(now)) {'),
 'cf-lease-orphans':('components/cf-core/src/names.rs','            if must_stop() {\n                return Ok((deleted, true));\n            }\n',''),
 # The cf reconciler's change filters: a deletion's first update wakes it, and only a namespace's
 # deletion counts as its being gone.
 'cf-wake-deleting':('components/cf-core/src/follow.rs','                    } else if deleting && waiting.contains(key.as_str()) {','                    } else if deleting {'),
 'cf-heard-gone':('components/cf-core/src/follow.rs','                    if deleted {\n                        self.gone.insert(name.clone());\n                    } else {\n                        self.gone.remove(name);\n                    }','                    self.gone.insert(name.clone());'),
 'cf-sweep':('components/cf-core/src/reconcile.rs','            Ok(None) => {}\n            Err(e) => {\n                report.failed.push((key, format!("reading it: {e}")));','            Ok(None) => return,\n            Err(e) => {\n                report.failed.push((key, format!("reading it: {e}")));'),
 # The controller runtime (lethe_guest::controller and the backoff it keeps), through the reconciler template (the keeper world).
 'driver-lease-write':('components/guest/src/controller/context.rs','        self.lease.keep(self.env.now_ms()).map_err(|lost| {','        Ok::<(), crate::lease::LeaseLost>(()).map_err(|lost: crate::lease::LeaseLost| {'),
 'driver-lease-item':('components/guest/src/controller/mod.rs','        let why = match self.ctx.lease.keep(now) {','        let why = match Ok::<(), LeaseLost>(()) {'),
 'driver-rv-guard':('components/guest/src/controller/context.rs','                Patch::Json(Json::Array(std::iter::once(guard).chain(ops).collect()))','                Patch::Json(Json::Array(std::iter::once(guard).skip(1).chain(ops).collect()))'),
 'driver-uid-precondition':('components/guest/src/controller/context.rs','            precondition_uid: Some(live.metadata.uid.clone()),','            precondition_uid: None,'),
 'driver-owns':('components/guest/src/controller/context.rs','        if !(self.owns)(object) {','        if false && !(self.owns)(object) {'),
 'driver-unpark':('components/guest/src/backoff.rs','            }) => *parked_on == fingerprint(),','            }) => true || *parked_on == fingerprint(),'),
 'driver-again':('components/guest/src/backoff.rs','            attempts: 0,\n            next_attempt_ms: at_ms,','            attempts: 0,\n            next_attempt_ms: i64::MAX.min(at_ms.saturating_add(i64::MAX)),'),
}

# How many seeds each mutation runs: those `cargo test` runs, unless SEEDS says fewer (quicker
# when only the first failing seed is wanted and it is known to come early).
SEEDS = int(os.environ.get("SEEDS", "10000"))

def main():
    only = sys.argv[1:]
    stale = []
    if only == ["--check"]:
        # Only that every guard is still in its file, once (a test runs this).
        for name, (path, guard, _) in MUTATIONS.items():
            if open(path).read().count(guard) != 1:
                stale.append(name)
        if stale:
            sys.exit(f"stale mutations (the guard is not in its file exactly once): {', '.join(stale)}")
        return
    for name, (path, guard, weakened) in MUTATIONS.items():
        if only and name not in only:
            continue
        original = open(path).read()
        if original.count(guard) != 1:
            # The code moved on: the mutation must be rewritten, and the run says so.
            print(f"{name}: STALE: the guard is not in {path} exactly once")
            stale.append(name)
            continue
        open(path, "w").write(original.replace(guard, weakened, 1))
        try:
            build = subprocess.run("cargo build -q -p lethe-sim", shell=True)
            if build.returncode != 0:
                print(f"{name}: does not build")
                continue
            run = subprocess.run(f"./target/debug/lethe-sim --seeds {SEEDS}", shell=True,
                                 capture_output=True, text=True)
            found = [l for l in run.stdout.splitlines() if "VIOLATION" in l]
            print(f"{name}: {found[0] if found else 'all seeds passed'}")
        finally:
            open(path, "w").write(original)
    if stale:
        sys.exit(f"stale mutations: {', '.join(stale)}")

if __name__ == "__main__":
    main()
