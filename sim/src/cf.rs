//! The CF world: orgs and spaces made and deleted through the CF API, their deletion jobs polled
//! as the cf CLI polls them, and the finalizer reconciler run by 1–3 hosts that crash between
//! calls; a hostile user squatting namespaces, holding objects with its own finalizers and
//! deleting lethe's namespaces by hand; the namespace controller, stepped by the schedule; and
//! faults, a read path that lags behind the writes among them.
//!
//! No fault here makes a read miss an object that exists: Kubernetes never does (a read without
//! a resourceVersion is served from etcd with a quorum read, and a lagging cache shows what is
//! gone, never hides what is there), and the reconciler rightly takes a namespace that reads 404
//! as gone.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::panic::AssertUnwindSafe;

use cf_core::FINALIZER;
use cf_core::config::Settings;
use cf_core::follow::{LEASE_ITEM, pass_on_changes};
use cf_core::names::{CLAIM_LABEL, HOLDER_ANNOTATION};
use cf_core::ownership::{OWNER_LABEL, OWNER_UID_LABEL};
use cf_core::reconcile::Report;
use lethe_guest::fake::{FakeCluster, FakeHost, FakeSql};
use lethe_guest::kube::{DeleteOptions, Identity, Kube as _, ObjectRef};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value as Json, json};

use crate::foreign_lease::Squatter;
use crate::glance;
use crate::host::Scheduled;
use crate::host::faults::{Calls, Plan};
use crate::world::{self, Failure, Quiescent, Scenario, Stage};

const MIGRATIONS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../components/cf-reconciler/migrations"
);
/// The orgs' namespace.
const ROOT: &str = "cf";
/// The clients are CF admins; the hostile user is a cluster administrator with kubectl.
const ADMIN: &str = "admin";
/// A signed-in user with no rights anywhere.
const STRANGER: &str = "stranger";
/// The names clients create under: two of them alike but for case, which Cloud Controller's
/// unique index does not tell apart.
const ORG_NAMES: [&str; 3] = ["o1", "O1", "o2"];
const SPACE_NAMES: [&str; 2] = ["s1", "S1"];
/// The names two creates race for (`race-0` to `race-3`, in either case), orgs' and spaces'.
const RACE_NAME: &str = "race-";
const FOREIGN_FINALIZER: &str = "example.com/keep";
/// The longest read lag injected: below the DELETE's confirmation window (`delete_confirm_ms`,
/// 5 s), which is what that window is for, and above the job poll's re-read (2 s).
const MAX_LAG_MS: i64 = 4_000;
/// How long job status re-reads a resource that shows no deletion (`job_reread_ms`).
const JOB_REREAD_MS: i64 = 2_000;

/// The faults injected into the cluster: which calls fail (`*`: every kind), which writes and
/// creates lose their answer, and how often each comes.
const FAULTS: Plan = Plan {
    failing: Calls {
        verbs: &["create", "patch", "delete", "list", "get", "changes"],
        kinds: &["Namespace", "Org", "Space", "*"],
    },
    timed_out: Calls {
        verbs: &["patch", "delete"],
        kinds: &["Namespace", "Org", "Space"],
    },
    lost_creates: &["Namespace", "Org", "ConfigMap"],
    odds: [20, 36, 44, 52, 60, 72],
};

/// Runs the CF world of `seed` for `steps` steps, then lets it quiesce: its trace, and the first
/// invariant found broken.
pub(crate) fn play(seed: u64, steps: usize) -> (Vec<String>, Option<Failure>) {
    // A stream of its own, so that the data-jobs world's draws do not shift this one's.
    let mut rng = StdRng::seed_from_u64(seed ^ 0x00c0_ffee_cf00_0000);
    let kube = FakeCluster::new();
    kube.namespaces_must_exist.set(true);
    kube.put(namespace(ROOT, json!({})));
    let sql = FakeSql::migrated(MIGRATIONS);
    let hosts = world::reconciler_hosts(&mut rng, |name| {
        let mut host = FakeHost::new(&sql, &kube, name);
        host.now = kube.now.clone();
        never_time_out(&host);
        host
    });
    let api = FakeHost::on(&kube);
    never_time_out(&api);
    let mut world = CfWorld {
        squatter: Squatter::new(&rng, ROOT, cf_core::follow::LEASE_NAME),
        stage: Stage::new(rng, &kube, &hosts, &api, "cf: "),
        hostile: Hostile::default(),
        finalized: BTreeSet::new(),
    };
    let violation = world.play(steps).err();
    (world.stage.trace, violation)
}

/// Deletion jobs never time out here: a FAILED job would be right after a long fault, and the
/// invariants are about COMPLETE.
fn never_time_out(host: &FakeHost<'_>) {
    host.set_config("deletion_timeout_seconds", "100000000");
}

fn namespace(name: &str, labels: Json) -> Json {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

fn namespace_ref(name: &str) -> ObjectRef {
    ObjectRef::new("v1", "Namespace", None, name)
}

/// The job-GUID type of a CF kind.
fn type_name(kind: &str) -> &'static str {
    if kind == "Org" { "org" } else { "space" }
}

/// A deletion job a client was given: its status path and what it is about.
#[derive(Clone)]
struct Deletion {
    path: String,
    kind: String,
    guid: String,
}

/// The conditions of an org or space (as JSON) decided on a generation beyond its own: its name,
/// generation and the condition's `observedGeneration`.
fn generations(o: &Json) -> Option<(String, i64, i64)> {
    let generation = o["metadata"]["generation"].as_i64().unwrap_or(0);
    let observed = o["status"]["conditions"]
        .as_array()?
        .iter()
        .filter_map(|c| c["observedGeneration"].as_i64())
        .max()?;
    (observed > generation).then(|| (glance::text(o, "/metadata/name"), generation, observed))
}

/// An org or space as the invariants see it.
#[derive(Clone)]
struct Seen {
    kind: String,
    /// Its namespace: the root for an org, its org's guid for a space.
    namespace: String,
    guid: String,
    /// Its display name, lowercased (names are unique without regard to case).
    name: String,
    deleting: bool,
    finalizers: Vec<String>,
}

/// A namespace as the invariants see it.
#[derive(Clone)]
struct SeenNamespace {
    meta: glance::Meta,
    /// The uid in lethe's mark, if it carries one.
    owner_uid: Option<String>,
    /// `<type>.<guid>` in lethe's mark.
    owner: Option<String>,
}

struct CfWorld<'w, 'a> {
    stage: Stage<'w, 'a, Deletion>,
    hostile: Hostile,
    /// The hostile user's hand on the reconciler's Lease.
    squatter: Squatter,
    /// The uids of the orgs and spaces that have carried lethe's finalizer after a pass: lethe
    /// cleans up under its finalizer, so only of those does a held deletion show its part done.
    finalized: BTreeSet<String>,
}

