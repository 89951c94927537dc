//! The finalizer reconciler for orgs and spaces, in the manner of kube-rs's `finalizer`: every
//! object is handled by exactly one of four cases, decided from two facts — is it being deleted,
//! and does it carry our finalizer?
//!
//! | deleting | our finalizer | what the pass does                                                |
//! |----------|---------------|-------------------------------------------------------------------|
//! | no       | no            | adds the finalizer (JSON patch), so deletion waits for cleanup    |
//! | no       | yes           | makes sure the namespace it owns exists (repairs a crashed create)|
//! | yes      | yes           | cleans up: deletes its children, then its namespace; once the     |
//! |          |               | namespace is gone, removes only our finalizer (test + remove)     |
//! | yes      | no            | nothing: other finalizers hold it, and they are not ours          |
//!
//! Guarantee: a resource's finalizer is removed only after everything it owns is gone, so its
//! deletion job stays `PROCESSING` until then. Assumptions: cleanup steps are idempotent (each
//! pass re-derives what is left), and only lethe edits its own finalizer. Caveat: while no
//! reconciler runs, deletions wait; a deletion that cannot finish (a foreign finalizer, say)
//! leaves the resource, and its job turns `FAILED` at the timeout.
//!
//! The privileged boundary (SECURITY.md P1, P2): a namespace is created, written into or deleted
//! only when it carries the mark of the very object being reconciled
//! ([`ownership::Owner::owns`]: its type, name and uid). A namespace of that name without the mark
//! is never adopted, emptied or deleted: the object is reported (log, pass report, and its job
//! turns `FAILED` naming the namespace) and keeps its finalizer until an administrator resolves
//! the clash.
//!
//! Failures back off per object (exponentially, through [`Backoff`]); one failing object never
//! stops the pass.

use std::cell::Cell;
use std::collections::BTreeSet;
use std::ops::ControlFlow;

use serde_json::json;

use lethe_guest::env::{Env, parse_rfc3339_ms};
use lethe_guest::kube::{
    Collection, DeleteOptions, Identity, Kube, KubeError, ListOptions, Object, Patch, Propagation,
};

use crate::FINALIZER;
use crate::access;
use crate::config::{ResourceType, Settings};
use crate::jobs::{self, JobGuid, JobState};
use crate::kind::ResourceKind;
use crate::names::{Claims, NameClaim};
use crate::ownership::{self, MarkedNamespaces, NotOurs, Owner, Refusal};
use crate::tell;
use lethe_guest::events::{Event, Recorder};
use lethe_guest::finalizer::{self, Case};
use lethe_guest::lease::Lease;

/// The page size of a full pass's LISTs: twice client-go's 500, since a full pass is bounded by
/// its budget and the component's client-side rate limit counts requests, not objects. At the
/// shipped 20 requests/s (burst 30) and 10 s budget, a pass over 12 objects and namespaces per
/// org fits about 230 pages: some 19,000 orgs of 5 spaces. The page stays a few MB of the
/// component's memory.
pub const LIST_PAGE: u32 = 1000;

/// Per-object backoff state, kept across passes: the SDK's one ([`lethe_guest::backoff`]).
pub use lethe_guest::backoff::Backoff;

/// The cf reconciler's name in the SDK's backoff table.
pub const BACKOFF_NAME: &str = "cf";

/// The cf reconciler's backoff: its rows of the SDK's table, read once per pass and written
/// through (a write that fails is logged; at worst an object is retried sooner).
pub fn load_backoff<'a>(
    sql: &'a dyn lethe_guest::sql::Sql,
    env: &'a dyn Env,
) -> Result<lethe_guest::backoff::Loaded<'a>, lethe_guest::sql::SqlError> {
    lethe_guest::backoff::Loaded::load(sql, env, BACKOFF_NAME, (BACKOFF_BASE_MS, BACKOFF_MAX_MS))
}

/// The first wait before an object that failed is retried; it doubles per failure in a row.
pub const BACKOFF_BASE_MS: i64 = 1000;

/// The longest wait before an object that keeps failing is retried.
pub const BACKOFF_MAX_MS: i64 = 300_000;

