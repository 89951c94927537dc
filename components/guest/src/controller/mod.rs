//! The controller runtime: a reconciler says what it follows, how to read an item and how to
//! bring one in line; [`run`] drives the pass from end to end, as kube-runtime's `Controller` and
//! controller-runtime's manager drive a `reconcile` function.
//!
//! A pass, in order:
//!
//! 1. **The Lease** ([`crate::lease`]): only its holder runs passes; every other host reports
//!    who holds it. The Lease is kept before each item and before each write ([`Context`]), so a
//!    host that lost it stops before it touches anything more.
//! 2. **Full or on the changes** ([`crate::follow`]): each [`Follow`] names the items its changes
//!    touch, with the object a watched change carried ([`Seen`]), so that it is not read again;
//!    the items whose backoff or requeue is over come too. A full pass, when one is due or
//!    a source cannot tell its changes or more items changed than [`Config::max_changed`], marks
//!    every source first and reads every item.
//! 3. **Each item**, unless its backoff holds it back or it is parked on the desired state it
//!    still has ([`Reconciler::fingerprint`]): [`Reconciler::reconcile`] answers an [`Action`] or
//!    an [`Error`], which the error policy ([`Reconciler::error_policy`]) turns into a backoff
//!    (doubling from [`Config::backoff`]) or a parking. One item failing never stops the pass; the
//!    Lease lost or the budget ([`Config::budget_ms`]) spent does, and the next pass is full.
//! 4. **The report** ([`PassReport`]): counted by the write helpers, so a reconciler cannot
//!    report a write it did not make.
//!
//! What every reconciler must do before a write is done by [`Context`]'s helpers, so none can
//! forget it: the Lease is kept, an object not marked as the reconciler's own
//! ([`Reconciler::owns`]) is refused, a patch is guarded by the resourceVersion read and a delete
//! by the uid read. [`Context::finalized`] is kube-runtime's `finalizer()`: it adds the
//! reconciler's finalizer, and splits a visit into apply and cleanup.

mod context;
mod sources;

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

use crate::Capabilities;
use crate::backoff::{Backoff as _, Loaded};
use crate::env::{Level, seconds_ms};
use crate::events::Recorder;
use crate::follow::{Outcome, Pass, WhyFull};
use crate::kept::{Kept, KeptTable};
use crate::kube::{KubeError, Object};
use crate::lease::{Leadership, Lease, LeaseConfig, LeaseLost};
use crate::reconciler::{ItemFailure, PassReport};
use crate::sql::SqlError;

pub use context::Context;
pub use sources::{Follow, Keyed, Named, Pair, Seen, feed, keyed, object_key, watching};

/// What a visit asks for next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// In line: nothing more until something it follows changes. Its failures are forgotten.
    Done,
    /// Visit it again after this many milliseconds even if nothing changes (a deletion that waits
    /// for others).
    Again(i64),
    /// Retrying cannot help until its desired state changes; why, for the report and the log.
    Park(String),
}

/// Why a visit failed: the step, by its variant.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// A call to the cluster failed.
    #[error("{0}")]
    Kube(KubeError),
    /// Reading or writing the reconciler's own rows failed.
    #[error("keeping its state: {0}")]
    Sql(SqlError),
    /// A write was refused before it was sent: the object lacks the reconciler's marks.
    #[error("{0} is not this reconciler's (it lacks lethe's marks): left untouched")]
    NotOurs(String),
    /// The Lease was lost before a write: the pass stops.
    #[error(transparent)]
    LeaseLost(#[from] LeaseLost),
}

impl From<KubeError> for Error {
    fn from(e: KubeError) -> Self {
        Error::Kube(e)
    }
}

impl From<SqlError> for Error {
    fn from(e: SqlError) -> Self {
        Error::Sql(e)
    }
}

/// What the error policy makes of a failed visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Try again after the backoff, doubling per failure in a row.
    Backoff,
    /// Wait until the item's desired state changes.
    Park,
}

