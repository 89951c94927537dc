//! Server-side apply field ownership: `metadata.managedFields` entries of `operation: Apply`,
//! with the conflicts and forced take-overs of structured-merge-diff.
//!
//! Simplifications: field sets are the leaves of the applied configuration (maps recurse,
//! lists are atomic), and only Apply managers own fields (writes of other kinds do not record
//! Update managers).

use crate::status::{ApiError, Cause};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

pub type FieldPath = Vec<String>;

/// Fields the server strips from every field set.
const STRIPPED_META: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

fn leaves(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                prefix.push(k.clone());
                leaves(child, prefix, out);
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The fields an applied configuration sets. `reset_status`: the kind has a status
/// subresource, so the main resource's apply neither sets nor owns status.
pub fn applied_set(body: &Value, reset_status: bool) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    let Some(m) = body.as_object() else {
        return out;
    };
    for (k, v) in m {
        if k == "apiVersion" || k == "kind" || (reset_status && k == "status") {
            continue;
        }
        if k == "metadata" {
            if let Some(meta) = v.as_object() {
                for (mk, mv) in meta {
                    if STRIPPED_META.contains(&mk.as_str()) {
                        continue;
                    }
                    leaves(mv, &mut vec![k.clone(), mk.clone()], &mut out);
                }
            }
            continue;
        }
        leaves(v, &mut vec![k.clone()], &mut out);
    }
    out
}

/// The `fieldsV1` tree of a set.
pub fn to_fields_v1(set: &BTreeSet<FieldPath>) -> Value {
    let mut root = Map::new();
    for p in set {
        let mut cur = &mut root;
        for seg in p {
            let e = cur
                .entry(format!("f:{seg}"))
                .or_insert_with(|| Value::Object(Map::new()));
            if !e.is_object() {
                *e = Value::Object(Map::new());
            }
            let Value::Object(next) = e else {
                break;
            };
            cur = next;
        }
    }
    Value::Object(root)
}

/// The set a `fieldsV1` tree describes (fields `f:` only; list keys are owned atomically by
/// their list).
pub fn from_fields_v1(v: &Value) -> BTreeSet<FieldPath> {
    fn walk(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        let Some(m) = v.as_object() else {
            return;
        };
        let fields: Vec<(&String, &Value)> =
            m.iter().filter(|(k, _)| k.starts_with("f:")).collect();
        if (fields.is_empty() || m.contains_key(".")) && !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        for (k, child) in fields {
            prefix.push(k[2..].to_string());
            walk(child, prefix, out);
            prefix.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(v, &mut vec![], &mut out);
    out
}

/// `.data.a`, as structured-merge-diff prints a path.
pub fn path_string(p: &FieldPath) -> String {
    p.iter().map(|s| format!(".{s}")).collect()
}

fn get<'a>(v: &'a Value, p: &FieldPath) -> Option<&'a Value> {
    let mut cur = v;
    for seg in p {
        cur = cur.as_object()?.get(seg)?;
    }
    Some(cur)
}

fn remove(v: &mut Value, p: &FieldPath) {
    let Some((last, parent)) = p.split_last() else {
        return;
    };
    let mut cur = v;
    for seg in parent {
        match cur.as_object_mut().and_then(|m| m.get_mut(seg)) {
            Some(next) => cur = next,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(last);
    }
}

fn overlaps(a: &FieldPath, b: &FieldPath) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// How a conflict names a manager: `"name"` for appliers, `"name" using v1` for updaters.
fn manager_label(e: &Value) -> String {
    let name = json!(e["manager"].as_str().unwrap_or_default()).to_string();
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
fn conflict_error(conflicts: &[(String, FieldPath)]) -> ApiError {
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
    let mut e = ApiError::new(409, "Conflict", message);
    e.details = Some(Box::new(crate::status::Details {
        causes,
        ..Default::default()
    }));
    e
}

/// Server-side apply of `body` by `manager` onto `live` (already merged into `merged`):
/// checks conflicts with the other managers (taking their fields when `force`), removes the
/// fields this manager applied before and no longer does (unless someone else owns them), and
/// records the manager's entry. `live` is None on create.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    live: Option<&Value>,
    merged: &mut Value,
    body: &Value,
    manager: &str,
    force: bool,
    api_version: &str,
    reset_status: bool,
    now: &str,
) -> Result<(), ApiError> {
    let applied = applied_set(body, reset_status);
    let entries: Vec<Value> = live
        .and_then(|l| l["metadata"]["managedFields"].as_array().cloned())
        .unwrap_or_default();
    let is_mine = |e: &Value| e["manager"] == manager && e["operation"] == "Apply";
    let mut previous = BTreeSet::new();
    let mut previous_time = None;
    let mut others: Vec<(Value, BTreeSet<FieldPath>)> = vec![];
    for e in entries {
        let set = from_fields_v1(&e["fieldsV1"]);
        if is_mine(&e) {
            previous = set;
            previous_time = e["time"].as_str().map(str::to_string);
        } else {
            others.push((e, set));
        }
    }
    let mut conflicts: Vec<(String, FieldPath)> = vec![];
    if let Some(live) = live {
        for (e, set) in &others {
            for owned in set {
                for p in applied.iter().filter(|p| overlaps(p, owned)) {
                    if get(live, p) != get(body, p) {
                        conflicts.push((manager_label(e), owned.clone()));
                        break;
                    }
                }
            }
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(&conflicts));
    }
    // Forcing takes the conflicting fields away from their owners.
    for (e, set) in others.iter_mut() {
        let label = manager_label(e);
        set.retain(|owned| !conflicts.iter().any(|(m, c)| *m == label && c == owned));
    }
    for p in previous.difference(&applied) {
        if !others.iter().any(|(_, s)| s.iter().any(|o| overlaps(o, p))) {
            remove(merged, p);
        }
    }
    let mut out: Vec<Value> = others
        .into_iter()
        .filter(|(_, s)| !s.is_empty())
        .map(|(mut e, s)| {
            e["fieldsV1"] = to_fields_v1(&s);
            e
        })
        .collect();
    out.push(json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        // An unchanged field set keeps its time, so that a repeated apply changes nothing.
        "time": match previous_time {
            Some(t) if previous == applied => t,
            _ => now.to_string(),
        },
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(&applied),
    }));
    // Apply entries first, then by time and manager, as the field manager sorts them.
    out.sort_by(|a, b| {
        (
            a["operation"].as_str(),
            a["time"].as_str(),
            a["manager"].as_str(),
        )
            .cmp(&(
                b["operation"].as_str(),
                b["time"].as_str(),
                b["manager"].as_str(),
            ))
    });
    if let Some(m) = merged["metadata"].as_object_mut() {
        m.insert("managedFields".into(), Value::Array(out));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trips_leaves() {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "1"}}, "data": {"k": "v", "e": {}}});
        let set = applied_set(&body, false);
        let v1 = to_fields_v1(&set);
        assert_eq!(
            v1,
            json!({"f:data": {"f:e": {}, "f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
        assert_eq!(from_fields_v1(&v1), set);
        assert_eq!(
            from_fields_v1(&json!({"f:data": {".": {}, "f:k": {}}})),
            [
                vec!["data".to_string()],
                vec!["data".to_string(), "k".to_string()]
            ]
            .into_iter()
            .collect()
        );
    }
}
