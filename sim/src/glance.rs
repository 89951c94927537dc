//! Reading the few fields the invariants look at straight from a stored object's JSON.

use lethe_guest::fake::FakeCluster;
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// The string at `pointer`, or empty.
pub fn text(o: &Json, pointer: &str) -> String {
    opt(o, pointer).unwrap_or_default()
}

/// The string at `pointer`, if there is one.
pub fn opt(o: &Json, pointer: &str) -> Option<String> {
    lethe_guest::kube::at(o, pointer)
        .and_then(Json::as_str)
        .map(str::to_string)
}

/// Whether the object carries a deletionTimestamp.
pub fn deleting(o: &Json) -> bool {
    !o["metadata"]["deletionTimestamp"].is_null()
}

/// Its finalizers.
pub fn finalizers(o: &Json) -> Vec<String> {
    o["metadata"]["finalizers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|f| f.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Its label `key`, if it has it.
pub fn label(o: &Json, key: &str) -> Option<String> {
    o["metadata"]["labels"][key].as_str().map(str::to_string)
}

/// What the invariants compare of every object, whatever its kind.
#[derive(Clone)]
pub struct Meta {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.resourceVersion`: it changes with every write.
    pub resource_version: String,
    /// Whether it carries a deletionTimestamp.
    pub deleting: bool,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
}

/// The object's [`Meta`].
pub fn meta(o: &Json) -> Meta {
    Meta {
        name: text(o, "/metadata/name"),
        resource_version: text(o, "/metadata/resourceVersion"),
        deleting: deleting(o),
        finalizers: finalizers(o),
    }
}

/// What `read` makes of every stored object of `kind`, by uid.
pub fn by_uid<T>(
    kube: &FakeCluster,
    kind: &str,
    mut read: impl FnMut(&Json) -> T,
) -> BTreeMap<String, T> {
    kube.glance(kind, |o| (text(o, "/metadata/uid"), read(o)))
        .into_iter()
        .collect()
}
