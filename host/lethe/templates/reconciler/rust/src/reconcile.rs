//! The reconciler: make the `__KIND__`s this component made match the desired rows.
//!
//! The SDK's controller runtime ([`lethe_guest::controller`]) drives each pass: the Lease
//! `__NAME__` (in `lease_namespace`, default `lethe-system`), a pass on what changed (the
//! desired-state feed, the watch of the objects made, and objects whose backoff is over) or a
//! full one (at start, every `full_resync_seconds`, when the changes cannot be told), backoff
//! (doubling from `backoff_base_ms`) and parking, the finalizer, Events and the report. Its write
//! helpers keep the Lease, refuse an object without lethe's marks, and guard every write by the
//! resourceVersion or uid read. What is left here is the decision, for each object:
//!
//! | desired row | live `__KIND__` | what the pass does |
//! |-------------|-----------------|--------------------|
//! | wanted | none | create it, with lethe's marks (Event `Created`) |
//! | wanted | ours, this row's uid, without the finalizer | add it |
//! | wanted | ours, this row's uid, content drifted | patch the content back (Event `Updated`) |
//! | wanted | ours, being deleted by someone else | remove the finalizer; the next pass makes it again |
//! | deleting, none, or another uid | ours | delete it (Event `Deleting`), then remove the finalizer |
//! | deleting | none | the job is COMPLETE; the row is forgotten `job_retention_seconds` later |
//! | wanted | not ours | never touched: reported, and tried again with backoff until it is gone |
//!
//! Kubernetes first, then SQL: a crash between the two leaves state the next pass repairs (an
//! object created before the crash carries this row's uid and is found by it).

use std::ops::ControlFlow;

use lethe_guest::Capabilities;
use lethe_guest::controller::{self, Action, Config, Context, Error, Follow, Named, Pair};
use lethe_guest::events::Event;
use lethe_guest::feed::Feed;
use lethe_guest::kube::{Object, Patch};
use lethe_guest::reconciler::{DeletionInFlight, PassReport};

use crate::{Desired, FEED, FEED_COUNTER, FINALIZER, KEPT, KIND, RECONCILER, UID_LABEL};

/// Seconds a COMPLETE job stays readable, when the configuration says nothing.
pub const DEFAULT_JOB_RETENTION_S: i64 = 86_400;

/// Runs one pass if this host holds the Lease (`full` asks for a full one). `Err` names the step
/// that kept the pass from running at all.
pub fn tick(host: &dyn Capabilities, full: bool) -> Result<PassReport, String> {
    let seconds = |key, default| lethe_guest::env::seconds_ms(host, key, default);
    let timeout = seconds(
        "deletion_timeout_seconds",
        crate::api::DEFAULT_DELETION_TIMEOUT_S,
    )?;
    let retention = seconds("job_retention_seconds", DEFAULT_JOB_RETENTION_S)?;
    let keeper = Keeper {
        host,
        retention_ms: retention,
        deletion_timeout_ms: timeout,
    };
    controller::run(
        host,
        Config::from_env(host, RECONCILER, &KEPT)?,
        &keeper,
        full,
    )
}

/// One object to decide on: its desired row and its live `__KIND__`.
type Item = Pair<Desired>;

struct Keeper<'a> {
    host: &'a dyn Capabilities,
    retention_ms: i64,
    deletion_timeout_ms: i64,
}

