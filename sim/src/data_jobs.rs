//! The data-jobs world: jobs made, deployed, changed and deleted through the data-jobs API, their
//! deletion jobs polled, and the reconciler run by 1–3 hosts competing for the Lease and crashing
//! between calls; a hostile user editing, deleting and holding CronJobs and making its own; and
//! faults.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;

use data_jobs_core::model::{self, HASH_ANNOTATION, JOB_UID_LABEL, MANAGED_BY, MANAGED_BY_LABEL};
use data_jobs_core::sync::{Tick, tick_with};
use lethe_guest::fake::{FakeCluster, FakeHost, FakeSql};
use lethe_guest::kube::{DeleteOptions, Identity, Kube as _, KubeError, ObjectRef};
use lethe_guest::sql::{Sql as _, Value};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value as Json, json};

use crate::foreign_lease::Squatter;
use crate::glance;
use crate::host::faults::{Calls, Plan};
use crate::host::{Scheduled, WriteCall};
use crate::world::{self, Failure, Quiescent, Scenario, Stage};

const MIGRATIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../components/data-jobs/migrations"
);
const NAMESPACE: &str = "data-jobs";
const TEAM: &str = "t";
/// The client's bearer token; the hostile user acts as the cluster's administrator.
const CLIENT: &str = "t";
const JOB_NAMES: [&str; 3] = ["alpha", "beta", "gamma"];
const FOREIGN_FINALIZER: &str = "example.com/keep";

/// The faults injected into the cluster: which calls fail (`*`: every kind), which writes and
/// creates lose their answer, and how often each comes.
const FAULTS: Plan = Plan {
    failing: Calls {
        verbs: &["create", "replace", "delete", "patch", "list", "get"],
        kinds: &["CronJob", "Lease", "*"],
    },
    timed_out: Calls {
        verbs: &["replace", "delete", "patch"],
        kinds: &["CronJob", "Lease"],
    },
    lost_creates: &["CronJob"],
    odds: [25, 45, 53, 60, 70, 85],
};

/// Runs the data-jobs world of `seed` for `steps` steps, then lets it quiesce: its trace, and the
/// first invariant found broken.
pub(crate) fn play(seed: u64, steps: usize) -> (Vec<String>, Option<Failure>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let kube = FakeCluster::new();
    kube.grant(CLIENT, "*", "*", "*");
    kube.admit_with(Box::new(|o| {
        let valid = o["spec"]["schedule"]
            .as_str()
            .is_some_and(model::valid_schedule);
        if o["kind"] == "CronJob" && !valid {
            return Err(KubeError::Invalid("spec.schedule: Invalid value".into()));
        }
        Ok(())
    }));
    let sql = FakeSql::migrated(MIGRATIONS);
    let hosts = world::reconciler_hosts(&mut rng, |name| lethe_host(&sql, &kube, name));
    let api = lethe_host(&sql, &kube, "api");
    let mut world = World {
        squatter: Squatter::new(&rng, NAMESPACE, data_jobs_core::sync::LEASE_NAME),
        stage: Stage::new(rng, &kube, &hosts, &api, ""),
        foreign: BTreeMap::new(),
        gone: BTreeSet::new(),
    };
    let violation = world.play(steps).err();
    (world.stage.trace, violation)
}

/// A lethe host on the world's clock. Deletion jobs never time out here: a FAILED job would be
/// right after a long fault, and the invariants are about COMPLETE.
fn lethe_host<'a>(sql: &'a FakeSql, kube: &'a FakeCluster, instance: &str) -> FakeHost<'a> {
    let mut host = FakeHost::new(sql, kube, instance);
    host.now = kube.now.clone();
    host.set_config("deletion_timeout_seconds", "100000000");
    host
}

/// A deletion job a client was given: its status path, the job uid it is about, and whether its
/// first poll already said COMPLETE.
struct Deletion {
    path: String,
    job_uid: String,
    complete: bool,
}

