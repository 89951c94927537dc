//! Server-side apply field ownership: `metadata.managedFields` entries of `operation: Apply`,
//! with the conflicts and forced take-overs of structured-merge-diff.
//!
//! Every other write (create, update, patch) records an `operation: Update` entry for its
//! manager (the `fieldManager` parameter, else the User-Agent's prefix) owning the fields it
//! set or changed, which it takes from the other managers.
//!
//! Simplifications: field sets are paths of map fields (maps recurse, lists are atomic), and
//! fields set by admission (Pods) are owned by the writer.

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

/// The fields an applied configuration sets, of those its `scope` may own.
pub fn applied_set(body: &Value, scope: Scope) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    let Some(m) = body.as_object() else {
        return out;
    };
    for (k, v) in m {
        if !scope.owns(k) {
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
    // A path that is in the set and has members below it is marked `.`.
    fn mark(node: &mut Map<String, Value>, p: &[String]) {
        match p.split_first() {
            None => {
                if !node.is_empty() && !node.contains_key(".") {
                    node.insert(".".into(), json!({}));
                }
            }
            Some((seg, rest)) => {
                if let Some(Value::Object(next)) = node.get_mut(&format!("f:{seg}")) {
                    mark(next, rest);
                }
            }
        }
    }
    for p in set.iter().filter(|p| !p.is_empty()) {
        mark(&mut root, p);
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

/// How a conflict names a manager: `"name"` for appliers, `"name" using v1` for updaters.
fn manager_label(e: &Value) -> String {
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

/// Server-side apply of `body` by `w` onto `live` (already merged into `merged`): checks
/// conflicts with the other managers over the fields the apply changes (taking them when
/// `force`), removes the fields this manager applied before and no longer does (unless someone
/// else owns them), and records the manager's entry. `live` is None on create. An object
/// without entries has its fields owned by `before-first-apply` first, as the real server.
pub fn apply(
    live: Option<&Value>,
    merged: &mut Value,
    body: &Value,
    w: &Writer,
    force: bool,
    scope: Scope,
    now: &str,
) -> Result<(), ApiError> {
    let applied = applied_set(body, scope);
    let mut entries: Vec<Value> = live
        .and_then(|l| l["metadata"]["managedFields"].as_array().cloned())
        .unwrap_or_default();
    if let Some(live) = live
        && entries.is_empty()
    {
        let fields = created_fields(live, Scope::All);
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
        let (changed, _) = compare_objects(live, merged, scope);
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
    // A field this manager stops applying stays when another manager owns it, a field above
    // it or one below it.
    let dropped: Vec<&FieldPath> = previous.difference(&applied).collect();
    if !dropped.is_empty() {
        let owned: BTreeSet<&FieldPath> = others.iter().flat_map(|(_, s)| s).collect();
        let kept = |p: &FieldPath| {
            (1..=p.len()).any(|n| owned.contains(&p[..n].to_vec()))
                || owned
                    .range::<&FieldPath, _>(p..)
                    .next()
                    .is_some_and(|o| o.starts_with(p))
        };
        for p in dropped {
            if !kept(p) {
                remove(merged, p);
            }
        }
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
    Ok(())
}

/// The longest manager name (`FieldManagerMaxLength`), in bytes.
pub const MAX_MANAGER_LEN: usize = 128;

/// The manager of a write without `fieldManager`: the User-Agent up to its first `/`, without
/// unprintable characters, cut to [`MAX_MANAGER_LEN`] bytes (whole characters only).
pub fn manager_from_user_agent(ua: &str) -> String {
    let prefix = ua.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars() {
        if c.is_control() || (c.is_whitespace() && c != ' ') {
            continue;
        }
        if out.len() + c.len_utf8() > MAX_MANAGER_LEN {
            break;
        }
        out.push(c);
    }
    out
}

/// Which top-level fields a write may own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    All,
    /// The main resource of a kind with a status subresource.
    NoStatus,
    /// The status subresource.
    StatusOnly,
}

impl Scope {
    fn owns(self, key: &str) -> bool {
        match self {
            _ if key == "apiVersion" || key == "kind" => false,
            Scope::All => true,
            Scope::NoStatus => key != "status",
            Scope::StatusOnly => key == "status",
        }
    }
}

/// Who writes: an entry's identity without its time and fields.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    pub manager: &'a str,
    pub api_version: &'a str,
    /// `status` for writes of the status subresource.
    pub subresource: Option<&'a str>,
}

impl Writer<'_> {
    fn is(&self, e: &Value, operation: &str) -> bool {
        e["manager"].as_str().unwrap_or_default() == self.manager
            && e["operation"] == operation
            && (operation == "Apply" || e["apiVersion"] == self.api_version)
            && e["subresource"].as_str().unwrap_or_default() == self.subresource.unwrap_or_default()
    }

    fn entry(&self, operation: &str, time: &str, fields: Value) -> Value {
        let mut e = Map::new();
        if !self.manager.is_empty() {
            e.insert("manager".into(), json!(self.manager));
        }
        e.insert("operation".into(), json!(operation));
        e.insert("apiVersion".into(), json!(self.api_version));
        e.insert("time".into(), json!(time));
        e.insert("fieldsType".into(), json!("FieldsV1"));
        e.insert("fieldsV1".into(), fields);
        if let Some(sub) = self.subresource {
            e.insert("subresource".into(), json!(sub));
        }
        Value::Object(e)
    }
}

/// Whether client-sent entries can be decoded (else the server drops them all).
pub fn valid_entries(entries: &[Value]) -> bool {
    entries.iter().all(|e| {
        matches!(e["operation"].as_str(), Some("Apply" | "Update"))
            && e["apiVersion"].as_str().is_some_and(|v| !v.is_empty())
            && e["fieldsType"] == "FieldsV1"
            && (e["fieldsV1"].is_object() || e["fieldsV1"].is_null())
    })
}

/// The `fieldsV1` of every field of `v` (a map is itself a member, marked `.`).
fn all_fields(v: &Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(m) = v
        && !m.is_empty()
    {
        out.insert(".".into(), json!({}));
        for (k, child) in m {
            out.insert(format!("f:{k}"), all_fields(child));
        }
    }
    Value::Object(out)
}

/// The `fieldsV1` of all the fields of an object a write creates.
fn created_fields(obj: &Value, scope: Scope) -> Value {
    let mut root = Map::new();
    let Some(m) = obj.as_object() else {
        return Value::Object(root);
    };
    for (k, v) in m {
        if !scope.owns(k) {
            continue;
        }
        if k == "metadata" {
            let mut meta = Map::new();
            for (mk, mv) in v.as_object().into_iter().flatten() {
                if !STRIPPED_META.contains(&mk.as_str()) {
                    meta.insert(format!("f:{mk}"), all_fields(mv));
                }
            }
            if !meta.is_empty() {
                root.insert("f:metadata".into(), Value::Object(meta));
            }
            continue;
        }
        root.insert(format!("f:{k}"), all_fields(v));
    }
    Value::Object(root)
}

fn add_all(v: &Value, path: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
    out.insert(path.clone());
    if let Value::Object(m) = v {
        for (k, child) in m {
            path.push(k.clone());
            add_all(child, path, out);
            path.pop();
        }
    }
}

/// structured-merge-diff's comparison of two values: the paths added or modified, and the
/// paths removed.
fn compare(
    old: &Value,
    new: &Value,
    path: &mut FieldPath,
    changed: &mut BTreeSet<FieldPath>,
    removed: &mut BTreeSet<FieldPath>,
) {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            for (k, nv) in n {
                path.push(k.clone());
                match o.get(k) {
                    Some(ov) if ov == nv => {}
                    Some(ov) => compare(ov, nv, path, changed, removed),
                    None => add_all(nv, path, changed),
                }
                path.pop();
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                path.push(k.clone());
                removed.insert(path.clone());
                path.pop();
            }
        }
        (_, Value::Object(_)) => add_all(new, path, changed),
        _ => {
            changed.insert(path.clone());
        }
    }
}

type Diff = (BTreeSet<FieldPath>, BTreeSet<FieldPath>);

/// What a write changes of the fields it may own.
fn compare_objects(old: &Value, new: &Value, scope: Scope) -> Diff {
    let (mut changed, mut removed) = (BTreeSet::new(), BTreeSet::new());
    let empty = Map::new();
    let o = old.as_object().unwrap_or(&empty);
    let n = new.as_object().unwrap_or(&empty);
    let null = Value::Null;
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    for k in keys.into_iter().filter(|k| scope.owns(k)) {
        let (ov, nv) = (o.get(k).unwrap_or(&null), n.get(k).unwrap_or(&null));
        if ov == nv {
            continue;
        }
        if k == "metadata" {
            let om = ov.as_object().unwrap_or(&empty);
            let nm = nv.as_object().unwrap_or(&empty);
            let mkeys: BTreeSet<&String> = om.keys().chain(nm.keys()).collect();
            for mk in mkeys {
                if STRIPPED_META.contains(&mk.as_str()) {
                    continue;
                }
                let mut path = vec![k.clone(), mk.clone()];
                match (om.get(mk), nm.get(mk)) {
                    (Some(a), Some(b)) if a == b => {}
                    (Some(a), Some(b)) => compare(a, b, &mut path, &mut changed, &mut removed),
                    (None, Some(b)) => add_all(b, &mut path, &mut changed),
                    _ => {
                        removed.insert(path);
                    }
                }
            }
            continue;
        }
        let mut path = vec![k.clone()];
        match (o.get(k), n.get(k)) {
            (Some(a), Some(b)) => compare(a, b, &mut path, &mut changed, &mut removed),
            (None, Some(b)) => add_all(b, &mut path, &mut changed),
            _ => {
                removed.insert(path);
            }
        }
    }
    (changed, removed)
}

fn under_any(p: &FieldPath, roots: &BTreeSet<FieldPath>) -> bool {
    (1..=p.len()).any(|n| roots.contains(&p[..n]))
}

/// Orders entries as the field manager does: by operation, time, manager, apiVersion and
/// subresource.
fn sort_entries(entries: &mut [Value]) {
    let key = |e: &Value| {
        (
            e["operation"].as_str().unwrap_or_default().to_string(),
            e["time"].as_str().unwrap_or_default().to_string(),
            e["manager"].as_str().unwrap_or_default().to_string(),
            e["apiVersion"].as_str().unwrap_or_default().to_string(),
            e["subresource"].as_str().unwrap_or_default().to_string(),
        )
    };
    entries.sort_by_cached_key(key);
}

fn set_entries(obj: &mut Value, entries: Vec<Value>) {
    if let Some(m) = obj["metadata"].as_object_mut() {
        if entries.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(entries));
        }
    }
}