/// What the hostile user has put in lethe's way, which an administrator removes at quiescence.
#[derive(Default)]
struct Hostile {
    /// Its namespaces (no mark of lethe's), by name: their uid and resourceVersion (the hostile
    /// user never changes them).
    namespaces: BTreeMap<String, (String, String)>,
    /// Uids of the orgs and spaces that carry its finalizer.
    held: BTreeSet<String>,
}

impl Scenario for CfWorld<'_, '_> {
    fn step(&mut self, roll: u32) -> Result<(), Failure> {
        match roll {
            0..28 => self.lethe_pass(false)?,
            28..48 if self.stage.rng.random_ratio(1, 5) => self.race_one_name()?,
            28..48 => {
                let client = Client {
                    api: self.stage.api,
                    kube: self.stage.kube,
                };
                let acted = client.act(&mut self.stage.rng);
                self.apply(acted)?;
                self.check_names()?;
            }
            48..56 => self.poll()?,
            56..66 => self.hostile(),
            66..76 => self.fault(),
            76..86 => {
                self.stage.kube.run_namespace_controller();
                self.stage.note("the namespace controller runs");
            }
            _ => self.stage.let_time_pass(),
        }
        Ok(())
    }

    /// Stops the clients, the hostile user and the faults (an administrator removes what the
    /// hostile user put in the way), then runs passes and the namespace controller until the
    /// world converges or the bound is reached.
    fn quiesce(&mut self) -> Result<(), Failure> {
        self.stage.kube.heal();
        self.stage.throttle.remaining.set(0);
        // Half of the hostile user's finalizers stay: what they hold cannot go, and lethe must
        // still finish its own part of it and everything else.
        for o in self.objects().into_values() {
            if o.finalizers.iter().any(|f| f == FOREIGN_FINALIZER) {
                if self.stage.rng.random_ratio(1, 2) {
                    self.stage.note(&format!(
                        "quiescence: the hostile user's finalizer stays on {} {}",
                        o.kind, o.guid
                    ));
                    continue;
                }
                self.stage
                    .kube
                    .remove_finalizer(&o.kind, &o.namespace, &o.guid, FOREIGN_FINALIZER);
            }
        }
        for (name, _) in std::mem::take(&mut self.hostile).namespaces {
            let _ = self.stage.kube.delete(
                &self.admin(),
                &namespace_ref(&name),
                &DeleteOptions::default(),
            );
        }
        if let Some(line) = self.squatter.stop(self.stage.kube) {
            self.stage.note(&line);
        }
        self.stage.note(
            "quiescence: faults healed, the hostile user's namespaces and finalizers removed",
        );
        self.converge()
    }

    fn rng(&mut self) -> &mut StdRng {
        &mut self.stage.rng
    }
}

impl CfWorld<'_, '_> {
    fn client(&self) -> Client<'_, '_> {
        Client {
            api: self.stage.api,
            kube: self.stage.kube,
        }
    }

    // --- lethe -----------------------------------------------------------------------------