/// What one pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Objects visited.
    pub examined: u32,
    /// Namespaces created and finalizers added.
    pub created: u32,
    /// Finalizers removed (resources released).
    pub updated: u32,
    /// Children and namespaces deleted.
    pub deleted: u32,
    /// `(object, reason)` for each failure, a foreign object in the way among them (its reason
    /// names it).
    pub failed: Vec<(String, String)>,
    /// Objects skipped because they are backing off.
    pub backing_off: u32,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Deletions still under way after this pass.
    pub deletions: Vec<DeletionInFlight>,
    /// Whether it was a full pass (everything listed), not one on the changes alone.
    pub full: bool,
    /// Whether the pass ran out of its budget ([`Settings::pass_budget_ms`]) before it visited
    /// everything, or lost its Lease; the next pass is then full.
    pub deferred: bool,
    /// The holder of the Lease, when another host holds it and this one ran no pass.
    pub leader_elsewhere: Option<String>,
    /// Whether upkeep was left for a later pass ([`UPKEEP_PER_PASS`]): the next full pass then
    /// comes soon.
    pub upkeep_behind: bool,
}

/// The most upkeep writes a pass makes: conditions that changed, and claims on the names of
/// objects made before claims existed. They only keep what lethe tells up to date, so after an
/// upgrade over tens of thousands of objects they drain a hundred a pass, rather than take every
/// pass's budget (and the client-side rate limit) from the deletions under way.
pub const UPKEEP_PER_PASS: u32 = 100;

/// A deletion still under way after a pass: what its deletion job says now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeletionInFlight {
    /// `<type>/<guid>`.
    pub item: String,
    /// The job's state: `PROCESSING`, or `FAILED` past the timeout or when blocked.
    pub state: JobState,
    /// Milliseconds since the deletion was asked for.
    pub age_ms: u64,
    /// When the deletion was asked for (its deletionTimestamp).
    pub since: String,
    /// What blocks it, when something not lethe's is in the way.
    pub blocked_by: Option<String>,
    /// Why it is not done, as its job poll's error says it; `None` while it proceeds.
    pub reason: Option<String>,
}

/// What the host hears of a pass.
impl From<Report> for lethe_guest::reconciler::PassReport {
    fn from(r: Report) -> Self {
        use lethe_guest::reconciler::{self as pass, ItemFailure, PassReport};
        PassReport {
            examined: r.examined,
            created: r.created,
            updated: r.updated,
            deleted: r.deleted,
            failed: r
                .failed
                .into_iter()
                .map(|(item, reason)| ItemFailure {
                    item,
                    reason,
                    parked: false,
                })
                .collect(),
            duration_ms: r.duration_ms,
            deletions: r
                .deletions
                .into_iter()
                .map(|d| pass::DeletionInFlight {
                    item: d.item,
                    state: d.state.as_str().to_string(),
                    age_ms: d.age_ms,
                    reason: d.reason,
                })
                .collect(),
            leader_elsewhere: r.leader_elsewhere,
        }
    }
}

/// How reconciling one object ended.
enum Outcome {
    /// Nothing is left to do for it now.
    Done,
    /// Its cleanup is under way: something it owns is still being deleted.
    Waiting,
}

/// Why reconciling one object failed: the step of the table above that did not succeed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepFailed {
    /// A namespace of its name is not its own, so it is neither made nor emptied nor deleted.
    #[error("{0}")]
    NotOurs(NotOurs),
    /// Adding our finalizer to an object not being deleted.
    #[error("adding the finalizer: {0}")]
    AddingFinalizer(KubeError),
    /// Making (or repairing) the namespace it owns.
    #[error("making its namespace: {0}")]
    MakingNamespace(KubeError),
    /// Reading the namespace it owns, at the start of a cleanup.
    #[error("reading its namespace: {0}")]
    ReadingNamespace(KubeError),
    /// Listing or deleting its children in its namespace.
    #[error("deleting its children: {0}")]
    DeletingChildren(KubeError),
    /// Deleting the namespace it owns.
    #[error("deleting its namespace: {0}")]
    DeletingNamespace(KubeError),
    /// Removing our finalizer once everything it owns is gone.
    #[error("removing the finalizer: {0}")]
    RemovingFinalizer(KubeError),
}