impl controller::Reconciler for Keeper<'_> {
    type Item = Item;

    fn key(&self, item: &Item) -> String {
        item.key.clone()
    }

    fn fingerprint(&self, item: &Item) -> String {
        item.desired
            .as_ref()
            .map(Desired::fingerprint)
            .unwrap_or_default()
    }

    fn owns(&self, object: &Object) -> bool {
        crate::is_ours(object)
    }

    fn sources(&self) -> Vec<Box<dyn Follow + '_>> {
        let feed = Feed::new(self.host, &FEED, FEED_COUNTER);
        vec![
            controller::feed(feed),
            controller::watching(self.host, crate::ours()),
        ]
    }

    fn read_all(&self, visit: &mut dyn FnMut(Item) -> ControlFlow<()>) -> Result<(), String> {
        let rows =
            crate::desired_rows(self.host, None).map_err(|e| format!("reading the rows: {e}"))?;
        Pair::all(self.host, &crate::ours(), rows, Desired::key, visit)
            .map_err(|e| format!("listing the {KIND}s: {e}"))
    }

    fn read(&self, named: &[Named]) -> Result<Vec<Item>, String> {
        let rows = crate::desired_rows(self.host, Some(&Named::keys(named)))
            .map_err(|e| format!("reading the rows: {e}"))?;
        Ok(Pair::at(
            self.host,
            &crate::ours(),
            named,
            rows,
            Desired::key,
        ))
    }

    fn reconcile(&self, ctx: &mut Context<'_>, item: &Item) -> Result<Action, Error> {
        let desired = item.desired.as_ref();
        let Some(live) = item.live.clone()? else {
            return match desired {
                Some(d) if d.deleting_since.is_none() => {
                    let made = ctx.create(d.object())?;
                    ctx.record(&made, Event::normal("Created", "Create", "made as desired"));
                    Ok(Action::Done)
                }
                Some(d) => self.forget_if_done(ctx, d),
                None => Ok(Action::Done),
            };
        };
        let wanted = desired.filter(|d| d.deleting_since.is_none());
        if wanted.is_none() && !crate::is_ours(&live) {
            return Ok(Action::Done); // nothing of ours is there, and nothing wants its name
        }
        // The write helpers refuse an object in the way that is not ours: reported, and tried
        // again with backoff until it is gone.
        match wanted.filter(|d| live.label(UID_LABEL) == Some(&d.uid)) {
            // Deleted by someone else while wanted: let it go; the next pass makes it again.
            Some(d) => ctx.finalized(
                &live,
                FINALIZER,
                |ctx, live| put_back(ctx, d, live),
                |_, _| Ok(Action::Done),
            ),
            None => self.remove(ctx, &item.key, live, desired),
        }
    }
}

/// Patches the content back where it drifted, field by field.
fn put_back(ctx: &mut Context<'_>, d: &Desired, live: &Object) -> Result<Action, Error> {
    if !d.held_by(live) {
        let updated = ctx.patch(live, Patch::set_fields(&d.content))?;
        ctx.record(
            &updated,
            Event::normal("Updated", "Update", "content put back as desired"),
        );
    }
    Ok(Action::Done)
}

impl Keeper<'_> {
    /// Deletes an object of ours that no wanted row stands for, and lets it go; a deletion asked
    /// for is reported while others' finalizers hold the object.
    fn remove(
        &self,
        ctx: &mut Context<'_>,
        key: &str,
        live: Object,
        desired: Option<&Desired>,
    ) -> Result<Action, Error> {
        let deleting = Event::normal("Deleting", "Delete", "its desired state was deleted");
        let Some(held) = ctx.let_go(live, FINALIZER, deleting)? else {
            return Ok(Action::Done);
        };
        if let Some(since) = desired.and_then(|d| d.deleting_since) {
            let (item, age) = (format!("__JOB_TYPE__/{key}"), ctx.now_ms() - since);
            ctx.deleting_if(DeletionInFlight::held(
                item,
                age,
                self.deletion_timeout_ms,
                &held,
                FINALIZER,
            ));
        }
        Ok(Action::Done)
    }

    /// A deletion whose object is gone: its row (the COMPLETE job) is kept for the retention,
    /// then forgotten, guarded by the uid read; the pass comes back for it then.
    fn forget_if_done(&self, ctx: &mut Context<'_>, d: &Desired) -> Result<Action, Error> {
        let Some(since) = d.deleting_since else {
            return Ok(Action::Done);
        };
        let left = since + self.retention_ms - ctx.now_ms();
        if left > 0 {
            return Ok(Action::Again(left));
        }
        let guard = [
            d.namespace.clone().into(),
            d.name.clone().into(),
            d.uid.clone().into(),
        ];
        ctx.execute(
            "DELETE FROM __SNAKE___desired WHERE namespace = $1 AND name = $2 AND uid = $3 \
             AND deleting_since IS NOT NULL",
            &guard,
        )?;
        Ok(Action::Done)
    }
}
