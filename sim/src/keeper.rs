//! The keeper world: the reconciler that `lethe new reconciler` generates (its template rendered
//! as `keeper`, kind ConfigMap, by `lethe-sim-keeper`), on the SDK's controller runtime. Clients
//! PUT and DELETE desired ConfigMaps through its API and poll the deletion jobs; 1–3 hosts run
//! passes, compete for the Lease, crash between calls and are paused past their Lease; a hostile
//! user edits, deletes and holds the ConfigMaps, makes its own under the names wanted and
//! labelled orphans; and faults. So a third reconciler, and the driver under it, meets the checks
//! the other two do.
//!
//! Invariants, after every pass: one leader, and a host paused past its Lease acts on at most the
//! item it was in the middle of; a ConfigMap without lethe's marks is never changed or deleted,
//! nor a foreign finalizer removed; the ConfigMap made for a row that stayed wanted through the
//! pass is never deleted; nothing is made again for a row whose deletion a client saw
//! `COMPLETE`. A job poll's `COMPLETE` means the row's ConfigMap is gone, and a job is never 404
//! while the ConfigMap it deletes is there. Once quiet: every wanted row has its ConfigMap, with its
//! uid, its content and the finalizer (unless a foreign object or a held deletion sits at its
//! name), no ConfigMap of lethe's is left without a wanted row (unless held), and every deletion
//! job is `COMPLETE` but the held ones.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;

use lethe_guest::fake::{FakeCluster, FakeHost, FakeSql};
use lethe_guest::kube::{DeleteOptions, Identity, Kube as _, KubeError, ObjectRef};
use lethe_guest::sql::{Sql as _, Value};
use lethe_sim_keeper::reconcile::tick;
use lethe_sim_keeper::{FINALIZER, MANAGED_BY, RECONCILER, RECONCILER_LABEL, UID_LABEL};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value as Json, json};

use crate::foreign_lease::Squatter;
use crate::glance;
use crate::host::faults::{Calls, Plan};
use crate::host::{Scheduled, WriteCall};
use crate::world::{self, Failure, Quiescent, Scenario, Stage};

const NAMESPACE: &str = "team";
const LEASE_NAMESPACE: &str = "lethe-system";
/// The client's bearer token; the hostile user acts as the cluster's administrator.
const CLIENT: &str = "t";
const NAMES: [&str; 3] = ["alpha", "beta", "gamma"];
const VALUES: [&str; 4] = ["one", "two", "three", INVALID];
/// A value the cluster refuses.
const INVALID: &str = "invalid";
/// How long a COMPLETE job is kept (`job_retention_seconds`).
const RETENTION_MS: i64 = 900_000;
const FOREIGN_FINALIZER: &str = "example.com/keep";

const FAULTS: Plan = Plan {
    failing: Calls {
        verbs: &["create", "replace", "delete", "patch", "list", "get"],
        kinds: &["ConfigMap", "Lease", "*"],
    },
    timed_out: Calls {
        verbs: &["replace", "delete", "patch"],
        kinds: &["ConfigMap", "Lease"],
    },
    lost_creates: &["ConfigMap"],
    odds: [25, 45, 53, 60, 70, 85],
};

/// Runs the keeper world of `seed` for `steps` steps, then lets it quiesce.
pub(crate) fn play(seed: u64, steps: usize) -> (Vec<String>, Option<Failure>) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6b65_6570_6572);
    let kube = FakeCluster::new();
    kube.grant(CLIENT, "*", "*", "*");
    // What the API server rejects: the reconciler parks such a row until it changes.
    kube.admit_with(Box::new(|o| match o["data"]["value"].as_str() {
        Some(INVALID) => Err(KubeError::Invalid("data.value: Invalid value".into())),
        _ => Ok(()),
    }));
    for namespace in [NAMESPACE, LEASE_NAMESPACE] {
        kube.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}));
    }
    let sql = FakeSql::migrated(lethe_sim_keeper::MIGRATIONS);
    let hosts = world::reconciler_hosts(&mut rng, |name| lethe_host(&sql, &kube, name));
    let api = lethe_host(&sql, &kube, "api");
    let mut world = World {
        squatter: Squatter::new(&rng, LEASE_NAMESPACE, RECONCILER),
        stage: Stage::new(rng, &kube, &hosts, &api, "keeper: "),
        foreign: BTreeMap::new(),
        gone: BTreeSet::new(),
    };
    let violation = world.play(steps).err();
    (world.stage.trace, violation)
}

