//! `lethe new`: a new component from a template, ready to build, serve and test.
//!
//! A template writes `components/<name>/` in an application directory (one with a `spin.toml`,
//! written if there is none) and appends the component's stanza to the manifest: its route, its
//! grants, its migrations and its `[component.<name>.build]`, which `lethe build` and
//! `spin build` run. A Rust component joins the application's Cargo workspace when there is one
//! (as in lethe's own repository, where the host's build script then builds it too); elsewhere it
//! is a crate of its own, pinned to the versions lethe's SDK was tested with.
//!
//! Templates are files under `host/lethe/templates/<template>/`, compiled into the binary, with
//! `__NAME__`-style placeholders (Rust's and Spin's own syntaxes use braces).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

mod stanza;
mod templates;
mod workspace;

use templates::*;
use workspace::join_workspace;

/// What a template makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Template {
    /// An HTTP handler on a route of its own, with SQL (a table and its migration) and
    /// Kubernetes as the caller.
    Http,
    /// The deletion jobs of a kind (`--kind`): each job's state derived from the live object,
    /// as the caller sees it, over HTTP and through the `lethe:platform/job-status` export.
    JobStatus,
    /// Desired objects of a kind (`--kind`) kept in SQL behind an HTTP API, made real by a
    /// reconciler on the SDK's controller pieces (Lease, change feed, backoff, finalizer, Events),
    /// and deleted asynchronously with a job to poll; with least-privilege RBAC for lethe's own
    /// identity.
    Reconciler,
}

/// A Kubernetes kind, as `--kind` names it: `<apiVersion>/<Kind>`, for example `v1/ConfigMap`
/// or `apps/v1/Deployment`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kind {
    /// For example `apps/v1`.
    pub api_version: String,
    /// For example `Deployment`.
    pub kind: String,
}

impl std::str::FromStr for Kind {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Kind> {
        let (api_version, kind) = s.rsplit_once('/').with_context(|| {
            format!("`{s}` is not <apiVersion>/<Kind>, e.g. apps/v1/Deployment")
        })?;
        let group_ok = |part: &str| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        };
        let version_ok = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [version] | [_, version] if !version.starts_with('v') => false,
            [version] => group_ok(version),
            [group, version] => group_ok(group) && group_ok(version),
            _ => false,
        };
        let kind_ok = kind.starts_with(|c: char| c.is_ascii_uppercase())
            && kind.bytes().all(|b| b.is_ascii_alphanumeric())
            && kind.len() <= 63;
        if !version_ok || !kind_ok {
            bail!("`{s}` is not <apiVersion>/<Kind>, e.g. v1/ConfigMap or apps/v1/Deployment");
        }
        Ok(Kind {
            api_version: api_version.into(),
            kind: kind.into(),
        })
    }
}

impl Kind {
    /// The API group: `""` for the core group (`v1`).
    pub fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map_or("", |(group, _)| group)
    }

    /// The resource, as RBAC rules and the API's paths name it: the kind lower-cased and made
    /// plural by English rules, which the built-in kinds and CRDs' declared plurals follow
    /// (`Deployment` → `deployments`, `Ingress` → `ingresses`, `NetworkPolicy` →
    /// `networkpolicies`, `Gateway` → `gateways`). A kind whose plural is irregular
    /// (`Endpoints`) needs `RESOURCE` in the generated `src/lib.rs` and `rbac.json` changed.
    pub fn resource(&self) -> String {
        let lower = self.kind.to_ascii_lowercase();
        if let Some(stem) = lower.strip_suffix('y')
            && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
        {
            return format!("{stem}ies");
        }
        if lower.ends_with('s')
            || lower.ends_with('x')
            || lower.ends_with("ch")
            || lower.ends_with("sh")
        {
            return format!("{lower}es");
        }
        format!("{lower}s")
    }
}

/// The language a component is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Lang {
    /// Rust, on the guest SDK `lethe-guest`, built with cargo for `wasm32-wasip2`.
    #[default]
    Rust,
    /// Python, on the guest SDK `components/guest-py`, built with componentize-py.
    Python,
}

/// One `lethe new`.
#[derive(Debug, Clone)]
pub struct NewComponent {
    /// The template.
    pub template: Template,
    /// The component's name: its id in the manifest, its route and its directory.
    pub name: String,
    /// Its language.
    pub lang: Lang,
    /// The kind a `job-status` component tracks or a `reconciler` keeps.
    pub kind: Option<Kind>,
    /// The application directory (holding `spin.toml`).
    pub app_dir: PathBuf,
    /// The lethe source tree whose SDKs, WIT and Spin adapter the component uses.
    pub lethe_root: PathBuf,
}

/// What `lethe new` wrote, for the message that tells the user what to do next.
#[derive(Debug)]
pub struct Made {
    /// The component's directory.
    pub dir: PathBuf,
    /// The manifest the stanza went into.
    pub manifest: PathBuf,
    /// Whether the Rust crate joined the application's Cargo workspace.
    pub in_workspace: bool,
    /// The command that runs the component's own tests, and where.
    pub test_command: String,
    /// A request to try once it serves.
    pub try_it: String,
}

