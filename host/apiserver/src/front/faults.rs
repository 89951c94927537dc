//! The admin-only `/lethe/...` endpoints: fault injection for tests and chaos drills.

use crate::FaultConfig;
use crate::front::authn::bearer;
use crate::front::respond::{Body, read_body, respond_value};
use crate::front::shared::Shared;
use crate::status::ApiError;
use http::{Method, Request, Response};
use hyper::body::Incoming;
use serde_json::json;

/// The `/lethe/...` endpoints, for the admin token alone (another valid token gets a 403):
/// GET and PUT/POST of `/lethe/faults` read and replace the fault injection, and POST of
/// `/lethe/compact` drops the watch history, answering the compacted resourceVersion; POST of
/// `/lethe/drop-watches` ends every open watch, and GET of `/lethe/requests` answers the request
/// counts ([`crate::front::RequestCounts`]). A 400
/// for a fault config with a rate outside 0..1 or an `error_status` not 429, 500 or 503.
pub(crate) async fn lethe_endpoint(
    shared: &Shared,
    req: Request<Incoming>,
) -> Result<Response<Body>, ApiError> {
    let Some(token) = bearer(req.headers()) else {
        return Err(ApiError::unauthorized());
    };
    if token != shared.admin_token {
        if shared.user_for_token(token).is_none() {
            return Err(ApiError::unauthorized());
        }
        return Err(ApiError::new(
            403,
            "Forbidden",
            format!(
                "forbidden: only the admin token may use {}",
                req.uri().path()
            ),
        ));
    }
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let answer = match (method, path.as_str()) {
        (Method::GET, "/lethe/faults") => serde_json::to_value(&*shared.faults.read()),
        (Method::PUT, "/lethe/faults") | (Method::POST, "/lethe/faults") => {
            let (_, body) = read_body(req).await?;
            let f: FaultConfig = serde_json::from_slice(&body)
                .map_err(|e| ApiError::bad_request(format!("invalid fault config: {e}")))?;
            let rates = [f.error_rate, f.throttle_rate, f.drop_rate];
            if rates.iter().any(|r| !(0.0..=1.0).contains(r)) {
                return Err(ApiError::bad_request("rates must be between 0 and 1"));
            }
            if f.error_rate > 0.0 && !matches!(f.error_status, 429 | 500 | 503) {
                return Err(ApiError::bad_request(
                    "error_status must be 429, 500 or 503",
                ));
            }
            shared.set_faults(f.clone());
            serde_json::to_value(f)
        }
        (Method::POST, "/lethe/compact") => {
            // Read what the client sends before answering: a server that answers first and
            // closes the connection breaks the pipe of a client still writing (kubectl's `-f -`).
            read_body(req).await?;
            let rv = shared.store.compact();
            Ok(json!({"compactedResourceVersion": rv.to_string()}))
        }
        (Method::GET, "/lethe/requests") => serde_json::to_value(shared.requests.snapshot()),
        (Method::GET, "/lethe/audit") => serde_json::to_value(shared.audit.snapshot()),
        (Method::POST, "/lethe/drop-watches") => {
            read_body(req).await?;
            shared.store.drop_watches();
            Ok(json!({"dropped": true}))
        }
        _ => return Err(ApiError::path_not_found()),
    };
    Ok(respond_value(200, &answer.unwrap_or_default()))
}
