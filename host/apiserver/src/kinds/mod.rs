//! The rules of each kind, one module per kind (as kube-apiserver's
//! `pkg/registry/<group>/<kind>/strategy.go`): defaults, validation, what an update may change.
//! The verbs call them; a kind's module never calls a verb.

pub(crate) mod causes;
pub(crate) mod config_map;
pub(crate) mod crd;
pub(crate) mod cron_job;
pub(crate) mod defaults;
pub(crate) mod deployment;
pub(crate) mod event;
pub(crate) mod job;
pub(crate) mod lease;
pub(crate) mod namespace;
pub(crate) mod pod;
pub(crate) mod pod_disruption_budget;
pub(crate) mod pod_spec;
pub(crate) mod rbac;
pub(crate) mod secret;
pub(crate) mod service;
