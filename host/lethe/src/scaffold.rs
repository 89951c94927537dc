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

/// One template file: its path below the component directory and its text.
type File = (&'static str, &'static str);

const HTTP_MIGRATION: File = (
    "migrations/0001_items.sql",
    include_str!("../templates/http/migrations/0001_items.sql"),
);

const HTTP_RUST: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../templates/http/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../templates/http/rust/src/lib.rs"),
    ),
    (
        "src/wasm.rs",
        include_str!("../templates/http/rust/src/wasm.rs"),
    ),
    (
        "src/tests.rs",
        include_str!("../templates/http/rust/src/tests.rs"),
    ),
    HTTP_MIGRATION,
];

const JOB_STATUS_RUST: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../templates/job-status/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../templates/job-status/rust/src/lib.rs"),
    ),
    (
        "src/wasm.rs",
        include_str!("../templates/job-status/rust/src/wasm.rs"),
    ),
    (
        "src/tests.rs",
        include_str!("../templates/job-status/rust/src/tests.rs"),
    ),
];

const RECONCILER_RUST: &[File] = &[
    (
        "Cargo.toml",
        include_str!("../templates/reconciler/rust/Cargo.toml"),
    ),
    (
        "src/lib.rs",
        include_str!("../templates/reconciler/rust/src/lib.rs"),
    ),
    (
        "src/api.rs",
        include_str!("../templates/reconciler/rust/src/api.rs"),
    ),
    (
        "src/reconcile.rs",
        include_str!("../templates/reconciler/rust/src/reconcile.rs"),
    ),
    (
        "src/wasm.rs",
        include_str!("../templates/reconciler/rust/src/wasm.rs"),
    ),
    (
        "src/tests.rs",
        include_str!("../templates/reconciler/rust/src/tests.rs"),
    ),
    (
        "migrations/0001_desired.sql",
        include_str!("../templates/reconciler/migrations/0001_desired.sql"),
    ),
    (
        "rbac.json",
        include_str!("../templates/reconciler/rbac.json"),
    ),
];

const HTTP_PYTHON: &[File] = &[
    (
        "pyproject.toml",
        include_str!("../templates/http/python/pyproject.toml"),
    ),
    ("app.py", include_str!("../templates/http/python/app.py")),
    (
        "logic.py",
        include_str!("../templates/http/python/logic.py"),
    ),
    (
        "test_logic.py",
        include_str!("../templates/http/python/test_logic.py"),
    ),
    HTTP_MIGRATION,
];

/// The namespace and ServiceAccount of lethe's own identity, for an application that has none.
const IDENTITY: File = (
    "lethe-identity.json",
    include_str!("../templates/reconciler/identity.json"),
);

/// The lock file of lethe's own workspace: a crate outside it starts from the exact versions the
/// SDK was tested with (cargo drops the entries it does not need on the first build).
const WORKSPACE_LOCK: &str = include_str!("../../../Cargo.lock");

