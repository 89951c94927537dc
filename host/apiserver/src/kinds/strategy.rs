//! The one trait each kind's rules stand behind, in the steps where kube-apiserver's generic
//! registry calls a kind's `strategy.go`. Every hook does nothing by default, so a kind states
//! only what differs, and a custom resource or a plain kind takes the defaults throughout.

use crate::status::{ApiError, Cause};
use crate::store::Obj;
use crate::util::set_in;
use crate::verbs::{DeleteOpts, Sub};
use serde_json::{Value, json};

/// What a hook may read of the request.
pub struct Ctx<'a> {
    /// The object's name.
    pub name: &'a str,
}

/// The rules of one kind. The verbs call the hooks in this order: on create `check_create`,
/// then (with server-owned metadata set) `prepare_create`, `defaults` and `validate`;
/// on update `prepare_update` (every subresource), then for the object itself `defaults`,
/// `validate` and `validate_update`, and after the schema check `complete_update`; on delete
/// `check_delete`, `check_delete_stored`, then
/// `finalized_by_a_controller` and `mark_deleting`; when finalizers go, `held_by_spec`.
pub trait Strategy: Sync {
    /// Refuses a create before anything of it is touched (a CRD's whole definition).
    fn check_create(&self, _obj: &Value, _name: &str) -> Result<(), ApiError> {
        Ok(())
    }

    /// Sets what the kind's registry sets on create before defaulting: finalizers, a status,
    /// allocations.
    fn prepare_create(&self, _ctx: &Ctx, _obj: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// Fills in the kind's defaults, on create and on every update of the object itself.
    fn defaults(&self, _obj: &mut Value) {}

    /// The kind's own validation, on create and on every update of the object itself.
    fn validate(&self, _obj: &Value, _causes: &mut Vec<Cause>) {}

    /// Carries over what `sub`'s update may not set, from the stored object `old`.
    fn prepare_update(
        &self,
        _ctx: &Ctx,
        _old: &Obj,
        _new: &mut Value,
        _sub: Sub,
    ) -> Result<(), ApiError> {
        Ok(())
    }

    /// What an update of the object itself may not change.
    fn validate_update(&self, _old: &Value, _new: &Value) -> Vec<Cause> {
        vec![]
    }

    /// The last checks and defaults of an update of the object itself, after its schema check.
    fn complete_update(&self, _old: &Obj, _new: &mut Value) -> Result<(), ApiError> {
        Ok(())
    }

    /// Whether a PUT may replace the object without naming the version it replaces (kube's
    /// `AllowUnconditionalUpdate`).
    fn allows_unconditional_update(&self) -> bool {
        true
    }

    /// Refuses a delete before the object is read (namespaces the system needs).
    fn check_delete(&self, _name: &str) -> Result<(), ApiError> {
        Ok(())
    }

    /// Checks a delete against the stored object `cur`, before the generic preconditions (a kind
    /// whose storage checks them in its own words does so here).
    fn check_delete_stored(&self, _cur: &Obj, _opts: &DeleteOpts) -> Result<(), ApiError> {
        Ok(())
    }

    /// Whether a delete only marks the object even when it has no finalizers, leaving its
    /// removal to a controller (namespaces, whose contents go first).
    fn finalized_by_a_controller(&self) -> bool {
        false
    }

    /// What a delete that marks the object sets besides `deletionTimestamp`.
    fn mark_deleting(&self, obj: &mut Value) {
        set_in(obj, &["metadata", "deletionGracePeriodSeconds"], json!(0));
    }

    /// Whether a marked object whose metadata finalizers are all gone still waits (a namespace
    /// for its spec finalizers).
    fn held_by_spec(&self, _obj: &Value) -> bool {
        false
    }
}

/// A built-in kind with no rules of its own.
pub struct Plain;

impl Strategy for Plain {}

/// Custom resources: their schema is checked by the generic verbs; a PUT must name the version
/// it replaces.
pub struct CustomResource;

impl Strategy for CustomResource {
    fn allows_unconditional_update(&self) -> bool {
        false
    }
}
