//! Every request's id, returned on its answer and logged with everything done for it, and the
//! access log and request metrics, once per request.

use hyper::body::Incoming;
use hyper::header::HeaderName;
use tracing::Instrument as _;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use super::spin_headers::header_value;
use super::{Peer, Router, answer};

/// The header carrying a request's id, as Cloud Controller names it: returned on every answer,
/// logged with everything done for the request, and passed to the component.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-vcap-request-id");

/// Answers one request: route, instantiate, call, and turn any failure into an envelope (see
/// `instance::failure`, written as the application's error format). Every answer carries the request's id ([`request_id`]); the request is
/// counted in the metrics and logged once under the `lethe::access` target.
pub async fn handle(
    router: &Router,
    peer: &Peer,
    req: hyper::Request<Incoming>,
) -> hyper::Response<HyperOutgoingBody> {
    let started = std::time::Instant::now();
    let id = request_id(req.headers());
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let span = tracing::info_span!("request", id = %id);
    let (route, mut resp) = answer(router, peer, req, &id)
        .instrument(span.clone())
        .await;
    if let Some(value) = header_value(&id) {
        resp.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    let status = resp.status().as_u16();
    let took = started.elapsed();
    router.metrics.http_request(route, &method, status, took);
    span.in_scope(|| {
        tracing::info!(
            target: "lethe::access",
            method = %method,
            path = %path,
            route = &**route,
            status,
            duration_ms = took.as_secs_f64() * 1000.0,
            "{method} {path} {status}"
        )
    });
    resp
}

/// The id of a request, by Cloud Controller's rule: a fresh UUID, after the caller's own
/// `X-VCAP-Request-ID` (only its letters, digits, `_` and `-`, at most 255 of them) and `::` when
/// the caller sent one, so a caller can follow its request and no two requests share an id.
pub fn request_id(headers: &hyper::HeaderMap) -> String {
    // From the thread's generator: `Uuid::new_v4` asks the kernel (getrandom) on every call.
    let fresh = uuid::Builder::from_random_bytes(rand::random()).into_uuid();
    let given: String = headers
        .get(REQUEST_ID_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default()
        .iter()
        .filter(|b| b.is_ascii_alphanumeric() || **b == b'_' || **b == b'-')
        .take(255)
        .map(|b| char::from(*b))
        .collect();
    if given.is_empty() {
        fresh.to_string()
    } else {
        format!("{given}::{fresh}")
    }
}