/// A reconciler: what it follows, how it reads its items, and its decide-and-act.
pub trait Reconciler {
    /// One thing to bring in line, as read: its desired state and its live object, say.
    type Item;
    /// The item's key: unique within the reconciler, as its sources name it.
    fn key(&self, item: &Self::Item) -> String;
    /// What a parked item waits on: while this stays the same, it stays parked (its desired
    /// state, hashed).
    fn fingerprint(&self, item: &Self::Item) -> String;
    /// Whether `object` carries this reconciler's marks: the only objects it may write.
    fn owns(&self, object: &Object) -> bool;
    /// Where it hears of changes.
    fn sources(&self) -> Vec<Box<dyn Follow + '_>>;
    /// Every item, for a full pass, each handed to `visit` as it is read (a page at a time, say,
    /// so that a large world need not fit in memory); stop reading when `visit` says `Break`.
    /// `Err` when they could not all be read: the pass stops there and the next one is full.
    fn read_all(&self, visit: &mut dyn FnMut(Self::Item) -> ControlFlow<()>) -> Result<(), String>;
    /// The items `named`, for a pass on the changes, using what the changes told of their
    /// objects ([`Seen`]) rather than reading them again; a key that names nothing any more is an
    /// item too (its object may need deleting). `Err` stops the pass before it acts.
    fn read(&self, named: &[Named]) -> Result<Vec<Self::Item>, String>;
    /// Decides on one item and acts, through `ctx`'s write helpers.
    fn reconcile(&self, ctx: &mut Context<'_>, item: &Self::Item) -> Result<Action, Error>;
    /// What a failure makes of the item: by default, one the API server rejected as invalid
    /// waits for its desired state to change (retrying cannot mend it), and anything else backs
    /// off, an object in the way that is not ours too (its owner may take it away).
    fn error_policy(&self, _item: &Self::Item, error: &Error) -> Policy {
        match error {
            Error::Kube(KubeError::Invalid(_)) => Policy::Park,
            _ => Policy::Backoff,
        }
    }
}

/// How a reconciler's passes run.
pub struct Config<'a> {
    /// Its name: its Lease's, its rows' in the backoff table, the log's.
    pub name: &'a str,
    /// The `reportingController` of its Events.
    pub controller: String,
    /// Its Lease.
    pub lease: LeaseConfig,
    /// Where it keeps its bookmarks and the time of its last full pass.
    pub kept: Kept<'a>,
    /// A full pass comes at least this often.
    pub resync_ms: i64,
    /// A pass stops visiting after this long; the next pass is full.
    pub budget_ms: Option<i64>,
    /// The backoff's first wait and its ceiling.
    pub backoff: (i64, i64),
    /// More changed items than this make the pass full instead: reading each would cost more.
    pub max_changed: Option<usize>,
}

/// Seconds between full passes when `full_resync_seconds` is not set.
pub const DEFAULT_RESYNC_S: i64 = 600;

