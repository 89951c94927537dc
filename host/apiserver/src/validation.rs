//! The name, label and port rules the real API server applies everywhere
//! (`k8s.io/apimachinery/pkg/util/validation`), with its exact messages, so that every kind
//! refuses bad input in the same words. Each check returns the list of messages the real one
//! would (empty when the value is valid), in the real order.

use crate::status::Cause;
use serde_json::{Map, Value, json};

/// The real server's message for a value that is not an RFC 1123 label (a namespace name, say).
pub const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
/// The real server's message for a value that is not an RFC 1123 subdomain (most object names).
pub const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// The real server's message for a value that is not a DNS-1035 label (a Service name, say).
pub const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
/// The real server's message for a port number outside 1..=65535.
pub const PORT_RANGE_MSG: &str = "must be between 1 and 65535, inclusive";

const LABEL_MAX: usize = 63;
const SUBDOMAIN_MAX: usize = 253;

fn max_len(n: usize) -> String {
    format!("must be no more than {n} characters")
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, or with `letter_first` `[a-z]([-a-z0-9]*[a-z0-9])?`; no
/// length limit (the callers report length separately, as the real checks do).
fn matches_label(s: &str, letter_first: bool) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    let lower_alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    (first.is_ascii_lowercase() || (!letter_first && first.is_ascii_digit()))
        && lower_alnum(last)
        && b.iter().all(|c| lower_alnum(c) || *c == b'-')
}

fn matches_subdomain(s: &str) -> bool {
    s.split('.').all(|l| matches_label(l, false))
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
fn matches_qualified(s: &str) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `IsDNS1123Label`.
pub fn dns1123_label(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > LABEL_MAX {
        errs.push(max_len(LABEL_MAX));
    }
    if !matches_label(s, false) {
        // A valid subdomain that is not a label can only be at fault for its dots.
        if matches_subdomain(s) {
            errs.push("must not contain dots".into());
        } else {
            errs.push(DNS1123_LABEL_MSG.into());
        }
    }
    errs
}

/// `IsDNS1123Subdomain`.
pub fn dns1123_subdomain(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > SUBDOMAIN_MAX {
        errs.push(max_len(SUBDOMAIN_MAX));
    }
    if !matches_subdomain(s) {
        errs.push(DNS1123_SUBDOMAIN_MSG.into());
    }
    errs
}

/// `IsDNS1035Label`.
pub fn dns1035_label(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > LABEL_MAX {
        errs.push(max_len(LABEL_MAX));
    }
    if !matches_label(s, true) {
        errs.push(DNS1035_LABEL_MSG.into());
    }
    errs
}

/// `IsQualifiedName`: label and annotation keys, an optional subdomain prefix and a name.
pub fn qualified_name(s: &str) -> Vec<String> {
    let mut errs = vec![];
    let parts: Vec<&str> = s.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".into());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a qualified name {QUALIFIED_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else if name.len() > LABEL_MAX {
        errs.push(format!("name part {}", max_len(LABEL_MAX)));
    }
    if !matches_qualified(name) {
        errs.push(format!("name part {QUALIFIED_NAME_MSG}"));
    }
    errs
}

/// `IsValidLabelValue`.
pub fn label_value(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > LABEL_MAX {
        errs.push(max_len(LABEL_MAX));
    }
    if !s.is_empty() && !matches_qualified(s) {
        errs.push(LABEL_VALUE_MSG.into());
    }
    errs
}

/// `IsValidPortName`: an IANA_SVC_NAME, as container port names and named target ports are.
pub fn port_name(s: &str) -> Vec<String> {
    let mut errs = vec![];
    if s.len() > 15 {
        errs.push(max_len(15));
    }
    let b = s.as_bytes();
    if b.is_empty()
        || !b
            .iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
    {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !b.iter().any(u8::is_ascii_lowercase) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if s.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if s.starts_with('-') || s.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// `IsValidPortNum`.
pub fn port_num(n: i64) -> Vec<String> {
    if (1..=65535).contains(&n) {
        vec![]
    } else {
        vec![PORT_RANGE_MSG.into()]
    }
}

/// `value` decoded into Go's `interface{}` (integers kept as `int64`, as the API server's JSON
/// decoding keeps them) and printed with `%v`: maps as `map[k:v …]` with sorted keys, slices as
/// `[a b]`, strings bare, other numbers as `float64`.
pub fn go_print(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => go_float(n.as_f64().unwrap_or_default()),
        },
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_print).collect();
            format!("[{}]", items.join(" "))
        }
        // serde_json's map keeps its keys sorted, as Go prints a map's.
        Value::Object(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_print(v)))
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

