//! The reconciler: one pass makes the CronJobs in the data-jobs namespace match the desired
//! deployments, and records what it applied.
//!
//! # Leader
//!
//! A pass runs only on the host that holds the `coordination.k8s.io/v1` Lease
//! `data-jobs-sync` in the namespace (holder = `lethe_instance_id`). A holder renews it on every
//! tick and, inside a pass, before each item (or orphan) it acts on, once `lease_renew_seconds` have passed
//! since the last renewal; another host takes it over only once `renewTime +
//! leaseDurationSeconds` has passed, and a holder paused past that finds the Lease taken at its
//! next item and stops there. Every write of the Lease is a replace guarded by the
//! resourceVersion read, so two hosts can never both win.
//!
//! # One pass
//!
//! A full pass visits the union of desired rows, actual rows and the CronJobs labelled
//! `app.kubernetes.io/managed-by=lethe` (label-selected, paginated LIST), keyed by the data
//! job's uid (label `lethe.dev/data-job-uid`); a pass between full passes visits only the jobs
//! that changed since the last one, in SQL or in the cluster ([`crate::follow`] says which, and
//! when a full pass runs). Either decides per item:
//!
//! | desired | live CronJob                       | action |
//! |---------|------------------------------------|--------|
//! | yes     | none                               | create it (labels, hash annotation), then write the actual row |
//! | yes     | hash annotation or live spec ≠ desired hash | replace it (guarded by its resourceVersion), then write the actual row |
//! | yes     | matches, actual row missing/stale  | write the actual row (adopts a CronJob created before a crash) |
//! | no      | present, or an actual row          | delete each with a **uid precondition** (404 and 409 mean "that object is gone"), then delete the actual row |
//! | —       | labelled but no job uid label      | orphan: delete it (uid precondition) |
//!
//! Deletions run before creations, so a job deleted and re-created under the same name frees
//! its CronJob name first; the new CronJob carries the new uid and the old deletion's uid
//! precondition can never hit it.
//!
//! Guarantees and caveats:
//! - One failing item never stops the pass. A transient failure (unavailable, conflict) backs the
//!   item off (`data_job_sync_state`: attempts, next_attempt_at, doubling from
//!   `backoff_base_ms` to `backoff_max_ms`); an `invalid` answer (422) parks it until its
//!   desired spec hash changes (the API clears the state when it does).
//! - Kubernetes first, then SQL: a crash between the two leaves a state the next pass converges
//!   from (a labelled CronJob without an actual row is adopted, an actual row without a CronJob is
//!   deleted with 404 counted as done).
//! - The live spec is re-fingerprinted only when the CronJob's generation (it changes with the
//!   spec only) and resourceVersion both differ from the actual row's, so an unchanged CronJob, or
//!   one whose status alone changed, costs no JSON parsing and no write.
//! - Concurrency is bounded: a component is single-threaded, and at most `max_changes_per_pass`
//!   Kubernetes writes are made per pass; the rest are deferred to the next pass, which is full.
//! - Requests per pass: one Lease read and write; then, in a full pass, the LIST pages and one
//!   request per change; in a pass on the changes, one LIST per job whose desired state changed
//!   or whose CronJob changed in spec, and one request per write. An idle pass makes none beyond
//!   the Lease's.

use std::cell::Cell;

use serde::Serialize;
use serde_json::json;

use crate::follow;
use crate::items::{Desired, Item, RECONCILER, World};
use crate::model::{self, CronJobParams};
use crate::{Host, Identity, Kube, KubeError, Level, Object, ObjectRef, Settings, Value, time};
use lethe_guest::backoff::{BackoffTable, Failures};
use lethe_guest::events::{Event, Recorder};
use lethe_guest::kube::{DeleteOptions, KubeVia, Propagation};
use lethe_guest::lease::{Leadership, Lease, LeaseError};
use lethe_guest::reconciler::{ItemFailure, PassReport};

/// The identity every call of the pass is made with: the host's own (SECURITY.md P5–P7).
const PRIVILEGED: &Identity = &Identity::Privileged;

/// The Lease's name.
pub const LEASE_NAME: &str = "data-jobs-sync";

/// The `reportingController` of the sync's Events.
pub const CONTROLLER: &str = "lethe.dev/data-jobs";

/// What a pass did.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Report {
    /// The Lease holder that ran it.
    pub holder: String,
    /// RFC 3339 start time.
    pub started_at: String,
    /// Items visited (jobs with a desired row, actual row or CronJob, plus orphans).
    pub examined: u32,
    /// CronJobs created.
    pub created: u32,
    /// CronJobs replaced.
    pub updated: u32,
    /// CronJobs deleted.
    pub deleted: u32,
    /// Actual rows written without a Kubernetes write (adoptions, resourceVersion refreshes).
    pub recorded: u32,
    /// Actual rows removed (tombstones resolved).
    pub forgotten: u32,
    /// Items skipped because they are backing off (in a pass on the changes, those not visited
    /// too).
    pub backing_off: u32,
    /// Items skipped because they are parked (in a pass on the changes, those not visited too).
    pub parked: u32,
    /// Items left for the next pass because the pass reached `max_changes_per_pass`.
    pub deferred: u32,
    /// Items that failed: `team/job` (or the CronJob's name for an orphan), why, and whether it
    /// is parked until the desired spec changes (a 422) rather than retried with backoff.
    pub failed: Vec<ItemFailure>,
    /// Kubernetes requests made (Lease included).
    pub kube_requests: u32,
    /// Milliseconds spent reading the desired, actual and backoff rows.
    pub load_ms: u64,
    /// Milliseconds spent listing the managed CronJobs.
    pub list_ms: u64,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Whether it was a full pass (every row, every managed CronJob) rather than one on the
    /// changes since the last pass.
    pub full: bool,
}