/// The application variables that let a component's Kubernetes calls work on Spin too (through
/// lethe's Spin adapter); `spin.toml`s that `lethe new` writes declare them.
const SPIN_KUBE_VARIABLES: &str = r#"# Only for `spin up` (lethe reaches the cluster itself and ignores them): the Kubernetes API the
# Spin adapter calls, and the bearer token of lethe's privileged identity.
kube_url = { default = "http://127.0.0.1:6480" }
kube_token = { default = "", secret = true }
"#;

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

    /// The Cargo workspace of the application directory, if it has one that can take the crate.
    fn workspace(&self) -> anyhow::Result<Option<Workspace>> {
        let manifest = self.app_dir.join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            return Ok(None);
        };
        let parsed: toml::Table = text
            .parse()
            .with_context(|| format!("{} is not TOML", manifest.display()))?;
        let Some(ws) = parsed.get("workspace") else {
            return Ok(None);
        };
        let has_sdk = ws
            .get("dependencies")
            .and_then(|d| d.get("lethe-guest"))
            .is_some();
        let has_wasm_profile = parsed.get("profile").and_then(|p| p.get("wasm")).is_some();
        Ok(Some(Workspace {
            manifest,
            has_sdk,
            has_wasm_profile,
        }))
    }

    /// The `[dependencies]` (or, with `dev`, `[dev-dependencies]`) of a Rust component: the
    /// workspace's when it declares the SDK, else the SDK by path and the versions lethe uses.
    fn dependencies(&self, workspace: &Option<Workspace>, sdk: &str, dev: bool) -> String {
        let inherit = workspace.as_ref().is_some_and(|w| w.has_sdk);
        // The SDK's features: the fake host for tests, a handler world's export bindings.
        let features = match (dev, self.template) {
            (true, _) => "\"fake\"",
            (false, Template::JobStatus) => "\"job-status-handler\"",
            (false, Template::Reconciler) => "\"reconciler-handler\"",
            (false, Template::Http) => "",
        };
        let sdk = match (inherit, features.is_empty()) {
            (true, true) => "lethe-guest.workspace = true".to_string(),
            (true, false) => {
                format!("lethe-guest = {{ workspace = true, features = [{features}] }}")
            }
            (false, true) => format!("lethe-guest = {{ path = \"{sdk}\" }}"),
            (false, false) => {
                format!("lethe-guest = {{ path = \"{sdk}\", features = [{features}] }}")
            }
        };
        match (inherit, dev) {
            (_, true) => format!("{sdk}\n"),
            (true, false) => {
                format!("{sdk}\nserde_json.workspace = true\nwasip2.workspace = true\n")
            }
            (false, false) => format!("{sdk}\nserde_json = \"1\"\nwasip2 = \"2\"\n"),
        }
    }

    /// A manifest for an application directory that has none.
    fn new_manifest(&self) -> String {
        format!(
            "# A lethe application: `lethe build`, then `lethe up` (or `spin build`, then `spin up`).\n\
             spin_manifest_version = 2\n\n\
             [application]\n\
             name = \"{name}-app\"\n\
             version = \"0.1.0\"\n\n\
             [application.tool.lethe]\n\
             error_format = \"cf\"\n\n\
             [variables]\n\
             {SPIN_KUBE_VARIABLES}",
            name = self.name
        )
    }

    /// Has lethe up apply the reconciler's RBAC (`components/<name>/rbac.json`) and act as the
    /// ServiceAccount it binds, so that the reconciler runs with exactly those rights on the
    /// embedded cluster too. `manifest` is the existing manifest's parse (`None` for a new one):
    /// the file joins its `kubernetes_manifests` list if it has one; otherwise the application
    /// gets `lethe-identity.json` (the namespace `lethe-system` and the ServiceAccount
    /// `lethe-system/lethe`, which `deploy/` makes in a real cluster) and that account as its
    /// `service_account`.
    fn grant_rbac(&self, text: String, manifest: Option<&toml::Table>) -> anyhow::Result<String> {
        let rbac = format!("components/{}/rbac.json", self.name);
        let lethe = manifest
            .and_then(|m| m.get("application"))
            .and_then(|a| a.get("tool"))
            .and_then(|t| t.get("lethe"));
        if lethe.and_then(|l| l.get("kubernetes_manifests")).is_some() {
            return join_list(&text, "kubernetes_manifests = [", &rbac);
        }
        let identity = self.app_dir.join(IDENTITY.0);
        if !identity.exists() {
            std::fs::write(&identity, IDENTITY.1)
                .with_context(|| format!("writing {}", identity.display()))?;
        }
        let mut lines = format!(
            "# lethe's own identity on the embedded cluster: the ServiceAccount these manifests make and\n\
             # bind, so that reconcilers run with exactly the rights their rbac.json grants.\n\
             kubernetes_manifests = [\"{}\", \"{rbac}\"]\n",
            IDENTITY.0
        );
        if lethe.and_then(|l| l.get("service_account")).is_none() {
            lines.push_str("service_account = \"lethe-system/lethe\"\n");
        }
        const HEADER: &str = "[application.tool.lethe]\n";
        Ok(match text.find(HEADER) {
            Some(at) => {
                let after = at + HEADER.len();
                format!("{}{lines}{}", &text[..after], &text[after..])
            }
            None => format!("{}\n{HEADER}{lines}", text.trim_end()),
        })
    }

    /// The manifest stanza: route, source, build, grants; and, when the application declares
    /// the Spin adapter's variables, what Spin needs to compose the adapter in.
    fn stanza(&self, workspace: Option<&Workspace>, spin_ready: bool) -> String {
        let name = &self.name;
        let snake = self.snake();
        let component_dir = self.app_dir.join("components").join(name);
        let profile = workspace.map(|w| w.has_wasm_profile);
        let (source, build) = match (self.lang, profile) {
            (Lang::Rust, Some(true)) => (
                format!("target/wasm/wasm32-wasip2/wasm/{snake}.wasm"),
                format!(
                    "command = \"cargo build --profile wasm --target wasm32-wasip2 -p {name} --target-dir target/wasm\"\n\
                     watch = [\"components/{name}/src/**/*.rs\", \"components/{name}/Cargo.toml\"]\n"
                ),
            ),
            (Lang::Rust, Some(false)) => (
                format!("target/wasm32-wasip2/release/{snake}.wasm"),
                format!(
                    "command = \"cargo build --release --target wasm32-wasip2 -p {name}\"\n\
                     watch = [\"components/{name}/src/**/*.rs\", \"components/{name}/Cargo.toml\"]\n"
                ),
            ),
            (Lang::Rust, None) => (
                format!("components/{name}/target/wasm32-wasip2/release/{snake}.wasm"),
                format!(
                    "command = \"cargo build --release --target wasm32-wasip2\"\n\
                     workdir = \"components/{name}\"\n\
                     watch = [\"src/**/*.rs\", \"Cargo.toml\"]\n"
                ),
            ),
            (Lang::Python, _) => {
                let wit = self.path_from(&component_dir, &self.lethe_root.join("wit"));
                let sdk = self
                    .sdk_dir()
                    .map(|s| self.path_from(&component_dir, &s))
                    .unwrap_or_default();
                // Built outside the component's directory, which componentize-py bundles whole.
                (
                    format!("target/lethe/{snake}.wasm"),
                    format!(
                        "command = \"mkdir -p ../../target/lethe && componentize-py -d {wit} -w lethe:platform/python-http componentize app -p . -p {sdk} -o ../../target/lethe/{snake}.wasm\"\n\
                         workdir = \"components/{name}\"\n\
                         watch = [\"*.py\"]\n"
                    ),
                )
            }
        };
        let made_by = match (&self.kind, self.lang) {
            (Some(kind), _) => format!(
                "{} --kind {}/{}",
                if self.template == Template::Reconciler {
                    "reconciler"
                } else {
                    "job-status"
                },
                kind.api_version,
                kind.kind
            ),
            (None, Lang::Python) => "http --lang python".into(),
            (None, Lang::Rust) => "http".into(),
        };
        let mut text = format!(
            "\n# --- {name}: made by `lethe new {made_by}` ---\n\n\
             [[trigger.http]]\n\
             route = \"/{name}/...\"\n\
             component = \"{name}\"\n\n",
        );
        if self.template == Template::Reconciler {
            text.push_str(&format!(
                "# A pass every 5 seconds; lethe also runs one as soon as the API has written.\n\
                 [[trigger.cron]]\n\
                 cron_expression = \"*/5 * * * * *\"\n\
                 component = \"{name}\"\n\n"
            ));
        }
        text.push_str(&format!("[component.{name}]\nsource = \"{source}\"\n"));
        // A job-status component's own setting, and, for Spin, the adapter's.
        let mut variables = Vec::new();
        match self.template {
            Template::JobStatus => variables.push("deletion_timeout_seconds = \"120\"".to_string()),
            Template::Reconciler => variables.push(
                "deletion_timeout_seconds = \"120\", full_resync_seconds = \"600\", job_retention_seconds = \"86400\", lease_namespace = \"lethe-system\""
                    .to_string(),
            ),
            Template::Http => {}
        }
        if spin_ready {
            variables.push(
                "kube_url = \"{{ kube_url }}\", kube_token = \"{{ kube_token }}\"".to_string(),
            );
        }
        if !variables.is_empty() {
            text.push_str(&format!("variables = {{ {} }}\n", variables.join(", ")));
        }
        if spin_ready {
            let adapter = self.path_from(
                &self.app_dir,
                &self
                    .lethe_root
                    .join("target/wasm/wasm32-wasip2/wasm/spin_adapter.wasm"),
            );
            text.push_str(&format!(
                "# On Spin, the adapter that the dependency below composes in needs these; lethe ignores them.\n\
                 allowed_outbound_hosts = [\"{{{{ kube_url }}}}\"]\n\
                 sqlite_databases = [\"default\"]\n\
                 dependencies_inherit_configuration = true\n\n\
                 [component.{name}.dependencies]\n\
                 \"lethe:platform@0.1.0\" = {{ path = \"{adapter}\" }}\n"
            ));
        }
        let migrations = format!("migrations = \"components/{name}/migrations\"\n");
        let (capabilities, identities, migrations) = match self.template {
            Template::Http => (
                "\"kube\", \"sql\", \"log\", \"config\"",
                "# Kubernetes calls run as the caller only; lethe's own identity is not granted.\n\
                 kube_identities = [\"caller\"]\n",
                migrations,
            ),
            Template::JobStatus => (
                "\"kube\", \"log\", \"config\"",
                "# Kubernetes calls run as the caller only; lethe's own identity is not granted.\n\
                 kube_identities = [\"caller\"]\n",
                String::new(),
            ),
            Template::Reconciler => (
                "\"kube\", \"sql\", \"log\", \"config\"",
                "# The API asks the cluster as the caller; only the pass acts as lethe, with the rights\n\
                 # components/{name}/rbac.json grants.\n\
                 kube_identities = [\"caller\", \"privileged\"]\n",
                migrations,
            ),
        };
        let identities = identities.replace("{name}", name);
        text.push_str(&format!(
            "\n[component.{name}.build]\n{build}\n\
             [component.{name}.tool.lethe]\n\
             capabilities = [{capabilities}]\n\
             {identities}\
             {migrations}"
        ));
        text
    }
}

