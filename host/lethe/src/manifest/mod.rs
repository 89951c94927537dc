//! The application manifest: a Spin v2 `spin.toml`, plus lethe's own settings in the tables Spin
//! leaves to tools (`[application.tool.lethe]`, `[component.<id>.tool.lethe]`).
//!
//! Parsing is strict where Spin is strict (unknown keys outside `tool` tables are rejected), so a
//! manifest lethe accepts is one Spin accepts too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde::Deserialize;

use crate::host_error::ErrorFormat;

mod raw;
pub mod route;
pub mod schedule;
mod steps;
mod variables;

pub use route::{Route, RouteMatch};
pub use variables::{check_variable_name, expand_template, template_references};

use raw::RawManifest;

/// A parsed, validated manifest with paths resolved against its directory.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// The directory the manifest lives in; relative paths are resolved against it.
    pub base_dir: PathBuf,
    /// `[application].name`.
    pub name: String,
    /// `[application.tool.lethe]`.
    pub settings: AppSettings,
    /// `[variables]`: name → declaration.
    pub variables: BTreeMap<String, Variable>,
    /// `[[trigger.http]]`, in manifest order.
    pub http_triggers: Vec<HttpTrigger>,
    /// `[[trigger.cron]]`, in manifest order.
    pub cron_triggers: Vec<CronTrigger>,
    /// `[component.<id>]`, by id.
    pub components: BTreeMap<String, ComponentDecl>,
}

/// lethe's application-wide settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AppSettings {
    /// Default wall-time limit of one request or tick, in milliseconds.
    pub timeout_ms: u64,
    /// Default linear-memory limit of one instance, in MiB.
    pub memory_limit_mb: u64,
    /// Most instances alive at once (sizes the pooling allocator).
    pub max_instances: u32,
    /// Kubernetes objects (JSON files, one object or a `v1` `List`) that `lethe up` applies to
    /// the embedded cluster at start: the application's CRDs, namespaces and roles. For another
    /// cluster, apply them with `kubectl apply -f`.
    pub kubernetes_manifests: Vec<PathBuf>,
    /// `<namespace>/<name>` of the ServiceAccount the host acts as on the embedded cluster once
    /// the manifests above are applied (they bind its RBAC, `deploy/rbac.json` in lethe's own
    /// manifest): the components' privileged identity then has exactly those rights. Unset, the
    /// host uses the embedded cluster's administrator. On another cluster the host is whoever its
    /// kubeconfig or in-cluster service account says.
    pub service_account: Option<String>,
    /// How the host writes the errors it answers itself, where no component answers (an unknown
    /// route, a request over the limits, a busy or failed component): `plain` (the default) or
    /// `cf`, for an application that speaks the Cloud Foundry V3 API, so that its clients get
    /// the envelope they parse everywhere.
    pub error_format: ErrorFormat,
    /// Requests per second one caller may sustain on the HTTP routes (see
    /// [`FairnessSettings`]).
    pub caller_qps: f64,
    /// Requests one caller may send at once after a quiet spell.
    pub caller_burst: u32,
    /// Instances one caller may hold at once; unset, a quarter of `max_instances`.
    pub caller_concurrency: Option<u32>,
    /// How long a request over its caller's share waits for it before the `429`, in
    /// milliseconds.
    pub caller_queue_ms: u64,
}

/// Each caller's share of the host's HTTP routes, from [`AppSettings`]: a token bucket
/// (`caller_qps`, `caller_burst`), the instances it may hold at once, and how long a request over
/// its share waits for it before it is refused.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FairnessSettings {
    /// Requests per second one caller may sustain.
    pub caller_qps: f64,
    /// Requests one caller may send at once after a quiet spell.
    pub caller_burst: u32,
    /// Instances one caller may hold at once.
    pub caller_concurrency: u32,
    /// How long a request waits for its caller's share, in milliseconds.
    pub caller_queue_ms: u64,
}

impl AppSettings {
    /// Each caller's share of the HTTP routes.
    pub fn fairness(&self) -> FairnessSettings {
        FairnessSettings {
            caller_qps: self.caller_qps,
            caller_burst: self.caller_burst,
            caller_concurrency: self
                .caller_concurrency
                .unwrap_or((self.max_instances / 4).max(1)),
            caller_queue_ms: self.caller_queue_ms,
        }
    }

