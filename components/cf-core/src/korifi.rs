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
//! | `managed_service_instance`, `managed_service_binding` | CFServiceInstance, CFServiceBinding, their space's namespace | `delete`; `create` (state jobs, `POLLING` while the broker works) |
//! | `role` | the RoleBinding labelled `cloudfoundry.org/role-guid: <guid>`, in its org's or space's namespace | `delete` |

use std::collections::BTreeMap;

use crate::config::{Find, JobRule, ListProbe, NamespaceRule, ResourceType, Visibility};

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
        korifi("app", "CFApp", "App", NamespaceRule::Any, Visibility::Get, [delete()]),
        korifi("route", "CFRoute", "Route", NamespaceRule::Any, Visibility::Get, [delete()]),
        korifi("domain", "CFDomain", "Domain", root(), Visibility::Get, [delete()]),
        korifi(
            "service_broker",
            "CFServiceBroker",
            "Service Broker",
            root(),
            Visibility::Get,
            [delete(), ("create", state(false, &[])), ("update", state(false, &[]))],
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
            },
        ),
    ]
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
            assert!(crate::jobs::valid_type_name(name) && crate::jobs::valid_verb(verb));
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

    /// The preset's jobs, polled through [`crate::jobs::job_status`] on a fake cluster.
    mod polled {
        use lethe_guest::fake::{FakeCluster, FakeHost};
        use lethe_guest::kube::{DeleteOptions, Identity, Kube as _, ObjectRef};
        use serde_json::{Value as Json, json};

        use crate::config::Settings;
        use crate::errors::HttpError;
        use crate::jobs::{Job, JobState, job_status};

        const SPACE: &str = "5a9b2a4e-1b2c-4d5e-8f90-123456789abc";
        const SI: &str = "7c1d2a4e-1b2c-4d5e-8f90-123456789abc";

        fn world() -> (FakeCluster, Settings) {
            let cluster = FakeCluster::new();
            let host = FakeHost::on(&cluster);
            host.set_config("job_types", "korifi");
            let settings = Settings::from_env(&host).expect("the preset");
            // "dev" may see what is in the space's namespace; "nobody" sees nothing there.
            cluster.grant("dev", "get", "CFServiceInstance", SPACE);
            cluster.grant("dev", "list", "CFRoute", SPACE);
            cluster.grant("nobody", "list", "Namespace", "*");
            (cluster, settings)
        }

        fn poll(cluster: &FakeCluster, settings: &Settings, guid: &str, token: &str) -> Result<Job, HttpError> {
            let host = FakeHost::on(cluster);
            job_status(&host, &host, settings, guid, &Identity::Caller(token.into()))
        }

        fn instance(cluster: &FakeCluster, generation: i64, status: Json) {
            cluster.put(json!({
                "apiVersion": super::API_VERSION, "kind": "CFServiceInstance",
                "metadata": {"name": SI, "namespace": SPACE, "generation": generation},
                "spec": {"type": "managed"}, "status": status
            }));
        }

        fn ready(status: &str, reason: &str, message: &str, observed: i64) -> Json {
            json!({"observedGeneration": observed, "conditions": [
                {"type": "Ready", "status": status, "reason": reason, "message": message}]})
        }

        #[test]
        fn a_state_job_polls_until_ready_at_its_generation_and_fails_on_a_terminal_reason() {
            let (cluster, settings) = world();
            let guid = format!("managed_service_instance.create~{SI}");
            let state = |token: &str| poll(&cluster, &settings, &guid, token).map(|j| j.state);
            instance(&cluster, 1, json!({}));
            assert_eq!(state("dev"), Ok(JobState::Polling), "nothing reported yet");
            instance(&cluster, 1, ready("False", "ProvisionInProgress", "", 1));
            assert_eq!(state("dev"), Ok(JobState::Polling));
            instance(&cluster, 1, ready("True", "Ready", "", 1));
            let done = poll(&cluster, &settings, &guid, "dev").expect("job");
            assert_eq!(done.state, JobState::Complete);
            assert_eq!(
                done.to_json("https://api")["links"]["service_instance"]["href"],
                format!("https://api/v3/service_instances/{SI}")
            );
            // Ready, but for the generation before the last change: not yet done.
            instance(&cluster, 2, ready("True", "Ready", "", 1));
            assert_eq!(state("dev"), Ok(JobState::Polling));
            instance(&cluster, 2, ready("False", "ProvisionFailed", "the broker said no", 2));
            let failed = poll(&cluster, &settings, &guid, "dev").expect("job");
            assert_eq!(failed.state, JobState::Failed);
            assert_eq!(failed.errors[0].detail, "the broker said no");
            assert_eq!(failed.errors[0].code, 10008);
            // A reason a retry may mend stays POLLING, as Korifi's.
            instance(&cluster, 2, ready("False", "GetLastOperationFailed", "timeout", 2));
            assert_eq!(state("dev"), Ok(JobState::Polling));
            // Who may not see it learns nothing; nor does anyone once it is gone.
            assert_eq!(state("nobody").map_err(|e| e.status), Err(404));
            let host = FakeHost::on(&cluster);
            let target = ObjectRef::new(super::API_VERSION, "CFServiceInstance", Some(SPACE), SI);
            host.delete(&Identity::Privileged, &target, &DeleteOptions::default())
                .expect("deleted");
            assert_eq!(state("dev").map_err(|e| e.status), Err(404));
        }

        #[test]
        fn an_app_is_deleted_as_the_caller_through_its_cloud_controller_route() {
            let (cluster, settings) = world();
            let host = FakeHost::on(&cluster);
            host.set_config("job_types", "korifi");
            cluster.put(json!({"apiVersion": super::API_VERSION, "kind": "CFApp",
                "metadata": {"name": "a1", "namespace": SPACE, "finalizers": ["example.com/hold"]}}));
            cluster.grant("dev", "get", "CFApp", SPACE);
            let request = |path: &str, token: &str| lethe_guest::Request {
                method: "DELETE".into(),
                path: path.into(),
                headers: vec![(
                    "authorization".to_string(),
                    format!("Bearer {token}").into_bytes(),
                )]
                .into(),
                ..lethe_guest::Request::default()
            };
            let delete = |token: &str| crate::api::handle(&host, &host, &request("/v3/apps/a1", token));
            let location = |r: &lethe_guest::Response| {
                r.headers
                    .iter()
                    .find(|(n, _)| n == "location")
                    .map(|(_, v)| v.clone())
            };
            assert_eq!(delete("nobody").status, 404, "may not see it");
            assert_eq!(delete("dev").status, 403, "may see it, not delete it");
            let first = delete("admin");
            assert_eq!(first.status, 202);
            let job_location = location(&first);
            assert!(
                job_location.as_deref().is_some_and(|l| l.ends_with("/v3/jobs/app.delete~a1")),
                "{job_location:?}"
            );
            assert_eq!(location(&delete("admin")), job_location, "the same job");
            let job = poll(&cluster, &settings, "app.delete~a1", "admin").expect("job");
            assert_eq!(job.state, JobState::Processing);
            // A collection no configured type deletes is no route of lethe's.
            let unrouted = crate::api::handle(&host, &host, &request("/v3/buildpacks/b1", "admin"));
            assert_eq!(unrouted.status, 404);
        }

        #[test]
        fn a_broker_create_is_processing_not_polling() {
            let (cluster, settings) = world();
            cluster.put(json!({
                "apiVersion": super::API_VERSION, "kind": "CFServiceBroker",
                "metadata": {"name": "b1", "namespace": "cf"}, "status": {}
            }));
            let job = poll(&cluster, &settings, "service_broker.create~b1", "admin").expect("job");
            assert_eq!(job.state, JobState::Processing);
            assert_eq!(job.to_json("x")["operation"], "service_broker.create");
        }

        #[test]
        fn a_role_is_found_by_its_label_not_its_name() {
            let (cluster, settings) = world();
            let role = "9e1d2a4e-1b2c-4d5e-8f90-123456789abc";
            let guid = format!("role.delete~{role}");
            // A RoleBinding named after the guid, but without the label, is not the role.
            cluster.put(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": role, "namespace": SPACE},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"}}));
            let state = |token: &str| poll(&cluster, &settings, &guid, token).map(|j| j.state);
            assert_eq!(state("admin"), Ok(JobState::Complete));
            let now = lethe_guest::env::format_rfc3339(cluster.now.get());
            cluster.put(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "cf-abc", "namespace": SPACE,
                    "labels": {super::ROLE_GUID_LABEL: role},
                    "deletionTimestamp": now, "finalizers": ["example.com/hold"]},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"}}));
            assert_eq!(state("admin"), Ok(JobState::Processing), "being deleted");
            assert_eq!(state("nobody"), Ok(JobState::Processing), "a deletion under way, to anyone");
            FakeHost::on(&cluster).advance(120_000);
            assert_eq!(state("admin"), Ok(JobState::Failed), "past the timeout");
        }

        #[test]
        fn apply_manifest_is_complete_and_unmapped_routes_wait_for_destinations() {
            let (cluster, settings) = world();
            let applied = poll(&cluster, &settings, &format!("space.apply_manifest~{SPACE}"), "dev")
                .expect("job");
            assert_eq!(applied.state, JobState::Complete);
            assert_eq!(
                applied.to_json("https://api")["links"]["space"]["href"],
                format!("https://api/v3/spaces/{SPACE}")
            );
            let guid = format!("space.delete_unapped_routes~{SPACE}");
            let route = |name: &str, destinations: Json| {
                cluster.put(json!({"apiVersion": super::API_VERSION, "kind": "CFRoute",
                    "metadata": {"name": name, "namespace": SPACE},
                    "spec": {"host": name, "destinations": destinations}}));
            };
            route("mapped", json!([{"appRef": {"name": "a"}}]));
            route("unmapped", json!([]));
            let state = |token: &str| poll(&cluster, &settings, &guid, token).map(|j| j.state);
            assert_eq!(state("dev"), Ok(JobState::Processing));
            route("unmapped", json!([{"appRef": {"name": "b"}}]));
            assert_eq!(state("dev"), Ok(JobState::Complete));
            assert_eq!(state("nobody").map_err(|e| e.status), Err(404), "may not list them");
            assert_eq!(
                poll(&cluster, &settings, &format!("space.frobnicate~{SPACE}"), "dev")
                    .map_err(|e| e.status),
                Err(404),
                "a verb the type does not have"
            );
        }
    }
}
