//! Secrets: their defaults (`type`, `stringData` folded into `data`) and the rules of their
//! `type`.

use crate::kinds::config_map::{immutable_contents_causes, key_causes};
use crate::kinds::strategy::{Ctx, Strategy};
use crate::status::{ApiError, Cause};
use crate::store::Obj;
use crate::validation;
use crate::verbs::Sub;
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

/// What `ValidateSecret` wants of each type's data.
pub(crate) fn secret_type_causes(v: &Value, causes: &mut Vec<Cause>) {
    let data = &v["data"];
    let has = |key: &str| data.get(key).is_some();
    let need = |key: &str| validation::required(format!("data[{key}]"), "");
    match v["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let account = &v["metadata"]["annotations"]["kubernetes.io/service-account.name"];
            if account.as_str().is_none_or(str::is_empty) {
                causes.push(validation::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        // The registry credentials themselves are not parsed: nothing here pulls images.
        "kubernetes.io/dockercfg" if !has(".dockercfg") => causes.push(need(".dockercfg")),
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            causes.push(need(".dockerconfigjson"));
        }
        // Either may be empty, but one must be there.
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            causes.push(need("username"));
            causes.push(need("password"));
        }
        "kubernetes.io/ssh-auth" if data["ssh-privatekey"].as_str().is_none_or(str::is_empty) => {
            causes.push(need("ssh-privatekey"));
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    causes.push(need(key));
                }
            }
        }
        _ => {}
    }
}

/// Secrets: `stringData` folded in, `type` defaulted and fixed, the data each type needs.
pub(crate) struct SecretStrategy;

impl Strategy for SecretStrategy {
    fn prepare_create(&self, _ctx: &Ctx, obj: &mut Value) -> Result<(), ApiError> {
        secret_defaults(obj)
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        key_causes(obj, "data", None, causes);
        secret_type_causes(obj, causes);
    }

    fn prepare_update(
        &self,
        _ctx: &Ctx,
        _old: &Obj,
        new: &mut Value,
        sub: Sub,
    ) -> Result<(), ApiError> {
        if sub == Sub::Main {
            secret_defaults(new)?;
        }
        Ok(())
    }

    /// `ValidateSecretUpdate`: the type is fixed, and an `immutable` Secret keeps its data.
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<Cause> {
        let mut causes = vec![];
        if old["type"] != new["type"] {
            causes.push(validation::invalid(
                "type",
                &new["type"],
                "field is immutable",
            ));
        }
        causes.extend(immutable_contents_causes(old, new, &["data"]));
        causes
    }
}