/// A lethe host on the world's clock. Jobs never time out (a FAILED job would be right after a
/// long fault); a COMPLETE one is forgotten 15 minutes later, so the requeue that forgets it runs.
fn lethe_host<'a>(sql: &'a FakeSql, kube: &'a FakeCluster, instance: &str) -> FakeHost<'a> {
    let mut host = FakeHost::new(sql, kube, instance);
    host.now = kube.now.clone();
    host.set_config("deletion_timeout_seconds", "86400");
    host.set_config("job_retention_seconds", &(RETENTION_MS / 1000).to_string());
    host
}

/// A deletion job a client was given: its path, and the name and row uid it deletes.
struct Deletion {
    name: String,
    uid: String,
}

struct World<'w, 'a> {
    stage: Stage<'w, 'a, Deletion>,
    /// The hostile user's own ConfigMaps (none of lethe's marks), by name: their uid.
    foreign: BTreeMap<String, String>,
    squatter: Squatter,
    /// Row uids whose deletion a client saw COMPLETE: nothing is made for them again.
    gone: BTreeSet<String>,
}

/// A ConfigMap as the invariants see it.
#[derive(Clone)]
struct Seen {
    meta: glance::Meta,
    /// Its `lethe.dev/desired-uid`, when it carries all of lethe's marks.
    row_uid: Option<String>,
    value: Option<String>,
}

impl Seen {
    fn held(&self) -> bool {
        self.meta.deleting && self.meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER)
    }
}

impl Scenario for World<'_, '_> {
    fn step(&mut self, roll: u32) -> Result<(), Failure> {
        match roll {
            0..30 => self.lethe_pass(false)?,
            30..55 => self.client()?,
            55..65 => {
                if let Some(path) = self.stage.pick_outstanding() {
                    self.poll_one(&path)?;
                }
            }
            65..77 => self.hostile(),
            // No read misses an object here: the job poll reads it as the API server serves
            // a GET, from etcd with a quorum read, and derives COMPLETE from its absence.
            77..87 => self
                .stage
                .fault(&FAULTS, |kube, _| crate::host::faults::expire_watches(kube)),
            _ => self.stage.let_time_pass(),
        }
        Ok(())
    }

