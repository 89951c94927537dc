//! Structural-schema handling for custom resources, as the real API server does with a CRD's
//! `openAPIV3Schema`: unknown fields are pruned (unless `x-kubernetes-preserve-unknown-fields`),
//! `default`s are applied, `null`s that are neither nullable nor defaulted are dropped, unknown
//! `metadata` fields are pruned, and types, `required`, `enum`, lengths and ranges are validated.

use crate::status::Cause;
use crate::validation::{self, field_path};
use serde_json::{Map, Value, json};

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_ok(want: &str, v: &Value) -> bool {
    match want {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        // A whole number written as a float (`2.0`) is an integer to the server's validator.
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        _ => true,
    }
}

/// A Required cause for each of the schema's `required` fields that `m` lacks.
fn required_causes(schema: &Value, m: &Map<String, Value>, path: &str, causes: &mut Vec<Cause>) {
    for r in schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !m.contains_key(r) {
            causes.push(validation::required(field_path(path, r), ""));
        }
    }
}

fn preserve(schema: &Value) -> bool {
    schema["x-kubernetes-preserve-unknown-fields"].as_bool() == Some(true)
}

fn walk(
    schema: &Value,
    v: &mut Value,
    path: &str,
    causes: &mut Vec<Cause>,
    pruned: &mut Vec<String>,
) {
    if v.is_null() {
        if schema["nullable"].as_bool() != Some(true) && schema.get("default").is_some() {
            *v = schema["default"].clone();
        }
        return;
    }
    if schema["x-kubernetes-int-or-string"].as_bool() == Some(true) {
        if !(v.is_string() || type_name(v) == "integer") {
            let shown = json!(type_name(v));
            let why = format!("{path} in body must be of type integer,string: {shown}");
            causes.push(validation::invalid(path, shown, &why));
        }
        return;
    }
    if schema["type"] == "integer"
        && let Some(f) = v.as_f64()
        && !v.is_i64()
        && !v.is_u64()
        && f.fract() == 0.0
        && f.abs() < 9.007_199_254_740_992e15
    {
        // Decoded and encoded again as the server does, `2.0` is stored as `2`.
        *v = json!(f as i64);
    }
    if let Some(want) = schema["type"].as_str()
        && !type_ok(want, v)
    {
        let shown = json!(type_name(v));
        let why = format!("{path} in body must be of type {want}: {shown}");
        causes.push(validation::type_invalid(path, shown, &why));
        return;
    }
    if let Some(options) = schema["enum"].as_array()
        && !options.contains(v)
    {
        let supported: Vec<String> = options.iter().map(|o| o.to_string()).collect();
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {v}: supported values: {}",
                supported.join(", ")
            ),
            field: path.into(),
        });
    }
    // What the OpenAPI validator reports, as the server turns each kind of failure into a cause:
    // lengths and counts over a maximum are "Too long" / "Too many", the rest "Invalid" with the
    // validator's own sentence (a count where the rule counts).
    // Values are printed only for a failed check: most checks pass, and this runs on every
    // field of every write.
    let shown = || v.to_string();
    let mut invalid = |value: String, msg: String| {
        let why = format!("{path} in body {msg}");
        causes.push(validation::invalid(path, value, &why));
    };
    if let Value::String(text) = &*v {
        let n = text.chars().count() as u64;
        if let Some(min) = schema["minLength"].as_u64()
            && n < min
        {
            invalid(shown(), format!("should be at least {min} chars long"));
        }
        if let Some(pattern) = schema["pattern"].as_str()
            && regex::Regex::new(pattern).is_ok_and(|re| !re.is_match(text))
        {
            invalid(shown(), format!("should match '{pattern}'"));
        }
        if let Some(format) = schema["format"].as_str()
            && !format_ok(format, text)
        {
            invalid(shown(), format!("must be of type {format}: {}", shown()));
        }
    }
    if let Some(x) = v.as_f64() {
        use std::cmp::Ordering::{Greater, Less};
        for (key, exclusive_key, op, beyond) in [
            ("minimum", "exclusiveMinimum", "greater than", Less),
            ("maximum", "exclusiveMaximum", "less than", Greater),
        ] {
            let Some(bound) = schema.get(key).and_then(Value::as_f64) else {
                continue;
            };
            let exclusive = schema[exclusive_key].as_bool() == Some(true);
            if x.partial_cmp(&bound) == Some(beyond) || (exclusive && x == bound) {
                let or_equal = if exclusive { "" } else { " or equal to" };
                invalid(shown(), format!("should be {op}{or_equal} {}", schema[key]));
            }
        }
        if let Some(m) = schema.get("multipleOf").and_then(Value::as_f64)
            && m > 0.0
            && (x / m).fract().abs() > 1e-9
        {
            invalid(
                shown(),
                format!("should be a multiple of {}", schema["multipleOf"]),
            );
        }
    }
    let count = match &*v {
        Value::Array(items) => Some((items.len() as u64, "minItems", "maxItems", "items")),
        Value::Object(fields) => Some((
            fields.len() as u64,
            "minProperties",
            "maxProperties",
            "properties",
        )),
        _ => None,
    };
    if let Some((n, min_key, _, what)) = count
        && let Some(min) = schema[min_key].as_u64()
        && n < min
    {
        invalid(n.to_string(), format!("should have at least {min} {what}"));
    }
    if let Value::String(text) = &*v
        && let Some(max) = schema["maxLength"].as_u64()
        && text.chars().count() as u64 > max
    {
        causes.push(validation::too_long(
            path,
            &format!("may not be longer than {max}"),
        ));
    }
    if let Some((n, _, max_key, _)) = count
        && let Some(max) = schema[max_key].as_u64()
        && n > max
    {
        causes.push(Cause {
            reason: "FieldValueTooMany",
            message: format!("Too many: {n}: must have at most {max} items"),
            field: path.into(),
        });
    }
    if let Value::Array(items) = &*v {
        duplicates(schema, items, path, causes);
    }
    match v {
        Value::Object(m) => {
            let props = schema["properties"].as_object();
            prune_nulls(m, props);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            let embedded = schema["x-kubernetes-embedded-resource"].as_bool() == Some(true);
            if props.is_some() || additional.is_some() || !preserve(schema) {
                m.retain(|k, _| {
                    let keep = props.is_some_and(|p| p.contains_key(k))
                        || additional.is_some()
                        || preserve(schema)
                        || (embedded && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"));
                    if !keep {
                        pruned.push(field_path(path, k));
                    }
                    keep
                });
            }
            for (k, s) in props.into_iter().flatten() {
                if let Some(d) = s.get("default") {
                    m.entry(k.clone()).or_insert_with(|| d.clone());
                }
            }
            for (k, val) in m.iter_mut() {
                if let Some(s) = props.and_then(|p| p.get(k)).or(additional) {
                    walk(s, val, &field_path(path, k), causes, pruned);
                }
            }
            required_causes(schema, m, path, causes);
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items").filter(|s| s.is_object()) {
                for (i, item) in items.iter_mut().enumerate() {
                    walk(s, item, &format!("{path}[{i}]"), causes, pruned);
                }
            }
        }
        _ => {}
    }
}