/// The Cargo workspace a Rust component can join.
#[derive(Debug)]
struct Workspace {
    /// Its `Cargo.toml`.
    manifest: PathBuf,
    /// Whether `[workspace.dependencies]` declares `lethe-guest`.
    has_sdk: bool,
    /// Whether it defines lethe's `[profile.wasm]` (lethe's own workspace does), whose builds the
    /// host's build script makes too.
    has_wasm_profile: bool,
}

/// Adds `member` to the `members` list of the workspace manifest at `path`, keeping the file's
/// layout.
fn join_workspace(path: &Path, member: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let updated = join_list(&text, "members = [", member)
        .with_context(|| format!("joining the workspace {}", path.display()))?;
    std::fs::write(path, updated)?;
    Ok(())
}

/// `text` with `item` added to the TOML list that starts at `opening` (`members = [`), keeping
/// the file's layout.
fn join_list(text: &str, opening: &str, item: &str) -> anyhow::Result<String> {
    let start = text
        .find(opening)
        .with_context(|| format!("no `{opening}` list to join"))?;
    let close = text[start..]
        .find(']')
        .map(|i| start + i)
        .with_context(|| format!("the `{opening}` list does not end"))?;
    let before = text[start..close].trim_end();
    let separator = if before.ends_with('[') || before.ends_with(',') {
        ""
    } else {
        ","
    };
    Ok(format!(
        "{}{separator}\n    \"{item}\",\n{}",
        &text[..start + before.len()],
        &text[close..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["a", "hello", "team-jobs2", &"a".repeat(40)] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Hello",
            "1st",
            "a_b",
            "a--b",
            "a-",
            "-a",
            "a/b",
            "../x",
            &"a".repeat(41),
        ] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn kinds_are_parsed() {
        let kind: Kind = "apps/v1/Deployment".parse().expect("kind");
        assert_eq!(
            (kind.api_version.as_str(), kind.kind.as_str()),
            ("apps/v1", "Deployment")
        );
        let core: Kind = "v1/ConfigMap".parse().expect("core kind");
        assert_eq!(core.api_version, "v1");
        for bad in [
            "ConfigMap",
            "v1/configMap",
            "apps/Deployment",
            "/v1/A",
            "a/b/c/D",
            "v1/Config-Map",
        ] {
            assert!(bad.parse::<Kind>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_job_status_template_needs_a_kind_and_grants_no_sql() {
        let app = tempfile::tempdir().expect("tempdir");
        let mut new = new_in(app.path(), Lang::Rust);
        new.template = Template::JobStatus;
        assert!(new.write().is_err(), "no --kind");
        new.kind = Some("v1/ConfigMap".parse().expect("kind"));
        let made = new.write().expect("lethe new job-status");
        let manifest = crate::manifest::load(&made.manifest).expect("lethe reads it");
        let grants = &manifest.components["hello"].grants;
        assert!(!grants.allows(crate::manifest::Capability::Sql));
        assert!(grants.migrations.is_none());
        let lib = std::fs::read_to_string(made.dir.join("src/lib.rs")).expect("lib.rs");
        assert!(
            lib.contains("\"configmap\"") && lib.contains("\"ConfigMap\""),
            "{lib}"
        );
    }

    #[test]
    fn a_kind_names_its_group_and_resource_as_rbac_does() {
        for (kind, group, resource) in [
            ("v1/ConfigMap", "", "configmaps"),
            ("apps/v1/Deployment", "apps", "deployments"),
            (
                "networking.k8s.io/v1/Ingress",
                "networking.k8s.io",
                "ingresses",
            ),
            (
                "networking.k8s.io/v1/NetworkPolicy",
                "networking.k8s.io",
                "networkpolicies",
            ),
            ("example.com/v1/Gateway", "example.com", "gateways"),
        ] {
            let kind: Kind = kind.parse().expect("kind");
            assert_eq!((kind.group(), kind.resource().as_str()), (group, resource));
        }
    }

    #[test]
    fn the_reconciler_template_brings_its_rbac_and_the_identity_that_uses_it() {
        let app = tempfile::tempdir().expect("tempdir");
        let mut new = new_in(app.path(), Lang::Rust);
        new.template = Template::Reconciler;
        new.name = "keeper".into();
        assert!(new.write().is_err(), "no --kind");
        new.kind = Some(
            "rbac.authorization.k8s.io/v1/RoleBinding"
                .parse()
                .expect("kind"),
        );
        assert!(
            new.write().is_err(),
            "RBAC's kinds would escalate through lethe"
        );
        new.kind = Some("apps/v1/Deployment".parse().expect("kind"));
        let made = new.write().expect("lethe new reconciler");
        let manifest = crate::manifest::load(&made.manifest).expect("lethe reads it");
        assert_eq!(
            manifest.settings.service_account.as_deref(),
            Some("lethe-system/lethe")
        );
        let applied: Vec<String> = manifest
            .settings
            .kubernetes_manifests
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        assert!(
            applied.iter().any(|p| p.ends_with("lethe-identity.json"))
                && applied
                    .iter()
                    .any(|p| p.ends_with("components/keeper/rbac.json")),
            "{applied:?}"
        );
        let component = &manifest.components["keeper"];
        assert!(component.grants.allows(crate::manifest::Capability::Sql));
        assert_eq!(component.grants.kube_identities.len(), 2);
        let rbac: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(made.dir.join("rbac.json")).expect("rbac.json"),
        )
        .expect("rbac.json is JSON");
        let rule = &rbac["items"][0]["rules"][0];
        assert_eq!(
            (&rule["apiGroups"][0], &rule["resources"][0]),
            (
                &serde_json::json!("apps"),
                &serde_json::json!("deployments")
            )
        );
        let lib = std::fs::read_to_string(made.dir.join("src/lib.rs")).expect("lib.rs");
        assert!(
            lib.contains("\"deployments\"") && lib.contains("\"apps/v1\""),
            "{lib}"
        );

        // A second reconciler joins the list the first one started.
        new.name = "second".into();
        new.write().expect("a second reconciler");
        let manifest = crate::manifest::load(&made.manifest).expect("lethe reads it");
        assert_eq!(manifest.settings.kubernetes_manifests.len(), 3);
    }

    #[test]
    fn a_member_joins_the_workspace_list() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("Cargo.toml");
        std::fs::write(
            &path,
            "[workspace]\nmembers = [\n    \"a\",\n    \"b\"\n]\n\n[workspace.dependencies]\nx = \"1\"\n",
        )
        .expect("write");
        join_workspace(&path, "components/c").expect("join");
        let text = std::fs::read_to_string(&path).expect("read");
        let parsed: toml::Table = text.parse().expect("still TOML");
        let members: Vec<&str> = parsed["workspace"]["members"]
            .as_array()
            .expect("members")
            .iter()
            .filter_map(|m| m.as_str())
            .collect();
        assert_eq!(members, ["a", "b", "components/c"]);
        assert!(text.contains("x = \"1\""), "the rest is kept:\n{text}");
    }

    fn new_in(app: &Path, lang: Lang) -> NewComponent {
        NewComponent {
            template: Template::Http,
            name: "hello".into(),
            lang,
            kind: None,
            app_dir: app.to_path_buf(),
            lethe_root: PathBuf::from(crate::REPO_ROOT),
        }
    }

    #[test]
    fn a_new_application_gets_a_manifest_lethe_accepts() {
        for lang in [Lang::Rust, Lang::Python] {
            let app = tempfile::tempdir().expect("tempdir");
            let made = new_in(app.path(), lang).write().expect("lethe new");
            assert!(!made.in_workspace);
            let manifest = crate::manifest::load(&made.manifest).expect("lethe reads it");
            let component = &manifest.components["hello"];
            assert!(
                component.grants.kube_identities.len() == 1,
                "the caller only: {:?}",
                component.grants.kube_identities
            );
            let text = std::fs::read_to_string(&made.manifest).expect("manifest");
            assert!(text.contains("route = \"/hello/...\""), "{text}");
            for placeholder in ["__NAME__", "__SNAKE__", "__SDK__", "__DEPENDENCIES__"] {
                let found = walk(&made.dir)
                    .into_iter()
                    .find(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains(placeholder)));
                assert_eq!(found, None, "{placeholder} left in a file");
            }
        }
    }

    #[test]
    fn a_taken_name_or_directory_is_refused_and_nothing_is_written() {
        let app = tempfile::tempdir().expect("tempdir");
        new_in(app.path(), Lang::Rust).write().expect("first");
        let manifest = std::fs::read_to_string(app.path().join("spin.toml")).expect("manifest");
        let again = new_in(app.path(), Lang::Python).write();
        assert!(again.is_err());
        assert_eq!(
            std::fs::read_to_string(app.path().join("spin.toml")).expect("manifest"),
            manifest
        );
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).expect("dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                files.extend(walk(&path));
            } else {
                files.push(path);
            }
        }
        files
    }
}