    fn quiesce(&mut self) -> Result<(), Failure> {
        self.stage.kube.heal();
        self.stage.throttle.remaining.set(0);
        for (name, _) in std::mem::take(&mut self.foreign) {
            let _ = self
                .stage
                .kube
                .delete(&admin(), &target(&name), &DeleteOptions::default());
        }
        for c in self.configmaps().into_values() {
            if c.meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER) {
                if self.stage.rng.random_ratio(1, 2) {
                    let line =
                        format!("quiescence: the foreign finalizer stays on {}", c.meta.name);
                    self.stage.note(&line);
                    continue;
                }
                self.stage.kube.remove_finalizer(
                    "ConfigMap",
                    NAMESPACE,
                    &c.meta.name,
                    FOREIGN_FINALIZER,
                );
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

fn admin() -> Identity {
    Identity::Caller("admin".into())
}

fn target(name: &str) -> ObjectRef {
    ObjectRef::new("v1", "ConfigMap", Some(NAMESPACE), name)
}

impl World<'_, '_> {
    /// One pass by a host the seed picks, which may crash or be paused while another takes the
    /// Lease; clients and the hostile user act between its calls. Then the invariants.
    fn lethe_pass(&mut self, full: bool) -> Result<(), Failure> {
        let (index, host, crash_after) = self.stage.pick_pass(full, 30);
        let lease = world::lease(self.stage.kube, LEASE_NAMESPACE, RECONCILER);
        let foreign_lease = self.squatter.foreign(self.stage.kube);
        let (before, rows_before) = (self.configmaps(), self.rows());
        let now = self.stage.kube.now.get();
        let seed: u64 = self.stage.rng.random();
        let interleave = RefCell::new(StdRng::seed_from_u64(seed));
        let pause = world::pause_plan(&mut self.stage.rng, self.stage.hosts.len(), index, full, 20);
        let (kube, hosts, api) = (self.stage.kube, self.stage.hosts, self.stage.api);
        let calls = Cell::new(0u32);
        let during: RefCell<Vec<String>> = RefCell::new(Vec::new());
        let touched: RefCell<BTreeSet<String>> = RefCell::new(BTreeSet::new());
        let edits_during: RefCell<Vec<Edit>> = RefCell::new(Vec::new());
        let deletions: RefCell<Vec<(String, Deletion)>> = RefCell::new(Vec::new());
        let taken: RefCell<Option<BTreeMap<String, Seen>>> = RefCell::new(None);
        let written: RefCell<Vec<WriteCall>> = RefCell::new(Vec::new());
        let written_before_takeover = Cell::new(0usize);
        let between = || {
            let call = calls.get();
            calls.set(call + 1);
            if let Some((at, rival, ms)) = pause
                && call == at
            {
                kube.advance(ms);
                let ran = tick(&hosts[rival], false);
                let took_over = ran.as_ref().is_ok_and(|r| r.leader_elsewhere.is_none());
                if took_over {
                    *taken.borrow_mut() = Some(configmaps(kube));
                    written_before_takeover.set(written.borrow().len());
                }
                let said = match &ran {
                    Ok(r) => format!("{r:?}"),
                    Err(e) => format!("error: {e}"),
                };
                during
                    .borrow_mut()
                    .extend(world::pause_lines(ms, at, rival, &said, took_over));
            }
            let mut rng = interleave.borrow_mut();
            if full || taken.borrow().is_some() {
                return;
            }
            if rng.random_ratio(1, 16) {
                let ((line, deletion), name) = Client { api }.act(&mut rng);
                touched.borrow_mut().insert(name);
                during
                    .borrow_mut()
                    .push(format!("  during the pass: {line}"));
                deletions.borrow_mut().extend(deletion);
            } else if rng.random_ratio(1, 24)
                && let Some((line, left)) = hand_edit(kube, &mut rng)
            {
                edits_during.borrow_mut().push(left);
                during
                    .borrow_mut()
                    .push(format!("  during the pass: {line}"));
            }
        };
        let scheduled = Scheduled::new(host, crash_after, &between, &self.stage.throttle);
        let scheduled = match pause {
            Some(_) => scheduled.recording_writes(&written),
            None => scheduled,
        };
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| tick(&scheduled, full)));
        for line in during.into_inner() {
            self.stage.note(&line);
        }
        self.stage.deletions.extend(deletions.into_inner());
        let said = world::pass_outcome(&outcome, crash_after, index, |r| {
            let mut said = format!(
                "ran: created {} updated {} deleted {}",
                r.created, r.updated, r.deleted
            );
            if let Some(holder) = &r.leader_elsewhere {
                said = format!("not leader ({holder})");
            }
            for f in &r.failed {
                let _ = write!(said, "; {} failed: {}", f.item, f.reason);
            }
            said
        })?;
        let full_said = if full { " (full)" } else { "" };
        self.stage
            .note(&format!("host-{index} pass{full_said}: {said}"));
        let ran = matches!(&outcome, Ok(Ok(r)) if r.leader_elsewhere.is_none());
        world::one_leader(index, ran, lease, now)?;
        self.squatter
            .kept(self.stage.kube, index, ran, foreign_lease)?;
        if let Some(taken) = taken.into_inner() {
            let late: BTreeSet<String> = written.borrow()[written_before_takeover.get()..]
                .iter()
                .filter(|w| w.kind == "ConfigMap")
                .map(|w| w.name.clone())
                .collect();
            let after = self.configmaps();
            let changed: BTreeSet<String> = (after.iter())
                .filter(|(uid, c)| {
                    taken
                        .get(*uid)
                        .is_none_or(|t| t.meta.resource_version != c.meta.resource_version)
                })
                .chain(taken.iter().filter(|(uid, _)| !after.contains_key(*uid)))
                .map(|(_, c)| c.meta.name.clone())
                .collect();
            let writes = written.borrow()[written_before_takeover.get()..]
                .iter()
                .filter(|w| w.kind == "ConfigMap")
                .count();
            // The write it was paused before goes out; any later one is preceded by the Lease.
            if changed.union(&late).count() > 1 || writes > 1 {
                return Err(format!(
                    "host-{index} acted beside the new leader after its Lease was taken: {changed:?} changed, {writes} writes made to {late:?}"
                ));
            }
        }
        // What the hostile user did between a read of the pass and its write.
        let mut touched = touched.into_inner();
        for left in edits_during.into_inner() {
            if let Edit::Replaced(name, _) = &left {
                touched.insert(name.clone());
            }
            self.followed(left, " during its pass")?;
        }
        self.check_pass(&before, &rows_before, &touched)
    }

    /// Takes in what a hand edit left, and checks it: the foreign finalizer still on, the
    /// replacement still there as it was made (`when`: during a pass, for the failure's words).
    fn followed(&mut self, left: Edit, when: &str) -> Result<(), Failure> {
        let kube = self.stage.kube;
        match left {
            Edit::Plain => Ok(()),
            Edit::Held(name) => {
                let kept = kube.object("ConfigMap", NAMESPACE, &name);
                match kept
                    .is_some_and(|o| o.metadata.finalizers.iter().any(|f| f == FOREIGN_FINALIZER))
                {
                    true => Ok(()),
                    false => Err(format!(
                        "lethe removed the foreign finalizer of {name}, put on{when}"
                    )),
                }
            }
            Edit::Replaced(name, uid) => {
                let theirs = kube.object("ConfigMap", NAMESPACE, &name);
                if !theirs.is_some_and(|o| o.metadata.uid == uid && o.label(UID_LABEL).is_none()) {
                    return Err(format!(
                        "lethe deleted or changed the foreign ConfigMap {name}, made{when}"
                    ));
                }
                self.foreign.insert(name, uid);
                Ok(())
            }
        }
    }

    /// What one pass may never do (see the module documentation). `touched`: names a client
    /// wrote while the pass ran (their rows were not the same throughout it), or whose ConfigMap
    /// the hostile user replaced.
    fn check_pass(
        &self,
        before: &BTreeMap<String, Seen>,
        rows_before: &BTreeMap<String, Row>,
        touched: &BTreeSet<String>,
    ) -> Result<(), Failure> {
        let (after, rows) = (self.configmaps(), self.rows());
        for (uid, c) in &after {
            if !before.contains_key(uid)
                && let Some(row_uid) = &c.row_uid
                && self.gone.contains(row_uid)
            {
                return Err(format!(
                    "lethe made {} again for row {row_uid}, whose deletion was COMPLETE",
                    c.meta.name
                ));
            }
        }
        for (uid, was) in before {
            let now = after.get(uid);
            if self.foreign.values().any(|u| u == uid)
                && now.is_none_or(|n| n.meta.resource_version != was.meta.resource_version)
            {
                return Err(format!(
                    "lethe changed or deleted the foreign ConfigMap {}",
                    was.meta.name
                ));
            }
            let name = &was.meta.name;
            let wanted = |rows: &BTreeMap<String, Row>| {
                rows.get(name)
                    .is_some_and(|r| !r.deleting && Some(&r.uid) == was.row_uid.as_ref())
            };
            // One being deleted already (by the hostile user) is let go, and made again.
            let deleted = !was.meta.deleting && now.is_none_or(|n| n.meta.deleting);
            if deleted && wanted(rows_before) && wanted(&rows) && !touched.contains(name) {
                return Err(format!(
                    "lethe deleted the ConfigMap {name}, whose row stayed wanted"
                ));
            }
            if let Some(now) = now
                && was.meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER)
                && !now.meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER)
            {
                return Err(format!("lethe removed the foreign finalizer of {name}"));
            }
        }
        Ok(())
    }

    fn configmaps(&self) -> BTreeMap<String, Seen> {
        configmaps(self.stage.kube)
    }

    /// The desired rows, by name.
    fn rows(&self) -> BTreeMap<String, Row> {
        let rows = self.stage.api.query(
            "SELECT name, uid, content, deleting_since FROM keeper_desired",
            &[],
        );
        rows.unwrap_or_default()
            .into_iter()
            .filter_map(|row| match row.as_slice() {
                [
                    Value::Text(name),
                    Value::Text(uid),
                    Value::Text(content),
                    since,
                ] => Some((
                    name.clone(),
                    Row {
                        uid: uid.clone(),
                        value: serde_json::from_str::<Json>(content).ok()?["data"]["value"]
                            .as_str()
                            .map(str::to_string),
                        deleting: !matches!(since, Value::Null),
                        since: since.int(),
                    },
                )),
                _ => None,
            })
            .collect()
    }

    fn client(&mut self) -> Result<(), Failure> {
        let ((line, deletion), _) = Client {
            api: self.stage.api,
        }
        .act(&mut self.stage.rng);
        self.stage.note(&line);
        if let Some((path, deletion)) = deletion {
            self.stage.deletions.insert(path.clone(), deletion);
            self.poll_one(&path)?;
        }
        Ok(())
    }

    fn hostile(&mut self) {
        if let Some(line) = self.squatter.act(self.stage.kube) {
            self.stage.note(&line);
        }
        let kube = self.stage.kube;
        let ours = ours(kube);
        let pick = |rng: &mut StdRng, names: &[String]| {
            names.get(rng.random_range(0..names.len().max(1))).cloned()
        };
        let line = match self.stage.rng.random_range(0..100) {
            0..50 => match hand_edit(kube, &mut self.stage.rng) {
                Some((line, left)) => {
                    let _ = self.followed(left, "");
                    line
                }
                None => return,
            },
            50..65 => {
                let Some(name) = pick(&mut self.stage.rng, &ours) else {
                    return;
                };
                let r = kube.delete(&admin(), &target(&name), &DeleteOptions::default());
                format!("hostile deletes {name}: {}", r.is_ok())
            }
            65..80 => {
                // One of its own, often under a name a row wants.
                let name = NAMES[self.stage.rng.random_range(0..NAMES.len())];
                let name = if self.stage.rng.random_ratio(1, 2) {
                    name.to_string()
                } else {
                    format!("theirs-{name}")
                };
                if kube.exists("ConfigMap", NAMESPACE, &name) {
                    return;
                }
                let o = kube.put(configmap(&name, json!({"app": "theirs"})));
                self.foreign.insert(name.clone(), o.metadata.uid.clone());
                format!("hostile creates its own ConfigMap {name}")
            }
            80..88 => {
                let name = format!("orphan-{}", self.stage.rng.random_range(0..1000));
                let marks = json!({MANAGED_BY.0: MANAGED_BY.1, RECONCILER_LABEL: RECONCILER, UID_LABEL: "nobodys"});
                kube.put(configmap(&name, marks));
                format!("hostile creates a labelled orphan {name}")
            }
            88..95 => {
                let held: Vec<String> = (self.configmaps().into_values())
                    .filter(|c| c.meta.finalizers.iter().any(|f| f == FOREIGN_FINALIZER))
                    .map(|c| c.meta.name)
                    .collect();
                let Some(name) = pick(&mut self.stage.rng, &held) else {
                    return;
                };
                kube.remove_finalizer("ConfigMap", NAMESPACE, &name, FOREIGN_FINALIZER);
                format!("hostile removes its finalizer from {name}")
            }
            _ => {
                let Some(name) = self.foreign.keys().next().cloned() else {
                    return;
                };
                let r = kube.delete(&admin(), &target(&name), &DeleteOptions::default());
                if r.is_ok() {
                    self.foreign.remove(&name);
                }
                format!("hostile deletes its own {name}: {}", r.is_ok())
            }
        };
        self.stage.note(&line);
    }
}