/// Whether `text` has the string `format` (the formats Kubernetes' validator checks; others
/// pass).
fn format_ok(format: &str, text: &str) -> bool {
    match format {
        "date-time" | "datetime" => chrono::DateTime::parse_from_rfc3339(text).is_ok(),
        "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").is_ok(),
        "uuid" => {
            let parts: Vec<&str> = text.split('-').collect();
            parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
                && parts
                    .iter()
                    .all(|p| p.bytes().all(|b| b.is_ascii_hexdigit()))
        }
        "int32" => text.parse::<i32>().is_ok(),
        "int64" => text.parse::<i64>().is_ok(),
        "ipv4" => text.parse::<std::net::Ipv4Addr>().is_ok(),
        "ipv6" => text.parse::<std::net::Ipv6Addr>().is_ok(),
        "email" => text
            .split_once('@')
            .is_some_and(|(user, host)| !user.is_empty() && host.contains('.')),
        "byte" => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD
                .decode(text)
                .is_ok()
        }
        _ => true,
    }
}

/// `PruneNonNullableNullsWithoutDefaults`: a `null` in a field that is neither nullable nor
/// defaulted is dropped, as if it had not been sent.
fn prune_nulls(
    m: &mut serde_json::Map<String, Value>,
    props: Option<&serde_json::Map<String, Value>>,
) {
    let Some(props) = props else {
        return;
    };
    m.retain(|k, v| {
        !(v.is_null()
            && props.get(k).is_some_and(|s| {
                s["nullable"].as_bool() != Some(true) && s.get("default").is_none()
            }))
    });
}

