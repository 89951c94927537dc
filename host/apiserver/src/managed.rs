//! Server-side apply field ownership: `metadata.managedFields` entries of `operation: Apply`,
//! with the conflicts and forced take-overs of structured-merge-diff.
//!
//! Every other write (create, update, patch) records an `operation: Update` entry for its
//! manager (the `fieldManager` parameter, else the User-Agent's prefix) owning the fields it
//! set or changed, which it takes from the other managers.
//!
//! Field sets are paths of fieldsV1 elements: map fields (`f:name`), the items of associative
//! lists by their keys (`k:{"name":"a"}`) and the values of set lists (`v:"x"`), so that two
//! managers can own different items of one list, as in structured-merge-diff. Which lists are
//! associative comes from the CRD's schema (`x-kubernetes-list-type`) for custom resources and
//! from a table of the built-in kinds' list types; every other list is atomic.
//!
//! Simplification: fields set by admission (Pods) are owned by the writer.

use crate::status::{ApiError, Cause};
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// A path of fieldsV1 elements (`f:spec`, `k:{"name":"a"}`, `v:"x"`).
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

/// How a list merges and is owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced and owned as a whole.
    Atomic,
    /// A set of scalars, each owned on its own (`v:`).
    Set,
    /// Objects identified by these fields, each owned on its own (`k:`).
    Map(Vec<String>),
}

/// What field ownership needs to know of a kind's schema: which lists are associative (from the
/// CRD's schema, or a table of the built-in kinds' list types), and which fields a new object
/// already has before a write sets anything.
#[derive(Debug, Clone, Copy)]
pub struct KindSchema<'a> {
    /// The kind's storage key (e.g. `/services`), for the built-in table.
    key: &'a str,
    /// The custom resource's `openAPIV3Schema`.
    schema: Option<&'a Value>,
    custom: bool,
}

const CONTAINER_LISTS: &[&str] = &["containers", "initContainers", "ephemeralContainers"];

impl<'a> KindSchema<'a> {
    /// The schema of the objects of `def`.
    pub fn of(def: &'a crate::resources::ResourceDef) -> KindSchema<'a> {
        KindSchema {
            key: def.key(),
            schema: def.schema.as_deref(),
            custom: def.custom,
        }
    }

    /// Every list atomic.
    #[cfg(test)]
    pub fn atomic() -> KindSchema<'static> {
        KindSchema {
            key: "",
            schema: None,
            custom: true,
        }
    }

    /// The kind of the list at `path`.
    pub fn kind(&self, path: &[String]) -> ListKind {
        let names: Vec<&str> = path.iter().filter_map(|s| s.strip_prefix("f:")).collect();
        if self.custom {
            return self.schema_kind(&names);
        }
        let keys = |k: &[&str]| ListKind::Map(k.iter().map(|s| s.to_string()).collect());
        match names.as_slice() {
            ["metadata", "finalizers"] => ListKind::Set,
            ["metadata", "ownerReferences"] => keys(&["uid"]),
            [.., c, "env"] if CONTAINER_LISTS.contains(c) => keys(&["name"]),
            [.., c, "ports"] if CONTAINER_LISTS.contains(c) => keys(&["containerPort", "protocol"]),
            [.., c, "volumeMounts"] if CONTAINER_LISTS.contains(c) => keys(&["mountPath"]),
            [.., c, "volumeDevices"] if CONTAINER_LISTS.contains(c) => keys(&["devicePath"]),
            [.., "spec", c] if CONTAINER_LISTS.contains(c) => keys(&["name"]),
            [.., "spec", "volumes" | "imagePullSecrets"] => keys(&["name"]),
            [.., "spec", "hostAliases"] => keys(&["ip"]),
            ["spec", "ports"] if self.key == crate::kinds::service::SERVICES_KEY => {
                keys(&["port", "protocol"])
            }
            ["spec", "versions"] if self.key == crate::resources::CRD_KEY => keys(&["name"]),
            _ => ListKind::Atomic,
        }
    }

