//! Secrets: their defaults (`type`, `stringData` folded into `data`).

use crate::status::ApiError;
use serde_json::{Value, json};

/// Folds `stringData` into `data`, defaults `type`, and rejects `data` that is not base64 (as
/// the real server's decoder does).
pub(crate) fn secret_defaults(v: &mut Value) -> Result<(), ApiError> {
    use base64::Engine;
    if let Some(data) = v.get("data").filter(|d| !d.is_null()) {
        let Some(m) = data.as_object() else {
            return Err(ApiError::bad_request(
                "Secret in version \"v1\" cannot be handled as a Secret: json: cannot unmarshal data into Go struct field Secret.data of type map[string][]uint8",
            ));
        };
        for (k, val) in m {
            let ok = val
                .as_str()
                .is_some_and(|s| base64::engine::general_purpose::STANDARD.decode(s).is_ok());
            if !ok {
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data in data.{k}"
                )));
            }
        }
    }
    if let Some(sd) = v.get("stringData").and_then(Value::as_object).cloned() {
        if !v["data"].is_object() {
            v["data"] = json!({});
        }
        for (k, val) in sd {
            let s = val.as_str().unwrap_or_default();
            v["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
        }
        if let Some(m) = v.as_object_mut() {
            m.remove("stringData");
        }
    }
    if v["type"].as_str().is_none_or(str::is_empty) {
        v["type"] = json!("Opaque");
    }
    Ok(())
}