impl<'a> Config<'a> {
    /// The passes of reconciler `name`, keeping its values in `kept`, as the component's
    /// variables time them: `lease_namespace` (default `lethe-system`; the Lease is named
    /// `name`, timed as [`LeaseConfig::from_env`] says), `full_resync_seconds` (default
    /// [`DEFAULT_RESYNC_S`]), `backoff_base_ms` and `backoff_max_ms` (default 1 000 and
    /// 300 000), `pass_budget_ms` (none by default) and `lethe_instance_id` (whose bookmarks).
    /// Its Events' controller is `lethe.dev/<name>`. `Err` names a value set but malformed.
    pub fn from_env(
        host: &'a dyn Capabilities,
        name: &'a str,
        kept: &'static KeptTable,
    ) -> Result<Config<'a>, String> {
        let set = |key: &str| host.config(key).filter(|v| !v.is_empty());
        let millis = |key: &str| match set(key) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .ok()
                .filter(|n| *n > 0)
                .map(Some)
                .ok_or_else(|| {
                    format!("{key} must be a whole, positive number of milliseconds, not {v:?}")
                }),
        };
        let namespace = set("lease_namespace").unwrap_or_else(|| "lethe-system".into());
        let instance = set("lethe_instance_id").unwrap_or_else(|| "lethe".into());
        let base = millis("backoff_base_ms")?.unwrap_or(1_000);
        let max = millis("backoff_max_ms")?.unwrap_or(300_000);
        Ok(Config {
            name,
            controller: format!("lethe.dev/{name}"),
            lease: LeaseConfig::from_env(host, &namespace, name)?,
            kept: Kept::new(host, kept, &instance),
            resync_ms: seconds_ms(host, "full_resync_seconds", DEFAULT_RESYNC_S)?,
            budget_ms: millis("pass_budget_ms")?,
            backoff: (base, max.max(base)),
            max_changed: None,
        })
    }
}

/// Runs one pass of `reconciler` if this host holds its Lease (`full` asks for a full pass).
/// `Err` names the step that kept the pass from running at all, or from reading its items.
pub fn run<R: Reconciler>(
    host: &dyn Capabilities,
    config: Config<'_>,
    reconciler: &R,
    full: bool,
) -> Result<PassReport, String> {
    let started = host.now_ms();
    let lease = match Lease::acquire(host, &config.lease, started) {
        Ok(Leadership::Held(lease)) => lease,
        Ok(Leadership::Elsewhere(holder)) => return Ok(PassReport::not_leader(holder)),
        Err(e) => return Err(e.to_string()),
    };
    let name = config.name;
    // Without its failures a pass would retry every parked item at once: it runs none.
    let backoff = Loaded::load(host, host, name, config.backoff)
        .map_err(|e| format!("reading the backoff table: {e}"))?;
    let mut pass = Pass::begin(host, config.kept, name, config.resync_ms, full);
    let sources = reconciler.sources();
    let mut changed: Option<Vec<Named>> = None;
    if !pass.is_full() {
        match heard(&sources, &mut pass, &backoff, started, config.max_changed) {
            Ok(keys) => changed = Some(keys),
            Err(why) => pass.go_full(why),
        }
    }

    let owns = |object: &Object| reconciler.owns(object);
    let mut driver = Driver {
        host,
        reconciler,
        name,
        started,
        budget_ms: config.budget_ms,
        backoff,
        seen: BTreeSet::new(),
        stopped: false,
        ctx: Context {
            kube: host,
            env: host,
            sql: host,
            lease: &lease,
            owns: &owns,
            events: Recorder::new(host, host, &config.controller),
            report: PassReport::default(),
            lost: false,
        },
    };
    let read = match &changed {
        Some(named) => reconciler.read(named).map(|items| {
            let _ = items.iter().try_for_each(|item| driver.visit(item));
        }),
        None => {
            for source in &sources {
                if let Err(e) = source.mark(&mut pass) {
                    host.log(
                        Level::Warn,
                        &format!("{name}: the next pass is full too: {e}"),
                    );
                }
            }
            reconciler.read_all(&mut |item| driver.visit(&item))
        }
    };
    if let Err(e) = read {
        pass.finish(Outcome::Deferred);
        return Err(e);
    }
    if driver.stopped {
        pass.finish(Outcome::Deferred);
    } else {
        if pass.is_full() {
            driver.backoff.forget_all_but(&driver.seen);
        }
        pass.finish(Outcome::Done);
    }
    let mut report = driver.ctx.report;
    report.duration_ms = u64::try_from(host.now_ms() - started).unwrap_or(0);
    Ok(report)
}

