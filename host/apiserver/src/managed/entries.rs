//! The `managedFields` entries of ordinary writes: the manager's name, validation of entries a
//! client sends, and the `Update` entries recorded on create and update.

use crate::managed::fieldset::{
    Scope, compare_objects, created_fields, from_fields_v1, to_fields_v1, under_any,
};
use crate::managed::schema::{FieldPath, KindSchema};
use crate::status::Cause;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

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
pub(super) fn printable(c: char) -> bool {
    !c.is_control() && (c == ' ' || !c.is_whitespace())
}

/// What `ValidateFieldManager` finds wrong with a `fieldManager`: more than
/// [`MAX_MANAGER_LEN`] bytes, or characters that are not printable.
pub fn field_manager_causes(manager: &str) -> Vec<Cause> {
    let mut causes = vec![];
    if manager.len() > MAX_MANAGER_LEN {
        let why = format!("may not be more than {MAX_MANAGER_LEN} bytes");
        causes.push(crate::validation::too_long("fieldManager", &why));
    }
    for (at, c) in manager.char_indices().filter(|(_, c)| !printable(*c)) {
        let why = format!("invalid character U+{:04X} (at position {at})", c as u32);
        let shown = crate::validation::go_quote(manager);
        causes.push(crate::validation::invalid("fieldManager", shown, &why));
    }
    causes
}

/// Who writes: an entry's identity without its time and fields.
#[derive(Debug, Clone, Copy)]
pub struct Writer<'a> {
    /// The field manager's name: `fieldManager`, else derived from the User-Agent (`kubectl`).
    pub manager: &'a str,
    /// The `apiVersion` the write was made in; entries of other operations than apply are kept
    /// per version.
    pub api_version: &'a str,
    /// `status` for writes of the status subresource.
    pub subresource: Option<&'a str>,
}

impl Writer<'_> {
    pub(super) fn is(&self, e: &Value, operation: &str) -> bool {
        e["manager"].as_str().unwrap_or_default() == self.manager
            && e["operation"] == operation
            && (operation == "Apply" || e["apiVersion"] == self.api_version)
            && e["subresource"].as_str().unwrap_or_default() == self.subresource.unwrap_or_default()
    }

    pub(super) fn entry(&self, operation: &str, time: &str, fields: Value) -> Value {
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

/// The most `Update` entries an object keeps (the field manager's cap).
pub(super) const MAX_UPDATE_ENTRIES: usize = 10;

/// Over [`MAX_UPDATE_ENTRIES`] `Update` entries, the oldest are merged, per apiVersion, into one
/// entry of the manager `ancient-changes` (as the real field manager's `capManagersManager`):
/// the oldest entry of a version waits for the next one of that version, then both become the
/// bucket, which takes the time of the newest entry merged into it.
pub(super) fn cap_update_entries(entries: &mut Vec<Value>) {
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
pub(super) fn sort_entries(entries: &mut [Value]) {
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

pub(super) fn set_entries(obj: &mut Value, entries: Vec<Value>) {
    if let Some(m) = obj["metadata"].as_object_mut() {
        crate::util::set_list(m, "managedFields", entries);
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