    /// One pass by a host the seed picks (`full` forces a full pass), which may crash; clients
    /// (and the hostile user's finalizers) act between its calls. Then the invariants that
    /// compare the cluster before and after it.
    fn lethe_pass(&mut self, full: bool) -> Result<(), Failure> {
        let (index, host, crash_after) = self.stage.pick_pass(full, 60);
        let lease = world::lease(self.stage.kube, ROOT, cf_core::follow::LEASE_NAME);
        let foreign_lease = self.squatter.foreign(self.stage.kube);
        // When the pass reads the Lease, its first call: clients acting before it may have let
        // time pass.
        let first_call = std::cell::Cell::new(None);
        let before = self.objects();
        let namespaces_before = self.namespaces();
        let interleave_seed: u64 = self.stage.rng.random();
        let interleave = RefCell::new(StdRng::seed_from_u64(interleave_seed));
        // Once in a while the host stops between two of its calls for longer than its Lease
        // lasts (a paused process, a long GC, a VM migrated), and another host takes the Lease
        // and runs a pass meanwhile. Its own stream of choices, derived from the interleaving's
        // seed, leaves the schedules of passes without a pause as they were.
        let mut pause_rng = StdRng::seed_from_u64(interleave_seed ^ 0x9e37_79b9_7f4a_7c15);
        let pause = world::pause_plan(&mut pause_rng, self.stage.hosts.len(), index, full, 60);
        let hosts = self.stage.hosts;
        let calls = std::cell::Cell::new(0u32);
        // The footprint when the other host's pass ended, if it took over.
        let after_takeover: RefCell<Option<Footprint>> = RefCell::new(None);
        let during = RefCell::new(Vec::new());
        let client = self.client();
        let kube = self.stage.kube;
        let paused = || {
            let call = calls.get();
            calls.set(call + 1);
            let Some((at, rival, ms)) = pause.filter(|(at, ..)| *at == call) else {
                return;
            };
            kube.advance(ms);
            let rival_ran = cf_pass(&hosts[rival], false);
            let took_over = matches!(&rival_ran, Ok(r) if led(r));
            let said = match &rival_ran {
                Ok(r) => said(r),
                Err(e) => format!("error: {e}"),
            };
            if took_over {
                *after_takeover.borrow_mut() = Some(footprint(kube));
            }
            let lines = world::pause_lines(ms, at, rival, &said, took_over);
            during.borrow_mut().push(Acted {
                lines,
                ..Acted::default()
            });
        };
        let interleaved = || {
            // Nobody else writes once another host took over, so that what changes after it is
            // the paused host's doing.
            if full || after_takeover.borrow().is_some() {
                return;
            }
            let mut rng = interleave.borrow_mut();
            let mut acted = match rng.random_range(0..48) {
                0..3 => client.act(&mut rng),
                3 => hold(kube, &mut rng),
                4 => swap(kube, &mut rng),
                _ => return,
            };
            world::during_the_pass(&mut acted.lines);
            during.borrow_mut().push(acted);
        };
        let between = || {
            paused();
            interleaved();
            if first_call.get().is_none() {
                first_call.set(Some(kube.now.get()));
            }
        };
        let scheduled = Scheduled::new(host, crash_after, &between, &self.stage.throttle);
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| cf_pass(&scheduled, full)));
        let during = during.into_inner();
        // Orgs and spaces clients asked to delete while the pass ran, and the namespaces the hostile
        // user replaced meanwhile (the names are the same guids).
        let interrupted: BTreeSet<String> = during
            .iter()
            .filter_map(|a| {
                let deleted = a.asked_to_delete.clone();
                deleted.or_else(|| a.squatted.as_ref().map(|(name, _)| name.clone()))
            })
            .collect();
        for acted in during {
            self.apply(acted)?;
        }
        let said = world::pass_outcome(&outcome, crash_after, index, said)?;
        self.stage.note(&format!("host-{index} pass: {said}"));
        let ran = matches!(&outcome, Ok(Ok(r)) if led(r));
        if let Some(now) = first_call.get() {
            world::one_leader(index, ran, lease, now)?;
        }
        self.squatter
            .kept(self.stage.kube, index, ran, foreign_lease)?;
        if let Some(taken) = after_takeover.into_inner() {
            acted_after_takeover(index, &taken, &footprint(kube))?;
        }
        for (uid, o) in self.objects() {
            if o.finalizers.iter().any(|f| f == FINALIZER) {
                self.finalized.insert(uid);
            }
        }
        self.check_pass(&before, &namespaces_before, &interrupted)
    }

    /// Every org and space, by uid.
    fn objects(&self) -> BTreeMap<String, Seen> {
        let mut seen = BTreeMap::new();
        for kind in ["Org", "Space"] {
            seen.extend(self.stage.kube.glance(kind, |o| {
                let seen = Seen {
                    kind: kind.to_string(),
                    namespace: glance::text(o, "/metadata/namespace"),
                    guid: glance::text(o, "/metadata/name"),
                    name: glance::text(o, "/spec/displayName").to_lowercase(),
                    deleting: glance::deleting(o),
                    finalizers: glance::finalizers(o),
                };
                (glance::text(o, "/metadata/uid"), seen)
            }));
        }
        seen
    }

    /// Every namespace, by uid.
    fn namespaces(&self) -> BTreeMap<String, SeenNamespace> {
        glance::by_uid(self.stage.kube, "Namespace", |o| SeenNamespace {
            meta: glance::meta(o),
            owner_uid: glance::label(o, OWNER_UID_LABEL),
            owner: glance::label(o, OWNER_LABEL),
        })
    }

    /// The invariants on what one pass changed:
    /// 1. a namespace that is not lethe's is neither changed nor deleted;
    /// 2. an object holding the hostile user's finalizer keeps it (and so is not gone);
    /// 3. lethe deletes a namespace it made only for an owner being deleted;
    /// 4. lethe deletes a space only when its org is being deleted (or a client asked);
    /// 5. every Event names an org, space or namespace (kind, name and uid) the cluster held;
    /// 6. no condition was decided on a generation its object has not reached.
    fn check_pass(
        &mut self,
        before: &BTreeMap<String, Seen>,
        namespaces_before: &BTreeMap<String, SeenNamespace>,
        interrupted: &BTreeSet<String>,
    ) -> Result<(), Failure> {
        let after = self.objects();
        let namespaces = self.namespaces();
        let named = self.stage.kube.glance("Event", |e| {
            let regarding = |field: &str| glance::text(e, &format!("/regarding/{field}"));
            (
                glance::text(e, "/reason"),
                regarding("kind"),
                regarding("name"),
                regarding("uid"),
            )
        });
        for (reason, kind, name, uid) in named {
            let lethes = matches!(kind.as_str(), "Org" | "Space" | "Namespace");
            if !lethes || !self.stage.kube.ever_held(&kind, &name, &uid) {
                return Err(format!(
                    "the Event {reason} names {kind} {name} (uid {uid}), which lethe never acted on"
                ));
            }
        }
        let ahead = self.stage.kube.glance("Org", generations);
        let ahead = ahead
            .into_iter()
            .chain(self.stage.kube.glance("Space", generations))
            .flatten();
        if let Some((name, generation, observed)) = ahead.into_iter().next() {
            return Err(format!(
                "{name} has a condition observed at generation {observed}, beyond its {generation}"
            ));
        }
        // Those made during the pass too, between two of its calls.
        for (name, (uid, version)) in &self.hostile.namespaces {
            if namespaces
                .get(uid)
                .is_none_or(|n| n.meta.resource_version != *version)
            {
                return Err(format!(
                    "lethe changed or deleted the namespace {name}, which is not its own"
                ));
            }
        }
        for uid in &self.hostile.held {
            match after.get(uid) {
                Some(o) if o.finalizers.iter().any(|f| f == FOREIGN_FINALIZER) => {}
                Some(o) => {
                    return Err(format!(
                        "lethe removed the foreign finalizer of {} {}",
                        o.kind, o.guid
                    ));
                }
                None => {
                    let what = before.get(uid).map_or(uid.clone(), |o| o.guid.clone());
                    return Err(format!(
                        "{what} is gone although it held a foreign finalizer"
                    ));
                }
            }
        }
        for (uid, was) in namespaces_before {
            let deleted = namespaces
                .get(uid)
                .is_none_or(|n| n.meta.deleting && !was.meta.deleting);
            let Some(owner_uid) = &was.owner_uid else {
                continue;
            };
            if deleted
                && !interrupted.contains(&was.meta.name)
                && let Some(owner) = after.get(owner_uid)
                && !owner.deleting
            {
                return Err(format!(
                    "lethe deleted the namespace {} of {} {}, which is not being deleted",
                    was.meta.name, owner.kind, owner.guid
                ));
            }
        }
        for (uid, was) in before {
            let deleted = after.get(uid).is_none_or(|o| o.deleting) && !was.deleting;
            if was.kind != "Space" || !deleted || interrupted.contains(&was.guid) {
                continue;
            }
            let org = after
                .values()
                .find(|o| o.kind == "Org" && o.guid == was.namespace);
            if org.is_some_and(|o| !o.deleting) {
                return Err(format!(
                    "lethe deleted the space {} of org {}, which is not being deleted",
                    was.guid, was.namespace
                ));
            }
        }
        Ok(())
    }

    /// Cloud Controller's unique index: no two orgs not being deleted share a name, nor two
    /// spaces of one org (only the clients' names count: the hostile user's hand-made orgs
    /// bypass the API, and are named apart).
    fn check_names(&self) -> Result<(), Failure> {
        let mut holders: BTreeMap<(String, String), &str> = BTreeMap::new();
        let objects = self.objects();
        for o in objects.values().filter(|o| !o.deleting) {
            let key = (o.namespace.clone(), o.name.clone());
            let client_name = o.name.starts_with(RACE_NAME)
                || match o.kind.as_str() {
                    "Org" => ORG_NAMES.iter().any(|n| n.to_lowercase() == o.name),
                    _ => SPACE_NAMES.iter().any(|n| n.to_lowercase() == o.name),
                };
            if !client_name {
                continue;
            }
            if let Some(other) = holders.insert(key, &o.guid) {
                return Err(format!(
                    "two {}s in {} are named {}: {other} and {}",
                    o.kind, o.namespace, o.name, o.guid
                ));
            }
        }
        Ok(())
    }

    // --- clients ---------------------------------------------------------------------------

    /// Two creates of one name (an org's, or a space's in an org not being deleted), the second
    /// arriving between two of the first one's calls, while its claim may be in flight; the
    /// first may crash there (its process dies) or lose its answer, and the client then sends
    /// it again at once, inside the in-flight window. After each: no two orgs (or spaces of one
    /// org) bear the name, every `201` names an object that bears it, and no answer is a 5xx
    /// but the 503 of a failing cluster.
    fn race_one_name(&mut self) -> Result<(), Failure> {
        let orgs: Vec<String> = self
            .objects()
            .into_values()
            .filter(|o| o.kind == "Org" && !o.deleting)
            .map(|o| o.guid)
            .collect();
        let rng = &mut self.stage.rng;
        // Names of their own, in either case, so that the race is most often for a free name.
        let n = rng.random_range(0..4);
        let name = if rng.random_ratio(1, 2) {
            format!("{RACE_NAME}{n}")
        } else {
            format!("{RACE_NAME}{n}").to_uppercase()
        };
        let (what, path, body) = if orgs.is_empty() || rng.random_ratio(1, 2) {
            (
                format!("org {name}"),
                "/v3/organizations",
                json!({ "name": name }),
            )
        } else {
            let org = &orgs[rng.random_range(0..orgs.len())];
            (
                format!("space {name} in {org}"),
                "/v3/spaces",
                json!({ "name": name, "relationships": {"organization": {"data": {"guid": org}}}}),
            )
        };
        let second_at: u32 = rng.random_range(0..10);
        let crash_after = rng.random_ratio(1, 3).then(|| rng.random_range(0..10));
        let lost = crash_after.is_some() || rng.random_ratio(1, 3);
        let client = Client {
            api: self.stage.api,
            kube: self.stage.kube,
        };
        let second = RefCell::new(None);
        let calls = std::cell::Cell::new(0u32);
        let between = || {
            let call = calls.get();
            calls.set(call + 1);
            if call == second_at {
                *second.borrow_mut() = Some(client.call("POST", path, Some(body.clone())));
            }
        };
        let scheduled = Scheduled::new(self.stage.api, crash_after, &between, &self.stage.throttle);
        let request = world::request("POST", path, ADMIN, Some(body.clone()));
        let kube = self.stage.kube;
        let first = std::panic::catch_unwind(AssertUnwindSafe(|| {
            kube.read_late(|| cf_core::api::handle(&scheduled, &scheduled, &request))
        }));
        let first = match first {
            Ok(answer) => Some(world::answer(&answer)),
            Err(payload) if payload.is::<crate::host::Crash>() => None,
            Err(_) => return Err(format!("a create of {what} panicked")),
        };
        let mut answers = Vec::new();
        match &first {
            Some(a) if !lost => answers.push(("the first create", a.clone())),
            Some(a) => {
                self.stage.note(&format!(
                    "client creates {what}: {} (the answer is lost)",
                    a.0
                ));
                answers.push(("the first create, whose answer was lost", a.clone()));
            }
            None => self.stage.note(&format!(
                "client creates {what}: the API crashed after {} calls",
                crash_after.unwrap_or(0)
            )),
        }
        if let Some(a) = second.into_inner() {
            answers.push(("a second create, during the first", a));
        }
        if lost {
            answers.push((
                "the first create sent again",
                client.call("POST", path, Some(body.clone())),
            ));
        }
        let name = body["name"].as_str().unwrap_or_default().to_lowercase();
        for (which, (status, answer, _)) in &answers {
            let detail = answer["errors"][0]["detail"].as_str().unwrap_or_default();
            self.stage
                .note(format!("  race on {what}: {which}: {status} {detail}").trim_end());
            if *status >= 500 && *status != 503 {
                return Err(format!("{which} of {what} answered {status} {answer}"));
            }
            let Some(guid) = answer["guid"].as_str().filter(|_| *status == 201) else {
                continue;
            };
            self.stage.kube.grant(&member(guid), "*", "*", guid);
            let made = self.objects().into_values().find(|o| o.guid == guid);
            if made.is_none_or(|o| o.name != name || o.deleting) {
                return Err(format!(
                    "{which} of {what} answered 201 for {guid}, which does not bear the name"
                ));
            }
        }
        self.check_names()
    }

    /// Takes in what a client or the hostile user did: its trace, what it holds or squats, its
    /// deletion job, its violation.
    fn apply(&mut self, acted: Acted) -> Result<(), Failure> {
        for line in acted.lines {
            self.stage.note(&line);
        }
        self.hostile.held.extend(acted.held);
        if let Some((name, made)) = acted.squatted {
            self.hostile.namespaces.insert(name, made);
        }
        if let Some(violation) = acted.violation {
            return Err(violation);
        }
        match acted.deletion {
            Some(d) if acted.complete => self.check_complete(&d),
            Some(d) => {
                self.stage.deletions.insert(d.path.clone(), d);
                Ok(())
            }
            None => Ok(()),
        }
    }

    fn poll(&mut self) -> Result<(), Failure> {
        if self.stage.rng.random_ratio(1, 3) {
            return self.poll_live();
        }
        match self.stage.pick_outstanding() {
            Some(path) => self.poll_one(&path),
            None => Ok(()),
        }
    }

    /// The admin (who sees everything) and a stranger (who sees nothing) poll the deletion job of
    /// an org or space the seed picks that exists and is not being deleted, as a client that
    /// kept a job's guid, or guessed one, would; each answer is judged by
    /// [`world::live_resources_job`].
    fn poll_live(&mut self) -> Result<(), Failure> {
        let live: Vec<Seen> = self
            .objects()
            .into_values()
            .filter(|o| !o.deleting)
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        let o = live[self.stage.rng.random_range(0..live.len())].clone();
        let path = format!("/v3/jobs/{}.delete~{}", type_name(&o.kind), o.guid);
        for (who, token, sees) in [("the admin", ADMIN, true), ("a stranger", STRANGER, false)] {
            let (status, body, _) = self.client().call_as(token, "GET", &path, None);
            self.stage.note(&format!(
                "{who} polls {path} of a live {}: {status} {}",
                o.kind, body["state"]
            ));
            world::live_resources_job(&path, who, sees, status, &body)?;
        }
        Ok(())
    }

    /// A deletion job is COMPLETE only once its org or space is gone. (The namespace lethe made
    /// for it is gone before it is released; one that outlived it, made by a create that raced
    /// with the deletion, is swept by a later pass, which quiescence checks.)
    fn check_complete(&self, d: &Deletion) -> Result<(), Failure> {
        let names = self
            .stage
            .kube
            .glance(&d.kind, |o| glance::text(o, "/metadata/name"));
        if names.contains(&d.guid) {
            return Err(format!(
                "{} is COMPLETE while {} {} exists",
                d.path, d.kind, d.guid
            ));
        }
        Ok(())
    }

    // --- the hostile user ------------------------------------------------------------------

    fn admin(&self) -> Identity {
        Identity::Caller(ADMIN.into())
    }

    /// A guid of the seed's (lowercase hex in the 8-4-4-4-12 shape).
    fn guid(&mut self) -> String {
        let hex: String = (0..32)
            .map(|_| char::from_digit(self.stage.rng.random_range(0..16), 16).unwrap_or('0'))
            .collect();
        format!(
            "{}-{}-{}-{}-{}",
            &hex[..8],
            &hex[8..12],
            &hex[12..16],
            &hex[16..20],
            &hex[20..]
        )
    }

    fn squat(&mut self, name: &str) -> bool {
        if self.stage.kube.exists("Namespace", "", name) {
            return false;
        }
        let ns = self
            .stage
            .kube
            .put(namespace(name, json!({"app": "theirs"})));
        self.hostile.namespaces.insert(
            name.to_string(),
            (ns.metadata.uid, ns.metadata.resource_version),
        );
        true
    }

    fn hostile(&mut self) {
        if let Some(line) = self.squatter.act(self.stage.kube) {
            self.stage.note(&line);
        }
        let objects: Vec<Seen> = self.objects().into_values().collect();
        let pick = |rng: &mut StdRng, among: &[Seen]| {
            (!among.is_empty()).then(|| among[rng.random_range(0..among.len())].clone())
        };
        match self.stage.rng.random_range(0..100) {
            0..20 => {
                // An org made by hand, named after a namespace of its own.
                let guid = self.guid();
                self.squat(&guid);
                let n = self.stage.rng.random_range(0..100);
                self.stage.kube.put(json!({
                    "apiVersion": cf_core::config::CF_API_VERSION, "kind": "Org",
                    "metadata": {"name": guid, "namespace": ROOT},
                    "spec": {"displayName": format!("h{n}")},
                }));
                self.stage.note(&format!(
                    "hostile makes the org {guid} by hand, over a namespace of its own"
                ));
            }
            20..40 => {
                let acted = hold(self.stage.kube, &mut self.stage.rng);
                self.take(acted);
            }
            40..45 => {
                let acted = swap(self.stage.kube, &mut self.stage.rng);
                self.take(acted);
            }
            45..55 => {
                let held: Vec<(String, Seen)> = self
                    .objects()
                    .into_iter()
                    .filter(|(uid, _)| self.hostile.held.contains(uid))
                    .collect();
                if !held.is_empty() {
                    let (uid, o) = &held[self.stage.rng.random_range(0..held.len())];
                    self.release(uid, o);
                }
            }
            55..75 => {
                if let Some(o) = pick(&mut self.stage.rng, &objects)
                    && self.stage.kube.exists("Namespace", "", &o.guid)
                    && !self.hostile.namespaces.contains_key(&o.guid)
                {
                    let r = self.stage.kube.delete(
                        &self.admin(),
                        &namespace_ref(&o.guid),
                        &DeleteOptions::default(),
                    );
                    self.stage.note(&format!(
                        "hostile deletes the namespace of {} {}: {}",
                        o.kind,
                        o.guid,
                        r.is_ok()
                    ));
                }
            }
            75..90 => {
                let homeless: Vec<Seen> = objects
                    .iter()
                    .filter(|o| !self.stage.kube.exists("Namespace", "", &o.guid))
                    .cloned()
                    .collect();
                if let Some(o) = pick(&mut self.stage.rng, &homeless)
                    && self.squat(&o.guid)
                {
                    self.stage.note(&format!(
                        "hostile makes a namespace of its own named after {} {}",
                        o.kind, o.guid
                    ));
                }
            }
            _ => {
                if let Some(name) = self.hostile.namespaces.keys().next().cloned() {
                    let r = self.stage.kube.delete(
                        &self.admin(),
                        &namespace_ref(&name),
                        &DeleteOptions::default(),
                    );
                    // An answer lost after the delete was carried out counts as carried out.
                    if being_deleted(self.stage.kube, &name) != Some(false) {
                        self.hostile.namespaces.remove(&name);
                    }
                    self.stage.note(&format!(
                        "hostile deletes its own namespace {name}: {}",
                        r.is_ok()
                    ));
                }
            }
        }
    }

    /// Takes in a hostile act made outside a pass.
    fn take(&mut self, acted: Acted) {
        // A hostile act carries no deletion job and no violation.
        let _ = self.apply(acted);
    }

    /// The hostile user takes its finalizer off `o` (which goes, if that was the last one).
    fn release(&mut self, uid: &str, o: &Seen) {
        self.stage
            .kube
            .remove_finalizer(&o.kind, &o.namespace, &o.guid, FOREIGN_FINALIZER);
        self.hostile.held.remove(uid);
        self.stage.note(&format!(
            "hostile removes its finalizer from {} {}",
            o.kind, o.guid
        ));
    }

    // --- faults ----------------------------------------------------------------------------

    fn fault(&mut self) {
        self.stage.fault(&FAULTS, |kube, rng| {
            let lag = if rng.random_ratio(1, 3) {
                0
            } else {
                rng.random_range(1..=MAX_LAG_MS)
            };
            kube.read_lag_ms.set(lag);
            format!("fault: the API's reads lag {lag} ms behind")
        });
    }
}