    /// The struct-typed fields of the kind's Go zero value, which every object has before a
    /// write sets anything (so a create does not make its writer own them as members, as
    /// structured-merge-diff compares a create with the zero value). Maps, lists and pointers
    /// are absent from a zero value, and custom resources start empty.
    fn zero(&self) -> Value {
        if self.custom {
            return json!({});
        }
        // `containers` has no `omitempty`: a zero PodSpec has it, as null.
        let pod_spec = json!({"containers": null});
        let template = json!({"metadata": {}, "spec": pod_spec});
        match self.key {
            "/pods" => json!({"spec": pod_spec, "status": {}}),
            "/namespaces" | "/nodes" => json!({"spec": {}, "status": {}}),
            crate::kinds::service::SERVICES_KEY => {
                json!({"spec": {}, "status": {"loadBalancer": {}}})
            }
            "batch/cronjobs" => json!({
                "spec": {"jobTemplate": {"metadata": {}, "spec": {"template": template}}},
                "status": {},
            }),
            "batch/jobs" => json!({"spec": {"template": template}, "status": {}}),
            "coordination.k8s.io/leases" => json!({"spec": {}}),
            "rbac.authorization.k8s.io/rolebindings"
            | "rbac.authorization.k8s.io/clusterrolebindings" => json!({"roleRef": {}}),
            crate::shape::EVENTS_KEY => json!({"involvedObject": {}, "source": {}}),
            crate::resources::CRD_KEY => json!({
                "spec": {"names": {}},
                "status": {"acceptedNames": {}},
            }),
            _ => json!({}),
        }
    }

    fn schema_kind(&self, names: &[&str]) -> ListKind {
        let mut s = match self.schema {
            Some(s) => s,
            None => return ListKind::Atomic,
        };
        for (i, name) in names.iter().enumerate() {
            s = &s["properties"][*name];
            // A list's items are the next level down.
            if i + 1 < names.len() && s["type"] == "array" {
                s = &s["items"];
            }
        }
        match s["x-kubernetes-list-type"].as_str() {
            Some("set") => ListKind::Set,
            Some("map") => {
                let keys = crate::util::string_list(&s["x-kubernetes-list-map-keys"]);
                if keys.is_empty() {
                    ListKind::Atomic
                } else {
                    ListKind::Map(keys)
                }
            }
            _ => ListKind::Atomic,
        }
    }
}

/// The `k:` element of an associative list's item, or None when it lacks a key (then the list
/// is treated as atomic). `protocol` defaults to TCP, as the schemas default it.
fn key_element(item: &Value, keys: &[String]) -> Option<String> {
    let mut fields = Map::new();
    for k in keys {
        match item.get(k) {
            Some(v) if !v.is_null() => {
                fields.insert(k.clone(), v.clone());
            }
            _ if k == "protocol" => {
                fields.insert(k.clone(), json!("TCP"));
            }
            _ => return None,
        }
    }
    Some(format!("k:{}", Value::Object(fields)))
}

fn value_element(v: &Value) -> String {
    format!("v:{v}")
}

/// The elements of a list's items, when the list is associative and every item can be named.
fn list_elements(items: &[Value], kind: &ListKind) -> Option<Vec<String>> {
    match kind {
        ListKind::Atomic => None,
        ListKind::Set => Some(items.iter().map(value_element).collect()),
        ListKind::Map(keys) => items.iter().map(|i| key_element(i, keys)).collect(),
    }
}

/// Every leaf under `v` at `prefix`; `with_parents` also adds every map and list item on the way
/// (what a whole new subtree makes its writer own).
fn walk_fields(
    v: &Value,
    prefix: &mut FieldPath,
    schema: &KindSchema,
    with_parents: bool,
    out: &mut BTreeSet<FieldPath>,
) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            if with_parents {
                out.insert(prefix.clone());
            }
            for (k, child) in m {
                prefix.push(format!("f:{k}"));
                walk_fields(child, prefix, schema, with_parents, out);
                prefix.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let Some(elements) = list_elements(items, &schema.kind(prefix)) else {
                out.insert(prefix.clone());
                return;
            };
            if with_parents {
                out.insert(prefix.clone());
            }
            for (item, element) in items.iter().zip(elements) {
                prefix.push(element);
                // An item is itself a member; its fields (keys included) too.
                out.insert(prefix.clone());
                if item.is_object() {
                    walk_fields(item, prefix, schema, with_parents, out);
                }
                prefix.pop();
            }
        }
        _ => {
            out.insert(prefix.clone());
        }
    }
}

