//! The steps of [`parse`](super::parse), each one part of the manifest: lethe's application
//! settings, one component and its grants, and the triggers.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

use super::raw::{RawApplication, RawComponent, RawSource};
use super::{
    AppSettings, Build, Capability, ComponentDecl, CronTrigger, DATABASE_VARIABLE,
    DEFAULT_DATABASE, Grants, HttpTrigger, Route, Variable, check_variable_name, schedule,
    template_references,
};

/// `[application.tool.lethe]`, with its paths resolved against `base_dir` and its service
/// account checked. (Spin's own application keys are accepted and not used.)
pub(super) fn settings(app: &RawApplication, base_dir: &Path) -> anyhow::Result<AppSettings> {
    let _ = (&app.version, &app.description, &app.authors);
    let _ = (&app.targets, &app.trigger);
    let mut settings: AppSettings = match app.tool.get("lethe") {
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
        check_account(account).context("in [application.tool.lethe]")?;
    }
    Ok(settings)
}

/// `Err` unless `account` is `<namespace>/<name>`, each a DNS label.
fn check_account(account: &str) -> anyhow::Result<()> {
    let dns_label = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
    };
    match account.split_once('/') {
        Some((ns, name)) if dns_label(ns) && dns_label(name) => Ok(()),
        _ => bail!("service_account must be `<namespace>/<name>`, got `{account}`"),
    }
}

/// Component `id`: a local source, no Spin capability lethe does not supply, variables that refer
/// to declared application `variables`, and its grants in `[component.<id>.tool.lethe]`.
pub(super) fn component(
    id: String,
    c: RawComponent,
    variables: &BTreeMap<String, Variable>,
    base_dir: &Path,
) -> anyhow::Result<ComponentDecl> {
    check_component_id(&id)?;
    let source = match &c.source {
        RawSource::Path(p) => base_dir.join(p),
        RawSource::Remote(_) => bail!(
            "component `{id}`: only local file sources are supported by lethe (`source = \"path/to.wasm\"`)"
        ),
    };
    // On Spin, the adapter that a `lethe:platform` dependency names needs outbound access to
    // the cluster; lethe supplies that interface itself, so it ignores the dependency and the
    // hosts granted for it.
    let platform_adapter = platform_dependency(&id, c.dependencies.as_ref())?;
    if platform_adapter.is_none()
        && (!c.allowed_outbound_hosts.is_empty() || !c.allowed_http_hosts.is_empty())
    {
        bail!("component `{id}`: outbound network access is not supported by lethe");
    }
    if !c.key_value_stores.is_empty() || !c.ai_models.is_empty() {
        bail!("component `{id}`: Spin key-value and AI capabilities are not supplied by lethe");
    }
    let _ = (&c.description, &c.environment, &c.files, &c.exclude_files);
    let _ = &c.dependencies_inherit_configuration;
    let build = c
        .build
        .as_ref()
        .map(|table| Build::parse(&id, table, base_dir))
        .transpose()?;
    for (name, template) in &c.variables {
        check_variable_name(name)?;
        for reference in template_references(template)? {
            if !variables.contains_key(&reference) {
                bail!(
                    "component `{id}`: variable `{name}` refers to undeclared application variable `{reference}`"
                );
            }
        }
    }
    let grants = grants(&id, &c, base_dir)?;
    let database = database_label(&id, &c, &grants)?;
    Ok(ComponentDecl {
        id,
        source,
        variables: c.variables,
        grants,
        database,
        build,
        platform_adapter: platform_adapter
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| base_dir.join(p)),
    })
}

/// The database label component `id`'s `sql` calls reach: the one its `sqlite_databases` lists,
/// else `default` (the database every Spin application may grant). lethe's `sql` interface
/// addresses one database, so a component lists at most one label, and only with the `sql`
/// capability. The Spin adapter opens the label its `sqlite_database` variable names, so when
/// that variable is set it must be the same label.
fn database_label(id: &str, c: &RawComponent, grants: &Grants) -> anyhow::Result<Option<String>> {
    let label = match c.sqlite_databases.as_slice() {
        [] => DEFAULT_DATABASE.to_owned(),
        [label] => label.clone(),
        _ => bail!(
            "component `{id}`: sqlite_databases lists {} labels, but lethe's `sql` interface reaches one database per component; list one (components that share data list the same label)",
            c.sqlite_databases.len()
        ),
    };
    lethe_sql::check_label(&label).map_err(|why| anyhow::anyhow!("component `{id}`: {why}"))?;
    if !grants.allows(Capability::Sql) {
        if !c.sqlite_databases.is_empty() {
            bail!(
                "component `{id}`: sqlite_databases lists `{label}` but the `sql` capability is not granted in [component.{id}.tool.lethe]"
            );
        }
        return Ok(None);
    }
    if let Some(named) = c.variables.get(DATABASE_VARIABLE)
        && named != &label
    {
        bail!(
            "component `{id}`: its variable `{DATABASE_VARIABLE}` (the label the Spin adapter opens) is `{named}`, but sqlite_databases grants `{label}`"
        );
    }
    Ok(Some(label))
}

