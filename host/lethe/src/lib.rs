//! lethe: a host that runs asynchronous deletion, job-status and reconciliation components
//! (WebAssembly, wasm32-wasip2) from a Spin v2 manifest, with Kubernetes and SQL capabilities.
//!
//! The layout follows the architecture:
//! - [`manifest`]: the Spin v2 manifest and lethe's grants;
//! - [`runtime`]: the wasmtime engine, compiled and pre-linked components, per-instance stores;
//! - [`grants`]: the import check that refuses ungranted capabilities at start;
//! - [`identity`]: who a bearer token is (`TokenReview`, cached);
//! - [`caps`]: the capabilities (`log`, `config`, `sql`, `kube`);
//! - [`trigger`]: HTTP and cron triggers;
//! - [`metrics`]: the Prometheus metrics the triggers and capabilities record;
//! - [`admin`]: the admin listener (`/healthz`, `/readyz`, `/metrics`, `/lethe/status`);
//! - [`status_page`]: the HTML status page;
//! - [`configure`]: configuring an application (manifest, database, cluster, capability
//!   environments, components), shared by `lethe up` and `lethe sync`;
//! - [`app`]: serving it all for `lethe up`;
//! - [`service_account`]: the host's own identity on the embedded cluster;
//! - [`sync`]: `lethe sync --once`, one reconciler pass outside the schedule;
//! - [`scaffold`]: `lethe new`, a component from a template;
//! - [`component_build`]: `lethe build`, the manifest's build commands;
//! - [`watch`]: `lethe up --watch`, a component rebuilt and swapped in when its sources change.

pub mod admin;
pub mod app;
pub mod caps;
pub mod component_build;
pub mod configure;
pub mod databases;
pub mod grants;
pub mod host_error;
pub mod identity;
pub mod kubernetes_manifests;
pub mod manifest;
pub mod metrics;
pub mod migrations;
pub mod runtime;
pub mod scaffold;
pub mod service_account;
pub mod status_page;
pub mod sync;
pub mod trigger;
pub mod watch;

/// Where the build script put the wasm32-wasip2 components of this tree.
pub const COMPONENTS_DIR: &str = env!("LETHE_COMPONENTS_DIR");

/// The root of the source tree this binary was built from (for locating `spin.toml` in tests).
pub const REPO_ROOT: &str = env!("LETHE_REPO_ROOT");

/// Every request allocates and frees a store, an instance's host state and its HTTP messages, often
/// on different worker threads; glibc's allocator spent about 8 % of the request path there
/// (BENCHMARKS.md). Declared in the library so the binary, its benchmarks and its tests all run on
/// the allocator the binary ships with.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