impl Quiescent for CfWorld<'_, '_> {
    fn settle(&mut self) -> Result<(), Failure> {
        self.stage.kube.run_namespace_controller();
        self.stage.kube.advance(700_000);
        self.lethe_pass(true)
    }

    fn outstanding(&self) -> Vec<String> {
        self.stage.outstanding()
    }

    /// Polls `path`, and forgets it once it is COMPLETE.
    /// The client polls the deletion job at `path`, and so does a member of the org or space
    /// being deleted, whose rights go with its namespace's content while the deletion runs: the
    /// job must not turn COMPLETE for them either while the org or space exists.
    fn poll_one(&mut self, path: &str) -> Result<(), Failure> {
        let Some(d) = self.stage.deletions.get(path).cloned() else {
            return Ok(());
        };
        let (status, body, _) = self.client().call_as(&member(&d.guid), "GET", path, None);
        self.stage.note(&format!(
            "a member polls {path}: {status} {}",
            body["state"]
        ));
        // What job status promises a caller who cannot see the resource holds for reads that lag
        // less than its re-read (lethe's own GETs never lag against a kube-apiserver).
        if status == 200
            && body["state"] == "COMPLETE"
            && self.stage.kube.read_lag_ms.get() < JOB_REREAD_MS
        {
            self.check_complete(&d)?;
        }
        let (status, body, _) = self.client().call("GET", path, None);
        self.stage
            .note(&format!("client polls {path}: {status} {}", body["state"]));
        if status != 200 || body["state"] != "COMPLETE" {
            return Ok(());
        }
        self.stage.deletions.remove(path);
        self.check_complete(&d)
    }

