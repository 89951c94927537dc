//! The built-in kinds' Go types, as the real server decodes bodies into them: which fields a kind
//! has (the others are dropped, or refused under strict field validation) and which type each
//! takes (a field of the wrong type is refused in Go's decoder's words). The types are
//! k8s-openapi's OpenAPI v3 schemas of the Kubernetes API, under the API server's schema names
//! such as `io.k8s.api.batch.v1.CronJob`. They are not published: `kubectl explain` needs them, and
//! nothing lethe does with kubectl explains.

use std::sync::OnceLock;

use crate::validation::field_path;
use k8s_openapi::api::{
    apps::v1 as apps, authentication::v1 as authn, authorization::v1 as authz, batch::v1 as batch,
    coordination::v1 as coordination, core::v1 as core, networking::v1 as networking,
    policy::v1 as policy, rbac::v1 as rbac,
};
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

/// Registers `T` (and everything it refers to) with the generator; returns its schema name.
fn add<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// A built-in kind decoded into its Go type: group, version, kind, and its schema's registration.
type Kind = (
    &'static str,
    &'static str,
    &'static str,
    fn(&mut SchemaGenerator) -> String,
);

/// The kinds whose bodies are decoded as the real server decodes them. CRDs have their own schema
/// handling, and events.k8s.io Events are stored, decoded and pruned in the core shape.
#[rustfmt::skip]
const KINDS: [Kind; 19] = [
    ("", "v1", "Namespace", add::<core::Namespace>),
    ("", "v1", "ConfigMap", add::<core::ConfigMap>),
    ("", "v1", "Secret", add::<core::Secret>),
    ("", "v1", "ServiceAccount", add::<core::ServiceAccount>),
    ("", "v1", "Event", add::<core::Event>),
    ("", "v1", "Service", add::<core::Service>),
    ("batch", "v1", "CronJob", add::<batch::CronJob>),
    // Stored only, for `kubectl apply --dry-run=server -k deploy/` (lethe's own deployment).
    ("apps", "v1", "Deployment", add::<apps::Deployment>),
    ("policy", "v1", "PodDisruptionBudget", add::<policy::PodDisruptionBudget>),
    ("networking.k8s.io", "v1", "NetworkPolicy", add::<networking::NetworkPolicy>),
    ("coordination.k8s.io", "v1", "Lease", add::<coordination::Lease>),
    ("rbac.authorization.k8s.io", "v1", "Role", add::<rbac::Role>),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", add::<rbac::ClusterRole>),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", add::<rbac::RoleBinding>),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", add::<rbac::ClusterRoleBinding>),
    ("authorization.k8s.io", "v1", "SelfSubjectAccessReview", add::<authz::SelfSubjectAccessReview>),
    // Asked by lethe's admin listener of the cluster it runs against.
    ("authorization.k8s.io", "v1", "SubjectAccessReview", add::<authz::SubjectAccessReview>),
    ("authentication.k8s.io", "v1", "SelfSubjectReview", add::<authn::SelfSubjectReview>),
    ("authentication.k8s.io", "v1", "TokenReview", add::<authn::TokenReview>),
];

/// Every schema [`KINDS`] refer to, under the API server's names (which are unique across group
/// versions), and each kind's schema name in [`KINDS`]' order. Built once: every create and
/// update looks its kind up.
fn schemas() -> &'static (Map<String, Value>, Vec<String>) {
    static SCHEMAS: OnceLock<(Map<String, Value>, Vec<String>)> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let mut generator = SchemaSettings::openapi3().into_generator();
        let names = KINDS.iter().map(|kind| kind.3(&mut generator)).collect();
        (
            generator.take_definitions(true).into_iter().collect(),
            names,
        )
    })
}

/// Removes from `object` (of the built-in `kind`) every field its schema does not know, as the
/// real API server does when it decodes into its Go types, and returns their paths (`spec.foo`)
/// for the strict-decoding error or the warnings. Kinds without a schema here are left alone;
/// so are CRDs, whose own schema handling lives with them.
pub fn prune_unknown(group: &str, version: &str, kind: &str, object: &mut Value) -> Vec<String> {
    let Some((schemas, _, schema)) = kind_schema(group, version, kind) else {
        return Vec::new();
    };
    let mut pruned = Vec::new();
    prune(schemas, schema, object, "", &mut pruned);
    pruned
}

