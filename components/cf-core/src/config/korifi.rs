//! `job_types = "korifi"`: every job type of Korifi's `/v3/jobs`, on Korifi's own resources
//! (group `korifi.cloudfoundry.org/v1alpha1`), so that lethe's job status can stand in front of a
//! Korifi installation. Korifi's controllers own these objects: lethe's reconciler leaves them
//! alone (`reconcile: false`) and only answers their jobs.
//!
//! | job type | resource, and where it lives | verbs |
//! |---|---|---|
//! | `org` | CFOrg, root namespace | `delete` |
//! | `space` | CFSpace, its org's namespace | `delete`; `apply_manifest` (always `COMPLETE`); `delete_unapped_routes` (Korifi's spelling: `COMPLETE` once no CFRoute of the space lacks destinations) |
//! | `app`, `route` | CFApp, CFRoute, their space's namespace | `delete` |
//! | `domain` | CFDomain, root namespace | `delete` |
//! | `service_broker` | CFServiceBroker, root namespace | `delete`; `create`, `update` (state jobs) |
//! | `managed_service_instance`, `managed_service_binding` | CFServiceInstance, CFServiceBinding, their space's namespace | `delete` (of a user-provided instance, or a binding to one: `204` at once, no job); `create` (state jobs, `POLLING` while the broker works) |
//! | `role` | the RoleBinding labelled `cloudfoundry.org/role-guid: <guid>`, in its org's or space's namespace | `delete` |

use std::collections::BTreeMap;

use crate::config::{
    AtOnce, Find, JobRule, ListProbe, Named, NamespaceRule, ResourceType, Visibility,
};

/// Korifi's API group and version.
pub const API_VERSION: &str = "korifi.cloudfoundry.org/v1alpha1";

/// The label on a role's RoleBinding that carries the role's guid.
pub const ROLE_GUID_LABEL: &str = "cloudfoundry.org/role-guid";

/// The job types of Korifi's `/v3/jobs`, with Korifi's root namespace `root_namespace`.
pub fn job_types(root_namespace: &str) -> Vec<(String, ResourceType)> {
    let root = || NamespaceRule::Fixed(root_namespace.to_string());
    let delete = || ("delete", JobRule::Delete);
    let state = |polling: bool, failed_reasons: &[&str]| JobRule::State {
        polling,
        failed_reasons: failed_reasons.iter().map(|r| r.to_string()).collect(),
    };
    let instance_failures = [
        "ProvisionFailed",
        "ProvisioningFailed",
        "InvalidServicePlan",
        "InvalidParameters",
    ];
    let binding_failures = ["BindingFailed", "InvalidParameters"];
    vec![
        korifi(
            "org",
            "CFOrg",
            "Organization",
            root(),
            Visibility::ListInOwnNamespace {
                api_version: API_VERSION.into(),
                kind: "CFSpace".into(),
            },
            [delete()],
        ),
        korifi(
            "space",
            "CFSpace",
            "Space",
            NamespaceRule::Any,
            Visibility::Get,
            [
                delete(),
                ("apply_manifest", JobRule::Complete),
                (
                    "delete_unapped_routes",
                    JobRule::NoUnmapped {
                        api_version: API_VERSION.into(),
                        kind: "CFRoute".into(),
                        destinations: "/spec/destinations".into(),
                    },
                ),
            ],
        ),
        korifi(
            "app",
            "CFApp",
            "App",
            NamespaceRule::Any,
            Visibility::Get,
            [delete()],
        ),
        korifi(
            "route",
            "CFRoute",
            "Route",
            NamespaceRule::Any,
            Visibility::Get,
            [delete()],
        ),
        korifi(
            "domain",
            "CFDomain",
            "Domain",
            root(),
            Visibility::Get,
            [delete()],
        ),
        korifi(
            "service_broker",
            "CFServiceBroker",
            "Service Broker",
            root(),
            Visibility::Get,
            [
                delete(),
                ("create", state(false, &[])),
                ("update", state(false, &[])),
            ],
        ),
        korifi(
            "managed_service_instance",
            "CFServiceInstance",
            "Service Instance",
            NamespaceRule::Any,
            Visibility::Get,
            [delete(), ("create", state(true, &instance_failures))],
        ),
        korifi(
            "managed_service_binding",
            "CFServiceBinding",
            "Service Credential Binding",
            NamespaceRule::Any,
            Visibility::Get,
            [delete(), ("create", state(true, &binding_failures))],
        ),
        (
            "role".to_string(),
            ResourceType {
                api_version: "rbac.authorization.k8s.io/v1".into(),
                kind: "RoleBinding".into(),
                namespace: NamespaceRule::Any,
                // Who may list the role bindings where it lives: the org's or space's managers.
                visibility: Visibility::ListAny(vec![ListProbe {
                    api_version: "rbac.authorization.k8s.io/v1".into(),
                    kind: "RoleBinding".into(),
                    own_namespace: false,
                }]),
                timeout_seconds: None,
                children: Vec::new(),
                display: "Role".into(),
                find: Find::Label(ROLE_GUID_LABEL.into()),
                jobs: BTreeMap::from([("delete".to_string(), JobRule::Delete)]),
                reconcile: false,
                at_once: None,
            },
        ),
    ]
    .into_iter()
    .map(|(name, mut t)| {
        // A user-provided service instance, and a binding to one, are deleted at once: Cloud
        // Controller and Korifi answer `204` without a job.
        let user_provided = |via: Option<Named>| AtOnce {
            via,
            pointer: "/spec/type".into(),
            value: "user-provided".into(),
        };
        t.at_once = match name.as_str() {
            "managed_service_instance" => Some(user_provided(None)),
            "managed_service_binding" => Some(user_provided(Some(Named {
                api_version: API_VERSION.into(),
                kind: "CFServiceInstance".into(),
                name_pointer: "/spec/service/name".into(),
            }))),
            _ => None,
        };
        (name, t)
    })
    .collect()
}