    /// A deletion job whose org or space is held: by a finalizer of the hostile user's that
    /// quiescence left, or (an org) through a space of its that is.
    fn held_back(&self, path: &str) -> bool {
        let Some(d) = self.stage.deletions.get(path) else {
            return false;
        };
        let objects = self.objects();
        objects
            .values()
            .any(|o| o.guid == d.guid && held_out(o, &objects))
    }

    /// How the cluster differs from what lethe should have made of it, if it does: every org
    /// and space not being deleted has lethe's finalizer and its own namespace; none is left
    /// being deleted but those held (whose part lethe must have done: its finalizer off, its
    /// namespace gone, `Blocked` said); no namespace lethe made outlives its owner; every space
    /// has its org.
    fn divergence(&self) -> Option<String> {
        let objects = self.objects();
        let namespaces = self.namespaces();
        for (uid, o) in &objects {
            // Held (or, an org, holding a held space, whose namespace then cannot go while the
            // space is there, nor be made again): lethe's own part is all there is to judge.
            if held_out(o, &objects) {
                if let Some(undone) = self.lethes_part_undone(uid, o, &objects) {
                    return Some(undone);
                }
                continue;
            }
            if o.deleting {
                return Some(format!("{} {} is still being deleted", o.kind, o.guid));
            }
            if !o.finalizers.iter().any(|f| f == FINALIZER) {
                return Some(format!("{} {} lacks lethe's finalizer", o.kind, o.guid));
            }
            let mark = format!("{}.{}", type_name(&o.kind), o.guid);
            let home = namespaces.values().find(|n| {
                n.meta.name == o.guid
                    && n.owner_uid.as_deref() == Some(uid.as_str())
                    && n.owner.as_deref() == Some(mark.as_str())
                    && !n.meta.deleting
            });
            if home.is_none() {
                return Some(format!("{} {} has no namespace of its own", o.kind, o.guid));
            }
            if o.kind == "Space"
                && !objects
                    .values()
                    .any(|org| org.kind == "Org" && org.guid == o.namespace)
            {
                return Some(format!("space {} outlives its org {}", o.guid, o.namespace));
            }
        }
        // A namespace being deleted with a held space in it cannot go before the space does.
        let holds_a_held_space = |n: &SeenNamespace| {
            n.meta.deleting
                && objects.values().any(|o| {
                    o.kind == "Space" && o.namespace == n.meta.name && held_out(o, &objects)
                })
        };
        if let Some(n) = namespaces.values().find(|n| {
            n.owner_uid
                .as_ref()
                .is_some_and(|owner| !objects.contains_key(owner))
                && !holds_a_held_space(n)
        }) {
            return Some(format!("the namespace {} outlives its owner", n.meta.name));
        }
        let held: BTreeSet<String> = objects
            .values()
            .filter(|o| held_out(o, &objects))
            .map(|o| o.guid.clone())
            .collect();
        self.conditions_disagree(&held)
            .or_else(|| claims_disagree(self.stage.kube, &objects))
    }
}

