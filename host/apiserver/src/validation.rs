//! Field errors in the real API server's words, and the checks of object metadata and label
//! maps every kind shares. The name, label and port rules themselves
//! (`k8s.io/apimachinery/pkg/util/validation`) are `lethe-kube-model`'s, shared with the
//! components that name objects; they are re-exported here.

use crate::status::Cause;
use serde_json::{Map, Value, json};

pub use lethe_kube_rules::validation::{
    LABEL_VALUE_MSG, dns1035_label, dns1123_label, dns1123_subdomain, label_value, port_name,
    port_num, qualified_name,
};

/// `path.key`, as the API server names a field in its errors (`key` alone at the root).
pub fn field_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// `value` decoded into Go's `interface{}` (integers kept as `int64`, as the API server's JSON
/// decoding keeps them) and printed with `%v`: maps as `map[k:v …]` with sorted keys, slices as
/// `[a b]`, strings bare, other numbers as `float64`.
pub fn go_print(value: &Value) -> String {
    go_print_as(value, false)
}

/// [`go_print`], with every number a `float64` when `floats` (as YAML decoded without type
/// information has them).
pub fn go_print_as(value: &Value, floats: bool) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64().filter(|_| !floats) {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or_default()),
        },
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(|v| go_print_as(v, floats)).collect();
            format!("[{}]", items.join(" "))
        }
        // serde_json's map keeps its keys sorted, as Go prints a map's.
        Value::Object(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_print_as(v, floats)))
                .collect();
            format!("map[{}]", fields.join(" "))
        }
    }
}

/// A `float64` as Go's `%v` prints it (`%g`, shortest): plain for decimal exponents from -4 to 5,
/// otherwise with a signed exponent of two digits at least (`1e+06`, `1.5e-05`).
pub(crate) fn go_float(f: f64) -> String {
    let text = format!("{f:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    let power: i32 = exponent.parse().unwrap_or_default();
    if f == 0.0 || (-4..6).contains(&power) {
        return format!("{f}");
    }
    let sign = if power < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", power.unsigned_abs())
}

pub use lethe_kube_rules::go_quote;

/// How Go's JSON decoder names the type of a value it could not decode (`json: cannot unmarshal
/// <type> into Go struct field ...`).
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Object(_) => "object",
        Value::Null => "null",
    }
}

/// `field.Invalid`: `value` already printed as Go prints it.
pub fn invalid(field: impl Into<String>, value: impl std::fmt::Display, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        message: format!("Invalid value: {value}: {detail}"),
        field: field.into(),
    }
}

/// `field.Required`, whose detail, when there is one, follows "Required value" after a colon.
pub fn required(field: impl Into<String>, detail: &str) -> Cause {
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

/// `field.Forbidden`.
pub fn forbidden(field: impl Into<String>, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden",
        message: format!("Forbidden: {detail}"),
        field: field.into(),
    }
}

/// `field.NotSupported`: a string value quoted as Go's `%q` quotes it, any other as JSON, then
/// the supported values, quoted, in the server's order.
pub fn not_supported(field: impl Into<String>, value: &Value, supported: &[&str]) -> Cause {
    let value = match value {
        Value::String(s) => go_quote(s),
        other => other.to_string(),
    };
    let supported: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
    Cause {
        reason: "FieldValueNotSupported",
        message: format!(
            "Unsupported value: {value}: supported values: {}",
            supported.join(", ")
        ),
        field: field.into(),
    }
}

/// `field.TypeInvalid`: `value` already printed as Go prints it.
pub fn type_invalid(
    field: impl Into<String>,
    value: impl std::fmt::Display,
    detail: &str,
) -> Cause {
    Cause {
        reason: "FieldValueTypeInvalid",
        ..invalid(field, value, detail)
    }
}

/// `field.NotFound`: `value` already printed as Go prints it.
pub fn not_found(field: impl Into<String>, value: impl std::fmt::Display) -> Cause {
    Cause {
        reason: "FieldValueNotFound",
        message: format!("Not found: {value}"),
        field: field.into(),
    }
}

/// `field.TooLong` (and `TooMany`, whose reason differs): `detail` follows "Too long: ".
pub fn too_long(field: impl Into<String>, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueTooLong",
        message: format!("Too long: {detail}"),
        field: field.into(),
    }
}

/// `field.Duplicate`: `value` already printed as Go prints it.
pub fn duplicate(field: impl Into<String>, value: impl std::fmt::Display) -> Cause {
    Cause {
        reason: "FieldValueDuplicate",
        message: format!("Duplicate value: {value}"),
        field: field.into(),
    }
}

/// One `FieldValueInvalid` cause per message, as `field.Invalid` renders them (`value` is
/// printed as JSON, which is how Go's `%q` shows the strings met here).
pub fn invalid_causes(field: &str, value: &Value, msgs: Vec<String>) -> Vec<Cause> {
    msgs.iter().map(|m| invalid(field, value, m)).collect()
}

