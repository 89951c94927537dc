//! The HTTP trigger: Spin's route syntax, a hyper server, and one fresh instance per request.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tracing::Instrument as _;
use wasmtime_wasi_http::WasiHttpView as _;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::p2::bindings::ProxyPre;
use wasmtime_wasi_http::p2::bindings::http::types::{ErrorCode, Scheme};
use wasmtime_wasi_http::p2::body::HyperOutgoingBody;

use super::fairness::Fairness;
use crate::manifest::{ErrorFormat, Route, RouteMatch};
use crate::runtime::call::{self, BoxFuture, CallFailed, FailureKind, Instantiate};
use crate::runtime::{InstanceState, LoadedComponent, Runtime};

/// Largest request body the host forwards; larger ones get 413 before any component runs.
pub const MAX_REQUEST_BODY: u64 = 8 * 1024 * 1024;

/// How long a client may take to send its request body. The body is read before an instance is
/// taken from the pool, so a slow client holds a connection, never an instance.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Most header lines, and most header bytes, a request may carry; more get 431. The HTTP layer
/// is set to parse well past these, so that a request over them is still read and answered with
/// the CF envelope; only one past the HTTP layer's own limits gets its bare 431.
pub const MAX_HEADERS: usize = 100;
/// Most header bytes a request may carry, counting each line as sent (name, `: `, value, CRLF).
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
const PARSER_MAX_HEADERS: usize = 4 * MAX_HEADERS;

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
            raw_route_header: header_value(route.as_str()),
            component_route_header: header_value(route.component_route()),
        })
    }
}

/// Serves `router` on `listener` until `shutdown` turns true, then waits (bounded) for in-flight
/// requests.
pub async fn serve(
    listener: TcpListener,
    router: Arc<Router>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (stream, client_addr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let Ok(local_addr) = stream.local_addr() else {
            continue;
        };
        let router = router.clone();
        let peer = Arc::new(Peer::new(client_addr, local_addr));
        let service = service_fn(move |req| {
            let (router, peer) = (router.clone(), peer.clone());
            async move { Ok::<_, Infallible>(handle(&router, &peer, req).await) }
        });
        // A client that closes its side after sending a whole request still gets that request
        // carried out (half-close is how such a client says it is done sending).
        let conn = http1::Builder::new()
            .keep_alive(true)
            .half_close(true)
            .max_headers(PARSER_MAX_HEADERS)
            .serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("connection from {client_addr} ended: {e}");
            }
        });
    }
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all HTTP connections closed"),
        _ = tokio::time::sleep(Duration::from_secs(10)) => tracing::warn!("gave up waiting for HTTP connections to close"),
    }
    Ok(())
}

/// What a connection's requests share about its two ends.
pub struct Peer {
    /// Where the requests come in: the authority of an HTTP/1.0 request without `Host`.
    pub local: SocketAddr,
    /// `spin-client-addr`, where they come from, formatted once per connection.
    client_header: Option<HeaderValue>,
}

impl Peer {
    /// The ends of a connection from `client` accepted on `local`; the `spin-client-addr` header
    /// value is formatted here, once for all the connection's requests.
    pub fn new(client: SocketAddr, local: SocketAddr) -> Self {
        Self {
            local,
            client_header: header_value(&client.to_string()),
        }
    }
}

/// The header carrying a request's id, as Cloud Controller names it: returned on every answer,
/// logged with everything done for the request, and passed to the component.
pub const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-vcap-request-id");

impl Instantiate for ProxyPre<InstanceState> {
    type Instance = wasmtime_wasi_http::p2::bindings::Proxy;

    fn instantiate<'a>(
        &'a self,
        store: &'a mut wasmtime::Store<InstanceState>,
    ) -> BoxFuture<'a, wasmtime::Result<Self::Instance>> {
        Box::pin(self.instantiate_async(store))
    }
}

/// Answers one request: route, instantiate, call, and turn any failure into an envelope (see
/// [`failure`], written as the application's [`ErrorFormat`]). Every answer carries the request's id ([`request_id`]); the request is
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

