//! The WASI layer: the exports, and the [`Transport`] over `wasi:http`, `wasi:clocks` and
//! `wasi:random`. Everything here is a thin call into WASI; the decisions live in the native
//! modules.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, IncomingBody, IncomingResponse,
    Method as HttpMethod, OutgoingBody, OutgoingRequest, RequestOptions, Scheme as HttpScheme,
};
use wasip2::io::streams::{InputStream, StreamError};

use crate::bindings::exports::lethe::platform::{config, kube as wit, log};
use crate::edge::{Adapter, stderr};
use crate::kube::discovery::DiscoveryCache;
use crate::kube::retry::{self, Attempt, TransportError};
use crate::kube::url::Scheme;
use crate::kube::{Client, MAX_RESPONSE_BYTES, Method, Request, Transport};

thread_local! {
    /// The environment, read once: the host fixes it for the instance's life.
    static ENVIRONMENT: OnceCell<Vec<(String, String)>> = const { OnceCell::new() };
    /// Discovery results, shared by every client of the instance.
    static DISCOVERY: Rc<RefCell<DiscoveryCache>> = Rc::default();
    /// The progress throttle.
    static PROGRESS: RefCell<crate::log::Progress> = RefCell::default();
}

/// The environment variable `name`.
#[cfg_attr(feature = "spin", allow(dead_code))]
fn env(name: &str) -> Option<String> {
    ENVIRONMENT.with(|e| {
        e.get_or_init(wasip2::cli::environment::get_environment)
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    })
}

/// The adapter's setting `name` (`LETHE_KUBE_URL`, `LETHE_KUBE_TOKEN`): from the environment on
/// plain WASI hosts, from the Spin variable of the same meaning on Spin.
fn setting(name: &str) -> Option<String> {
    #[cfg(feature = "spin")]
    return crate::spin::setting(name);
    #[cfg(not(feature = "spin"))]
    return env(name);
}

impl config::Guest for Adapter {
    fn get(key: String) -> Result<String, config::Error> {
        #[cfg(feature = "spin")]
        return crate::spin::config(&key);
        #[cfg(not(feature = "spin"))]
        return crate::config::get(&key, env);
    }
}

impl log::Guest for Adapter {
    fn write(level: log::Level, message: String) {
        stderr(&crate::log::line(level, &message));
    }

    fn progress(done: u64, total: u64) {
        if let Some(line) = PROGRESS.with(|p| p.borrow_mut().line(done, total)) {
            stderr(&line);
        }
    }
}

impl wit::Guest for Adapter {
    type Client = KubeClient;
}

/// The `client` resource.
pub(crate) struct KubeClient(Client<WasiHttp>);

impl wit::GuestClient for KubeClient {
    fn open(identity: wit::Identity) -> Result<wit::Client, wit::Error> {
        let (url, token) = crate::kube::credentials(&identity.into(), setting)?;
        let discovery = DISCOVERY.with(Rc::clone);
        Ok(wit::Client::new(KubeClient(Client::new(
            WasiHttp, url, token, discovery,
        ))))
    }

    fn authenticate(&self) -> Result<(), wit::Error> {
        Ok(self.0.authenticate()?)
    }

    fn get(&self, target: wit::ObjectRef) -> Result<wit::Object, wit::Error> {
        Ok(self.0.get(&target.into())?.into())
    }

    fn list(
        &self,
        api_version: String,
        kind: String,
        namespace: Option<String>,
        options: wit::ListOptions,
    ) -> Result<wit::ObjectList, wit::Error> {
        let list = self
            .0
            .list(&api_version, &kind, namespace.as_deref(), &options.into())?;
        Ok(list.into())
    }

    fn create(&self, json: String) -> Result<wit::Object, wit::Error> {
        Ok(self.0.create(&json)?.into())
    }

    fn replace(&self, target: wit::ObjectRef, json: String) -> Result<wit::Object, wit::Error> {
        Ok(self.0.replace(&target.into(), &json)?.into())
    }

    fn patch(
        &self,
        target: wit::ObjectRef,
        kind: wit::PatchKind,
        patch: String,
        subresource: Option<String>,
    ) -> Result<wit::Object, wit::Error> {
        let object = self
            .0
            .patch(&target.into(), kind.into(), &patch, subresource.as_deref())?;
        Ok(object.into())
    }

    fn delete(
        &self,
        target: wit::ObjectRef,
        options: wit::DeleteOptions,
    ) -> Result<wit::DeleteOutcome, wit::Error> {
        Ok(self.0.delete(&target.into(), &options.into())?.into())
    }

    fn changes(
        &self,
        collection: wit::Collection,
        since: Option<String>,
        max: u32,
    ) -> Result<wit::ChangeBatch, wit::Error> {
        Ok(self
            .0
            .changes(&collection.into(), since.as_deref(), max)?
            .into())
    }
}

crate::bindings::export!(Adapter with_types_in crate::bindings);

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// One exchange over `wasi:http/outgoing-handler`.
struct WasiHttp;

impl Transport for WasiHttp {
    fn send(&self, request: &Request) -> Attempt {
        match exchange(request) {
            Ok(attempt) => attempt,
            Err(e) => Attempt::Transport(e),
        }
    }

    fn sleep(&self, delay: Duration) {
        wasip2::clocks::monotonic_clock::subscribe_duration(nanos(delay)).block();
    }

