//! The WebAssembly edges: the three exports, over lethe-guest's host.

use data_jobs_core::{Env as _, Level};
use lethe_guest::host::Host;

lethe_guest::reconciler_bindings!("lethe:platform/data-jobs");

use exports::lethe::platform::reconciler;

struct DataJobs;

impl wasip2::exports::http::incoming_handler::Guest for DataJobs {
    fn handle(
        request: wasip2::http::types::IncomingRequest,
        out: wasip2::http::types::ResponseOutparam,
    ) {
        lethe_guest::wasi_http::serve(request, out, |req| {
            data_jobs_core::api::handle(&Host::default(), &req)
        });
    }
}

impl reconciler::Guest for DataJobs {
    fn reconcile() -> Result<reconciler::Report, String> {
        let tick = data_jobs_core::sync::tick(&Host::default())?;
        Ok(lethe_guest::wit_report!(reconciler, tick.into()))
    }
}

impl Guest for DataJobs {
    async fn handle_cron_event(
        _metadata: spin::cron::cron_types::Metadata,
    ) -> Result<(), spin::cron::cron_types::Error> {
        let host = Host::default();
        match data_jobs_core::sync::tick(&host) {
            Ok(data_jobs_core::sync::Tick::Ran(_)) => Ok(()),
            Ok(data_jobs_core::sync::Tick::NotLeader { holder }) => {
                host.log(
                    Level::Debug,
                    &format!("not the leader (lease held by {holder}); skipping this tick"),
                );
                Ok(())
            }
            Err(e) => Err(spin::cron::cron_types::Error::Other(e)),
        }
    }
}

wasip2::http::proxy::export!(DataJobs);
export!(DataJobs);
