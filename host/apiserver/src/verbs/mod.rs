//! The verbs (create, update, patch, delete) with the real API server's semantics, independent of
//! HTTP, so the front and the controllers write alike.
//! Each verb takes the warnings recorder of the request it serves.

mod create;
mod delete;
mod meta;
mod options;
mod patch;
mod update;

pub(crate) use create::create;
pub(crate) use delete::{delete, finalize_namespace, remove_finalizer};
pub(crate) use meta::validate_name;
pub(crate) use options::{DeleteOpts, Deleted, Outcome, PatchType, Sub, WriteOpts, WriteTarget};
pub(crate) use patch::patch;
pub(crate) use update::update;
