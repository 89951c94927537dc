//! The Cloud Foundry V3 slice that `cf delete-org` and `cf delete-space` use, on Kubernetes
//! resources laid out as Korifi lays them out:
//!
//! - orgs are `Org` objects in a root namespace (default `cf`), named by their guid; each org owns a
//!   namespace named after its guid, where its `Space` objects live; each space owns a namespace
//!   named after its guid;
//! - CF roles are ClusterRoles (`kubernetes/roles.json`) bound by RoleBindings in those namespaces;
//! - orgs and spaces carry the finalizer [`FINALIZER`], which [`reconcile`] removes once what they
//!   own is gone.
//!
//! Everything here is a function of its inputs and the [`Kube`](lethe_guest::kube::Kube) and
//! [`Env`](lethe_guest::env::Env) calls it makes, so it is unit-tested natively against fakes and
//! runs as wasm in the `cf-api`, `cf-job-status` and `cf-reconciler` components.

pub mod access;
pub mod api;
pub mod config;
pub mod context;
pub mod deletion;
pub mod errors;
pub mod follow;
pub mod jobs;
pub mod kind;
pub mod names;
pub mod ownership;
pub mod reconcile;
pub mod roles;
pub mod tell;

#[cfg(test)]
mod tests;

/// The finalizer lethe puts on orgs and spaces.
pub const FINALIZER: &str = "cf.lethe.dev/cleanup";