/// A built-in kind's schema: every schema it may refer to, its schema name and the schema.
type KindEntry = (&'static Map<String, Value>, &'static str, &'static Value);

/// The schema of a built-in kind in [`KINDS`].
fn kind_schema(group: &str, version: &str, kind: &str) -> Option<KindEntry> {
    let (all, names) = schemas();
    let at = KINDS
        .iter()
        .position(|k| (k.0, k.1, k.2) == (group, version, kind))?;
    let name = names.get(at)?;
    Some((all, name.as_str(), all.get(name)?))
}

/// Why `object` (of the built-in `kind`) cannot be decoded into the kind's Go type, in the words
/// of Go's JSON decoder (`json: cannot unmarshal number into Go struct field
/// CronJobSpec.spec.schedule of type string`), or `None` when every field has a type its Go field
/// takes. `null` fits any field; fields the schema does not know are [`prune_unknown`]'s business.
/// Types that decode themselves (quantities, int-or-string, times, raw JSON) are not checked.
pub fn decode_error(group: &str, version: &str, kind: &str, object: &Value) -> Option<String> {
    let (schemas, name, schema) = kind_schema(group, version, kind)?;
    if !object.is_object() {
        return None;
    }
    // The kind's own struct, at the root: its fields are named from there.
    type_error(schemas, schema, object, go_name(name), "")
}

/// Schemas whose Go types have their own JSON decoding: they take more than their schema says
/// (a quantity may be a number, a time is parsed from its string), so their types are not checked.
const SELF_DECODING: [&str; 8] = [
    "io.k8s.apimachinery.pkg.api.resource.Quantity",
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
    "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime",
    "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Duration",
    "io.k8s.apimachinery.pkg.runtime.RawExtension",
    "io.k8s.apimachinery.pkg.apis.meta.v1.Fields",
];

/// The schema name `schema` refers to, if it is a reference (alone or as `allOf`'s one entry).
pub(crate) fn reference(schema: &Value) -> Option<&str> {
    schema["$ref"]
        .as_str()
        .or_else(|| match schema["allOf"].as_array() {
            Some(one) if one.len() == 1 => one[0]["$ref"].as_str(),
            _ => None,
        })
        .and_then(|r| r.strip_prefix("#/components/schemas/"))
}

/// `io.k8s.api.batch.v1.CronJobSpec` → `CronJobSpec`.
fn go_name(schema_name: &str) -> &str {
    schema_name.rsplit('.').next().unwrap_or(schema_name)
}

/// The Go type of a field with `schema`, as `reflect.Type.String()` prints it (`v1.Container`,
/// `[]string`, `map[string]string`, `int32`).
fn go_type(schema: &Value) -> String {
    if let Some(name) = reference(schema) {
        let package = name.rsplit('.').nth(1).unwrap_or_default();
        return format!("{package}.{}", go_name(name));
    }
    match schema["type"].as_str() {
        Some("string") if schema["format"] == "byte" => "[]uint8".into(),
        Some("string") => "string".into(),
        Some("boolean") => "bool".into(),
        Some("number") => "float64".into(),
        Some("integer") => schema["format"].as_str().unwrap_or("int64").into(),
        Some("array") => format!("[]{}", go_type(&schema["items"])),
        Some("object") if schema["additionalProperties"].is_object() => {
            format!("map[string]{}", go_type(&schema["additionalProperties"]))
        }
        _ => "interface {}".into(),
    }
}

/// The decode error of `value` in the field at `path` (JSON names from the root, as Go's decoder
/// reports them: array indices and map keys are not part of it) of Go struct `go_struct`.
fn type_error(
    schemas: &Map<String, Value>,
    schema: &Value,
    value: &Value,
    go_struct: &str,
    path: &str,
) -> Option<String> {
    if value.is_null() || reference(schema).is_some_and(|r| SELF_DECODING.contains(&r)) {
        return None;
    }
    let resolved = resolve(schemas, schema);
    if resolved["x-kubernetes-int-or-string"] == json!(true)
        || resolved["x-kubernetes-preserve-unknown-fields"] == json!(true)
    {
        return None;
    }
    let mismatch = |found: String| {
        Some(format!(
            "json: cannot unmarshal {found} into Go struct field {go_struct}.{path} of type {}",
            go_type(schema)
        ))
    };
    let found = || crate::validation::json_type(value).to_string();
    match (resolved["type"].as_str(), value) {
        (Some("string"), Value::String(_)) | (Some("boolean"), Value::Bool(_)) => None,
        (Some("number"), Value::Number(_)) => None,
        (Some("integer"), Value::Number(n)) => {
            let fits = match resolved["format"].as_str() {
                Some("int32") => n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()),
                _ => n.is_i64(),
            };
            if fits {
                None
            } else {
                mismatch(format!("number {n}"))
            }
        }
        (Some("array"), Value::Array(items)) => items
            .iter()
            .find_map(|item| type_error(schemas, &resolved["items"], item, go_struct, path)),
        (Some("object") | None, Value::Object(fields)) => {
            if let Some(properties) = resolved["properties"].as_object() {
                let inner = reference(schema).map(go_name).unwrap_or(go_struct);
                fields.iter().find_map(|(key, v)| {
                    let field = properties.get(key)?;
                    type_error(schemas, field, v, inner, &field_path(path, key))
                })
            } else if resolved["additionalProperties"].is_object() {
                fields.values().find_map(|v| {
                    type_error(
                        schemas,
                        &resolved["additionalProperties"],
                        v,
                        go_struct,
                        path,
                    )
                })
            } else {
                None
            }
        }
        (Some(_), _) => mismatch(found()),
        (None, _) if resolved["properties"].is_object() => mismatch(found()),
        (None, _) => None,
    }
}

