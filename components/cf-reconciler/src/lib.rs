//! The `cf-reconciler` component: finalizes orgs and spaces being deleted (see
//! [`cf_core::reconcile`]). It runs on every tick of its `[[trigger.cron]]` and through the
//! `lethe:platform/reconciler` export, on the changes since the last pass
//! ([`cf_core::follow`]), with a full pass at the start and every `full_resync_seconds`; and a
//! full pass on demand over HTTP (`POST` to its route, as a caller who may list orgs).
//! Per-object backoff, bookmarks and the deletions under way live in SQL, so they survive
//! restarts and are shared by every host. With several hosts, only the holder of the Lease
//! `cf-reconciler` in the root namespace runs passes.

#[cfg(target_arch = "wasm32")]
mod wasm {
    use cf_core::config::Settings;
    use cf_core::follow::pass_on_changes;
    use cf_core::reconcile::Report;
    use lethe_guest::env::{Env, Level};
    use lethe_guest::host::Host;
    use lethe_guest::{Request, Response};
    use serde_json::json;

    lethe_guest::reconciler_bindings!("lethe:platform/scheduled-reconciler");

    use exports::lethe::platform::reconciler;

    /// One pass: on the changes since the last one, unless `full` asks to list everything.
    fn run_pass(full: bool) -> Result<Report, String> {
        let host = Host::default();
        let settings = Settings::from_env(&host)?;
        let backoff = cf_core::reconcile::load_backoff(&host, &host)
            .map_err(|e| format!("reading backoff state: {e}"))?;
        let report = pass_on_changes(&host, &host, &host, &settings, &backoff, full);
        let acted = report.created + report.updated + report.deleted > 0;
        if acted || !report.failed.is_empty() || report.deferred {
            // A pass cut short by its budget, pass after pass, never sweeps: worth a warning.
            let level = if report.deferred {
                Level::Warn
            } else {
                Level::Info
            };
            host.log(
                level,
                &format!(
                    "cf reconcile {} pass{}: examined {}, created {}, updated {}, deleted {}, backing off {}, failed {:?}, {} deletions under way, {} ms",
                    if report.full { "full" } else { "change" },
                    if report.deferred {
                        " (out of cf_pass_budget_ms: the rest waits for the next pass, which is full; if every full pass stops here, raise cf_pass_budget_ms or the component's kube_qps)"
                    } else {
                        ""
                    },
                    report.examined,
                    report.created,
                    report.updated,
                    report.deleted,
                    report.backing_off,
                    report.failed,
                    report.deletions.len(),
                    report.duration_ms
                ),
            );
        }
        Ok(report)
    }

    struct CfReconciler;

    impl reconciler::Guest for CfReconciler {
        fn reconcile() -> Result<reconciler::Report, String> {
            Ok(lethe_guest::wit_report!(
                reconciler,
                run_pass(false)?.into()
            ))
        }
    }

    impl Guest for CfReconciler {
        async fn handle_cron_event(
            _metadata: spin::cron::cron_types::Metadata,
        ) -> Result<(), spin::cron::cron_types::Error> {
            run_pass(false)
                .map(|_| ())
                .map_err(spin::cron::cron_types::Error::Other)
        }
    }

    impl wasip2::exports::http::incoming_handler::Guest for CfReconciler {
        fn handle(
            request: wasip2::http::types::IncomingRequest,
            out: wasip2::http::types::ResponseOutparam,
        ) {
            lethe_guest::wasi_http::serve(request, out, on_demand);
        }
    }

    /// `POST` runs a pass now and answers with its report. Only callers who may list every org
    /// (CF admins) may ask.
    fn on_demand(req: Request) -> Response {
        if req.method != "POST" {
            return cf_core::errors::HttpError::method_not_allowed().into_response();
        }
        let caller = match cf_core::access::caller(&req) {
            Ok(c) => c,
            Err(e) => return e.into_response(),
        };
        let host = Host::default();
        let settings = match Settings::from_env(&host) {
            Ok(s) => s,
            Err(e) => {
                host.log(Level::Error, &e);
                return cf_core::context::misconfigured();
            }
        };
        if let Err(refused) = cf_core::access::authorize_pass(&host, &caller, &settings) {
            return refused.into_response();
        }
        match run_pass(true) {
            Ok(r) => Response::json(
                200,
                &json!({
                    "examined": r.examined,
                    "created": r.created,
                    "updated": r.updated,
                    "deleted": r.deleted,
                    "backing_off": r.backing_off,
                    "failed": r.failed.iter().map(|(item, reason)| json!({"item": item, "reason": reason})).collect::<Vec<_>>(),
                    "duration_ms": r.duration_ms,
                    "full": r.full,
                    // Set when another host holds the Lease: it, not this one, runs passes.
                    "leader_elsewhere": r.leader_elsewhere,
                }),
            ),
            Err(e) => cf_core::errors::HttpError::unavailable(e).into_response(),
        }
    }

    /// Checked by the host before the component serves: a malformed `job_types` or number stops
    /// the start, naming the variable.
    impl exports::lethe::platform::configuration::Guest for CfReconciler {
        fn check() -> Result<(), String> {
            Settings::from_env(&Host::default()).map(drop)
        }
    }

    wasip2::http::proxy::export!(CfReconciler);
    export!(CfReconciler);
}
