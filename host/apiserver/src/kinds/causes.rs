//! The causes kinds' validation reports, in the real server's words, and the small helpers
//! their defaults share.

use crate::status::Cause;
use crate::validation;
use serde_json::{Map, Value, json};

pub(crate) fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    v.get_mut(key).and_then(Value::as_object_mut)
}

pub(crate) fn req(field: &str) -> Cause {
    required(field, "")
}

/// `field.Required`, whose detail follows "Required value" after a colon when there is one.
pub(crate) fn required(field: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        message: if detail.is_empty() {
            "Required value".into()
        } else {
            format!("Required value: {detail}")
        },
        field: field.into(),
    }
}

/// `field.NotSupported` of a string value: the supported values quoted, in the server's order.
pub(crate) fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let supported: Vec<String> = supported.iter().map(|s| validation::go_quote(s)).collect();
    Cause {
        reason: "FieldValueNotSupported",
        message: format!(
            "Unsupported value: {}: supported values: {}",
            validation::go_quote(value),
            supported.join(", ")
        ),
        field: field.into(),
    }
}

/// `ValidateNonnegativeField` of an optional integer field of `spec`.
pub(crate) fn nonnegative(spec: &Value, key: &str, path: &str, causes: &mut Vec<Cause>) {
    if let Some(n) = spec[key].as_i64()
        && n < 0
    {
        causes.extend(validation::invalid_causes(
            &format!("{path}.{key}"),
            &json!(n),
            vec!["must be greater than or equal to 0".into()],
        ));
    }
}
