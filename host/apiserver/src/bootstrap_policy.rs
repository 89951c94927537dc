//! kube-apiserver's bootstrap RBAC policy, as far as a user meets it: the user-facing roles
//! (composed once from their aggregated parts) and the rights every user has.

use serde_json::Value;

/// The default cluster roles and bindings created on a fresh cluster: those of kube-apiserver's
/// bootstrap policy that a user meets (the aggregated user-facing roles and the rights every
/// user has), with the same names, labels, rules and subjects.
pub fn default_rbac() -> Vec<(&'static str, Value)> {
    use serde_json::json;
    let read = json!(["get", "list", "watch"]);
    let change = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let all = json!(crate::resources::ALL_VERBS);
    let agg = |to: &str| format!("rbac.authorization.k8s.io/aggregate-to-{to}");
    let boot = "kubernetes.io/bootstrapping";
    let meta = |name: &str, labels: Value| {
        json!({
            "name": name,
            "labels": labels,
            "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
        })
    };
    let role = |name: &str, labels: Value, body: Value| {
        let mut v = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": meta(name, labels),
        });
        if let (Some(m), Value::Object(b)) = (v.as_object_mut(), body) {
            m.extend(b);
        }
        ("clusterroles", v)
    };
    let rule = |groups: &[&str], resources: &[&str], verbs: &Value| json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
    let binding = |name: &str, groups: &[&str]| {
        let subjects: Vec<Value> = groups
            .iter()
            .map(|g| json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": g}))
            .collect();
        (
            "clusterrolebindings",
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": meta(name, json!({boot: "rbac-defaults"})),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subjects,
            }),
        )
    };
    let get = json!(["get"]);
    let mut policy = vec![
        role(
            "cluster-admin",
            json!({boot: "rbac-defaults"}),
            json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]}),
        ),
        role(
            "system:aggregate-to-admin",
            json!({boot: "rbac-defaults", agg("admin"): "true"}),
            json!({"rules": [
                rule(&["authorization.k8s.io"], &["localsubjectaccessreviews"], &json!(["create"])),
                rule(&["rbac.authorization.k8s.io"], &["rolebindings", "roles"], &all),
            ]}),
        ),
        role(
            "system:aggregate-to-edit",
            json!({boot: "rbac-defaults", agg("edit"): "true"}),
            json!({"rules": [
                rule(&[""], &["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"], &read),
                rule(&[""], &["serviceaccounts"], &json!(["impersonate"])),
                rule(&[""], &["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], &change),
                rule(&[""], &["pods/eviction"], &json!(["create"])),
                rule(&[""], &["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers", "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"], &change),
                rule(&[""], &["serviceaccounts/token"], &json!(["create"])),
                rule(&["apps"], &["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets", "replicasets/scale", "statefulsets", "statefulsets/scale"], &change),
                rule(&["autoscaling"], &["horizontalpodautoscalers"], &change),
                rule(&["batch"], &["cronjobs", "jobs"], &change),
                rule(&["extensions"], &["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "ingresses", "networkpolicies", "replicasets", "replicasets/scale", "replicationcontrollers/scale"], &change),
                rule(&["policy"], &["poddisruptionbudgets"], &change),
                rule(&["networking.k8s.io"], &["ingresses", "networkpolicies"], &change),
                rule(&["coordination.k8s.io"], &["leases"], &all),
            ]}),
        ),
        role(
            "system:aggregate-to-view",
            json!({boot: "rbac-defaults", agg("view"): "true"}),
            json!({"rules": [
                rule(&[""], &["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods", "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services", "services/status"], &read),
                rule(&[""], &["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status", "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"], &read),
                rule(&[""], &["namespaces"], &read),
                rule(&["discovery.k8s.io"], &["endpointslices"], &read),
                rule(&["apps"], &["controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets", "statefulsets/scale", "statefulsets/status"], &read),
                rule(&["autoscaling"], &["horizontalpodautoscalers", "horizontalpodautoscalers/status"], &read),
                rule(&["batch"], &["cronjobs", "cronjobs/status", "jobs", "jobs/status"], &read),
                rule(&["extensions"], &["daemonsets", "daemonsets/status", "deployments", "deployments/scale", "deployments/status", "ingresses", "ingresses/status", "networkpolicies", "replicasets", "replicasets/scale", "replicasets/status", "replicationcontrollers/scale"], &read),
                rule(&["policy"], &["poddisruptionbudgets", "poddisruptionbudgets/status"], &read),
                rule(&["networking.k8s.io"], &["ingresses", "ingresses/status", "networkpolicies"], &read),
            ]}),
        ),
        role(
            "admin",
            json!({boot: "rbac-defaults"}),
            json!({"rules": []}),
        ),
        role(
            "edit",
            json!({boot: "rbac-defaults", agg("admin"): "true"}),
            json!({"rules": []}),
        ),
        role(
            "view",
            json!({boot: "rbac-defaults", agg("edit"): "true"}),
            json!({"rules": []}),
        ),
        role(
            "system:basic-user",
            json!({boot: "rbac-defaults"}),
            json!({"rules": [
                rule(&["authorization.k8s.io"], &["selfsubjectaccessreviews", "selfsubjectrulesreviews"], &json!(["create"])),
                rule(&["authentication.k8s.io"], &["selfsubjectreviews"], &json!(["create"])),
            ]}),
        ),
        role(
            "system:discovery",
            json!({boot: "rbac-defaults"}),
            json!({"rules": [{"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": get}]}),
        ),
        role(
            "system:public-info-viewer",
            json!({boot: "rbac-defaults"}),
            json!({"rules": [{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": get}]}),
        ),
        role(
            "system:auth-delegator",
            json!({boot: "rbac-defaults"}),
            json!({"rules": [
                rule(&["authentication.k8s.io"], &["tokenreviews"], &json!(["create"])),
                rule(&["authorization.k8s.io"], &["subjectaccessreviews"], &json!(["create"])),
            ]}),
        ),
        binding("cluster-admin", &["system:masters"]),
        binding("system:basic-user", &["system:authenticated"]),
        binding("system:discovery", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ];
    compose_user_facing_roles(&mut policy);
    policy
}

/// Gives `view`, `edit` and `admin` (in that order, as each is labelled into the next) the union
/// of the rules of the roles labelled `aggregate-to-<role>`, once: what the aggregation
/// controller computes for the bootstrap roles. The cluster runs no aggregation controller, so
/// roles created later with those labels add nothing (and the three roles carry no
/// `aggregationRule`, so that no client takes them for aggregated).
fn compose_user_facing_roles(policy: &mut [(&'static str, Value)]) {
    for target in ["view", "edit", "admin"] {
        let label = format!("rbac.authorization.k8s.io/aggregate-to-{target}");
        let mut rules: Vec<Value> = vec![];
        for (_, role) in policy
            .iter()
            .filter(|(_, r)| r["metadata"]["labels"][&label] == "true")
        {
            for rule in role["rules"].as_array().into_iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
        if let Some((_, role)) = policy
            .iter_mut()
            .find(|(_, r)| r["metadata"]["name"] == target)
        {
            role["rules"] = Value::Array(rules);
        }
    }
}
