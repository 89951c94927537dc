//! Guest-side helpers shared by lethe's components.
//!
//! The request/response model and the CF V3 error envelope are plain Rust so that component
//! logic can be unit-tested natively; only [`wasi_http`] touches the `wasi:http` bindings, and it
//! exists only when compiling for WebAssembly.

pub mod cf;
pub mod http;
#[cfg(target_arch = "wasm32")]
pub mod wasi_http;

pub use http::{MAX_BODY_BYTES as MAX_BODY, Request, Response};
