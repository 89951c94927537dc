//! The `cf-job-status` component: `GET /v3/jobs/{guid}` over `wasi:http/incoming-handler`, and the
//! `lethe:platform/job-status` export. A job's state is derived from the live resource (see
//! [`cf_core::jobs`]).

#[cfg(target_arch = "wasm32")]
mod wasm {
    use cf_core::config::Settings;
    use lethe_guest::env::Env as _;
    use lethe_guest::host::Host;
    use lethe_guest::kube::Identity;

    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/job-status-handler",
        with: {
            "lethe:platform/kube@0.1.0": lethe_guest::host::bindings::lethe::platform::kube,
            "lethe:platform/sql@0.1.0": lethe_guest::host::bindings::lethe::platform::sql,
            "lethe:platform/log@0.1.0": lethe_guest::host::bindings::lethe::platform::log,
            "lethe:platform/config@0.1.0": lethe_guest::host::bindings::lethe::platform::config,
        },
    });

    use exports::lethe::platform::job_status::Guest;
    use exports::lethe::platform::types::{CfError, HttpError, Job, JobState};

    struct CfJobStatus;

    impl wasip2::exports::http::incoming_handler::Guest for CfJobStatus {
        fn handle(
            request: wasip2::http::types::IncomingRequest,
            out: wasip2::http::types::ResponseOutparam,
        ) {
            lethe_guest::wasi_http::serve(request, out, |req| {
                let guid = req.route_param("guid").unwrap_or_default();
                let host = Host::default();
                if data_jobs_core::status::is_data_job_guid(&guid) {
                    return data_jobs_core::api::handle_with(
                        &host,
                        &data_jobs_settings(&host),
                        &req,
                    );
                }
                cf_core::jobs::handle(&host, &host, &req)
            });
        }
    }

    impl Guest for CfJobStatus {
        fn get(job_guid: String, caller_token: String) -> Result<Job, HttpError> {
            let host = Host::default();
            if data_jobs_core::status::is_data_job_guid(&job_guid) {
                let settings = data_jobs_settings(&host);
                let job =
                    data_jobs_core::api::deletion_job(&host, &settings, &caller_token, &job_guid)
                        .map_err(to_wit)?;
                return Ok(Job {
                    guid: job.guid,
                    operation: job.operation,
                    state: to_wit_state(job.state),
                    errors: job.errors.into_iter().map(to_wit_error).collect(),
                    warnings: job.warnings,
                    created_at: job.created_at,
                    updated_at: job.updated_at,
                });
            }
            let settings = Settings::from_env(&host)
                .map_err(|e| to_wit(cf_core::errors::HttpError::unavailable(e)))?;
            let job = cf_core::jobs::job_status(
                &host,
                &host,
                &settings,
                &job_guid,
                &Identity::Caller(caller_token),
            )
            .map_err(to_wit)?;
            Ok(Job {
                guid: job.guid.render(),
                operation: job.guid.operation(),
                state: to_wit_state(job.state),
                errors: job.errors.into_iter().map(to_wit_error).collect(),
                warnings: job.warnings,
                created_at: job.created_at,
                updated_at: job.updated_at,
            })
        }
    }

    /// The data-jobs settings as this component reads them: `deployment.delete~` and
    /// `data_job.delete~` jobs are answered by [`data_jobs_core`], which reads `namespace`,
    /// `deletion_timeout_seconds` and `base_url`; here those are the variables
    /// `data_jobs_namespace`, `data_jobs_deletion_timeout_seconds` and `external_url`, so they
    /// cannot be confused with the CF settings of the same short names.
    fn data_jobs_settings(host: &Host) -> data_jobs_core::Settings {
        data_jobs_core::Settings::from_config(&|key| {
            host.config(match key {
                "namespace" => "data_jobs_namespace",
                "deletion_timeout_seconds" => "data_jobs_deletion_timeout_seconds",
                "base_url" => "external_url",
                other => other,
            })
        })
    }

    fn to_wit_state(state: lethe_guest::cf::JobState) -> JobState {
        match state {
            lethe_guest::cf::JobState::Processing => JobState::Processing,
            lethe_guest::cf::JobState::Complete => JobState::Complete,
            lethe_guest::cf::JobState::Failed => JobState::Failed,
            lethe_guest::cf::JobState::Polling => JobState::Polling,
        }
    }

    fn to_wit_error(c: lethe_guest::cf::CfError) -> CfError {
        CfError {
            code: c.code,
            title: c.title,
            detail: c.detail,
        }
    }

    fn to_wit(e: cf_core::errors::HttpError) -> HttpError {
        HttpError {
            status: e.status,
            errors: e.errors.into_iter().map(to_wit_error).collect(),
        }
    }

    /// Checked by the host before the component serves: a malformed `job_types` or number stops
    /// the start, naming the variable.
    impl exports::lethe::platform::configuration::Guest for CfJobStatus {
        fn check() -> Result<(), String> {
            Settings::from_env(&Host::default()).map(drop)
        }
    }

    wasip2::http::proxy::export!(CfJobStatus);
    export!(CfJobStatus);
}