/// The outcome of a tick.
#[derive(Debug, Clone, PartialEq)]
pub enum Tick {
    /// Another host holds the Lease; nothing was done.
    NotLeader {
        /// Its holder identity.
        holder: String,
    },
    /// This host holds the Lease and ran a pass.
    Ran(Report),
}

/// What the host hears of a tick: the pass's counts, or the Lease holder that ran none.
impl From<Tick> for PassReport {
    fn from(tick: Tick) -> Self {
        match tick {
            Tick::NotLeader { holder } => PassReport::not_leader(holder),
            Tick::Ran(r) => PassReport {
                examined: r.examined,
                created: r.created,
                updated: r.updated,
                deleted: r.deleted,
                failed: r.failed,
                duration_ms: r.duration_ms,
                deletions: Vec::new(),
                leader_elsewhere: None,
            },
        }
    }
}

/// Counts the calls made through it.
struct Counted<'a> {
    inner: &'a dyn Kube,
    calls: Cell<u32>,
}

impl Counted<'_> {
    fn bump(&self) {
        self.calls.set(self.calls.get().saturating_add(1));
    }
}

impl KubeVia for Counted<'_> {
    fn via(&self) -> &dyn Kube {
        self.bump();
        self.inner
    }
}

fn cronjob_ref(namespace: &str, name: &str) -> ObjectRef {
    ObjectRef::new("batch/v1", "CronJob", Some(namespace), name)
}

/// Creates the configured namespace if it is missing; an existing one is used as it is, never
/// written or deleted (SECURITY.md P7).
fn ensure_namespace(kube: &dyn Kube, namespace: &str) -> Result<(), KubeError> {
    let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}});
    match kube.create(PRIVILEGED, &body) {
        Ok(_) | Err(KubeError::Conflict(_)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// What one item needs.
enum Plan {
    /// Nothing to do.
    Nothing,
    /// Backing off until `next_attempt_at`.
    BackingOff,
    /// Parked on this desired hash.
    Parked,
    /// Create the CronJob (after deleting `extra` stale ones).
    Create,
    /// Replace live CronJob `index`.
    Update(usize),
    /// Record live CronJob `index` in the actual row.
    Record(usize),
    /// Delete every CronJob of the item, then the actual row.
    Delete,
    /// Its CronJobs could not be read: it fails this pass and backs off.
    Unread(KubeError),
}

fn expected_name(d: &Desired) -> String {
    model::cronjob_name(&d.team, &d.job_name)
}

/// Where an item stands before anything is done to it: whether its failures hold it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    /// Parked on the desired spec it failed on: only a new desired spec moves it.
    Parked,
    /// A transient failure's backoff has not run out.
    BackingOff,
    /// Free to be worked on.
    Open,
}

/// How the live CronJob of the desired name compares with the desired spec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LiveMatch {
    /// No CronJob has the desired name.
    Missing,
    /// It exists (at this index) but its spec, or the annotation recording it, differs.
    Differs(usize),
    /// It exists (at this index) as desired.
    Matches(usize),
}

/// Decides what `item` needs at `now`, as one match over its four facts:
///
/// | gate        | desired | live CronJob  | actual row                        | plan      |
/// |-------------|---------|---------------|-----------------------------------|-----------|
/// | parked      | any     | any           | any                               | `Parked`  |
/// | backing off | any     | any           | any                               | `BackingOff` |
/// | open        | none    | all going     | none                              | `Nothing` |
/// | open        | none    | any left      | any                               | `Delete`  |
/// | open        | none    | any           | present                           | `Delete`  |
/// | open        | some    | missing       | any                               | `Create`  |
/// | open        | some    | differs       | any                               | `Update`  |
/// | open        | some    | matches, alone| records it, same hash             | `Nothing` |
/// | open        | some    | matches       | stale, missing, or others live    | `Record`  |
///
/// A parked item stays parked only while its desired spec is the one it failed on, so a fix
/// (a new spec) is tried at once; a deleted desired row (no desired spec) is never parked.
fn decide(item: &Item, now: i64) -> Plan {
    let desired = item.desired.as_ref();
    let gate = match &item.state {
        Some(s)
            if s.parked_on.is_some()
                && s.parked_on.as_deref() == desired.map(|d| d.hash.as_str()) =>
        {
            Gate::Parked
        }
        Some(s) if s.next_attempt_ms > now => Gate::BackingOff,
        _ => Gate::Open,
    };
    let live = match desired {
        None => LiveMatch::Missing,
        Some(d) => {
            let name = expected_name(d);
            match item.live.iter().position(|l| l.name == name) {
                None => LiveMatch::Missing,
                Some(index) => {
                    let live = &item.live[index];
                    let as_desired = live.annotation_hash.as_deref() == Some(d.hash.as_str())
                        && live.live_hash.as_deref() == Some(d.hash.as_str());
                    if as_desired {
                        LiveMatch::Matches(index)
                    } else {
                        LiveMatch::Differs(index)
                    }
                }
            }
        }
    };
    let all_going = item.live.iter().all(|l| l.terminating);
    let recorded_alone = |index: usize| {
        let live = &item.live[index];
        item.live.len() == 1
            && match (&item.actual, desired) {
                (Some(a), Some(d)) => {
                    a.hash == d.hash
                        && a.recorded(&live.uid, &live.resource_version, live.generation)
                }
                _ => false,
            }
    };
    match (gate, desired, live) {
        (Gate::Parked, _, _) => Plan::Parked,
        (Gate::BackingOff, _, _) => Plan::BackingOff,
        (Gate::Open, None, _) if all_going && item.actual.is_none() => Plan::Nothing,
        (Gate::Open, None, _) => Plan::Delete,
        (Gate::Open, Some(_), LiveMatch::Missing) => Plan::Create,
        (Gate::Open, Some(_), LiveMatch::Differs(index)) => Plan::Update(index),
        (Gate::Open, Some(_), LiveMatch::Matches(index)) if recorded_alone(index) => Plan::Nothing,
        (Gate::Open, Some(_), LiveMatch::Matches(index)) => Plan::Record(index),
    }
}

