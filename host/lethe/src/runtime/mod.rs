//! The wasmtime runtime: one engine, one linker, every component compiled once and pre-linked,
//! and a fresh, limited store for every request or tick (the shape of `wasmtime serve`).
//!
//! * [`compile`]: reading a component and compiling it for the engine it needs, cached;
//! * [`state`]: what one instance holds: its table, WASI contexts, limits and capabilities;
//! * [`call`]: the instance runner every trigger calls components through.

pub mod call;
mod compile;
mod state;

pub use state::{InstanceState, MemoryLimitExceeded};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use compile::{Compiled, compile_for_either, read_source};

use crate::caps::{Capabilities, CapabilityEnv};
use crate::grants;
use crate::manifest::{ComponentDecl, Manifest};

/// How often the epoch advances; time limits are enforced at this granularity.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Resource limits of one component.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Wall-time limit of one request or tick.
    pub timeout: Duration,
    /// Linear-memory limit in bytes.
    pub memory_bytes: usize,
}

/// One component, compiled and pre-linked.
pub struct LoadedComponent {
    /// The component id from the manifest.
    pub id: Arc<str>,
    /// Pre-linked: instantiation only allocates and initialises.
    pub pre: InstancePre<InstanceState>,
    /// Its limits.
    pub limits: Limits,
    /// Its capability environment (grants, config values, backends).
    pub env: Arc<CapabilityEnv>,
}

/// The engines and every component of an application.
///
/// Two engines: components are compiled for the plain one when they can be, and for one with
/// component-model-async (concurrency support) only when they need it, i.e. when they lift an
/// export with the async ABI, as Spin's `handle-cron-event` (`async func`) is. Concurrency support
/// adds per-call bookkeeping (a task per call and per host call) to every call in its stores, so
/// components that do not need it (HTTP-only ones) keep the cheaper calls. Each engine has its own
/// pooling allocator sized by `max_instances`; the second is built only if some component needs it.
pub struct Runtime {
    engine: Engine,
    linker: Linker<InstanceState>,
    async_engine: Option<(Engine, Linker<InstanceState>)>,
    components: BTreeMap<String, Arc<LoadedComponent>>,
    cache_dir: Option<PathBuf>,
    epoch_ticker: Option<std::thread::JoinHandle<()>>,
    stop_ticker: Arc<std::sync::atomic::AtomicBool>,
}

impl Runtime {
    /// Builds the engine, checks every component's imports against its grants, compiles (or
    /// loads from `cache_dir`) and pre-links each one.
    pub fn new(
        manifest: &Manifest,
        cache_dir: Option<&Path>,
        envs: BTreeMap<String, Arc<CapabilityEnv>>,
    ) -> anyhow::Result<Runtime> {
        let max_memory = manifest
            .components
            .values()
            .map(|c| memory_limit_mb(manifest, c))
            .max()
            .unwrap_or(manifest.settings.memory_limit_mb);
        let engine = build_engine(max_memory, manifest.settings.max_instances, false)?;
        let linker = new_linker(&engine)?;
        let mut async_engine: Option<(Engine, Linker<InstanceState>)> = None;

        let mut components = BTreeMap::new();
        for (id, decl) in &manifest.components {
            let bytes = read_source(id, &decl.source)?;
            grants::check(id, &decl.grants, &bytes)?;
            let max_instances = manifest.settings.max_instances;
            let (component, compiled) = compile_for_either(id, &bytes, cache_dir, &engine, || {
                if async_engine.is_none() {
                    let e = build_engine(max_memory, max_instances, true)?;
                    let l = new_linker(&e)?;
                    async_engine = Some((e, l));
                }
                async_engine
                    .as_ref()
                    .map(|(e, _)| e)
                    .context("the engine with component-model-async was not built")
            })?;
            let linker = match (compiled, &async_engine) {
                (Compiled::Concurrent, Some((_, l))) => l,
                _ => &linker,
            };
            let env = envs
                .get(id)
                .cloned()
                .with_context(|| format!("no capability environment for component `{id}`"))?;
            let loaded = prepare(manifest, decl, &component, linker, env)?;
            components.insert(id.clone(), Arc::new(loaded));
        }

        let stop_ticker = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ticker_engines: Vec<Engine> = std::iter::once(engine.clone())
            .chain(async_engine.as_ref().map(|(e, _)| e.clone()))
            .collect();
        let stop = stop_ticker.clone();
        let epoch_ticker = std::thread::Builder::new()
            .name("lethe-epoch".into())
            .spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    for e in &ticker_engines {
                        e.increment_epoch();
                    }
                }
            })
            .context("cannot start the epoch ticker")?;
        Ok(Runtime {
            engine,
            linker,
            async_engine,
            components,
            cache_dir: cache_dir.map(Path::to_path_buf),
            epoch_ticker: Some(epoch_ticker),
            stop_ticker,
        })
    }

    /// Compiles component `id` again from its source as it is now (after a rebuild), with the
    /// same grants check, limits and capability environment as at start, and returns it; the
    /// component loaded at start is left as it was, so work under way on it finishes there.
    /// A component that now needs component-model-async when no engine at start did is refused:
    /// that takes a restart.
    pub fn reload(&self, manifest: &Manifest, id: &str) -> anyhow::Result<Arc<LoadedComponent>> {
        let decl = manifest
            .components
            .get(id)
            .with_context(|| format!("no component `{id}` in the manifest"))?;
        let current = self
            .component(id)
            .with_context(|| format!("no component `{id}` was loaded at start"))?;
        let bytes = read_source(id, &decl.source)?;
        grants::check(id, &decl.grants, &bytes)?;
        let cache_dir = self.cache_dir.as_deref();
        let (component, compiled) =
            compile_for_either(id, &bytes, cache_dir, &self.engine, || {
                self.async_engine.as_ref().map(|(e, _)| e).with_context(|| {
                    format!(
                        "component `{id}` does not compile for the plain engine, and no component \
                         at start needed component-model-async (if it now lifts an export with \
                         the async ABI, restart lethe)"
                    )
                })
            })?;
        let linker = match (compiled, &self.async_engine) {
            (Compiled::Concurrent, Some((_, l))) => l,
            _ => &self.linker,
        };
        Ok(Arc::new(prepare(
            manifest,
            decl,
            &component,
            linker,
            current.env.clone(),
        )?))
    }

    /// The plain engine (without component-model-async). A component's own engine is
    /// [`LoadedComponent::engine`].
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The engine with component-model-async, if some component needed it.
    pub fn async_engine(&self) -> Option<&Engine> {
        self.async_engine.as_ref().map(|(e, _)| e)
    }

    /// The component with `id`, as loaded at start.
    pub fn component(&self, id: &str) -> Option<&Arc<LoadedComponent>> {
        self.components.get(id)
    }

    /// All components, by id.
    pub fn components(&self) -> impl Iterator<Item = &Arc<LoadedComponent>> {
        self.components.values()
    }

    /// The mean cost of preparing one request's instance of component `id`: a fresh store plus
    /// instantiation from the `InstancePre` (for benchmarks).
    pub async fn measure_instantiation(
        &self,
        id: &str,
        iterations: u32,
    ) -> anyhow::Result<Duration> {
        let component = self
            .component(id)
            .with_context(|| format!("no component `{id}`"))?;
        let start = std::time::Instant::now();
        for _ in 0..iterations {
            let mut store = component.new_store();
            component.pre.instantiate_async(&mut store).await?;
        }
        Ok(start.elapsed() / iterations.max(1))
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_ticker
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.epoch_ticker.take() {
            let _ = t.join();
        }
    }
}

