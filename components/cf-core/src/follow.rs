//! Reconciling what changed: the cf-reconciler's pass costs what changed since the last one, not
//! the number of orgs and spaces, in the manner of a watch-driven controller.
//!
//! The pass follows three kinds of collection through the `kube` capability's `changes` (one
//! watch each, kept by the host): every configured resource type (orgs, spaces), the kinds that
//! are their children (a space's deletion lets its org go on), and the namespaces lethe marked
//! ([`OWNER_LABEL`]: a namespace gone lets its owner be released; one deleted by hand is made
//! again). Each change names the objects to visit, only for what they wait on or must act on
//! (a child's or a namespace's deletion, not their updates while they go; not a deletion's own
//! updates once it is under way); so do the objects whose backoff is over and the deletions under
//! way that nothing was heard of for [`REVISIT_MS`]. Each is visited exactly as the full pass
//! visits it ([`crate::reconcile`]), but what the changes told is not read again: the object a
//! change carried, an object heard deleted, a namespace heard deleted.
//!
//! The change following itself is the SDK's ([`lethe_guest::follow`]): when a full pass is due,
//! bookmarks taken before it lists, batches drained, the relist when a bookmark is `gone`. A full
//! pass also follows one that ran out of its budget (`pass_budget_ms`) with visits left, and
//! comes again after [`UPKEEP_AGAIN_MS`] while upkeep is left.
//!
//! The deletions under way are kept in SQL (`cf_reconcile_deletions`), shared by every host;
//! the bookmarks (`cf_reconcile_state`) are each host's.

use std::collections::{BTreeMap, BTreeSet};

use lethe_guest::controller::Seen;
use lethe_guest::env::{Env, Level};
use lethe_guest::follow::{Outcome, Pass, Watched, WhyFull};
use lethe_guest::kept::{Kept, KeptTable};
use lethe_guest::kube::{Change, ChangeType, Collection, Kube, KubeError};
use lethe_guest::sql::{Sql, SqlError, Value};

use crate::access;
use crate::config::Settings;
use crate::ownership::OWNER_LABEL;
use crate::reconcile::{Backoff, DeletionInFlight, Full, Reconciler, Report};
use lethe_guest::events::Recorder;
use lethe_guest::lease::{Leadership, Lease, LeaseConfig};

/// How soon a deletion under way is visited again when no change about it came (its namespace's
/// and children's changes usually come sooner).
pub const REVISIT_MS: i64 = 5_000;

/// Why a followed collection's changes name an object to visit.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    /// The objects of a configured type, by its name.
    Type(String),
    /// Children of the configured type of this name: their namespace is its object's name.
    ChildOf(String),
    /// Namespaces lethe made: their [`OWNER_LABEL`] names the owner.
    Namespaces,
}

/// One followed collection.
struct Feed<'a> {
    watched: Watched<'a>,
    roles: Vec<Role>,
}

/// The collections `settings` make the reconciler follow, in a fixed order.
fn feeds<'a>(kube: &'a dyn Kube, settings: &Settings) -> Vec<Feed<'a>> {
    let mut feeds: BTreeMap<Collection, Vec<Role>> = BTreeMap::new();
    for (name, t) in settings.reconciled() {
        let of_type = t.collection(t.fixed_namespace());
        feeds
            .entry(of_type)
            .or_default()
            .push(Role::Type(name.clone()));
        for (api_version, kind) in &t.children {
            let children = Collection::new(api_version, kind, None);
            feeds
                .entry(children)
                .or_default()
                .push(Role::ChildOf(name.clone()));
        }
    }
    let namespaces = Collection {
        label_selector: Some(OWNER_LABEL.to_string()),
        ..Collection::new("v1", "Namespace", None)
    };
    feeds.entry(namespaces).or_default().push(Role::Namespaces);
    feeds
        .into_iter()
        .map(|(collection, roles)| Feed {
            watched: Watched::new(kube, collection),
            roles,
        })
        .collect()
}

/// What a pass over the changes heard: the objects to visit, by `<type>/<name>`, each with what
/// its latest change told of it ([`Seen`]; a new object of a name heard gone would come as a
/// later change), and the marked namespaces whose latest change was their deletion.
#[derive(Default)]
struct Heard {
    visits: BTreeMap<String, Seen>,
    gone: BTreeSet<String>,
}