struct World<'w, 'a> {
    stage: Stage<'w, 'a, Deletion>,
    /// The hostile user's own CronJobs (none of lethe's labels), by name: their uid.
    foreign: BTreeMap<String, String>,
    /// The hostile user's hand on the reconciler's Lease.
    squatter: Squatter,
    /// Jobs whose deletion a client saw COMPLETE: deleted for good (a job's uid never returns).
    gone: BTreeSet<String>,
}

/// A CronJob as the invariants see it.
#[derive(Clone)]
struct Seen {
    meta: glance::Meta,
    job_uid: Option<String>,
    managed: bool,
}

impl Scenario for World<'_, '_> {
    fn step(&mut self, roll: u32) -> Result<(), Failure> {
        match roll {
            0..30 => self.lethe_pass(false)?,
            30..55 => self.client()?,
            55..65 => self.poll()?,
            65..77 => self.hostile(),
            77..87 => self.fault(),
            _ => self.stage.let_time_pass(),
        }
        Ok(())
    }

    /// Stops the clients, the hostile user and the faults, then runs passes until the world
    /// converges or the bound is reached.
    fn quiesce(&mut self) -> Result<(), Failure> {
        self.stage.kube.heal();
        self.stage.throttle.remaining.set(0);
        for (name, _) in std::mem::take(&mut self.foreign) {
            let _ = self.stage.kube.delete(
                &self.admin(),
                &Self::cronjob_ref(&name),
                &DeleteOptions::default(),
            );
        }
        // lethe puts no finalizer on its CronJobs: every one there is the hostile user's. Half of
        // them stay: what they hold cannot finish, and everything else must finish beside it.
        for c in self.cronjobs().into_values() {
            if c.meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER) {
                if self.stage.rng.random_ratio(1, 2) {
                    self.stage.note(&format!(
                        "quiescence: the hostile user's finalizer stays on CronJob {}",
                        c.meta.name
                    ));
                    continue;
                }
                self.stage
                    .kube
                    .clear_finalizers("CronJob", NAMESPACE, &c.meta.name);
            }
        }
        if let Some(line) = self.squatter.stop(self.stage.kube) {
            self.stage.note(&line);
        }
        self.stage
            .note("quiescence: faults healed, the hostile user's objects and finalizers removed");
        self.converge()
    }

    fn rng(&mut self) -> &mut StdRng {
        &mut self.stage.rng
    }
}

impl World<'_, '_> {
    // --- lethe -----------------------------------------------------------------------------

