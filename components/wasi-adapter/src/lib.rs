//! The `wasi-adapter` component: lethe's `kube`, `log` and `config` capabilities implemented with
//! standard WASI only, for hosts that lack them (Spin, `wasmtime serve`, any WASI 0.2 host with
//! `wasi:http`).
//!
//! Composed into a handler (with `wac`), it satisfies the handler's `lethe:platform` imports, so
//! the composed binary imports nothing but `wasi:*`:
//!
//! * **kube**: the Kubernetes REST API over `wasi:http/outgoing-handler`. The cluster is
//!   `LETHE_KUBE_URL`; the privileged identity's bearer token is `LETHE_KUBE_TOKEN`. Semantics
//!   (discovery, paths, retries, error cases, delete outcomes, metadata parsing) mirror the lethe
//!   host's own implementation (`host/kube`), so a component behaves the same on either host.
//! * **log**: one line per call on stderr, `[level] message`.
//! * **config**: environment variables `LETHE_VAR_<KEY>`, the names of lethe's own overrides.
//!
//! Built as the `spin-adapter` package (feature `spin`, the same sources), it is the adapter for
//! Spin instead: one component that exports every `lethe:platform` interface, so that a Spin
//! manifest's component `dependencies` supply the whole package. There `config` and the cluster
//! (`kube_url`, `kube_token`) are Spin variables, and `sql` is lethe's dialect over Spin's SQLite
//! (the logic lives in `spin-sqlite-adapter`).
//!
//! Everything that does not need WASI is plain Rust in [`config`], [`log`] and [`kube`], unit
//! tested natively; the WASI calls themselves sit in a private module compiled only for wasm32.

#![warn(missing_docs)]

pub mod config;
mod convert;
#[cfg(target_arch = "wasm32")]
mod edge;
pub mod kube;
pub mod log;
#[cfg(all(target_arch = "wasm32", feature = "spin"))]
mod spin;
#[cfg(target_arch = "wasm32")]
mod wasi;

/// Bindings of the `lethe:platform/wasi-adapter` world. Generated for every target, so that the
/// conversions between the WIT types and the shared model are tested natively too.
#[cfg(not(feature = "spin"))]
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/wasi-adapter",
        additional_derives: [PartialEq, Eq],
    });
}

/// Bindings of the `lethe:platform/spin-adapter` world: the same exports as `wasi-adapter` (so
/// every module but the edges is shared), plus `sql` and `types`, over Spin's imports.
#[cfg(feature = "spin")]
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/spin-adapter",
        additional_derives: [PartialEq],
        // Spin's interfaces come from wit/deps; generate them here rather than share bindings.
        generate_all,
    });
}
