//! Grant checking: a component may import only the capabilities its manifest entry grants.
//!
//! This runs in the "configure app" phase, before the component is compiled and before anything
//! is served, so a component that asks for more than it was given stops `lethe up` at once (not
//! after a compile that takes a minute for a Python component in a debug build) with a message
//! naming it and the interface.

use anyhow::{Context as _, bail};
use wasmparser::{ComponentTypeRef, Parser, Payload, TypeBounds};

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

/// Refuses component `id` (its binary `bytes`) if it imports a capability `grants` does not
/// include, naming the first offending interface. Bytes that are not a component are refused too:
/// an authorization decision fails closed.
pub fn check(id: &str, grants: &Grants, bytes: &[u8]) -> anyhow::Result<()> {
    for name in imports(bytes).with_context(|| format!("component `{id}` cannot be read"))? {
        match classify(&name) {
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

/// The names a component imports from its host: the imports of its outermost level, not those
/// of the modules and components nested in it, which its own instances satisfy.
fn imports(bytes: &[u8]) -> anyhow::Result<Vec<String>> {
    if !Parser::is_component(bytes) {
        bail!("it is not a WebAssembly component");
    }
    let mut names = Vec::new();
    // `parse_all` walks nested modules and components too, each between its section and its End.
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        match payload? {
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::ComponentImportSection(section) if depth == 0 => {
                for import in section {
                    let import = import?;
                    // A type equal to one already known (a WIT `use` of a type) asks the host
                    // for nothing; wasmtime does not list it as an import either.
                    if matches!(import.ty, ComponentTypeRef::Type(TypeBounds::Eq(_))) {
                        continue;
                    }
                    names.push(import.name.name.to_string());
                }
            }
            _ => {}
        }
    }
    Ok(names)
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

    fn built(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(crate::COMPONENTS_DIR).join(name);
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// The imports read from the bytes are those wasmtime finds once it has compiled the
    /// component, for a plain component and for one composed of nested components (smoke with
    /// the WASI adapter, whose inner `lethe:platform` imports the adapter satisfies).
    #[test]
    fn the_imports_read_before_compiling_are_those_wasmtime_sees() {
        let engine = wasmtime::Engine::default();
        for (name, imports_sql) in [("smoke.wasm", true), ("foreign/smoke.wasm", false)] {
            let bytes = built(name);
            let component =
                wasmtime::component::Component::new(&engine, &bytes).expect("it compiles");
            let compiled: Vec<String> = component
                .component_type()
                .imports(&engine)
                .map(|(n, _)| n.to_string())
                .collect();
            assert_eq!(imports(&bytes).expect("it reads"), compiled, "{name}");
            assert_eq!(
                compiled
                    .iter()
                    .any(|n| n.starts_with("lethe:platform/sql@")),
                imports_sql,
                "{name}: {compiled:?}"
            );
            let inner = bytes.windows(18).any(|w| w == b"lethe:platform/sql");
            assert!(inner, "{name} names lethe:platform/sql somewhere inside");
        }
    }

    #[test]
    fn a_component_is_refused_what_it_is_not_granted_and_bytes_that_are_no_component() {
        let smoke = built("smoke.wasm");
        let mut grants = Grants {
            capabilities: vec![
                Capability::Kube,
                Capability::Sql,
                Capability::Log,
                Capability::Config,
            ],
            ..Grants::default()
        };
        check("smoke", &grants, &smoke).expect("all it imports is granted");
        grants.capabilities.retain(|c| *c != Capability::Sql);
        let refused = check("smoke", &grants, &smoke).unwrap_err().to_string();
        assert!(
            refused.starts_with("component `smoke` imports `lethe:platform/sql@"),
            "{refused}"
        );
        assert!(
            refused.ends_with(
                "but is not granted it; add \"sql\" to capabilities in [component.smoke.tool.lethe]"
            ),
            "{refused}"
        );
        for junk in [
            &b"\0asm not a component"[..],
            b"",
            &smoke[..smoke.len() / 2],
        ] {
            let refused = check("junk", &grants, junk).unwrap_err();
            assert!(
                format!("{refused:#}").starts_with("component `junk` cannot be read: "),
                "{refused:#}"
            );
        }
    }
}