/// The answer to one request, and the route that served it.
async fn answer<'r>(
    router: &'r Router,
    peer: &Peer,
    mut req: hyper::Request<Incoming>,
    id: &str,
) -> (&'r Arc<str>, hyper::Response<HyperOutgoingBody>) {
    let errors = router.errors;
    if let Some(refused) = oversized_headers(&req) {
        return (&router.no_route, errors.render(&refused));
    }
    if let Err(detail) = ensure_authority(&mut req, peer.local) {
        let refused = HostError::new(400, 10004, "CF-InvalidRequest", detail);
        return (&router.no_route, errors.render(&refused));
    }
    let path = req.uri().path().to_string();
    let Some((route, target, matched)) = router.route(&path) else {
        let unknown = HostError::new(404, 10000, "CF-NotFound", "Unknown request");
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
        return (route_text, errors.render(&HostError::BODY_TOO_LARGE));
    }
    set_spin_headers(&mut req, &target, &matched, peer);
    // The component sees the id the caller will get back (a caller's own is replaced by it).
    if let Some(value) = header_value(id) {
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
            let mut resp = errors.render(&HostError {
                retry_after: Some(refused.retry_after),
                ..HostError::new(429, 10013, "CF-RateLimitExceeded", "Rate Limit Exceeded")
            });
            refused.limits.write(resp.headers_mut());
            return (route_text, resp);
        }
    };
    let req = match read_body(req, BODY_TIMEOUT).await {
        Ok(req) => req,
        Err(refused) => return (route_text, errors.render(&refused)),
    };
    let component = target.component.id.clone();
    let mut resp = match invoke(&target, req, caller).await {
        Ok(resp) => {
            if writes && resp.status().as_u16() < 400 {
                // What it wrote may be for its own reconciler to act on (the data-jobs API's
                // desired state): its cron trigger ticks now rather than at its next time.
                target.component.env.wake.notify_one();
            }
            resp
        }
        Err(failed) => {
            let resp = errors.render(&failure(&failed));
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

/// The answer to a request whose headers are over the host's limits, if they are. (A request
/// target is limited only by the HTTP layer, at 64 KiB: CF filters such as `guids=` are long.)
fn oversized_headers<B>(req: &hyper::Request<B>) -> Option<HostError> {
    let headers = req.headers();
    // Each line as sent: name, `: `, value, CRLF.
    let header_bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    if headers.len() > MAX_HEADERS || header_bytes > MAX_HEADER_BYTES {
        return Some(HostError::new(
            431,
            10004,
            "CF-InvalidRequest",
            format!(
                "The request headers are too large (at most {MAX_HEADERS} headers and {MAX_HEADER_BYTES} bytes)"
            ),
        ));
    }
    None
}

/// The whole request, its body read within `timeout` and [`MAX_REQUEST_BODY`] (which a chunked
/// body, having no `content-length`, can only be held to here), or the answer why not.
async fn read_body<B>(
    req: hyper::Request<B>,
    timeout: Duration,
) -> Result<hyper::Request<Full<Bytes>>, HostError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (parts, body) = req.into_parts();
    // Most requests (every GET) have no body: nothing to wait for, so no timer to arm.
    if body.is_end_stream() {
        return Ok(hyper::Request::from_parts(parts, Full::new(Bytes::new())));
    }
    let limited = http_body_util::Limited::new(body, MAX_REQUEST_BODY as usize);
    match tokio::time::timeout(timeout, limited.collect()).await {
        Ok(Ok(collected)) => Ok(hyper::Request::from_parts(
            parts,
            Full::new(collected.to_bytes()),
        )),
        Ok(Err(e)) if e.is::<http_body_util::LengthLimitError>() => Err(HostError::BODY_TOO_LARGE),
        Ok(Err(_)) => Err(HostError::new(
            400,
            1001,
            "CF-MessageParseError",
            "The request body could not be read",
        )),
        Err(_) => Err(HostError::new(
            408,
            10004,
            "CF-InvalidRequest",
            "The request body was not received in time",
        )),
    }
}

/// The answer when a component could not answer itself. Every instance being busy (many slow
/// or long requests at once) says nothing against the request, so it is 503 with `Retry-After`,
/// not the 500 of a component that failed.
fn failure(failed: &CallFailed) -> HostError {
    if failed.kind == FailureKind::Busy {
        return HostError {
            retry_after: Some(1),
            ..HostError::new(
                503,
                10015,
                "CF-ServiceUnavailable",
                "The server is busy; try again shortly",
            )
        };
    }
    HostError::new(500, 10001, "UnknownError", "An unknown error occurred.")
}

async fn invoke(
    target: &HttpComponent,
    req: hyper::Request<Full<Bytes>>,
    caller: [u8; 32],
) -> Result<hyper::Response<HyperOutgoingBody>, CallFailed> {
    let component = target.component.clone();
    let mut store = component.new_store();
    store.data_mut().caps.answer_for(caller);
    let (sender, mut receiver) = tokio::sync::oneshot::channel();
    let failed = |e| CallFailed::counted(&target.component, e);
    let incoming = store
        .data_mut()
        .http()
        .new_incoming_request(Scheme::Http, req)
        .map_err(failed)?;
    let out = store
        .data_mut()
        .http()
        .new_response_outparam(sender)
        .map_err(failed)?;
    let pre = target.pre.clone();
    let mut run = Unfinished(Some(Box::pin(async move {
        call::call(&component, &pre, &mut store, |proxy, store| {
            Box::pin(async move {
                proxy
                    .wasi_http_incoming_handler()
                    .call_handle(store, incoming, out)
                    .await
            })
        })
        .await
    })));
    // The instance runs in this task while it can: most components finish their whole response
    // before returning. One that is still running when its response head arrives (it streams a
    // body larger than the channel holds) moves to a task of its own, since the body can only
    // drain once the head is returned to hyper.
    let outcome = tokio::select! {
        biased;
        outcome = run.poll() => outcome,
        Ok(head) = &mut receiver => {
            run.finish_elsewhere();
            return response_or_error(head).map_err(failed);
        }
        // An outparam dropped unset disables the second branch; the instance's outcome says why.
    };
    run.0 = None;
    match receiver.try_recv() {
        Ok(head) => response_or_error(head).map_err(failed),
        Err(_) => match outcome {
            Ok(()) => Err(failed(wasmtime::format_err!(
                "the component returned without setting a response"
            ))),
            Err(e) => Err(e),
        },
    }
}

type InstanceRun = BoxFuture<'static, Result<(), CallFailed>>;

/// An instance's run that has not finished. If the request is abandoned (the client went away
/// and hyper dropped it) the run finishes in a task of its own rather than stopping wherever it
/// was: a component is never cut off between two of its writes by a client's disconnect.
struct Unfinished(Option<InstanceRun>);

impl Unfinished {
    /// Runs the instance until it finishes; must not be called again afterwards.
    async fn poll(&mut self) -> Result<(), CallFailed> {
        match self.0.as_mut() {
            Some(run) => run.await,
            None => Ok(()),
        }
    }

    /// Lets the instance finish in a task of its own.
    fn finish_elsewhere(&mut self) {
        let Some(run) = self.0.take() else {
            return;
        };
        // Outside a runtime (the process is shutting down) there is nothing left to finish on.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            // Still inside the request's span, so what it logs carries the request id.
            runtime.spawn(
                async move {
                    if let Err(failed) = run.await {
                        tracing::warn!(
                            "component failed after its response head was sent: {failed}"
                        );
                    }
                }
                .in_current_span(),
            );
        }
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        self.finish_elsewhere();
    }
}

