//! Reading the few fields the invariants look at straight from a stored object's JSON.

use serde_json::Value as Json;

/// The string at `pointer`, or empty.
pub fn text(o: &Json, pointer: &str) -> String {
    opt(o, pointer).unwrap_or_default()
}

/// The string at `pointer`, if there is one.
pub fn opt(o: &Json, pointer: &str) -> Option<String> {
    o.pointer(pointer)
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