    /// One pass by a host the seed picks (`full` forces a full pass), which may crash; then the
    /// invariants that compare the cluster before and after it.
    fn lethe_pass(&mut self, full: bool) -> Result<(), Failure> {
        let (index, host, crash_after) = self.stage.pick_pass(full, 40);
        let lease = world::lease(self.stage.kube, NAMESPACE, data_jobs_core::sync::LEASE_NAME);
        let foreign_lease = self.squatter.foreign(self.stage.kube);
        let before = self.cronjobs();
        let desired_before = self.desired();
        let now = self.stage.kube.now.get();
        // Clients keep calling the API while the pass runs: between any two of its calls, one
        // may act (not once the world quiesces).
        let interleave_seed: u64 = self.stage.rng.random();
        let interleave = RefCell::new(StdRng::seed_from_u64(interleave_seed));
        // So may the hostile user, hand-editing one of lethe's CronJobs between a read of the
        // pass and its write. Its own stream of choices, derived from the interleaving's seed,
        // leaves the rest of the schedule as it was.
        let edits = RefCell::new(StdRng::seed_from_u64(
            interleave_seed ^ 0xc2b2_ae3d_27d4_eb4f,
        ));
        let held_during = RefCell::new(BTreeSet::new());
        let during = RefCell::new(Vec::new());
        let client = Client {
            api: self.stage.api,
        };
        // Once in a while the host stops between two of its calls for longer than its Lease
        // lasts (a paused process, a long GC, a VM migrated), and another host takes the Lease
        // and runs a pass meanwhile; the CronJobs as they were when it did.
        let hosts = self.stage.hosts.len();
        let pause = world::pause_plan(&mut self.stage.rng, hosts, index, full, 30);
        let (kube, hosts) = (self.stage.kube, self.stage.hosts);
        let calls = std::cell::Cell::new(0u32);
        let after_takeover: RefCell<Option<BTreeMap<String, Seen>>> = RefCell::new(None);
        // Every write call the host makes, and how many it had made when the Lease was taken.
        let written: RefCell<Vec<WriteCall>> = RefCell::new(Vec::new());
        let written_before_takeover = std::cell::Cell::new(0usize);
        let between = || {
            let call = calls.get();
            calls.set(call + 1);
            if let Some((at, rival, ms)) = pause
                && call == at
            {
                kube.advance(ms);
                let rival_ran = tick_with(&hosts[rival], false);
                let said = match &rival_ran {
                    Ok(Tick::Ran(r)) => format!(
                        "ran, created {} updated {} deleted {}",
                        r.created, r.updated, r.deleted
                    ),
                    Ok(Tick::NotLeader { holder }) => format!("not leader ({holder})"),
                    Err(e) => format!("error: {e}"),
                };
                let took_over = matches!(rival_ran, Ok(Tick::Ran(_)));
                if took_over {
                    *after_takeover.borrow_mut() = Some(self.cronjobs());
                    written_before_takeover.set(written.borrow().len());
                }
                let lines = world::pause_lines(ms, at, rival, &said, took_over);
                during.borrow_mut().push(Acted {
                    lines,
                    deletion: None,
                    violation: None,
                });
            }
            let mut rng = interleave.borrow_mut();
            if !full && rng.random_ratio(1, 16) {
                let mut acted = client.act(&mut rng);
                world::during_the_pass(&mut acted.lines);
                during.borrow_mut().push(acted);
            }
            // Nobody else touches the CronJobs once another host took over, so that what
            // changes after it is the paused host's doing.
            let mut rng = edits.borrow_mut();
            if !full
                && after_takeover.borrow().is_none()
                && rng.random_ratio(1, 24)
                && let Some((line, held)) = hand_edit(kube, &mut rng)
            {
                held_during.borrow_mut().extend(held);
                let mut lines = vec![line];
                world::during_the_pass(&mut lines);
                during.borrow_mut().push(Acted {
                    lines,
                    deletion: None,
                    violation: None,
                });
            }
        };
        let scheduled = Scheduled::new(host, crash_after, &between, &self.stage.throttle);
        // Only a paused pass's writes are ever looked at.
        let scheduled = match pause {
            Some(_) => scheduled.recording_writes(&written),
            None => scheduled,
        };
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| tick_with(&scheduled, full)));
        let during = during.into_inner();
        // Deployments removed while the pass ran were not desired throughout it.
        let interrupted: BTreeSet<String> = during
            .iter()
            .filter_map(|a| a.deletion.as_ref().map(|d| d.job_uid.clone()))
            .collect();
        for acted in during {
            self.apply(acted)?;
        }
        let said = world::pass_outcome(&outcome, crash_after, index, |tick| match tick {
            Tick::Ran(r) => {
                let mut said = format!(
                    "ran: created {} updated {} deleted {}",
                    r.created, r.updated, r.deleted
                );
                for f in &r.failed {
                    let _ = write!(said, "; {} failed: {}", f.item, f.reason);
                }
                said
            }
            Tick::NotLeader { holder } => format!("not leader ({holder})"),
        })?;
        self.stage.note(&format!(
            "host-{index} pass{}: {said}",
            if full { " (full)" } else { "" }
        ));
        let ran = matches!(outcome, Ok(Ok(Tick::Ran(_))));
        world::one_leader(index, ran, lease, now)?;
        self.squatter
            .kept(self.stage.kube, index, ran, foreign_lease)?;
        if let Some(taken) = after_takeover.into_inner() {
            let late = &written.borrow()[written_before_takeover.get()..];
            self.acted_after_takeover(index, &taken, &before, late)?;
        }
        // Invariant 5 for the finalizers put on during the pass, which `before` does not show.
        for name in held_during.into_inner() {
            let kept = self.stage.kube.object("CronJob", NAMESPACE, &name);
            if !kept.is_some_and(|o| o.metadata.finalizers.iter().any(|f| f == FOREIGN_FINALIZER)) {
                return Err(format!(
                    "lethe removed the foreign finalizer of {name}, put on during its pass"
                ));
            }
        }
        self.check_pass(&before, &desired_before, &interrupted)
    }

    /// The leader invariant inside a pass: host `index`, paused past its Lease while another
    /// host took it over and ran a pass, acted on at most the one item it was in the middle of
    /// when it resumed (`taken`: the CronJobs when the other host's pass ended; `before`: when
    /// the paused pass began). Both what changed and what it *tried* to write count: a write the
    /// cluster refused (the object already gone, a precondition that failed) was still made
    /// without the Lease.
    fn acted_after_takeover(
        &self,
        index: usize,
        taken: &BTreeMap<String, Seen>,
        before: &BTreeMap<String, Seen>,
        late: &[WriteCall],
    ) -> Result<(), Failure> {
        let now = self.cronjobs();
        let changed: BTreeSet<String> = now
            .iter()
            .filter(|(uid, c)| {
                taken
                    .get(*uid)
                    .is_none_or(|t| t.meta.resource_version != c.meta.resource_version)
            })
            .chain(taken.iter().filter(|(uid, _)| !now.contains_key(*uid)))
            .map(|(_, c)| c.job_uid.clone().unwrap_or_else(|| c.meta.name.clone()))
            .collect();
        // A CronJob written is the item whose job uid it carries (as in `changed`), looked up by
        // name in the cluster as it is, then as it was.
        let item_of = |name: &str| {
            [&now, taken, before]
                .into_iter()
                .find_map(|seen| seen.values().find(|c| c.meta.name == name))
                .and_then(|c| c.job_uid.clone())
                .unwrap_or_else(|| name.to_string())
        };
        let attempted: BTreeSet<String> = late
            .iter()
            .filter(|w| w.kind == "CronJob")
            .map(|w| item_of(&w.name))
            .collect();
        if changed.union(&attempted).count() > 1 {
            return Err(format!(
                "host-{index} acted beside the new leader after its Lease was taken: CronJobs of {changed:?} changed, writes made to those of {attempted:?}"
            ));
        }
        Ok(())
    }

    fn cronjobs(&self) -> BTreeMap<String, Seen> {
        glance::by_uid(self.stage.kube, "CronJob", |o| Seen {
            meta: glance::meta(o),
            job_uid: glance::label(o, JOB_UID_LABEL),
            managed: glance::label(o, MANAGED_BY_LABEL).as_deref() == Some(MANAGED_BY),
        })
    }

    /// The desired deployments: job uid → (team, job name, spec hash).
    fn desired(&self) -> BTreeMap<String, (String, String, String)> {
        let rows = self
            .stage
            .api
            .query(
                "SELECT job_uid, team, job_name, spec_hash FROM desired_data_job_deployment",
                &[],
            )
            .unwrap_or_default();
        rows.into_iter()
            .filter_map(|row| match row.as_slice() {
                [
                    Value::Text(uid),
                    Value::Text(team),
                    Value::Text(job),
                    Value::Text(hash),
                ] => Some((uid.clone(), (team.clone(), job.clone(), hash.clone()))),
                _ => None,
            })
            .collect()
    }

    /// Invariants 1, 2 and 5, on what one lethe pass changed. Invariant 2 is about deployments
    /// desired throughout the pass: one removed and set again while the pass ran (`interrupted`)
    /// may lose its CronJob to that pass, and the next pass makes it again.
    fn check_pass(
        &mut self,
        before: &BTreeMap<String, Seen>,
        desired_before: &BTreeMap<String, (String, String, String)>,
        interrupted: &BTreeSet<String>,
    ) -> Result<(), Failure> {
        let after = self.cronjobs();
        let desired = self.desired();
        for (uid, c) in &after {
            if !before.contains_key(uid)
                && let Some(job_uid) = &c.job_uid
                && self.gone.contains(job_uid)
            {
                return Err(format!(
                    "lethe created the CronJob {} for job {job_uid}, whose deletion was COMPLETE",
                    c.meta.name
                ));
            }
        }
        for (uid, was) in before {
            let now = after.get(uid);
            let foreign = self.foreign.values().any(|u| u == uid);
            if foreign && now.is_none_or(|n| n.meta.resource_version != was.meta.resource_version) {
                return Err(format!(
                    "lethe changed or deleted the foreign CronJob {}",
                    was.meta.name
                ));
            }
            let deleted = now.is_none_or(|n| n.meta.deleting && !was.meta.deleting);
            if deleted
                && let Some(job_uid) = &was.job_uid
                && let Some((team, job, _)) = desired.get(job_uid)
                && desired_before.contains_key(job_uid)
                && !interrupted.contains(job_uid)
                && model::cronjob_name(team, job) == was.meta.name
            {
                return Err(format!(
                    "lethe deleted the CronJob {} of job {job_uid}, whose desired deployment exists",
                    was.meta.name
                ));
            }
            if let Some(now) = now
                && was.meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER)
                && !now.meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER)
            {
                return Err(format!(
                    "lethe removed the foreign finalizer of {}",
                    was.meta.name
                ));
            }
        }
        Ok(())
    }

    // --- clients ---------------------------------------------------------------------------

    fn call(&self, method: &str, path: &str, body: Option<Json>) -> (u16, Json, Option<String>) {
        Client {
            api: self.stage.api,
        }
        .call(method, path, body)
    }

    fn client(&mut self) -> Result<(), Failure> {
        let acted = Client {
            api: self.stage.api,
        }
        .act(&mut self.stage.rng);
        self.apply(acted)
    }

    /// Takes in what a client did: its trace, its deletion job, its violation.
    fn apply(&mut self, acted: Acted) -> Result<(), Failure> {
        for line in acted.lines {
            self.stage.note(&line);
        }
        if let Some(d) = acted.deletion {
            if !d.complete {
                self.stage.deletions.insert(d.path.clone(), d);
            } else if d.path.contains("/data_job.delete~") {
                self.gone.insert(d.job_uid);
            }
        }
        acted.violation.map_or(Ok(()), Err)
    }

    /// Polls one outstanding deletion job. Invariant 3: COMPLETE only once no CronJob of the
    /// job is left.
    fn poll(&mut self) -> Result<(), Failure> {
        match self.stage.pick_outstanding() {
            Some(path) => self.poll_one(&path),
            None => Ok(()),
        }
    }

    // --- the hostile user ------------------------------------------------------------------

    fn admin(&self) -> Identity {
        Identity::Caller("admin".into())
    }

    fn cronjob_ref(name: &str) -> ObjectRef {
        ObjectRef::new("batch/v1", "CronJob", Some(NAMESPACE), name)
    }

    fn hostile(&mut self) {
        if let Some(line) = self.squatter.act(self.stage.kube) {
            self.stage.note(&line);
        }
        let ours = managed(self.stage.kube);
        let pick = |rng: &mut StdRng, names: &[String]| {
            names.get(rng.random_range(0..names.len().max(1))).cloned()
        };
        match self.stage.rng.random_range(0..100) {
            0..25 => {
                if let Some(name) = pick(&mut self.stage.rng, &ours) {
                    self.stage
                        .kube
                        .edit("CronJob", NAMESPACE, &name, edit_schedule);
                    self.stage.note(&format!("hostile hand-edits {name}"));
                }
            }
            25..45 => {
                if let Some(name) = pick(&mut self.stage.rng, &ours) {
                    let r = self.stage.kube.delete(
                        &self.admin(),
                        &Self::cronjob_ref(&name),
                        &DeleteOptions::default(),
                    );
                    self.stage
                        .note(&format!("hostile deletes {name}: {}", r.is_ok()));
                }
            }
            45..60 => {
                if let Some(name) = pick(&mut self.stage.rng, &ours) {
                    self.stage
                        .kube
                        .edit("CronJob", NAMESPACE, &name, add_finalizer);
                    self.stage
                        .note(&format!("hostile adds a finalizer to {name}"));
                }
            }
            60..80 => {
                // A CronJob of its own, often under the name one of lethe's jobs wants.
                let job = JOB_NAMES[self.stage.rng.random_range(0..JOB_NAMES.len())];
                let name = if self.stage.rng.random_ratio(1, 2) {
                    model::cronjob_name(TEAM, job)
                } else {
                    format!("theirs-{job}")
                };
                if self.stage.kube.exists("CronJob", NAMESPACE, &name) {
                    return;
                }
                let o = self
                    .stage
                    .kube
                    .put(cronjob(&name, json!({"app": "theirs"})));
                self.foreign.insert(name.clone(), o.metadata.uid.clone());
                self.stage
                    .note(&format!("hostile creates its own CronJob {name}"));
            }
            80..90 => {
                let n = self.stage.rng.random_range(0..1000);
                let name = format!("orphan-{n}");
                if !self.stage.kube.exists("CronJob", NAMESPACE, &name) {
                    self.stage
                        .kube
                        .put(cronjob(&name, json!({MANAGED_BY_LABEL: MANAGED_BY})));
                    self.stage
                        .note(&format!("hostile creates a labelled orphan {name}"));
                }
            }
            90..95 => {
                // Releases what its finalizers hold (the object goes if it was being deleted).
                let held: Vec<String> = self
                    .cronjobs()
                    .into_values()
                    .filter(|c| c.meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER))
                    .map(|c| c.meta.name)
                    .collect();
                if let Some(name) = pick(&mut self.stage.rng, &held) {
                    self.stage
                        .kube
                        .clear_finalizers("CronJob", NAMESPACE, &name);
                    self.stage
                        .note(&format!("hostile removes its finalizer from {name}"));
                }
            }
            _ => {
                if let Some(name) = self.foreign.keys().next().cloned() {
                    let r = self.stage.kube.delete(
                        &self.admin(),
                        &Self::cronjob_ref(&name),
                        &DeleteOptions::default(),
                    );
                    if r.is_ok() {
                        self.foreign.remove(&name);
                    }
                    self.stage
                        .note(&format!("hostile deletes its own {name}: {}", r.is_ok()));
                }
            }
        }
    }

    // --- faults ----------------------------------------------------------------------------

    fn fault(&mut self) {
        self.stage.fault(&FAULTS, |kube, rng| {
            let job = JOB_NAMES[rng.random_range(0..JOB_NAMES.len())];
            let name = model::cronjob_name(TEAM, job);
            kube.hide_once("CronJob", &name);
            format!("fault: the next read of {name} misses it")
        });
    }
}