/// What the component passed to `response-outparam.set`.
fn response_or_error(
    head: Result<hyper::Response<HyperOutgoingBody>, ErrorCode>,
) -> wasmtime::Result<hyper::Response<HyperOutgoingBody>> {
    head.map_err(|code| {
        wasmtime::format_err!("the component answered with a wasi:http error: {code:?}")
    })
}

/// Makes sure the request has the authority wasi:http gives every incoming request (taken from
/// the target, else from `Host`), or says why it is malformed: RFC 9112 §3.2 wants exactly one
/// `Host` on an HTTP/1.1 request whose target has no authority, and a `Host` that is not a host
/// and port cannot be one. An HTTP/1.0 request may lack `Host`; it gets the address it came in on.
fn ensure_authority<B>(
    req: &mut hyper::Request<B>,
    local_addr: SocketAddr,
) -> Result<(), &'static str> {
    if req.uri().authority().is_some() {
        return Ok(());
    }
    let mut hosts = req.headers().get_all(hyper::header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => Err("The request has more than one Host header"),
        (Some(host), None) => {
            // Empty is what RFC 9112 has clients send when the target URI has no authority.
            let valid = host.is_empty()
                || host
                    .to_str()
                    .is_ok_and(|h| h.parse::<hyper::http::uri::Authority>().is_ok());
            if valid {
                Ok(())
            } else {
                Err("The Host header is not a valid host and port")
            }
        }
        (None, _) if req.version() <= hyper::Version::HTTP_10 => {
            if let Some(value) = header_value(&local_addr.to_string()) {
                req.headers_mut().insert(hyper::header::HOST, value);
            }
            Ok(())
        }
        (None, _) => Err("The request has no Host header"),
    }
}