    /// The namespace and name of [`AppSettings::service_account`].
    pub fn service_account(&self) -> Option<(&str, &str)> {
        self.service_account.as_deref()?.split_once('/')
    }
}

impl Default for AppSettings {
    fn default() -> Self {
        AppSettings {
            timeout_ms: 30_000,
            memory_limit_mb: 64,
            max_instances: 128,
            kubernetes_manifests: Vec::new(),
            service_account: None,
            error_format: ErrorFormat::Plain,
            caller_qps: 200.0,
            caller_burst: 400,
            caller_concurrency: None,
            caller_queue_ms: 1000,
        }
    }
}

/// An application variable (Spin's `[variables]`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Variable {
    /// The value used when nothing overrides it.
    pub default: Option<String>,
    /// Whether a value must be supplied at start.
    #[serde(default)]
    pub required: bool,
    /// Whether the value is a secret (never logged).
    #[serde(default)]
    pub secret: bool,
    /// Free text.
    pub description: Option<String>,
}

/// One `[[trigger.http]]`.
#[derive(Debug, Clone)]
pub struct HttpTrigger {
    /// The route in Spin syntax (`/exact`, `/:param`, `/prefix/...`).
    pub route: Route,
    /// The component serving it.
    pub component: String,
}

/// One `[[trigger.cron]]`.
#[derive(Debug, Clone)]
pub struct CronTrigger {
    /// Six fields, seconds first, UTC, as written.
    pub cron_expression: String,
    /// The parsed expression.
    pub schedule: cron::Schedule,
    /// The component to call.
    pub component: String,
}

/// One `[component.<id>]`.
#[derive(Debug, Clone)]
pub struct ComponentDecl {
    /// The component id.
    pub id: String,
    /// Absolute path of the `.wasm`.
    pub source: PathBuf,
    /// `[component.<id>.variables]`: name → template (may reference `{{ app_variable }}`).
    pub variables: BTreeMap<String, String>,
    /// `[component.<id>.tool.lethe]`.
    pub grants: Grants,
    /// The label of the one database its `sql` calls reach (`sqlite_databases`, else
    /// [`DEFAULT_DATABASE`]); `None` when it is not granted `sql`. Components that list the
    /// same label share a database; no component reaches another label's.
    pub database: Option<String>,
    /// `[component.<id>.build]`, if any.
    pub build: Option<Build>,
    /// The local file its `lethe:platform` dependency names (the Spin adapter that `spin up`
    /// composes in; lethe itself ignores it), resolved against `base_dir`.
    pub platform_adapter: Option<PathBuf>,
}

/// `[component.<id>.build]`: how `lethe build` (and `spin build`) makes the component's source.
#[derive(Debug, Clone, PartialEq)]
pub struct Build {
    /// The commands, run in order, each by the shell (`command`: one string, or a list).
    pub commands: Vec<String>,
    /// Where they run: `workdir` against the manifest's directory, which is the default.
    pub workdir: PathBuf,
    /// Globs, relative to `workdir`, of the files the build reads (`watch`).
    pub watch: Vec<String>,
}

impl Build {
    /// Reads a `[component.<id>.build]` table; paths resolve against `base_dir`.
    fn parse(id: &str, table: &toml::Table, base_dir: &Path) -> anyhow::Result<Build> {
        let strings = |key: &str, value: &toml::Value| -> anyhow::Result<Vec<String>> {
            let items = match value {
                toml::Value::String(s) => vec![s.clone()],
                toml::Value::Array(items) => items
                    .iter()
                    .map(|i| i.as_str().map(str::to_string))
                    .collect::<Option<_>>()
                    .with_context(|| format!("[component.{id}.build] {key} must be strings"))?,
                _ => bail!("[component.{id}.build] {key} must be a string or a list of strings"),
            };
            Ok(items)
        };
        let commands = match table.get("command") {
            Some(v) => strings("command", v)?,
            None => bail!("[component.{id}.build] has no `command`"),
        };
        if commands.is_empty() || commands.iter().any(|c| c.trim().is_empty()) {
            bail!("[component.{id}.build] has an empty `command`");
        }
        let workdir = match table.get("workdir") {
            Some(toml::Value::String(w)) => base_dir.join(w),
            Some(_) => bail!("[component.{id}.build] workdir must be a string"),
            None => base_dir.to_path_buf(),
        };
        let watch = match table.get("watch") {
            Some(v) => strings("watch", v)?,
            None => Vec::new(),
        };
        Ok(Build {
            commands,
            workdir,
            watch,
        })
    }
}

