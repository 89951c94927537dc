//! The typing of a server-side apply configuration, as structured-merge-diff does it before it
//! merges or owns anything: every field must be declared by the kind's schema and every value
//! must have its field's type.
//!
//! The real server returns this failure as a plain error, so the client sees a 500 with no
//! reason: `failed to create typed patch object (ns/name; batch/v1, Kind=CronJob):
//! .spec.schedule: expected string, got &value.valueUnstructured{Value:5}`. The words and the
//! way values are printed follow structured-merge-diff's validator and Go's `%v`/`%#v`; an applied
//! configuration is YAML decoded without type information, so every number is a `float64`.

use crate::managed::{FieldPath, KindSchema, ListKind};
use crate::openapi;
use crate::resources::ResourceDef;
use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

/// Built-in types structured-merge-diff takes as any scalar: they decode themselves from a
/// string or a number.
const UNTYPED_SCALARS: [&str; 5] = [
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Duration",
];

/// Built-in types that hold arbitrary JSON.
const DEDUCED: [&str; 3] = [
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Fields",
];

const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The error of applying `applied` to objects of `def`, in the real server's words, or `None`
/// when it types. Kinds without a schema here are not checked.
pub fn apply_error(def: &ResourceDef, applied: &Value) -> Option<String> {
    let lists = KindSchema::of(def);
    let mut walk = Walk {
        schemas: openapi::core_schemas(),
        lists: &lists,
        errors: Vec::new(),
    };
    let mut path = FieldPath::new();
    if def.custom {
        let schema = def.schema.as_deref()?;
        if schema["x-kubernetes-preserve-unknown-fields"] == json!(true) {
            return None;
        }
        walk.object(schema, applied, "", &mut path, true);
    } else {
        let (schemas, _, schema) = openapi::kind_schema(&def.group, &def.version, &def.kind)?;
        walk.schemas = schemas;
        walk.value(schema, applied, "", &mut path);
    }
    let errors = walk.errors;
    let text = match errors.len() {
        0 => return None,
        1 => errors[0].clone(),
        _ => format!("errors:\n  {}", errors.join("\n  ")),
    };
    let meta = &applied["metadata"];
    let text_of = |key: &str| meta[key].as_str().unwrap_or_default().to_string();
    Some(format!(
        "failed to create typed patch object ({}/{}; {}, Kind={}): {text}",
        text_of("namespace"),
        text_of("name"),
        group_version(applied),
        applied["kind"].as_str().unwrap_or_default()
    ))
}

/// The applied configuration's group and version as Go's `GroupVersionKind.String()` starts:
/// `batch/v1`, and `/v1` for the core group.
fn group_version(applied: &Value) -> String {
    let api_version = applied["apiVersion"].as_str().unwrap_or_default();
    match api_version.split_once('/') {
        Some(_) => api_version.to_string(),
        None => format!("/{api_version}"),
    }
}

struct Walk<'a> {
    schemas: &'a Map<String, Value>,
    lists: &'a KindSchema<'a>,
    errors: Vec<String>,
}