impl Heard {
    /// Notes what `change` of `feed` asks to visit. A change asks only for what its object's
    /// owner waits on or must act on, as a controller's event filters do: while something is
    /// being deleted, its updates wake no one, and only its deletion lets its owner go on.
    /// `waiting` are the deletions under way, each visited already: their own updates (lethe's
    /// patches, another finalizer's) change nothing they wait for.
    fn note(
        &mut self,
        settings: &Settings,
        feed: &Feed<'_>,
        change: &Change,
        waiting: &BTreeSet<&str>,
    ) {
        let object = &change.object;
        let deleted = change.change_type == ChangeType::Deleted;
        let deleting = object.metadata.deletion_timestamp.is_some();
        for role in &feed.roles {
            match role {
                Role::Type(type_name) => {
                    let key = format!("{type_name}/{}", object.target.name);
                    let visit = if deleted {
                        Seen::Gone
                    } else if deleting && waiting.contains(key.as_str()) {
                        // The latest of it, should something else ask for a visit.
                        if let Some(Seen::Live(carried)) = self.visits.get_mut(&key) {
                            **carried = object.clone();
                        }
                        continue;
                    } else {
                        Seen::Live(Box::new(object.clone()))
                    };
                    self.visits.insert(key, visit);
                }
                // A child's coming or going is what its parent waits on, not its updates.
                Role::ChildOf(type_name) if change.change_type != ChangeType::Modified => {
                    if let Some(namespace) = &object.target.namespace {
                        self.visit(format!("{type_name}/{namespace}"));
                    }
                }
                Role::ChildOf(_) => {}
                Role::Namespaces => {
                    let name = &object.target.name;
                    if deleted {
                        self.gone.insert(name.clone());
                    } else {
                        self.gone.remove(name);
                    }
                    // A namespace being emptied asks nothing of its owner until it is gone.
                    if deleting && !deleted {
                        continue;
                    }
                    let owner = object.label(OWNER_LABEL).and_then(|o| o.split_once('.'));
                    if let Some((type_name, owner)) = owner
                        && owner == name
                        && settings.reconciled_type(type_name).is_some()
                    {
                        self.visit(format!("{type_name}/{name}"));
                    }
                }
            }
        }
    }

    /// Visits `key`, reading it unless a change carried it.
    fn visit(&mut self, key: String) {
        self.visits.entry(key).or_insert(Seen::Unknown);
    }
}

/// A deletion under way as `cf_reconcile_deletions` keeps it.
struct Tracked {
    key: String,
    since: String,
    blocked_by: Option<String>,
    next_visit_ms: i64,
}

/// The deletions under way, which every host shares, in SQL.
struct Memory<'a> {
    sql: &'a dyn Sql,
}

/// The table of the values each host keeps.
static KEPT: KeptTable = KeptTable {
    select: "SELECT value FROM cf_reconcile_state WHERE name = $1",
    upsert: "INSERT INTO cf_reconcile_state (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    delete: "DELETE FROM cf_reconcile_state WHERE name = $1",
};

impl Memory<'_> {
    fn tracked(&self) -> Result<Vec<Tracked>, SqlError> {
        let rows = self.sql.query(
            "SELECT object_key, since, blocked_by, next_visit_ms FROM cf_reconcile_deletions \
             ORDER BY object_key",
            &[],
        )?;
        Ok(rows
            .iter()
            .filter_map(|r| match r.as_slice() {
                [key, since, blocked_by, next] => Some(Tracked {
                    key: key.text().to_string(),
                    since: since.text().to_string(),
                    blocked_by: blocked_by.opt_text().map(str::to_string),
                    next_visit_ms: next.int().unwrap_or(0),
                }),
                _ => None,
            })
            .collect())
    }

    fn track(&self, deletion: &DeletionInFlight, next_visit_ms: i64) -> Result<(), SqlError> {
        let blocked_by = deletion
            .blocked_by
            .as_deref()
            .map_or(Value::Null, Value::from);
        self.sql
            .execute(
                "INSERT INTO cf_reconcile_deletions (object_key, since, blocked_by, next_visit_ms) \
                 VALUES ($1, $2, $3, $4) ON CONFLICT (object_key) DO UPDATE SET \
                 since = excluded.since, blocked_by = excluded.blocked_by, \
                 next_visit_ms = excluded.next_visit_ms",
                &[
                    deletion.item.as_str().into(),
                    deletion.since.as_str().into(),
                    blocked_by,
                    next_visit_ms.into(),
                ],
            )
            .map(|_| ())
    }

    fn untrack(&self, key: &str) -> Result<(), SqlError> {
        self.sql
            .execute(
                "DELETE FROM cf_reconcile_deletions WHERE object_key = $1",
                &[key.into()],
            )
            .map(|_| ())
    }

    /// Replaces the deletions under way with those a full pass saw.
    fn track_only(
        &self,
        deletions: &[DeletionInFlight],
        next_visit_ms: i64,
    ) -> Result<(), SqlError> {
        self.sql
            .execute("DELETE FROM cf_reconcile_deletions", &[])?;
        deletions
            .iter()
            .try_for_each(|d| self.track(d, next_visit_ms))
    }
}