    fn random(&self) -> u64 {
        wasip2::random::random::get_random_u64()
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(wasip2::clocks::monotonic_clock::now())
    }
}

fn exchange(request: &Request) -> Result<Attempt, TransportError> {
    let headers = Fields::from_list(&request.headers)
        .map_err(|e| TransportError::fatal(format!("the host refused a request header: {e:?}")))?;
    let outgoing = OutgoingRequest::new(headers);
    let method = match request.method {
        Method::Get => HttpMethod::Get,
        Method::Post => HttpMethod::Post,
        Method::Put => HttpMethod::Put,
        Method::Patch => HttpMethod::Patch,
        Method::Delete => HttpMethod::Delete,
    };
    let scheme = match request.scheme {
        Scheme::Http => HttpScheme::Http,
        Scheme::Https => HttpScheme::Https,
    };
    let refused =
        |what: &str| TransportError::fatal(format!("the host refused the request {what}"));
    outgoing
        .set_method(&method)
        .map_err(|()| refused("method"))?;
    outgoing
        .set_scheme(Some(&scheme))
        .map_err(|()| refused("scheme"))?;
    outgoing
        .set_authority(Some(&request.authority))
        .map_err(|()| refused("authority (check LETHE_KUBE_URL)"))?;
    outgoing
        .set_path_with_query(Some(&request.path_with_query))
        .map_err(|()| refused("path"))?;
    // The body must be taken before `handle` consumes the request; it is written afterwards,
    // while the host sends.
    let body = match &request.body {
        Some(bytes) => Some((outgoing.body().map_err(|()| refused("body"))?, bytes)),
        None => None,
    };
    let options = RequestOptions::new();
    // A host that does not support a timeout keeps its own default; that is no reason to fail.
    let _ = options.set_connect_timeout(Some(nanos(retry::CONNECT_TIMEOUT)));
    let _ = options.set_first_byte_timeout(Some(nanos(retry::FIRST_BYTE_TIMEOUT)));
    let _ = options.set_between_bytes_timeout(Some(nanos(retry::BETWEEN_BYTES_TIMEOUT)));
    let future = outgoing_handler::handle(outgoing, Some(options))
        .map_err(|code| retry::classify_refused(&code))?;

    let mut write_error = None;
    if let Some((body, bytes)) = body {
        match write_all(&body, bytes) {
            Ok(()) => {
                // A failed finish shows up as the response's error below.
                let _ = OutgoingBody::finish(body, None);
            }
            // An unfinished body aborts the request; the response future reports how.
            Err(code) => {
                write_error = code;
                drop(body);
            }
        }
    }

    let response = match wait(&future) {
        Ok(response) => response,
        Err(code) => {
            return Err(retry::classify(write_error.as_ref().unwrap_or(&code)));
        }
    };
    let code = response.status();
    let retry_after = response
        .headers()
        .get("retry-after")
        .first()
        .and_then(|v| lethe_retry::parse_retry_after(v, std::time::SystemTime::now()));
    let body = read_all(&response)?;
    Ok(Attempt::answered(code, body, retry_after))
}

/// Writes the request body; on failure, the error code when the stream gave one.
fn write_all(body: &OutgoingBody, bytes: &[u8]) -> Result<(), Option<ErrorCode>> {
    let stream = body.write().map_err(|()| None)?;
    // `blocking-write-and-flush` takes at most 4096 bytes per call.
    for chunk in bytes.chunks(4096) {
        match stream.blocking_write_and_flush(chunk) {
            Ok(()) => {}
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(wasip2::http::types::http_error_code(&e));
            }
            Err(StreamError::Closed) => return Err(None),
        }
    }
    Ok(())
}

/// Blocks until the response head arrives.
fn wait(future: &FutureIncomingResponse) -> Result<IncomingResponse, ErrorCode> {
    loop {
        match future.get() {
            Some(Ok(result)) => return result,
            Some(Err(())) => {
                return Err(ErrorCode::InternalError(Some(
                    "the response was already taken".into(),
                )));
            }
            None => future.subscribe().block(),
        }
    }
}

/// Reads the whole response body, up to [`MAX_RESPONSE_BYTES`].
fn read_all(response: &IncomingResponse) -> Result<Vec<u8>, TransportError> {
    let body = response
        .consume()
        .map_err(|()| TransportError::lost("the response body was already taken"))?;
    let stream = body
        .stream()
        .map_err(|()| TransportError::lost("the response body stream was already taken"))?;
    let out = read_stream(&stream);
    // The stream is a child of the body and must go first.
    drop(stream);
    drop(IncomingBody::finish(body));
    out
}

fn read_stream(stream: &InputStream) -> Result<Vec<u8>, TransportError> {
    let mut out = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => {
                out.extend_from_slice(&chunk);
                if out.len() > MAX_RESPONSE_BYTES {
                    return Err(TransportError::fatal(format!(
                        "the API server's answer exceeds {} MiB",
                        MAX_RESPONSE_BYTES / (1024 * 1024)
                    )));
                }
            }
            Err(StreamError::Closed) => return Ok(out),
            Err(StreamError::LastOperationFailed(e)) => {
                return Err(match wasip2::http::types::http_error_code(&e) {
                    Some(code) => retry::classify_in_body(&code),
                    None => TransportError::lost(format!(
                        "reading the response: {}",
                        e.to_debug_string()
                    )),
                });
            }
        }
    }
}
