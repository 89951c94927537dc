//! The Event row, whose cells are derived from fields of either Event API, not read from one.

use crate::table::cells::{age, timestamp};
use serde_json::{Value, json};

/// The real printer's Event row, wide: LAST SEEN, TYPE, REASON, OBJECT, SUBOBJECT, SOURCE,
/// MESSAGE, FIRST SEEN, COUNT, NAME.
pub fn event_cells(o: &Value) -> Vec<Value> {
    let first = if timestamp(&o["firstTimestamp"]).is_some() {
        age(&o["firstTimestamp"])
    } else {
        age(&o["eventTime"])
    };
    let mut last = if timestamp(&o["lastTimestamp"]).is_some() {
        age(&o["lastTimestamp"])
    } else {
        first.clone()
    };
    let mut count = o["count"].as_i64().unwrap_or(0);
    if o["series"].is_object() {
        last = age(&o["series"]["lastObservedTime"]);
        count = o["series"]["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let involved = &o["involvedObject"];
    let kind = s(&involved["kind"]).to_lowercase();
    let target = match involved["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    let first_non_empty = |a: &Value, b: &Value| {
        a.as_str()
            .filter(|x| !x.is_empty())
            .or_else(|| b.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let component = first_non_empty(&o["source"]["component"], &o["reportingComponent"]);
    let instance = first_non_empty(&o["source"]["host"], &o["reportingInstance"]);
    let source = match (component.is_empty(), instance.is_empty()) {
        (true, _) => "<unknown>".to_string(),
        (false, true) => component,
        (false, false) => format!("{component}, {instance}"),
    };
    vec![
        json!(last),
        json!(s(&o["type"])),
        json!(s(&o["reason"])),
        json!(target),
        json!(s(&involved["fieldPath"])),
        json!(source),
        json!(s(&o["message"]).trim()),
        json!(first),
        json!(count),
        json!(s(&o["metadata"]["name"])),
    ]
}
