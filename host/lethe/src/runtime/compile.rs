//! Reading and compiling a component: for the plain engine or, when it needs it, the one with
//! component-model-async, with compiled artifacts cached by content and engine.

use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

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
/// gives, which is built only then. When neither takes it, the error carries both reasons.
pub(super) fn compile_for_either<'e>(
    id: &str,
    bytes: &[u8],
    cache_dir: Option<&Path>,
    plain: &Engine,
    concurrent: impl FnOnce() -> anyhow::Result<&'e Engine>,
) -> anyhow::Result<(Component, Compiled)> {
    let plain_error = match compile(plain, bytes, cache_dir) {
        Ok(component) => return Ok((component, Compiled::Plain)),
        Err(e) => e,
    };
    match compile(concurrent()?, bytes, cache_dir) {
        Ok(component) => Ok((component, Compiled::Concurrent)),
        Err(concurrent_error) => Err(anyhow::anyhow!(
            "component `{id}` does not compile: as a plain component: {plain_error:#}; \
             with component-model-async: {concurrent_error:#}"
        )),
    }
}

/// Compiles `bytes` for `engine`, or loads the compiled artifact cached for the same bytes and
/// engine.
fn compile(engine: &Engine, bytes: &[u8], cache_dir: Option<&Path>) -> anyhow::Result<Component> {
    let Some(cache_dir) = cache_dir else {
        return Ok(Component::new(engine, bytes)?);
    };
    let path = cache_path(engine, bytes, cache_dir);
    if path.exists() {
        // SAFETY: the file was written by `Component::serialize` of this same engine
        // configuration (its name carries the engine's compatibility hash) into our own data dir.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => return Ok(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), "ignoring unusable compiled cache entry: {e:#}")
            }
        }
    }
    let component = Component::new(engine, bytes)?;
    if let Err(e) = write_cache(&component, &path) {
        tracing::warn!(path = %path.display(), "cannot cache compiled component: {e:#}");
    }
    Ok(component)
}

fn cache_path(engine: &Engine, bytes: &[u8], cache_dir: &Path) -> PathBuf {
    use std::hash::{Hash as _, Hasher as _};
    let mut engine_hash = std::collections::hash_map::DefaultHasher::new();
    engine
        .precompile_compatibility_hash()
        .hash(&mut engine_hash);
    let digest = Sha256::digest(bytes);
    cache_dir.join(format!(
        "{}-{:016x}.cwasm",
        hex::encode(&digest[..16]),
        engine_hash.finish()
    ))
}

fn write_cache(component: &Component, path: &Path) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, component.serialize()?)?;
    std::fs::rename(&tmp, path)?;
    Ok(())
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
        let (_, compiled) = compile_for_either("misbehave", &misbehave, None, &plain, || {
            anyhow::bail!("the async engine was asked for")
        })
        .expect("misbehave compiles for the plain engine");
        assert_eq!(compiled, Compiled::Plain);
    }
}
