//! The wasmtime runtime: one engine, one linker, every component compiled once and pre-linked,
//! and a fresh, limited store for every request or tick (the shape of `wasmtime serve`).
//!
//! * [`cache`]: the compiled-component cache every data dir of a user shares;
//! * [`compile`]: reading a component and compiling it for the engine it needs, through the cache;
//! * [`state`]: what one instance holds: its table, WASI contexts, limits and capabilities;
//! * [`call`]: the instance runner every trigger calls components through.

pub mod cache;
pub mod call;
mod compile;
mod state;

pub use state::{InstanceState, MemoryLimitExceeded};

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use wasmtime::component::{Component, InstancePre, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};

use cache::{ComponentCache, Origin};
use compile::{Compiled, compile_for_either, read_source};

use crate::caps::{Capabilities, CapabilityEnv};
use crate::grants;
use crate::manifest::{ComponentDecl, Manifest};

/// One component compiled (or loaded from the cache): the component, what the compile gave, and
/// where it came from.
type CompiledOne = (Component, Compiled, Origin);

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
    cache: Option<ComponentCache>,
    epoch_ticker: Option<std::thread::JoinHandle<()>>,
    stop_ticker: Arc<std::sync::atomic::AtomicBool>,
}

/// Every component of an application compiled (or loaded from the cache) for its engine, not yet
/// linked: the slow half of start-up, which needs nothing but the manifest, so that it can run
/// while the database and the cluster are being set up.
pub struct CompiledApp {
    engine: Engine,
    async_engine: Option<Engine>,
    components: BTreeMap<String, (Component, Compiled)>,
    cache: Option<ComponentCache>,
    /// How many components came from the cache.
    pub cached: usize,
    /// How many components were compiled now.
    pub compiled: usize,
}

impl CompiledApp {
    /// Builds the engine, checks every component's imports against its grants, and compiles
    /// each one (or loads it from `cache`), the components in parallel.
    pub fn compile(manifest: &Manifest, cache: Option<ComponentCache>) -> anyhow::Result<Self> {
        let max_memory = max_memory_mb(manifest);
        let max_instances = manifest.settings.max_instances;
        let engine = build_engine(max_memory, max_instances, false)?;
        // Built by the first component that needs it; a failure is told to each of them.
        let async_engine: std::sync::OnceLock<Result<Engine, String>> = std::sync::OnceLock::new();
        let concurrent = || {
            async_engine
                .get_or_init(|| {
                    build_engine(max_memory, max_instances, true).map_err(|e| format!("{e:#}"))
                })
                .as_ref()
                .map_err(|e| {
                    anyhow::anyhow!("cannot build the engine with component-model-async: {e}")
                })
        };
        let compile_one = |id: &str, decl: &ComponentDecl| {
            let bytes = read_source(id, &decl.source)?;
            grants::check(id, &decl.grants, &bytes)?;
            compile_for_either(id, &bytes, cache.as_ref(), &engine, concurrent)
        };
        // One thread a component: wasmtime spreads each component's functions over the cores
        // too, but the parts of a compile it cannot (parsing, validation, the artifact's
        // serialisation and write) overlap across components this way.
        let results: Vec<(String, anyhow::Result<CompiledOne>)> = std::thread::scope(|scope| {
            let running: Vec<_> = manifest
                .components
                .iter()
                .map(|(id, decl)| (id, scope.spawn(|| compile_one(id, decl))))
                .collect();
            running
                .into_iter()
                .map(|(id, thread)| {
                    let result = thread.join().unwrap_or_else(|_| {
                        Err(anyhow::anyhow!("compiling component `{id}` panicked"))
                    });
                    (id.clone(), result)
                })
                .collect()
        });
        let (mut cached, mut compiled) = (0, 0);
        let mut components = BTreeMap::new();
        for (id, result) in results {
            let (component, engine_kind, origin) = result?;
            match origin {
                Origin::Cached => cached += 1,
                Origin::Compiled => compiled += 1,
            }
            components.insert(id, (component, engine_kind));
        }
        let async_engine = async_engine.into_inner().and_then(Result::ok);
        Ok(CompiledApp {
            engine,
            async_engine,
            components,
            cache,
            cached,
            compiled,
        })
    }
}

impl Runtime {
    /// Pre-links each compiled component with its capability environment and starts the epoch
    /// ticker.
    pub fn link(
        manifest: &Manifest,
        compiled: CompiledApp,
        envs: BTreeMap<String, Arc<CapabilityEnv>>,
    ) -> anyhow::Result<Runtime> {
        let CompiledApp {
            engine,
            async_engine,
            components: compiled_components,
            cache,
            ..
        } = compiled;
        let linker = new_linker(&engine)?;
        let async_engine = match async_engine {
            Some(e) => {
                let l = new_linker(&e)?;
                Some((e, l))
            }
            None => None,
        };
        let mut components = BTreeMap::new();
        for (id, decl) in &manifest.components {
            let (component, engine_kind) = compiled_components
                .get(id)
                .with_context(|| format!("component `{id}` was not compiled"))?;
            let linker = match (engine_kind, &async_engine) {
                (Compiled::Concurrent, Some((_, l))) => l,
                _ => &linker,
            };
            let env = envs
                .get(id)
                .cloned()
                .with_context(|| format!("no capability environment for component `{id}`"))?;
            let loaded = prepare(manifest, decl, component, linker, env)?;
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
            cache,
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
        let (component, compiled, _) =
            compile_for_either(id, &bytes, self.cache.as_ref(), &self.engine, || {
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

    /// The compiled-component cache's directory, when there is a cache.
    pub fn cache_dir(&self) -> Option<&std::path::Path> {
        self.cache.as_ref().map(ComponentCache::dir)
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

    /// Releases the leader Leases every component holds for this host (on a clean stop, once no
    /// tick runs), each component as its own identity, side by side, within a few seconds.
    pub async fn release_leases(&self) {
        let within = Duration::from_secs(5);
        futures::future::join_all(
            self.components
                .values()
                .map(|c| c.env.release_leases(within)),
        )
        .await;
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

/// The largest memory limit of any component: the size of every slot of the engines' pools.
fn max_memory_mb(manifest: &Manifest) -> u64 {
    manifest
        .components
        .values()
        .map(|c| memory_limit_mb(manifest, c))
        .max()
        .unwrap_or(manifest.settings.memory_limit_mb)
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
    use std::path::Path;
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
