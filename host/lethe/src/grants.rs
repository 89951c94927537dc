//! Grant checking: a component may import only the capabilities its manifest entry grants.
//!
//! This runs in the "configure app" phase, before anything is served, so a component that asks
//! for more than it was given stops `lethe up` with a message naming it and the interface.

use anyhow::bail;
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::manifest::{Capability, Grants};

/// The WIT package of lethe's own capabilities.
pub const LETHE_PACKAGE: &str = "lethe:platform";

/// WASI interfaces every component may import: they are sandboxed (no preopened directories, no
/// environment, no network), so importing them grants nothing.
const SANDBOXED_WASI: &[&str] = &[
    "wasi:io/",
    "wasi:clocks/",
    "wasi:random/",
    "wasi:cli/",
    "wasi:filesystem/",
    "wasi:sockets/",
    "wasi:http/types",
    // Types only (the cron event's metadata and error); no functions to call.
    "spin:cron/cron-types",
];

/// What one import of a component asks for.
#[derive(Debug, PartialEq, Eq)]
pub enum Import {
    /// A lethe capability.
    Lethe(Capability),
    /// An interface that needs no grant.
    Sandboxed,
    /// Anything else: not suppliable, or not granted.
    Other,
}

/// Classifies an import name such as `lethe:platform/sql@0.1.0`.
pub fn classify(name: &str) -> Import {
    if let Some(rest) = name
        .strip_prefix(LETHE_PACKAGE)
        .and_then(|r| r.strip_prefix('/'))
    {
        let interface = rest.split('@').next().unwrap_or(rest);
        return match Capability::from_interface(interface) {
            Some(c) => Import::Lethe(c),
            // Types only (CF errors, jobs), shared by the handler interfaces: nothing to grant.
            None if interface == "types" => Import::Sandboxed,
            None => Import::Other,
        };
    }
    if SANDBOXED_WASI.iter().any(|p| name.starts_with(p)) {
        return Import::Sandboxed;
    }
    Import::Other
}

/// Refuses `component` if it imports a capability `grants` does not include, naming the first
/// offending interface.
pub fn check(
    id: &str,
    grants: &Grants,
    component: &Component,
    engine: &Engine,
) -> anyhow::Result<()> {
    for (name, _) in component.component_type().imports(engine) {
        match classify(name) {
            Import::Sandboxed => {}
            Import::Lethe(capability) if grants.allows(capability) => {}
            Import::Lethe(capability) => bail!(
                "component `{id}` imports `{name}` but is not granted it; add \"{}\" to capabilities in [component.{id}.tool.lethe]",
                capability.interface()
            ),
            Import::Other => bail!(
                "component `{id}` imports `{name}`, which lethe does not supply to components"
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_lethe_wasi_and_foreign_imports() {
        assert_eq!(
            classify("lethe:platform/sql@0.1.0"),
            Import::Lethe(Capability::Sql)
        );
        assert_eq!(
            classify("lethe:platform/kube@0.1.0"),
            Import::Lethe(Capability::Kube)
        );
        assert_eq!(classify("lethe:platform/unknown@0.1.0"), Import::Other);
        assert_eq!(classify("lethe:platform/types@0.1.0"), Import::Sandboxed);
        assert_eq!(classify("wasi:io/streams@0.2.6"), Import::Sandboxed);
        assert_eq!(classify("wasi:http/types@0.2.12"), Import::Sandboxed);
        assert_eq!(classify("wasi:http/outgoing-handler@0.2.12"), Import::Other);
        assert_eq!(classify("fermyon:spin/key-value@2.0.0"), Import::Other);
    }
}
