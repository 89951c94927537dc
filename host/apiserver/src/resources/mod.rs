//! The resource registry: built-in kinds, custom resources from CRDs, discovery and OpenAPI documents.

mod builtins;
mod crd;
mod def;
mod discovery;

pub use builtins::{builtins, stored_def};
pub use crd::{crd_deprecation_warning, crd_preferred_version, defs_from_crd};
pub use def::{ALL_VERBS, CRD_KEY, NS_KEY, NameRule, ResourceDef, Shape};
pub use discovery::{
    aggregated_discovery, group_json, groups, openapi_v3_doc, openapi_v3_index, resource_list,
};
