//! The two shapes of an Event: the core `v1` shape Events are stored in, and the
//! `events.k8s.io/v1` view of the same objects (`pkg/apis/events/v1` conversion). A leaf: the
//! registry converts through it, and the events.k8s.io rules build on it.

use serde_json::{Map, Value, json};

/// The group version of the second shape.
pub const API_VERSION: &str = "events.k8s.io/v1";

/// Where Events of both shapes are stored.
pub const EVENTS_KEY: &str = "/events";

/// Fields with the same name in both shapes.
const SHARED: &[&str] = &[
    "metadata",
    "reason",
    "type",
    "action",
    "related",
    "eventTime",
    "reportingInstance",
    "series",
];

/// `(core name, events.k8s.io/v1 name)` of the renamed fields.
pub const RENAMED: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
];

/// The `events.k8s.io/v1` shape of a stored (core) Event.
pub fn from_core(core: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!(API_VERSION));
    copy(core, &mut out, SHARED.iter().map(|f| (*f, *f)));
    copy(core, &mut out, RENAMED.iter().copied());
    // Empty deprecated fields are left out, as the conversion of the zero values leaves them.
    for f in ["deprecatedSource", "deprecatedCount"] {
        if out
            .get(f)
            .is_some_and(|v| v.as_object().is_some_and(Map::is_empty) || v.as_i64() == Some(0))
        {
            out.remove(f);
        }
    }
    Value::Object(out)
}

/// The stored (core) shape of an `events.k8s.io/v1` Event.
pub fn to_core(v1: &Value) -> Value {
    let mut out = Map::new();
    out.insert("kind".into(), json!("Event"));
    out.insert("apiVersion".into(), json!("v1"));
    copy(v1, &mut out, SHARED.iter().map(|f| (*f, *f)));
    copy(v1, &mut out, RENAMED.iter().map(|(core, v1)| (*v1, *core)));
    Value::Object(out)
}

fn copy<'a>(
    from: &Value,
    to: &mut Map<String, Value>,
    names: impl Iterator<Item = (&'a str, &'a str)>,
) {
    for (src, dst) in names {
        if let Some(v) = from.get(src).filter(|v| !v.is_null()) {
            to.insert(dst.to_string(), v.clone());
        }
    }
}
