//! Guest-side helpers shared by lethe's components.
//!
//! The request/response model, the CF V3 error envelope, the [`kube::Kube`], [`sql::Sql`] and
//! [`env::Env`] traits and the one [`backoff`] formula are plain Rust, so that component logic
//! can be unit-tested natively, against the one in-memory host in `fake` (feature `fake`). Only
//! `wasi_http` and `host` touch WebAssembly bindings, and they exist only when compiling for
//! wasm.

// The SDK is a public API (CHANGELOG.md): an undocumented public item does not build.
#![deny(missing_docs)]

pub mod backoff;
pub mod cf;
pub mod conditions;
pub mod controller;
pub mod env;
pub mod events;
#[cfg(feature = "fake")]
pub mod fake;
pub mod feed;
pub mod finalizer;
pub mod follow;
#[cfg(target_arch = "wasm32")]
pub mod handlers;
#[cfg(target_arch = "wasm32")]
pub mod host;
pub mod http;
pub mod kept;
pub mod kube;
pub mod lease;
pub mod reconciler;
pub mod sql;
#[cfg(target_arch = "wasm32")]
pub mod wasi_http;

pub use http::{Headers, MAX_BODY_BYTES as MAX_BODY, Request, Response};

/// Everything the host supplies to component logic: Kubernetes, SQL, and clock, configuration,
/// log and randomness. Logic that needs all three takes `&dyn Capabilities`; the wasm
/// `host::Host` and the tests' fakes implement it. What a component calls is what it imports,
/// and so what its manifest must grant: a `&dyn Capabilities` links every method (its vtable
/// holds them all), so logic that needs only Kubernetes takes `&dyn Kube` and `&dyn Env`
/// instead, and its component imports no `sql`.
pub trait Capabilities: kube::Kube + env::Env + sql::Sql {}

impl<T: kube::Kube + env::Env + sql::Sql + ?Sized> Capabilities for T {}