/// A Korifi kind as the job type `name`.
fn korifi<const N: usize>(
    name: &str,
    kind: &str,
    display: &str,
    namespace: NamespaceRule,
    visibility: Visibility,
    jobs: [(&str, JobRule); N],
) -> (String, ResourceType) {
    (
        name.to_string(),
        ResourceType {
            api_version: API_VERSION.into(),
            kind: kind.into(),
            namespace,
            visibility,
            timeout_seconds: None,
            children: Vec::new(),
            display: display.into(),
            find: Find::Name,
            jobs: jobs
                .into_iter()
                .map(|(verb, rule)| (verb.to_string(), rule))
                .collect(),
            reconcile: false,
            at_once: None,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_korifi_job_type_is_there_with_korifis_exact_strings() {
        let types = job_types("korifi-root");
        let operations: Vec<String> = types
            .iter()
            .flat_map(|(name, t)| t.jobs.keys().map(move |verb| format!("{name}.{verb}")))
            .collect();
        for operation in [
            "org.delete",
            "space.delete",
            "space.apply_manifest",
            "space.delete_unapped_routes",
            "app.delete",
            "route.delete",
            "domain.delete",
            "service_broker.delete",
            "service_broker.create",
            "service_broker.update",
            "managed_service_instance.delete",
            "managed_service_instance.create",
            "managed_service_binding.delete",
            "managed_service_binding.create",
            "role.delete",
        ] {
            assert!(operations.contains(&operation.to_string()), "{operation}");
            let (name, verb) = operation.split_once('.').expect("dotted");
            assert!(crate::config::valid_type_name(name) && crate::config::valid_verb(verb));
        }
        assert!(types.iter().all(|(_, t)| !t.reconcile), "Korifi owns them");
        let org = &types[0].1;
        assert_eq!(org.namespace, NamespaceRule::Fixed("korifi-root".into()));
        let binding = types
            .iter()
            .find(|(n, _)| n == "managed_service_binding")
            .expect("bindings");
        assert_eq!(
            binding.1.link("b1"),
            (
                "service_credential_binding".to_string(),
                "/v3/service_credential_bindings/b1".to_string()
            )
        );
    }
}