/// The name of the cf reconciler's leader Lease, in the root namespace.
pub const LEASE_NAME: &str = "cf-reconciler";

/// The item a pass reports as failed when it could not take or read the Lease.
pub const LEASE_ITEM: &str = "lease/*";

/// Runs one pass, if this host holds the reconciler's leader Lease ([`LEASE_NAME`]; timed by
/// `lease_duration_seconds` and `lease_renew_seconds`): on the changes since the last one, or a
/// full pass when one is due (see the module documentation), or when `full` asks for one. With
/// several hosts, only the Lease's holder runs passes; the report of any other names it.
pub fn pass_on_changes(
    kube: &dyn Kube,
    env: &dyn Env,
    sql: &dyn Sql,
    settings: &Settings,
    backoff: &dyn Backoff,
    full: bool,
) -> Report {
    let refused = |item: &str, reason: String| Report {
        failed: vec![(item.to_string(), reason)],
        ..Report::default()
    };
    let lease_config = match LeaseConfig::from_env(env, &settings.root_namespace, LEASE_NAME) {
        Ok(config) => config,
        Err(e) => return refused(LEASE_ITEM, e),
    };
    let lease = match Lease::acquire(kube, &lease_config, env.now_ms()) {
        Ok(Leadership::Held(lease)) => lease,
        Ok(Leadership::Elsewhere(holder)) => {
            return Report {
                leader_elsewhere: Some(holder),
                ..Report::default()
            };
        }
        Err(e) => return refused(LEASE_ITEM, e.to_string()),
    };
    let instance = env.config("lethe_instance_id").unwrap_or_default();
    let memory = Memory { sql };
    let feeds = feeds(kube, settings);
    let events = Recorder::new(kube, env, crate::tell::CONTROLLER);
    let reconciler = Reconciler {
        kube,
        env,
        settings,
        backoff,
        lease: Some(&lease),
        events: &events,
        upkeep: std::cell::Cell::new(crate::reconcile::UPKEEP_PER_PASS),
    };
    let resync = i64::try_from(settings.full_resync_ms).unwrap_or(i64::MAX);
    let kept = Kept::new(sql, &KEPT, &instance);
    let mut pass = Pass::begin(env, kept, "cf reconcile", resync, full);
    if !pass.is_full() {
        match on_changes(&reconciler, &memory, &feeds, &mut pass) {
            Ok(report) => {
                pass.finish(outcome(&report));
                return report;
            }
            Err(why) => pass.go_full(why),
        }
    }
    full_pass(&reconciler, &memory, &feeds, pass)
}

/// How soon a full pass comes again after one that left upkeep for later: soon enough to drain
/// it, a hundred writes at a time, with the passes on the changes in between.
pub const UPKEEP_AGAIN_MS: i64 = 10_000;

/// What the next pass must make up for: work cut short, or upkeep left.
fn outcome(report: &Report) -> Outcome {
    if report.deferred {
        Outcome::Deferred
    } else if report.upkeep_behind {
        Outcome::AgainIn(UPKEEP_AGAIN_MS)
    } else {
        Outcome::Done
    }
}

