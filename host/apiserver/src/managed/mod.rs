//! Server-side apply field ownership: `metadata.managedFields` entries of `operation: Apply`,
//! with the conflicts and forced take-overs of structured-merge-diff.
//!
//! Every other write (create, update, patch) records an `operation: Update` entry for its
//! manager (the `fieldManager` parameter, else the User-Agent's prefix) owning the fields it
//! set or changed, which it takes from the other managers.
//!
//! Field sets are paths of fieldsV1 elements: map fields (`f:name`), the items of associative
//! lists by their keys (`k:{"name":"a"}`) and the values of set lists (`v:"x"`), so that two
//! managers can own different items of one list, as in structured-merge-diff. Which lists are
//! associative comes from the CRD's schema (`x-kubernetes-list-type`) for custom resources and
//! from a table of the built-in kinds' list types; every other list is atomic.
//!

mod apply;
mod entries;
mod fieldset;
mod merge;
mod schema;

pub use apply::{Apply, apply};
pub use entries::{
    Writer, field_manager_causes, manager_from_user_agent, record_create, record_update,
    valid_entries,
};
pub use fieldset::Scope;
pub use merge::merge;
pub use schema::{FieldPath, KindSchema, ListKind};

#[cfg(test)]
mod tests;