/// One pass's visits: what the driver keeps between items.
struct Driver<'a, R: Reconciler> {
    host: &'a dyn Capabilities,
    reconciler: &'a R,
    name: &'a str,
    started: i64,
    budget_ms: Option<i64>,
    backoff: Loaded<'a>,
    /// The keys of the items read.
    seen: BTreeSet<String>,
    /// The pass stopped short: its budget spent or its Lease lost.
    stopped: bool,
    ctx: Context<'a>,
}

impl<R: Reconciler> Driver<'_, R> {
    /// Visits `item`, unless its failures hold it back; `Break` when the pass must stop.
    fn visit(&mut self, item: &R::Item) -> ControlFlow<()> {
        let (host, name, reconciler) = (self.host, self.name, self.reconciler);
        let key = reconciler.key(item);
        self.seen.insert(key.clone());
        let now = host.now_ms();
        if (self.backoff).holds_back(&key, now, || reconciler.fingerprint(item)) {
            return ControlFlow::Continue(());
        }
        let spent = (self.budget_ms).is_some_and(|budget| now - self.started >= budget);
        let why = match self.ctx.lease.keep(now) {
            Err(lost) => Some(format!("{lost}")),
            Ok(()) if spent => Some("it spent its budget".to_string()),
            Ok(()) => None,
        };
        if let Some(why) = why {
            let warning = format!("{name}: the pass stops, since {why}; the next one is full");
            host.log(Level::Warn, &warning);
            self.stopped = true;
            return ControlFlow::Break(());
        }
        self.ctx.report.examined += 1;
        let result = reconciler.reconcile(&mut self.ctx, item);
        if self.ctx.lost {
            let warning =
                format!("{name}: the pass stops, since the Lease was lost; the next one is full");
            host.log(Level::Warn, &warning);
            self.stopped = true;
            return ControlFlow::Break(());
        }
        let now = host.now_ms();
        let (parked, reason) = match result {
            Ok(Action::Done) => {
                self.backoff.succeeded(&key);
                return ControlFlow::Continue(());
            }
            Ok(Action::Again(after_ms)) => {
                self.backoff.again(&key, now.saturating_add(after_ms));
                return ControlFlow::Continue(());
            }
            Ok(Action::Park(why)) => (true, why),
            Err(error) => {
                let reason = error.to_string();
                host.log(Level::Warn, &format!("{name}: {key}: {reason}"));
                (
                    reconciler.error_policy(item, &error) == Policy::Park,
                    reason,
                )
            }
        };
        let parked_on = parked.then(|| reconciler.fingerprint(item));
        self.backoff.fail(&key, now, &reason, parked_on);
        let failure = ItemFailure {
            item: key,
            reason,
            parked,
        };
        self.ctx.report.failed.push(failure);
        ControlFlow::Continue(())
    }
}

/// The items a pass on the changes visits: what its sources heard (an item's latest change that
/// carried its object telling what it is), and the items whose backoff or requeue is over. `Err`
/// says why the pass must be full instead.
fn heard(
    sources: &[Box<dyn Follow + '_>],
    pass: &mut Pass<'_>,
    backoff: &Loaded<'_>,
    now: i64,
    max_changed: Option<usize>,
) -> Result<Vec<Named>, WhyFull> {
    let mut keys: BTreeMap<String, Seen> = BTreeMap::new();
    let mut note = |Named { key, seen }: Named| match seen {
        Seen::Unknown => {
            keys.entry(key).or_insert(Seen::Unknown);
        }
        seen => {
            keys.insert(key, seen);
        }
    };
    for source in sources {
        source.changed(pass)?.into_iter().for_each(&mut note);
    }
    backoff
        .due_now(now)
        .into_iter()
        .map(Named::key)
        .for_each(note);
    if let Some(max) = max_changed
        && keys.len() > max
    {
        return Err(WhyFull::Dearer(format!(
            "{} items changed, more than {max}",
            keys.len()
        )));
    }
    Ok(keys
        .into_iter()
        .map(|(key, seen)| Named { key, seen })
        .collect())
}

#[cfg(test)]
#[cfg(feature = "fake")]
mod tests;
