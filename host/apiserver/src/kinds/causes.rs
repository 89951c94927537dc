//! The causes kinds' validation reports, in the real server's words, and the small helpers
//! their defaults share.

use crate::status::Cause;
use crate::validation;
use serde_json::{Map, Value};

/// The object at `v[key]`, to fill in defaults; None when it is absent or not an object.
pub(crate) fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    v.get_mut(key).and_then(Value::as_object_mut)
}

/// `ValidateNonnegativeField` of an optional integer field of `spec`.
pub(crate) fn nonnegative(spec: &Value, key: &str, path: &str, causes: &mut Vec<Cause>) {
    if let Some(n) = spec[key].as_i64()
        && n < 0
    {
        let why = "must be greater than or equal to 0";
        causes.push(validation::invalid(format!("{path}.{key}"), n, why));
    }
}
