//! ConfigMaps (and the data keys Secrets share with them): key validation.

use crate::kinds::strategy::Strategy;
use crate::status::Cause;
use crate::validation;
use serde_json::{Value, json};

/// `IsConfigMapKey`: the keys of ConfigMaps and Secrets are file names.
fn config_key_messages(key: &str) -> Vec<String> {
    let mut msgs = vec![];
    if key.len() > 253 {
        msgs.push("must be no more than 253 characters".into());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
    {
        msgs.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
                .into(),
        );
    }
    match key {
        "." => msgs.push("must not be '.'".into()),
        ".." => msgs.push("must not be '..'".into()),
        k if k.starts_with("..") => msgs.push("must not start with '..'".into()),
        _ => {}
    }
    msgs
}

/// The keys of `bag` (`data` or `binaryData`), each a valid file name; `other` is the bag a key
/// may not also be in.
pub(crate) fn key_causes(v: &Value, bag: &str, other: Option<&str>, causes: &mut Vec<Cause>) {
    let Some(keys) = v[bag].as_object() else {
        return;
    };
    for key in keys.keys() {
        let field = format!("{bag}[{key}]");
        let mut msgs = config_key_messages(key);
        if let Some(other) = other
            && v[other].get(key).is_some()
        {
            msgs.push(format!("duplicate of key present in {other}"));
        }
        causes.extend(validation::invalid_causes(&field, &json!(key), msgs));
    }
}

/// What an object marked `immutable` keeps: the mark and its `contents`. Contents are compared as
/// the server compares them, the stored side without empty maps (storage drops them) and the new
/// side as sent, so `data: {}` on an immutable object without data is a change.
pub(crate) fn immutable_contents_causes(old: &Value, new: &Value, contents: &[&str]) -> Vec<Cause> {
    let mut causes = vec![];
    if old["immutable"] != json!(true) {
        return causes;
    }
    let forbidden =
        |field: &str| validation::forbidden(field, "field is immutable when `immutable` is set");
    if new["immutable"] != json!(true) {
        causes.push(forbidden("immutable"));
    }
    let stored = |v: &Value| match v {
        Value::Object(m) if m.is_empty() => Value::Null,
        other => other.clone(),
    };
    for field in contents {
        if stored(&old[*field]) != new[*field] {
            causes.push(forbidden(field));
        }
    }
    causes
}

/// ConfigMaps: keys that are file names, and `immutable`.
pub(crate) struct ConfigMapStrategy;

impl Strategy for ConfigMapStrategy {
    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        key_causes(obj, "data", Some("binaryData"), causes);
        key_causes(obj, "binaryData", None, causes);
    }

    /// `ValidateConfigMapUpdate`.
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<Cause> {
        immutable_contents_causes(old, new, &["data", "binaryData"])
    }
}
