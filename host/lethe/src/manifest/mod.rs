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

pub mod route;
pub mod schedule;

pub use route::{Route, RouteMatch};

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
    /// `[component.<id>.build]`, if any.
    pub build: Option<Build>,
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

// ---- raw TOML shapes ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    spin_manifest_version: i64,
    application: RawApplication,
    #[serde(default)]
    variables: BTreeMap<String, Variable>,
    #[serde(default)]
    trigger: BTreeMap<String, Vec<toml::Table>>,
    #[serde(default)]
    component: BTreeMap<String, RawComponent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawApplication {
    name: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    authors: Vec<String>,
    #[serde(default)]
    targets: Vec<String>,
    #[serde(default)]
    trigger: Option<toml::Table>,
    #[serde(default)]
    tool: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawComponent {
    source: RawSource,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    variables: BTreeMap<String, String>,
    #[serde(default)]
    environment: BTreeMap<String, String>,
    #[serde(default)]
    files: Vec<toml::Value>,
    #[serde(default)]
    exclude_files: Vec<String>,
    #[serde(default)]
    allowed_http_hosts: Vec<String>,
    #[serde(default)]
    allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    key_value_stores: Vec<String>,
    #[serde(default)]
    sqlite_databases: Vec<String>,
    #[serde(default)]
    ai_models: Vec<String>,
    #[serde(default)]
    build: Option<toml::Table>,
    #[serde(default)]
    dependencies_inherit_configuration: bool,
    #[serde(default)]
    dependencies: Option<toml::Table>,
    #[serde(default)]
    tool: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawSource {
    Path(String),
    Remote(serde::de::IgnoredAny),
}

/// Whether component `id` declares the Spin dependency that supplies `lethe:platform` (the
/// `spin-adapter` component, for `spin up`). Any other dependency is refused: lethe composes
/// nothing at load time.
fn platform_dependency(id: &str, dependencies: Option<&toml::Table>) -> anyhow::Result<bool> {
    let Some(dependencies) = dependencies else {
        return Ok(false);
    };
    for key in dependencies.keys() {
        let package = key.split('@').next().unwrap_or(key);
        if package != "lethe:platform" && !package.starts_with("lethe:platform/") {
            bail!(
                "component `{id}`: dependency `{key}` is not supported by lethe, which composes no components at load time (only `lethe:platform` dependencies, which lethe supplies itself, are allowed)"
            );
        }
    }
    Ok(!dependencies.is_empty())
}

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

/// Parses manifest text, resolving relative paths against `base_dir`.
pub fn parse(text: &str, base_dir: &Path) -> anyhow::Result<Manifest> {
    let raw: RawManifest = toml::from_str(text)?;
    if raw.spin_manifest_version != 2 {
        bail!(
            "spin_manifest_version must be 2, found {}",
            raw.spin_manifest_version
        );
    }
    let _ = (
        &raw.application.version,
        &raw.application.description,
        &raw.application.authors,
    );
    let _ = (&raw.application.targets, &raw.application.trigger);
    let mut settings: AppSettings = match raw.application.tool.get("lethe") {
        Some(v) => v
            .clone()
            .try_into()
            .context("in [application.tool.lethe]")?,
        None => AppSettings::default(),
    };
    for path in &mut settings.kubernetes_manifests {
        *path = base_dir.join(&path);
    }
    if let Some(account) = &settings.service_account {
        let dns_label = |s: &str| {
            !s.is_empty()
                && s.len() <= 63
                && s.bytes()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        };
        match account.split_once('/') {
            Some((ns, name)) if dns_label(ns) && dns_label(name) => {}
            _ => bail!(
                "[application.tool.lethe] service_account must be `<namespace>/<name>`, got `{account}`"
            ),
        }
    }
    for name in raw.variables.keys() {
        check_variable_name(name)?;
    }

    let mut components = BTreeMap::new();
    for (id, c) in raw.component {
        check_component_id(&id)?;
        let source = match c.source {
            RawSource::Path(p) => base_dir.join(p),
            RawSource::Remote(_) => bail!(
                "component `{id}`: only local file sources are supported by lethe (`source = \"path/to.wasm\"`)"
            ),
        };
        // On Spin, the adapter that a `lethe:platform` dependency names needs outbound access to
        // the cluster and the `default` database; lethe supplies those interfaces itself, so it
        // ignores the dependency and the grants made for it.
        let adapted = platform_dependency(&id, c.dependencies.as_ref())?;
        let adapter_grants = adapted && c.sqlite_databases.iter().all(|d| d == "default");
        if !adapter_grants
            && (!c.allowed_outbound_hosts.is_empty() || !c.allowed_http_hosts.is_empty())
        {
            bail!("component `{id}`: outbound network access is not supported by lethe");
        }
        if !c.key_value_stores.is_empty()
            || (!adapter_grants && !c.sqlite_databases.is_empty())
            || !c.ai_models.is_empty()
        {
            bail!(
                "component `{id}`: Spin key-value, sqlite and AI capabilities are not supplied by lethe; grant lethe's `sql` capability in [component.{id}.tool.lethe] instead"
            );
        }
        let _ = (&c.description, &c.environment, &c.files, &c.exclude_files);
        let build = c
            .build
            .as_ref()
            .map(|table| Build::parse(&id, table, base_dir))
            .transpose()?;
        let _ = &c.dependencies_inherit_configuration;
        for (name, template) in &c.variables {
            check_variable_name(name)?;
            for reference in template_references(template)? {
                if !raw.variables.contains_key(&reference) {
                    bail!(
                        "component `{id}`: variable `{name}` refers to undeclared application variable `{reference}`"
                    );
                }
            }
        }
        let mut grants: Grants = match c.tool.get("lethe") {
            Some(v) => v
                .clone()
                .try_into()
                .with_context(|| format!("in [component.{id}.tool.lethe]"))?,
            None => Grants::default(),
        };
        if !grants.kube_identities.is_empty() && !grants.allows(Capability::Kube) {
            bail!("component `{id}`: kube_identities are granted but the `kube` capability is not");
        }
        lethe_kube::RateLimit::new(grants.kube_rate_limit())
            .with_context(|| format!("in [component.{id}.tool.lethe]"))?;
        if let Some(m) = grants.migrations.take() {
            grants.migrations = Some(base_dir.join(m));
        }
        components.insert(
            id.clone(),
            ComponentDecl {
                id,
                source,
                variables: c.variables,
                grants,
                build,
            },
        );
    }

    let mut http_triggers = Vec::new();
    let mut cron_triggers = Vec::new();
    for (kind, triggers) in raw.trigger {
        for t in triggers {
            let component = trigger_component(&kind, &t, &components)?;
            match kind.as_str() {
                "http" => {
                    let route = match t.get("route") {
                        Some(toml::Value::String(r)) => r.clone(),
                        Some(toml::Value::Table(r))
                            if r.get("private") == Some(&toml::Value::Boolean(true)) =>
                        {
                            continue;
                        }
                        _ => bail!("[[trigger.http]] for `{component}` needs a `route` string"),
                    };
                    for key in t.keys() {
                        if !["route", "component", "executor", "id"].contains(&key.as_str()) {
                            bail!("[[trigger.http]] for `{component}`: unknown key `{key}`");
                        }
                    }
                    let route = Route::parse(&route)
                        .with_context(|| format!("[[trigger.http]] for `{component}`"))?;
                    http_triggers.push(HttpTrigger { route, component });
                }
                "cron" => {
                    let Some(toml::Value::String(expr)) = t.get("cron_expression") else {
                        bail!(
                            "[[trigger.cron]] for `{component}` needs a `cron_expression` string"
                        );
                    };
                    for key in t.keys() {
                        if !["cron_expression", "component", "id"].contains(&key.as_str()) {
                            bail!("[[trigger.cron]] for `{component}`: unknown key `{key}`");
                        }
                    }
                    let schedule = schedule::parse(expr)
                        .with_context(|| format!("[[trigger.cron]] for `{component}`"))?;
                    cron_triggers.push(CronTrigger {
                        cron_expression: expr.clone(),
                        schedule,
                        component,
                    });
                }
                other => bail!(
                    "trigger type `{other}` is not supported (lethe serves `http` and `cron`)"
                ),
            }
        }
    }

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

fn trigger_component(
    kind: &str,
    t: &toml::Table,
    components: &BTreeMap<String, ComponentDecl>,
) -> anyhow::Result<String> {
    match t.get("component") {
        Some(toml::Value::String(id)) if components.contains_key(id) => Ok(id.clone()),
        Some(toml::Value::String(id)) => bail!("[[trigger.{kind}]] names unknown component `{id}`"),
        Some(_) => bail!(
            "[[trigger.{kind}]]: inline components are not supported; name a [component.<id>]"
        ),
        None => bail!("[[trigger.{kind}]] needs a `component`"),
    }
}

/// Spin's rule for variable names: lower-case ASCII letters, digits and `_`, starting with a letter.
pub fn check_variable_name(name: &str) -> anyhow::Result<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok {
        bail!(
            "invalid variable name `{name}`: use lower-case letters, digits and `_`, starting with a letter"
        );
    }
    Ok(())
}

fn check_component_id(id: &str) -> anyhow::Result<()> {
    let ok = id.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && id
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok {
        bail!("invalid component id `{id}`: use lower-case letters, digits and `-`");
    }
    Ok(())
}

/// The application variables a `{{ name }}` template refers to.
pub fn template_references(template: &str) -> anyhow::Result<Vec<String>> {
    let mut refs = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            bail!("unterminated `{{{{` in `{template}`");
        };
        let name = after[..end].trim().to_string();
        check_variable_name(&name)?;
        refs.push(name);
        rest = &after[end + 2..];
    }
    Ok(refs)
}