impl LoadedComponent {
    /// The engine this component was compiled for (see [`Runtime`]).
    pub fn engine(&self) -> &Engine {
        self.pre.component().engine()
    }

    /// A fresh store for one request or tick, with this component's limits and capabilities.
    pub fn new_store(&self) -> Store<InstanceState> {
        let engine = self.engine();
        let caps = Capabilities::new(self.env.clone(), self.limits.timeout);
        let state = InstanceState::new(self.limits.memory_bytes, caps);
        let mut store = Store::new(engine, state);
        store.limiter(|s| s.limiter());
        let ticks = (self.limits.timeout.as_millis() / EPOCH_TICK.as_millis()).max(1);
        store.set_epoch_deadline(u64::try_from(ticks).unwrap_or(u64::MAX));
        store.epoch_deadline_trap();
        store
    }
}

/// Pre-links `component` (whose imports [`grants::check`] allowed) with `linker`.
fn prepare(
    manifest: &Manifest,
    decl: &ComponentDecl,
    component: &Component,
    linker: &Linker<InstanceState>,
    env: Arc<CapabilityEnv>,
) -> anyhow::Result<LoadedComponent> {
    let id = &decl.id;
    let pre = linker.instantiate_pre(component).map_err(|e| {
        anyhow::Error::from(e).context(format!(
            "component `{id}` imports something lethe cannot supply"
        ))
    })?;
    let limits = Limits {
        timeout: Duration::from_millis(
            decl.grants
                .timeout_ms
                .unwrap_or(manifest.settings.timeout_ms),
        ),
        memory_bytes: usize::try_from(memory_limit_mb(manifest, decl) * 1024 * 1024)
            .context("memory limit too large")?,
    };
    Ok(LoadedComponent {
        id: Arc::from(id.as_str()),
        pre,
        limits,
        env,
    })
}

fn memory_limit_mb(manifest: &Manifest, decl: &ComponentDecl) -> u64 {
    decl.grants
        .memory_limit_mb
        .unwrap_or(manifest.settings.memory_limit_mb)
}

/// Everything lethe supplies to components, for `engine`.
fn new_linker(engine: &Engine) -> anyhow::Result<Linker<InstanceState>> {
    let mut linker: Linker<InstanceState> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    // The same `wasi:io` functions again, reaching the table without the WASI context.
    linker.allow_shadowing(true);
    wasmtime_wasi_io::add_to_linker_async(&mut linker)?;
    linker.allow_shadowing(false);
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)?;
    crate::caps::add_to_linker(&mut linker, |state: &mut InstanceState| {
        state.caps.view(&mut state.table)
    })?;
    Ok(linker)
}

