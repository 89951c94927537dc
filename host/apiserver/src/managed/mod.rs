//! Server-side apply field ownership: the `metadata.managedFields` entries of `operation: Apply`,
//! one per field manager, so that an apply removes the fields its manager applied before and no
//! longer does.
//!
//! What lethe needs is one manager (`lethe`, forcing) applying its own objects, so ownership is
//! kept only as far as that needs: other writes (create, update, patch) record no `Update`
//! entries, and an apply never fails on a conflict: it takes the fields it changes from the
//! other managers, as `force=true` does on a real server. A field the applier stops applying
//! stays while another manager still owns it. An object applied to for the first time has its
//! fields owned by `before-first-apply`, as on the real server, so an apply never removes what
//! someone else wrote.
//!
//! Field sets are paths of fieldsV1 elements: map fields (`f:name`), the items of associative
//! lists by their keys (`k:{"name":"a"}`) and the values of set lists (`v:"x"`), so that two
//! managers can own different items of one list, as in structured-merge-diff. Which lists are
//! associative comes from the CRD's schema (`x-kubernetes-list-type`) for custom resources and
//! from a table of the built-in kinds' list types; every other list is atomic.

mod apply;
mod entries;
mod fieldset;
mod merge;
mod schema;

pub use apply::{Apply, apply};
pub use entries::{Writer, field_manager_causes, valid_entries};
pub use fieldset::Scope;
pub use merge::merge;
pub use schema::KindSchema;

#[cfg(test)]
mod tests;
