//! [`Context`]: the only way a reconciler writes, with the guards every write needs.

use std::fmt;

use serde_json::{Value as Json, json};

use super::{Action, Error};
use crate::env::Env;
use crate::events::{Event, Recorder};
use crate::finalizer::{self, Case};
use crate::kube::{
    DeleteOptions, Deletion, Identity, Kube, KubeError, Object, Patch, Propagation,
    object_from_json,
};
use crate::lease::Lease;
use crate::reconciler::{DeletionInFlight, PassReport};
use crate::sql::{Sql, Value};

/// Every write of a pass is made as lethe's own identity.
const PRIVILEGED: &Identity = &Identity::Privileged;

/// The write helpers of one pass, and what it reports. Every write is made as lethe's own
/// identity, after the Lease is kept, to an object the reconciler owns, guarded by what was read.
pub struct Context<'a> {
    pub(super) kube: &'a dyn Kube,
    pub(super) env: &'a dyn Env,
    pub(super) sql: &'a dyn Sql,
    pub(super) lease: &'a Lease<'a>,
    pub(super) owns: &'a dyn Fn(&Object) -> bool,
    pub(super) events: Recorder<'a>,
    pub(super) report: PassReport,
    pub(super) lost: bool,
}

impl Context<'_> {
    /// The time now.
    pub fn now_ms(&self) -> i64 {
        self.env.now_ms()
    }

    fn keep_lease(&mut self) -> Result<(), Error> {
        self.lease.keep(self.env.now_ms()).map_err(|lost| {
            self.lost = true;
            lost.into()
        })
    }

    fn guard(&mut self, object: &Object) -> Result<(), Error> {
        self.keep_lease()?;
        if !(self.owns)(object) {
            let t = &object.target;
            let at = t
                .namespace
                .as_deref()
                .map(|ns| format!("{ns}/"))
                .unwrap_or_default();
            return Err(Error::NotOurs(format!("{} {at}{}", t.kind, t.name)));
        }
        Ok(())
    }

    /// Creates `object`, which must carry the reconciler's marks.
    pub fn create(&mut self, object: Json) -> Result<Object, Error> {
        self.guard(&object_from_json(object.clone()))?;
        let made = self.kube.create(PRIVILEGED, &object)?;
        self.report.created += 1;
        Ok(made)
    }

    /// Patches `live` as read: the patch is made to carry the resourceVersion read, which the API
    /// server takes as a precondition, so a change made since the read fails the write with
    /// `Conflict` (a JSON patch's `test` would fail it as `Invalid`, which parks).
    pub fn patch(&mut self, live: &Object, patch: Patch) -> Result<Object, Error> {
        self.guard(live)?;
        let version = &live.metadata.resource_version;
        let guarded = match patch {
            Patch::Json(Json::Array(ops)) => {
                let guard =
                    json!({"op": "replace", "path": "/metadata/resourceVersion", "value": version});
                Patch::Json(Json::Array(std::iter::once(guard).chain(ops).collect()))
            }
            Patch::Merge(Json::Object(mut body)) => {
                let metadata = body.entry("metadata").or_insert_with(|| json!({}));
                if let Json::Object(m) = metadata {
                    m.insert("resourceVersion".into(), version.as_str().into());
                }
                Patch::Merge(Json::Object(body))
            }
            other => other,
        };
        let patched = self.kube.patch(PRIVILEGED, &live.target, &guarded)?;
        self.report.updated += 1;
        Ok(patched)
    }

    /// Deletes `live` as read, guarded by its uid (another object of its name is never deleted:
    /// `Conflict`), its dependents collected afterwards. One already gone counts as deleted.
    pub fn delete(&mut self, live: &Object) -> Result<Deletion, Error> {
        self.guard(live)?;
        let how = DeleteOptions {
            propagation: Some(Propagation::Background),
            precondition_uid: Some(live.metadata.uid.clone()),
        };
        let deletion = match self.kube.delete(PRIVILEGED, &live.target, &how) {
            Err(KubeError::NotFound(_)) => Deletion::Done,
            other => other?,
        };
        self.report.deleted += 1;
        Ok(deletion)
    }

    /// Visits `live` under the reconciler's `finalizer`, as kube-runtime's `finalizer()` does:
    /// without it, adds it (guarded; the change that makes brings the next visit); with it,
    /// `apply`; being deleted with it, `cleanup`, and once that is [`Action::Done`] removes it.
    /// Being deleted without it, there is nothing of ours to do.
    pub fn finalized(
        &mut self,
        live: &Object,
        finalizer: &str,
        apply: impl FnOnce(&mut Self, &Object) -> Result<Action, Error>,
        cleanup: impl FnOnce(&mut Self, &Object) -> Result<Action, Error>,
    ) -> Result<Action, Error> {
        match finalizer::case(live, finalizer) {
            Case::Add => {
                let add = finalizer::add_op(live, finalizer);
                self.patch(live, Patch::Json(json!([add])))?;
                Ok(Action::Done)
            }
            Case::Apply => apply(self, live),
            Case::Done => Ok(Action::Done),
            Case::Cleanup(index) => match cleanup(self, live)? {
                Action::Done => match self.patch(live, finalizer::remove_patch(index, finalizer)) {
                    Ok(_) | Err(Error::Kube(KubeError::NotFound(_))) => Ok(Action::Done),
                    // Its `test` found another entry at the index: the list changed since the
                    // read, which the next visit reads again (the API server says Invalid).
                    Err(Error::Kube(KubeError::Invalid(e))) => {
                        Err(Error::Kube(KubeError::Conflict(e)))
                    }
                    Err(e) => Err(e),
                },
                other => Ok(other),
            },
        }
    }

    /// Lets `live` go, as a reconciler does with an object of its own that no desired state stands
    /// for: deletes it as read (unless it is being deleted already; `event` is recorded then) and
    /// removes `finalizer`. `Some` is the object while others' finalizers still hold it; `None`
    /// once it is gone, or when another object of its name stands there now (the uid
    /// precondition failed: the next visit decides on that one).
    pub fn let_go(
        &mut self,
        live: Object,
        finalizer: &str,
        event: Event<'_>,
    ) -> Result<Option<Object>, Error> {
        let live = match live.metadata.deletion_timestamp {
            Some(_) => live,
            None => match self.delete(&live) {
                Ok(Deletion::Done) | Err(Error::Kube(KubeError::Conflict(_))) => return Ok(None),
                Err(e) => return Err(e),
                Ok(Deletion::Pending(pending)) => {
                    self.record(&pending, event);
                    *pending
                }
            },
        };
        let done = |_: &mut Self, _: &Object| Ok(Action::Done);
        self.finalized(&live, finalizer, done, done)?;
        Ok((!finalizer::is_last(&live, finalizer)).then_some(live))
    }

    /// Runs one SQL write of the reconciler's own, once the Lease is kept: a host that lost it
    /// writes nothing more, in SQL as in the cluster.
    pub fn execute(&mut self, statement: &str, params: &[Value]) -> Result<u64, Error> {
        self.keep_lease()?;
        Ok(self.sql.execute(statement, params)?)
    }

    /// Records an Event about `regarding` (best effort, folded when repeated).
    pub fn record(&self, regarding: &Object, event: Event<'_>) {
        self.events.record(regarding, event);
    }

    /// Reports a deletion still under way, if there is one.
    pub fn deleting_if(&mut self, deletion: Option<DeletionInFlight>) {
        self.report.deletions.extend(deletion);
    }
}

impl fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("report", &self.report)
            .finish_non_exhaustive()
    }
}