/// The top-level fields of `obj` that `scope` may own, with metadata's server-set fields left
/// out: `(path, value)`.
fn ownable(obj: &Value, scope: Scope) -> Vec<(FieldPath, &Value)> {
    let mut out = vec![];
    for (k, v) in obj.as_object().into_iter().flatten() {
        if !scope.owns(k) {
            continue;
        }
        if k == "metadata" {
            for (mk, mv) in v.as_object().into_iter().flatten() {
                if !STRIPPED_META.contains(&mk.as_str()) {
                    out.push((vec![format!("f:{k}"), format!("f:{mk}")], mv));
                }
            }
            continue;
        }
        out.push((vec![format!("f:{k}")], v));
    }
    out
}

/// The fields an applied configuration sets, of those its `scope` may own.
pub fn applied_set(body: &Value, scope: Scope, schema: &KindSchema) -> BTreeSet<FieldPath> {
    let mut out = BTreeSet::new();
    for (mut path, v) in ownable(body, scope) {
        walk_fields(v, &mut path, schema, false, &mut out);
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
                .entry(seg.clone())
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
                if let Some(Value::Object(next)) = node.get_mut(seg) {
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

/// The set a `fieldsV1` tree describes.
pub fn from_fields_v1(v: &Value) -> BTreeSet<FieldPath> {
    fn walk(v: &Value, prefix: &mut FieldPath, out: &mut BTreeSet<FieldPath>) {
        let Some(m) = v.as_object() else {
            return;
        };
        let members: Vec<(&String, &Value)> = m.iter().filter(|(k, _)| *k != ".").collect();
        if (members.is_empty() || m.contains_key(".")) && !prefix.is_empty() {
            out.insert(prefix.clone());
        }
        for (k, child) in members {
            prefix.push(k.clone());
            walk(child, prefix, out);
            prefix.pop();
        }
    }
    let mut out = BTreeSet::new();
    walk(v, &mut vec![], &mut out);
    out
}

/// `.data.a`, `.spec.containers[name="a"].image` or `.metadata.finalizers[="x"]`, as
/// structured-merge-diff prints a path.
pub fn path_string(p: &FieldPath) -> String {
    p.iter()
        .map(|s| {
            if let Some(name) = s.strip_prefix("f:") {
                format!(".{name}")
            } else if let Some(keys) = s.strip_prefix("k:") {
                let fields: Map<String, Value> = serde_json::from_str(keys).unwrap_or_default();
                let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("[{}]", parts.join(","))
            } else if let Some(value) = s.strip_prefix("v:") {
                format!("[={value}]")
            } else {
                format!(".{s}")
            }
        })
        .collect()
}

/// Merges an applied configuration into the live object as server-side apply does: maps
/// merge, `null` is a value, associative lists merge item by item (new items go last) and
/// atomic lists are replaced.
pub fn merge(target: &mut Value, applied: &Value, schema: &KindSchema) {
    merge_at(target, applied, schema, &mut vec![]);
}

fn merge_at(target: &mut Value, applied: &Value, schema: &KindSchema, path: &mut FieldPath) {
    match applied {
        Value::Object(a) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in a {
                    path.push(format!("f:{k}"));
                    merge_at(t.entry(k.clone()).or_insert(Value::Null), v, schema, path);
                    path.pop();
                }
            }
        }
        Value::Array(items) => {
            let kind = schema.kind(path);
            let live = target.as_array().cloned().unwrap_or_default();
            let (Some(live_elements), Some(applied_elements)) =
                (list_elements(&live, &kind), list_elements(items, &kind))
            else {
                *target = applied.clone();
                return;
            };
            let live_index: std::collections::HashMap<&String, usize> = live_elements
                .iter()
                .enumerate()
                .map(|(i, e)| (e, i))
                .collect();
            let mut out = live;
            for (item, element) in items.iter().zip(applied_elements) {
                match live_index.get(&element).copied() {
                    Some(i) => {
                        path.push(element);
                        merge_at(&mut out[i], item, schema, path);
                        path.pop();
                    }
                    None => out.push(item.clone()),
                }
            }
            *target = Value::Array(out);
        }
        other => *target = other.clone(),
    }
}

/// The value at `path`, found by field name and by list element.
fn value_at_mut<'v>(
    v: &'v mut Value,
    path: &[String],
    schema: &KindSchema,
) -> Option<&'v mut Value> {
    let mut cur = v;
    for (depth, seg) in path.iter().enumerate() {
        cur = match seg.strip_prefix("f:") {
            Some(name) => cur.as_object_mut()?.get_mut(name)?,
            None => {
                let kind = schema.kind(&path[..depth]);
                let i = list_elements(cur.as_array()?, &kind)?
                    .iter()
                    .position(|e| e == seg)?;
                cur.as_array_mut()?.get_mut(i)?
            }
        };
    }
    Some(cur)
}