/// A desired row, as the invariants read it.
struct Row {
    uid: String,
    value: Option<String>,
    deleting: bool,
    /// When its deletion was asked for.
    since: Option<i64>,
}

fn configmaps(kube: &FakeCluster) -> BTreeMap<String, Seen> {
    glance::by_uid(kube, "ConfigMap", |o| {
        let marked = glance::label(o, MANAGED_BY.0).as_deref() == Some(MANAGED_BY.1)
            && glance::label(o, RECONCILER_LABEL).as_deref() == Some(RECONCILER);
        Seen {
            meta: glance::meta(o),
            row_uid: glance::label(o, UID_LABEL).filter(|_| marked),
            value: glance::opt(o, "/data/value"),
        }
    })
}

/// The names of lethe's ConfigMaps not being deleted.
fn ours(kube: &FakeCluster) -> Vec<String> {
    (configmaps(kube).into_values())
        .filter(|c| c.row_uid.is_some() && !c.meta.deleting)
        .map(|c| c.meta.name)
        .collect()
}

/// What a hand edit left that the invariants follow.
enum Edit {
    /// Nothing they follow.
    Plain,
    /// The hostile user's finalizer, on the ConfigMap of this name.
    Held(String),
    /// A ConfigMap of the hostile user's own in place of lethe's: its name and uid.
    Replaced(String, String),
}