/// Adds Spin's routing headers (dropping any a client sent, so they cannot be spoofed).
fn set_spin_headers<B>(
    req: &mut hyper::Request<B>,
    target: &HttpComponent,
    m: &RouteMatch,
    peer: &Peer,
) {
    let full_url = format!(
        "http://{}{}",
        req.headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or("localhost"),
        req.uri()
            .path_and_query()
            .map(|p| p.as_str())
            .unwrap_or("/")
    );
    let matched = header_value(req.uri().path().strip_suffix(&m.path_info).unwrap_or(""));
    let headers = req.headers_mut();
    let spoofed: Vec<HeaderName> = headers
        .keys()
        .filter(|k| k.as_str().starts_with("spin-"))
        .cloned()
        .collect();
    for name in spoofed {
        headers.remove(name);
    }
    // One growth of the map instead of several as the headers below go in.
    headers.reserve(7 + m.params.len());
    // Names made at compile time: `from_static` checks its argument on every call.
    const FULL_URL: HeaderName = HeaderName::from_static("spin-full-url");
    const PATH_INFO: HeaderName = HeaderName::from_static("spin-path-info");
    const MATCHED_ROUTE: HeaderName = HeaderName::from_static("spin-matched-route");
    const BASE_PATH: HeaderName = HeaderName::from_static("spin-base-path");
    const RAW_COMPONENT_ROUTE: HeaderName = HeaderName::from_static("spin-raw-component-route");
    const COMPONENT_ROUTE: HeaderName = HeaderName::from_static("spin-component-route");
    const CLIENT_ADDR: HeaderName = HeaderName::from_static("spin-client-addr");
    let mut set = |name: HeaderName, value: Option<HeaderValue>| {
        if let Some(v) = value {
            headers.insert(name, v);
        }
    };
    set(FULL_URL, header_value(&full_url));
    set(PATH_INFO, header_value(&m.path_info));
    set(MATCHED_ROUTE, matched);
    set(BASE_PATH, Some(HeaderValue::from_static("/")));
    set(RAW_COMPONENT_ROUTE, target.raw_route_header.clone());
    set(COMPONENT_ROUTE, target.component_route_header.clone());
    set(CLIENT_ADDR, peer.client_header.clone());
    for (name, value) in &m.params {
        let name = HeaderName::try_from(format!("spin-path-match-{}", name.to_ascii_lowercase()));
        if let (Ok(n), Some(v)) = (name, header_value(value)) {
            headers.insert(n, v);
        }
    }
}

fn header_value(text: &str) -> Option<HeaderValue> {
    HeaderValue::from_str(text).ok()
}

/// An answer the host gives itself, where no component answers: a request over the limits, an
/// unknown route, a busy pool, a component that failed. Written as the application chose
/// ([`ErrorFormat`]); the Cloud Foundry code and title are used by the `cf` format only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError {
    /// The HTTP status.
    pub status: u16,
    /// The CF V3 error code.
    pub cf_code: u32,
    /// The CF V3 error title.
    pub cf_title: &'static str,
    /// What went wrong, for the caller.
    pub detail: std::borrow::Cow<'static, str>,
    /// `Retry-After`, in seconds.
    pub retry_after: Option<u32>,
}