/// Runs one tick: takes or renews the Lease, and runs a pass when this host holds it, on the
/// changes since the last pass or a full one when one is due ([`crate::follow`]). The report is
/// logged and stored (the last `reports_kept`). `Err` only when the pass could not start or had
/// to stop (database unreadable, cluster unreachable, Lease lost).
pub fn tick(host: &dyn Host) -> Result<Tick, String> {
    tick_with(host, false)
}

/// [`tick`], with a full pass when `full` is true, whatever the bookmarks say.
pub fn tick_with(host: &dyn Host, full: bool) -> Result<Tick, String> {
    let settings = Settings::load(host);
    let started = host.now_ms();
    let kube = Counted {
        inner: host,
        calls: Cell::new(0),
    };
    let lease_config = settings.lease();
    let acquired = match Lease::acquire(&kube, &lease_config, started) {
        // Its namespace is missing: the sync may run before anyone made it (SECURITY.md P7).
        Err(LeaseError::Creating(KubeError::NotFound(_))) => {
            ensure_namespace(&kube, &settings.namespace)
                .map_err(|e| format!("cannot make the namespace of the lease: {e}"))?;
            Lease::acquire(&kube, &lease_config, started)
        }
        other => other,
    };
    let lease = match acquired.map_err(|e| format!("cannot read or take the lease: {e}"))? {
        Leadership::Held(lease) => lease,
        Leadership::Elsewhere(holder) => return Ok(Tick::NotLeader { holder }),
    };
    let mut report = Report {
        holder: settings.instance_id.clone(),
        started_at: time::rfc3339(started),
        ..Report::default()
    };
    let result = pass(host, &settings, &kube, &lease, full, &mut report);
    report.kube_requests = kube.calls.get();
    report.duration_ms = u64::try_from(host.now_ms() - started).unwrap_or(0);
    result?;
    // A pass that changed nothing is routine: keep it out of the default (info) log.
    let changed = [
        report.created,
        report.updated,
        report.deleted,
        report.recorded,
        report.forgotten,
    ]
    .iter()
    .any(|n| *n > 0);
    let level = match (report.failed.is_empty(), changed) {
        (false, _) => Level::Warn,
        (true, true) => Level::Info,
        (true, false) => Level::Debug,
    };
    host.log(
        level,
        &format!(
            "data-jobs sync {} pass: examined {}, created {}, updated {}, deleted {}, recorded {}, forgotten {}, failed {}, backing off {}, parked {}, deferred {}, {} Kubernetes requests, {} ms",
            if report.full { "full" } else { "change" },
            report.examined,
            report.created,
            report.updated,
            report.deleted,
            report.recorded,
            report.forgotten,
            report.failed.len(),
            report.backing_off,
            report.parked,
            report.deferred,
            report.kube_requests,
            report.duration_ms
        ),
    );
    // Each failure by name, so an object in the way is reported where operators look first
    // (bounded: the stored report has them all).
    const LOGGED_FAILURES: usize = 20;
    for failure in report.failed.iter().take(LOGGED_FAILURES) {
        host.log(
            Level::Warn,
            &format!(
                "data-jobs sync: {}{}: {}",
                failure.item,
                if failure.parked { " (parked)" } else { "" },
                failure.reason
            ),
        );
    }
    if report.failed.len() > LOGGED_FAILURES {
        host.log(
            Level::Warn,
            &format!(
                "data-jobs sync: {} more failures in the stored report",
                report.failed.len() - LOGGED_FAILURES
            ),
        );
    }
    // An idle pass on the changes runs every tick and says nothing worth keeping: the stored
    // reports stay those of passes that examined or failed something, and of full passes.
    if report.full || report.examined > 0 || !report.failed.is_empty() {
        store_report(host, &settings, started, &report);
    }
    Ok(Tick::Ran(report))
}

fn store_report(host: &dyn Host, settings: &Settings, started: i64, report: &Report) {
    let text = serde_json::to_string(report).unwrap_or_default();
    let stored = host.batch(&[
        (
            "INSERT INTO data_job_sync_report (id, started_at, holder, report) VALUES ($1, $2, $3, $4)",
            vec![
                host.new_uuid().into(),
                started.into(),
                settings.instance_id.clone().into(),
                text.into(),
            ],
        ),
        (
            "DELETE FROM data_job_sync_report WHERE id NOT IN \
             (SELECT id FROM data_job_sync_report ORDER BY started_at DESC LIMIT $1)",
            vec![settings.reports_kept.into()],
        ),
    ]);
    if let Err(e) = stored {
        host.log(Level::Warn, &format!("cannot store the pass report: {e}"));
    }
}