/// Component `id`'s grants, checked: identities only with the `kube` capability, a valid rate
/// limit, and its migrations directory resolved against `base_dir`.
fn grants(id: &str, c: &RawComponent, base_dir: &Path) -> anyhow::Result<Grants> {
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
    if let Some(account) = &grants.service_account {
        check_account(account).with_context(|| format!("in [component.{id}.tool.lethe]"))?;
        if !grants.allows_identity(crate::manifest::KubeIdentityGrant::Privileged) {
            bail!(
                "component `{id}`: a service_account is named but the privileged identity is not granted"
            );
        }
    }
    for path in &mut grants.kubernetes_manifests {
        *path = base_dir.join(&*path);
    }
    for when in &mut grants.kubernetes_manifests_when {
        if !c.variables.contains_key(&when.variable) {
            bail!(
                "component `{id}`: kubernetes_manifests_when names `{}`, which is not one of its variables",
                when.variable
            );
        }
        for path in &mut when.files {
            *path = base_dir.join(&*path);
        }
    }
    Ok(grants)
}

/// The HTTP and cron triggers, each naming a declared component. (Private HTTP routes, which
/// only other components call, are not served.)
pub(super) fn triggers(
    raw: BTreeMap<String, Vec<toml::Table>>,
    components: &BTreeMap<String, ComponentDecl>,
) -> anyhow::Result<(Vec<HttpTrigger>, Vec<CronTrigger>)> {
    let mut http_triggers = Vec::new();
    let mut cron_triggers = Vec::new();
    for (kind, triggers) in raw {
        for t in triggers {
            let component = trigger_component(&kind, &t, components)?;
            match kind.as_str() {
                "http" => http_triggers.extend(http_trigger(&t, component)?),
                "cron" => cron_triggers.push(cron_trigger(&t, component)?),
                other => bail!(
                    "trigger type `{other}` is not supported (lethe serves `http` and `cron`)"
                ),
            }
        }
    }
    Ok((http_triggers, cron_triggers))
}

/// One `[[trigger.http]]`: its route, or nothing for a private one.
fn http_trigger(t: &toml::Table, component: String) -> anyhow::Result<Option<HttpTrigger>> {
    let route = match t.get("route") {
        Some(toml::Value::String(r)) => r.clone(),
        Some(toml::Value::Table(r)) if r.get("private") == Some(&toml::Value::Boolean(true)) => {
            return Ok(None);
        }
        _ => bail!("[[trigger.http]] for `{component}` needs a `route` string"),
    };
    for key in t.keys() {
        if !["route", "component", "executor", "id"].contains(&key.as_str()) {
            bail!("[[trigger.http]] for `{component}`: unknown key `{key}`");
        }
    }
    let route =
        Route::parse(&route).with_context(|| format!("[[trigger.http]] for `{component}`"))?;
    Ok(Some(HttpTrigger { route, component }))
}

/// One `[[trigger.cron]]`: its schedule.
fn cron_trigger(t: &toml::Table, component: String) -> anyhow::Result<CronTrigger> {
    let Some(toml::Value::String(expr)) = t.get("cron_expression") else {
        bail!("[[trigger.cron]] for `{component}` needs a `cron_expression` string");
    };
    for key in t.keys() {
        if !["cron_expression", "component", "id"].contains(&key.as_str()) {
            bail!("[[trigger.cron]] for `{component}`: unknown key `{key}`");
        }
    }
    let schedule =
        schedule::parse(expr).with_context(|| format!("[[trigger.cron]] for `{component}`"))?;
    Ok(CronTrigger {
        cron_expression: expr.clone(),
        schedule,
        component,
    })
}

/// Whether component `id` declares the Spin dependency that supplies `lethe:platform` (the
/// `spin-adapter` component, for `spin up`): `Some` with the local path it names (relative to the
/// manifest; empty when it names none, a registry package say). Any other dependency is refused:
/// lethe composes nothing at load time.
fn platform_dependency(
    id: &str,
    dependencies: Option<&toml::Table>,
) -> anyhow::Result<Option<PathBuf>> {
    let Some(dependencies) = dependencies else {
        return Ok(None);
    };
    for key in dependencies.keys() {
        let package = key.split('@').next().unwrap_or(key);
        if package != "lethe:platform" && !package.starts_with("lethe:platform/") {
            bail!(
                "component `{id}`: dependency `{key}` is not supported by lethe, which composes no components at load time (only `lethe:platform` dependencies, which lethe supplies itself, are allowed)"
            );
        }
    }
    Ok(dependencies.values().next().map(|dependency| {
        dependency
            .get("path")
            .and_then(toml::Value::as_str)
            .map(PathBuf::from)
            .unwrap_or_default()
    }))
}

/// The component a trigger names, which must be declared.
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

/// Spin's rule for component ids: lower-case letters, digits and `-`, starting with a letter.
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
