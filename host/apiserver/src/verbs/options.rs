//! What a write is asked to do and what it did: write and delete options, the subresource it
//! goes through, the patch type, and the outcomes.

use crate::managed::Scope;
use crate::resources::ResourceDef;
use crate::store::Obj;
use std::sync::Arc;

/// How a write is carried out.
#[derive(Debug, Clone, Default)]
pub struct WriteOpts {
    /// `dryRun=All`: validate and compute, store nothing.
    pub dry_run: bool,
    /// `fieldValidation=Strict`: unknown fields of custom resources are an error, not pruned.
    pub strict: bool,
    /// `fieldManager` (required for server-side apply).
    pub field_manager: Option<String>,
    /// The shape a patch is written against (`events.k8s.io/v1` for an Event patched through
    /// that API): the stored object is shown in it, patched, and stored back.
    pub shape: crate::resources::Shape,
}

/// What a write of `sub` may own.
pub(crate) fn scope(def: &ResourceDef, sub: Sub) -> Scope {
    match sub {
        Sub::Status => Scope::StatusOnly,
        _ if def.status_subresource => Scope::NoStatus,
        _ => Scope::All,
    }
}

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sub {
    /// The object itself (with a `status` subresource, everything but status).
    Main,
    /// The `status` subresource: only the status changes.
    Status,
    /// A Namespace's `finalize` subresource: only `spec.finalizers` changes.
    Finalize,
}

impl Sub {
    /// The name recorded in managedFields.
    pub(crate) fn name(self) -> Option<&'static str> {
        match self {
            Sub::Main => None,
            Sub::Status => Some("status"),
            Sub::Finalize => Some("finalize"),
        }
    }
}

/// The part of one object a write addresses: its resource, namespace (ignored for a
/// cluster-scoped resource) and name, and the subresource the write goes through.
#[derive(Clone, Copy)]
pub struct WriteTarget<'a> {
    /// The resource, as stored.
    pub def: &'a ResourceDef,
    /// The namespace of the request.
    pub ns: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// The subresource written through.
    pub sub: Sub,
}

impl<'a> WriteTarget<'a> {
    /// The namespace under which the store keeps the object: none for a cluster-scoped one.
    pub(crate) fn ns_key(&self) -> &'a str {
        self.def.ns_key(self.ns)
    }
}

/// What an update turns into.
pub enum Outcome {
    /// The object as stored by the update.
    Stored(Arc<Obj>),
    /// The last finalizer went away: the object is gone (final state).
    Removed(Arc<Obj>),
}

impl Outcome {
    /// The object the update left, stored or final.
    pub fn obj(&self) -> &Arc<Obj> {
        match self {
            Outcome::Stored(o) | Outcome::Removed(o) => o,
        }
    }
}

/// The kind of PATCH, chosen by its Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// JSON merge patch (RFC 7386), `application/merge-patch+json`.
    Merge,
    /// JSON patch (RFC 6902), `application/json-patch+json`.
    Json,
    /// Strategic merge patch, `application/strategic-merge-patch+json`: lists merge by their
    /// patch merge keys.
    Strategic,
    /// Server-side apply, `application/apply-patch+yaml` (or `+json`); needs a `fieldManager`.
    Apply,
}

impl PatchType {
    /// The patch type of a Content-Type header, parameters ignored; None for a media type that is
    /// not a patch type (a 415).
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let base = ct.split(';').next().unwrap_or_default().trim();
        match base {
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/json-patch+json" => Some(PatchType::Json),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// Options of a DELETE.
#[derive(Debug, Clone, Default)]
pub struct DeleteOpts {
    /// `propagationPolicy`: `Orphan`, `Background` or `Foreground`; None takes the kind's default.
    pub propagation: Option<String>,
    /// The deprecated `orphanDependents`: true means `Orphan`, false `Background`.
    pub orphan_dependents: Option<bool>,
    /// `preconditions.uid`: the delete fails with a 409 unless the stored object has this uid.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`: the delete fails with a 409 unless the stored object is at
    /// this version.
    pub resource_version: Option<String>,
    /// `dryRun=All`: report what the delete would do, change nothing.
    pub dry_run: bool,
}

/// What a DELETE did to the object.
pub enum Deleted {
    /// Removed at once (final state).
    Gone(Arc<Obj>),
    /// Marked for deletion, waiting on finalizers.
    Pending(Arc<Obj>),
}