struct Pass<'a> {
    host: &'a dyn Host,
    settings: &'a Settings,
    kube: &'a dyn Kube,
    now: i64,
    writes: u32,
    /// Where the Events of what it does to CronJobs go.
    events: &'a Recorder<'a>,
}

/// The CronJob an actual row records.
struct Recorded<'a> {
    name: &'a str,
    uid: &'a str,
    resource_version: &'a str,
    generation: Option<i64>,
}

impl<'a> Recorded<'a> {
    /// What the API server returned for a CronJob just written.
    fn of(obj: &'a Object) -> Self {
        Recorded {
            name: &obj.target.name,
            uid: &obj.metadata.uid,
            resource_version: &obj.metadata.resource_version,
            generation: obj.metadata.generation,
        }
    }
}

enum Step {
    Done,
    Failed(KubeError),
}

fn pass(
    host: &dyn Host,
    settings: &Settings,
    kube: &dyn Kube,
    lease: &Lease<'_>,
    full: bool,
    report: &mut Report,
) -> Result<(), String> {
    let (gathered, following) = follow::gather(host, settings, kube, full, &mut || {
        lease.keep(host.now_ms()).map_err(|lost| lost.to_string())
    })?;
    report.full = gathered.full;
    report.load_ms = gathered.load_ms;
    report.list_ms = gathered.list_ms;
    act(host, settings, kube, lease, &gathered, report)?;
    follow::finish(host, following, report.deferred > 0);
    Ok(())
}

/// Decides on every item gathered and acts on it: orphans first, then deletions, then the rest.
fn act(
    host: &dyn Host,
    settings: &Settings,
    kube: &dyn Kube,
    lease: &Lease<'_>,
    gathered: &follow::Gathered,
    report: &mut Report,
) -> Result<(), String> {
    let World { items, orphans } = &gathered.world;
    let events = Recorder::new(kube, host, CONTROLLER);
    let mut p = Pass {
        host,
        settings,
        kube,
        now: host.now_ms(),
        writes: 0,
        events: &events,
    };
    report.backing_off = gathered.held_back.backing_off;
    report.parked = gathered.held_back.parked;
    report.examined = u32::try_from(items.values().filter(|i| i.exists()).count() + orphans.len())
        .unwrap_or(u32::MAX);

    // Orphans: labelled as ours but naming no job.
    for o in orphans.iter().filter(|o| !o.terminating) {
        if p.writes >= settings.max_changes {
            report.deferred += 1;
            continue;
        }
        // As before each item below: a leader paused past its Lease stops here.
        lease.keep(host.now_ms()).map_err(|lost| lost.to_string())?;
        match p.delete_cronjob(&o.name, &o.uid) {
            Ok(true) => report.deleted += 1,
            Ok(false) => {}
            Err(e) => report.failed.push(ItemFailure {
                item: format!("cronjob {}", o.name),
                reason: e.to_string(),
                parked: false,
            }),
        }
    }

    // Deletions first, so re-created jobs find their CronJob name free. A job whose CronJobs
    // could not be read fails before any decision.
    let mut plans: Vec<(&String, &Item, Plan)> = items
        .iter()
        .filter(|(uid, item)| {
            item.exists() || item.state.is_some() || gathered.unread.contains_key(*uid)
        })
        .map(|(uid, item)| {
            let plan = match gathered.unread.get(uid) {
                Some(e) => Plan::Unread(e.clone()),
                None => decide(item, p.now),
            };
            (uid, item, plan)
        })
        .collect();
    plans.sort_by_key(|(_, _, plan)| match plan {
        Plan::Delete => 0,
        _ => 1,
    });
    let total = u64::try_from(plans.len()).unwrap_or(u64::MAX);
    for (index, (uid, item, plan)) in plans.into_iter().enumerate() {
        if index % 256 == 0 {
            host.progress(u64::try_from(index).unwrap_or(u64::MAX), total);
        }
        let writes = match &plan {
            Plan::Nothing => {
                if !item.exists() {
                    // Stale state of an item that no longer exists.
                    p.clear_state(uid, item);
                }
                continue;
            }
            Plan::BackingOff => {
                report.backing_off += 1;
                continue;
            }
            Plan::Parked => {
                report.parked += 1;
                continue;
            }
            Plan::Record(_) | Plan::Unread(_) => 0,
            Plan::Create | Plan::Update(_) => 1,
            Plan::Delete => u32::try_from(item.live.len().max(1)).unwrap_or(1),
        };
        if writes > 0 && p.writes >= settings.max_changes {
            report.deferred += 1;
            continue;
        }
        // Before each item acted on: a slow leader renews its Lease on time, and one that was
        // paused past it finds it taken and stops before it acts beside the new leader. Between
        // renewals this reads the clock and writes nothing.
        lease.keep(host.now_ms()).map_err(|lost| lost.to_string())?;
        let step = match plan {
            Plan::Create => p.create(uid, item, report),
            Plan::Update(i) => p.update(uid, item, i, report),
            Plan::Record(i) => p.record(uid, item, i, report),
            Plan::Delete => p.delete(uid, item, report),
            Plan::Unread(e) => Step::Failed(e),
            Plan::Nothing | Plan::BackingOff | Plan::Parked => Step::Done,
        };
        match step {
            Step::Done => p.clear_state(uid, item),
            Step::Failed(e) => p.fail(uid, item, e, report),
        }
    }
    host.progress(total, total);
    Ok(())
}