impl StepFailed {
    /// The step that failed, in UpperCamelCase, as a condition's reason says it.
    pub fn reason(&self) -> &'static str {
        match self {
            StepFailed::NotOurs(_) => "NamespaceNotLethes",
            StepFailed::AddingFinalizer(_) => "AddingFinalizerFailed",
            StepFailed::MakingNamespace(_) => "MakingNamespaceFailed",
            StepFailed::ReadingNamespace(_) => "ReadingNamespaceFailed",
            StepFailed::DeletingChildren(_) => "DeletingChildrenFailed",
            StepFailed::DeletingNamespace(_) => "DeletingNamespaceFailed",
            StepFailed::RemovingFinalizer(_) => "RemovingFinalizerFailed",
        }
    }

    /// `refusal` at the step `step` names (an object in the way is the same at every step).
    fn at(step: fn(KubeError) -> StepFailed) -> impl Fn(Refusal) -> StepFailed {
        move |refusal| match refusal {
            Refusal::NotOurs(in_the_way) => StepFailed::NotOurs(in_the_way),
            Refusal::Kube(e) => step(e),
        }
    }
}

/// Runs one pass over every configured resource type (a full pass: every object is listed and
/// visited; the `follow` module runs the passes in between on what changed).
pub fn pass(kube: &dyn Kube, env: &dyn Env, settings: &Settings, backoff: &dyn Backoff) -> Report {
    Reconciler {
        kube,
        env,
        settings,
        backoff,
        lease: None,
        events: &Recorder::new(kube, env, tell::CONTROLLER),
        upkeep: Cell::new(UPKEEP_PER_PASS),
    }
    .pass()
}

/// What visiting one object needs: the capabilities, the settings and the backoff state.
pub(crate) struct Reconciler<'a> {
    /// The cluster the pass reads and writes.
    pub kube: &'a dyn Kube,
    /// The clock, configuration, logs and randomness.
    pub env: &'a dyn Env,
    /// The types to reconcile and how.
    pub settings: &'a Settings,
    /// Which objects wait before their next attempt.
    pub backoff: &'a dyn Backoff,
    /// The Lease this host holds while it runs the pass, renewed at the pass's checkpoints
    /// (`None`: the caller runs one pass of its own, as the tests do).
    pub lease: Option<&'a Lease<'a>>,
    /// Where the Events of what it does go.
    pub events: &'a Recorder<'a>,
    /// The upkeep writes this pass may still make (from [`UPKEEP_PER_PASS`]).
    pub upkeep: Cell<u32>,
}

