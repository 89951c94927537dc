//! The WebAssembly edges: `wasi:http/incoming-handler` and the typed exports of the world
//! `lethe:platform/kube-job-status-handler` (`job-status`, `configuration`), from the guest SDK.

use lethe_guest::handlers::job_status::exports::lethe::platform::{job_status, types};
use lethe_guest::host::Host;
use lethe_guest::kube::Identity;

struct Component;

impl wasip2::exports::http::incoming_handler::Guest for Component {
    fn handle(
        request: wasip2::http::types::IncomingRequest,
        out: wasip2::http::types::ResponseOutparam,
    ) {
        let host = Host::default();
        lethe_guest::wasi_http::serve(request, out, |req| crate::handle(&host, &host, &req));
    }
}

impl job_status::Guest for Component {
    fn get(job_guid: String, caller_token: String) -> Result<types::Job, types::HttpError> {
        let host = Host::default();
        let job = crate::job(&host, &host, &job_guid, &Identity::Caller(caller_token))
            .map_err(types::HttpError::from)?;
        Ok(types::Job {
            guid: job.guid,
            operation: job.operation,
            state: job.state.into(),
            errors: job.errors.into_iter().map(Into::into).collect(),
            warnings: Vec::new(),
            created_at: job.created_at,
            updated_at: job.updated_at,
        })
    }
}

impl lethe_guest::handlers::configuration::Guest for Component {
    /// A `deletion_timeout_seconds` that is set must be a positive number of seconds.
    fn check() -> Result<(), String> {
        use lethe_guest::env::Env as _;
        match Host::default().config("deletion_timeout_seconds") {
            Some(v) if v.parse::<i64>().map_or(true, |s| s <= 0) => Err(format!(
                "configuration `deletion_timeout_seconds` must be a positive number of seconds, not `{v}`"
            )),
            _ => Ok(()),
        }
    }
}

wasip2::http::proxy::export!(Component);
lethe_guest::handlers::job_status::export_job_status_handler!(Component);
