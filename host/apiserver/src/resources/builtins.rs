//! The built-in kinds the embedded cluster serves, with their verbs, short names and categories.

use crate::resources::def::{ResourceDef, Shape, def};
use std::sync::{Arc, OnceLock};

/// The built-in resources.
pub fn builtins() -> &'static [Arc<ResourceDef>] {
    static B: OnceLock<Vec<Arc<ResourceDef>>> = OnceLock::new();
    B.get_or_init(|| {
        use crate::resources::def::NameRule::*;
        let mut v = vec![
            def(
                "",
                "v1",
                "namespaces",
                "namespace",
                "Namespace",
                false,
                &["ns"],
                true,
                false,
                Label,
            ),
            def(
                "",
                "v1",
                "configmaps",
                "configmap",
                "ConfigMap",
                true,
                &["cm"],
                false,
                false,
                Subdomain,
            ),
            def(
                "",
                "v1",
                "secrets",
                "secret",
                "Secret",
                true,
                &[],
                false,
                false,
                Subdomain,
            ),
            def(
                "",
                "v1",
                "serviceaccounts",
                "serviceaccount",
                "ServiceAccount",
                true,
                &["sa"],
                false,
                false,
                Subdomain,
            ),
            def(
                "",
                "v1",
                "events",
                "event",
                "Event",
                true,
                &["ev"],
                false,
                false,
                Subdomain,
            ),
            // Inert storage (nothing schedules or runs them), so that `kubectl get pods`,
            // `kubectl cluster-info` and the like answer as on a cluster without nodes.
            def(
                "",
                "v1",
                "pods",
                "pod",
                "Pod",
                true,
                &["po"],
                true,
                false,
                Subdomain,
            ),
            def(
                "",
                "v1",
                "services",
                "service",
                "Service",
                true,
                &["svc"],
                true,
                false,
                Dns1035Label,
            ),
            def(
                "",
                "v1",
                "nodes",
                "node",
                "Node",
                false,
                &["no"],
                true,
                false,
                Subdomain,
            ),
            def(
                "batch",
                "v1",
                "cronjobs",
                "cronjob",
                "CronJob",
                true,
                &["cj"],
                true,
                true,
                Subdomain,
            ),
            def(
                "batch",
                "v1",
                "jobs",
                "job",
                "Job",
                true,
                &[],
                true,
                true,
                Subdomain,
            ),
            // Stored and validated, never run (no Deployment controller, no eviction API): what
            // `kubectl apply --dry-run=server -k deploy/` checks of lethe's own deployment.
            def(
                "apps",
                "v1",
                "deployments",
                "deployment",
                "Deployment",
                true,
                &["deploy"],
                true,
                true,
                Subdomain,
            ),
            def(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "poddisruptionbudget",
                "PodDisruptionBudget",
                true,
                &["pdb"],
                true,
                true,
                Subdomain,
            ),
            def(
                "coordination.k8s.io",
                "v1",
                "leases",
                "lease",
                "Lease",
                true,
                &[],
                false,
                false,
                Subdomain,
            ),
            def(
                "rbac.authorization.k8s.io",
                "v1",
                "roles",
                "role",
                "Role",
                true,
                &[],
                false,
                false,
                PathSegment,
            ),
            def(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterroles",
                "clusterrole",
                "ClusterRole",
                false,
                &[],
                false,
                false,
                PathSegment,
            ),
            def(
                "rbac.authorization.k8s.io",
                "v1",
                "rolebindings",
                "rolebinding",
                "RoleBinding",
                true,
                &[],
                false,
                false,
                PathSegment,
            ),
            def(
                "rbac.authorization.k8s.io",
                "v1",
                "clusterrolebindings",
                "clusterrolebinding",
                "ClusterRoleBinding",
                false,
                &[],
                false,
                false,
                PathSegment,
            ),
            def(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "customresourcedefinition",
                "CustomResourceDefinition",
                false,
                &["crd", "crds"],
                true,
                true,
                Subdomain,
            ),
        ];
        let mut ssar = def(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            "SelfSubjectAccessReview",
            false,
            &[],
            false,
            false,
            PathSegment,
        );
        ssar.virtual_create_only = true;
        let mut sar = def(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "subjectaccessreview",
            "SubjectAccessReview",
            false,
            &[],
            false,
            false,
            PathSegment,
        );
        sar.virtual_create_only = true;
        let mut lsar = def(
            "authorization.k8s.io",
            "v1",
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            "LocalSubjectAccessReview",
            true,
            &[],
            false,
            false,
            PathSegment,
        );
        lsar.virtual_create_only = true;
        let mut ssrr = def(
            "authorization.k8s.io",
            "v1",
            "selfsubjectrulesreviews",
            "selfsubjectrulesreview",
            "SelfSubjectRulesReview",
            false,
            &[],
            false,
            false,
            PathSegment,
        );
        ssrr.virtual_create_only = true;
        let mut ssr = def(
            "authentication.k8s.io",
            "v1",
            "selfsubjectreviews",
            "selfsubjectreview",
            "SelfSubjectReview",
            false,
            &[],
            false,
            false,
            PathSegment,
        );
        ssr.virtual_create_only = true;
        // The same stored Events as core `v1`, in the `events.k8s.io/v1` shape (kube-rs's
        // event `Recorder` and client-go's new events library write through this API).
        let mut events_v1 = def(
            "events.k8s.io",
            "v1",
            "events",
            "event",
            "Event",
            true,
            &["ev"],
            false,
            false,
            Subdomain,
        );
        events_v1.storage_key = crate::shape::EVENTS_KEY.into();
        events_v1.shape = Shape::EventsV1;
        v.push(events_v1);
        v.push(ssar);
        v.push(sar);
        v.push(lsar);
        v.push(ssrr);
        v.push(ssr);
        for d in v.iter_mut() {
            // The members of the `all` category that this server serves, as kubectl's
            // `get all` finds them on a real server.
            if matches!(d.plural.as_str(), "cronjobs" | "jobs" | "pods" | "services")
                && matches!(d.group.as_str(), "" | "batch")
            {
                d.categories = vec!["all".into()];
            }
        }
        v.into_iter().map(Arc::new).collect()
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
