//! What every handler of one request shares: the capabilities, the settings and the request,
//! with the base URL its links start with.

use lethe_guest::env::{Env, Level};
use lethe_guest::kube::Kube;
use lethe_guest::{Request, Response};

use crate::config::Settings;

/// One request's context.
pub struct RequestContext<'a> {
    /// The cluster, as the caller or privileged.
    pub kube: &'a dyn Kube,
    /// Clock, configuration, log and randomness.
    pub env: &'a dyn Env,
    /// The component's settings.
    pub settings: Settings,
    /// The request.
    pub req: &'a Request,
    /// The base URL of every link in the answer ([`Request::base_url`](lethe_guest::Request::base_url)).
    pub base: String,
}

impl<'a> RequestContext<'a> {
    /// The context of `req`; `Err` is the answer when the settings are malformed: logged, and a
    /// 503 `CF-ServiceUnavailable` that names no value (a host that checks the configuration at
    /// start, as lethe does, never gets here; one that does not, such as Spin, answers this).
    pub fn new(
        kube: &'a dyn Kube,
        env: &'a dyn Env,
        req: &'a Request,
    ) -> Result<RequestContext<'a>, Response> {
        let settings = Settings::from_env(env).map_err(|e| {
            env.log(Level::Error, &e);
            misconfigured()
        })?;
        let base = req
            .base_url(settings.external_url.as_deref())
            .unwrap_or_else(|| "http://localhost".to_string());
        Ok(RequestContext {
            kube,
            env,
            settings,
            req,
            base,
        })
    }
}

/// The answer to a caller when the component's configuration is malformed: nothing the caller
/// did, and nothing it can mend, so 503 with no detail of the configuration (the log has it).
pub fn misconfigured() -> Response {
    crate::errors::HttpError::unavailable(
        "The service is not configured correctly; its operators' log says how",
    )
    .into_response()
}