/// Removes the fields, list items and set values at `paths`. List items go one list at a time,
/// so that a list loses many items in one pass. The key fields of an item that stays are kept:
/// an item is named by them.
fn remove_all(v: &mut Value, paths: &[&FieldPath], schema: &KindSchema) {
    let mut from_lists: std::collections::BTreeMap<&[String], std::collections::HashSet<&str>> =
        Default::default();
    for p in paths {
        let Some((last, parent)) = p.split_last() else {
            continue;
        };
        let Some(name) = last.strip_prefix("f:") else {
            from_lists.entry(parent).or_default().insert(last.as_str());
            continue;
        };
        let is_key = parent
            .last()
            .and_then(|e| e.strip_prefix("k:"))
            .is_some_and(|keys| {
                serde_json::from_str::<Map<String, Value>>(keys).is_ok_and(|k| k.contains_key(name))
            });
        if is_key {
            continue;
        }
        if let Some(m) = value_at_mut(v, parent, schema).and_then(Value::as_object_mut) {
            m.remove(name);
        }
    }
    for (parent, gone) in from_lists {
        let kind = schema.kind(parent);
        let Some(list) = value_at_mut(v, parent, schema) else {
            continue;
        };
        let Some(elements) = list
            .as_array()
            .and_then(|items| list_elements(items, &kind))
        else {
            continue;
        };
        if let Some(items) = list.as_array_mut() {
            let mut keep = elements.iter().map(|e| !gone.contains(e.as_str()));
            items.retain(|_| keep.next().unwrap_or(true));
        }
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
#[allow(clippy::too_many_arguments)]
pub fn apply(
    live: Option<&Value>,
    merged: &mut Value,
    body: &Value,
    w: &Writer,
    force: bool,
    scope: Scope,
    schema: &KindSchema,
    now: &str,
) -> Result<(), ApiError> {
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

/// The longest manager name (`FieldManagerMaxLength`), in bytes.
pub const MAX_MANAGER_LEN: usize = 128;

/// The manager of a write without `fieldManager`: the User-Agent up to its first `/`, without
/// unprintable characters, cut to [`MAX_MANAGER_LEN`] bytes (whole characters only).
pub fn manager_from_user_agent(ua: &str) -> String {
    let prefix = ua.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars() {
        if !printable(c) {
            continue;
        }
        if out.len() + c.len_utf8() > MAX_MANAGER_LEN {
            break;
        }
        out.push(c);
    }
    out
}

/// Go's `unicode.IsPrint`, near enough: no control characters, and no space but U+0020.
fn printable(c: char) -> bool {
    !c.is_control() && (c == ' ' || !c.is_whitespace())
}

/// What `ValidateFieldManager` finds wrong with a `fieldManager`: more than
/// [`MAX_MANAGER_LEN`] bytes, or characters that are not printable.
pub fn field_manager_causes(manager: &str) -> Vec<Cause> {
    let mut causes = vec![];
    if manager.len() > MAX_MANAGER_LEN {
        causes.push(Cause {
            reason: "FieldValueTooLong",
            message: format!("Too long: may not be more than {MAX_MANAGER_LEN} bytes"),
            field: "fieldManager".into(),
        });
    }
    for (at, c) in manager.char_indices().filter(|(_, c)| !printable(*c)) {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: {}: invalid character U+{:04X} (at position {at})",
                crate::validation::go_quote(manager),
                c as u32
            ),
            field: "fieldManager".into(),
        });
    }
    causes
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

/// The `fieldsV1` of all the fields of an object a write creates: what it adds to the kind's
/// zero value, where every map and list item it adds is itself a member, marked `.`.
fn created_fields(obj: &Value, scope: Scope, schema: &KindSchema) -> Value {
    let (added, _) = compare_objects(&schema.zero(), obj, scope, schema);
    to_fields_v1(&added)
}

fn add_all(v: &Value, path: &mut FieldPath, schema: &KindSchema, out: &mut BTreeSet<FieldPath>) {
    out.insert(path.clone());
    walk_fields(v, path, schema, true, out);
}

/// structured-merge-diff's comparison of two values: the paths added or modified, and the
/// paths removed.
fn compare(
    old: &Value,
    new: &Value,
    path: &mut FieldPath,
    schema: &KindSchema,
    changed: &mut BTreeSet<FieldPath>,
    removed: &mut BTreeSet<FieldPath>,
) {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            for (k, nv) in n {
                path.push(format!("f:{k}"));
                match o.get(k) {
                    Some(ov) if ov == nv => {}
                    Some(ov) => compare(ov, nv, path, schema, changed, removed),
                    None => add_all(nv, path, schema, changed),
                }
                path.pop();
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                path.push(format!("f:{k}"));
                removed.insert(path.clone());
                path.pop();
            }
        }
        (Value::Array(o), Value::Array(n)) => {
            let kind = schema.kind(path);
            let (Some(old_elements), Some(new_elements)) =
                (list_elements(o, &kind), list_elements(n, &kind))
            else {
                changed.insert(path.clone());
                return;
            };
            let old_index: std::collections::HashMap<&String, usize> = old_elements
                .iter()
                .enumerate()
                .map(|(i, e)| (e, i))
                .collect();
            let new_set: std::collections::HashSet<&String> = new_elements.iter().collect();
            for (item, element) in n.iter().zip(&new_elements) {
                path.push(element.clone());
                match old_index.get(element).copied() {
                    Some(i) if o[i] == *item => {}
                    Some(i) => compare(&o[i], item, path, schema, changed, removed),
                    None => add_all(item, path, schema, changed),
                }
                path.pop();
            }
            for element in old_elements.iter().filter(|e| !new_set.contains(e)) {
                path.push(element.clone());
                removed.insert(path.clone());
                path.pop();
            }
        }
        // A list the zero value has as null: its items are added, not the list itself.
        (Value::Null, Value::Array(_)) => compare(&json!([]), new, path, schema, changed, removed),
        (_, Value::Object(_) | Value::Array(_)) => add_all(new, path, schema, changed),
        _ => {
            changed.insert(path.clone());
        }
    }
}

