//! Reconciling what changed: the cf-reconciler's pass costs what changed since the last one, not
//! the number of orgs and spaces, in the manner of a watch-driven controller.
//!
//! The pass follows three kinds of collection through the `kube` capability's `changes` (one
//! watch each, kept by the host): every configured resource type (orgs, spaces), the kinds that
//! are their children (a space's deletion lets its org go on), and the namespaces lethe marked
//! ([`OWNER_LABEL`]: a namespace gone lets its owner be released; one deleted by hand is made
//! again). Each change names the objects to visit; so do the objects whose backoff is over and
//! the deletions under way that nothing was heard of for [`REVISIT_MS`]. Each is visited exactly
//! as the full pass visits it ([`crate::reconcile`]).
//!
//! A full pass still runs at the start (no bookmark yet), every `full_resync_seconds`, when the
//! host says a bookmark is `gone` (its watch was relisted or it restarted), after a pass that ran
//! out of its budget (`pass_budget_ms`) with visits left, and on demand. It
//! takes the bookmarks *before* it lists, so a change made while it lists comes again after it:
//! nothing is missed, some things are visited twice, and visiting is idempotent.
//!
//! Bookmarks, the time of the last full pass and the deletions under way are kept in SQL
//! (`cf_reconcile_state`, `cf_reconcile_deletions`), so any instance on any host can run the next
//! pass; bookmarks are written after the pass acted on the changes, so a pass that crashes midway
//! leaves the next one to act on them again.

use std::collections::BTreeMap;

use lethe_guest::env::{Env, Level};
use lethe_guest::kept::{Kept, KeptTable};
use lethe_guest::kube::{ChangeType, Collection, Identity, Kube, KubeError, Object, Since};
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

/// Changes asked for per call.
const BATCH: u32 = 1_000;

/// Batches read per collection in one pass; what is left waits for the next pass.
const MAX_BATCHES: usize = 20;

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
#[derive(Debug, Clone)]
struct Feed {
    collection: Collection,
    roles: Vec<Role>,
}

impl Feed {
    /// Its key in `cf_reconcile_state`.
    fn state_key(&self) -> String {
        let c = &self.collection;
        format!(
            "bookmark:{}/{}/{}/{}",
            c.api_version,
            c.kind,
            c.namespace.as_deref().unwrap_or("*"),
            c.label_selector.as_deref().unwrap_or_default()
        )
    }
}

