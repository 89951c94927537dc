//! Roles, ClusterRoles and their bindings: rule and binding validation, subject defaults.

use crate::kinds::strategy::Strategy;
use crate::status::Cause;
use crate::validation;
use serde_json::{Value, json};

/// `ValidatePolicyRule` for each rule of a Role or ClusterRole.
pub(crate) fn policy_rule_causes(v: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    let Some(rules) = v["rules"].as_array() else {
        return;
    };
    let listed = |r: &Value, key: &str| r[key].as_array().is_some_and(|a| !a.is_empty());
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("rules[{i}]");
        if !listed(rule, "verbs") {
            causes.push(validation::required(
                format!("{path}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        if listed(rule, "nonResourceURLs") {
            let urls = crate::util::string_list(&rule["nonResourceURLs"]);
            let shown: Vec<String> = urls.iter().map(|u| validation::go_quote(u)).collect();
            let value = format!("[]string{{{}}}", shown.join(", "));
            let mut invalid = |why: &str| {
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!("Invalid value: {value}: {why}"),
                    field: format!("{path}.nonResourceURLs"),
                })
            };
            if namespaced {
                invalid("namespaced rules cannot apply to non-resource URLs");
            }
            if listed(rule, "apiGroups")
                || listed(rule, "resources")
                || listed(rule, "resourceNames")
            {
                invalid("rules cannot apply to both regular resources and non-resource URLs");
            }
            continue;
        }
        if !listed(rule, "apiGroups") {
            causes.push(validation::required(
                format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if !listed(rule, "resources") {
            causes.push(validation::required(
                format!("{path}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

/// The API group of Roles, ClusterRoles and their bindings, which a `roleRef` must name.
pub(crate) const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `ValidateRoleBinding` / `ValidateClusterRoleBinding`: what a binding refers to and to whom.
pub(crate) fn binding_causes(v: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    let role_ref = &v["roleRef"];
    let text = |x: &Value| x.as_str().unwrap_or_default().to_string();
    if text(&role_ref["apiGroup"]) != RBAC_GROUP {
        causes.push(validation::not_supported(
            "roleRef.apiGroup",
            &json!(&text(&role_ref["apiGroup"])),
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = text(&role_ref["kind"]);
    if !kinds.contains(&kind.as_str()) {
        causes.push(validation::not_supported(
            "roleRef.kind",
            &json!(&kind),
            kinds,
        ));
    }
    if text(&role_ref["name"]).is_empty() {
        causes.push(validation::required("roleRef.name", ""));
    }
    for (i, subject) in v["subjects"].as_array().into_iter().flatten().enumerate() {
        let path = format!("subjects[{i}]");
        if text(&subject["name"]).is_empty() {
            causes.push(validation::required(format!("{path}.name"), ""));
        }
        let group = text(&subject["apiGroup"]);
        match subject["kind"].as_str().unwrap_or_default() {
            "ServiceAccount" => {
                if !group.is_empty() {
                    causes.push(validation::not_supported(
                        format!("{path}.apiGroup"),
                        &json!(&group),
                        &[""],
                    ));
                }
                if !namespaced && text(&subject["namespace"]).is_empty() {
                    causes.push(validation::required(format!("{path}.namespace"), ""));
                }
            }
            "User" | "Group" if group != RBAC_GROUP => {
                causes.push(validation::not_supported(
                    format!("{path}.apiGroup"),
                    &json!(&group),
                    &[RBAC_GROUP],
                ));
            }
            "User" | "Group" => {}
            other => causes.push(validation::not_supported(
                format!("{path}.kind"),
                &json!(other),
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}

/// `SetDefaults_Subject`: users and groups are RBAC's own subjects.
pub(crate) fn subject_defaults(v: &mut Value) {
    let Some(subjects) = v.get_mut("subjects").and_then(Value::as_array_mut) else {
        return;
    };
    for subject in subjects {
        let named = matches!(subject["kind"].as_str(), Some("User" | "Group"));
        if let Some(m) = subject.as_object_mut()
            && named
            && m.get("apiGroup")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            m.insert("apiGroup".into(), json!(RBAC_GROUP));
        }
    }
}

/// Roles and ClusterRoles: their rules. An `aggregationRule` is refused: no aggregation
/// controller runs here, and a role that relies on one must not be stored as if it were kept.
pub(crate) struct RoleStrategy {
    /// Whether these are namespaced Roles (else ClusterRoles).
    pub namespaced: bool,
}

impl Strategy for RoleStrategy {
    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        policy_rule_causes(obj, self.namespaced, causes);
        if !obj["aggregationRule"].is_null() {
            let why = "this cluster runs no ClusterRole aggregation controller; list the rules";
            causes.push(validation::forbidden("aggregationRule", why));
        }
    }
}

/// RoleBindings and ClusterRoleBindings: subject defaults, their rules, and a fixed role.
pub(crate) struct BindingStrategy {
    /// Whether these are namespaced RoleBindings (else ClusterRoleBindings).
    pub namespaced: bool,
}

impl Strategy for BindingStrategy {
    fn defaults(&self, obj: &mut Value) {
        subject_defaults(obj);
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        binding_causes(obj, self.namespaced, causes);
    }

    /// `ValidateRoleBindingUpdate`: changing the role means a new binding.
    fn validate_update(&self, old: &Value, new: &Value) -> Vec<Cause> {
        if old["roleRef"] == new["roleRef"] {
            return vec![];
        }
        let text = |k: &str| validation::go_quote(new["roleRef"][k].as_str().unwrap_or_default());
        vec![validation::invalid(
            "roleRef",
            format!(
                "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
                text("apiGroup"),
                text("kind"),
                text("name")
            ),
            "cannot change roleRef",
        )]
    }
}
