//! Export bindings of lethe's handler worlds, for components built outside this repository.
//!
//! A component's own `wit_bindgen::generate!` would need lethe's `wit/` at a path relative to
//! its crate; the SDK generates each handler world once, here, with the capability imports
//! mapped onto [`crate::host::bindings`] (so [`crate::host::Host`] serves them), and exports a
//! macro that wires a component's implementation in:
//!
//! ```ignore
//! use lethe_guest::handlers::job_status::exports::lethe::platform::job_status;
//! struct Component;
//! impl job_status::Guest for Component { /* get */ }
//! impl lethe_guest::handlers::configuration::Guest for Component { /* check */ }
//! lethe_guest::handlers::job_status::export_job_status_handler!(Component);
//! ```
//!
//! Each world's bindings are behind a feature of their own (`job-status-handler`,
//! `reconciler-handler`), so that components which do not export it carry nothing of it. Both
//! features may be on at once, as they are when a workspace holds one component of each (Cargo
//! unifies a dependency's features across a workspace). That is why each world is bound in two
//! parts, its exports but `configuration` (the WIT world `kube-job-status` or `scheduled-pass`)
//! and [`configuration`] (the world `configuration-check`), which the component then exports
//! together: wit-bindgen names its exported helper macros after the interface, so two bindings
//! of `configuration` in one crate would clash at the crate root.

/// The export `lethe:platform/configuration` that every handler world has: implement
/// [`configuration::Guest`] once; the handler's export macro exports it with the rest.
#[cfg(any(feature = "job-status-handler", feature = "reconciler-handler"))]
#[allow(missing_docs)]
pub mod configuration {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/configuration-check",
        with: {
            "lethe:platform/config@0.1.0": crate::host::bindings::lethe::platform::config,
        },
        pub_export_macro: true,
        export_macro_name: "export_configuration",
        default_bindings_module: "lethe_guest::handlers::configuration",
    });

    pub use exports::lethe::platform::configuration::Guest;
}

/// Exports a job-status handler: `T` implements
/// [`handlers::job_status::exports::lethe::platform::job_status::Guest`](crate::handlers::job_status)
/// and [`handlers::configuration::Guest`](crate::handlers::configuration::Guest).
#[cfg(feature = "job-status-handler")]
#[macro_export]
macro_rules! export_job_status_handler {
    ($ty:ident) => {
        $crate::handlers::job_status::export_world!($ty);
        $crate::handlers::configuration::export_configuration!($ty);
    };
}

/// Exports a reconciler: `T` implements
/// [`handlers::reconciler::exports::lethe::platform::reconciler::Guest`](crate::handlers::reconciler),
/// Spin's cron handler [`handlers::reconciler::Guest`](crate::handlers::reconciler) and
/// [`handlers::configuration::Guest`](crate::handlers::configuration::Guest).
#[cfg(feature = "reconciler-handler")]
#[macro_export]
macro_rules! export_reconciler_handler {
    ($ty:ident) => {
        $crate::handlers::reconciler::export_world!($ty);
        $crate::handlers::configuration::export_configuration!($ty);
    };
}

/// The world `lethe:platform/kube-job-status-handler`: imports `kube`, `log` and `config`, and
/// exports `job-status` (and the `types` it uses) and [`configuration`]. Wire an implementation in
/// with `export_job_status_handler!`.
#[cfg(feature = "job-status-handler")]
#[allow(missing_docs)]
pub mod job_status {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/kube-job-status",
        with: {
            "lethe:platform/kube@0.1.0": crate::host::bindings::lethe::platform::kube,
            "lethe:platform/log@0.1.0": crate::host::bindings::lethe::platform::log,
            "lethe:platform/config@0.1.0": crate::host::bindings::lethe::platform::config,
        },
        pub_export_macro: true,
        export_macro_name: "export_world",
        default_bindings_module: "lethe_guest::handlers::job_status",
    });

    pub use crate::export_job_status_handler;

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
/// and exports `reconciler` (a pass, with its report, which lethe calls), [`configuration`], and
/// Spin's `handle-cron-event` (the root [`reconciler::Guest`]: the same pass, on Spin's cron
/// trigger). Wire an implementation in with `export_reconciler_handler!`; build the report with
/// [`crate::wit_report!`]`(lethe_guest::handlers::reconciler::exports::lethe::platform::reconciler, report)`.
#[cfg(feature = "reconciler-handler")]
#[allow(missing_docs)]
pub mod reconciler {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/scheduled-pass",
        with: {
            "lethe:platform/kube@0.1.0": crate::host::bindings::lethe::platform::kube,
            "lethe:platform/sql@0.1.0": crate::host::bindings::lethe::platform::sql,
            "lethe:platform/log@0.1.0": crate::host::bindings::lethe::platform::log,
            "lethe:platform/config@0.1.0": crate::host::bindings::lethe::platform::config,
            "spin:cron/cron-types@3.0.0": generate,
        },
        pub_export_macro: true,
        export_macro_name: "export_world",
        default_bindings_module: "lethe_guest::handlers::reconciler",
    });

    pub use crate::export_reconciler_handler;
}