/// Records the create of `obj` by `w`: one Update entry owning every field it has.
pub fn record_create(obj: &mut Value, w: &Writer, scope: Scope, now: &str) {
    let fields = created_fields(obj, scope);
    if fields.as_object().is_some_and(Map::is_empty) {
        set_entries(obj, vec![]);
        return;
    }
    let entry = w.entry("Update", now, fields);
    set_entries(obj, vec![entry]);
}

/// Records an update of `old` to `new` by `w`. `new`'s managedFields are the entries to start
/// from; when there are none, the object is not tracked (as the real server, which only
/// starts tracking on create or apply).
pub fn record_update(old: &Value, new: &mut Value, w: &Writer, scope: Scope, now: &str) {
    let entries: Vec<Value> = match new["metadata"]["managedFields"].as_array() {
        Some(a) if !a.is_empty() => a.clone(),
        _ => return,
    };
    let (changed, removed) = compare_objects(old, new, scope);
    if changed.is_empty() && removed.is_empty() {
        return;
    }
    let mut out = Vec::with_capacity(entries.len() + 1);
    let mut mine: Option<(Value, BTreeSet<FieldPath>)> = None;
    for e in entries {
        let mut set = from_fields_v1(&e["fieldsV1"]);
        let before = set.len();
        set.retain(|p| !changed.contains(p) && !under_any(p, &removed));
        if w.is(&e, "Update") {
            mine = Some((e, set));
            continue;
        }
        if set.is_empty() {
            continue;
        }
        let mut e = e;
        if set.len() != before {
            e["fieldsV1"] = to_fields_v1(&set);
        }
        out.push(e);
    }
    match mine {
        Some((mut e, mut set)) => {
            if !changed.is_empty() {
                set.extend(changed);
                e["time"] = json!(now);
            }
            if !set.is_empty() {
                e["fieldsV1"] = to_fields_v1(&set);
                out.push(e);
            }
        }
        None if !changed.is_empty() => out.push(w.entry("Update", now, to_fields_v1(&changed))),
        None => {}
    }
    sort_entries(&mut out);
    set_entries(new, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_v1_round_trips_leaves() {
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "labels": {"a": "1"}}, "data": {"k": "v", "e": {}}});
        let set = applied_set(&body, Scope::All);
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

    fn writer(manager: &str) -> Writer<'_> {
        Writer {
            manager,
            api_version: "v1",
            subresource: None,
        }
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x", "namespace": "d", "uid": "u", "resourceVersion": "1",
                "creationTimestamp": "t"},
            "data": data})
    }

    #[test]
    fn managers_come_from_the_user_agent_prefix() {
        assert_eq!(
            manager_from_user_agent("kubectl-create/v1.32.0 (linux/amd64) kubernetes/abc"),
            "kubectl-create"
        );
        assert_eq!(manager_from_user_agent(""), "");
        assert_eq!(manager_from_user_agent("a\tb\u{7}c/x"), "abc");
        assert_eq!(manager_from_user_agent(&"m".repeat(300)).len(), 128);
        // Whole characters only: 127 bytes and a 2-byte character do not fit.
        let ua = format!("{}é", "m".repeat(127));
        assert_eq!(manager_from_user_agent(&ua), "m".repeat(127));
    }

    #[test]
    fn a_create_owns_every_field_with_maps_marked() {
        let mut obj = cm(json!({"a": "1"}));
        obj["metadata"]["labels"] = json!({"app": "y"});
        record_create(&mut obj, &writer("kubectl-create"), Scope::All, "T1");
        assert_eq!(
            obj["metadata"]["managedFields"],
            json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                "time": "T1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:a": {}},
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}])
        );
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"x": 1}, "status": {"phase": "Pending"}});
        record_create(&mut pod, &writer("m"), Scope::NoStatus, "T1");
        assert_eq!(
            pod["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {".": {}, "f:x": {}}})
        );
    }

    #[test]
    fn an_update_takes_the_fields_it_changes() {
        let mut old = cm(json!({"a": "1", "b": "2"}));
        record_create(&mut old, &writer("kubectl-create"), Scope::All, "T1");
        let mut new = old.clone();
        new["data"] = json!({"a": "9", "c": "3"});
        record_update(&old, &mut new, &writer("kubectl-edit"), Scope::All, "T2");
        let mf = &new["metadata"]["managedFields"];
        assert_eq!(mf.as_array().map(Vec::len), Some(2), "{mf}");
        assert_eq!(mf[0]["manager"], "kubectl-create");
        assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {}}));
        assert_eq!(mf[1]["manager"], "kubectl-edit");
        assert_eq!(mf[1]["time"], "T2");
        assert_eq!(mf[1]["fieldsV1"], json!({"f:data": {"f:a": {}, "f:c": {}}}));
        // No change, no new entry or time.
        let mut same = new.clone();
        record_update(&new, &mut same, &writer("other"), Scope::All, "T3");
        assert_eq!(same, new);
        // Objects without entries are not tracked by updates.
        let old = cm(json!({"a": "1"}));
        let mut new = cm(json!({"a": "2"}));
        record_update(&old, &mut new, &writer("m"), Scope::All, "T2");
        assert!(new["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn large_forced_and_shrinking_applies_stay_linear() {
        const N: usize = 20_000;
        let keys = |p: &str| -> Map<String, Value> {
            (0..N).map(|i| (format!("{p}{i}"), json!("1"))).collect()
        };
        let mut data = keys("a");
        data.extend(keys("b"));
        let mut live = cm(Value::Object(data.clone()));
        // The creator owns every key (but not the map itself).
        let owned: Map<String, Value> =
            data.keys().map(|k| (format!("f:{k}"), json!({}))).collect();
        let fields = json!({"f:data": owned});
        set_entries(
            &mut live,
            vec![writer("creator").entry("Update", "T1", fields)],
        );
        let started = std::time::Instant::now();
        // Forcing takes N fields from another manager.
        let changed: Map<String, Value> = keys("a")
            .into_iter()
            .map(|(k, _)| (k, json!("2")))
            .collect();
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
            "data": changed});
        let mut merged = live.clone();
        merged["data"].as_object_mut().unwrap().extend(changed);
        apply(
            Some(&live),
            &mut merged,
            &body,
            &writer("kubectl"),
            true,
            Scope::All,
            "T2",
        )
        .map_err(|e| e.message)
        .unwrap();
        // Dropping them all while the creator still owns N others.
        let live = merged.clone();
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
        apply(
            Some(&live),
            &mut merged,
            &body,
            &writer("kubectl"),
            false,
            Scope::All,
            "T3",
        )
        .map_err(|e| e.message)
        .unwrap();
        let left = merged["data"].as_object().unwrap();
        assert_eq!(left.len(), N);
        assert!(left.keys().all(|k| k.starts_with('b')));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn applies_conflict_with_update_managers_using_their_version() {
        let mut live = cm(json!({"a": "1"}));
        record_create(&mut live, &writer("kubectl-create"), Scope::All, "T1");
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
            "data": {"a": "2"}});
        let mut merged = live.clone();
        merged["data"]["a"] = json!("2");
        let e = apply(
            Some(&live),
            &mut merged.clone(),
            &body,
            &writer("kubectl"),
            false,
            Scope::All,
            "T2",
        )
        .err()
        .map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some(
                "Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.a"
            )
        );
        apply(
            Some(&live),
            &mut merged,
            &body,
            &writer("kubectl"),
            true,
            Scope::All,
            "T2",
        )
        .map_err(|e| e.message)
        .unwrap();
        let mf = &merged["metadata"]["managedFields"];
        assert_eq!(mf[0]["manager"], "kubectl");
        assert_eq!(mf[0]["operation"], "Apply");
        assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {"f:a": {}}}));
        assert_eq!(mf[1]["manager"], "kubectl-create");
        assert_eq!(mf[1]["fieldsV1"], json!({"f:data": {}}));
        // A status writer is named with its subresource.
        let status = Writer {
            manager: "ctl",
            api_version: "v1",
            subresource: Some("status"),
        };
        let e = status.entry("Update", "T", json!({}));
        assert_eq!(
            manager_label(&e),
            "\"ctl\" with subresource \"status\" using v1"
        );
        // An object without entries: its fields belong to before-first-apply.
        let live = cm(json!({"a": "1"}));
        let mut merged = cm(json!({"a": "2"}));
        let e = apply(
            Some(&live),
            &mut merged,
            &body,
            &writer("kubectl"),
            false,
            Scope::All,
            "T2",
        )
        .err()
        .map(|e| e.message);
        assert_eq!(
            e.as_deref(),
            Some(
                "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"
            )
        );
    }

    #[test]
    fn status_writes_record_their_subresource_and_only_status() {
        let mut old = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"x": 1}});
        record_create(&mut old, &writer("kubectl-run"), Scope::NoStatus, "T1");
        let mut new = old.clone();
        new["status"] = json!({"phase": "Running"});
        new["spec"]["x"] = json!(2);
        let w = Writer {
            manager: "kubelet",
            api_version: "v1",
            subresource: Some("status"),
        };
        record_update(&old, &mut new, &w, Scope::StatusOnly, "T2");
        let mf = &new["metadata"]["managedFields"];
        assert_eq!(mf[0]["manager"], "kubectl-run");
        assert_eq!(mf[0]["fieldsV1"], json!({"f:spec": {".": {}, "f:x": {}}}));
        assert_eq!(mf[1]["manager"], "kubelet");
        assert_eq!(mf[1]["subresource"], "status");
        assert_eq!(
            mf[1]["fieldsV1"],
            json!({"f:status": {".": {}, "f:phase": {}}})
        );
        // Entries a client cannot have written are refused as a whole.
        assert!(valid_entries(
            mf.as_array().map(Vec::as_slice).unwrap_or_default()
        ));
        assert!(!valid_entries(&[json!({})]));
    }
}
