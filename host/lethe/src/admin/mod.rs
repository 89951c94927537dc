//! The admin listener (`--admin-listen`, default `127.0.0.1:9090`), apart from the app's routes so
//! that probes, scrapes and the status page never compete with, or are exposed to, CF clients:
//!
//! | path            | answers                                                                |
//! |-----------------|------------------------------------------------------------------------|
//! | `/healthz`      | `200 ok` while the process serves (liveness)                           |
//! | `/readyz`       | `200` once every check passes, else `503`; each check on its own line  |
//! | `/metrics`      | the Prometheus metrics ([`crate::metrics`]), OpenMetrics text          |
//! | `/lethe/status` | the status page ([`crate::status_page`]), server-rendered HTML        |
//!
//! It starts before anything else, so `/readyz` answers `503` naming what is still starting
//! (components compiling, manifests being applied) rather than the port being closed.
//! `/readyz`'s checks, in order: the components are compiled and loaded; the database answers
//! `SELECT 1`; the cluster answers `GET /version`; the manifest's Kubernetes objects are applied.
//! The lines are those of kube-apiserver's `/readyz?verbose`: `[+]name ok` or `[-]name failed:
//! reason`; as there, `?exclude=<check>` (repeatable) leaves a check out of the verdict.
//! `deploy/`'s readiness probe leaves out `permissions` (a privileged call some component's own
//! account was refused): a missing right breaks that component's requests only, and one plugin's
//! refused calls must not take every component's pod out of its Service.
//!
//! The status page names orgs and spaces being deleted, which CF callers may not all see, so it
//! is served here and never on the app's listener. Off a loopback address (or with
//! `--admin-auth=token`) the probes stay open, as kube-apiserver's are, while `/metrics`,
//! `/lethe/status` and `/readyz?verbose` ask who the caller is ([`access`]): a token without the
//! right is answered `403`, no token `401`. There the plain `/readyz` says which checks fail but
//! withholds why, as kube-apiserver's does; `?verbose` (with `get` on `/lethe/status`) says why.

pub mod access;
pub mod denials;
mod readiness;

use readiness::report;
pub use readiness::{OLDEST_KUBERNETES, PROBE_TIMEOUT, Readiness, Step};

use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio::sync::watch;
use wasmtime_wasi_http::io::TokioIo;

use crate::metrics::Metrics;
use crate::status_page::StatusSource;
use access::{AdminAccess, Verdict};

/// What the admin listener serves from.
pub struct AdminState {
    /// The `/readyz` checks.
    pub readiness: Arc<Readiness>,
    /// The `/metrics`.
    pub metrics: Arc<Metrics>,
    /// The status page's sources, once the application is loaded.
    pub status: OnceLock<StatusSource>,
    /// Who may read `/metrics`, `/lethe/status` and `/readyz?verbose`.
    pub access: AdminAccess,
}

/// Serves the admin endpoints on `listener` until `shutdown` turns true.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AdminState>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("admin listener: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let state = state.clone();
        let service = service_fn(move |req| {
            let state = state.clone();
            async move { Ok::<_, Infallible>(answer(&state, req).await) }
        });
        tokio::spawn(async move {
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                tracing::debug!("admin connection ended: {e}");
            }
        });
    }
}

/// The answer to one admin request.
pub async fn answer(
    state: &AdminState,
    req: hyper::Request<Incoming>,
) -> hyper::Response<Full<Bytes>> {
    if !matches!(*req.method(), hyper::Method::GET | hyper::Method::HEAD) {
        return text(405, "only GET and HEAD are served here\n");
    }
    let path = req.uri().path();
    // The path whose `get` right a caller needs, for the pages that show internals.
    let guarded = match path {
        "/metrics" | "/lethe/status" => Some(path),
        "/readyz" if verbose(req.uri().query()) => Some("/lethe/status"),
        _ => None,
    };
    if let Some(guarded) = guarded {
        let cluster = state.readiness.cluster();
        match state.access.check(cluster, req.headers(), guarded).await {
            Verdict::Allowed => {}
            Verdict::Unauthenticated => return unauthorized(),
            Verdict::Forbidden { user } => {
                return text(
                    403,
                    &format!("forbidden: User {user:?} cannot get path {guarded:?}\n"),
                );
            }
            Verdict::Unavailable => {
                return text(
                    503,
                    "the caller's credentials cannot be checked now; try again later\n",
                );
            }
        }
    }
    match path {
        "/healthz" | "/livez" => text(200, "ok\n"),
        "/readyz" => {
            // Open, or asked for (and allowed) verbosely: the reasons; else only the names.
            let reasons = !state.access.requires_token() || guarded.is_some();
            let excluded = excluded(req.uri().query());
            let (ready, report) = report(&state.readiness.checks().await, reasons, &excluded);
            text(if ready { 200 } else { 503 }, &report)
        }
        "/metrics" => respond(
            200,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            state.metrics.encode(),
        ),
        "/lethe/status" => match state.status.get() {
            Some(source) => respond(
                200,
                "text/html; charset=utf-8",
                crate::status_page::render(&source.view()),
            ),
            None => text(503, "lethe is still starting\n"),
        },
        _ => text(
            404,
            "not found: the admin listener serves /healthz, /readyz, /metrics and /lethe/status\n",
        ),
    }
}

/// Whether a query string asks for `verbose` (`?verbose`, `?verbose=true`, …), as
/// kube-apiserver's health checks read it: present and not `false`.
fn verbose(query: Option<&str>) -> bool {
    query.unwrap_or_default().split('&').any(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        key == "verbose" && value != "false"
    })
}

/// The checks a query leaves out (`?exclude=permissions&exclude=…`), as kube-apiserver's health
/// checks take them: they are still run and listed, as `excluded`, but do not decide.
fn excluded(query: Option<&str>) -> Vec<&str> {
    query
        .unwrap_or_default()
        .split('&')
        .filter_map(|pair| pair.strip_prefix("exclude="))
        .collect()
}

/// `401` with the challenges a client can answer: a bearer token, or (for a browser) Basic
/// credentials whose password is the token.
fn unauthorized() -> hyper::Response<Full<Bytes>> {
    let mut resp = text(401, "Unauthorized: send a Kubernetes bearer token\n");
    for challenge in [
        r#"Bearer realm="lethe admin""#,
        r#"Basic realm="lethe admin: a Kubernetes token as the password", charset="UTF-8""#,
    ] {
        resp.headers_mut()
            .append(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
    }
    resp
}

fn text(status: u16, body: &str) -> hyper::Response<Full<Bytes>> {
    respond(status, "text/plain; charset=utf-8", body.to_string())
}

fn respond(status: u16, content_type: &'static str, body: String) -> hyper::Response<Full<Bytes>> {
    let mut resp = hyper::Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() =
        hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn verbose_is_any_value_but_false() {
        assert!(verbose(Some("verbose")));
        assert!(verbose(Some("verbose=true")));
        assert!(verbose(Some("exclude=etcd&verbose=1")));
        assert!(!verbose(Some("verbose=false")));
        assert!(!verbose(Some("verbosely")));
        assert!(!verbose(None));
    }
}
