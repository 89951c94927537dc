//! The data-jobs component. The logic lives in [`data_jobs_core`]; this crate only adapts the
//! WIT imports (`sql`, `kube`, `config`, `log`) to its traits and exports:
//! - `wasi:http/incoming-handler`: [`data_jobs_core::api::handle`];
//! - `lethe:platform/reconciler`: one pass ([`data_jobs_core::sync::tick`]); an error when
//!   another host holds the Lease;
//! - `handle-cron-event` (Spin cron): one tick; not holding the Lease is not an error there.

pub use data_jobs_core;

#[cfg(target_arch = "wasm32")]
mod wasm;