type Diff = (BTreeSet<FieldPath>, BTreeSet<FieldPath>);

/// What a write changes of the fields it may own.
fn compare_objects(old: &Value, new: &Value, scope: Scope, schema: &KindSchema) -> Diff {
    let (mut changed, mut removed) = (BTreeSet::new(), BTreeSet::new());
    let before: std::collections::BTreeMap<FieldPath, &Value> =
        ownable(old, scope).into_iter().collect();
    let after: std::collections::BTreeMap<FieldPath, &Value> =
        ownable(new, scope).into_iter().collect();
    for (path, nv) in &after {
        let mut path = path.clone();
        match before.get(&path) {
            Some(ov) if ov == nv => {}
            Some(ov) => compare(ov, nv, &mut path, schema, &mut changed, &mut removed),
            None => add_all(nv, &mut path, schema, &mut changed),
        }
    }
    for path in before.keys().filter(|p| !after.contains_key(*p)) {
        removed.insert(path.clone());
    }
    (changed, removed)
}

fn under_any(p: &FieldPath, roots: &BTreeSet<FieldPath>) -> bool {
    (1..=p.len()).any(|n| roots.contains(&p[..n]))
}

/// The most `Update` entries an object keeps (the field manager's cap).
const MAX_UPDATE_ENTRIES: usize = 10;