/// A hand edit of one of lethe's ConfigMaps: its value, a label of the editor's own, the hostile
/// user's finalizer (last, or first, so the index lethe read moves), or the ConfigMap replaced by
/// one of its own (its finalizers cleared, deleted, and made again unmarked). Its trace line.
fn hand_edit(kube: &FakeCluster, rng: &mut StdRng) -> Option<(String, Edit)> {
    let ours = ours(kube);
    let name = ours.get(rng.random_range(0..ours.len().max(1)))?.clone();
    let edit = |change: fn(&mut Json)| kube.edit("ConfigMap", NAMESPACE, &name, change);
    let (what, left) = match rng.random_range(0..5) {
        0 => {
            edit(|o| o["data"] = json!({"value": "edited"}));
            ("its value", Edit::Plain)
        }
        1 => {
            edit(|o| o["metadata"]["labels"]["example.com/owner"] = json!("ops"));
            ("a label of its own", Edit::Plain)
        }
        2 => {
            edit(|o| hold(o, false));
            ("its finalizer, last", Edit::Held(name.clone()))
        }
        3 => {
            edit(|o| hold(o, true));
            ("its finalizer, first", Edit::Held(name.clone()))
        }
        _ => {
            // Not one it holds: clearing the finalizers would take its own away too.
            let holds = |o: &Json| glance::finalizers(o).iter().any(|f| f == FOREIGN_FINALIZER);
            if kube
                .glance("ConfigMap", |o| {
                    glance::text(o, "/metadata/name") == name && holds(o)
                })
                .contains(&true)
            {
                return None;
            }
            kube.clear_finalizers("ConfigMap", NAMESPACE, &name);
            let _ = kube.delete(&admin(), &target(&name), &DeleteOptions::default());
            let theirs = kube.put(configmap(&name, json!({"app": "theirs"})));
            (
                "replaced by its own",
                Edit::Replaced(name.clone(), theirs.metadata.uid),
            )
        }
    };
    Some((format!("hostile edits {name}: {what}"), left))
}

