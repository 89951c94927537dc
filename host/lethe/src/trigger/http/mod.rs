//! The HTTP trigger: Spin's route syntax, a hyper server, and one fresh instance per request.
//! The routing table and the request path are here; the rest, by concern:
//!
//! * [`listener`]: accepting connections and serving them with hyper, and the graceful stop;
//! * [`access`]: request ids, the access log and the request metrics;
//! * [`limits`]: what a request may carry (headers, body) before any component runs;
//! * [`spin_headers`]: the request's authority and Spin's routing headers;
//! * [`instance`]: one request in a fresh instance, through the instance runner.
//!
//! The host's own error answers, and their Cloud Foundry words, are [`crate::host_error`]'s.

mod access;
mod instance;
mod limits;
mod listener;
mod spin_headers;

pub use access::{REQUEST_ID_HEADER, handle, request_id};
pub use limits::{BODY_TIMEOUT, MAX_HEADER_BYTES, MAX_HEADERS, MAX_REQUEST_BODY};
pub use listener::{Peer, serve};

use std::sync::Arc;

use anyhow::Context as _;
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use super::fairness::Fairness;
use crate::host_error::{ErrorFormat, HostError};
use crate::manifest::{Route, RouteMatch};
use crate::runtime::{InstanceState, LoadedComponent, Runtime};

/// The routing table: routes to components. A route's component can be replaced while serving
/// (`lethe up --watch`); a request keeps the one it was routed to until it is answered.
pub struct Router {
    routes: Vec<(Route, super::Slot<HttpComponent>)>,
    metrics: Arc<crate::metrics::Metrics>,
    /// The route label of a request that matched no route.
    no_route: Arc<str>,
    /// How the host's own errors are written (`error_format` in `[application.tool.lethe]`).
    errors: ErrorFormat,
    /// Each caller's share of the routes.
    fairness: Fairness,
}

/// A component served over HTTP, on one route.
pub struct HttpComponent {
    component: Arc<LoadedComponent>,
    pre: ProxyPre<InstanceState>,
    /// `spin-raw-component-route` and `spin-component-route`, the same for every request.
    raw_route_header: Option<HeaderValue>,
    component_route_header: Option<HeaderValue>,
}

impl Router {
    /// Builds the table from the manifest's HTTP triggers; every named component must export
    /// `wasi:http/incoming-handler`. Requests are admitted by `fairness`.
    pub fn new(
        manifest: &crate::manifest::Manifest,
        runtime: &Runtime,
        metrics: Arc<crate::metrics::Metrics>,
        fairness: Fairness,
    ) -> anyhow::Result<Router> {
        let mut routes = Vec::new();
        for t in &manifest.http_triggers {
            let component = runtime
                .component(&t.component)
                .with_context(|| format!("unknown component `{}`", t.component))?
                .clone();
            let served = HttpComponent::new(&t.route, component)?;
            routes.push((t.route.clone(), super::Slot::new(served)));
        }
        Ok(Router {
            routes,
            metrics,
            no_route: Arc::from("none"),
            errors: manifest.settings.error_format,
            fairness,
        })
    }

    /// The best route for `path`, by Spin's precedence, and the component serving it now.
    pub fn route(&self, path: &str) -> Option<(&Route, Arc<HttpComponent>, RouteMatch)> {
        self.routes
            .iter()
            .filter_map(|(r, c)| r.matches(path).map(|m| (r, c, m)))
            .max_by_key(|(r, _, _)| r.rank())
            .map(|(r, c, m)| (r, c.get(), m))
    }

    /// `(route, component id)` for the start-up log.
    pub fn describe(&self) -> Vec<(String, String)> {
        self.routes
            .iter()
            .map(|(r, c)| (r.as_str().to_string(), c.get().component.id.to_string()))
            .collect()
    }

    /// Checks that `component` can serve every route of its id; [`Router::put`] then serves
    /// them with it.
    pub fn replacement(
        &self,
        component: &Arc<LoadedComponent>,
    ) -> anyhow::Result<RouteReplacement> {
        let mut slots = Vec::new();
        for (index, (route, slot)) in self.routes.iter().enumerate() {
            if slot.get().component.id == component.id {
                slots.push((
                    index,
                    Arc::new(HttpComponent::new(route, component.clone())?),
                ));
            }
        }
        Ok(RouteReplacement(slots))
    }