/// The fields of `ObjectMeta` that name the object or that the server keeps: no field manager
/// owns them, so they are stripped from every managed field set.
#[rustfmt::skip]
pub(crate) const UNOWNED_META_FIELDS: [&str; 10] = ["name", "namespace", "uid", "resourceVersion",
    "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
    "managedFields", "selfLink"];

/// The other fields of `ObjectMeta`, which clients set and field managers own.
const OWNED_META_FIELDS: [&str; 5] = [
    "generateName",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
];

/// Whether `field` is one of `ObjectMeta`'s; a custom resource's metadata keeps only those.
fn is_object_meta_field(field: &str) -> bool {
    UNOWNED_META_FIELDS.contains(&field) || OWNED_META_FIELDS.contains(&field)
}

/// The items of a `set` or `map` list (`x-kubernetes-list-type`) that repeat an earlier one (a
/// set's value, a map's keys), as the server's list-type validation reports them.
fn duplicates(schema: &Value, items: &[Value], path: &str, causes: &mut Vec<Cause>) {
    let identity = |item: &Value| -> Option<Value> {
        match schema["x-kubernetes-list-type"].as_str()? {
            "set" => Some(item.clone()),
            "map" => {
                let keys = schema["x-kubernetes-list-map-keys"].as_array()?;
                let mut id = serde_json::Map::new();
                for k in keys.iter().filter_map(Value::as_str) {
                    if let Some(v) = item.get(k) {
                        id.insert(k.to_string(), v.clone());
                    }
                }
                Some(Value::Object(id))
            }
            _ => None,
        }
    };
    let mut seen: Vec<Value> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let Some(id) = identity(item) else { return };
        if seen.contains(&id) {
            // Go prints the value as field errors do: strings quoted, numbers and booleans
            // plain, a map's keys as `%#v` prints a map.
            let shown = match &id {
                Value::String(s) => crate::validation::go_quote(s),
                Value::Object(keys) => {
                    let fields: Vec<String> = keys
                        .iter()
                        .map(|(k, v)| {
                            let v = match v {
                                Value::String(s) => crate::validation::go_quote(s),
                                other => other.to_string(),
                            };
                            format!("{}:{v}", crate::validation::go_quote(k))
                        })
                        .collect();
                    format!("map[string]interface {{}}{{{}}}", fields.join(", "))
                }
                other => other.to_string(),
            };
            causes.push(crate::validation::duplicate(format!("{path}[{i}]"), shown));
        } else {
            seen.push(id);
        }
    }
}

