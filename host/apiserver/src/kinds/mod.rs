//! The rules of each kind, one module per kind (as kube-apiserver's
//! `pkg/registry/<group>/<kind>/strategy.go`), each behind the one [`Strategy`] trait: defaults,
//! create and update validation, what an update may change, and delete hooks. The verbs call
//! [`strategy`] and the hooks; a kind's module never calls a verb.

pub(crate) mod causes;
pub(crate) mod config_map;
pub(crate) mod crd;
pub(crate) mod cron_job;
pub(crate) mod deployment;
pub(crate) mod event;
pub(crate) mod lease;
pub(crate) mod namespace;
pub(crate) mod pod_disruption_budget;
pub(crate) mod pod_spec;
pub(crate) mod rbac;
pub(crate) mod secret;
pub(crate) mod service;
pub(crate) mod strategy;

use crate::resources::ResourceDef;
use crate::status::ApiError;
use crate::util::meta_str;
use config_map::ConfigMapStrategy;
use crd::CrdStrategy;
use cron_job::CronJobStrategy;
use deployment::DeploymentStrategy;
use lease::LeaseStrategy;
use namespace::NamespaceStrategy;
use pod_disruption_budget::PodDisruptionBudgetStrategy;
use rbac::{BindingStrategy, RoleStrategy};
use secret::SecretStrategy;
use serde_json::Value;
use service::ServiceStrategy;
pub(crate) use strategy::Strategy;
use strategy::{CustomResource, Plain};

/// The rules of `def`'s kind.
pub(crate) fn strategy(def: &ResourceDef) -> &'static dyn Strategy {
    if def.custom {
        return &CustomResource;
    }
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "namespaces") => &NamespaceStrategy,
        ("", "configmaps") => &ConfigMapStrategy,
        ("", "secrets") => &SecretStrategy,
        ("", "services") => &ServiceStrategy,
        ("apiextensions.k8s.io", "customresourcedefinitions") => &CrdStrategy,
        ("batch", "cronjobs") => &CronJobStrategy,
        ("apps", "deployments") => &DeploymentStrategy,
        ("policy", "poddisruptionbudgets") => &PodDisruptionBudgetStrategy,
        ("coordination.k8s.io", "leases") => &LeaseStrategy,
        (rbac::RBAC_GROUP, "roles") => &RoleStrategy { namespaced: true },
        (rbac::RBAC_GROUP, "clusterroles") => &RoleStrategy { namespaced: false },
        (rbac::RBAC_GROUP, "rolebindings") => &BindingStrategy { namespaced: true },
        (rbac::RBAC_GROUP, "clusterrolebindings") => &BindingStrategy { namespaced: false },
        _ => &Plain,
    }
}

/// Validates the kind-specific fields; 422 Invalid on errors.
pub(crate) fn validate(def: &ResourceDef, v: &Value) -> Result<(), ApiError> {
    let mut causes = vec![];
    strategy(def).validate(v, &mut causes);
    let name = meta_str(v, "name");
    ApiError::invalid_if_any(&def.group, &def.kind, name, causes)
}

#[cfg(test)]
mod tests;