impl Reconciler<'_> {
    /// Takes one upkeep write from this pass's allowance; `false` when it is spent (the write
    /// waits for a later pass).
    pub(crate) fn take_upkeep(&self) -> bool {
        let left = self.upkeep.get();
        self.upkeep.set(left.saturating_sub(1));
        left > 0
    }

    /// Whether this pass spent its upkeep allowance (so some may be left for later).
    pub(crate) fn upkeep_spent(&self) -> bool {
        self.upkeep.get() == 0
    }

    /// Lists every object of every configured type and visits each. The namespaces they own are
    /// checked against one LIST of the marked namespaces, not read one by one; objects are
    /// listed and visited a page at a time, so the requests of a pass are its LIST pages and
    /// what needs doing, and its memory one page, the namespace marks and the names listed.
    pub(crate) fn pass(&self) -> Report {
        let started = self.env.now_ms();
        let mut report = Report::default();
        let marked = match MarkedNamespaces::list(self.kube, LIST_PAGE) {
            Ok(marked) => Some(marked),
            Err(e) => {
                // Visiting still works, reading each namespace; only the sweep waits.
                report
                    .failed
                    .push(("namespace/*".into(), format!("listing: {e}")));
                None
            }
        };
        // The name claims, listed before the objects (see `Claims::delete_orphans`).
        let claims = match Claims::list(self.kube, &self.settings.root_namespace, LIST_PAGE) {
            Ok(claims) => Some(claims),
            Err(e) => {
                // Objects made by the API hold their claims; the backfill waits a pass.
                report
                    .failed
                    .push(("name-claim/*".into(), format!("listing: {e}")));
                None
            }
        };
        // What was listed, as the owner marks name it (`<type>.<name>`).
        let mut listed = BTreeSet::new();
        let options = ListOptions {
            limit: Some(LIST_PAGE),
            ..ListOptions::default()
        };
        // Whether every type was listed whole: only then is an owner not listed gone.
        let mut listed_all = true;
        for (type_name, t) in self.settings.reconciled() {
            if self.must_stop(started) {
                report.deferred = true;
                break;
            }
            let listing = self.kube.list_pages(
                &Identity::Privileged,
                &t.collection(t.fixed_namespace()),
                &options,
                &mut |objects| {
                    for object in objects {
                        if self.must_stop(started) {
                            // The rest waits for the next pass (full, as this one was cut).
                            report.deferred = true;
                            return ControlFlow::Break(());
                        }
                        let full = Full {
                            marked: marked.as_ref(),
                            claims: claims.as_ref(),
                            gone: None,
                        };
                        self.visit(type_name, t, &object, full, &mut report);
                        listed.insert(format!("{type_name}.{}", object.target.name));
                    }
                    ControlFlow::Continue(())
                },
            );
            match listing {
                Ok(()) => {}
                // The CRD may not be installed on this cluster yet: nothing to visit. Nor to
                // sweep: while the kind is not served, every owner of its marked namespaces would
                // look gone, and reading one would say "not found" too.
                Err(KubeError::NotFound(_)) => listed_all = false,
                Err(e) => {
                    report
                        .failed
                        .push((format!("{type_name}/*"), format!("listing: {e}")));
                    // Its owners not listed would all look gone, each costing a read: the
                    // sweep waits for a pass that lists everything.
                    listed_all = false;
                }
            }
        }
        if let Some(marked) = marked.as_ref().filter(|_| listed_all && !report.deferred) {
            for (type_name, name) in marked.unowned(&listed) {
                if self.must_stop(started) {
                    // The other orphans wait for the next (full) pass.
                    report.deferred = true;
                    break;
                }
                if let Some(t) = self.settings.reconciled_type(type_name) {
                    self.sweep(type_name, t, name, &mut report);
                }
            }
        }
        if let Some(claims) = claims.as_ref().filter(|_| listed_all && !report.deferred) {
            let must_stop = || self.must_stop(started);
            match claims.delete_orphans(self.kube, &listed, started, &must_stop) {
                Ok((deleted, stopped)) => {
                    report.deleted += deleted;
                    // The other orphans wait for the next (full) pass.
                    report.deferred |= stopped;
                }
                Err(e) => report
                    .failed
                    .push(("name-claim/*".into(), format!("deleting: {e}"))),
            }
        }
        report.duration_ms = u64::try_from(self.env.now_ms() - started).unwrap_or(0);
        report.upkeep_behind = self.upkeep_spent();
        report
    }

    /// Whether a pass that started at `started` must stop here: it has used up its budget, or
    /// it lost its Lease, which is renewed at these checkpoints when due (another host may now
    /// run a pass).
    pub(crate) fn must_stop(&self, started: i64) -> bool {
        let budget = i64::try_from(self.settings.pass_budget_ms).unwrap_or(i64::MAX);
        let now = self.env.now_ms();
        if now.saturating_sub(started) >= budget {
            return true;
        }
        match self.lease.map(|lease| lease.keep(now)) {
            Some(Err(lost)) => {
                self.env.log(
                    lethe_guest::env::Level::Warn,
                    &format!("cf reconcile: {lost}"),
                );
                true
            }
            _ => false,
        }
    }

    /// Deletes the namespace `name` when it carries lethe's mark for the object `name` of type
    /// `type_name` and no object of that name is left (SECURITY.md P2b). Such a namespace
    /// outlived its owner: one made by a space create that raced with its org's deletion, or for
    /// an org made by hand and deleted before the reconciler put its finalizer on it. The owner
    /// is read after the namespace, so one made just now is found; a namespace whose mark names
    /// an earlier object of a name now taken again is left alone, and reported on the new one
    /// (P1). The delete is preconditioned on the uid of the namespace whose mark was checked.
    pub(crate) fn sweep(&self, type_name: &str, t: &ResourceType, name: &str, report: &mut Report) {
        let key = format!("{type_name}/{name}");
        let ns = match self
            .kube
            .get(&Identity::Privileged, &ownership::namespace_ref(name))
        {
            Ok(ns) => ns,
            Err(KubeError::NotFound(_)) => return,
            Err(e) => {
                report
                    .failed
                    .push((key, format!("reading its namespace: {e}")));
                return;
            }
        };
        let mark = format!("{type_name}.{name}");
        let marked = ns.label(ownership::OWNER_UID_LABEL).is_some()
            && ns.label(ownership::OWNER_LABEL) == Some(mark.as_str());
        if !marked || ns.metadata.deletion_timestamp.is_some() {
            return;
        }
        match access::locate(self.kube, t, name) {
            // Its owner, or another of that name, which the clash is reported on (P1).
            Ok(Some(_)) => return,
            Ok(None) => {}
            Err(e) => {
                report.failed.push((key, format!("reading it: {e}")));
                return;
            }
        }
        let options = DeleteOptions {
            propagation: Some(Propagation::Background),
            precondition_uid: Some(ns.metadata.uid.clone()),
        };
        match self
            .kube
            .delete(&Identity::Privileged, &ns.target, &options)
        {
            Ok(_) => {
                report.deleted += 1;
                let note = format!("deleted the namespace {name}, whose {type_name} is gone");
                self.env.log(lethe_guest::env::Level::Info, &note);
                let event = Event::normal("OrphanDeleted", "Delete", &note);
                self.events.record(&ns, event);
            }
            Err(KubeError::NotFound(_) | KubeError::Conflict(_)) => {}
            Err(e) => report
                .failed
                .push((key, format!("deleting its orphaned namespace: {e}"))),
        }
    }

    /// Reconciles `object` of type `type_name` (unless it is backing off), recording in
    /// `report` what it did, its failure, and its deletion if one is still under way. With the
    /// namespaces a full pass listed (`full.marked`), the namespace it owns is left alone when
    /// it was listed with its mark, and otherwise created at once (an `AlreadyExists` is then
    /// read and judged), rather than read first. Its name is claimed ([`names`]) on first
    /// sight, and when a full pass listed no claim of it.
    pub(crate) fn visit(
        &self,
        type_name: &str,
        t: &ResourceType,
        object: &Object,
        full: Full<'_>,
        report: &mut Report,
    ) {
        let (kube, env, settings, backoff) = (self.kube, self.env, self.settings, self.backoff);
        report.examined += 1;
        let key = format!("{type_name}/{}", object.target.name);
        if !backoff.due(&key, env.now_ms()) {
            report.backing_off += 1;
            return;
        }
        let claim = self.name_claim(type_name, t, object);
        if let Some(claim) = &claim
            && object.metadata.deletion_timestamp.is_none()
        {
            self.claim_name(type_name, claim, object, full.claims);
        }
        let owner = Owner::new(type_name, object);
        let events = self.events;
        let result = reconcile_one(kube, t, owner, full, claim.as_ref(), events, report);
        // What is in the way is recorded on the object itself, where its deletion job reads it
        // at no extra cost, and cleared once the way is free.
        let blocked_by = match &result {
            Err(StepFailed::NotOurs(in_the_way)) => Some(in_the_way.to_string()),
            _ => None,
        };
        if let Err(e) = record_blocked_by(kube, object, blocked_by.as_deref()) {
            env.log(
                lethe_guest::env::Level::Warn,
                &format!("recording what blocks {key}: {e}"),
            );
        }
        // Released: our finalizer was the last one and is gone, so the object is too.
        let released = object.metadata.deletion_timestamp.is_some()
            && matches!(result, Ok(Outcome::Done))
            && finalizer::is_last(object, FINALIZER);
        self.tell(object, &result, blocked_by.as_deref(), released);
        if let Some(since) = &object.metadata.deletion_timestamp
            && !released
        {
            report.deletions.push(DeletionInFlight::of(
                &key,
                since,
                blocked_by.as_deref(),
                settings,
                t,
                env.now_ms(),
            ));
        }
        match result {
            Ok(_) => backoff.succeeded(&key),
            Err(e) => {
                let reason = e.to_string();
                env.log(
                    lethe_guest::env::Level::Warn,
                    &format!("reconciling {key}: {reason}"),
                );
                backoff.failed(&key, env.now_ms(), &reason);
                report.failed.push((key, reason));
            }
        }
    }
}

