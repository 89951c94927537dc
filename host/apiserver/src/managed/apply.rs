//! Server-side apply: the fields it takes from other managers, the fields it drops, and its
//! entry.

use crate::managed::entries::{Writer, set_entries, sort_entries};
use crate::managed::fieldset::{
    Scope, applied_set, compare_objects, created_fields, from_fields_v1, to_fields_v1,
};
use crate::managed::merge::remove_all;
use crate::managed::schema::{FieldPath, KindSchema};
use serde_json::Value;
use std::collections::BTreeSet;

/// One server-side apply: what is applied, by whom, and under which rules.
pub struct Apply<'a> {
    /// The applied configuration.
    pub body: &'a Value,
    /// The field manager applying it.
    pub writer: &'a Writer<'a>,
    /// Which top-level fields the write may own.
    pub scope: Scope,
    /// The kind's schema: how its lists merge and which fields are atomic.
    pub schema: &'a KindSchema<'a>,
    /// The time recorded in the manager's entry.
    pub now: &'a str,
}

/// Server-side apply `a` onto `live` (already merged into `merged`): takes the fields the apply
/// changes from the other managers (as a forced apply does; there are no conflicts), removes the
/// fields this manager applied before and no longer does (unless someone else owns them), and
/// records the manager's entry. `live` is None on create. An object without entries has its
/// fields owned by `before-first-apply` first, as the real server.
pub fn apply(live: Option<&Value>, merged: &mut Value, a: &Apply) {
    let Apply {
        body,
        writer: w,
        scope,
        schema,
        now,
    } = *a;
    let applied = applied_set(body, scope, schema);
    let mut entries: Vec<Value> = live
        .and_then(|l| l["metadata"]["managedFields"].as_array().cloned())
        .unwrap_or_default();
    if let Some(live) = live
        && entries.is_empty()
    {
        let fields = created_fields(live, Scope::All, schema);
        if fields.as_object().is_some_and(|m| !m.is_empty()) {
            let before = Writer {
                manager: "before-first-apply",
                api_version: w.api_version,
                subresource: None,
            };
            entries.push(before.entry("Update", now, fields));
        }
    }
    let mut previous = BTreeSet::new();
    let mut previous_time = None;
    let mut others: Vec<(Value, BTreeSet<FieldPath>)> = vec![];
    for e in entries {
        let set = from_fields_v1(&e["fieldsV1"]);
        if w.is(&e, "Apply") {
            previous = set;
            previous_time = e["time"].as_str().map(str::to_string);
        } else {
            others.push((e, set));
        }
    }
    // The fields the apply changes are its own from now on.
    if let Some(live) = live {
        let (changed, _) = compare_objects(live, merged, scope, schema);
        for (e, set) in others.iter_mut() {
            let before = set.len();
            set.retain(|owned| !changed.contains(owned));
            if set.len() != before {
                e["fieldsV1"] = to_fields_v1(set);
            }
        }
    }
    // A field this manager stops applying stays when anyone, this apply included, owns it or
    // a field below it (a map this manager owned as a member stays while it applies fields
    // in it). Owning a map or an associative list as a member does not keep its other members.
    let dropped: Vec<&FieldPath> = previous.difference(&applied).collect();
    if !dropped.is_empty() {
        let owned: BTreeSet<&FieldPath> = others
            .iter()
            .flat_map(|(_, s)| s)
            .chain(applied.iter())
            .collect();
        let kept = |p: &FieldPath| {
            owned
                .range::<&FieldPath, _>(p..)
                .next()
                .is_some_and(|o| o.starts_with(p))
        };
        // Parents first, and nothing under a removed parent: removing a list item's key field
        // first would leave the item unnamable. The set is sorted, so the paths under a parent
        // follow it directly.
        let mut gone: Vec<&FieldPath> = vec![];
        for p in dropped {
            if gone.last().is_some_and(|g| p.starts_with(g)) || kept(p) {
                continue;
            }
            gone.push(p);
        }
        remove_all(merged, &gone, schema);
    }
    let mut out: Vec<Value> = others
        .into_iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(e, _)| e)
        .collect();
    // An unchanged field set keeps its time, so that a repeated apply changes nothing.
    let time = match previous_time {
        Some(t) if previous == applied => t,
        _ => now.to_string(),
    };
    out.push(w.entry("Apply", &time, to_fields_v1(&applied)));
    sort_entries(&mut out);
    set_entries(merged, out);
}
