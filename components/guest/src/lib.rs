//! Guest-side helpers shared by lethe's components.
//!
//! The request/response model, the CF V3 error envelope, and the [`kube::Kube`] and [`env::Env`]
//! traits are plain Rust, so that component logic can be unit-tested natively; only [`wasi_http`]
//! and [`host`] touch WebAssembly bindings, and they exist only when compiling for wasm.

pub mod cf;
pub mod env;
#[cfg(target_arch = "wasm32")]
pub mod host;
pub mod http;
pub mod kube;
#[cfg(target_arch = "wasm32")]
pub mod wasi_http;

pub use http::{Headers, MAX_BODY_BYTES as MAX_BODY, Request, Response};