impl Walk<'_> {
    fn error(&mut self, path: &str, message: String) {
        self.errors.push(format!("{path}: {message}"));
    }

    /// Checks `value` at `path` (structured-merge-diff's path string) against `schema`;
    /// `fields` is the same place as field-set elements, for the list types of the kind.
    fn value(&mut self, schema: &Value, value: &Value, path: &str, fields: &mut FieldPath) {
        if value.is_null() {
            return;
        }
        let named = openapi::reference(schema);
        if named.is_some_and(|n| DEDUCED.contains(&n)) {
            return;
        }
        let resolved = openapi::resolve(self.schemas, schema);
        if resolved["x-kubernetes-preserve-unknown-fields"] == json!(true) {
            return;
        }
        if named.is_some_and(|n| UNTYPED_SCALARS.contains(&n))
            || resolved["x-kubernetes-int-or-string"] == json!(true)
        {
            if value.is_object() || value.is_array() {
                self.error(
                    path,
                    format!("expected any scalar, got &{{{}}}", go_v(value)),
                );
            }
            return;
        }
        match resolved["type"].as_str() {
            Some("string") if !value.is_string() => self.error(
                path,
                format!(
                    "expected string, got &value.valueUnstructured{{Value:{}}}",
                    go_sharp_v(value)
                ),
            ),
            Some("integer" | "number") if !value.is_number() => self.error(
                path,
                format!("expected numeric (int or float), got {}", go_type(value)),
            ),
            Some("boolean") if !value.is_boolean() => {
                self.error(path, format!("expected boolean, got &{{{}}}", go_v(value)))
            }
            Some("array") => self.list(resolved, value, path, fields),
            Some("object") | None
                if resolved["properties"].is_object()
                    || resolved["additionalProperties"].is_object() =>
            {
                let embedded = resolved["x-kubernetes-embedded-resource"] == json!(true);
                self.object(resolved, value, path, fields, embedded);
            }
            _ => {}
        }
    }

    /// A struct (declared fields) or a map (`additionalProperties`). `with_meta`: the object is
    /// a whole resource (a custom resource, or one embedded in it), whose `apiVersion`, `kind`
    /// and `metadata` the server declares even where the schema does not.
    fn object(
        &mut self,
        schema: &Value,
        value: &Value,
        path: &str,
        fields: &mut FieldPath,
        with_meta: bool,
    ) {
        let Some(members) = value.as_object() else {
            self.error(path, format!("expected map, got &{{{}}}", go_v(value)));
            return;
        };
        let properties = schema["properties"].as_object();
        let elements = &schema["additionalProperties"];
        for (key, member) in members {
            let inner = format!("{path}.{key}");
            fields.push(format!("f:{key}"));
            match properties.and_then(|p| p.get(key)) {
                Some(field) => self.value(field, member, &inner, fields),
                None if with_meta && key == "metadata" => {
                    let meta = json!({"$ref": format!("#/components/schemas/{OBJECT_META}")});
                    let schemas = std::mem::replace(&mut self.schemas, openapi::core_schemas());
                    self.value(&meta, member, &inner, fields);
                    self.schemas = schemas;
                }
                None if with_meta && (key == "apiVersion" || key == "kind") => {
                    if !member.is_string() && !member.is_null() {
                        self.error(
                            &inner,
                            format!(
                                "expected string, got &value.valueUnstructured{{Value:{}}}",
                                go_sharp_v(member)
                            ),
                        );
                    }
                }
                None if elements.is_object() => self.value(elements, member, &inner, fields),
                None if elements == &json!(true) => {}
                None => {
                    // The validator stops at a map's first undeclared field.
                    self.error(&inner, "field not declared in schema".into());
                    fields.pop();
                    return;
                }
            }
            fields.pop();
        }
    }

    /// A list: atomic items by index, set items by value, associative items by their keys.
    fn list(&mut self, schema: &Value, value: &Value, path: &str, fields: &mut FieldPath) {
        let Some(items) = value.as_array() else {
            self.error(path, format!("expected list, got &{{{}}}", go_v(value)));
            return;
        };
        let kind = self.lists.kind(fields);
        let mut seen = BTreeSet::new();
        for (i, item) in items.iter().enumerate() {
            let element = match &kind {
                ListKind::Atomic => format!("[{i}]"),
                ListKind::Set => format!("[={item}]"),
                ListKind::Map(keys) => match key_element(item, keys) {
                    Ok(element) => element,
                    Err(why) => {
                        // Without its key an item cannot be named, so nothing below it is checked.
                        self.error(path, format!("element {i}: {why}"));
                        return;
                    }
                },
            };
            if kind != ListKind::Atomic && !seen.insert(element.clone()) {
                self.error(path, format!("duplicate entries for key {element}"));
            }
            fields.push(format!("i:{i}"));
            self.value(&schema["items"], item, &format!("{path}{element}"), fields);
            fields.pop();
        }
    }
}

/// `[k1=v1,k2=v2]` with the keys in order, or why the item has no such name.
fn key_element(item: &Value, keys: &[String]) -> Result<String, String> {
    if item.is_null() {
        return Err("associative list with keys may not have a null element".into());
    }
    let Some(fields) = item.as_object() else {
        return Err("associative list with keys may not have non-map elements".into());
    };
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    let mut parts = Vec::new();
    for key in sorted {
        match fields.get(key) {
            Some(v) => parts.push(format!("{key}={v}")),
            // The schema's default.
            None if key == "protocol" => parts.push(format!("{key}=\"TCP\"")),
            None => {
                return Err(format!(
                    "associative list with keys has an element that omits key field {} (and doesn't have default value)",
                    json!(key)
                ));
            }
        }
    }
    Ok(format!("[{}]", parts.join(",")))
}

/// Go's `%T` of a decoded JSON value.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go's `%v` of a decoded JSON value (numbers are `float64`).
fn go_v(value: &Value) -> String {
    crate::validation::go_print_as(value, true)
}

