//! One pass: make the `__KIND__`s this reconciler made match the desired rows.
//!
//! The pass runs only on the host that holds the Lease `__NAME__` (in `lease_namespace`, default
//! `lethe-system`). It visits what changed since the last pass (the desired-state feed, the watch
//! of the objects it made, and objects whose backoff is over), or everything in a full pass (at
//! start, every `full_resync_seconds`, and when the changes cannot be told). Each object:
//!
//! | desired row | live `__KIND__` | what the pass does |
//! |-------------|-----------------|--------------------|
//! | wanted | none | create it, with lethe's marks and the finalizer (Event `Created`) |
//! | wanted | ours, this row's uid, content drifted | patch the content back, guarded by the resourceVersion read (Event `Updated`) |
//! | wanted | ours, without the finalizer | add it (guarded alike) |
//! | wanted | ours, being deleted by someone else | remove the finalizer; the next pass makes it again |
//! | deleting, none, or another uid | ours | delete it with a uid precondition (Event `Deleting`), then remove the finalizer |
//! | deleting | none | the job is COMPLETE; the row is forgotten `job_retention_seconds` later |
//! | any | not ours | reported (parked until the row changes) and never touched |
//!
//! A failure backs the object off (doubling from `backoff_base_ms`); one the API server rejects
//! as invalid parks it until its row changes. One failing object never stops the pass.
//! Kubernetes first, then SQL: a crash between the two leaves state the next pass repairs (an
//! object created before the crash carries this row's uid and is found by it).

use std::collections::BTreeSet;

use lethe_guest::Capabilities;
use lethe_guest::backoff::{BackoffTable, Failures};
use lethe_guest::env::{Env, Level};
use lethe_guest::events::{Event, Recorder};
use lethe_guest::feed::Feed;
use lethe_guest::finalizer::{self, Case};
use lethe_guest::follow::{Outcome, Pass, Watched};
use lethe_guest::kept::Kept;
use lethe_guest::kube::{
    Collection, DeleteOptions, Deletion, Identity, KubeError, ListOptions, Object, Patch,
    Propagation,
};
use lethe_guest::lease::{Leadership, Lease, LeaseConfig};
use lethe_guest::reconciler::{DeletionInFlight, ItemFailure, PassReport};
use serde_json::{Value as Json, json};

use crate::{
    API_VERSION, Desired, FEED, FEED_COUNTER, FINALIZER, KEPT, KIND, RECONCILER, UID_LABEL,
    desired_rows, is_ours, key, selector, target,
};

/// Every call of the pass is made with lethe's own identity.
const PRIVILEGED: &Identity = &Identity::Privileged;
/// Seconds between full passes, when the configuration says nothing.
pub const DEFAULT_RESYNC_S: i64 = 600;
/// Seconds a COMPLETE job stays readable, when the configuration says nothing.
pub const DEFAULT_JOB_RETENTION_S: i64 = 86_400;
/// The `reportingController` of the pass's Events.
pub const CONTROLLER: &str = "lethe.dev/__NAME__";

/// The namespace of the Lease: `lease_namespace`, default `lethe-system`.
pub fn lease_namespace(env: &dyn Env) -> String {
    env.config("lease_namespace")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "lethe-system".into())
}

/// The objects this reconciler made, as followed and listed.
fn ours() -> Collection {
    Collection {
        label_selector: Some(selector()),
        ..Collection::new(API_VERSION, KIND, None)
    }
}