impl Quiescent for World<'_, '_> {
    fn settle(&mut self) -> Result<(), Failure> {
        self.stage.kube.advance(700_000);
        self.lethe_pass(true)
    }

    fn outstanding(&self) -> Vec<String> {
        self.stage.outstanding()
    }

    /// Polls `path`, and forgets it once it is COMPLETE.
    fn poll_one(&mut self, path: &str) -> Result<(), Failure> {
        let (status, body, _) = self.call("GET", path, None);
        self.stage
            .note(&format!("client polls {path}: {status} {}", body["state"]));
        if status != 200 || body["state"] != "COMPLETE" {
            return Ok(());
        }
        let Some(deletion) = self.stage.deletions.remove(path) else {
            return Ok(());
        };
        if path.contains("/data_job.delete~") {
            self.gone.insert(deletion.job_uid.clone());
        }
        let desired = self.desired();
        let left = self
            .cronjobs()
            .into_values()
            .find(|c| c.job_uid.as_deref() == Some(deletion.job_uid.as_str()) && c.managed);
        // A deployment deleted and then made again is a new deployment of the same job.
        if let Some(c) = left
            && !desired.contains_key(&deletion.job_uid)
        {
            return Err(format!(
                "{} is COMPLETE while the CronJob {} of job {} exists",
                deletion.path, c.meta.name, deletion.job_uid
            ));
        }
        Ok(())
    }