impl CfWorld<'_, '_> {
    /// What lethe left undone of the deletion of `o`, which only foreign finalizers hold now:
    /// a held object keeps lethe's finalizer while its own cleanup is under way, which for a
    /// space held by the hostile user ends with its namespace gone and lethe's finalizer off, and
    /// its `Blocked` condition says what holds it. (An org that still has a space waits for it,
    /// and the space tells what holds it.)
    fn lethes_part_undone(
        &self,
        uid: &str,
        o: &Seen,
        objects: &BTreeMap<String, Seen>,
    ) -> Option<String> {
        let waits_for_a_space = o.kind == "Org"
            && objects
                .values()
                .any(|s| s.kind == "Space" && s.namespace == o.guid);
        // Deleted before lethe put its finalizer on it (made by hand, say): lethe did not take
        // its cleanup on, and sweeps what it made for it once it is gone.
        if !o.deleting
            || !o.finalizers.iter().any(|f| f == FOREIGN_FINALIZER)
            || waits_for_a_space
            || !self.finalized.contains(uid)
        {
            return None;
        }
        if o.finalizers.iter().any(|f| f == FINALIZER) {
            return Some(format!(
                "{} {} is held by another's finalizer and still carries lethe's",
                o.kind, o.guid
            ));
        }
        if self.stage.kube.exists("Namespace", "", &o.guid)
            && self
                .namespaces()
                .values()
                .any(|n| n.meta.name == o.guid && n.owner.is_some() && !n.meta.deleting)
        {
            return Some(format!(
                "{} {} is held by another's finalizer and its namespace is still there",
                o.kind, o.guid
            ));
        }
        let blocked = self
            .stage
            .kube
            .object(&o.kind, &o.namespace, &o.guid)
            .and_then(|found| {
                found.json()["status"]["conditions"]
                    .as_array()
                    .and_then(|all| all.iter().find(|c| c["type"] == "Blocked").cloned())
            });
        match blocked {
            Some(c) if c["status"] == "True" => None,
            other => Some(format!(
                "{} {} is held by another's finalizer and its Blocked condition says {other:?}",
                o.kind, o.guid
            )),
        }
    }

    /// Whether some org's or space's conditions disagree with it at quiescence, where each has
    /// its finalizer and its namespace (the rest of `divergence` checked that first): `Ready`
    /// must be `True` for its current generation, and nothing `Blocked` or `Deleting`.
    fn conditions_disagree(&self, held: &BTreeSet<String>) -> Option<String> {
        for kind in ["Org", "Space"] {
            let found = self.stage.kube.glance(kind, |o| {
                let name = glance::text(o, "/metadata/name");
                if glance::deleting(o) || held.contains(&name) {
                    // Held: `lethes_part_undone` judged it.
                    return None;
                }
                let generation = o["metadata"]["generation"].as_i64().unwrap_or(0);
                let conditions = o["status"]["conditions"].as_array().cloned().unwrap_or_default();
                let status = |t: &str| {
                    conditions
                        .iter()
                        .find(|c| c["type"] == t)
                        .map(|c| (c["status"].clone(), c["observedGeneration"].as_i64()))
                };
                let ready = status("Ready");
                if ready != Some((json!("True"), Some(generation))) {
                    return Some(format!(
                        "{kind} {name} is in place but its Ready condition says {ready:?} at generation {generation}"
                    ));
                }
                ["Blocked", "Deleting"].iter().find_map(|t| {
                    status(t)
                        .filter(|(s, _)| s == "True")
                        .map(|_| format!("{kind} {name} is in place but its {t} condition is True"))
                })
            });
            if let Some(found) = found.into_iter().flatten().next() {
                return Some(found);
            }
        }
        None
    }
}

/// Whether `o` is held at quiescence: being deleted and kept by a finalizer of the hostile
/// user's, or (an org) through a space of its that is.
fn held_out(o: &Seen, objects: &BTreeMap<String, Seen>) -> bool {
    let held = |o: &Seen| o.deleting && o.finalizers.iter().any(|f| f == FOREIGN_FINALIZER);
    held(o)
        || (o.kind == "Org"
            && objects
                .values()
                .any(|s| s.kind == "Space" && s.namespace == o.guid && held(s)))
}

