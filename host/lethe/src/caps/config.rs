//! `lethe:platform/config`: a component reads its own `[component.<id>.variables]`, resolved
//! against the application's `[variables]` at start (Spin's rules).

use std::collections::BTreeMap;

use anyhow::Context as _;

use super::CapsView;
use super::bindings::lethe::platform::config::{Error, Host};
use crate::manifest::{ComponentDecl, Manifest, check_variable_name, expand_template};

impl Host for CapsView<'_> {
    async fn get(&mut self, key: String) -> wasmtime::Result<Result<String, Error>> {
        if check_variable_name(&key).is_err() {
            return Ok(Err(Error::InvalidName(key)));
        }
        Ok(match self.env.config.get(&key) {
            Some(v) => Ok(v.clone()),
            None => Err(Error::Undefined(key)),
        })
    }
}

/// A configuration key the host sets for every component: a name for this host process, unique
/// among hosts sharing a cluster (a Lease holder identity, for example).
pub const INSTANCE_ID_KEY: &str = "lethe_instance_id";

/// The value of application variable `name`: the environment override `LETHE_VAR_<NAME>` when
/// set, else its default. `None` when it has neither.
pub fn app_variable(manifest: &Manifest, name: &str) -> Option<String> {
    let env_name = format!("LETHE_VAR_{}", name.to_ascii_uppercase());
    std::env::var(&env_name)
        .ok()
        .or_else(|| manifest.variables.get(name).and_then(|v| v.default.clone()))
}

/// Checks that every required application variable has a value (fails at start, not at the
/// first request).
pub fn check_required(manifest: &Manifest) -> anyhow::Result<()> {
    for (name, var) in &manifest.variables {
        if var.required && app_variable(manifest, name).is_none() {
            anyhow::bail!(
                "application variable `{name}` is required: set LETHE_VAR_{}",
                name.to_ascii_uppercase()
            );
        }
    }
    Ok(())
}

/// Resolves a component's variables.
pub fn resolve(
    manifest: &Manifest,
    decl: &ComponentDecl,
) -> anyhow::Result<BTreeMap<String, String>> {
    decl.variables
        .iter()
        .map(|(name, template)| {
            let value = expand_template(template, |v| app_variable(manifest, v))
                .with_context(|| format!("component `{}` variable `{name}`", decl.id))?;
            Ok((name.clone(), value))
        })
        .collect()
}