    /// Serves the routes of `replacement` with its component from the next request on; returns
    /// how many there were. Requests under way finish on the one they started on.
    pub fn put(&self, replacement: RouteReplacement) -> usize {
        let count = replacement.0.len();
        for (index, served) in replacement.0 {
            if let Some((_, slot)) = self.routes.get(index) {
                slot.set(served);
            }
        }
        count
    }
}

/// A component checked to serve some routes of a [`Router`], ready for [`Router::put`].
pub struct RouteReplacement(Vec<(usize, Arc<HttpComponent>)>);

impl HttpComponent {
    /// `component` on `route`; it must export `wasi:http/incoming-handler`.
    fn new(route: &Route, component: Arc<LoadedComponent>) -> anyhow::Result<HttpComponent> {
        let pre = ProxyPre::new(component.pre.clone()).map_err(|e| {
            anyhow::Error::from(e).context(format!(
                "component `{}` does not export wasi:http/incoming-handler@0.2",
                component.id
            ))
        })?;
        Ok(HttpComponent {
            component,
            pre,
            raw_route_header: spin_headers::header_value(route.as_str()),
            component_route_header: spin_headers::header_value(route.component_route()),
        })
    }
}

/// The answer to one request, and the route that served it.
async fn answer<'r>(
    router: &'r Router,
    peer: &Peer,
    mut req: hyper::Request<Incoming>,
    id: &str,
) -> (&'r Arc<str>, hyper::Response<HyperOutgoingBody>) {
    let errors = router.errors;
    if let Some(refused) = limits::oversized_headers(&req) {
        return (&router.no_route, errors.render(&refused));
    }
    if let Err(detail) = spin_headers::ensure_authority(&mut req, peer.local) {
        let refused = HostError::BadRequest(detail.into());
        return (&router.no_route, errors.render(&refused));
    }
    let path = req.uri().path().to_string();
    let Some((route, target, matched)) = router.route(&path) else {
        let unknown = HostError::UnknownRoute;
        return (&router.no_route, errors.render(&unknown));
    };
    let route_text = route.shared();
    let too_large = req
        .headers()
        .get(hyper::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .is_some_and(|n| n > MAX_REQUEST_BODY);
    if too_large {
        return (route_text, errors.render(&HostError::BodyTooLarge));
    }
    spin_headers::set_spin_headers(&mut req, &target, &matched, peer);
    // The component sees the id the caller will get back (a caller's own is replaced by it).
    if let Some(value) = spin_headers::header_value(id) {
        req.headers_mut().insert(REQUEST_ID_HEADER, value);
    }
    let writes = !matches!(
        *req.method(),
        hyper::Method::GET | hyper::Method::HEAD | hyper::Method::OPTIONS
    );
    // The caller's bucket, which the component's privileged calls made for it draw from too
    // (every request without a token shares one).
    let token = crate::identity::bearer(req.headers());
    let caller = crate::identity::token_key(token.unwrap_or_default());
    let flow = router.fairness.classify(token, caller).await;
    let admitted = match router.fairness.admit(&flow).await {
        Ok(admitted) => admitted,
        Err(refused) => {
            let mut resp = errors.render(&HostError::RateLimited {
                retry_after: refused.retry_after,
            });
            refused.limits.write(resp.headers_mut());
            return (route_text, resp);
        }
    };
    let req = match limits::read_body(req, BODY_TIMEOUT).await {
        Ok(req) => req,
        Err(refused) => return (route_text, errors.render(&refused)),
    };
    let component = target.component.id.clone();
    let mut resp = match instance::invoke(&target, req, caller).await {
        Ok(resp) => {
            if writes && resp.status().as_u16() < 400 {
                // What it wrote may be for its own reconciler to act on (the data-jobs API's
                // desired state): its cron trigger ticks now rather than at its next time.
                target.component.env.wake.notify_one();
            }
            resp
        }
        Err(failed) => {
            let resp = errors.render(&instance::failure(&failed));
            if resp.status() == 503 {
                tracing::warn!(component = %component, path = %path, "component {failed}");
            } else {
                tracing::error!(component = %component, path = %path, "component {failed}");
            }
            resp
        }
    };
    admitted.limits.write(resp.headers_mut());
    (route_text, resp)
}
