//! The `managedFields` entries: who writes, the checks of a `fieldManager` and of the entries a
//! client sends, and their order.

use crate::status::Cause;
use serde_json::{Map, Value, json};

/// The longest manager name (`FieldManagerMaxLength`), in bytes.
pub const MAX_MANAGER_LEN: usize = 128;

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
    /// The field manager's name (`fieldManager`).
    pub manager: &'a str,
    /// The `apiVersion` the write was made in.
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
