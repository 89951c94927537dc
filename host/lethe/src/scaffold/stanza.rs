//! The application manifest `lethe new` writes or extends: a new `spin.toml`, the RBAC a
//! template brings, and the component's stanza.

use anyhow::Context as _;

use super::templates::*;
use super::workspace::Workspace;
use super::{Lang, NewComponent, Template};

impl NewComponent {
    /// A manifest for an application directory that has none.
    pub(super) fn new_manifest(&self) -> String {
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

    /// Gives the application the identity lethe's host acts as on the embedded cluster, when it
    /// has none: `lethe-identity.json` (the namespace `lethe-system` and the ServiceAccount
    /// `lethe-system/lethe`, which `deploy/` makes in a real cluster) as its
    /// `kubernetes_manifests` and that account as its `service_account`. `manifest` is the
    /// existing manifest's parse (`None` for a new one). The reconciler's own account and rights
    /// (`components/<name>/kubernetes/rbac.json`) are the component's, in its stanza: no other
    /// component's account gains anything.
    pub(super) fn grant_rbac(
        &self,
        text: String,
        manifest: Option<&toml::Table>,
    ) -> anyhow::Result<String> {
        let lethe = manifest
            .and_then(|m| m.get("application"))
            .and_then(|a| a.get("tool"))
            .and_then(|t| t.get("lethe"));
        if lethe.and_then(|l| l.get("kubernetes_manifests")).is_some() {
            return Ok(text);
        }
        let identity = self.app_dir.join(IDENTITY.0);
        if !identity.exists() {
            std::fs::write(&identity, IDENTITY.1)
                .with_context(|| format!("writing {}", identity.display()))?;
        }
        let mut lines = format!(
            "# lethe's own identity on the embedded cluster: the ServiceAccount these manifests make. Each\n\
             # reconciler acts as an account of its own, which its kubernetes_manifests bind.\n\
             kubernetes_manifests = [\"{}\"]\n",
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

    /// Where the manifest's `lethe:platform` dependency finds the Spin adapter, relative to the
    /// manifest: in lethe's own checkout, its workspace's build of it; anywhere else, the
    /// application's own build output, where `lethe new` and `lethe build` write it
    /// ([`crate::component_build::SPIN_ADAPTER_IN_APP`]), so the application can be moved,
    /// committed and served by Spin elsewhere.
    pub(super) fn spin_adapter_path(&self) -> String {
        let in_checkout = self
            .lethe_root
            .join("target/wasm/wasm32-wasip2/wasm/spin_adapter.wasm");
        let path = self.path_from(&self.app_dir, &in_checkout);
        if std::path::Path::new(&path).is_absolute() {
            crate::component_build::SPIN_ADAPTER_IN_APP.to_string()
        } else {
            path
        }
    }

    /// The manifest stanza: route, source, build, grants; and, when the application declares
    /// the Spin adapter's variables, what Spin needs to compose the adapter in.
    pub(super) fn stanza(&self, workspace: Option<&Workspace>, spin_ready: bool) -> String {
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
        // Its data is a database of its own, the label named after it.
        let has_sql = self.template != Template::JobStatus;
        if spin_ready {
            variables.push(
                "kube_url = \"{{ kube_url }}\", kube_token = \"{{ kube_token }}\"".to_string(),
            );
            if has_sql {
                variables.push(format!("sqlite_database = \"{name}\""));
            }
        }
        if !variables.is_empty() {
            text.push_str(&format!("variables = {{ {} }}\n", variables.join(", ")));
        }
        if has_sql {
            text.push_str(&format!(
                "# Its data: the database labelled `{name}`, which no other component reaches.\n\
                 sqlite_databases = [\"{name}\"]\n"
            ));
        }
        if spin_ready {
            let adapter = self.spin_adapter_path();
            text.push_str(&format!(
                "# On Spin, the adapter that the dependency below composes in needs this; lethe ignores it.\n\
                 allowed_outbound_hosts = [\"{{{{ kube_url }}}}\"]\n\
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
                "# The API asks the cluster as the caller; only the pass acts privileged, as the ServiceAccount\n\
                 # lethe-system/lethe-{name}, with exactly the rights its kubernetes_manifests grant.\n\
                 kube_identities = [\"caller\", \"privileged\"]\n\
                 kubernetes_manifests = [\"components/{name}/kubernetes/rbac.json\"]\n",
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
