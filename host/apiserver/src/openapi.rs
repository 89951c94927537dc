//! OpenAPI v3 schemas of the built-in kinds, for `kubectl explain`: generated from k8s-openapi's
//! own schemas (the Kubernetes API's descriptions and structure, under the API server's schema
//! names such as `io.k8s.api.batch.v1.CronJob`), each kind marked with its
//! `x-kubernetes-group-version-kind` the way kubectl looks it up.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::api::{
    authentication::v1 as authn, authorization::v1 as authz, batch::v1 as batch,
    coordination::v1 as coordination, core::v1 as core, rbac::v1 as rbac,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

/// Registers `T` (and everything it refers to) with the generator; returns its schema name.
fn add<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> String {
    generator.subschema_for::<T>();
    T::schema_name().into_owned()
}

/// `(group, version)` → the `components.schemas` of that group version's document.
type Documents = BTreeMap<(&'static str, &'static str), Map<String, Value>>;

/// Registers a group version's kinds with a generator; returns `(kind, schema name)` pairs.
type Kinds = fn(&mut SchemaGenerator) -> Vec<(&'static str, String)>;

fn all() -> &'static Documents {
    static SCHEMAS: OnceLock<Documents> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let mut docs = BTreeMap::new();
        let groups: [(&str, &str, Kinds); 7] = [
            ("", "v1", |g| {
                vec![
                    ("Namespace", add::<core::Namespace>(g)),
                    ("ConfigMap", add::<core::ConfigMap>(g)),
                    ("Secret", add::<core::Secret>(g)),
                    ("ServiceAccount", add::<core::ServiceAccount>(g)),
                    ("Event", add::<core::Event>(g)),
                    ("Pod", add::<core::Pod>(g)),
                    ("Service", add::<core::Service>(g)),
                    ("Node", add::<core::Node>(g)),
                ]
            }),
            ("batch", "v1", |g| {
                vec![
                    ("CronJob", add::<batch::CronJob>(g)),
                    ("Job", add::<batch::Job>(g)),
                ]
            }),
            ("coordination.k8s.io", "v1", |g| {
                vec![("Lease", add::<coordination::Lease>(g))]
            }),
            ("rbac.authorization.k8s.io", "v1", |g| {
                vec![
                    ("Role", add::<rbac::Role>(g)),
                    ("ClusterRole", add::<rbac::ClusterRole>(g)),
                    ("RoleBinding", add::<rbac::RoleBinding>(g)),
                    ("ClusterRoleBinding", add::<rbac::ClusterRoleBinding>(g)),
                ]
            }),
            ("apiextensions.k8s.io", "v1", |g| {
                vec![(
                    "CustomResourceDefinition",
                    add::<apiextensions::CustomResourceDefinition>(g),
                )]
            }),
            ("authorization.k8s.io", "v1", |g| {
                vec![
                    (
                        "SelfSubjectAccessReview",
                        add::<authz::SelfSubjectAccessReview>(g),
                    ),
                    ("SubjectAccessReview", add::<authz::SubjectAccessReview>(g)),
                    (
                        "LocalSubjectAccessReview",
                        add::<authz::LocalSubjectAccessReview>(g),
                    ),
                    (
                        "SelfSubjectRulesReview",
                        add::<authz::SelfSubjectRulesReview>(g),
                    ),
                ]
            }),
            ("authentication.k8s.io", "v1", |g| {
                vec![("SelfSubjectReview", add::<authn::SelfSubjectReview>(g))]
            }),
        ];
        for (group, version, kinds) in groups {
            let mut generator = SchemaSettings::openapi3().into_generator();
            let names = kinds(&mut generator);
            let mut schemas: Map<String, Value> =
                generator.take_definitions(true).into_iter().collect();
            for (kind, name) in names {
                if let Some(Value::Object(schema)) = schemas.get_mut(&name) {
                    schema.insert(
                        "x-kubernetes-group-version-kind".into(),
                        json!([{"group": group, "version": version, "kind": kind}]),
                    );
                }
            }
            docs.insert((group, version), schemas);
        }
        docs
    })
}

/// Removes from `object` (of the built-in `kind`) every field its schema does not know, as the
/// real API server does when it decodes into its Go types, and returns their paths (`spec.foo`)
/// for the strict-decoding error or the warnings. Kinds without a schema here are left alone;
/// so are CRDs, whose own schema handling lives with them.
pub fn prune_unknown(group: &str, version: &str, kind: &str, object: &mut Value) -> Vec<String> {
    if kind == "CustomResourceDefinition" {
        return Vec::new();
    }
    let Some(schemas) = all().get(&(group, version)) else {
        return Vec::new();
    };
    let Some((_, schema)) = schemas
        .iter()
        .find(|(_, s)| s["x-kubernetes-group-version-kind"][0]["kind"].as_str() == Some(kind))
    else {
        return Vec::new();
    };
    let mut pruned = Vec::new();
    prune(schemas, schema, object, "", &mut pruned);
    pruned
}

/// The schema a node stands for: `$ref` (alone or as the one entry of `allOf`) resolved.
fn resolve<'a>(schemas: &'a Map<String, Value>, mut schema: &'a Value) -> &'a Value {
    for _ in 0..16 {
        let reference = schema["$ref"]
            .as_str()
            .or_else(|| match schema["allOf"].as_array() {
                Some(one) if one.len() == 1 => one[0]["$ref"].as_str(),
                _ => None,
            });
        match reference
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .and_then(|name| schemas.get(name))
        {
            Some(target) => schema = target,
            None => break,
        }
    }
    schema
}

/// `path.key`, as the API server names fields in its errors.
fn field_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
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

/// The built-in kinds' schemas of group version `group`/`version` (empty for other groups).
pub fn schemas(group: &str, version: &str) -> Map<String, Value> {
    all().get(&(group, version)).cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_carry_their_gvk_and_references_resolve_within_the_document() {
        let batch = schemas("batch", "v1");
        let cron = &batch["io.k8s.api.batch.v1.CronJob"];
        assert_eq!(
            cron["x-kubernetes-group-version-kind"][0]["kind"],
            "CronJob"
        );
        assert!(cron["description"].as_str().is_some_and(|d| !d.is_empty()));
        let text = serde_json::to_string(&batch).expect("json");
        for reference in text.split("\"$ref\":\"").skip(1) {
            let target = reference.split('"').next().unwrap_or_default();
            let name = target
                .strip_prefix("#/components/schemas/")
                .unwrap_or_else(|| panic!("reference outside the document: {target}"));
            assert!(batch.contains_key(name), "dangling reference {target}");
        }
        assert!(schemas("", "v1").contains_key("io.k8s.api.core.v1.Namespace"));
        assert!(schemas("example.com", "v1").is_empty());
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