    /// A deletion job whose job still has a CronJob that is being deleted and held by the
    /// hostile user's finalizer (which quiescence left there).
    fn held_back(&self, path: &str) -> bool {
        let Some(d) = self.stage.deletions.get(path) else {
            return false;
        };
        self.stage
            .kube
            .glance("CronJob", |o| {
                glance::label(o, JOB_UID_LABEL).as_deref() == Some(d.job_uid.as_str()) && held(o)
            })
            .into_iter()
            .any(|h| h)
    }

    /// How the cluster differs from the desired state, if it does.
    fn divergence(&self) -> Option<String> {
        let desired = self.desired();
        let cronjobs = self.cronjobs();
        let mut wanted = BTreeSet::new();
        for (uid, (team, job, hash)) in &desired {
            let name = model::cronjob_name(team, job);
            wanted.insert(name.clone());
            let Some(o) = self.stage.kube.object("CronJob", NAMESPACE, &name) else {
                return Some(format!("no CronJob {name} for job {uid}"));
            };
            // An earlier CronJob of that name, deleted and held by the hostile user's finalizer:
            // the new one can only be made once it goes.
            if held(o.json()) {
                continue;
            }
            let labels = &o.json()["metadata"]["labels"];
            let annotations = &o.json()["metadata"]["annotations"];
            if labels[JOB_UID_LABEL] != uid.as_str()
                || annotations[HASH_ANNOTATION] != hash.as_str()
            {
                return Some(format!(
                    "CronJob {name} is not job {uid}'s desired spec: labels {labels}, annotations {annotations}"
                ));
            }
            // What it runs, not only what its annotation says: a hand edit of the schedule, the
            // image or the fixed fields is put back.
            if model::live_fingerprint(o.json()).as_deref() != Some(hash.as_str()) {
                return Some(format!(
                    "CronJob {name} runs a spec that is not job {uid}'s desired one: {}",
                    o.json()["spec"]
                ));
            }
        }
        let mut extra = String::new();
        for c in cronjobs
            .values()
            .filter(|c| c.managed && !wanted.contains(&c.meta.name) && !held_meta(&c.meta))
        {
            let _ = write!(extra, "{} ", c.meta.name);
        }
        (!extra.is_empty()).then(|| format!("orphans left: {extra}"))
    }
}

