//! Merging an applied configuration into the live object, and removing the fields a manager no
//! longer applies.

use crate::managed::schema::{FieldPath, KindSchema, list_elements};
use serde_json::{Map, Value};

/// Merges an applied configuration into the live object as server-side apply does: maps
/// merge, `null` is a value, associative lists merge item by item (new items go last) and
/// atomic lists are replaced.
pub fn merge(target: &mut Value, applied: &Value, schema: &KindSchema) {
    merge_at(target, applied, schema, &mut vec![]);
}

pub(super) fn merge_at(
    target: &mut Value,
    applied: &Value,
    schema: &KindSchema,
    path: &mut FieldPath,
) {
    match applied {
        Value::Object(a) => {
            let t = crate::util::ensure_obj(target);
            for (k, v) in a {
                path.push(format!("f:{k}"));
                merge_at(t.entry(k.clone()).or_insert(Value::Null), v, schema, path);
                path.pop();
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
pub(super) fn value_at_mut<'v>(
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
pub(super) fn remove_all(v: &mut Value, paths: &[&FieldPath], schema: &KindSchema) {
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