impl Pass<'_> {
    /// Deletes CronJob `name` if its uid is still `uid` (SECURITY.md P5). `Ok(true)` when this call deleted it,
    /// `Ok(false)` when it was already gone or replaced by another object of the same name.
    fn delete_cronjob(&mut self, name: &str, uid: &str) -> Result<bool, KubeError> {
        self.writes += 1;
        let options = DeleteOptions {
            propagation: Some(Propagation::Background),
            precondition_uid: Some(uid.to_string()),
        };
        match self.kube.delete(
            PRIVILEGED,
            &cronjob_ref(&self.settings.namespace, name),
            &options,
        ) {
            Ok(_) => {
                let gone = lethe_guest::kube::object_from_json(json!({
                    "apiVersion": "batch/v1", "kind": "CronJob",
                    "metadata": {"name": name, "namespace": self.settings.namespace, "uid": uid},
                }));
                let note = "deleted: no deployment wants it any more";
                self.events
                    .record(&gone, Event::normal("CronJobDeleted", "Delete", note));
                Ok(true)
            }
            Err(KubeError::NotFound(_) | KubeError::Conflict(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Creates the job's CronJob under the name lethe derives, marked with the job's uid
    /// (SECURITY.md P5); an `AlreadyExists` goes to [`Pass::take_over`], which checks the mark.
    fn create(&mut self, uid: &str, item: &Item, report: &mut Report) -> Step {
        let Some(d) = &item.desired else {
            return Step::Done;
        };
        let name = expected_name(d);
        // Labelled CronJobs of this job under another name (a renamed scheme) go first.
        for l in item.live.iter().filter(|l| l.name != name) {
            match self.delete_cronjob(&l.name, &l.uid) {
                Ok(true) => report.deleted += 1,
                Ok(false) => {}
                Err(e) => return Step::Failed(e),
            }
        }
        if item.actual.is_none() {
            // Claim the deployment before creating its CronJob: an actual row is written only
            // while the desired row still exists, in one statement. A job deleted since this
            // pass loaded it is not created again, and one deleted from here on finds the row
            // and stays PROCESSING until the next pass removes what this one made.
            let claimed = self.host.execute(
                "INSERT INTO actual_data_job_deployment \
                 (job_uid, team, job_name, job_version, image, schedule, enabled, resources, spec_hash, cronjob_name, cronjob_uid, resource_version, applied_at) \
                 SELECT job_uid, team, job_name, job_version, image, schedule, enabled, resources, '', $2, '', '', $3 \
                 FROM desired_data_job_deployment WHERE job_uid = $1 \
                 ON CONFLICT (job_uid) DO NOTHING",
                &[uid.into(), name.clone().into(), self.now.into()],
            );
            match claimed {
                Ok(0) => return Step::Done,
                Ok(_) => {}
                Err(e) => {
                    return Step::Failed(KubeError::Unavailable(format!(
                        "the deployment could not be claimed before its CronJob is created: {e}"
                    )));
                }
            }
        }
        let body = model::render_cronjob(&CronJobParams {
            namespace: &self.settings.namespace,
            team: &d.team,
            job_name: &d.job_name,
            job_uid: uid,
            spec: &d.spec,
            hash: &d.hash,
            resource_version: None,
        });
        self.writes += 1;
        let created = match self.kube.create(PRIVILEGED, &body) {
            Err(KubeError::NotFound(_)) => {
                if let Err(e) = ensure_namespace(self.kube, &self.settings.namespace) {
                    return Step::Failed(e);
                }
                self.kube.create(PRIVILEGED, &body)
            }
            other => other,
        };
        match created {
            Ok(obj) => {
                report.created += 1;
                let note = format!(
                    "created for version {} of {}/{}",
                    d.job_version, d.team, d.job_name
                );
                self.events
                    .record(&obj, Event::normal("CronJobCreated", "Create", &note));
                self.write_actual(uid, d, Recorded::of(&obj), None, report)
            }
            Err(KubeError::Conflict(_)) => self.take_over(uid, d, &name, report),
            Err(e) => Step::Failed(e),
        }
    }

    /// The CronJob's name is taken by an object the managed LIST did not show: one of ours whose
    /// `managed-by` label was edited away, or one that appeared after the LIST. Only an object
    /// marked with **this** job's uid is this job's and is brought back to the desired spec
    /// (labels included); anything else, even if it carries lethe's other labels (another job's
    /// uid, a copied `managed-by`), is left alone and reported (SECURITY.md P5).
    fn take_over(&mut self, uid: &str, d: &Desired, name: &str, report: &mut Report) -> Step {
        let existing = match self
            .kube
            .get(PRIVILEGED, &cronjob_ref(&self.settings.namespace, name))
        {
            Ok(obj) => obj,
            Err(e) => return Step::Failed(e),
        };
        if existing.label(model::JOB_UID_LABEL) != Some(uid) {
            return Step::Failed(KubeError::Conflict(format!(
                "CronJob {}/{name} exists and is not lethe's for this job (it lacks {}={uid}); \
                 lethe left it untouched: rename the job or remove that CronJob",
                self.settings.namespace,
                model::JOB_UID_LABEL
            )));
        }
        let why = "took it back: it carries this job's uid, but the managed LIST did not show \
                   it (its managed-by label was edited away)";
        self.replace(
            uid,
            d,
            name,
            &existing.metadata.resource_version,
            &existing.metadata.finalizers,
            why,
            report,
        )
    }

    fn update(&mut self, uid: &str, item: &Item, index: usize, report: &mut Report) -> Step {
        let (Some(d), Some(live)) = (&item.desired, item.live.get(index)) else {
            return Step::Done;
        };
        // The desired spec is the one applied last: the live one was edited by hand.
        let drifted = item.actual.as_ref().is_some_and(|a| a.hash == d.hash);
        let why = if drifted {
            "reverted a hand edit of its spec".to_string()
        } else {
            format!(
                "applied version {} of {}/{}",
                d.job_version, d.team, d.job_name
            )
        };
        self.replace(
            uid,
            d,
            &live.name,
            &live.resource_version,
            &live.finalizers,
            &why,
            report,
        )
    }

    /// Replaces CronJob `name`, as it was at `resource_version`, with the desired one, then
    /// records it, and says `why` in an Event. A replace takes the whole object, so the live
    /// `finalizers` go into it: they are others' (a backup tool waiting to copy the object, a
    /// policy), and dropping them would release what they hold.
    #[allow(clippy::too_many_arguments)]
    fn replace(
        &mut self,
        uid: &str,
        d: &Desired,
        name: &str,
        resource_version: &str,
        finalizers: &[String],
        why: &str,
        report: &mut Report,
    ) -> Step {
        let mut body = model::render_cronjob(&CronJobParams {
            namespace: &self.settings.namespace,
            team: &d.team,
            job_name: &d.job_name,
            job_uid: uid,
            spec: &d.spec,
            hash: &d.hash,
            resource_version: Some(resource_version),
        });
        if !finalizers.is_empty() {
            body["metadata"]["finalizers"] = json!(finalizers);
        }
        self.writes += 1;
        match self.kube.replace(
            PRIVILEGED,
            &cronjob_ref(&self.settings.namespace, name),
            &body,
        ) {
            Ok(obj) => {
                report.updated += 1;
                self.events
                    .record(&obj, Event::normal("CronJobReplaced", "Replace", why));
                self.write_actual(uid, d, Recorded::of(&obj), None, report)
            }
            Err(e) => Step::Failed(e),
        }
    }

    fn record(&mut self, uid: &str, item: &Item, index: usize, report: &mut Report) -> Step {
        let (Some(d), Some(live)) = (&item.desired, item.live.get(index)) else {
            return Step::Done;
        };
        for l in item.live.iter().filter(|l| l.name != live.name) {
            match self.delete_cronjob(&l.name, &l.uid) {
                Ok(true) => report.deleted += 1,
                Ok(false) => {}
                Err(e) => return Step::Failed(e),
            }
        }
        report.recorded += 1;
        let applied_at = item
            .actual
            .as_ref()
            .filter(|a| a.hash == d.hash && a.cronjob_uid == live.uid)
            .map(|a| a.applied_at);
        self.write_actual(
            uid,
            d,
            Recorded {
                name: &live.name,
                uid: &live.uid,
                resource_version: &live.resource_version,
                generation: live.generation,
            },
            applied_at,
            report,
        )
    }

    fn write_actual(
        &mut self,
        uid: &str,
        d: &Desired,
        cronjob: Recorded<'_>,
        applied_at: Option<i64>,
        report: &mut Report,
    ) -> Step {
        let written = self.host.execute(
            "INSERT INTO actual_data_job_deployment \
             (job_uid, team, job_name, job_version, image, schedule, enabled, resources, spec_hash, cronjob_name, cronjob_uid, resource_version, applied_at, generation) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) \
             ON CONFLICT (job_uid) DO UPDATE SET team = excluded.team, job_name = excluded.job_name, \
             job_version = excluded.job_version, image = excluded.image, schedule = excluded.schedule, \
             enabled = excluded.enabled, resources = excluded.resources, spec_hash = excluded.spec_hash, \
             cronjob_name = excluded.cronjob_name, cronjob_uid = excluded.cronjob_uid, \
             resource_version = excluded.resource_version, applied_at = excluded.applied_at, \
             generation = excluded.generation",
            &[
                uid.into(),
                d.team.clone().into(),
                d.job_name.clone().into(),
                d.job_version.clone().into(),
                d.spec.image.clone().into(),
                d.spec.schedule.clone().into(),
                d.spec.enabled.into(),
                d.spec.resources.to_vdk().to_string().into(),
                d.hash.clone().into(),
                cronjob.name.into(),
                cronjob.uid.into(),
                cronjob.resource_version.into(),
                applied_at.unwrap_or(self.now).into(),
                cronjob.generation.map_or(Value::Null, Value::Int),
            ],
        );
        match written {
            Ok(_) => Step::Done,
            Err(e) => {
                // The CronJob is right; the next pass adopts it and writes the row.
                report.failed.push(ItemFailure {
                    item: format!("{}/{}", d.team, d.job_name),
                    reason: format!("recording the actual deployment failed: {e}"),
                    parked: false,
                });
                Step::Done
            }
        }
    }

    fn delete(&mut self, uid: &str, item: &Item, report: &mut Report) -> Step {
        for l in item.live.iter().filter(|l| !l.terminating) {
            match self.delete_cronjob(&l.name, &l.uid) {
                Ok(true) => report.deleted += 1,
                Ok(false) => {}
                Err(e) => return Step::Failed(e),
            }
        }
        if let Some(a) = &item.actual
            && !a.cronjob_uid.is_empty()
            && !item.live.iter().any(|l| l.uid == a.cronjob_uid)
        {
            // Not in the LIST: already gone (a crash after the delete) or the LIST was stale.
            match self.delete_cronjob(&a.cronjob_name, &a.cronjob_uid) {
                Ok(true) => report.deleted += 1,
                Ok(false) => {}
                Err(e) => return Step::Failed(e),
            }
        }
        if item.actual.is_some() {
            let done = self.host.batch(&[
                (
                    "DELETE FROM actual_data_job_deployment WHERE job_uid = $1",
                    vec![uid.into()],
                ),
                (
                    "UPDATE data_job_deletion SET completed_at = $2 WHERE job_uid = $1 AND completed_at IS NULL",
                    vec![uid.into(), self.now.into()],
                ),
            ]);
            match done {
                Ok(_) => report.forgotten += 1,
                Err(e) => {
                    return Step::Failed(KubeError::Unavailable(format!(
                        "the CronJob is gone but the actual row could not be deleted: {e}"
                    )));
                }
            }
        } else {
            let _ = self.host.execute(
                "UPDATE data_job_deletion SET completed_at = $2 WHERE job_uid = $1 AND completed_at IS NULL",
                &[uid.into(), self.now.into()],
            );
        }
        Step::Done
    }

    fn clear_state(&self, uid: &str, item: &Item) {
        if item.state.is_some()
            && let Err(e) = BackoffTable::new(self.host, RECONCILER).forget(uid)
        {
            self.host.log(
                Level::Warn,
                &format!("cannot clear the sync state of {uid}: {e}"),
            );
        }
    }

    fn fail(&self, uid: &str, item: &Item, e: KubeError, report: &mut Report) {
        let parked_on = match (&e, &item.desired) {
            (KubeError::Invalid(_), Some(d)) => Some(d.hash.clone()),
            _ => None,
        };
        let jitter = self.host.random_bytes(1).first().copied().unwrap_or(0);
        let failures = Failures::after(
            item.state.as_ref(),
            self.now,
            (self.settings.backoff_base_ms, self.settings.backoff_max_ms),
            jitter,
            parked_on,
            e.to_string(),
        );
        report.failed.push(ItemFailure {
            item: item.label(uid),
            reason: failures.last_error.clone(),
            parked: failures.parked_on.is_some(),
        });
        let saved = BackoffTable::new(self.host, RECONCILER).record(uid, &failures);
        if let Err(e) = saved {
            self.host.log(
                Level::Warn,
                &format!("cannot record the backoff of {uid}: {e}"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::items::{Actual, Live};
    use crate::model::{Resources, Spec};

    fn desired(hash: &str) -> Desired {
        Desired {
            team: "t".into(),
            job_name: "job".into(),
            job_version: "v1".into(),
            spec: Spec {
                image: "busybox".into(),
                schedule: "* * * * *".into(),
                enabled: true,
                resources: Resources::default(),
            },
            hash: hash.into(),
        }
    }

    fn live(name: &str, uid: &str, rv: &str, hash: &str) -> Live {
        Live {
            name: name.into(),
            uid: uid.into(),
            resource_version: rv.into(),
            generation: Some(1),
            annotation_hash: Some(hash.into()),
            live_hash: Some(hash.into()),
            terminating: false,
            finalizers: Vec::new(),
        }
    }

    fn actual(uid: &str, rv: &str, hash: &str) -> Actual {
        Actual {
            team: "t".into(),
            job_name: "job".into(),
            cronjob_name: model::cronjob_name("t", "job"),
            cronjob_uid: uid.into(),
            resource_version: rv.into(),
            generation: Some(1),
            hash: hash.into(),
            applied_at: 0,
        }
    }

    fn name() -> String {
        model::cronjob_name("t", "job")
    }

    #[test]
    fn desired_without_cronjob_is_created() {
        let item = Item {
            desired: Some(desired("h")),
            ..Item::default()
        };
        assert!(matches!(decide(&item, 0), Plan::Create));
    }

    #[test]
    fn an_actual_row_of_an_older_hash_is_rewritten_even_at_the_same_version() {
        // The CronJob matches the desired spec, and the actual row names the same object and
        // version but records an older hash: what the API reads back as applied must be mended.
        let item = Item {
            desired: Some(desired("h")),
            actual: Some(actual("c1", "5", "old")),
            live: vec![live(&name(), "c1", "5", "h")],
            ..Item::default()
        };
        assert!(matches!(decide(&item, 0), Plan::Record(0)));
    }

    #[test]
    fn the_host_hears_the_counts_of_a_pass_or_who_holds_the_lease() {
        let ran = PassReport::from(Tick::Ran(Report {
            examined: 4,
            created: 1,
            updated: 2,
            deleted: 3,
            duration_ms: 9,
            failed: vec![ItemFailure {
                item: "t/job".into(),
                reason: "boom".into(),
                parked: false,
            }],
            ..Report::default()
        }));
        assert_eq!(
            (
                ran.examined,
                ran.created,
                ran.updated,
                ran.deleted,
                ran.duration_ms
            ),
            (4, 1, 2, 3, 9)
        );
        assert_eq!(ran.failed.len(), 1);
        assert_eq!(ran.leader_elsewhere, None);
        let elsewhere = PassReport::from(Tick::NotLeader {
            holder: "host-2".into(),
        });
        assert_eq!(elsewhere.leader_elsewhere.as_deref(), Some("host-2"));
    }

    #[test]
    fn labelled_cronjob_without_actual_row_is_adopted_not_recreated() {
        let item = Item {
            desired: Some(desired("h")),
            live: vec![live(&name(), "c1", "5", "h")],
            ..Item::default()
        };
        assert!(matches!(decide(&item, 0), Plan::Record(0)));
    }

    #[test]
    fn hash_or_live_spec_drift_is_updated() {
        let mut edited = live(&name(), "c1", "6", "h");
        edited.live_hash = Some("other".into());
        let item = Item {
            desired: Some(desired("h")),
            actual: Some(actual("c1", "5", "h")),
            live: vec![edited],
            ..Item::default()
        };
        assert!(matches!(decide(&item, 0), Plan::Update(0)));
        let item = Item {
            desired: Some(desired("h2")),
            actual: Some(actual("c1", "5", "h")),
            live: vec![live(&name(), "c1", "5", "h")],
            ..Item::default()
        };
        assert!(matches!(decide(&item, 0), Plan::Update(0)));
    }

    #[test]
    fn status_only_changes_keep_the_item_converged() {
        // A controller's status write changes the resourceVersion, not the generation.
        let item = Item {
            desired: Some(desired("h")),
            actual: Some(actual("c1", "5", "h")),
            live: vec![live(&name(), "c1", "9", "h")],
            ..Item::default()
        };
        assert!(matches!(decide(&item, 0), Plan::Nothing));
    }

    #[test]
    fn converged_item_needs_nothing() {
        let item = Item {
            desired: Some(desired("h")),
            actual: Some(actual("c1", "5", "h")),
            live: vec![live(&name(), "c1", "5", "h")],
            ..Item::default()
        };
        assert!(matches!(decide(&item, 0), Plan::Nothing));
    }

    #[test]
    fn no_desired_with_actual_or_cronjob_is_deleted() {
        let tombstone = Item {
            actual: Some(actual("c1", "5", "h")),
            ..Item::default()
        };
        assert!(matches!(decide(&tombstone, 0), Plan::Delete));
        let orphan = Item {
            live: vec![live("x", "c9", "1", "h")],
            ..Item::default()
        };
        assert!(matches!(decide(&orphan, 0), Plan::Delete));
        assert!(matches!(decide(&Item::default(), 0), Plan::Nothing));
    }

    #[test]
    fn backoff_and_parking_skip_the_item() {
        let backing_off = Item {
            desired: Some(desired("h")),
            state: Some(Failures {
                attempts: 1,
                next_attempt_ms: 100,
                parked_on: None,
                last_error: "boom".into(),
            }),
            ..Item::default()
        };
        assert!(matches!(decide(&backing_off, 50), Plan::BackingOff));
        assert!(
            matches!(decide(&backing_off, 100), Plan::Create),
            "due at its time, as the backoff table's `due` reads it"
        );
        assert!(matches!(decide(&backing_off, 150), Plan::Create));
        let parked = Item {
            desired: Some(desired("h")),
            state: Some(Failures {
                attempts: 1,
                next_attempt_ms: 0,
                parked_on: Some("h".into()),
                last_error: "422".into(),
            }),
            ..Item::default()
        };
        assert!(matches!(decide(&parked, 1_000_000), Plan::Parked));
        let respec = Item {
            desired: Some(desired("h2")),
            ..parked
        };
        assert!(matches!(decide(&respec, 1_000_000), Plan::Create));
    }

    #[test]
    fn a_pass_interrupted_before_it_kept_its_bookmarks_acts_on_the_same_changes_again() {
        use lethe_guest::fake::FakeHost;
        let (sql, kube) = crate::tests::flows::world();
        let host = FakeHost::new(&sql, &kube, "a");
        assert!(matches!(
            tick(&host),
            Ok(Tick::Ran(Report { full: true, .. }))
        ));
        crate::tests::flows::deploy(&host, "ingest");
        // An instance that gathered and acted, then was stopped before `follow::finish`.
        let settings = Settings::load(&host);
        let lease_config = settings.lease();
        let lease = match Lease::acquire(&host, &lease_config, crate::Env::now_ms(&host)) {
            Ok(Leadership::Held(lease)) => lease,
            other => panic!("the lease: {other:?}"),
        };
        let (gathered, _unfinished) =
            follow::gather(&host, &settings, &host, false, &mut || Ok(())).expect("gather");
        assert!(!gathered.full);
        let mut report = Report::default();
        act(&host, &settings, &host, &lease, &gathered, &mut report).expect("act");
        assert_eq!(report.created, 1);
        // The next pass hears of the same change again, finds it done, and duplicates nothing.
        let Ok(Tick::Ran(next)) = tick(&host) else {
            panic!("no pass");
        };
        assert!(!next.full);
        assert_eq!((next.examined, next.created, next.recorded), (1, 0, 0));
        assert_eq!(kube.all("CronJob").len(), 1);
        let Ok(Tick::Ran(after)) = tick(&host) else {
            panic!("no pass");
        };
        assert_eq!(after.examined, 0, "the bookmarks moved on this time");
    }

    #[test]
    fn a_job_deleted_after_the_pass_loaded_it_is_not_created() {
        use lethe_guest::fake::FakeHost;
        let (sql, kube) = crate::tests::flows::world();
        let host = FakeHost::new(&sql, &kube, "a");
        let settings = Settings::load(&host);
        // The pass loaded a desired row that a DELETE has removed since.
        let item = Item {
            desired: Some(desired("h")),
            ..Item::default()
        };
        let events = Recorder::new(&kube, &host, CONTROLLER);
        let mut pass = Pass {
            host: &host,
            settings: &settings,
            kube: &kube,
            now: 0,
            writes: 0,
            events: &events,
        };
        let mut report = Report::default();
        assert!(matches!(
            pass.create("0b8e6a54-5a4f-4c1e-9d3f-1b2c3d4e5f60", &item, &mut report),
            Step::Done
        ));
        assert_eq!(report.created, 0);
        assert!(
            kube.all("CronJob").is_empty(),
            "no CronJob for a deleted job"
        );
    }
}