/// What a component may do: `[component.<id>.tool.lethe]`.
#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Grants {
    /// The lethe capability interfaces it may import: any of `kube`, `sql`, `log`, `config`.
    pub capabilities: Vec<Capability>,
    /// The identities its Kubernetes clients may use: `caller`, `privileged`.
    pub kube_identities: Vec<KubeIdentityGrant>,
    /// Overrides the application's `timeout_ms`.
    pub timeout_ms: Option<u64>,
    /// Overrides the application's `memory_limit_mb`.
    pub memory_limit_mb: Option<u64>,
    /// A directory of `NNNN_name.sql` migrations the host applies before serving, relative to
    /// the manifest.
    pub migrations: Option<PathBuf>,
    /// The client-side rate limit of its Kubernetes calls, per identity: calls per second
    /// (client-go's default, 5, when unset).
    pub kube_qps: Option<f64>,
    /// The burst of that rate limit (client-go's default, 10, when unset).
    pub kube_burst: Option<u32>,
    /// `<namespace>/<name>` of the ServiceAccount its privileged Kubernetes calls act as (the host
    /// impersonates it); unset, `lethe-<id>` in the namespace of the application's
    /// `service_account` (else `lethe-system`). See [`Manifest::component_account`].
    pub service_account: Option<String>,
    /// Kubernetes objects of its own (its ServiceAccount and the RBAC that account gets),
    /// applied to the embedded cluster after the application's `kubernetes_manifests`; relative
    /// to the manifest. See [`Manifest::kubernetes_manifests`].
    pub kubernetes_manifests: Vec<PathBuf>,
    /// More objects of its own, applied to the embedded cluster only while one of its variables
    /// has a given value: the rights a preset needs (`job_types = "korifi"` and its reads).
    pub kubernetes_manifests_when: Vec<ManifestsWhen>,
}

/// `[[component.<id>.tool.lethe.kubernetes_manifests_when]]`: `files`, applied when the
/// component's variable `variable` resolves to `equals`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ManifestsWhen {
    /// One of the component's variables.
    pub variable: String,
    /// The value that calls for the files.
    pub equals: String,
    /// JSON or YAML files of Kubernetes objects, relative to the manifest.
    pub files: Vec<PathBuf>,
}

/// A lethe capability interface.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Capability {
    /// `lethe:platform/kube`.
    Kube,
    /// `lethe:platform/sql`.
    Sql,
    /// `lethe:platform/log`.
    Log,
    /// `lethe:platform/config`.
    Config,
}

impl Capability {
    /// The WIT interface name, without package or version.
    pub fn interface(self) -> &'static str {
        match self {
            Capability::Kube => "kube",
            Capability::Sql => "sql",
            Capability::Log => "log",
            Capability::Config => "config",
        }
    }

    /// The capability whose WIT interface is `name`.
    pub fn from_interface(name: &str) -> Option<Self> {
        [
            Capability::Kube,
            Capability::Sql,
            Capability::Log,
            Capability::Config,
        ]
        .into_iter()
        .find(|c| c.interface() == name)
    }
}

/// A Kubernetes identity a component may use.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum KubeIdentityGrant {
    /// As the HTTP caller, with their bearer token.
    Caller,
    /// As the host's own identity.
    Privileged,
}