/// The collections `settings` make the reconciler follow, in a fixed order.
fn feeds(settings: &Settings) -> Vec<Feed> {
    let mut feeds: BTreeMap<Collection, Vec<Role>> = BTreeMap::new();
    for (name, t) in &settings.types {
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
        .map(|(collection, roles)| Feed { collection, roles })
        .collect()
}

/// The objects to visit, by `<type>/<name>`, with the object when a change carried it.
type Visits = BTreeMap<String, Option<Object>>;

/// Notes what `change` of `feed` asks to visit.
fn note(
    settings: &Settings,
    feed: &Feed,
    change_type: ChangeType,
    object: &Object,
    visits: &mut Visits,
) {
    for role in &feed.roles {
        match role {
            Role::Type(type_name) => {
                let key = format!("{type_name}/{}", object.target.name);
                // A deleted object is looked up again: one of the same name may be there now.
                let carried = (change_type != ChangeType::Deleted).then(|| object.clone());
                visits.insert(key, carried);
            }
            Role::ChildOf(type_name) => {
                if let Some(namespace) = &object.target.namespace {
                    visits
                        .entry(format!("{type_name}/{namespace}"))
                        .or_insert(None);
                }
            }
            Role::Namespaces => {
                let owner = object.label(OWNER_LABEL).and_then(|o| o.split_once('.'));
                if let Some((type_name, name)) = owner
                    && name == object.target.name
                    && settings.resource_type(type_name).is_some()
                {
                    visits.entry(format!("{type_name}/{name}")).or_insert(None);
                }
            }
        }
    }
}

/// A deletion under way as `cf_reconcile_deletions` keeps it.
struct Tracked {
    key: String,
    since: String,
    blocked_by: Option<String>,
    next_visit_ms: i64,
}

/// What the reconciler keeps between passes, in SQL: its bookmarks and the time of its last full
/// pass under this host's name ([`Kept`]), and the deletions under way, which every host shares.
struct Memory<'a> {
    sql: &'a dyn Sql,
    kept: Kept<'a>,
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

/// Why a pass could not go on the changes alone.
enum NeedsFullPass {
    /// No bookmark yet, or the last full pass is older than the resync interval.
    Due,
    /// The host could not tell the changes (a bookmark `gone`, or it failed).
    Changes(KubeError),
    /// The kept state could not be read or written.
    State(SqlError),
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
    let memory = Memory {
        sql,
        kept: Kept::new(sql, &KEPT, &instance),
    };
    let feeds = feeds(settings);
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
    let reason = if full {
        NeedsFullPass::Due
    } else {
        match on_changes(&reconciler, &memory, &feeds) {
            Ok(report) => return report,
            Err(reason) => reason,
        }
    };
    match &reason {
        NeedsFullPass::Due => {}
        NeedsFullPass::Changes(e) => env.log(
            Level::Info,
            &format!("cf reconcile: a full pass, since the changes cannot be told: {e}"),
        ),
        NeedsFullPass::State(e) => env.log(
            Level::Warn,
            &format!("cf reconcile: a full pass, since the kept state failed: {e}"),
        ),
    }
    full_pass(&reconciler, &memory, &feeds)
}

/// How soon a full pass comes again after one that left upkeep for later: soon enough to drain
/// it, a hundred writes at a time, with the passes on the changes in between.
pub const UPKEEP_AGAIN_MS: i64 = 10_000;

/// The kept time of the last full pass that makes the next one due [`UPKEEP_AGAIN_MS`] after
/// `started`.
fn upkeep_again(reconciler: &Reconciler<'_>, started: i64) -> (String, String) {
    let resync = i64::try_from(reconciler.settings.full_resync_ms).unwrap_or(i64::MAX);
    let at = started
        .saturating_sub(resync)
        .saturating_add(UPKEEP_AGAIN_MS.min(resync));
    ("full_pass_ms".to_string(), at.to_string())
}

/// Bookmarks first, then the full pass, then what it saw is kept.
fn full_pass(reconciler: &Reconciler<'_>, memory: &Memory<'_>, feeds: &[Feed]) -> Report {
    let (kube, env) = (reconciler.kube, reconciler.env);
    let started = env.now_ms();
    let mut kept = Vec::new();
    for feed in feeds {
        match kube.changes(&Identity::Privileged, &feed.collection, Since::START) {
            Ok(batch) => kept.push((feed.state_key(), batch.bookmark)),
            // A kind not served yet (its CRD is missing): there is nothing of it to follow.
            Err(KubeError::NotFound(_)) => {}
            Err(e) => env.log(
                Level::Warn,
                &format!("cannot follow {}: {e}", feed.collection.kind),
            ),
        }
    }
    let mut report = reconciler.pass();
    report.full = true;
    // The next pass follows the changes only when every collection has a bookmark and this pass
    // visited everything; one that was cut short makes the next one full, whatever else failed.
    if report.deferred {
        kept.push(("full_pass_ms".to_string(), "0".to_string()));
    } else if report.upkeep_behind {
        kept.push(upkeep_again(reconciler, started));
    } else if kept.len() == feeds.len() {
        kept.push(("full_pass_ms".to_string(), started.to_string()));
    }
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
    let saved = tracked.and_then(|()| memory.kept.write(&kept, &[]));
    if let Err(e) = saved {
        env.log(
            Level::Warn,
            &format!("cannot keep what the full pass saw: {e}"),
        );
    }
    report
}

/// The pass between full passes.
fn on_changes(
    reconciler: &Reconciler<'_>,
    memory: &Memory<'_>,
    feeds: &[Feed],
) -> Result<Report, NeedsFullPass> {
    let (kube, env, settings, backoff) = (
        reconciler.kube,
        reconciler.env,
        reconciler.settings,
        reconciler.backoff,
    );
    let started = env.now_ms();
    let last_full = memory
        .kept
        .number("full_pass_ms")
        .map_err(NeedsFullPass::State)?;
    let resync = i64::try_from(settings.full_resync_ms).unwrap_or(i64::MAX);
    if last_full.is_none_or(|at| started.saturating_sub(at) >= resync) {
        return Err(NeedsFullPass::Due);
    }
    let mut visits = Visits::new();
    let mut kept = Vec::new();
    for feed in feeds {
        let Some(mut bookmark) = memory
            .kept
            .value(&feed.state_key())
            .map_err(NeedsFullPass::State)?
        else {
            return Err(NeedsFullPass::Due);
        };
        for _ in 0..MAX_BATCHES {
            let batch = kube
                .changes(
                    &Identity::Privileged,
                    &feed.collection,
                    Since {
                        bookmark: Some(&bookmark),
                        max: BATCH,
                    },
                )
                .map_err(NeedsFullPass::Changes)?;
            for change in &batch.changes {
                note(
                    settings,
                    feed,
                    change.change_type,
                    &change.object,
                    &mut visits,
                );
            }
            bookmark = batch.bookmark;
            if !batch.more {
                break;
            }
        }
        kept.push((feed.state_key(), bookmark));
    }
    for key in backoff.due_now(started) {
        visits.entry(key).or_insert(None);
    }
    let tracked = memory.tracked().map_err(NeedsFullPass::State)?;
    for t in tracked.iter().filter(|t| t.next_visit_ms <= started) {
        visits.entry(t.key.clone()).or_insert(None);
    }

    let mut report = Report::default();
    let keep = |result: Result<(), SqlError>| {
        if let Err(e) = result {
            env.log(Level::Warn, &format!("cannot keep a deletion's state: {e}"));
        }
    };
    for (key, carried) in visits {
        if reconciler.must_stop(started) {
            // The changes are not read again: the next pass is full and finds what is left.
            report.deferred = true;
            break;
        }
        let Some((type_name, name)) = key.split_once('/') else {
            continue;
        };
        let Some(t) = settings.resource_type(type_name) else {
            continue;
        };
        let object = match carried {
            Some(object) => object,
            None => match access::locate(kube, t, name) {
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
            },
        };
        let (deletions, backing_off) = (report.deletions.len(), report.backing_off);
        reconciler.visit(type_name, t, &object, Full::default(), &mut report);
        if report.backing_off > backing_off {
            continue;
        }
        match report.deletions.get(deletions) {
            Some(deletion) => keep(memory.track(deletion, env.now_ms() + REVISIT_MS)),
            None => keep(memory.untrack(&key)),
        }
    }
    report.upkeep_behind = reconciler.upkeep_spent();
    if report.deferred {
        kept.push(("full_pass_ms".to_string(), "0".to_string()));
    } else if report.upkeep_behind {
        kept.push(upkeep_again(reconciler, started));
    }
    memory
        .kept
        .write(&kept, &[])
        .map_err(NeedsFullPass::State)?;
    // Every deletion under way, visited now or not, as its job says at this moment.
    let now = env.now_ms();
    report.deletions = memory
        .tracked()
        .map_err(NeedsFullPass::State)?
        .into_iter()
        .filter_map(|t| {
            let (type_name, _) = t.key.split_once('/')?;
            let rt = settings.resource_type(type_name)?;
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