impl Reconciler<'_> {
    /// Tells the cluster how the visit of `object` ended (`result`, with `blocked_by` in its
    /// way): an Event when what blocks it changed, or when others' finalizers came to hold it,
    /// and its conditions unless it was `released` (it is gone).
    fn tell(
        &self,
        object: &Object,
        result: &Result<Outcome, StepFailed>,
        blocked_by: Option<&str>,
        released: bool,
    ) {
        if ownership::blocked_by(object) != blocked_by {
            self.events
                .record(object, tell::blocked(object, blocked_by));
        }
        if released {
            return;
        }
        let visit = match result {
            Ok(Outcome::Done) => tell::Visit::Done,
            Ok(Outcome::Waiting) => tell::Visit::Waiting,
            Err(e) => tell::Visit::Failed(e.reason(), e.to_string()),
        };
        let held = tell::held_by(object, &visit);
        if let Some(held) = &held
            && !tell::shows_held(object)
        {
            let event = Event::warning("DeletionBlocked", "Delete", held);
            self.events.record(object, event);
        }
        let decided = tell::conditions(object, &visit, blocked_by, held.as_deref());
        tell::write_conditions(self.kube, self.env, object, &decided, &|| {
            self.take_upkeep()
        });
    }

    /// The claim on the name of `object`, of type `type_name`, if its kind has unique names.
    fn name_claim<'a>(
        &'a self,
        type_name: &str,
        t: &'a ResourceType,
        object: &'a Object,
    ) -> Option<NameClaim<'a>> {
        let kind = ResourceKind::from_name(type_name)?;
        NameClaim::of(&self.settings.root_namespace, kind, t, object)
    }

    /// Claims the name of `object` when it may hold none: on first sight (no finalizer of
    /// ours yet: it was made outside the API, whose creates claim first), or when a full pass
    /// listed no claim of it (made before claims existed). A name another object holds is
    /// logged: two objects have it, and only a person can tell which should.
    fn claim_name(
        &self,
        type_name: &str,
        claim: &NameClaim<'_>,
        object: &Object,
        claims: Option<&Claims>,
    ) {
        let holder = &object.target.name;
        // An object made outside the API is claimed at once; one made before claims existed
        // (a full pass's backfill) is upkeep.
        let needed = match claims {
            Some(claims) => !claims.held(claim, holder) && self.take_upkeep(),
            None => !object.metadata.finalizers.iter().any(|f| f == FINALIZER),
        };
        if !needed {
            return;
        }
        let level = lethe_guest::env::Level::Warn;
        match claim.take(self.kube, self.env, holder) {
            Ok(true) => {}
            Ok(false) => {
                let note = format!(
                    "{type_name} {holder} is named {:?}, a name another {type_name} holds",
                    claim.name
                );
                self.env.log(level, &note);
                let taken = Event::warning("NameTaken", "ClaimName", &note);
                self.events.record(object, taken);
            }
            // A full pass finds it unclaimed and tries again.
            Err(e) => self.env.log(
                level,
                &format!("claiming the name of {type_name} {holder}: {e}"),
            ),
        }
    }
}

