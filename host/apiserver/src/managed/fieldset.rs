//! Field sets: the paths an object sets, their fieldsV1 encoding, and the paths two versions of
//! an object differ in.

use crate::managed::schema::{FieldPath, KindSchema, list_elements};
use crate::schema::UNOWNED_META_FIELDS;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// Every leaf under `v` at `prefix`; `with_parents` also adds every map and list item on the way
/// (what a whole new subtree makes its writer own).
pub(super) fn walk_fields(
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
pub(super) fn ownable(obj: &Value, scope: Scope) -> Vec<(FieldPath, &Value)> {
    let mut out = vec![];
    for (k, v) in obj.as_object().into_iter().flatten() {
        if !scope.owns(k) {
            continue;
        }
        if k == "metadata" {
            for (mk, mv) in v.as_object().into_iter().flatten() {
                if !UNOWNED_META_FIELDS.contains(&mk.as_str()) {
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
            cur = crate::util::ensure_obj(cur.entry(seg.clone()).or_insert(Value::Null));
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

/// Which top-level fields a write may own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The whole object, for kinds without a status subresource.
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

/// The `fieldsV1` of all the fields of an object a write creates: what it adds to the kind's
/// zero value, where every map and list item it adds is itself a member, marked `.`.
pub(super) fn created_fields(obj: &Value, scope: Scope, schema: &KindSchema) -> Value {
    let (added, _) = compare_objects(&schema.zero(), obj, scope, schema);
    to_fields_v1(&added)
}

pub(super) fn add_all(
    v: &Value,
    path: &mut FieldPath,
    schema: &KindSchema,
    out: &mut BTreeSet<FieldPath>,
) {
    out.insert(path.clone());
    walk_fields(v, path, schema, true, out);
}

/// structured-merge-diff's comparison of two values: the paths added or modified, and the
/// paths removed.
pub(super) fn compare(
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

pub(super) type Diff = (BTreeSet<FieldPath>, BTreeSet<FieldPath>);

/// What a write changes of the fields it may own.
pub(super) fn compare_objects(old: &Value, new: &Value, scope: Scope, schema: &KindSchema) -> Diff {
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
