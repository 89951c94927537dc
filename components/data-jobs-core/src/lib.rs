//! The data-jobs control plane (Versatile Data Kit style) as plain Rust.
//!
//! The API writes only *desired* state (`desired_data_job_deployment`); a reconciler pass makes
//! Kubernetes CronJobs match it and records *actual* state (`actual_data_job_deployment`).
//! Deleting a deployment or a whole job removes desired rows only; the actual row is the tombstone
//! the next pass acts on, and `GET /v3/jobs/{guid}` derives the deletion job's state from what is
//! still there.
//!
//! Everything here is a function of a [`Host`]: SQL, Kubernetes, configuration, clock and log.
//! The `data-jobs` component adapts the WIT imports to these traits; tests use fakes.
//!
//! - [`api`]: the HTTP API (`/data-jobs/for-team/...`, `/data-jobs/sync/reports`, `/v3/jobs/...`);
//! - [`status`]: deletion-job status, for this component and for a shared job-status component;
//! - [`sync`]: the reconciler pass and its leader lease;
//! - [`model`]: validation, spec hashing and the CronJob rendering;
//! - `guest` (wasm32 only): `guest::WasmHost`, the host's imports behind [`Host`].

pub mod api;
#[cfg(target_arch = "wasm32")]
pub mod guest;
pub mod model;
pub mod status;
pub mod sync;
pub mod time;

pub use lethe_guest::{Request, Response, cf};

/// One SQL value as the data-jobs logic exchanges it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A boolean (SQLite reads it back as an integer; [`Value::as_bool`] accepts both).
    Bool(bool),
    /// A 64-bit integer.
    Int(i64),
    /// Text.
    Text(String),
}

impl Value {
    /// The text, or `""` for anything else.
    pub fn text(&self) -> &str {
        match self {
            Value::Text(t) => t,
            _ => "",
        }
    }

    /// The text, or `None` for NULL and non-text values.
    pub fn opt_text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The integer, or `None`.
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// A boolean stored as `boolean` (PostgreSQL) or `0/1` (SQLite).
    pub fn as_bool(&self) -> bool {
        match self {
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            _ => false,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// Why a SQL call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlError {
    /// A named constraint rejected the write (the payload names it when the database does).
    Constraint(String),
    /// Anything else: unreachable database, outcome unknown, invalid statement.
    Failed(String),
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SqlError::Constraint(c) => write!(f, "constraint {c} rejected the write"),
            SqlError::Failed(m) => write!(f, "database error: {m}"),
        }
    }
}

/// One statement of a [`Sql::batch`].
pub type Statement = (&'static str, Vec<Value>);

/// The portable SQL the host supplies (`$1..$n` placeholders, SQLite and PostgreSQL).
pub trait Sql {
    /// Runs a read.
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError>;
    /// Runs one write; returns the rows affected.
    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, SqlError>;
    /// Runs the statements in one transaction, all or nothing.
    fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError>;
}

/// The address of one Kubernetes object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjRef<'a> {
    /// For example `batch/v1`.
    pub api_version: &'a str,
    /// For example `CronJob`.
    pub kind: &'a str,
    /// `None` for cluster-scoped kinds.
    pub namespace: Option<&'a str>,
    /// The object's name.
    pub name: &'a str,
}

/// One object as the API server returned it, with the metadata decisions are made on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KubeObject {
    /// metadata.name.
    pub name: String,
    /// metadata.uid.
    pub uid: String,
    /// metadata.resourceVersion.
    pub resource_version: String,
    /// metadata.generation (changes only with the spec).
    pub generation: Option<i64>,
    /// metadata.labels.
    pub labels: Vec<(String, String)>,
    /// metadata.annotations.
    pub annotations: Vec<(String, String)>,
    /// The whole object as JSON text.
    pub json: String,
}

impl KubeObject {
    /// The value of label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of annotation `key`.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// One page of a LIST.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Page {
    /// The objects of the page.
    pub items: Vec<KubeObject>,
    /// The token of the next page; `None` on the last one.
    pub continue_token: Option<String>,
}