/// What a pass learned once for all its visits. A full pass lists the marked namespaces and the
/// name claims (each `None` when not listed, in passes over what changed or after a failed LIST);
/// a pass over what changed hears of the marked namespaces that were deleted.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Full<'a> {
    /// The namespaces carrying lethe's mark.
    pub marked: Option<&'a MarkedNamespaces>,
    /// The name claims.
    pub claims: Option<&'a Claims>,
    /// Marked namespaces whose latest change was their deletion: gone, with no need to read.
    pub gone: Option<&'a BTreeSet<String>>,
}

impl Full<'_> {
    /// Whether the namespace `owner` owns is known to be gone.
    fn heard_gone(&self, owner: Owner<'_>) -> bool {
        self.gone
            .is_some_and(|gone| gone.contains(owner.namespace_name()))
    }
}

impl DeletionInFlight {
    /// The deletion of `key` (`<type>/<guid>`) asked for at `since`, blocked by `blocked_by` if
    /// anything, as its deletion job describes it at `now`.
    pub fn of(
        key: &str,
        since: &str,
        blocked_by: Option<&str>,
        settings: &Settings,
        t: &ResourceType,
        now: i64,
    ) -> DeletionInFlight {
        let (type_name, name) = key.split_once('/').unwrap_or((key, ""));
        let guid = JobGuid {
            resource_type: type_name.to_string(),
            verb: "delete".into(),
            guid: name.to_string(),
        };
        let job = jobs::deleting_job(&guid, since, blocked_by, settings, t, now);
        let age = now.saturating_sub(parse_rfc3339_ms(since).unwrap_or(now));
        DeletionInFlight {
            item: key.to_string(),
            state: job.state,
            age_ms: u64::try_from(age).unwrap_or(0),
            since: since.to_string(),
            blocked_by: blocked_by.map(str::to_string),
            reason: job.errors.into_iter().next().map(|e| e.detail),
        }
    }
}

