//! Server-side apply: conflicts with other managers, forced take-overs, and the new entries.

use crate::managed::entries::{Writer, cap_update_entries, set_entries, sort_entries};
use crate::managed::fieldset::{
    Scope, applied_set, compare_objects, created_fields, from_fields_v1, path_string, to_fields_v1,
};
use crate::managed::merge::remove_all;
use crate::managed::schema::{FieldPath, KindSchema};
use crate::status::{ApiError, Cause};
use serde_json::{Value, json};
use std::collections::BTreeSet;

/// How a conflict names a manager: `"name"` for appliers, `"name" using v1` for updaters.
pub(super) fn manager_label(e: &Value) -> String {
    let mut name = json!(e["manager"].as_str().unwrap_or_default()).to_string();
    if let Some(sub) = e["subresource"].as_str().filter(|s| !s.is_empty()) {
        name = format!("{name} with subresource {}", json!(sub));
    }
    if e["operation"] == "Update" {
        format!(
            "{name} using {}",
            e["apiVersion"].as_str().unwrap_or_default()
        )
    } else {
        name
    }
}

/// The 409 of structured-merge-diff's conflicts (`fieldmanager.NewConflictError`).
pub(super) fn conflict_error(conflicts: &[(String, FieldPath)]) -> ApiError {
    let message = if let [(m, p)] = conflicts {
        format!(
            "Apply failed with 1 conflict: conflict with {m}: {}",
            path_string(p)
        )
    } else {
        let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
        managers.sort();
        managers.dedup();
        let mut parts = vec![];
        for m in managers {
            parts.push(format!("conflict with {m}:"));
            for (_, p) in conflicts.iter().filter(|(cm, _)| cm == m) {
                parts.push(format!("- {}", path_string(p)));
            }
        }
        format!(
            "Apply failed with {} conflicts: {}",
            conflicts.len(),
            parts.join("\n")
        )
    };
    let causes = conflicts
        .iter()
        .map(|(m, p)| Cause {
            reason: "FieldManagerConflict",
            message: format!("conflict with {m}"),
            field: path_string(p),
        })
        .collect();
    ApiError::new(409, "Conflict", message).with_details(crate::status::Details {
        causes,
        ..Default::default()
    })
}

/// One server-side apply: what is applied, by whom, and under which rules.
pub struct Apply<'a> {
    /// The applied configuration.
    pub body: &'a Value,
    /// The field manager applying it.
    pub writer: &'a Writer<'a>,
    /// Whether to take the fields other managers own instead of failing on the conflict.
    pub force: bool,
    /// Which top-level fields the write may own.
    pub scope: Scope,
    /// The kind's schema: how its lists merge and which fields are atomic.
    pub schema: &'a KindSchema<'a>,
    /// The time recorded in the manager's entry.
    pub now: &'a str,
}

/// Server-side apply `a` onto `live` (already merged into `merged`): checks conflicts with the
/// other managers over the fields the apply changes (taking them when `a.force`), removes the
/// fields this manager applied before and no longer does (unless someone else owns them), and
/// records the manager's entry. `live` is None on create. An object without entries has its
/// fields owned by `before-first-apply` first, as the real server.
pub fn apply(live: Option<&Value>, merged: &mut Value, a: &Apply) -> Result<(), ApiError> {
    let Apply {
        body,
        writer: w,
        force,
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
    let mut conflicts: Vec<(String, FieldPath)> = vec![];
    if let Some(live) = live {
        let (changed, _) = compare_objects(live, merged, scope, schema);
        for (e, set) in &others {
            for p in set.intersection(&changed) {
                conflicts.push((manager_label(e), p.clone()));
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&conflicts));
    }
    // Forcing takes the conflicting fields away from their owners.
    let mut lost: std::collections::HashMap<&str, BTreeSet<&FieldPath>> = Default::default();
    for (m, p) in &conflicts {
        lost.entry(m.as_str()).or_default().insert(p);
    }
    for (e, set) in others.iter_mut() {
        let Some(lost) = lost.get(manager_label(e).as_str()) else {
            continue;
        };
        let before = set.len();
        set.retain(|owned| !lost.contains(owned));
        if set.len() != before {
            e["fieldsV1"] = to_fields_v1(set);
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
    cap_update_entries(&mut out);
    sort_entries(&mut out);
    set_entries(merged, out);
    Ok(())
}