/// Why a Kubernetes call failed, as the data-jobs logic decides on it.
#[derive(Debug, Clone, PartialEq)]
pub enum KubeError {
    /// 404.
    NotFound(String),
    /// 409: AlreadyExists, a stale resourceVersion or a failed precondition.
    Conflict(String),
    /// 422/400: retrying the same object cannot help.
    Invalid(String),
    /// 401.
    Unauthorized(String),
    /// 403.
    Forbidden(String),
    /// Unreachable, overloaded, 5xx after the host's retries, or timed out: try again later.
    Unavailable(String),
}

impl KubeError {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            KubeError::NotFound(m)
            | KubeError::Conflict(m)
            | KubeError::Invalid(m)
            | KubeError::Unauthorized(m)
            | KubeError::Forbidden(m)
            | KubeError::Unavailable(m) => m,
        }
    }
}

impl std::fmt::Display for KubeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            KubeError::NotFound(_) => "not found",
            KubeError::Conflict(_) => "conflict",
            KubeError::Invalid(_) => "invalid",
            KubeError::Unauthorized(_) => "unauthorized",
            KubeError::Forbidden(_) => "forbidden",
            KubeError::Unavailable(_) => "unavailable",
        };
        write!(f, "{kind}: {}", self.message())
    }
}

/// Kubernetes calls under one identity.
pub trait Kube {
    /// Reads one object.
    fn get(&self, target: ObjRef<'_>) -> Result<KubeObject, KubeError>;
    /// Lists one page of a kind in a namespace, label-selected.
    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        label_selector: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, KubeError>;
    /// Creates an object from its JSON.
    fn create(&self, json: &str) -> Result<KubeObject, KubeError>;
    /// Replaces an object; the body's resourceVersion guards the write.
    fn replace(&self, target: ObjRef<'_>, json: &str) -> Result<KubeObject, KubeError>;
    /// Deletes an object (background propagation), only if its uid is still `precondition_uid`.
    /// `Ok` when the object is gone or being deleted.
    fn delete(&self, target: ObjRef<'_>, precondition_uid: Option<&str>) -> Result<(), KubeError>;
}

/// The Kubernetes identity a client is opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity<'a> {
    /// The HTTP caller, by bearer token.
    Caller(&'a str),
    /// The host's own identity (the reconciler).
    Privileged,
}

/// Log severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Diagnostics.
    Debug,
    /// Normal operation.
    Info,
    /// Handled surprises.
    Warn,
    /// Failures.
    Error,
}

/// Everything the data-jobs logic needs from its host.
pub trait Host: Sql {
    /// Opens a Kubernetes client with `identity`.
    fn kube(&self, identity: Identity<'_>) -> Result<Box<dyn Kube + '_>, KubeError>;
    /// A configuration value (component variable), `None` when undefined.
    fn config(&self, key: &str) -> Option<String>;
    /// Wall-clock time in milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
    /// A fresh random UUID (version 4), lower-case with dashes.
    fn new_uuid(&self) -> String;
    /// Writes a log line. Never pass tokens.
    fn log(&self, level: Level, message: &str);
    /// Reports that `done` of `total` items of a pass are handled (hosts may show a progress
    /// bar); does nothing unless the host implements it.
    fn progress(&self, _done: u64, _total: u64) {}
}

/// Formats 16 random bytes as a version-4 UUID.
pub fn uuid_from_bytes(mut b: [u8; 16]) -> String {
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

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
    pub fn load(host: &dyn Host) -> Settings {
        let num = |key: &str, default: i64| {
            host.config(key)
                .and_then(|v| v.trim().parse::<i64>().ok())
                .filter(|v| *v > 0)
                .unwrap_or(default)
        };
        let text = |key: &str, default: &str| {
            host.config(key)
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
            image_registry: text("image_registry", "registry.local/data-jobs"),
            base_url: host
                .config("base_url")
                .unwrap_or_default()
                .trim()
                .trim_end_matches('/')
                .to_string(),
            instance_id: text("lethe_instance_id", "lethe"),
        }
    }
}

#[cfg(test)]
mod fake;
#[cfg(test)]
mod tests;