/// An engine; `concurrency` enables component-model-async, which components lifting an export
/// with the async ABI (Spin's `handle-cron-event` is an `async func`) need. With it, every
/// `call_async` in the engine's stores runs as a concurrent task of its store (sync-lifted exports
/// included), which costs a little on every call and host call; hence a separate engine.
fn build_engine(
    max_memory_mb: u64,
    max_instances: u32,
    concurrency: bool,
) -> anyhow::Result<Engine> {
    let mut config = Config::new();
    config.wasm_component_model(true);
    config.concurrency_support(concurrency);
    config.wasm_component_model_async(concurrency);
    config.epoch_interruption(true);
    config.parallel_compilation(true);
    // `perf` sees JIT code as anonymous memory; a perf map names each component function.
    if std::env::var("LETHE_PROFILE").is_ok_and(|v| v == "perfmap") {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    let mut pool = PoolingAllocationConfig::default();
    let max_memory =
        usize::try_from(max_memory_mb * 1024 * 1024).context("memory limit too large")?;
    pool.total_component_instances(max_instances)
        .total_core_instances(max_instances.saturating_mul(4))
        .total_memories(max_instances.saturating_mul(2))
        .total_tables(max_instances.saturating_mul(4))
        .total_stacks(max_instances)
        .max_memory_size(max_memory)
        // Every request frees an instance: its memory and tables are reset by a memset of the
        // pages it dirtied (found with `PAGEMAP_SCAN`), up to these sizes, rather than by
        // madvise, so reuse costs no page faults.
        .linear_memory_keep_resident(1 << 20)
        .table_keep_resident(64 << 10)
        // No batching: wasmtime queues a zero-length decommit for every reset that needed none,
        // and batches of those cost a `process_madvise` call every few requests and keep freed
        // slots from reuse until flushed. A batch of one frees them at once, with no syscall.
        .decommit_batch_size(1)
        .pagemap_scan(wasmtime::Enabled::Auto);
    config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Ok(Engine::new(&config)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::Full;
    use wasmtime_wasi_http::WasiHttpView as _;
    use wasmtime_wasi_http::p2::bindings::ProxyPre;
    use wasmtime_wasi_http::p2::bindings::http::types::Scheme;

    fn misbehave() -> LoadedComponent {
        let engine = build_engine(16, 4, false).expect("engine");
        let linker = new_linker(&engine).expect("linker");
        let source = Path::new(crate::COMPONENTS_DIR).join("misbehave.wasm");
        let component = Component::from_file(&engine, source).expect("component");
        LoadedComponent {
            id: Arc::from("misbehave"),
            pre: linker.instantiate_pre(&component).expect("pre-link"),
            limits: Limits {
                timeout: Duration::from_secs(5),
                memory_bytes: 16 << 20,
            },
            env: Arc::new(CapabilityEnv::bare("misbehave", Default::default())),
        }
    }

    /// Runs one request for `path`; returns the store and the status the component answered.
    async fn serve(component: &LoadedComponent, path: &str) -> (Store<InstanceState>, Option<u16>) {
        let mut store = component.new_store();
        let request = hyper::Request::builder()
            .uri(format!("http://localhost{path}"))
            .header("spin-path-info", path)
            .body(Full::new(Bytes::new()))
            .expect("request");
        let incoming = store
            .data_mut()
            .http()
            .new_incoming_request(Scheme::Http, request)
            .expect("incoming request");
        let (sender, mut receiver) = tokio::sync::oneshot::channel();
        let out = store
            .data_mut()
            .http()
            .new_response_outparam(sender)
            .expect("outparam");
        let pre = ProxyPre::new(component.pre.clone()).expect("proxy");
        let proxy = pre.instantiate_async(&mut store).await.expect("instance");
        let _ = proxy
            .wasi_http_incoming_handler()
            .call_handle(&mut store, incoming, out)
            .await;
        // The call has returned, so whatever the component set is there (an outparam it left
        // unset lives on in the store's table: waiting would never end).
        let status = match receiver.try_recv() {
            Ok(Ok(response)) => Some(response.status().as_u16()),
            _ => None,
        };
        (store, status)
    }

    #[tokio::test]
    async fn the_wasi_context_is_built_only_for_a_component_that_uses_it() {
        let component = misbehave();
        // wasi:http and wasi:io (the body stream) reach the table alone.
        let (store, status) = serve(&component, "/ok").await;
        assert_eq!(status, Some(200));
        assert!(
            store.data().wasi.is_none(),
            "answering built the WASI context"
        );
        // A panic writes its message to stderr, which needs the context: it is built then.
        let (store, status) = serve(&component, "/trap").await;
        assert_eq!(status, None);
        assert!(
            store.data().wasi.is_some(),
            "the panic message had no stderr"
        );
    }
}
