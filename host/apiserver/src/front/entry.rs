//! One request, end to end: injected faults, dispatch, and the request's warnings as
//! `Warning: 299` headers on its answer.

use crate::front::faults::lethe_endpoint;
use crate::front::nonresource::serve;
use crate::front::respond::{Body, DropConnection, error_response};
use crate::front::shared::Shared;
use crate::status::{ApiError, Warnings};
use http::{Request, Response, header};
use hyper::body::Incoming;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// The service entry point.
pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<Body>, DropConnection> {
    let path = req.uri().path().to_string();
    if path == "/lethe" || path.starts_with("/lethe/") {
        return Ok(lethe_endpoint(&shared, req)
            .await
            .unwrap_or_else(|e| error_response(&e)));
    }
    shared
        .requests
        .count(req.method(), &path, req.uri().query());
    if shared.faults_active.load(Ordering::Relaxed) {
        let f = shared.faults.read().clone();
        let (drop, fail) = {
            use rand::Rng;
            let mut rng = rand::rng();
            // One draw decides between an error, throttling and neither, so the two rates add up.
            let draw = rng.random::<f64>();
            let fail = if draw < f.error_rate {
                Some(f.error_status)
            } else if draw < f.error_rate + f.throttle_rate {
                Some(429)
            } else {
                None
            };
            (f.drop_rate > 0.0 && rng.random::<f64>() < f.drop_rate, fail)
        };
        if f.latency_ms > 0 {
            tokio::time::sleep(Duration::from_millis(f.latency_ms)).await;
        }
        if drop {
            return Err(DropConnection);
        }
        if let Some(status) = fail {
            return Ok(error_response(&ApiError::injected(
                status,
                f.retry_after_seconds,
            )));
        }
    }
    let method = req.method().clone();
    // What the request's operations warn of, sent with its answer, whether it succeeded or not.
    let mut warnings = Warnings::default();
    let mut resp = match serve(&shared, req, &mut warnings).await {
        Ok(r) => r,
        Err(e) => error_response(&e),
    };
    for w in warnings.iter() {
        let text = format!("299 - {}", json!(w));
        if let Ok(v) = header::HeaderValue::from_str(&text) {
            resp.headers_mut().append(header::WARNING, v);
        }
    }
    tracing::debug!(%method, %path, status = resp.status().as_u16(), "request");
    Ok(resp)
}