/// Expands `{{ name }}` references in `template` with `lookup`.
pub fn expand_template(
    template: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .with_context(|| format!("unterminated `{{{{` in `{template}`"))?;
        let name = after[..end].trim();
        out.push_str(&lookup(name).with_context(|| format!("variable `{name}` has no value"))?);
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
spin_manifest_version = 2

[application]
name = "demo"

[application.tool.lethe]
timeout_ms = 1000

[variables]
greeting = { default = "hi" }
token = { required = true, secret = true }

[[trigger.http]]
route = "/smoke/..."
component = "smoke"

[[trigger.cron]]
cron_expression = "*/5 * * * * *"
component = "smoke"

[component.smoke]
source = "smoke.wasm"
variables = { greeting = "{{ greeting }}!" }

[component.smoke.tool.lethe]
capabilities = ["sql", "log", "config"]
migrations = "migrations"
"#;

    #[test]
    fn parses_triggers_components_grants_and_settings() {
        let m = parse(GOOD, Path::new("/app")).expect("valid manifest");
        assert_eq!(m.name, "demo");
        assert_eq!(m.settings.timeout_ms, 1000);
        assert_eq!(m.settings.memory_limit_mb, 64);
        assert_eq!(m.http_triggers[0].route.as_str(), "/smoke/...");
        assert_eq!(m.cron_triggers[0].cron_expression, "*/5 * * * * *");
        let smoke = &m.components["smoke"];
        assert_eq!(smoke.source, Path::new("/app/smoke.wasm"));
        assert!(smoke.grants.allows(Capability::Sql));
        assert!(!smoke.grants.allows(Capability::Kube));
        assert_eq!(
            smoke.grants.migrations.as_deref(),
            Some(Path::new("/app/migrations"))
        );
        assert!(m.variables["token"].required);
    }

    #[test]
    fn the_host_error_format_is_plain_unless_the_application_chooses_cf() {
        let m = parse(GOOD, Path::new("/app")).expect("valid manifest");
        assert_eq!(m.settings.error_format, ErrorFormat::Plain);
        let cf = GOOD.replace(
            "timeout_ms = 1000",
            "timeout_ms = 1000\nerror_format = \"cf\"",
        );
        let m = parse(&cf, Path::new("/app")).expect("valid manifest");
        assert_eq!(m.settings.error_format, ErrorFormat::Cf);
        let bad = GOOD.replace(
            "timeout_ms = 1000",
            "timeout_ms = 1000\nerror_format = \"xml\"",
        );
        let err = format!(
            "{:#}",
            parse(&bad, Path::new("/")).expect_err("unknown format")
        );
        assert!(err.contains("xml"), "{err}");
    }

    #[test]
    fn ignores_the_spin_adapter_dependency_and_the_grants_made_for_it() {
        let spin = GOOD.replace(
            "[component.smoke.tool.lethe]",
            "[component.smoke.dependencies]\n\"lethe:platform@0.1.0\" = { path = \"spin_adapter.wasm\" }\n\n[component.smoke.tool.lethe]",
        );
        let with_grants = spin.replace(
            "variables = { greeting = \"{{ greeting }}!\" }",
            "variables = { greeting = \"{{ greeting }}!\" }\nsqlite_databases = [\"default\"]\nallowed_outbound_hosts = [\"{{ greeting }}\"]\ndependencies_inherit_configuration = true",
        );
        let m =
            parse(&with_grants, Path::new("/app")).expect("the one manifest for Spin and lethe");
        assert!(m.components["smoke"].grants.allows(Capability::Sql));
        // Without the dependency those grants would be the component's own: refused.
        let own = with_grants.replace("\"lethe:platform@0.1.0\"", "\"acme:cache@1.0.0\"");
        let err = parse(&own, Path::new("/")).expect_err("a dependency lethe cannot supply");
        assert!(format!("{err:#}").contains("acme:cache@1.0.0"), "{err:#}");
        let no_dependency = GOOD.replace(
            "variables = { greeting = \"{{ greeting }}!\" }",
            "variables = { greeting = \"{{ greeting }}!\" }\nsqlite_databases = [\"default\"]",
        );
        assert!(parse(&no_dependency, Path::new("/")).is_err());
        let other_database = with_grants.replace("[\"default\"]", "[\"other\"]");
        assert!(parse(&other_database, Path::new("/")).is_err());
    }

    #[test]
    fn rejects_unknown_keys_like_spin() {
        let bad = GOOD.replace(
            "[application.tool.lethe]",
            "[application.tool.lethe]\nbogus = 1",
        );
        assert!(parse(&bad, Path::new("/")).is_err());
        let bad = GOOD.replace("name = \"demo\"", "name = \"demo\"\ngrants = []");
        assert!(parse(&bad, Path::new("/")).is_err());
    }

    #[test]
    fn rejects_unknown_trigger_component_and_bad_cron() {
        let bad = GOOD.replace(
            "component = \"smoke\"\n\n[[trigger.cron]]",
            "component = \"nope\"\n\n[[trigger.cron]]",
        );
        let err = format!(
            "{:#}",
            parse(&bad, Path::new("/")).expect_err("unknown component")
        );
        assert!(err.contains("unknown component `nope`"), "{err}");
        let bad = GOOD.replace("*/5 * * * * *", "* * * * *");
        assert!(
            parse(&bad, Path::new("/")).is_err(),
            "5-field cron must be rejected"
        );
    }

    #[test]
    fn rejects_undeclared_variable_reference() {
        let bad = GOOD.replace("{{ greeting }}!", "{{ missing }}");
        let err = format!("{:#}", parse(&bad, Path::new("/")).expect_err("undeclared"));
        assert!(err.contains("missing"), "{err}");
    }

    #[test]
    fn rejects_identity_grant_without_kube() {
        let bad = GOOD.replace(
            "migrations = \"migrations\"",
            "kube_identities = [\"privileged\"]",
        );
        assert!(parse(&bad, Path::new("/")).is_err());
    }

    #[test]
    fn the_kube_rate_limit_defaults_to_client_go_and_rejects_what_cannot_limit() {
        let m = parse(GOOD, Path::new("/")).expect("good");
        let smoke = &m.components["smoke"].grants;
        assert_eq!(
            smoke.kube_rate_limit(),
            lethe_kube::RateLimitOptions::default()
        );
        let set = GOOD.replace(
            "migrations = \"migrations\"",
            "kube_qps = 0.5\nkube_burst = 3",
        );
        let m = parse(&set, Path::new("/")).expect("set");
        assert_eq!(
            m.components["smoke"].grants.kube_rate_limit(),
            lethe_kube::RateLimitOptions { qps: 0.5, burst: 3 }
        );
        for bad in ["kube_qps = 0", "kube_qps = -2", "kube_burst = 0"] {
            let bad = GOOD.replace("migrations = \"migrations\"", bad);
            let err = format!("{:#}", parse(&bad, Path::new("/")).expect_err(&bad));
            assert!(
                err.contains("[component.smoke.tool.lethe]") && err.contains("kube_"),
                "{err}"
            );
        }
    }

    #[test]
    fn expands_templates() {
        let v = expand_template("a{{ x }}b{{y}}", |n| Some(n.to_uppercase())).expect("expand");
        assert_eq!(v, "aXbY");
        assert!(expand_template("{{ x", |_| Some(String::new())).is_err());
        assert!(expand_template("{{ x }}", |_| None).is_err());
    }
}
