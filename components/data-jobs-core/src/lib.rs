//! The data-jobs control plane (Versatile Data Kit style) as plain Rust.
//!
//! The API writes only *desired* state (`desired_data_job_deployment`); a reconciler pass makes
//! Kubernetes CronJobs match it and records *actual* state (`actual_data_job_deployment`).
//! Deleting a deployment or a whole job removes desired rows only; the actual row is the tombstone
//! the next pass acts on, and `GET /v3/jobs/{guid}` derives the deletion job's state from what is
//! still there.
//!
//! Everything here is a function of a [`Host`] (lethe-guest's [`lethe_guest::Capabilities`]):
//! SQL, Kubernetes, configuration, clock and log. On wasm that is [`lethe_guest::host::Host`];
//! tests use fakes.
//!
//! - [`api`]: the HTTP API (`/data-jobs/for-team/...`, `/data-jobs/sync/reports`, `/v3/jobs/...`);
//! - [`status`]: deletion-job status, for this component and for a shared job-status component;
//! - [`sync`]: the reconciler pass and its leader lease;
//! - [`follow`]: which items a pass visits: what changed since the last one, or everything;
//! - [`feed`]: the change feed of desired state in SQL;
//! - [`model`]: validation, spec hashing and the CronJob rendering.

pub mod api;
pub mod feed;
pub mod follow;
mod items;
pub mod model;
pub mod status;
pub mod sync;
pub mod time;

pub use lethe_guest::{Request, Response, cf};

pub use lethe_guest::Capabilities as Host;
pub use lethe_guest::env::{Env, Level};
pub use lethe_guest::kube::{Identity, Kube, KubeError, ListOptions, Object, ObjectRef};
pub use lethe_guest::sql::{Sql, SqlError, Statement, Value};

/// The configuration of the data-jobs component, read from its variables with defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Namespace of the CronJobs and the Lease (`namespace`, default `data-jobs`).
    pub namespace: String,
    /// Seconds after which a deletion job that has not finished is FAILED
    /// (`deletion_timeout_seconds`, default 120).
    pub deletion_timeout_ms: i64,
    /// Lease duration (`lease_duration_seconds`, default 15).
    pub lease_duration_ms: i64,
    /// How often a holder renews (`lease_renew_seconds`, default 5).
    pub lease_renew_ms: i64,
    /// Page size of the CronJob LIST and of the SQL reads (`page_size`, default 500).
    pub page_size: u32,
    /// At most this many Kubernetes writes per pass (`max_changes_per_pass`, default 2000); the
    /// rest wait for the next pass.
    pub max_changes: u32,
    /// First backoff after a transient failure (`backoff_base_ms`, default 2000), doubled per
    /// attempt up to `backoff_max_ms` (default 300000).
    pub backoff_base_ms: i64,
    /// Largest backoff.
    pub backoff_max_ms: i64,
    /// Reports kept in SQL (`reports_kept`, default 50).
    pub reports_kept: i64,
    /// Between full passes, a pass visits only what changed; a full pass runs at least this
    /// often (`full_resync_seconds`, default 600), besides at start and after a lost watch.
    pub full_resync_ms: i64,
    /// Image used when a deployment names none: `<image_registry>/<team>/<job>:<job_version>`
    /// (`image_registry`, default `registry.local/data-jobs`).
    pub image_registry: String,
    /// External base URL for `Location` headers (`base_url`); derived from `Host` when empty.
    pub base_url: String,
    /// This host's identity as Lease holder (`lethe_instance_id`).
    pub instance_id: String,
}

impl Settings {
    /// Reads the settings from `host`'s configuration.
    pub fn load(host: &dyn Env) -> Settings {
        Settings::from_config(&|key| host.config(key))
    }

    /// Reads the settings from `config`, which answers each key (`namespace`, …) with its value;
    /// a component that hosts this logic beside other logic maps the keys onto its own names.
    pub fn from_config(config: &dyn Fn(&str) -> Option<String>) -> Settings {
        let num = |key: &str, default: i64| {
            config(key)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        let text = |key: &str, default: &str| {
            config(key)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_string())
        };
        Settings {
            namespace: text("namespace", "data-jobs"),
            deletion_timeout_ms: num("deletion_timeout_seconds", 120) * 1000,
            lease_duration_ms: num("lease_duration_seconds", 15) * 1000,
            lease_renew_ms: num("lease_renew_seconds", 5) * 1000,
            page_size: u32::try_from(num("page_size", 500)).unwrap_or(500),
            max_changes: u32::try_from(num("max_changes_per_pass", 2000)).unwrap_or(2000),
            backoff_base_ms: num("backoff_base_ms", 2000),
            backoff_max_ms: num("backoff_max_ms", 300_000),
            reports_kept: num("reports_kept", 50),
            full_resync_ms: num("full_resync_seconds", 600).saturating_mul(1000),
            image_registry: text("image_registry", "registry.local/data-jobs"),
            base_url: config("base_url")
                .unwrap_or_default()
                .trim()
                .trim_end_matches('/')
                .to_string(),
            instance_id: text("lethe_instance_id", "lethe"),
        }
    }

    /// The sync's leader Lease: [`sync::LEASE_NAME`] in the namespace, held as `instance_id`.
    pub fn lease(&self) -> lethe_guest::lease::LeaseConfig {
        lethe_guest::lease::LeaseConfig {
            namespace: self.namespace.clone(),
            name: sync::LEASE_NAME.to_string(),
            holder: self.instance_id.clone(),
            duration_ms: self.lease_duration_ms,
            renew_ms: self.lease_renew_ms,
        }
    }
}

#[cfg(test)]
mod api_tests;
#[cfg(test)]
mod tests;