/// Whether the name claims disagree with the orgs and spaces at quiescence: every claim's
/// holder exists and bears the claimed name (no claim outlives its resource or a rename), and
/// every name an org or space bears is claimed by one that bears it (two made by hand under one
/// name share one claim: the first holds it).
fn claims_disagree(kube: &FakeCluster, objects: &BTreeMap<String, Seen>) -> Option<String> {
    let key = |kind: &str, namespace: &str, name: &str| {
        (
            kind.to_lowercase(),
            namespace.to_string(),
            name.to_lowercase(),
        )
    };
    let claims = kube.glance("ConfigMap", |o| {
        let kind = glance::label(o, CLAIM_LABEL)?;
        let holder = glance::opt(
            o,
            &format!(
                "/metadata/annotations/{}",
                HOLDER_ANNOTATION.replace('/', "~1")
            ),
        );
        Some((
            key(
                &kind,
                &glance::text(o, "/data/namespace"),
                &glance::text(o, "/data/name"),
            ),
            (
                glance::text(o, "/metadata/name"),
                holder.unwrap_or_default(),
            ),
        ))
    });
    let mut claimed = BTreeMap::new();
    for (named, (claim, holder)) in claims.into_iter().flatten() {
        let bearer = objects.values().find(|o| o.guid == holder);
        if bearer.is_none_or(|o| key(&o.kind, &o.namespace, &o.name) != named) {
            return Some(format!(
                "the name claim {claim} for {named:?} names {holder}, which does not bear that name"
            ));
        }
        if let Some(other) = claimed.insert(named.clone(), claim.clone()) {
            return Some(format!("two claims for {named:?}: {other} and {claim}"));
        }
    }
    objects
        .values()
        .filter(|o| !o.deleting)
        .find(|o| !claimed.contains_key(&key(&o.kind, &o.namespace, &o.name)))
        .map(|o| {
            format!(
                "{} {} bears the name {} and nothing claims it",
                o.kind, o.guid, o.name
            )
        })
}

/// The hostile user puts its finalizer on an org or space the seed picks, first or last in the
/// list.
fn hold(kube: &FakeCluster, rng: &mut StdRng) -> Acted {
    let mut objects = kube.all("Org");
    objects.extend(kube.all("Space"));
    if objects.is_empty() {
        return Acted::default();
    }
    let o = &objects[rng.random_range(0..objects.len())];
    if o.metadata.finalizers.iter().any(|f| f == FOREIGN_FINALIZER) {
        return Acted::default();
    }
    let first = rng.random_ratio(1, 2);
    let namespace = o.target.namespace.clone().unwrap_or_default();
    kube.edit(&o.target.kind, &namespace, &o.target.name, |o| {
        let mut finalizers = o["metadata"]["finalizers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if first {
            finalizers.insert(0, json!(FOREIGN_FINALIZER));
        } else {
            finalizers.push(json!(FOREIGN_FINALIZER));
        }
        o["metadata"]["finalizers"] = json!(finalizers);
    });
    Acted {
        lines: vec![format!(
            "hostile adds its finalizer to {} {}",
            o.target.kind, o.target.name
        )],
        held: Some(o.metadata.uid.clone()),
        ..Acted::default()
    }
}

/// The hostile user deletes an empty namespace lethe made, the namespace controller removes it,
/// and the hostile user makes a namespace of its own under that name: all between two reads of
/// a pass, if the schedule says so.
fn swap(kube: &FakeCluster, rng: &mut StdRng) -> Acted {
    let (mut homes, mut leaving) = (BTreeSet::new(), BTreeSet::new());
    for kind in ["Org", "Space"] {
        homes.extend(kube.glance(kind, |o| glance::text(o, "/metadata/namespace")));
        leaving.extend(
            kube.glance(kind, |o| {
                glance::deleting(o).then(|| glance::text(o, "/metadata/name"))
            })
            .into_iter()
            .flatten(),
        );
    }
    let empty: Vec<String> = kube
        .glance("Namespace", |o| {
            let marked = glance::label(o, OWNER_UID_LABEL).is_some() && !glance::deleting(o);
            marked.then(|| glance::text(o, "/metadata/name"))
        })
        .into_iter()
        .flatten()
        .filter(|name| !homes.contains(name))
        .collect();
    // The namespaces whose owner is being deleted first: the reconciler is about to delete them.
    let doomed: Vec<String> = empty
        .iter()
        .filter(|name| leaving.contains(*name))
        .cloned()
        .collect();
    let among = if doomed.is_empty() { &empty } else { &doomed };
    if among.is_empty() {
        return Acted::default();
    }
    let name = among[rng.random_range(0..among.len())].clone();
    let admin = Identity::Caller(ADMIN.into());
    // Its answer may be lost after it was carried out: what counts is whether it was.
    let _ = kube.delete(&admin, &namespace_ref(&name), &DeleteOptions::default());
    if being_deleted(kube, &name) != Some(true) {
        return Acted::default();
    }
    kube.finish_namespace(&name);
    let theirs = kube.put(namespace(&name, json!({"app": "theirs"})));
    Acted {
        lines: vec![format!(
            "hostile replaces lethe's namespace {name} with one of its own"
        )],
        squatted: Some((
            name,
            (theirs.metadata.uid, theirs.metadata.resource_version),
        )),
        ..Acted::default()
    }
}

/// Whether the namespace `name` is being deleted; empty when it is gone.
fn being_deleted(kube: &FakeCluster, name: &str) -> Option<bool> {
    kube.glance("Namespace", |o| {
        (glance::text(o, "/metadata/name") == name).then(|| glance::deleting(o))
    })
    .into_iter()
    .flatten()
    .next()
}

/// One pass of the cf reconciler on `host`'s capabilities, as the host's cron trigger runs it.
fn cf_pass(host: &dyn lethe_guest::Capabilities, full: bool) -> Result<Report, String> {
    let settings = Settings::from_env(host)?;
    let backoff = cf_core::reconcile::load_backoff(host, host)
        .map_err(|e| format!("reading the backoff: {e}"))?;
    Ok(pass_on_changes(host, host, host, &settings, &backoff, full))
}

/// Whether the pass ran as the Lease's holder: no other host's name, and no failure to take it.
fn led(r: &Report) -> bool {
    r.leader_elsewhere.is_none() && !r.failed.iter().any(|(item, _)| item == LEASE_ITEM)
}

/// A pass's report, for the trace.
fn said(r: &Report) -> String {
    if let Some(holder) = &r.leader_elsewhere {
        return format!("not leader ({holder})");
    }
    let mut said = format!(
        "{}examined {} created {} updated {} deleted {} backing off {}",
        if r.full { "full: " } else { "" },
        r.examined,
        r.created,
        r.updated,
        r.deleted,
        r.backing_off
    );
    for (item, reason) in &r.failed {
        let _ = write!(said, "; {item} failed: {reason}");
    }
    said
}

/// What a pass may write: every org, space, namespace and name claim by uid, with the guid it is
/// for (its own, or for a namespace or a claim the org's or space's it belongs to), its
/// resourceVersion and its kind and name; and the org of every space.
#[derive(Default)]
struct Footprint {
    objects: BTreeMap<String, (String, String, String)>,
    org_of: BTreeMap<String, String>,
}