/// Over [`MAX_UPDATE_ENTRIES`] `Update` entries, the oldest are merged, per apiVersion, into one
/// entry of the manager `ancient-changes` (as the real field manager's `capManagersManager`):
/// the oldest entry of a version waits for the next one of that version, then both become the
/// bucket, which takes the time of the newest entry merged into it.
fn cap_update_entries(entries: &mut Vec<Value>) {
    let mut updaters: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i]["operation"] == "Update")
        .collect();
    if updaters.len() <= MAX_UPDATE_ENTRIES {
        return;
    }
    updaters.sort_by_cached_key(|&i| entries[i]["time"].as_str().unwrap_or_default().to_string());
    let mut left = updaters.len();
    let mut first_of_version: std::collections::HashMap<String, usize> = Default::default();
    let mut merged = vec![];
    for i in updaters {
        if left <= MAX_UPDATE_ENTRIES {
            break;
        }
        let version = entries[i]["apiVersion"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let Some(&bucket) = first_of_version.get(&version) else {
            first_of_version.insert(version, i);
            continue;
        };
        let mut set = from_fields_v1(&entries[bucket]["fieldsV1"]);
        set.extend(from_fields_v1(&entries[i]["fieldsV1"]));
        let time = entries[i]["time"].clone();
        if let Some(e) = entries[bucket].as_object_mut() {
            e.insert("manager".into(), json!("ancient-changes"));
            e.remove("subresource");
            e.insert("time".into(), time);
            e.insert("fieldsV1".into(), to_fields_v1(&set));
        }
        merged.push(i);
        left -= 1;
    }
    merged.sort_unstable();
    for i in merged.into_iter().rev() {
        entries.remove(i);
    }
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
pub fn record_create(obj: &mut Value, w: &Writer, scope: Scope, schema: &KindSchema, now: &str) {
    let fields = created_fields(obj, scope, schema);
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
pub fn record_update(
    old: &Value,
    new: &mut Value,
    w: &Writer,
    scope: Scope,
    schema: &KindSchema,
    now: &str,
) {
    let entries: Vec<Value> = match new["metadata"]["managedFields"].as_array() {
        Some(a) if !a.is_empty() => a.clone(),
        _ => return,
    };
    let (changed, removed) = compare_objects(old, new, scope, schema);
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
    cap_update_entries(&mut out);
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
        let set = applied_set(&body, Scope::All, &KindSchema::atomic());
        let v1 = to_fields_v1(&set);
        assert_eq!(
            v1,
            json!({"f:data": {"f:e": {}, "f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
        assert_eq!(from_fields_v1(&v1), set);
        assert_eq!(
            from_fields_v1(&json!({"f:data": {".": {}, "f:k": {}}})),
            [
                vec!["f:data".to_string()],
                vec!["f:data".to_string(), "f:k".to_string()]
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
        record_create(
            &mut obj,
            &writer("kubectl-create"),
            Scope::All,
            &KindSchema::atomic(),
            "T1",
        );
        assert_eq!(
            obj["metadata"]["managedFields"],
            json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
                "time": "T1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {".": {}, "f:a": {}},
                    "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}])
        );
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"x": 1}, "status": {"phase": "Pending"}});
        record_create(
            &mut pod,
            &writer("m"),
            Scope::NoStatus,
            &KindSchema::atomic(),
            "T1",
        );
        assert_eq!(
            pod["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {".": {}, "f:x": {}}})
        );
    }

    #[test]
    fn an_update_takes_the_fields_it_changes() {
        let mut old = cm(json!({"a": "1", "b": "2"}));
        record_create(
            &mut old,
            &writer("kubectl-create"),
            Scope::All,
            &KindSchema::atomic(),
            "T1",
        );
        let mut new = old.clone();
        new["data"] = json!({"a": "9", "c": "3"});
        record_update(
            &old,
            &mut new,
            &writer("kubectl-edit"),
            Scope::All,
            &KindSchema::atomic(),
            "T2",
        );
        let mf = &new["metadata"]["managedFields"];
        assert_eq!(mf.as_array().map(Vec::len), Some(2), "{mf}");
        assert_eq!(mf[0]["manager"], "kubectl-create");
        assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {}}));
        assert_eq!(mf[1]["manager"], "kubectl-edit");
        assert_eq!(mf[1]["time"], "T2");
        assert_eq!(mf[1]["fieldsV1"], json!({"f:data": {"f:a": {}, "f:c": {}}}));
        // No change, no new entry or time.
        let mut same = new.clone();
        record_update(
            &new,
            &mut same,
            &writer("other"),
            Scope::All,
            &KindSchema::atomic(),
            "T3",
        );
        assert_eq!(same, new);
        // Objects without entries are not tracked by updates.
        let old = cm(json!({"a": "1"}));
        let mut new = cm(json!({"a": "2"}));
        record_update(
            &old,
            &mut new,
            &writer("m"),
            Scope::All,
            &KindSchema::atomic(),
            "T2",
        );
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
            &KindSchema::atomic(),
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
            &KindSchema::atomic(),
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
        record_create(
            &mut live,
            &writer("kubectl-create"),
            Scope::All,
            &KindSchema::atomic(),
            "T1",
        );
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
            &KindSchema::atomic(),
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
            &KindSchema::atomic(),
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
            &KindSchema::atomic(),
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
        record_create(
            &mut old,
            &writer("kubectl-run"),
            Scope::NoStatus,
            &KindSchema::atomic(),
            "T1",
        );
        let mut new = old.clone();
        new["status"] = json!({"phase": "Running"});
        new["spec"]["x"] = json!(2);
        let w = Writer {
            manager: "kubelet",
            api_version: "v1",
            subresource: Some("status"),
        };
        record_update(
            &old,
            &mut new,
            &w,
            Scope::StatusOnly,
            &KindSchema::atomic(),
            "T2",
        );
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

    /// Apply `body` by `manager` onto `live` as ops does: merge, then record.
    fn apply_as(
        live: &Value,
        body: Value,
        manager: &str,
        schema: &KindSchema,
    ) -> Result<Value, String> {
        let mut merged = live.clone();
        merge(&mut merged, &body, schema);
        apply(
            Some(live),
            &mut merged,
            &body,
            &writer(manager),
            false,
            Scope::All,
            schema,
            "T",
        )
        .map_err(|e| e.message)?;
        Ok(merged)
    }

    #[test]
    fn managers_own_the_items_of_associative_lists_apart() {
        let schema = KindSchema {
            key: "batch/cronjobs",
            schema: None,
            custom: false,
        };
        let job = |containers: Value, finalizers: Value| {
            json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": "j", "finalizers": finalizers},
                "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": containers}}}}}})
        };
        let live = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "j"}});
        let live = apply_as(
            &live,
            job(json!([{"name": "a", "image": "i:1"}]), json!(["x/a"])),
            "a",
            &schema,
        )
        .unwrap();
        // Another manager's items join the lists instead of conflicting.
        let live = apply_as(
            &live,
            job(json!([{"name": "b", "image": "n:1"}]), json!(["x/b"])),
            "b",
            &schema,
        )
        .unwrap();
        let containers = &live["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"];
        assert_eq!(
            containers,
            &json!([{"name": "a", "image": "i:1"}, {"name": "b", "image": "n:1"}])
        );
        assert_eq!(live["metadata"]["finalizers"], json!(["x/a", "x/b"]));
        let b_fields = &live["metadata"]["managedFields"][1]["fieldsV1"];
        assert_eq!(
            b_fields["f:spec"]["f:jobTemplate"]["f:spec"]["f:template"]["f:spec"]["f:containers"],
            json!({"k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}})
        );
        assert_eq!(
            b_fields["f:metadata"]["f:finalizers"],
            json!({"v:\"x/b\"": {}})
        );
        // Changing another manager's item field is a conflict named by the item's key.
        let e = apply_as(
            &live,
            job(json!([{"name": "a", "image": "i:2"}]), json!(["x/b"])),
            "b",
            &schema,
        )
        .unwrap_err();
        assert_eq!(
            e,
            "Apply failed with 1 conflict: conflict with \"a\": .spec.jobTemplate.spec.template.spec.containers[name=\"a\"].image"
        );
        // Items a manager stops applying go, when no one else owns them.
        let live = apply_as(&live, job(json!([]), json!(["x/b"])), "a", &schema).unwrap();
        let containers = &live["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers, &json!([{"name": "b", "image": "n:1"}]));
        assert_eq!(live["metadata"]["finalizers"], json!(["x/b"]));
    }

    #[test]
    fn a_crds_schema_says_which_lists_are_associative() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["port", "protocol"],
                "items": {"type": "object", "properties": {"rules": {"type": "array",
                    "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
            "plain": {"type": "array", "items": {"type": "string"}}}}}});
        let schema = KindSchema {
            key: "x/things",
            schema: Some(&schema),
            custom: true,
        };
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            schema.kind(&path(&["f:spec", "f:ports"])),
            ListKind::Map(vec!["port".into(), "protocol".into()])
        );
        assert_eq!(
            schema.kind(&path(&["f:spec", "f:ports", "k:{\"port\":80}", "f:rules"])),
            ListKind::Set
        );
        assert_eq!(schema.kind(&path(&["f:spec", "f:plain"])), ListKind::Atomic);
        // A missing protocol is TCP, as the schemas default it.
        assert_eq!(
            key_element(&json!({"port": 80}), &["port".into(), "protocol".into()]).as_deref(),
            Some("k:{\"port\":80,\"protocol\":\"TCP\"}")
        );
        assert_eq!(
            path_string(&path(&[
                "f:spec",
                "f:ports",
                "k:{\"port\":80,\"protocol\":\"TCP\"}",
                "f:rules",
                "v:\"r\""
            ])),
            ".spec.ports[port=80,protocol=\"TCP\"].rules[=\"r\"]"
        );
    }

    #[test]
    fn an_item_another_manager_changed_keeps_its_key_and_long_lists_stay_linear() {
        let schema = KindSchema {
            key: "/pods",
            schema: None,
            custom: false,
        };
        let pod = |containers: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": containers}})
        };
        let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
        let live = apply_as(
            &live,
            pod(json!([{"name": "a", "image": "i:1"}])),
            "a",
            &schema,
        )
        .unwrap();
        // Another writer changes the image: it owns that field of the item, not its name.
        let mut changed = live.clone();
        changed["spec"]["containers"][0]["image"] = json!("i:2");
        record_update(
            &live,
            &mut changed,
            &writer("kubectl-set"),
            Scope::All,
            &schema,
            "T",
        );
        let live = apply_as(&changed, pod(json!([])), "a", &schema).unwrap();
        assert_eq!(
            live["spec"]["containers"],
            json!([{"name": "a", "image": "i:2"}])
        );

        // Thousands of items applied, then all dropped, in well under a second each.
        const N: usize = 20_000;
        let many: Vec<Value> = (0..N)
            .map(|i| json!({"name": format!("c{i}"), "image": "x"}))
            .collect();
        let started = std::time::Instant::now();
        let live = apply_as(&live, pod(Value::Array(many)), "a", &schema).unwrap();
        assert_eq!(
            live["spec"]["containers"].as_array().map(Vec::len),
            Some(N + 1)
        );
        let live = apply_as(&live, pod(json!([])), "a", &schema).unwrap();
        assert_eq!(live["spec"]["containers"].as_array().map(Vec::len), Some(1));
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn a_map_owned_as_a_member_stays_while_its_fields_are_applied() {
        // As after kubectl's client-side-apply upgrade: the applier's entry owns `.spec` itself.
        let mut live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
            "data": {"a": "1", "b": "2"}});
        set_entries(
            &mut live,
            vec![writer("kubectl").entry(
                "Apply",
                "T1",
                json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}}),
            )],
        );
        let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
            "data": {"a": "1"}});
        let merged = apply_as(&live, body, "kubectl", &KindSchema::atomic()).unwrap();
        assert_eq!(merged["data"], json!({"a": "1"}));
    }

    #[test]
    fn a_create_does_not_own_the_structs_its_kinds_zero_value_has() {
        let cronjobs = KindSchema {
            key: "batch/cronjobs",
            schema: None,
            custom: false,
        };
        let mut cj = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {
                "metadata": {"labels": {"app": "c"}},
                "spec": {"containers": [{"name": "main", "image": "x"}]}}}}}});
        record_create(
            &mut cj,
            &writer("kubectl-create"),
            Scope::NoStatus,
            &cronjobs,
            "T",
        );
        assert_eq!(
            cj["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:spec": {"f:schedule": {}, "f:jobTemplate": {"f:spec": {"f:template": {
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:spec": {"f:containers": {
                    "k:{\"name\":\"main\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}}})
        );
        let bindings = KindSchema {
            key: "rbac.authorization.k8s.io/rolebindings",
            schema: None,
            custom: false,
        };
        let mut rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}]});
        record_create(
            &mut rb,
            &writer("kubectl-create"),
            Scope::All,
            &bindings,
            "T",
        );
        assert_eq!(
            rb["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:roleRef": {"f:kind": {}, "f:name": {}}, "f:subjects": {}})
        );
    }

    #[test]
    fn more_than_ten_update_managers_merge_the_oldest_into_ancient_changes() {
        let mut entries: Vec<Value> = (0..11)
            .map(|n| {
                writer(&format!("m{n}")).entry(
                    "Update",
                    &format!("2026-01-01T00:00:{n:02}Z"),
                    json!({"f:data": {format!("f:k{n}"): {}}}),
                )
            })
            .collect();
        entries.push(writer("applier").entry("Apply", "2026-01-01T00:00:00Z", json!({})));
        cap_update_entries(&mut entries);
        assert_eq!(entries.len(), 11);
        let ancient: Vec<&Value> = entries
            .iter()
            .filter(|e| e["manager"] == "ancient-changes")
            .collect();
        assert_eq!(ancient.len(), 1);
        assert_eq!(
            ancient[0]["fieldsV1"],
            json!({"f:data": {"f:k0": {}, "f:k1": {}}})
        );
        assert_eq!(ancient[0]["time"], "2026-01-01T00:00:01Z");
        assert!(
            entries
                .iter()
                .all(|e| e["manager"] != "m0" && e["manager"] != "m1")
        );
        // Ten or fewer are left alone.
        let before = entries.clone();
        cap_update_entries(&mut entries);
        assert_eq!(entries, before);
    }
}
