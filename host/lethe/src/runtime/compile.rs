//! Reading and compiling a component: for the plain engine or, when it needs it, the one with
//! component-model-async, through the compiled-component cache ([`super::cache`]).

use std::path::Path;

use wasmtime::Engine;
use wasmtime::component::Component;

use super::cache::{ComponentCache, Origin};

/// The bytes of component `id`'s source: a missing or unreadable file is its own error, not a
/// reason to try another engine.
pub(super) fn read_source(id: &str, source: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(source).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            anyhow::anyhow!(
                "component `{id}`: its source {} does not exist",
                source.display()
            )
        } else {
            anyhow::Error::from(e).context(format!(
                "component `{id}`: cannot read {}",
                source.display()
            ))
        }
    })
}

/// The engine a component was compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compiled {
    /// The plain engine.
    Plain,
    /// The engine with component-model-async.
    Concurrent,
}

/// Compiles component `id` for the `plain` engine, or, when that engine refuses it (a component
/// that lifts an export with the async ABI fails validation there), for the engine `concurrent`
/// gives, which is built only then; through `cache` when there is one. When neither engine takes
/// it, the error carries both reasons.
pub(super) fn compile_for_either<'e>(
    id: &str,
    bytes: &[u8],
    cache: Option<&ComponentCache>,
    plain: &Engine,
    concurrent: impl FnOnce() -> anyhow::Result<&'e Engine>,
) -> anyhow::Result<(Component, Compiled, Origin)> {
    let plain_error = match compile(plain, bytes, cache) {
        Ok((component, origin)) => return Ok((component, Compiled::Plain, origin)),
        Err(e) => e,
    };
    match compile(concurrent()?, bytes, cache) {
        Ok((component, origin)) => Ok((component, Compiled::Concurrent, origin)),
        Err(concurrent_error) => Err(anyhow::anyhow!(
            "component `{id}` does not compile: as a plain component: {plain_error:#}; \
             with component-model-async: {concurrent_error:#}"
        )),
    }
}

/// Compiles `bytes` for `engine`, or loads the artifact `cache` holds for the same bytes and
/// engine.
fn compile(
    engine: &Engine,
    bytes: &[u8],
    cache: Option<&ComponentCache>,
) -> anyhow::Result<(Component, Origin)> {
    match cache {
        Some(cache) => cache.load_or_compile(engine, bytes),
        None => Ok((Component::new(engine, bytes)?, Origin::Compiled)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_source_is_reported_as_missing() {
        let e = read_source("cf_api", Path::new("/nonexistent/cf_api.wasm")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "component `cf_api`: its source /nonexistent/cf_api.wasm does not exist"
        );
    }

    #[test]
    fn a_component_neither_engine_compiles_is_refused_with_both_reasons() {
        let plain = super::super::build_engine(16, 1, false).expect("plain engine");
        let concurrent = super::super::build_engine(16, 1, true).expect("async engine");
        let e = compile_for_either("broken", b"\0asm not a component", None, &plain, || {
            Ok(&concurrent)
        })
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("component `broken` does not compile: as a plain component: "),
            "{e}"
        );
        assert!(e.contains("; with component-model-async: "), "{e}");
        // The engine a component needs is built only when the plain one refuses it.
        let path = Path::new(crate::COMPONENTS_DIR).join("misbehave.wasm");
        let misbehave = std::fs::read(path).expect("misbehave");
        let (_, compiled, _) = compile_for_either("misbehave", &misbehave, None, &plain, || {
            anyhow::bail!("the async engine was asked for")
        })
        .expect("misbehave compiles for the plain engine");
        assert_eq!(compiled, Compiled::Plain);
    }
}
