//! The WebAssembly edges: `wasi:http/incoming-handler` (the API), and the exports of the world
//! `lethe:platform/scheduled-reconciler` from the guest SDK: `reconciler` (a pass, with its
//! report, which lethe's cron trigger calls), Spin's `handle-cron-event` (the same pass on Spin)
//! and `configuration` (checked by lethe at start).

use lethe_guest::env::{Env as _, Level};
use lethe_guest::handlers::reconciler::exports::lethe::platform::reconciler;
use lethe_guest::handlers::reconciler::spin::cron::cron_types;
use lethe_guest::host::Host;

struct Component;

impl wasip2::exports::http::incoming_handler::Guest for Component {
    fn handle(
        request: wasip2::http::types::IncomingRequest,
        out: wasip2::http::types::ResponseOutparam,
    ) {
        let host = Host::default();
        lethe_guest::wasi_http::serve(request, out, |req| crate::api::handle(&host, &req));
    }
}

impl reconciler::Guest for Component {
    fn reconcile() -> Result<reconciler::Report, String> {
        let report = crate::reconcile::tick(&Host::default(), false)?;
        Ok(lethe_guest::wit_report!(reconciler, report))
    }
}

impl lethe_guest::handlers::reconciler::Guest for Component {
    async fn handle_cron_event(_metadata: cron_types::Metadata) -> Result<(), cron_types::Error> {
        let host = Host::default();
        match crate::reconcile::tick(&host, false) {
            Ok(report) => {
                if let Some(holder) = report.leader_elsewhere {
                    host.log(
                        Level::Debug,
                        &format!("not the leader ({holder} is); no pass"),
                    );
                }
                Ok(())
            }
            Err(e) => Err(cron_types::Error::Other(e)),
        }
    }
}

impl lethe_guest::handlers::configuration::Guest for Component {
    fn check() -> Result<(), String> {
        crate::check_configuration(&Host::default())
    }
}

wasip2::http::proxy::export!(Component);
lethe_guest::handlers::reconciler::export_reconciler_handler!(Component);