/// Runs one pass if this host holds the Lease (`full` asks for a full one). `Err` names the step
/// that kept the pass from running at all.
pub fn tick(host: &dyn Capabilities, full: bool) -> Result<PassReport, String> {
    let started = host.now_ms();
    let config = LeaseConfig::from_env(host, &lease_namespace(host), RECONCILER)?;
    let lease = match Lease::acquire(host, &config, started) {
        Ok(Leadership::Held(lease)) => lease,
        Ok(Leadership::Elsewhere(holder)) => return Ok(PassReport::not_leader(holder)),
        Err(e) => return Err(e.to_string()),
    };
    let settings = Settings::load(host)?;
    let instance = host
        .config("lethe_instance_id")
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "lethe".into());
    let mut pass = Pass::begin(
        host,
        Kept::new(host, &KEPT, &instance),
        RECONCILER,
        settings.resync_ms,
        full,
    );
    let feed = Feed::new(host, &FEED, FEED_COUNTER);
    let watched = Watched::new(host, ours());
    let backoff = BackoffTable::new(host, RECONCILER);

    // What to visit: the changes, unless this pass is (or turns) full.
    let mut keys: Option<BTreeSet<String>> = None;
    if !pass.is_full() {
        let heard = pass.changes(&feed).and_then(|desired| {
            let changed = pass.changes(&watched)?;
            Ok(desired
                .into_iter()
                .chain(changed.iter().map(|c| {
                    key(
                        c.object.target.namespace.as_deref().unwrap_or_default(),
                        &c.object.target.name,
                    )
                }))
                .collect::<BTreeSet<_>>())
        });
        match heard {
            Ok(changed) => keys = Some(changed),
            Err(why) => pass.go_full(why),
        }
    }
    let mut visit = Visit {
        host,
        backoff: &backoff,
        events: Recorder::new(host, host, CONTROLLER),
        settings: &settings,
        report: PassReport::default(),
    };
    let read = match keys {
        Some(mut changed) => {
            match backoff.due(started) {
                Ok(due) => changed.extend(due),
                Err(e) => host.log(Level::Warn, &format!("reading the backoff table: {e}")),
            }
            visit.read_changed(&changed)
        }
        None => {
            // Bookmarks first: a change made while the pass reads is heard by the next one.
            let marked = pass
                .mark(&feed)
                .map_err(|e| e.to_string())
                .and_then(|()| pass.mark(&watched).map_err(|e| e.to_string()));
            if let Err(e) = marked {
                host.log(
                    Level::Warn,
                    &format!("{RECONCILER}: the next pass is full too: {e}"),
                );
            }
            visit.read_all()
        }
    };
    let items = match read {
        Ok(items) => items,
        Err(e) => {
            pass.finish(Outcome::Deferred);
            return Err(e);
        }
    };
    let held_back: BTreeSet<String> = backoff
        .held_back(started)
        .map(|held| {
            held.into_iter()
                .filter(|(k, f)| {
                    // A parked object is tried again once its row changed.
                    let row = items
                        .iter()
                        .find(|i| i.key == *k)
                        .and_then(|i| i.desired.as_ref());
                    f.parked_on.is_none() || row.map(Desired::fingerprint) == f.parked_on
                })
                .map(|(k, _)| k)
                .collect()
        })
        .unwrap_or_default();
    let mut outcome = Outcome::Done;
    for item in items {
        if held_back.contains(&item.key) {
            continue;
        }
        if let Err(lost) = lease.keep(host.now_ms()) {
            host.log(
                Level::Warn,
                &format!("{RECONCILER}: {lost}; the pass stops"),
            );
            outcome = Outcome::Deferred;
            break;
        }
        visit.report.examined += 1;
        visit.item(item);
    }
    pass.finish(outcome);
    let mut report = visit.report;
    report.duration_ms = u64::try_from(host.now_ms() - started).unwrap_or(0);
    Ok(report)
}

/// The pass's settings.
struct Settings {
    resync_ms: i64,
    retention_ms: i64,
    deletion_timeout_ms: i64,
    backoff: (i64, i64),
}

impl Settings {
    fn load(env: &dyn Env) -> Result<Settings, String> {
        let number = |key: &str, default: i64| {
            env.config(key)
                .and_then(|v| v.parse::<i64>().ok())
                .filter(|n| *n > 0)
                .unwrap_or(default)
        };
        Ok(Settings {
            resync_ms: crate::seconds_ms(env, "full_resync_seconds", DEFAULT_RESYNC_S)?,
            retention_ms: crate::seconds_ms(env, "job_retention_seconds", DEFAULT_JOB_RETENTION_S)?,
            deletion_timeout_ms: crate::seconds_ms(
                env,
                "deletion_timeout_seconds",
                crate::api::DEFAULT_DELETION_TIMEOUT_S,
            )?,
            backoff: (
                number("backoff_base_ms", 1_000),
                number("backoff_max_ms", 300_000),
            ),
        })
    }
}

/// One object to decide on: its row and its live object, either possibly missing.
struct Item {
    key: String,
    desired: Option<Desired>,
    live: Option<Object>,
}

/// Why one object could not be brought in line.
struct Failed {
    error: KubeError,
    /// Parked until its row changes (retrying cannot help), rather than backed off.
    parked: bool,
}

impl From<KubeError> for Failed {
    fn from(error: KubeError) -> Self {
        let parked = matches!(error, KubeError::Invalid(_));
        Failed { error, parked }
    }
}

struct Visit<'a> {
    host: &'a dyn Capabilities,
    backoff: &'a BackoffTable<'a>,
    events: Recorder<'a>,
    settings: &'a Settings,
    report: PassReport,
}

