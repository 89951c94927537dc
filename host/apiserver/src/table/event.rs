//! The Event row, whose cells are derived from fields of either Event API, not read from one.

use crate::table::cells::{age, timestamp};
use serde_json::{Value, json};

/// The real printer's Event row, narrow: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE. (The wide
/// SUBOBJECT, SOURCE, FIRST SEEN, COUNT and NAME are left out: `-o wide` shows these too.)
pub fn event_cells(o: &Value) -> Vec<Value> {
    let last = [
        &o["series"]["lastObservedTime"],
        &o["lastTimestamp"],
        &o["firstTimestamp"],
        &o["eventTime"],
    ]
    .into_iter()
    .find(|t| timestamp(t).is_some())
    .map_or_else(|| "<unknown>".to_string(), age);
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let involved = &o["involvedObject"];
    let kind = s(&involved["kind"]).to_lowercase();
    let target = match involved["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    vec![
        json!(last),
        json!(s(&o["type"])),
        json!(s(&o["reason"])),
        json!(target),
        json!(s(&o["message"]).trim()),
    ]
}