/// One object, by the row of the module's table its two facts select; `claim` is the claim on
/// its name, if its kind has unique names.
fn reconcile_one(
    kube: &dyn Kube,
    t: &ResourceType,
    owner: Owner<'_>,
    full: Full<'_>,
    claim: Option<&NameClaim<'_>>,
    events: &Recorder<'_>,
    report: &mut Report,
) -> Result<Outcome, StepFailed> {
    let object = owner.object;
    match finalizer::case(object, FINALIZER) {
        // Not deleting, no finalizer: add it, so a deletion waits for the cleanup (SECURITY.md
        // P2a: only objects of lethe's CF kinds, guarded by their resourceVersion).
        Case::Add => {
            kube.patch(
                &Identity::Privileged,
                &object.target,
                &finalizer::add_patch(object, FINALIZER),
            )
            .map_err(StepFailed::AddingFinalizer)?;
            report.created += 1;
            Ok(Outcome::Done)
        }
        // Not deleting, finalizer present: the namespace it owns exists (a crashed create is
        // repaired here).
        Case::Apply => {
            let made = match full.marked {
                Some(marked) if marked.holds(owner) => Ok(false),
                Some(_) => ownership::make_unlisted_namespace(kube, owner),
                None => ownership::ensure_namespace(kube, owner),
            }
            .map_err(StepFailed::at(StepFailed::MakingNamespace))?;
            if made {
                report.created += 1;
                let note = format!("created its namespace {}", owner.namespace_name());
                events.record(
                    object,
                    Event::normal("NamespaceCreated", "MakeNamespace", &note),
                );
            }
            Ok(Outcome::Done)
        }
        // Deleting, finalizer present: clean up, then release.
        Case::Cleanup(index) => {
            let gone = full.heard_gone(owner);
            cleanup(kube, t, owner, index, gone, claim, events, report)
        }
        // Deleting, no finalizer of ours: other finalizers hold it, and they are not ours. A
        // namespace of its own that a full pass still lists standing was made after its cleanup
        // (a create that raced with its deletion, on a read that did not show it yet): it goes,
        // as the cleanup would have made it go.
        Case::Done => {
            if full.marked.is_some_and(|marked| marked.standing(owner))
                && let Some(ns) = ownership::owned_namespace(kube, owner)
                    .map_err(StepFailed::at(StepFailed::ReadingNamespace))?
            {
                delete_namespace(kube, object, &ns, events, report)?;
            }
            Ok(Outcome::Done)
        }
    }
}