/// The schema a node stands for: `$ref` (alone or as the one entry of `allOf`) resolved.
pub(crate) fn resolve<'a>(schemas: &'a Map<String, Value>, mut schema: &'a Value) -> &'a Value {
    for _ in 0..16 {
        match reference(schema).and_then(|name| schemas.get(name)) {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}

fn prune(
    schemas: &Map<String, Value>,
    schema: &Value,
    value: &mut Value,
    path: &str,
    pruned: &mut Vec<String>,
) {
    let schema = resolve(schemas, schema);
    if schema["x-kubernetes-preserve-unknown-fields"] == json!(true) {
        return;
    }
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema["properties"].as_object() {
                let unknown: Vec<String> = fields
                    .keys()
                    .filter(|k| !properties.contains_key(*k))
                    .cloned()
                    .collect();
                for k in unknown {
                    fields.remove(&k);
                    pruned.push(field_path(path, &k));
                }
                for (k, v) in fields.iter_mut() {
                    if let Some(s) = properties.get(k) {
                        prune(schemas, s, v, &field_path(path, k), pruned);
                    }
                }
            } else if let Some(values) =
                schema.get("additionalProperties").filter(|a| a.is_object())
            {
                for (k, v) in fields.iter_mut() {
                    prune(schemas, values, v, &field_path(path, k), pruned);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item) = schema.get("items").filter(|i| i.is_object()) {
                for (i, v) in items.iter_mut().enumerate() {
                    prune(schemas, item, v, &format!("{path}[{i}]"), pruned);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_schema_and_references_resolve() {
        for (group, version, kind, _) in KINDS {
            let (_, _, schema) = kind_schema(group, version, kind).expect(kind);
            assert!(
                schema["description"]
                    .as_str()
                    .is_some_and(|d| !d.is_empty())
            );
        }
        let (_, name, _) = kind_schema("batch", "v1", "CronJob").expect("CronJob");
        assert_eq!(name, "io.k8s.api.batch.v1.CronJob");
        assert!(kind_schema("example.com", "v1", "CronJob").is_none());
        assert!(kind_schema("apiextensions.k8s.io", "v1", "CustomResourceDefinition").is_none());
        let text = serde_json::to_string(&schemas().0).expect("json");
        for reference in text.split("\"$ref\":\"").skip(1) {
            let target = reference.split('"').next().unwrap_or_default();
            let name = target
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("reference outside the document: {target}"));
            assert!(
                schemas().0.contains_key(name),
                "dangling reference {target}"
            );
        }
    }

    #[test]
    fn fields_of_the_wrong_type_get_go_decoder_errors() {
        let error =
            |group: &str, kind: &str, object: Value| decode_error(group, "v1", kind, &object);
        let cron = |spec: Value| json!({"metadata": {"name": "c"}, "spec": spec});
        assert_eq!(
            error("batch", "CronJob", cron(json!({"schedule": 5}))).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field CronJobSpec.spec.schedule of type string"
            )
        );
        assert_eq!(
            error("batch", "CronJob", json!({"spec": "x"})).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field CronJob.spec of type v1.CronJobSpec"
            )
        );
        let deployment =
            |containers: Value| json!({"spec": {"template": {"spec": {"containers": containers}}}});
        assert_eq!(
            error(
                "apps",
                "Deployment",
                deployment(json!([{"name": "a", "image": 5}]))
            )
            .as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field Container.spec.template.spec.containers.image of type string"
            )
        );
        assert_eq!(
            error("apps", "Deployment", deployment(json!(["a"]))).as_deref(),
            Some(
                "json: cannot unmarshal string into Go struct field PodSpec.spec.template.spec.containers of type v1.Container"
            )
        );
        assert_eq!(
            error("", "ConfigMap", json!({"metadata": {"labels": {"a": 5}}})).as_deref(),
            Some(
                "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type string"
            )
        );
        assert_eq!(
            error("apps", "Deployment", json!({"spec": {"replicas": 1.5}})).as_deref(),
            Some(
                "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas of type int32"
            )
        );
        assert_eq!(
            error(
                "apps",
                "Deployment",
                json!({"spec": {"replicas": 3_000_000_000_i64}})
            )
            .as_deref(),
            Some(
                "json: cannot unmarshal number 3000000000 into Go struct field DeploymentSpec.spec.replicas of type int32"
            )
        );
        assert_eq!(
            error("", "Secret", json!({"data": {"k": 1}})).as_deref(),
            Some("json: cannot unmarshal number into Go struct field Secret.data of type []uint8")
        );
        assert_eq!(
            error("", "ConfigMap", json!({"data": ["a"]})).as_deref(),
            Some(
                "json: cannot unmarshal array into Go struct field ConfigMap.data of type map[string]string"
            )
        );
    }

    #[test]
    fn values_their_go_fields_take_pass_the_decode_check() {
        let deployment = json!({
            "metadata": {"name": "p", "labels": {"a": "b"}, "creationTimestamp": null, "bogus": 1},
            "spec": {"template": {"spec": {
                "containers": [{
                    "name": "a", "image": "busybox", "args": ["x"],
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": 1, "memory": "64Mi"}},
                    "unknown": {"deep": true},
                }],
                "terminationGracePeriodSeconds": 30,
                "nodeSelector": null,
            }}},
        });
        assert_eq!(decode_error("apps", "v1", "Deployment", &deployment), None);
        let service = json!({"spec": {"ports": [{"port": 80, "targetPort": "http"}, {"port": 81, "targetPort": 8081}]}});
        assert_eq!(decode_error("", "v1", "Service", &service), None);
        // Kinds without a built-in schema are left to their own checks.
        assert_eq!(
            decode_error("example.com", "v1", "Widget", &json!({"spec": 5})),
            None
        );
    }

    #[test]
    fn unknown_fields_of_built_in_kinds_are_pruned_and_reported() {
        let mut cron = json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "c", "labels": {"a": "b"}, "bogus": 1},
            "spec": {
                "schedule": "* * * * *",
                "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "imagePullPolicy": "Always",
                                    "resources": {"limits": {"cpu": "1"}}, "colour": "red"}]
                }}}},
                "extra": true
            }
        });
        let before = cron.clone();
        let mut pruned = prune_unknown("batch", "v1", "CronJob", &mut cron);
        pruned.sort();
        assert_eq!(
            pruned,
            [
                "metadata.bogus",
                "spec.extra",
                "spec.jobTemplate.spec.template.spec.containers[0].colour"
            ]
        );
        let container = &cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["resources"]["limits"]["cpu"], "1",
            "maps and quantities stay"
        );
        assert_eq!(container["image"], "busybox");
        assert_eq!(cron["metadata"]["labels"], before["metadata"]["labels"]);
        let mut lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "h", "leaseDurationSeconds": 6}});
        assert!(prune_unknown("coordination.k8s.io", "v1", "Lease", &mut lease).is_empty());
        let mut custom = json!({"spec": {"anything": 1}});
        assert!(prune_unknown("example.com", "v1", "Thing", &mut custom).is_empty());
    }
}