/// Puts the hostile user's finalizer on `o`, first or last.
fn hold(o: &mut Json, first: bool) {
    let mut finalizers = o["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == FOREIGN_FINALIZER) {
        let at = if first { 0 } else { finalizers.len() };
        finalizers.insert(at, json!(FOREIGN_FINALIZER));
        o["metadata"]["finalizers"] = json!(finalizers);
    }
}

fn configmap(name: &str, labels: Json) -> Json {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
        "data": {"value": "theirs"},
    })
}

/// A client of the keeper's API.
#[derive(Clone, Copy)]
struct Client<'w, 'a> {
    api: &'w FakeHost<'a>,
}

/// What one client action did: its trace line and the deletion job it was given, by path.
type Acted = (String, Option<(String, Deletion)>);

impl Client<'_, '_> {
    fn call(&self, method: &str, path: &str, body: Option<Json>) -> (u16, Json, Option<String>) {
        let req = world::request(method, path, CLIENT, body);
        world::answer(&lethe_sim_keeper::api::handle(self.api, &req))
    }

    /// A PUT or a DELETE of a name the seed picks; the name, and what was done.
    fn act(&self, rng: &mut StdRng) -> (Acted, String) {
        let name = NAMES[rng.random_range(0..NAMES.len())];
        let path = format!("/objects/{NAMESPACE}/{name}");
        if rng.random_ratio(3, 5) {
            let value = VALUES[rng.random_range(0..VALUES.len())];
            let (status, _, _) = self.call("PUT", &path, Some(json!({"data": {"value": value}})));
            return (
                (format!("client puts {name}={value}: {status}"), None),
                name.into(),
            );
        }
        let (_, row, _) = self.call("GET", &path, None);
        let (status, _, location) = self.call("DELETE", &path, None);
        let line = format!("client deletes {name}: {status}");
        let deletion = match (status, location, row["uid"].as_str()) {
            (202, Some(location), Some(uid)) => {
                let path = location
                    .find("/jobs/")
                    .map(|i| location[i..].to_string())
                    .unwrap_or(location);
                Some((
                    path,
                    Deletion {
                        name: name.into(),
                        uid: uid.into(),
                    },
                ))
            }
            _ => None,
        };
        ((line, deletion), name.into())
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

    /// Polls `path`: `COMPLETE` means the row's ConfigMap (the one carrying its uid) is gone; 404 is right once it is (the row
    /// forgotten after its retention) or once a new PUT of the name replaced the row.
    fn poll_one(&mut self, path: &str) -> Result<(), Failure> {
        let (status, body, _) = Client {
            api: self.stage.api,
        }
        .call("GET", path, None);
        self.stage
            .note(&format!("client polls {path}: {status} {}", body["state"]));
        let Some(d) = self.stage.deletions.get(path) else {
            return Ok(());
        };
        let left = self
            .configmaps()
            .into_values()
            .find(|c| c.row_uid.as_deref() == Some(d.uid.as_str()));
        match status {
            200 if body["state"] == "COMPLETE" => {
                // Another's ConfigMap may have taken the free name: it is not the one deleted.
                if let Some(c) = &left {
                    return Err(format!(
                        "{path} is COMPLETE while its ConfigMap {} exists",
                        c.meta.name
                    ));
                }
                self.gone.insert(d.uid.clone());
                self.stage.deletions.remove(path);
            }
            404 => {
                // A PUT of the name after the DELETE made a new row: the job went with the old.
                let superseded = self.rows().get(&d.name).is_some_and(|r| r.uid != d.uid);
                if let Some(c) = left.filter(|_| !superseded) {
                    return Err(format!(
                        "{path} is 404 while the ConfigMap {} it deletes exists",
                        c.meta.name
                    ));
                }
                self.stage.deletions.remove(path);
            }
            _ => {}
        }
        Ok(())
    }

    fn held_back(&self, path: &str) -> bool {
        let Some(d) = self.stage.deletions.get(path) else {
            return false;
        };
        self.configmaps()
            .values()
            .any(|c| c.meta.name == d.name && c.held())
    }

    fn divergence(&self) -> Option<String> {
        let (rows, configmaps) = (self.rows(), self.configmaps());
        let at = |name: &str| configmaps.values().find(|c| c.meta.name == name);
        let now = self.stage.kube.now.get();
        for (name, row) in &rows {
            let gone = at(name).is_none();
            if row
                .since
                .is_some_and(|since| now - since > 2 * RETENTION_MS)
                && gone
            {
                return Some(format!(
                    "the deletion of {name} was not forgotten after its retention"
                ));
            }
        }
        // A row the cluster refuses waits, parked, until it changes.
        let makeable = |r: &&Row| !r.deleting && r.value.as_deref() != Some(INVALID);
        for (name, row) in rows.iter().filter(|(_, r)| makeable(r)) {
            let Some(c) = at(name) else {
                return Some(format!("no ConfigMap {name} for its wanted row"));
            };
            // A held deletion of an earlier one: the new one waits for it to go.
            if c.held() {
                continue;
            }
            let finalized = c.meta.finalizers.iter().any(|f| f == FINALIZER);
            if c.row_uid.as_ref() != Some(&row.uid) || c.value != row.value || !finalized {
                return Some(format!(
                    "ConfigMap {name} is not its row's: uid {:?} value {:?} finalizers {:?}, row {} {:?}",
                    c.row_uid, c.value, c.meta.finalizers, row.uid, row.value
                ));
            }
        }
        let wanted = |c: &Seen| {
            rows.get(&c.meta.name)
                .is_some_and(|r| !r.deleting && Some(&r.uid) == c.row_uid.as_ref())
        };
        let extra: Vec<&str> = (configmaps.values())
            .filter(|c| c.row_uid.is_some() && !wanted(c) && !c.held())
            .map(|c| c.meta.name.as_str())
            .collect();
        (!extra.is_empty())
            .then(|| format!("ConfigMaps of lethe's without a wanted row: {extra:?}"))
    }
}