impl Grants {
    /// Whether `capability` is granted.
    pub fn allows(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    /// Whether Kubernetes calls as `identity` are granted.
    pub fn allows_identity(&self, identity: KubeIdentityGrant) -> bool {
        self.allows(Capability::Kube) && self.kube_identities.contains(&identity)
    }

    /// The rate limit of its Kubernetes calls: `kube_qps` and `kube_burst`, client-go's
    /// defaults where unset.
    pub fn kube_rate_limit(&self) -> lethe_kube::RateLimitOptions {
        let defaults = lethe_kube::RateLimitOptions::default();
        lethe_kube::RateLimitOptions {
            qps: self.kube_qps.unwrap_or(defaults.qps),
            burst: self.kube_burst.unwrap_or(defaults.burst),
        }
    }
}

impl Manifest {
    /// Each database label any component reaches, with the components that reach it (in id
    /// order).
    pub fn database_labels(&self) -> BTreeMap<String, Vec<String>> {
        let mut labels: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (id, decl) in &self.components {
            if let Some(label) = &decl.database {
                labels.entry(label.clone()).or_default().push(id.clone());
            }
        }
        labels
    }

    /// The ServiceAccount (namespace, name) whose rights component `id`'s privileged
    /// Kubernetes calls have: its `service_account`, else `lethe-<id>` in the namespace of the
    /// application's `service_account`, else in `lethe-system`. `None` for a component not
    /// granted the privileged identity.
    pub fn component_account(&self, id: &str) -> Option<(String, String)> {
        let decl = self.components.get(id)?;
        if !decl.grants.allows_identity(KubeIdentityGrant::Privileged) {
            return None;
        }
        if let Some((namespace, name)) = decl
            .grants
            .service_account
            .as_deref()
            .and_then(|a| a.split_once('/'))
        {
            return Some((namespace.to_string(), name.to_string()));
        }
        let namespace = self
            .settings
            .service_account()
            .map_or(DEFAULT_ACCOUNT_NAMESPACE, |(namespace, _)| namespace);
        Some((namespace.to_string(), format!("lethe-{id}")))
    }

    /// Every Kubernetes object file to apply before lethe runs: the application's
    /// `kubernetes_manifests`, then each component's, in the order of the component ids.
    pub fn kubernetes_manifests(&self) -> Vec<PathBuf> {
        let mut files = self.settings.kubernetes_manifests.clone();
        for decl in self.components.values() {
            for file in &decl.grants.kubernetes_manifests {
                if !files.contains(file) {
                    files.push(file.clone());
                }
            }
        }
        files
    }
}

/// The namespace of the components' ServiceAccounts when the application names no
/// `service_account` of its own: the one `deploy/` runs lethe in.
pub const DEFAULT_ACCOUNT_NAMESPACE: &str = "lethe-system";

/// The database label of a component granted `sql` that lists no `sqlite_databases`: the one
/// every Spin application may grant.
pub const DEFAULT_DATABASE: &str = "default";

/// The component variable that tells the Spin adapter which database label to open (Spin gives
/// a composed dependency its component's variables, not its grants); lethe checks it against
/// `sqlite_databases`.
pub const DATABASE_VARIABLE: &str = "sqlite_database";

/// Reads and validates the manifest at `path`.
pub fn load(path: &Path) -> anyhow::Result<Manifest> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read manifest {}", path.display()))?;
    // `spin.toml` has the parent `""`, which names no directory to run a build in.
    let base_dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    parse(&text, &base_dir).with_context(|| format!("invalid manifest {}", path.display()))
}

/// Parses manifest text, resolving relative paths against `base_dir`: the version, lethe's
/// application settings, the variables, each component with its grants, then the triggers that
/// name them.
pub fn parse(text: &str, base_dir: &Path) -> anyhow::Result<Manifest> {
    let raw: RawManifest = toml::from_str(text)?;
    if raw.spin_manifest_version != 2 {
        bail!(
            "spin_manifest_version must be 2, found {}",
            raw.spin_manifest_version
        );
    }
    let settings = steps::settings(&raw.application, base_dir)?;
    for name in raw.variables.keys() {
        check_variable_name(name)?;
    }
    let mut components = BTreeMap::new();
    for (id, c) in raw.component {
        let decl = steps::component(id, c, &raw.variables, base_dir)?;
        components.insert(decl.id.clone(), decl);
    }
    let (http_triggers, cron_triggers) = steps::triggers(raw.trigger, &components)?;
    Ok(Manifest {
        base_dir: base_dir.to_path_buf(),
        name: raw.application.name,
        settings,
        variables: raw.variables,
        http_triggers,
        cron_triggers,
        components,
    })
}

#[cfg(test)]
mod tests;