pub use lethe_kube_model::go_quote;

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
    msgs.into_iter()
        .map(|m| Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {value}: {m}"),
            field: field.to_string(),
        })
        .collect()
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
            causes.push(Cause {
                reason: "FieldValueTooLong",
                message: "Too long: may not be more than 262144 bytes".into(),
                field: "metadata.annotations".into(),
            });
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
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: []string{{{}}}: finalizer orphan and foregroundDeletion cannot be both set",
                quoted.join(", ")
            ),
            field: "metadata.finalizers".into(),
        });
    }
    if kube_finalizers {
        for (i, f) in finalizers.iter().enumerate() {
            let field = format!("metadata.finalizers[{i}]");
            let mut msgs = qualified_name(f);
            if !f.contains('/') && !matches!(*f, "kubernetes" | "orphan" | "foregroundDeletion") {
                msgs.push(
                    "name is neither a standard finalizer name nor is it fully qualified".into(),
                );
            }
            causes.extend(invalid_causes(&field, &json!(f), msgs));
        }
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
            causes.push(Cause {
                reason: "FieldValueInvalid",
                message: format!(
                    "Invalid value: {}: /v1, Kind=Event is disallowed from being an owner",
                    go_owner_reference(r)
                ),
                field: field.into(),
            });
        }
        if r["controller"] == json!(true) {
            let this = format!("{}/{}", text("kind"), text("name"));
            match &controller {
                Some(first) => {
                    let all: Vec<String> = refs.iter().map(go_owner_reference).collect();
                    causes.push(Cause {
                        reason: "FieldValueInvalid",
                        message: format!(
                            "Invalid value: []v1.OwnerReference{{{}}}: Only one reference can have Controller set to true. Found \"true\" in references for {first} and {this}",
                            all.join(", ")
                        ),
                        field: field.into(),
                    });
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
    fn labels_and_subdomains() {
        assert!(dns1123_label("a-1").is_empty());
        assert!(dns1123_label("1abc").is_empty());
        assert_eq!(dns1123_label("a.b"), ["must not contain dots"]);
        assert_eq!(dns1123_label("A"), [DNS1123_LABEL_MSG]);
        assert_eq!(dns1123_label(""), [DNS1123_LABEL_MSG]);
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            ["must be no more than 63 characters"]
        );
        assert!(dns1123_subdomain("a.b-c").is_empty());
        assert_eq!(dns1123_subdomain("a..b"), [DNS1123_SUBDOMAIN_MSG]);
        assert_eq!(dns1123_subdomain("Bad_Name"), [DNS1123_SUBDOMAIN_MSG]);
    }

    #[test]
    fn dns1035_labels_start_with_a_letter() {
        assert!(dns1035_label("abc-123").is_empty());
        assert_eq!(dns1035_label("1abc"), [DNS1035_LABEL_MSG]);
        assert_eq!(dns1035_label("abc-"), [DNS1035_LABEL_MSG]);
        assert_eq!(
            dns1035_label(&format!("x{}", "a".repeat(63))),
            ["must be no more than 63 characters"]
        );
    }

    #[test]
    fn qualified_names_and_label_values() {
        assert!(qualified_name("example.com/My_Name.1").is_empty());
        assert_eq!(
            qualified_name("/a"),
            ["prefix part must be non-empty".to_string()]
        );
        assert_eq!(
            qualified_name("Ex/a"),
            [format!("prefix part {DNS1123_SUBDOMAIN_MSG}")]
        );
        assert_eq!(
            qualified_name("a/"),
            [
                "name part must be non-empty".to_string(),
                format!("name part {QUALIFIED_NAME_MSG}")
            ]
        );
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must consist"));
        assert!(label_value("").is_empty());
        assert!(label_value("My_value.1").is_empty());
        assert_eq!(label_value("-a"), [LABEL_VALUE_MSG]);
    }

    #[test]
    fn port_names_follow_iana_svc_name() {
        assert!(port_name("http-alt").is_empty());
        assert_eq!(
            port_name("80"),
            ["must contain at least one letter (a-z)".to_string()]
        );
        assert_eq!(port_name("a--b"), ["must not contain consecutive hyphens"]);
        assert_eq!(
            port_name("-Ab"),
            [
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must not begin or end with a hyphen"
            ]
        );
        assert_eq!(port_name("abcdefghijklmnop").len(), 1);
        assert_eq!(port_num(0), [PORT_RANGE_MSG]);
        assert!(port_num(65535).is_empty());
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
