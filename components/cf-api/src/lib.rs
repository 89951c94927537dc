//! The `cf-api` component: Cloud Controller V3 root links, orgs and spaces over
//! `wasi:http/incoming-handler`, and the `lethe:platform/deletion` export for hosts that call
//! deletions directly. The logic is [`cf_core::api`] and [`cf_core::deletion`].

#[cfg(target_arch = "wasm32")]
mod wasm {
    use cf_core::config::Settings;
    use lethe_guest::host::Host;
    use lethe_guest::kube::Identity;

    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/deletion-handler",
        with: {
            "lethe:platform/kube@0.1.0": lethe_guest::host::bindings::lethe::platform::kube,
            "lethe:platform/log@0.1.0": lethe_guest::host::bindings::lethe::platform::log,
            "lethe:platform/config@0.1.0": lethe_guest::host::bindings::lethe::platform::config,
        },
    });

    use exports::lethe::platform::deletion::{DeletionRequest, Guest};
    use exports::lethe::platform::types::{CfError, HttpError};

    struct CfApi;

    impl wasip2::exports::http::incoming_handler::Guest for CfApi {
        fn handle(
            request: wasip2::http::types::IncomingRequest,
            out: wasip2::http::types::ResponseOutparam,
        ) {
            lethe_guest::wasi_http::serve(request, out, |req| {
                let host = Host::default();
                cf_core::api::handle(&host, &host, &req)
            });
        }
    }

    impl Guest for CfApi {
        fn delete(request: DeletionRequest) -> Result<String, HttpError> {
            let host = Host::default();
            let settings = Settings::from_env(&host)
                .map_err(|e| to_wit(cf_core::errors::HttpError::unavailable(e)))?;
            let caller = Identity::Caller(request.caller_token);
            cf_core::deletion::delete(
                &host,
                &host,
                &settings,
                &request.resource_type,
                &request.guid,
                &caller,
            )
            .map(|job| job.render())
            .map_err(to_wit)
        }
    }

    fn to_wit(e: cf_core::errors::HttpError) -> HttpError {
        HttpError {
            status: e.status,
            errors: e
                .errors
                .into_iter()
                .map(|c| CfError {
                    code: c.code,
                    title: c.title,
                    detail: c.detail,
                })
                .collect(),
        }
    }

    /// Checked by the host before the component serves: a malformed `job_types` or number stops
    /// the start, naming the variable.
    impl exports::lethe::platform::configuration::Guest for CfApi {
        fn check() -> Result<(), String> {
            Settings::from_env(&Host::default()).map(drop)
        }
    }

    wasip2::http::proxy::export!(CfApi);
    export!(CfApi);
}