/// The names of lethe's CronJobs not being deleted, in the order of their uids.
fn managed(kube: &FakeCluster) -> Vec<String> {
    glance::by_uid(kube, "CronJob", |o| {
        let ours = glance::label(o, MANAGED_BY_LABEL).as_deref() == Some(MANAGED_BY);
        (ours && !glance::deleting(o)).then(|| glance::text(o, "/metadata/name"))
    })
    .into_values()
    .flatten()
    .collect()
}

/// Whether a CronJob is being deleted and held by the hostile user's finalizer.
fn held(o: &Json) -> bool {
    held_meta(&glance::meta(o))
}

/// [`held`], of what the invariants keep of a CronJob.
fn held_meta(meta: &glance::Meta) -> bool {
    meta.deleting && meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER)
}

/// A hand edit of a CronJob's schedule.
fn edit_schedule(o: &mut Json) {
    o["spec"]["schedule"] = json!("7 7 * * *");
}

/// The hostile user's finalizer put on a CronJob (once).
fn add_finalizer(o: &mut Json) {
    let mut finalizers = o["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == FOREIGN_FINALIZER) {
        finalizers.push(json!(FOREIGN_FINALIZER));
        o["metadata"]["finalizers"] = json!(finalizers);
    }
}

/// A hand edit of one of lethe's CronJobs between two calls of a pass: its schedule, a label or
/// an annotation of the editor's own (lethe's are left, so the CronJob stays lethe's), or the
/// hostile user's finalizer. Its trace line, and the CronJob's name when it put the finalizer on.
fn hand_edit(kube: &FakeCluster, rng: &mut StdRng) -> Option<(String, Option<String>)> {
    let ours = managed(kube);
    let name = ours.get(rng.random_range(0..ours.len().max(1)))?.clone();
    let (what, held) = match rng.random_range(0..4) {
        0 => {
            kube.edit("CronJob", NAMESPACE, &name, edit_schedule);
            ("its schedule", None)
        }
        1 => {
            kube.edit("CronJob", NAMESPACE, &name, |o| {
                o["metadata"]["labels"]["example.com/owner"] = json!("ops");
            });
            ("a label of its own", None)
        }
        2 => {
            kube.edit("CronJob", NAMESPACE, &name, |o| {
                o["metadata"]["annotations"]["example.com/note"] = json!("touched");
            });
            ("an annotation of its own", None)
        }
        _ => {
            kube.edit("CronJob", NAMESPACE, &name, add_finalizer);
            ("its finalizer", Some(name.clone()))
        }
    };
    Some((format!("hostile edits {name}: {what}"), held))
}

