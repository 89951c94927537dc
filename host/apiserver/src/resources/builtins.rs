//! The built-in kinds the embedded cluster serves, with their verbs, short names and categories.

use crate::resources::def::NameRule::{self, *};
use crate::resources::def::{ResourceDef, Shape};
use Serves::*;
use std::sync::{Arc, OnceLock};

/// How a built-in resource is served.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Serves {
    /// Stored objects, with every verb its definition allows.
    Stored,
    /// Not stored: only `create`, which answers (the access reviews).
    CreateOnly,
    /// The core Events, in the `events.k8s.io/v1` shape (kube-rs's event `Recorder` and
    /// client-go's new events library write through this API).
    EventsV1,
}

/// A row of [`TABLE`]: group, plural, singular, kind, namespaced, short names, status
/// subresource, generation, name rule, and how the resource is served.
type Row = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    bool,
    bool,
    NameRule,
    Serves,
);

/// The built-in resources, all at version `v1`.
#[rustfmt::skip]
const TABLE: &[Row] = &[
    ("", "namespaces", "namespace", "Namespace", false, &["ns"], true, false, Label, Stored),
    ("", "configmaps", "configmap", "ConfigMap", true, &["cm"], false, false, Subdomain, Stored),
    ("", "secrets", "secret", "Secret", true, &[], false, false, Subdomain, Stored),
    ("", "serviceaccounts", "serviceaccount", "ServiceAccount", true, &["sa"], false, false, Subdomain, Stored),
    ("", "events", "event", "Event", true, &["ev"], false, false, Subdomain, Stored),
    ("", "services", "service", "Service", true, &["svc"], true, false, Dns1035Label, Stored),
    ("batch", "cronjobs", "cronjob", "CronJob", true, &["cj"], true, true, Subdomain, Stored),
    ("apps", "deployments", "deployment", "Deployment", true, &["deploy"], true, true, Subdomain, Stored),
    ("policy", "poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true, &["pdb"], true, true, Subdomain, Stored),
    ("networking.k8s.io", "networkpolicies", "networkpolicy", "NetworkPolicy", true, &["netpol"], false, true, Subdomain, Stored),
    ("coordination.k8s.io", "leases", "lease", "Lease", true, &[], false, false, Subdomain, Stored),
    ("rbac.authorization.k8s.io", "roles", "role", "Role", true, &[], false, false, PathSegment, Stored),
    ("rbac.authorization.k8s.io", "clusterroles", "clusterrole", "ClusterRole", false, &[], false, false, PathSegment, Stored),
    ("rbac.authorization.k8s.io", "rolebindings", "rolebinding", "RoleBinding", true, &[], false, false, PathSegment, Stored),
    ("rbac.authorization.k8s.io", "clusterrolebindings", "clusterrolebinding", "ClusterRoleBinding", false, &[], false, false, PathSegment, Stored),
    ("apiextensions.k8s.io", "customresourcedefinitions", "customresourcedefinition", "CustomResourceDefinition", false, &["crd", "crds"], true, true, Subdomain, Stored),
    ("events.k8s.io", "events", "event", "Event", true, &["ev"], false, false, Subdomain, EventsV1),
    ("authorization.k8s.io", "selfsubjectaccessreviews", "selfsubjectaccessreview", "SelfSubjectAccessReview", false, &[], false, false, PathSegment, CreateOnly),
    ("authentication.k8s.io", "selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview", false, &[], false, false, PathSegment, CreateOnly),
    ("authentication.k8s.io", "tokenreviews", "tokenreview", "TokenReview", false, &[], false, false, PathSegment, CreateOnly),
    ("authorization.k8s.io", "subjectaccessreviews", "subjectaccessreview", "SubjectAccessReview", false, &[], false, false, PathSegment, CreateOnly),
];

/// The built-in resources.
pub fn builtins() -> &'static [Arc<ResourceDef>] {
    static B: OnceLock<Vec<Arc<ResourceDef>>> = OnceLock::new();
    B.get_or_init(|| {
        TABLE
            .iter()
            .map(
                |&(
                    group,
                    plural,
                    singular,
                    kind,
                    namespaced,
                    short,
                    status,
                    generation,
                    rule,
                    serves,
                )| {
                    let (storage_key, shape) = match serves {
                        EventsV1 => (crate::shape::EVENTS_KEY.into(), Shape::EventsV1),
                        Stored | CreateOnly => (format!("{group}/{plural}"), Shape::Stored),
                    };
                    // The members of the `all` category that this server serves, as kubectl's
                    // `get all` finds them on a real server.
                    let in_all =
                        matches!(plural, "cronjobs" | "services") && matches!(group, "" | "batch");
                    Arc::new(ResourceDef {
                        group: group.into(),
                        version: "v1".into(),
                        plural: plural.into(),
                        singular: singular.into(),
                        kind: kind.into(),
                        namespaced,
                        short_names: short.iter().map(|s| s.to_string()).collect(),
                        categories: if in_all { vec!["all".into()] } else { vec![] },
                        status_subresource: status,
                        has_generation: generation,
                        name_rule: rule,
                        virtual_create_only: serves == CreateOnly,
                        custom: false,
                        // The kinds whose PUT creates a missing object, as on the real server.
                        create_on_update: matches!(
                            plural,
                            "leases"
                                | "events"
                                | "services"
                                | "roles"
                                | "clusterroles"
                                | "rolebindings"
                                | "clusterrolebindings"
                        ),
                        schema: None,
                        storage_key,
                        shape,
                    })
                },
            )
            .collect()
    })
}

/// The definition whose rules (validation, defaults) govern the stored objects of `def`: the core
/// Event's for `events.k8s.io/v1`, else `def` itself.
pub fn stored_def(def: &Arc<ResourceDef>) -> Arc<ResourceDef> {
    match def.shape {
        Shape::Stored => def.clone(),
        Shape::EventsV1 => builtins()
            .iter()
            .find(|d| d.shape == Shape::Stored && d.key() == def.key())
            .cloned()
            .unwrap_or_else(|| def.clone()),
    }
}
