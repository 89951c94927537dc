//! The rules of each kind, one module per kind (as kube-apiserver's
//! `pkg/registry/<group>/<kind>/strategy.go`): defaults, validation, what an update may change.
//! The verbs call them; a kind's module never calls a verb.

pub(crate) mod crd;
pub(crate) mod event;
pub(crate) mod job;
pub(crate) mod namespace;
pub(crate) mod pod;
pub(crate) mod pod_spec;
pub(crate) mod secret;
pub(crate) mod service;