impl HostError {
    /// An error without `Retry-After`.
    pub fn new(
        status: u16,
        cf_code: u32,
        cf_title: &'static str,
        detail: impl Into<std::borrow::Cow<'static, str>>,
    ) -> HostError {
        HostError {
            status,
            cf_code,
            cf_title,
            detail: detail.into(),
            retry_after: None,
        }
    }

    const BODY_TOO_LARGE: HostError = HostError {
        status: 413,
        cf_code: 10001,
        cf_title: "CF-RequestEntityTooLarge",
        detail: std::borrow::Cow::Borrowed("The request body is too large"),
        retry_after: None,
    };
}

impl ErrorFormat {
    /// The response for `error`: a CF V3 envelope (`{"errors":[{code,title,detail}]}`) for
    /// [`ErrorFormat::Cf`], the detail as plain text for [`ErrorFormat::Plain`].
    pub fn render(self, error: &HostError) -> hyper::Response<HyperOutgoingBody> {
        let (content_type, body) = match self {
            ErrorFormat::Cf => (
                "application/json",
                serde_json::json!({ "errors": [{
                    "code": error.cf_code, "title": error.cf_title, "detail": error.detail,
                }] })
                .to_string(),
            ),
            ErrorFormat::Plain => ("text/plain; charset=utf-8", format!("{}\n", error.detail)),
        };
        let body = Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed_unsync();
        let mut resp = hyper::Response::new(body);
        *resp.status_mut() = hyper::StatusCode::from_u16(error.status)
            .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
        let headers = resp.headers_mut();
        headers.insert(
            hyper::header::CONTENT_TYPE,
            HeaderValue::from_static(content_type),
        );
        if let Some(seconds) = error.retry_after {
            headers.insert(hyper::header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_host(version: hyper::Version, hosts: &[&[u8]]) -> hyper::Request<()> {
        let mut req = hyper::Request::builder()
            .version(version)
            .uri("/v3")
            .body(())
            .expect("request");
        for h in hosts {
            req.headers_mut().append(
                hyper::header::HOST,
                HeaderValue::from_bytes(h).expect("header value"),
            );
        }
        req
    }

    #[test]
    fn headers_over_the_limits_are_refused_with_the_envelope() {
        let head = |headers: &[(String, String)]| {
            let mut req = hyper::Request::builder().uri("/v3");
            for (n, v) in headers {
                req = req.header(n, v);
            }
            req.body(()).expect("request")
        };
        let status = |req: &hyper::Request<()>| oversized_headers(req).map(|r| r.status);

        let lines = |n: usize, len: usize| -> Vec<(String, String)> {
            (0..n)
                .map(|i| (format!("x-{i}"), "v".repeat(len)))
                .collect()
        };
        assert_eq!(status(&head(&lines(MAX_HEADERS, 10))), None);
        assert_eq!(status(&head(&lines(MAX_HEADERS + 1, 10))), Some(431));
        assert_eq!(status(&head(&lines(8, 9000))), Some(431));

        let refused = oversized_headers(&head(&lines(MAX_HEADERS + 1, 1))).expect("refused");
        let refused = ErrorFormat::Cf.render(&refused);
        assert_eq!(
            refused.headers().get(hyper::header::CONTENT_TYPE),
            Some(&HeaderValue::from_static("application/json"))
        );
    }

    #[tokio::test]
    async fn bodies_are_read_whole_or_refused_before_any_instance() {
        let whole = hyper::Request::new(Full::new(Bytes::from_static(b"{}")));
        let read = read_body(whole, BODY_TIMEOUT).await.expect("read");
        let bytes = read.into_body().collect().await.expect("body").to_bytes();
        assert_eq!(&bytes[..], b"{}");

        let chunks = vec![Ok::<_, std::io::Error>(hyper::body::Frame::data(
            Bytes::from(vec![b'x'; MAX_REQUEST_BODY as usize + 1]),
        ))];
        let huge = hyper::Request::new(http_body_util::StreamBody::new(futures::stream::iter(
            chunks,
        )));
        let refused = read_body(huge, BODY_TIMEOUT).await.expect_err("too large");
        assert_eq!(refused.status, 413);

        let never = futures::stream::pending::<Result<hyper::body::Frame<Bytes>, std::io::Error>>();
        let slow = hyper::Request::new(http_body_util::StreamBody::new(never));
        let refused = read_body(slow, Duration::from_secs(1))
            .await
            .expect_err("timeout");
        assert_eq!(refused.status, 408);
    }

    #[test]
    fn requests_without_a_usable_authority_are_refused_or_given_one() {
        let local: SocketAddr = "127.0.0.1:3000".parse().expect("addr");
        let v11 = hyper::Version::HTTP_11;
        for good in [&b"api.example:8080"[..], b"127.0.0.1", b"[::1]:3000", b""] {
            assert_eq!(
                ensure_authority(&mut with_host(v11, &[good]), local),
                Ok(()),
                "{good:?}"
            );
        }
        for bad in [
            &b"\xc3\xbf"[..],
            b"a\"b<script>",
            b"evil.example/../x",
            b"a b",
        ] {
            assert!(
                ensure_authority(&mut with_host(v11, &[bad]), local).is_err(),
                "{bad:?}"
            );
        }
        assert!(ensure_authority(&mut with_host(v11, &[]), local).is_err());
        assert!(ensure_authority(&mut with_host(v11, &[b"a", b"a"]), local).is_err());
        let mut old = with_host(hyper::Version::HTTP_10, &[]);
        assert_eq!(ensure_authority(&mut old, local), Ok(()));
        assert_eq!(
            old.headers().get(hyper::header::HOST).map(|h| h.as_bytes()),
            Some(&b"127.0.0.1:3000"[..])
        );
        let mut absolute = hyper::Request::builder()
            .uri("http://api.example/v3")
            .body(())
            .expect("request");
        assert_eq!(ensure_authority(&mut absolute, local), Ok(()));
    }

    #[test]
    fn host_errors_are_written_as_the_application_chose() {
        let busy = HostError {
            retry_after: Some(1),
            ..HostError::new(503, 10015, "CF-ServiceUnavailable", "busy")
        };
        let body = |resp: hyper::Response<HyperOutgoingBody>| {
            let bytes = futures::executor::block_on(resp.into_body().collect())
                .expect("body")
                .to_bytes();
            String::from_utf8(bytes.to_vec()).expect("utf-8")
        };
        let plain = ErrorFormat::Plain.render(&busy);
        assert_eq!(plain.status(), 503);
        assert_eq!(
            plain.headers().get(hyper::header::CONTENT_TYPE),
            Some(&HeaderValue::from_static("text/plain; charset=utf-8"))
        );
        assert_eq!(
            plain.headers().get(hyper::header::RETRY_AFTER),
            Some(&HeaderValue::from_static("1"))
        );
        assert_eq!(body(plain), "busy\n");

        let cf = ErrorFormat::Cf.render(&busy);
        assert_eq!(cf.status(), 503);
        let envelope: serde_json::Value = serde_json::from_str(&body(cf)).expect("json");
        assert_eq!(
            envelope,
            serde_json::json!({"errors": [{"code": 10015, "title": "CF-ServiceUnavailable", "detail": "busy"}]})
        );
    }

    #[test]
    fn no_free_instance_is_503_with_retry_after_and_other_failures_are_500() {
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_core_instances(1)
            .total_memories(1)
            .total_tables(1)
            .max_memory_size(1 << 16);
        let mut config = wasmtime::Config::new();
        config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        let engine = wasmtime::Engine::new(&config).expect("engine");
        let module = wasmtime::Module::new(&engine, b"\0asm\x01\0\0\0").expect("empty module");
        let mut first = wasmtime::Store::new(&engine, ());
        let _held = wasmtime::Instance::new(&mut first, &module, &[]).expect("first instance");
        let mut second = wasmtime::Store::new(&engine, ());
        let busy = wasmtime::Instance::new(&mut second, &module, &[]).expect_err("pool exhausted");
        let resp = ErrorFormat::Cf.render(&failure(&CallFailed::classified(busy)));
        assert_eq!(resp.status(), 503);
        assert_eq!(
            resp.headers()
                .get(hyper::header::RETRY_AFTER)
                .map(|v| v.as_bytes()),
            Some(&b"1"[..])
        );
        let trap = wasmtime::Error::new(wasmtime::Trap::Interrupt);
        assert_eq!(failure(&CallFailed::classified(trap)).status, 500);
    }
}
