//! What the reconciler tells a person in the cluster, where `kubectl describe` and `kubectl get`
//! show it: Events of what it did and of what holds it up, and the conditions of each org and
//! space, written through their status subresource.
//!
//! | condition  | not being deleted                               | being deleted |
//! |------------|--------------------------------------------------|---------------|
//! | `Ready`    | True once its finalizer and namespace are in place; False with the step that failed | False (`Deleting`) |
//! | `Deleting` | —                                                | True while its cleanup is under way |
//! | `Blocked`  | True while something not lethe's is in the way of its namespace | the same, or while others' finalizers hold it once lethe's cleanup is done |
//!
//! Each carries the `observedGeneration` it was decided on. They say what the deletion job
//! says: a `Blocked` deletion's job is `FAILED` with the same message (both read the
//! `cf.lethe.dev/blocked-by` annotation's cause).

use lethe_guest::conditions::{Condition, condition, status_patch};
use lethe_guest::env::{Env, Level};
use lethe_guest::events::Event;
use lethe_guest::kube::{Identity, Kube, KubeError, Object};

use crate::FINALIZER;

/// The `reportingController` of the cf reconciler's Events.
pub const CONTROLLER: &str = "lethe.dev/cf-reconciler";

/// The Event of what blocks `object` changing to `blocked_by` (`None`: nothing any more).
pub fn blocked<'a>(object: &Object, blocked_by: Option<&'a str>) -> Event<'a> {
    let deleting = object.metadata.deletion_timestamp.is_some();
    match blocked_by {
        Some(in_the_way) => Event::warning(
            if deleting {
                "DeletionBlocked"
            } else {
                "NamespaceBlocked"
            },
            if deleting { "Delete" } else { "MakeNamespace" },
            in_the_way,
        ),
        None => Event::normal(
            "Unblocked",
            if deleting { "Delete" } else { "MakeNamespace" },
            "nothing that is not lethe's is in the way any more",
        ),
    }
}

/// How a visit ended, as the conditions tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Visit {
    /// Nothing is left to do for the object now (a deletion's cleanup is done).
    Done,
    /// Its cleanup is under way.
    Waiting,
    /// A step failed: its reason (UpperCamelCase) and what went wrong.
    Failed(&'static str, String),
}

/// What holds `object` once lethe's cleanup is done (`visit`): the finalizers of others, which
/// only they can remove.
pub(crate) fn held_by(object: &Object, visit: &Visit) -> Option<String> {
    (*visit == Visit::Done)
        .then(|| held_by_others(object))
        .flatten()
}

/// What holds `object`, being deleted, once lethe's cleanup is done: others' finalizers, in the
/// words its `Blocked` condition and its job's warning use. `None` while none hold it.
pub(crate) fn held_by_others(object: &Object) -> Option<String> {
    let others: Vec<&str> = object
        .metadata
        .finalizers
        .iter()
        .map(String::as_str)
        .filter(|f| *f != FINALIZER)
        .collect();
    (object.metadata.deletion_timestamp.is_some() && !others.is_empty()).then(|| {
        format!(
            "lethe's cleanup is done; waiting for finalizers that are not lethe's: {}",
            others.join(", ")
        )
    })
}

/// Whether `object`'s conditions already say it is held by others' finalizers.
pub(crate) fn shows_held(object: &Object) -> bool {
    condition(object, "Blocked") == Some(("True", HELD))
}

/// The `Blocked` reason of an object held by others' finalizers.
const HELD: &str = "ForeignFinalizers";

/// The conditions of `object` after the visit that ended as `visit` says, with `blocked_by` in
/// its way, or `held` by others' finalizers (or nothing).
pub(crate) fn conditions(
    object: &Object,
    visit: &Visit,
    blocked_by: Option<&str>,
    held: Option<&str>,
) -> Vec<Condition> {
    let blocked = match (blocked_by, held) {
        (Some(in_the_way), _) => Condition::new("Blocked", true, "NotLethes", in_the_way),
        (None, Some(held)) => Condition::new("Blocked", true, HELD, held),
        (None, None) => Condition::new(
            "Blocked",
            false,
            "NothingInTheWay",
            "nothing that is not lethe's is in the way",
        ),
    };
    if let Some(since) = &object.metadata.deletion_timestamp {
        let under_way = match visit {
            Visit::Failed(_, e) => {
                format!("its cleanup is under way since {since}; the last step failed: {e}")
            }
            Visit::Done | Visit::Waiting => format!("its cleanup is under way since {since}"),
        };
        return vec![
            Condition::new("Ready", false, "Deleting", "it is being deleted"),
            Condition::new("Deleting", true, "CleaningUp", &under_way),
            blocked,
        ];
    }
    let ready = match visit {
        Visit::Done | Visit::Waiting => Condition::new(
            "Ready",
            true,
            "NamespaceReady",
            "its finalizer and its namespace are in place",
        ),
        Visit::Failed(reason, e) => Condition::new("Ready", false, reason, e),
    };
    vec![ready, blocked]
}

/// Writes `decided` as `object`'s conditions through its status subresource, when they differ
/// from what it shows and `allowed()` grants the write (the pass's upkeep allowance). Best
/// effort, like an Event: a failure is logged and the next visit tries again.
pub(crate) fn write_conditions(
    kube: &dyn Kube,
    env: &dyn Env,
    object: &Object,
    decided: &[Condition],
    allowed: &dyn Fn() -> bool,
) {
    let Some(patch) = status_patch(object, decided, env.now_ms()) else {
        return;
    };
    if !allowed() {
        return;
    }
    match kube.patch_status(&Identity::Privileged, &object.target, &patch) {
        Ok(_) | Err(KubeError::NotFound(_)) => {}
        Err(e) => env.log(
            Level::Warn,
            &format!(
                "writing the conditions of {} {}: {e}",
                object.target.kind, object.target.name
            ),
        ),
    }
}