/// Go's `%#v` of a decoded JSON value held in an `interface{}`.
fn go_sharp_v(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => crate::validation::go_float(n.as_f64().unwrap_or_default()),
        Value::String(s) => crate::validation::go_quote(s),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_sharp_v).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{}:{}", crate::validation::go_quote(k), go_sharp_v(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", fields.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(group: &str, plural: &str) -> std::sync::Arc<ResourceDef> {
        crate::resources::builtins()
            .iter()
            .find(|d| d.group == group && d.plural == plural)
            .cloned()
            .expect("built in")
    }

    fn config_map(extra: Value) -> Value {
        let mut v = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns"}});
        if let (Some(m), Value::Object(extra)) = (v.as_object_mut(), extra) {
            m.extend(extra);
        }
        v
    }

    #[test]
    fn a_well_typed_configuration_passes() {
        let cm = config_map(json!({"data": {"a": "b"}, "immutable": false}));
        assert_eq!(apply_error(&def("", "configmaps"), &cm), None);
        let cj = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}],
                    "resources": {"limits": {"cpu": 1, "memory": "1Gi"}}}]}}}}}});
        assert_eq!(apply_error(&def("batch", "cronjobs"), &cj), None);
    }

    #[test]
    fn undeclared_fields_and_wrong_types_are_named_as_the_validator_names_them() {
        let cm = def("", "configmaps");
        assert_eq!(
            apply_error(&cm, &config_map(json!({"foo": 1}))).as_deref(),
            Some(
                "failed to create typed patch object (ns/a; /v1, Kind=ConfigMap): .foo: field not declared in schema"
            )
        );
        assert_eq!(
            apply_error(&cm, &config_map(json!({"data": {"x": 5}}))).as_deref(),
            Some(
                "failed to create typed patch object (ns/a; /v1, Kind=ConfigMap): .data.x: expected string, got &value.valueUnstructured{Value:5}"
            )
        );
        assert_eq!(
            apply_error(&cm, &config_map(json!({"data": ["x"]}))).as_deref(),
            Some(
                "failed to create typed patch object (ns/a; /v1, Kind=ConfigMap): .data: expected map, got &{[x]}"
            )
        );
        assert_eq!(
            apply_error(&cm, &config_map(json!({"immutable": "yes"}))).as_deref(),
            Some(
                "failed to create typed patch object (ns/a; /v1, Kind=ConfigMap): .immutable: expected boolean, got &{yes}"
            )
        );
    }

    #[test]
    fn list_items_are_named_by_their_keys_and_several_errors_are_listed() {
        let cj = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"schedule": 5, "startingDeadlineSeconds": "soon",
                "jobTemplate": {"spec": {"template": {"spec": {
                    "containers": [{"name": "main", "image": 7}]}}}}}});
        assert_eq!(
            apply_error(&def("batch", "cronjobs"), &cj).as_deref(),
            Some(
                "failed to create typed patch object (/c; batch/v1, Kind=CronJob): errors:\n  \
                 .spec.jobTemplate.spec.template.spec.containers[name=\"main\"].image: expected string, got &value.valueUnstructured{Value:7}\n  \
                 .spec.schedule: expected string, got &value.valueUnstructured{Value:5}\n  \
                 .spec.startingDeadlineSeconds: expected numeric (int or float), got string"
            )
        );
        let unnamed = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "j"},
            "spec": {"template": {"spec": {"containers": [{"image": "i"}]}}}});
        assert_eq!(
            apply_error(&def("apps", "deployments"), &unnamed).as_deref(),
            Some(
                "failed to create typed patch object (/j; apps/v1, Kind=Deployment): .spec.template.spec.containers: element 0: associative list with keys has an element that omits key field \"name\" (and doesn't have default value)"
            )
        );
    }

    #[test]
    fn custom_resources_are_typed_by_their_crd_schema() {
        let mut def = (*def("", "configmaps")).clone();
        def.custom = true;
        def.schema = Some(std::sync::Arc::new(
            json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}),
        ));
        let cr = |spec: Value| {
            json!({"apiVersion": "x.dev/v1", "kind": "W", "metadata": {"name": "w", "labels": {"a": "b"}},
                "spec": spec, "extra": {"anything": [1]}})
        };
        assert_eq!(apply_error(&def, &cr(json!({"size": 3}))), None);
        assert_eq!(
            apply_error(&def, &cr(json!({"size": 3, "colour": "red"}))).as_deref(),
            Some(
                "failed to create typed patch object (/w; x.dev/v1, Kind=W): .spec.colour: field not declared in schema"
            )
        );
        let status = json!({"apiVersion": "x.dev/v1", "kind": "W", "metadata": {"name": "w"},
            "status": {"selector": "a"}});
        assert_eq!(
            apply_error(&def, &status).as_deref(),
            Some(
                "failed to create typed patch object (/w; x.dev/v1, Kind=W): .status: field not declared in schema"
            )
        );
    }
}