/// Runs a custom resource through its CRD's structural schema, in place: prunes unknown fields
/// and `metadata` fields, applies `default`s, drops disallowed nulls, and validates. Returns the
/// validation causes and the paths of the pruned fields (for `fieldValidation` warnings or
/// errors); an `obj` that is not an object is left as it is.
pub fn apply(schema: &Value, obj: &mut Value) -> (Vec<Cause>, Vec<String>) {
    let mut causes = vec![];
    let mut pruned = vec![];
    let Some(m) = obj.as_object_mut() else {
        return (causes, pruned);
    };
    if let Some(meta) = m.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.retain(|k, _| {
            let known = is_object_meta_field(k);
            if !known {
                pruned.push(format!("metadata.{k}"));
            }
            known
        });
    }
    let props = schema["properties"].as_object();
    prune_nulls(m, props);
    let keep_all = preserve(schema) || props.is_none();
    m.retain(|k, _| {
        let keep = matches!(k.as_str(), "apiVersion" | "kind" | "metadata")
            || keep_all
            || props.is_some_and(|p| p.contains_key(k));
        if !keep {
            pruned.push(k.clone());
        }
        keep
    });
    for (k, s) in props.into_iter().flatten() {
        if matches!(k.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(d) = s.get("default") {
            m.entry(k.clone()).or_insert_with(|| d.clone());
        }
        if let Some(val) = m.get_mut(k) {
            walk(s, val, k, &mut causes, &mut pruned);
        }
    }
    required_causes(schema, m, "", &mut causes);
    (causes, pruned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer"},
                        "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    },
                },
                "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}},
            },
        })
    }

    #[test]
    fn whole_floats_are_integers_and_nulls_without_a_default_are_dropped() {
        let mut o = json!({"apiVersion": "x/v1", "kind": "K",
            "metadata": {"name": "n", "unknownMeta": 1},
            "spec": {"size": 2.0, "labels": null}, "status": null});
        let (causes, pruned) = apply(&schema(), &mut o);
        assert!(causes.is_empty(), "{causes:?}");
        assert_eq!(pruned, ["metadata.unknownMeta"]);
        assert_eq!(
            o,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
                "spec": {"size": 2, "mode": "a"}})
        );
        let mut fraction = json!({"spec": {"size": 2.5}});
        let (causes, _) = apply(&schema(), &mut fraction);
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec.size");
    }

    #[test]
    fn prunes_unknown_fields_and_applies_defaults() {
        let mut o = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"}, "extra": 1,
                           "spec": {"size": 2, "unknown": true, "labels": {"a": "b"}, "free": {"any": {"thing": 1}}}});
        let (causes, pruned) = apply(&schema(), &mut o);
        assert!(causes.is_empty(), "{causes:?}");
        assert_eq!(pruned, ["extra", "spec.unknown"]);
        assert_eq!(
            o,
            json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
                             "spec": {"size": 2, "mode": "a", "labels": {"a": "b"}, "free": {"any": {"thing": 1}}}})
        );
    }

    #[test]
    fn sets_and_maps_refuse_repeated_items() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
            "ports": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {
                          "name": {"type": "string"}, "n": {"type": "integer"}}}},
            "free": {"type": "array", "items": {"type": "string"}},
        }}}});
        let mut ok = json!({"spec": {"tags": ["a", "b"], "ports": [{"name": "a"}, {"name": "b"}],
                                     "free": ["x", "x"]}});
        assert!(apply(&schema, &mut ok).0.is_empty());
        let mut bad = json!({"spec": {"tags": ["a", "b", "a"],
                                      "ports": [{"name": "a", "n": 1}, {"name": "a", "n": 2}]}});
        let causes: Vec<(String, String)> = apply(&schema, &mut bad)
            .0
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect();
        assert_eq!(
            causes,
            [
                (
                    "spec.ports[1]".to_string(),
                    "Duplicate value: map[string]interface {}{\"name\":\"a\"}".to_string()
                ),
                (
                    "spec.tags[2]".to_string(),
                    "Duplicate value: \"a\"".to_string()
                ),
            ]
        );
    }

    #[test]
    fn reports_length_and_range_errors() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": 3},
            "n": {"type": "integer", "minimum": 1, "maximum": 5},
            "xs": {"type": "array", "maxItems": 1, "items": {"type": "string"}},
        }}}});
        let mut ok = json!({"spec": {"name": "abc", "n": 5, "xs": ["a"]}});
        assert!(apply(&schema, &mut ok).0.is_empty());
        let mut bad = json!({"spec": {"name": "", "n": 0, "xs": ["a", "b"]}});
        let msgs: Vec<String> = apply(&schema, &mut bad)
            .0
            .into_iter()
            .map(|c| c.message)
            .collect();
        assert!(
            msgs.contains(
                &"Invalid value: \"\": spec.name in body should be at least 1 chars long"
                    .to_string()
            ),
            "{msgs:?}"
        );
        assert!(
            msgs.iter()
                .any(|m| m.contains("spec.n in body should be greater than or equal to 1")),
            "{msgs:?}"
        );
        assert!(
            msgs.contains(&"Too many: 2: must have at most 1 items".to_string()),
            "{msgs:?}"
        );
    }

    #[test]
    fn reports_patterns_multiples_formats_and_counts_as_the_validator_does() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"},
            "n": {"type": "integer", "multipleOf": 5},
            "at": {"type": "string", "format": "date-time"},
            "tags": {"type": "object", "minProperties": 1, "maxProperties": 1,
                "additionalProperties": {"type": "string"}},
            "xs": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        }}}});
        let mut ok = json!({"spec": {"name": "abc", "n": 10, "at": "2026-11-30T12:00:00Z",
            "tags": {"a": "b"}, "xs": ["x"]}});
        assert!(apply(&schema, &mut ok).0.is_empty());
        let mut bad = json!({"spec": {"name": "ABCD", "n": 7, "at": "yesterday",
            "tags": {"a": "b", "c": "d"}, "xs": []}});
        let causes: Vec<(String, String, &str)> = apply(&schema, &mut bad)
            .0
            .into_iter()
            .map(|c| (c.field, c.message, c.reason))
            .collect();
        let has = |field: &str, message: &str, reason: &str| {
            causes
                .iter()
                .any(|(f, m, r)| f == field && m == message && *r == reason)
        };
        assert!(
            has(
                "spec.name",
                "Invalid value: \"ABCD\": spec.name in body should match '^[a-z]+$'",
                "FieldValueInvalid"
            ),
            "{causes:?}"
        );
        assert!(
            has(
                "spec.name",
                "Too long: may not be longer than 3",
                "FieldValueTooLong"
            ),
            "{causes:?}"
        );
        assert!(
            has(
                "spec.n",
                "Invalid value: 7: spec.n in body should be a multiple of 5",
                "FieldValueInvalid"
            ),
            "{causes:?}"
        );
        assert!(
            has(
                "spec.at",
                "Invalid value: \"yesterday\": spec.at in body must be of type date-time: \"yesterday\"",
                "FieldValueInvalid"
            ),
            "{causes:?}"
        );
        assert!(
            has(
                "spec.tags",
                "Too many: 2: must have at most 1 items",
                "FieldValueTooMany"
            ),
            "{causes:?}"
        );
        assert!(
            has(
                "spec.xs",
                "Invalid value: 0: spec.xs in body should have at least 1 items",
                "FieldValueInvalid"
            ),
            "{causes:?}"
        );
    }

    #[test]
    fn reports_type_required_and_enum_errors() {
        let mut o = json!({"spec": {"mode": "c", "labels": {"a": 1}}, "status": {"ready": "yes"}});
        let fields: Vec<String> = apply(&schema(), &mut o)
            .0
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert!(fields.contains(&"spec.size".to_string()), "{fields:?}");
        assert!(fields.contains(&"spec.mode".to_string()), "{fields:?}");
        assert!(fields.contains(&"spec.labels.a".to_string()), "{fields:?}");
        assert!(fields.contains(&"status.ready".to_string()), "{fields:?}");
    }
}
