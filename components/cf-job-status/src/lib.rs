//! The `cf-job-status` component: `GET /v3/jobs/{guid}` over `wasi:http/incoming-handler`, and the
//! `lethe:platform/job-status` export. A job's state is derived from the live resource (see
//! [`cf_core::jobs`]).

#[cfg(target_arch = "wasm32")]
mod wasm {
    use cf_core::config::Settings;
    use data_jobs_core::guest::WasmHost;
    use data_jobs_core::{
        Host as DataHost, Sql as DataSql, SqlError as DataSqlError, Value as DataValue,
    };
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
            "lethe:platform/types@0.1.0": generate,
        },
    });

    use exports::lethe::platform::job_status::Guest;
    use lethe::platform::types::{CfError, HttpError, Job, JobState};

    struct CfJobStatus;

    impl wasip2::exports::http::incoming_handler::Guest for CfJobStatus {
        fn handle(
            request: wasip2::http::types::IncomingRequest,
            out: wasip2::http::types::ResponseOutparam,
        ) {
            lethe_guest::wasi_http::serve(request, out, |req| {
                let guid = req.route_param("guid").unwrap_or_default();
                if data_jobs_core::status::is_data_job_guid(&guid) {
                    return data_jobs_core::api::handle(&DataJobsHost(WasmHost), &req);
                }
                let host = Host::default();
                cf_core::jobs::handle(&host, &host, &req)
            });
        }
    }

    impl Guest for CfJobStatus {
        fn get(job_guid: String, caller_token: String) -> Result<Job, HttpError> {
            if data_jobs_core::status::is_data_job_guid(&job_guid) {
                return data_job(&job_guid, &caller_token);
            }
            let host = Host::default();
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
                state: match job.state {
                    cf_core::jobs::JobState::Processing => JobState::Processing,
                    cf_core::jobs::JobState::Complete => JobState::Complete,
                    cf_core::jobs::JobState::Failed => JobState::Failed,
                },
                errors: job.errors.into_iter().map(to_wit_error).collect(),
                warnings: Vec::new(),
                created_at: job.created_at,
                updated_at: job.updated_at,
            })
        }
    }

    /// A data-jobs deletion job through the same code path as `GET /v3/jobs/{guid}` (the caller's
    /// token is checked there), read back from its JSON.
    fn data_job(job_guid: &str, caller_token: &str) -> Result<Job, HttpError> {
        let req = lethe_guest::Request {
            method: "GET".into(),
            path: format!("/v3/jobs/{job_guid}"),
            headers: vec![(
                "authorization".into(),
                format!("Bearer {caller_token}").into_bytes(),
            )]
            .into(),
            ..Default::default()
        };
        let resp = data_jobs_core::api::handle(&DataJobsHost(WasmHost), &req);
        let body = resp.json_body().unwrap_or_default();
        let text = |key: &str| body[key].as_str().unwrap_or_default().to_string();
        let errors = |v: &serde_json::Value| -> Vec<CfError> {
            v.as_array()
                .map(|a| {
                    a.iter()
                        .map(|e| CfError {
                            code: e["code"]
                                .as_u64()
                                .and_then(|c| u32::try_from(c).ok())
                                .unwrap_or(10001),
                            title: e["title"].as_str().unwrap_or_default().to_string(),
                            detail: e["detail"].as_str().unwrap_or_default().to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        if resp.status != 200 {
            return Err(HttpError {
                status: resp.status,
                errors: errors(&body["errors"]),
            });
        }
        Ok(Job {
            guid: text("guid"),
            operation: text("operation"),
            state: match body["state"].as_str() {
                Some("COMPLETE") => JobState::Complete,
                Some("FAILED") => JobState::Failed,
                _ => JobState::Processing,
            },
            errors: errors(&body["errors"]),
            warnings: body["warnings"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|w| w.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            created_at: text("created_at"),
            updated_at: text("updated_at"),
        })
    }

    /// The data-jobs logic as this component runs it: `deployment.delete~` and `data_job.delete~`
    /// jobs are answered by [`data_jobs_core`], which reads `namespace`,
    /// `deletion_timeout_seconds` and `base_url`; here those are the variables
    /// `data_jobs_namespace`, `data_jobs_deletion_timeout_seconds` and `external_url`, so they
    /// cannot be confused with the CF settings of the same short names.
    struct DataJobsHost(WasmHost);

    impl DataSql for DataJobsHost {
        fn query(
            &self,
            sql: &str,
            params: &[DataValue],
        ) -> Result<Vec<Vec<DataValue>>, DataSqlError> {
            self.0.query(sql, params)
        }
        fn execute(&self, sql: &str, params: &[DataValue]) -> Result<u64, DataSqlError> {
            self.0.execute(sql, params)
        }
        fn batch(
            &self,
            statements: &[data_jobs_core::Statement],
        ) -> Result<Vec<u64>, DataSqlError> {
            self.0.batch(statements)
        }
    }

    impl DataHost for DataJobsHost {
        fn kube(
            &self,
            identity: data_jobs_core::Identity<'_>,
        ) -> Result<Box<dyn data_jobs_core::Kube + '_>, data_jobs_core::KubeError> {
            self.0.kube(identity)
        }
        fn config(&self, key: &str) -> Option<String> {
            let key = match key {
                "namespace" => "data_jobs_namespace",
                "deletion_timeout_seconds" => "data_jobs_deletion_timeout_seconds",
                "base_url" => "external_url",
                other => other,
            };
            self.0.config(key)
        }
        fn now_ms(&self) -> i64 {
            self.0.now_ms()
        }
        fn new_uuid(&self) -> String {
            self.0.new_uuid()
        }
        fn log(&self, level: data_jobs_core::Level, message: &str) {
            self.0.log(level, message)
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

    wasip2::http::proxy::export!(CfJobStatus);
    export!(CfJobStatus);
}