/// The application's Spin runtime config, beside `spin.toml`: where each database label lives.
pub const SPIN_RUNTIME_CONFIG: &str = "spin-runtime-config.toml";

/// Checks a component name: lower-case letters, digits and single dashes, starting with a
/// letter, at most 40 characters (it becomes a route, a crate, a directory and SQL table names).
pub fn check_name(name: &str) -> anyhow::Result<()> {
    let well_formed = (1..=40).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.ends_with('-')
        && !name.contains("--");
    if !well_formed {
        bail!(
            "`{name}` cannot name a component: use 1-40 lower-case letters, digits and single dashes, starting with a letter"
        );
    }
    Ok(())
}

impl NewComponent {
    /// Writes the component and its manifest stanza. Nothing is written when a check fails: the
    /// name is taken, the directory exists, or the manifest cannot be read.
    pub fn write(&self) -> anyhow::Result<Made> {
        check_name(&self.name)?;
        let manifest = self.app_dir.join("spin.toml");
        let existing = match std::fs::read_to_string(&manifest) {
            Ok(text) => Some(text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(|| format!("reading {}", manifest.display())),
        };
        let parsed: Option<toml::Table> = existing
            .as_deref()
            .map(str::parse)
            .transpose()
            .with_context(|| format!("{} is not TOML", manifest.display()))?;
        if let Some(component) = parsed.as_ref().and_then(|m| m.get("component"))
            && component.get(&self.name).is_some()
        {
            bail!(
                "{} already has a component `{}`",
                manifest.display(),
                self.name
            );
        }
        let dir = self.app_dir.join("components").join(&self.name);
        if dir.exists() {
            bail!("{} already exists", dir.display());
        }
        match (self.template, &self.kind) {
            (Template::JobStatus, None) => {
                bail!("the job-status template needs --kind, e.g. --kind v1/ConfigMap")
            }
            (Template::Reconciler, None) => {
                bail!("the reconciler template needs --kind, e.g. --kind apps/v1/Deployment")
            }
            (Template::Http, Some(_)) => {
                bail!("only the job-status and reconciler templates take --kind")
            }
            // The pass creates, as lethe, what a caller may create: for RBAC's kinds the API
            // server's escalation check would then weigh lethe's rights, not the caller's.
            (Template::Reconciler, Some(kind)) if kind.group() == "rbac.authorization.k8s.io" => {
                bail!(
                    "the reconciler template does not keep RBAC's kinds: it creates as lethe what a caller asked for, so the API server's escalation check would weigh lethe's rights instead of the caller's"
                )
            }
            _ => {}
        }
        let workspace = self.workspace()?;
        let files = match (self.template, self.lang) {
            (Template::Http, Lang::Rust) => HTTP_RUST,
            (Template::Http, Lang::Python) => HTTP_PYTHON,
            (Template::JobStatus, Lang::Rust) => JOB_STATUS_RUST,
            (Template::JobStatus, Lang::Python) => bail!(
                "the job-status template is written in Rust only: its typed export `lethe:platform/job-status` is bound by the Rust SDK"
            ),
            (Template::Reconciler, Lang::Rust) => RECONCILER_RUST,
            (Template::Reconciler, Lang::Python) => bail!(
                "the reconciler template is written in Rust only: the controller pieces (Lease, change feed, backoff, finalizer, Events) are the Rust SDK's"
            ),
        };
        let sdk = self.sdk_dir()?;
        let sdk_text = self.path_from(&dir, &sdk);
        for (path, text) in files {
            let target = dir.join(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let text = self
                .fill(text)
                .replace("__SDK__", &sdk_text)
                .replace(
                    "__DEPENDENCIES__",
                    &self.dependencies(&workspace, &sdk_text, false),
                )
                .replace(
                    "__DEV_DEPENDENCIES__",
                    &self.dependencies(&workspace, &sdk_text, true),
                )
                .replace(
                    "__WORKSPACE__",
                    if workspace.is_some() {
                        ""
                    } else {
                        "# A crate of its own, outside any Cargo workspace.\n[workspace]\n"
                    },
                );
            std::fs::write(&target, text)
                .with_context(|| format!("writing {}", target.display()))?;
        }
        if self.lang == Lang::Rust {
            match &workspace {
                Some(ws) => join_workspace(&ws.manifest, &format!("components/{}", self.name))?,
                None => std::fs::write(dir.join("Cargo.lock"), WORKSPACE_LOCK)?,
            }
        }
        let spin_ready = existing.is_none()
            || parsed
                .as_ref()
                .and_then(|m| m.get("variables"))
                .is_some_and(|v| v.get("kube_url").is_some() && v.get("kube_token").is_some());
        let is_new = existing.is_none();
        let mut text = existing.unwrap_or_else(|| self.new_manifest());
        if self.template == Template::Reconciler {
            text = self.grant_rbac(text, if is_new { None } else { parsed.as_ref() })?;
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&self.stanza(workspace.as_ref(), spin_ready));
        std::fs::write(&manifest, text)
            .with_context(|| format!("writing {}", manifest.display()))?;
        if spin_ready && self.template != Template::JobStatus {
            self.map_database_for_spin()?;
        }
        if spin_ready && self.spin_adapter_path() == crate::component_build::SPIN_ADAPTER_IN_APP {
            crate::component_build::write_spin_adapter(
                &self
                    .app_dir
                    .join(crate::component_build::SPIN_ADAPTER_IN_APP),
            )?;
        }
        let test_command = match self.lang {
            Lang::Rust if workspace.is_some() => format!("cargo test -p {}", self.name),
            Lang::Rust => format!("cd {} && cargo test", dir.display()),
            Lang::Python => format!(
                "cd {} && PYTHONPATH={sdk_text} python3 -m unittest",
                dir.display()
            ),
        };
        let try_it = match &self.kind {
            Some(_) if self.template == Template::Reconciler => format!(
                "curl -X PUT -H \"Authorization: Bearer $TOKEN\" --data '{{\"data\": {{\"greeting\": \"hello\"}}}}' localhost:3000/{}/objects/default/first",
                self.name
            ),
            Some(kind) => format!(
                "curl -H \"Authorization: Bearer $TOKEN\" localhost:3000/{name}/jobs/{job}.delete~<namespace>~<name>",
                name = self.name,
                job = kind.kind.to_ascii_lowercase()
            ),
            None => format!(
                "curl -X PUT --data hi localhost:3000/{}/items/first",
                self.name
            ),
        };
        Ok(Made {
            dir,
            manifest,
            in_workspace: workspace.is_some(),
            test_command,
            try_it,
        })
    }

    /// Maps the component's database label to its file in the application's Spin runtime config
    /// (made when missing), the file `lethe migrate --database-url sqlite:.spin/lethe.db`
    /// prepares for it, so that `spin up --runtime-config-file spin-runtime-config.toml` opens it.
    fn map_database_for_spin(&self) -> anyhow::Result<()> {
        let path = self.app_dir.join(SPIN_RUNTIME_CONFIG);
        let mut text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => format!(
                "# Spin's runtime config: each database label of spin.toml, mapped to the file\n\
                 # `lethe migrate --database-url sqlite:.spin/lethe.db` prepares for it.\n\
                 #   spin up --runtime-config-file {SPIN_RUNTIME_CONFIG}\n"
            ),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let parsed: toml::Table = text
            .parse()
            .with_context(|| format!("{} is not TOML", path.display()))?;
        if parsed
            .get("sqlite_database")
            .and_then(|t| t.get(&self.name))
            .is_some()
        {
            return Ok(());
        }
        let file = lethe_sql::sqlite_label_location("sqlite:.spin/lethe.db", &self.name)?;
        let file = file.strip_prefix("sqlite:").unwrap_or(&file);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!(
            "\n[sqlite_database.{name}]\ntype = \"spin\"\npath = \"{file}\"\n",
            name = self.name
        ));
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
    }

    /// The name with `-` as `_`: the crate's wasm file and the SQL table prefix.
    fn snake(&self) -> String {
        self.name.replace('-', "_")
    }

    fn fill(&self, text: &str) -> String {
        let text = text
            .replace("__NAME__", &self.name)
            .replace("__SNAKE__", &self.snake());
        match &self.kind {
            Some(kind) => text
                .replace("__API_VERSION__", &kind.api_version)
                .replace("__GROUP__", kind.group())
                .replace("__RESOURCE__", &kind.resource())
                .replace("__KIND__", &kind.kind)
                .replace("__JOB_TYPE__", &kind.kind.to_ascii_lowercase()),
            None => text,
        }
    }

    /// The guest SDK of the component's language in the lethe tree.
    fn sdk_dir(&self) -> anyhow::Result<PathBuf> {
        let sdk = match self.lang {
            Lang::Rust => self.lethe_root.join("components/guest"),
            Lang::Python => self.lethe_root.join("components/guest-py"),
        };
        if !sdk.is_dir() {
            bail!(
                "lethe's guest SDK is not at {}: pass --lethe-root <a checkout of lethe>",
                sdk.display()
            );
        }
        Ok(sdk)
    }

    /// `target` as written in files under `from`: relative when both are inside the
    /// application directory (so the application can move), absolute otherwise.
    fn path_from(&self, from: &Path, target: &Path) -> String {
        let (Ok(app), Ok(target)) = (self.app_dir.canonicalize(), target.canonicalize()) else {
            return target.display().to_string();
        };
        let Ok(inside) = target.strip_prefix(&app) else {
            return target.display().to_string();
        };
        let depth = from
            .strip_prefix(&self.app_dir)
            .map(|p| p.components().count())
            .unwrap_or(0);
        let mut relative = PathBuf::new();
        for _ in 0..depth {
            relative.push("..");
        }
        relative.join(inside).display().to_string()
    }
}

#[cfg(test)]
mod tests;
