//! Joining the application's Cargo workspace, when it has one that can take the crate, and the
//! dependencies a Rust component declares in it or on its own.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::{NewComponent, Template};

impl NewComponent {
    /// The Cargo workspace of the application directory, if it has one that can take the crate.
    pub(super) fn workspace(&self) -> anyhow::Result<Option<Workspace>> {
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
    pub(super) fn dependencies(
        &self,
        workspace: &Option<Workspace>,
        sdk: &str,
        dev: bool,
    ) -> String {
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
}

/// The Cargo workspace a Rust component can join.
#[derive(Debug)]
pub(super) struct Workspace {
    /// Its `Cargo.toml`.
    pub(super) manifest: PathBuf,
    /// Whether `[workspace.dependencies]` declares `lethe-guest`.
    pub(super) has_sdk: bool,
    /// Whether it defines lethe's `[profile.wasm]` (lethe's own workspace does), whose builds the
    /// host's build script makes too.
    pub(super) has_wasm_profile: bool,
}

/// Adds `member` to the `members` list of the workspace manifest at `path`, keeping the file's
/// layout.
pub(super) fn join_workspace(path: &Path, member: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)?;
    let updated = join_list(&text, "members = [", member)
        .with_context(|| format!("joining the workspace {}", path.display()))?;
    std::fs::write(path, updated)?;
    Ok(())
}

/// `text` with `item` added to the TOML list that starts at `opening` (`members = [`), keeping
/// the file's layout.
pub(super) fn join_list(text: &str, opening: &str, item: &str) -> anyhow::Result<String> {
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