fn footprint(kube: &FakeCluster) -> Footprint {
    let org_of = kube
        .glance("Space", |o| {
            (
                glance::text(o, "/metadata/name"),
                glance::text(o, "/metadata/namespace"),
            )
        })
        .into_iter()
        .collect();
    let holder = format!(
        "/metadata/annotations/{}",
        HOLDER_ANNOTATION.replace('/', "~1")
    );
    let mut objects = BTreeMap::new();
    for kind in ["Org", "Space", "Namespace", "ConfigMap"] {
        for (uid, (of, version, what)) in glance::by_uid(kube, kind, |o| {
            let name = glance::text(o, "/metadata/name");
            let of = match kind {
                "ConfigMap" => glance::opt(o, &holder),
                _ => Some(name.clone()),
            };
            (
                of,
                glance::text(o, "/metadata/resourceVersion"),
                format!("{kind} {name}"),
            )
        }) {
            if let Some(of) = of {
                objects.insert(uid, (of, version, what));
            }
        }
    }
    Footprint { objects, org_of }
}

/// The leader invariant inside a pass: host `index`, paused past its Lease while another host
/// took it over and ran a pass, acted on at most the one org (with its spaces, namespaces and
/// name claims) it was in the middle of when it resumed (`taken`: the footprint when the other
/// host's pass ended).
fn acted_after_takeover(index: usize, taken: &Footprint, now: &Footprint) -> Result<(), Failure> {
    // A space's org, as either footprint knows it (one may no longer hold the space).
    let org = |guid: &String| {
        let of = now.org_of.get(guid).or_else(|| taken.org_of.get(guid));
        of.unwrap_or(guid).clone()
    };
    let changed: BTreeMap<String, Vec<&String>> = now
        .objects
        .iter()
        .filter(|(uid, (_, version, _))| {
            taken
                .objects
                .get(*uid)
                .is_none_or(|(_, was, _)| was != version)
        })
        .chain(
            taken
                .objects
                .iter()
                .filter(|(uid, _)| !now.objects.contains_key(*uid)),
        )
        .fold(BTreeMap::new(), |mut by_org, (_, (of, _, what))| {
            by_org.entry(org(of)).or_insert_with(Vec::new).push(what);
            by_org
        });
    if changed.len() > 1 {
        return Err(format!(
            "host-{index} acted beside the new leader after its Lease was taken: for orgs {changed:?}"
        ));
    }
    Ok(())
}

/// What one client action did.
#[derive(Default)]
struct Acted {
    lines: Vec<String>,
    deletion: Option<Deletion>,
    /// Whether the deletion's first poll already said COMPLETE.
    complete: bool,
    violation: Option<String>,
    /// The uid of an org or space the hostile user put its finalizer on.
    held: Option<String>,
    /// The org or space a client asked to delete, whatever the answer (a lost one may have been
    /// carried out).
    asked_to_delete: Option<String>,
    /// A namespace the hostile user made of its own: its name, uid and resourceVersion.
    squatted: Option<(String, (String, String))>,
}

/// A CF admin using the API as the cf CLI does (through the `api` host, whose reads may lag).
#[derive(Clone, Copy)]
struct Client<'w, 'a> {
    api: &'w FakeHost<'a>,
    kube: &'a FakeCluster,
}

/// The token of a member of org or space `guid`: a user whose only rights are a RoleBinding in
/// its namespace, so they go when the namespace controller empties it.
fn member(guid: &str) -> String {
    format!("member-{guid}")
}

impl Client<'_, '_> {
    fn call(&self, method: &str, path: &str, body: Option<Json>) -> (u16, Json, Option<String>) {
        self.call_as(ADMIN, method, path, body)
    }

    fn call_as(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<Json>,
    ) -> (u16, Json, Option<String>) {
        let req = world::request(method, path, token, body);
        let kube = self.kube;
        let r = kube.read_late(|| {
            if path.starts_with("/v3/jobs/") {
                cf_core::jobs::handle(kube, self.api, &req)
            } else {
                cf_core::api::handle(kube, self.api, &req)
            }
        });
        world::answer(&r)
    }

    /// A guid of `kind` the client has heard of (any, being deleted or not).
    fn pick(&self, kind: &str, rng: &mut StdRng) -> Option<String> {
        let all = self
            .kube
            .glance(kind, |o| glance::text(o, "/metadata/name"));
        (!all.is_empty()).then(|| all[rng.random_range(0..all.len())].clone())
    }

    /// One request the seed picks; a deletion's first poll is checked: never 404.
    fn act(&self, rng: &mut StdRng) -> Acted {
        let mut acted = Acted::default();
        let (what, method, path, body, kind) = match rng.random_range(0..100) {
            0..25 => {
                let name = ORG_NAMES[rng.random_range(0..ORG_NAMES.len())];

                (
                    format!("creates org {name}"),
                    "POST",
                    "/v3/organizations".to_string(),
                    Some(json!({ "name": name })),
                    "Org",
                )
            }
            25..50 => {
                let Some(org) = self.pick("Org", rng) else {
                    return acted;
                };
                let name = SPACE_NAMES[rng.random_range(0..SPACE_NAMES.len())];

                (
                    format!("creates space {name} in {org}"),
                    "POST",
                    "/v3/spaces".to_string(),
                    Some(json!({ "name": name,
                        "relationships": {"organization": {"data": {"guid": org}}}})),
                    "Space",
                )
            }
            50..75 => {
                let Some(org) = self.pick("Org", rng) else {
                    return acted;
                };
                (
                    format!("deletes org {org}"),
                    "DELETE",
                    format!("/v3/organizations/{org}"),
                    None,
                    "Org",
                )
            }
            _ => {
                let Some(space) = self.pick("Space", rng) else {
                    return acted;
                };
                (
                    format!("deletes space {space}"),
                    "DELETE",
                    format!("/v3/spaces/{space}"),
                    None,
                    "Space",
                )
            }
        };
        let (status, body, location) = self.call(method, &path, body);
        if let (201, Some(guid)) = (status, body["guid"].as_str()) {
            self.kube.grant(&member(guid), "*", "*", guid);
        }
        if method == "DELETE" {
            acted.asked_to_delete = path.rsplit('/').next().map(str::to_string);
        }
        let detail = body["errors"][0]["detail"].as_str().unwrap_or_default();
        acted.lines.push(
            format!("client {what}: {status} {detail}")
                .trim_end()
                .into(),
        );
        if status != 202 {
            return acted;
        }
        let Some(location) = location else {
            acted.violation = Some(format!("{what}: 202 without a Location"));
            return acted;
        };
        let poll = world::first_poll(location, |path| self.call("GET", path, None));
        acted.lines.push(poll.line);
        acted.violation = poll.violation;
        acted.complete = poll.complete;
        acted.deletion = Some(Deletion {
            path: poll.path,
            kind: kind.to_string(),
            guid: path.rsplit('/').next().unwrap_or_default().to_string(),
        });
        acted
    }
}