/// The metadata checks of `ValidateObjectMeta` after the name: labels, annotations, owner
/// references and finalizers, in that order. `kube_finalizers`: the kind is built in, whose
/// validation also wants every finalizer either standard or domain-qualified.
pub fn object_meta_causes(meta: &Value, kube_finalizers: bool) -> Vec<Cause> {
    let mut causes = vec![];
    if let Some(labels) = meta["labels"].as_object() {
        causes.extend(label_causes(labels, "metadata.labels"));
    }
    if let Some(annotations) = meta["annotations"].as_object() {
        let mut size = 0;
        for (key, value) in annotations {
            causes.extend(invalid_causes(
                "metadata.annotations",
                &json!(key),
                qualified_name(&key.to_lowercase()),
            ));
            size += key.len() + value.as_str().map_or(0, str::len);
        }
        if size > 256 * 1024 {
            causes.push(too_long(
                "metadata.annotations",
                "may not be more than 262144 bytes",
            ));
        }
    }
    causes.extend(owner_reference_causes(&meta["ownerReferences"]));
    let finalizers: Vec<&str> = meta["finalizers"]
        .as_array()
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for f in &finalizers {
        causes.extend(invalid_causes(
            "metadata.finalizers",
            &json!(f),
            qualified_name(f),
        ));
    }
    if finalizers.contains(&"orphan") && finalizers.contains(&"foregroundDeletion") {
        let quoted: Vec<String> = finalizers.iter().map(|f| go_quote(f)).collect();
        causes.push(invalid(
            "metadata.finalizers",
            format!("[]string{{{}}}", quoted.join(", ")),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
    if kube_finalizers {
        let field = |i| format!("metadata.finalizers[{i}]");
        causes.extend(finalizer_name_causes(&finalizers, field));
    }
    causes
}

/// `validateFinalizerName` for each finalizer, reported at `field(i)`: a qualified name, and
/// either a standard one or domain-qualified.
pub fn finalizer_name_causes<S: AsRef<str>>(
    finalizers: &[S],
    field: impl Fn(usize) -> String,
) -> Vec<Cause> {
    let mut causes = vec![];
    for (i, f) in finalizers.iter().enumerate() {
        let f = f.as_ref();
        let mut msgs = qualified_name(f);
        if !f.contains('/') && !matches!(f, "kubernetes" | "orphan" | "foregroundDeletion") {
            msgs.push("name is neither a standard finalizer name nor is it fully qualified".into());
        }
        causes.extend(invalid_causes(&field(i), &json!(f), msgs));
    }
    causes
}

/// `ValidateOwnerReferences`: each reference names its owner fully, and at most one is the
/// controller. Errors name the list, not the item, as the server's do.
fn owner_reference_causes(refs: &Value) -> Vec<Cause> {
    let Some(refs) = refs.as_array() else {
        return vec![];
    };
    let field = "metadata.ownerReferences";
    let mut causes = vec![];
    let mut controller: Option<String> = None;
    for r in refs {
        let text = |k: &str| r[k].as_str().unwrap_or_default();
        // `schema.FromAPIVersionAndKind`: the version is what follows the last slash.
        let version = text("apiVersion").rsplit('/').next().unwrap_or_default();
        for (key, empty, why) in [
            (
                "apiVersion",
                version.is_empty(),
                "version must not be empty",
            ),
            ("kind", text("kind").is_empty(), "kind must not be empty"),
            ("name", text("name").is_empty(), "name must not be empty"),
            ("uid", text("uid").is_empty(), "uid must not be empty"),
        ] {
            if empty {
                causes.extend(invalid_causes(
                    &format!("{field}.{key}"),
                    &json!(text(key)),
                    vec![why.into()],
                ));
            }
        }
        if text("apiVersion") == "v1" && text("kind") == "Event" {
            let why = "/v1, Kind=Event is disallowed from being an owner";
            causes.push(invalid(field, go_owner_reference(r), why));
        }
        if r["controller"] == json!(true) {
            let this = format!("{}/{}", text("kind"), text("name"));
            match &controller {
                Some(first) => {
                    let all: Vec<String> = refs.iter().map(go_owner_reference).collect();
                    let why = format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}"
                    );
                    let refs = format!("[]v1.OwnerReference{{{}}}", all.join(", "));
                    causes.push(invalid(field, refs, &why));
                }
                None => controller = Some(this),
            }
        }
    }
    causes
}

/// An owner reference as Go's `%#v` prints one (its two pointers shown by value, since their
/// addresses mean nothing here).
fn go_owner_reference(r: &Value) -> String {
    let text = |k: &str| go_quote(r[k].as_str().unwrap_or_default());
    let flag = |k: &str| match r[k].as_bool() {
        Some(b) => format!("(*bool)({b})"),
        None => "(*bool)(nil)".into(),
    };
    format!(
        "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
        text("apiVersion"),
        text("kind"),
        text("name"),
        text("uid"),
        flag("controller"),
        flag("blockOwnerDeletion")
    )
}

/// `ValidateLabels`: every key and value of a label map (or a selector), all reported at
/// `field` itself. Keys are taken in order so that the message is stable (the real server's
/// order follows Go's map iteration, which is random).
pub fn label_causes(labels: &Map<String, Value>, field: &str) -> Vec<Cause> {
    let mut causes = vec![];
    for (k, v) in labels {
        causes.extend(invalid_causes(field, &json!(k), qualified_name(k)));
        match v.as_str() {
            Some(s) => causes.extend(invalid_causes(field, v, label_value(s))),
            None => causes.extend(invalid_causes(field, v, vec![LABEL_VALUE_MSG.to_string()])),
        }
    }
    causes
}

#[cfg(test)]
mod tests {

    #[test]
    fn values_print_as_go_prints_them_from_an_interface() {
        let patch = json!({"spec": {"schedule": 5, "suspend": true, "x": null, "list": ["a", 1.5]}, "b": "s"});
        assert_eq!(
            go_print(&patch),
            "map[b:s spec:map[list:[a 1.5] schedule:5 suspend:true x:<nil>]]"
        );
        assert_eq!(go_print(&json!(1e21)), "1e+21");
        assert_eq!(go_print(&json!(0.000015)), "1.5e-05");
        assert_eq!(go_print(&json!(0.0001)), "0.0001");
        assert_eq!(go_print(&json!(123456.5)), "123456.5");
        assert_eq!(go_print(&json!(1234567)), "1234567");
        assert_eq!(go_print(&json!(1234567.5)), "1.2345675e+06");
        assert_eq!(go_print(&json!(-0.5)), "-0.5");
        assert_eq!(go_print(&json!(8080)), "8080");
    }
    use super::*;

    fn meta_messages(meta: Value, kube: bool) -> Vec<(String, String)> {
        object_meta_causes(&meta, kube)
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect()
    }

    #[test]
    fn finalizers_are_qualified_names_and_built_in_kinds_want_them_standard_or_qualified() {
        let plain = json!({"finalizers": ["plainname", "example.com/ok", "kubernetes"]});
        assert_eq!(meta_messages(plain.clone(), false), vec![]);
        assert_eq!(
            meta_messages(plain, true),
            vec![(
                "metadata.finalizers[0]".to_string(),
                "Invalid value: \"plainname\": name is neither a standard finalizer name nor is it fully qualified".to_string()
            )]
        );
        let both = json!({"finalizers": ["orphan", "foregroundDeletion"]});
        assert_eq!(
            meta_messages(both, true),
            vec![(
                "metadata.finalizers".to_string(),
                "Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set".to_string()
            )]
        );
        // An invalid name is reported for the list and again for the item, as the server does.
        let bad = meta_messages(json!({"finalizers": ["Foo Bar/x"]}), true);
        assert_eq!(bad.len(), 2, "{bad:?}");
        assert_eq!(bad[0].0, "metadata.finalizers");
        assert_eq!(bad[1].0, "metadata.finalizers[0]");
    }

    #[test]
    fn annotations_and_owner_references_are_checked() {
        assert_eq!(
            meta_messages(json!({"annotations": {"bad key!": "v", "Example.com/Fine": "v"}}), true),
            vec![(
                "metadata.annotations".to_string(),
                "Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string()
            )]
        );
        let refs = json!({"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "", "controller": true},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "b", "uid": "u2", "controller": true},
        ]});
        let messages = meta_messages(refs, true);
        assert_eq!(
            messages[0],
            (
                "metadata.ownerReferences.uid".to_string(),
                "Invalid value: \"\": uid must not be empty".to_string()
            )
        );
        assert_eq!(messages[1].0, "metadata.ownerReferences");
        assert!(
            messages[1].1.ends_with(
                "Only one reference can have Controller set to true. Found \"true\" in references for ConfigMap/a and ConfigMap/b"
            ),
            "{messages:?}"
        );
    }

    #[test]
    fn strings_are_quoted_as_go_quotes_them() {
        assert_eq!(go_quote("plain"), "\"plain\"");
        assert_eq!(go_quote("a\u{7}b\"c\\"), "\"a\\ab\\\"c\\\\\"");
        assert_eq!(go_quote("\u{1}\u{85}é"), "\"\\x01\\u0085é\"");
    }

    #[test]
    fn label_maps_report_at_the_map() {
        let m = json!({"a/b/c": "ok", "k": "-v", "n": 1});
        let causes = label_causes(m.as_object().unwrap(), "spec.selector");
        let msgs: Vec<String> = causes
            .iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect();
        assert_eq!(msgs.len(), 3, "{msgs:?}");
        assert!(msgs[0].starts_with("spec.selector: Invalid value: \"a/b/c\": a qualified name"));
        assert!(msgs[1].starts_with("spec.selector: Invalid value: \"-v\": a valid label"));
        assert!(msgs[2].starts_with("spec.selector: Invalid value: 1: a valid label"));
    }
}
