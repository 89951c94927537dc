//! Export bindings of lethe's handler worlds, for components built outside this repository.
//!
//! A component's own `wit_bindgen::generate!` would need lethe's `wit/` at a path relative to
//! its crate; the SDK generates each handler world once, here, with the capability imports
//! mapped onto [`crate::host::bindings`] (so [`crate::host::Host`] serves them), and exports a
//! macro that wires a component's implementation in:
//!
//! ```ignore
//! use lethe_guest::handlers::job_status::exports::lethe::platform::{configuration, job_status};
//! struct Component;
//! impl job_status::Guest for Component { /* get */ }
//! impl configuration::Guest for Component { /* check */ }
//! lethe_guest::handlers::job_status::export_job_status_handler!(Component);
//! ```
//!
//! Each world's bindings are behind a feature of their own (`job-status-handler`,
//! `reconciler-handler`), so that components which do not export it carry nothing of it. A
//! component exports one world, so one feature at a time: both export `configuration`, and
//! wit-bindgen's exported helper macros would clash by name at the crate root.

#[cfg(all(feature = "job-status-handler", feature = "reconciler-handler"))]
compile_error!(
    "lethe-guest: enable one handler world at a time (`job-status-handler` or `reconciler-handler`): a component exports one world"
);

/// The world `lethe:platform/kube-job-status-handler`: imports `kube`, `log` and `config`, and
/// exports `job-status` (and the `types` it uses) and `configuration`. Wire an implementation in
/// with `export_job_status_handler!`.
#[cfg(feature = "job-status-handler")]
#[allow(missing_docs)]
pub mod job_status {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/kube-job-status-handler",
        with: {
            "lethe:platform/kube@0.1.0": crate::host::bindings::lethe::platform::kube,
            "lethe:platform/log@0.1.0": crate::host::bindings::lethe::platform::log,
            "lethe:platform/config@0.1.0": crate::host::bindings::lethe::platform::config,
        },
        pub_export_macro: true,
        export_macro_name: "export_job_status_handler",
        default_bindings_module: "lethe_guest::handlers::job_status",
    });

    use exports::lethe::platform::types;

    impl From<crate::cf::JobState> for types::JobState {
        fn from(state: crate::cf::JobState) -> Self {
            match state {
                crate::cf::JobState::Processing => types::JobState::Processing,
                crate::cf::JobState::Complete => types::JobState::Complete,
                crate::cf::JobState::Failed => types::JobState::Failed,
                crate::cf::JobState::Polling => types::JobState::Polling,
            }
        }
    }

    impl From<crate::cf::CfError> for types::CfError {
        fn from(e: crate::cf::CfError) -> Self {
            types::CfError {
                code: e.code,
                title: e.title,
                detail: e.detail,
            }
        }
    }

    impl From<crate::cf::HttpError> for types::HttpError {
        fn from(e: crate::cf::HttpError) -> Self {
            types::HttpError {
                status: e.status,
                errors: e.errors.into_iter().map(Into::into).collect(),
            }
        }
    }
}

/// The world `lethe:platform/scheduled-reconciler`: imports `kube`, `sql`, `log` and `config`,
/// and exports `reconciler` (a pass, with its report, which lethe calls), `configuration`, and
/// Spin's `handle-cron-event` (the root [`reconciler::Guest`]: the same pass, on Spin's cron
/// trigger). Wire an implementation in with `export_reconciler_handler!`; build the report with
/// [`crate::wit_report!`]`(lethe_guest::handlers::reconciler::exports::lethe::platform::reconciler, report)`.
#[cfg(feature = "reconciler-handler")]
#[allow(missing_docs)]
pub mod reconciler {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/scheduled-reconciler",
        with: {
            "lethe:platform/kube@0.1.0": crate::host::bindings::lethe::platform::kube,
            "lethe:platform/sql@0.1.0": crate::host::bindings::lethe::platform::sql,
            "lethe:platform/log@0.1.0": crate::host::bindings::lethe::platform::log,
            "lethe:platform/config@0.1.0": crate::host::bindings::lethe::platform::config,
            "spin:cron/cron-types@3.0.0": generate,
        },
        pub_export_macro: true,
        export_macro_name: "export_reconciler_handler",
        default_bindings_module: "lethe_guest::handlers::reconciler",
    });
}