/// What one client action did.
#[derive(Default)]
struct Acted {
    lines: Vec<String>,
    deletion: Option<Deletion>,
    violation: Option<String>,
}

/// A data-jobs client of the API (through the `api` host, as any lethe host serves it).
#[derive(Clone, Copy)]
struct Client<'w, 'a> {
    api: &'w FakeHost<'a>,
}

impl Client<'_, '_> {
    fn call(&self, method: &str, path: &str, body: Option<Json>) -> (u16, Json, Option<String>) {
        let req = world::request(method, path, CLIENT, body);
        world::answer(&data_jobs_core::api::handle(self.api, &req))
    }

    fn job_uid(&self, job: &str) -> Option<String> {
        let (status, body, _) = self.call(
            "GET",
            &format!("/data-jobs/for-team/{TEAM}/jobs/{job}"),
            None,
        );
        (status == 200)
            .then(|| body["uid"].as_str().map(str::to_string))
            .flatten()
    }

    /// One request the seed picks: create, deploy, undeploy or delete a job; a deletion's
    /// first poll is checked (invariant 4).
    fn act(&self, rng: &mut StdRng) -> Acted {
        let mut acted = Acted::default();
        let job = JOB_NAMES[rng.random_range(0..JOB_NAMES.len())];
        let jobs = format!("/data-jobs/for-team/{TEAM}/jobs");
        let (what, method, path, body) = match rng.random_range(0..100) {
            0..25 => (
                "create",
                "POST",
                jobs.clone(),
                Some(json!({
                "job_name": job, "config": {"schedule": {"schedule_cron": "0 * * * *"}}})),
            ),
            25..60 => {
                let version = rng.random_range(1..4);
                let enabled = rng.random_ratio(4, 5);
                let schedule = ["0 * * * *", "*/5 * * * *", "30 2 * * 1"][rng.random_range(0..3)];
                (
                    "deploy",
                    "POST",
                    format!("{jobs}/{job}/deployments"),
                    Some(json!({
                    "job_version": format!("v{version}"), "enabled": enabled,
                    "schedule": {"schedule_cron": schedule}})),
                )
            }
            60..80 => (
                "undeploy",
                "DELETE",
                format!("{jobs}/{job}/deployments/production"),
                None,
            ),
            _ => ("delete", "DELETE", format!("{jobs}/{job}"), None),
        };
        let job_uid = self.job_uid(job);
        let (status, _, location) = self.call(method, &path, body);
        acted.lines.push(format!("client {what} {job}: {status}"));
        if status != 202 || method != "DELETE" {
            return acted;
        }
        let (Some(location), Some(job_uid)) = (location, job_uid) else {
            acted.violation = Some(format!(
                "{what} {job}: 202 without a Location or for no job"
            ));
            return acted;
        };
        let poll = world::first_poll(location, |path| self.call("GET", path, None));
        acted.lines.push(poll.line);
        acted.violation = poll.violation;
        acted.deletion = Some(Deletion {
            path: poll.path,
            job_uid,
            complete: poll.complete,
        });
        acted
    }
}

/// A CronJob as someone other than lethe would write it.
fn cronjob(name: &str, labels: Json) -> Json {
    json!({
        "apiVersion": "batch/v1", "kind": "CronJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "spec": {"schedule": "1 1 * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "theirs", "image": "theirs"}]}}}}},
    })
}
