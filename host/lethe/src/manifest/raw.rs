//! The TOML shapes of a Spin v2 manifest, as written: unknown keys are refused wherever Spin
//! refuses them, and the keys lethe does not use are read so that they are accepted.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::Variable;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
/// A `spin.toml` as written.
pub(super) struct RawManifest {
    pub(super) spin_manifest_version: i64,
    pub(super) application: RawApplication,
    #[serde(default)]
    pub(super) variables: BTreeMap<String, Variable>,
    #[serde(default)]
    pub(super) trigger: BTreeMap<String, Vec<toml::Table>>,
    #[serde(default)]
    pub(super) component: BTreeMap<String, RawComponent>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
/// Its `[application]` table.
pub(super) struct RawApplication {
    pub(super) name: String,
    #[serde(default)]
    pub(super) version: Option<String>,
    #[serde(default)]
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) authors: Vec<String>,
    #[serde(default)]
    pub(super) targets: Vec<String>,
    #[serde(default)]
    pub(super) trigger: Option<toml::Table>,
    #[serde(default)]
    pub(super) tool: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
/// One `[component.<id>]` table.
pub(super) struct RawComponent {
    pub(super) source: RawSource,
    #[serde(default)]
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) variables: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) environment: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) files: Vec<toml::Value>,
    #[serde(default)]
    pub(super) exclude_files: Vec<String>,
    #[serde(default)]
    pub(super) allowed_http_hosts: Vec<String>,
    #[serde(default)]
    pub(super) allowed_outbound_hosts: Vec<String>,
    #[serde(default)]
    pub(super) key_value_stores: Vec<String>,
    #[serde(default)]
    pub(super) sqlite_databases: Vec<String>,
    #[serde(default)]
    pub(super) ai_models: Vec<String>,
    #[serde(default)]
    pub(super) build: Option<toml::Table>,
    #[serde(default)]
    pub(super) dependencies_inherit_configuration: bool,
    #[serde(default)]
    pub(super) dependencies: Option<toml::Table>,
    #[serde(default)]
    pub(super) tool: BTreeMap<String, toml::Value>,
}

#[derive(Deserialize)]
#[serde(untagged)]
/// A component's `source`: a local path, or anything else (a registry or URL source, refused).
pub(super) enum RawSource {
    Path(String),
    Remote(serde::de::IgnoredAny),
}