/// Bookmarks first, then the full pass, then what it saw is kept.
fn full_pass(
    reconciler: &Reconciler<'_>,
    memory: &Memory<'_>,
    feeds: &[Feed<'_>],
    mut pass: Pass<'_>,
) -> Report {
    let env = reconciler.env;
    let started = pass.started_ms();
    for feed in feeds {
        match pass.mark(&feed.watched) {
            Ok(()) => {}
            // A kind not served yet (its CRD is missing): there is nothing of it to follow.
            Err(KubeError::NotFound(_)) => {}
            Err(e) => env.log(
                Level::Warn,
                &format!("cannot follow {}: {e}", feed.watched.collection.kind),
            ),
        }
    }
    let mut report = reconciler.pass();
    report.full = true;
    // A pass cut short did not see every deletion under way: it adds what it saw and forgets
    // none of the others.
    let tracked = if report.deferred {
        report
            .deletions
            .iter()
            .try_for_each(|d| memory.track(d, started + REVISIT_MS))
    } else {
        memory.track_only(&report.deletions, started + REVISIT_MS)
    };
    if let Err(e) = tracked {
        env.log(
            Level::Warn,
            &format!("cannot keep the deletions the full pass saw: {e}"),
        );
    }
    pass.finish(outcome(&report));
    report
}

/// The pass between full passes. `Err` says why it must be full instead; it may come after some
/// visits, which the full pass then repeats.
fn on_changes(
    reconciler: &Reconciler<'_>,
    memory: &Memory<'_>,
    feeds: &[Feed<'_>],
    pass: &mut Pass<'_>,
) -> Result<Report, WhyFull> {
    let (kube, env, settings, backoff) = (
        reconciler.kube,
        reconciler.env,
        reconciler.settings,
        reconciler.backoff,
    );
    let started = pass.started_ms();
    let tracked = memory.tracked().map_err(WhyFull::Kept)?;
    let waiting = tracked.iter().map(|t| t.key.as_str()).collect();
    let mut heard = Heard::default();
    for feed in feeds {
        for change in pass.changes(&feed.watched)? {
            heard.note(settings, feed, &change, &waiting);
        }
    }
    for key in backoff.due_now(started) {
        heard.visit(key);
    }
    for t in tracked.iter().filter(|t| t.next_visit_ms <= started) {
        heard.visit(t.key.clone());
    }
    let full = Full {
        gone: Some(&heard.gone),
        ..Full::default()
    };

    let mut report = Report::default();
    let keep = |result: Result<(), SqlError>| {
        if let Err(e) = result {
            env.log(Level::Warn, &format!("cannot keep a deletion's state: {e}"));
        }
    };
    for (key, visit) in heard.visits {
        if reconciler.must_stop(started) {
            // The changes are not read again: the next pass is full and finds what is left.
            report.deferred = true;
            break;
        }
        let Some((type_name, name)) = key.split_once('/') else {
            continue;
        };
        let Some(t) = settings.reconciled_type(type_name) else {
            continue;
        };
        let found = match visit {
            Seen::Live(object) => Ok(Some(*object)),
            Seen::Gone => Ok(None),
            Seen::Unknown => access::locate(kube, t, name),
        };
        let object = match found {
            Ok(Some(object)) => object,
            // Gone: nothing is left to do for it, but for a namespace that outlived it.
            Ok(None) => {
                backoff.succeeded(&key);
                keep(memory.untrack(&key));
                reconciler.sweep(type_name, t, name, &mut report);
                continue;
            }
            Err(e) => {
                let reason = format!("reading it: {e}");
                backoff.failed(&key, env.now_ms(), &reason);
                report.failed.push((key, reason));
                continue;
            }
        };
        let (deletions, backing_off) = (report.deletions.len(), report.backing_off);
        reconciler.visit(type_name, t, &object, full, &mut report);
        if report.backing_off > backing_off {
            continue;
        }
        match report.deletions.get(deletions) {
            Some(deletion) => keep(memory.track(deletion, env.now_ms() + REVISIT_MS)),
            None => keep(memory.untrack(&key)),
        }
    }
    report.upkeep_behind = reconciler.upkeep_spent();
    // Every deletion under way, visited now or not, as its job says at this moment.
    let now = env.now_ms();
    report.deletions = memory
        .tracked()
        .map_err(WhyFull::Kept)?
        .into_iter()
        .filter_map(|t| {
            let (type_name, _) = t.key.split_once('/')?;
            let rt = settings.reconciled_type(type_name)?;
            Some(DeletionInFlight::of(
                &t.key,
                &t.since,
                t.blocked_by.as_deref(),
                settings,
                rt,
                now,
            ))
        })
        .collect();
    report.duration_ms = u64::try_from(now - started).unwrap_or(0);
    Ok(report)
}