impl Visit<'_> {
    /// Every row and every object this reconciler made.
    fn read_all(&self) -> Result<Vec<Item>, String> {
        let rows = desired_rows(self.host, None).map_err(|e| format!("reading the rows: {e}"))?;
        let live = self
            .host
            .list_all(
                PRIVILEGED,
                &ours(),
                &ListOptions {
                    limit: Some(500),
                    ..ListOptions::default()
                },
            )
            .map_err(|e| format!("listing the {KIND}s: {e}"))?;
        let mut items: Vec<Item> = rows
            .into_iter()
            .map(|d| Item {
                key: d.key(),
                desired: Some(d),
                live: None,
            })
            .collect();
        for object in live {
            let k = key(
                object.target.namespace.as_deref().unwrap_or_default(),
                &object.target.name,
            );
            match items.iter_mut().find(|i| i.key == k) {
                Some(item) => item.live = Some(object),
                None => items.push(Item {
                    key: k,
                    desired: None,
                    live: Some(object),
                }),
            }
        }
        Ok(items)
    }

    /// The rows and objects at `keys`; an object that cannot be read fails alone.
    fn read_changed(&mut self, keys: &BTreeSet<String>) -> Result<Vec<Item>, String> {
        let wanted: Vec<String> = keys.iter().cloned().collect();
        let rows =
            desired_rows(self.host, Some(&wanted)).map_err(|e| format!("reading the rows: {e}"))?;
        let mut items = Vec::new();
        for k in keys {
            let Some((namespace, name)) = k.split_once('/') else {
                continue;
            };
            let desired = rows.iter().find(|d| d.key() == *k).cloned();
            match self.host.get(PRIVILEGED, &target(namespace, name)) {
                Ok(live) => items.push(Item {
                    key: k.clone(),
                    desired,
                    live: Some(live),
                }),
                Err(KubeError::NotFound(_)) => items.push(Item {
                    key: k.clone(),
                    desired,
                    live: None,
                }),
                Err(e) => self.fail(k, desired.as_ref(), e.into()),
            }
        }
        Ok(items)
    }

    /// Decides on one object and acts; records how it went.
    fn item(&mut self, item: Item) {
        let key = item.key.clone();
        let desired = item.desired.clone();
        match self.decide(item) {
            Ok(()) => {
                if let Err(e) = self.backoff.forget(&key) {
                    self.host
                        .log(Level::Warn, &format!("{key}: forgetting its failures: {e}"));
                }
            }
            Err(failed) => self.fail(&key, desired.as_ref(), failed),
        }
    }

    fn decide(&mut self, item: Item) -> Result<(), Failed> {
        let Item { key, desired, live } = item;
        let Some(live) = live else {
            return match desired {
                Some(d) if d.deleting_since.is_none() => self.create(&d),
                Some(d) => self.forget_if_done(&d),
                None => Ok(()),
            };
        };
        if !is_ours(&live) {
            return match desired {
                Some(_) => Err(Failed {
                    error: KubeError::Conflict(format!(
                        "{KIND} {key} exists and is not __NAME__'s (it lacks lethe's labels): left untouched"
                    )),
                    parked: true,
                }),
                None => Ok(()),
            };
        }
        let made_for_this_row = desired.as_ref().is_some_and(|d| {
            d.deleting_since.is_none() && live.label(UID_LABEL) == Some(d.uid.as_str())
        });
        if !made_for_this_row {
            return self.remove(&key, &live, desired.as_ref());
        }
        let Some(d) = desired else {
            return Ok(());
        };
        match finalizer::case(&live, FINALIZER) {
            Case::Add => {
                self.host.patch(
                    PRIVILEGED,
                    &live.target,
                    &finalizer::add_patch(&live, FINALIZER),
                )?;
                self.report.updated += 1;
                Ok(())
            }
            Case::Apply if !d.held_by(&live) => {
                let mut patch = vec![json!({
                    "op": "test", "path": "/metadata/resourceVersion",
                    "value": live.metadata.resource_version,
                })];
                for (field, value) in &d.content {
                    patch.push(json!({ "op": "add", "path": format!("/{}", pointer_escape(field)), "value": value }));
                }
                let updated =
                    self.host
                        .patch(PRIVILEGED, &live.target, &Patch::Json(Json::Array(patch)))?;
                self.report.updated += 1;
                self.events.record(
                    &updated,
                    Event::normal("Updated", "Update", "content put back as desired"),
                );
                Ok(())
            }
            Case::Apply | Case::Done => Ok(()),
            // Deleted by someone else: let it go; the next pass makes it again.
            Case::Cleanup(index) => {
                self.host.patch(
                    PRIVILEGED,
                    &live.target,
                    &finalizer::remove_patch(index, FINALIZER),
                )?;
                self.report.updated += 1;
                Ok(())
            }
        }
    }

    fn create(&mut self, d: &Desired) -> Result<(), Failed> {
        match self.host.create(PRIVILEGED, &d.object()) {
            Ok(created) => {
                self.report.created += 1;
                self.events.record(
                    &created,
                    Event::normal("Created", "Create", "made as desired"),
                );
                Ok(())
            }
            // Made meanwhile (or by a create whose answer was lost): the next visit reads it.
            Err(KubeError::Conflict(m)) => Err(Failed {
                error: KubeError::Conflict(m),
                parked: false,
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Deletes an object of ours that no wanted row stands for, and lets it go.
    fn remove(
        &mut self,
        key: &str,
        live: &Object,
        desired: Option<&Desired>,
    ) -> Result<(), Failed> {
        let mut live = live.clone();
        if live.metadata.deletion_timestamp.is_none() {
            let how = DeleteOptions {
                propagation: Some(Propagation::Background),
                precondition_uid: Some(live.metadata.uid.clone()),
            };
            match self.host.delete(PRIVILEGED, &live.target, &how) {
                Ok(Deletion::Done) | Err(KubeError::NotFound(_)) => {
                    self.report.deleted += 1;
                    return Ok(());
                }
                // Another object of that name now (the precondition failed): the next visit.
                Err(KubeError::Conflict(_)) => return Ok(()),
                Err(e) => return Err(e.into()),
                Ok(Deletion::Pending(pending)) => {
                    self.report.deleted += 1;
                    self.events.record(
                        &pending,
                        Event::normal("Deleting", "Delete", "its desired state was deleted"),
                    );
                    live = *pending;
                }
            }
        }
        if let Case::Cleanup(index) = finalizer::case(&live, FINALIZER) {
            match self.host.patch(
                PRIVILEGED,
                &live.target,
                &finalizer::remove_patch(index, FINALIZER),
            ) {
                Ok(_) | Err(KubeError::NotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
            if finalizer::is_last(&live, FINALIZER) {
                return Ok(());
            }
        }
        if let Some(since) = desired.and_then(|d| d.deleting_since) {
            let age = self.host.now_ms() - since;
            let others: Vec<&str> = live
                .metadata
                .finalizers
                .iter()
                .map(String::as_str)
                .filter(|f| *f != FINALIZER)
                .collect();
            self.report.deletions.push(DeletionInFlight {
                item: format!("__JOB_TYPE__/{key}"),
                state: if age < self.settings.deletion_timeout_ms {
                    "PROCESSING"
                } else {
                    "FAILED"
                }
                .into(),
                age_ms: u64::try_from(age).unwrap_or(0),
                reason: (!others.is_empty())
                    .then(|| format!("waiting for finalizers {}", others.join(", "))),
            });
        }
        Ok(())
    }

    /// A deletion whose object is gone: its row (the COMPLETE job) is kept for the retention,
    /// then forgotten, guarded by the uid read.
    fn forget_if_done(&mut self, d: &Desired) -> Result<(), Failed> {
        let Some(since) = d.deleting_since else {
            return Ok(());
        };
        if self.host.now_ms() - since < self.settings.retention_ms {
            return Ok(());
        }
        self.host
            .execute(
                "DELETE FROM __SNAKE___desired WHERE namespace = $1 AND name = $2 AND uid = $3 \
                 AND deleting_since IS NOT NULL",
                &[
                    d.namespace.clone().into(),
                    d.name.clone().into(),
                    d.uid.clone().into(),
                ],
            )
            .map_err(|e| Failed {
                error: KubeError::Unavailable(format!("forgetting the row: {e}")),
                parked: false,
            })?;
        Ok(())
    }

    /// Records a failure: backs the object off, or parks it until its row changes.
    fn fail(&mut self, key: &str, desired: Option<&Desired>, failed: Failed) {
        let now = self.host.now_ms();
        let previous = self.backoff.of(key).ok().flatten();
        let parked_on =
            (failed.parked).then(|| desired.map(Desired::fingerprint).unwrap_or_default());
        let failures = Failures::after(
            previous.as_ref(),
            now,
            self.settings.backoff,
            10,
            parked_on,
            failed.error.to_string(),
        );
        if let Err(e) = self.backoff.record(key, &failures) {
            self.host
                .log(Level::Warn, &format!("{key}: recording its failure: {e}"));
        }
        self.host.log(
            Level::Warn,
            &format!("{RECONCILER}: {key}: {}", failed.error),
        );
        self.report.failed.push(ItemFailure {
            item: key.to_string(),
            reason: failed.error.to_string(),
            parked: failed.parked,
        });
    }
}

/// A field name as a JSON pointer token.
fn pointer_escape(field: &str) -> String {
    field.replace('~', "~0").replace('/', "~1")
}