/// Sets (or, with `None`, removes) the [`ownership::BLOCKED_BY_ANNOTATION`] of `object`, one of
/// lethe's CF objects, when it differs (SECURITY.md P2a).
fn record_blocked_by(
    kube: &dyn Kube,
    object: &Object,
    blocked_by: Option<&str>,
) -> Result<(), KubeError> {
    if ownership::blocked_by(object) == blocked_by {
        return Ok(());
    }
    let patch =
        json!({"metadata": {"annotations": {ownership::BLOCKED_BY_ANNOTATION: blocked_by}}});
    match kube.patch(&Identity::Privileged, &object.target, &Patch::Merge(patch)) {
        Ok(_) | Err(KubeError::NotFound(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Steps 1–4 of the cleanup of `owner`, being deleted, whose finalizer is at `index`;
/// `namespace_gone` when the pass heard that the namespace it owned was deleted.
#[allow(clippy::too_many_arguments)]
fn cleanup(
    kube: &dyn Kube,
    t: &ResourceType,
    owner: Owner<'_>,
    index: usize,
    namespace_gone: bool,
    claim: Option<&NameClaim<'_>>,
    events: &Recorder<'_>,
    report: &mut Report,
) -> Result<Outcome, StepFailed> {
    let object = owner.object;
    // 1. The namespace it owns, checked first: nothing is listed, deleted or released in a
    //    namespace that is not this object's (SECURITY.md P2). Gone means nothing is left:
    //    lethe never makes the namespace of an object being deleted again.
    let namespace = if namespace_gone {
        None
    } else {
        ownership::owned_namespace(kube, owner)
            .map_err(StepFailed::at(StepFailed::ReadingNamespace))?
    };
    if let Some(ns) = namespace {
        // 2. Children first: they carry finalizers of their own and must be released by this
        //    reconciler before their namespace can go.
        let children_left = delete_children(kube, t, object, &ns.target.name, events, report)
            .map_err(StepFailed::DeletingChildren)?;
        if children_left {
            return Ok(Outcome::Waiting);
        }
        // 3. Then the namespace; a real cluster's namespace controller (or the embedded
        //    cluster) empties it, and we wait until it is gone.
        delete_namespace(kube, object, &ns, events, report)?;
        return Ok(Outcome::Waiting);
    }
    // 4. Everything it owns is gone: release it, removing only our own finalizer. The `test`
    //    makes the patch fail if the list changed meanwhile, so another finalizer is never removed.
    //    When ours is the last, its name is released first: once the object is gone, its job is
    //    COMPLETE, and a create of that name must then succeed (`cf delete-org x; cf create-org
    //    x`). Should the patch fail, the name is free a little early: a create may take it while
    //    this object's deletion finishes.
    if let Some(claim) = claim
        && finalizer::is_last(object, FINALIZER)
    {
        claim.release(kube, &object.target.name);
    }
    let patch = finalizer::remove_patch(index, FINALIZER);
    match kube.patch(&Identity::Privileged, &object.target, &patch) {
        Ok(_) | Err(KubeError::NotFound(_)) => {
            report.updated += 1;
            let note = format!("everything it owned is gone: removed the finalizer {FINALIZER}");
            events.record(object, Event::normal("Released", "Release", &note));
            Ok(Outcome::Done)
        }
        Err(e) => Err(StepFailed::RemovingFinalizer(e)),
    }
}

/// Deletes `ns`, the namespace `object` owns, whose mark was just checked, unless it is going
/// already. The uid precondition keeps the delete on that very namespace.
fn delete_namespace(
    kube: &dyn Kube,
    object: &Object,
    ns: &Object,
    events: &Recorder<'_>,
    report: &mut Report,
) -> Result<(), StepFailed> {
    if ns.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let options = DeleteOptions {
        propagation: Some(Propagation::Background),
        precondition_uid: Some(ns.metadata.uid.clone()),
    };
    match kube.delete(&Identity::Privileged, &ns.target, &options) {
        Ok(_) => {
            report.deleted += 1;
            let note = format!("deleted its namespace {}", ns.target.name);
            events.record(object, Event::normal("NamespaceDeleted", "Delete", &note));
            Ok(())
        }
        Err(KubeError::NotFound(_) | KubeError::Conflict(_)) => Ok(()),
        Err(e) => Err(StepFailed::DeletingNamespace(e)),
    }
}

/// Deletes the children of type `t` in `namespace`, the one `parent` owns; `true` while any is
/// left.
fn delete_children(
    kube: &dyn Kube,
    t: &ResourceType,
    parent: &Object,
    namespace: &str,
    events: &Recorder<'_>,
    report: &mut Report,
) -> Result<bool, KubeError> {
    let mut children_left = false;
    for (api_version, kind) in &t.children {
        let children = match kube.list_all(
            &Identity::Privileged,
            &Collection::new(api_version, kind, Some(namespace)),
            &ListOptions::default(),
        ) {
            Ok(c) => c,
            Err(KubeError::NotFound(_)) => Vec::new(),
            Err(e) => return Err(e),
        };
        for child in children {
            children_left = true;
            if child.metadata.deletion_timestamp.is_none() {
                let options = DeleteOptions {
                    propagation: Some(Propagation::Background),
                    precondition_uid: Some(child.metadata.uid.clone()),
                };
                match kube.delete(&Identity::Privileged, &child.target, &options) {
                    Ok(_) => {
                        report.deleted += 1;
                        let reason = format!("{kind}Deleted");
                        let note = format!("deleted {kind} {} in its namespace", child.target.name);
                        events.record(parent, Event::normal(&reason, "Delete", &note));
                    }
                    Err(KubeError::NotFound(_) | KubeError::Conflict(_)) => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(children_left)
}
