//! `lethe:platform/kube` over the Kubernetes REST API, written against a [`Transport`] so that
//! everything but the HTTP exchange itself runs (and is tested) natively.
//!
//! The semantics are the lethe host's (`host/kube`): discovery resolves kinds, the same paths
//! and error cases, the same retry rules ([`retry`]), and the same data model and parsing
//! ([`lethe_kube_model`], shared with the host).

pub mod discovery;
pub mod error;
pub mod retry;
pub mod url;

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use serde_json::Value as Json;

use discovery::{DiscoveryCache, Resolved};
use error::{forbidden, unauthorized};
use lethe_kube_model::{
    ChangeBatch, Collection, DeleteOptions, DeleteOutcome, Identity, KubeError as Error,
    ListOptions, Object, ObjectList, ObjectRef, PatchKind, PropagationPolicy, Status,
};
use lethe_kube_model::{check_segment, parse};
use lethe_retry::Budget;
use retry::{Answer, Attempt, Safety, Verdict, patch_safety, replace_safety};
use url::{ClusterUrl, Scheme, URL_ENV, group_version_path, split_api_version};

/// The environment variable holding the privileged identity's bearer token.
pub const TOKEN_ENV: &str = "LETHE_KUBE_TOKEN";

/// How long an accepted token is not checked again by [`Client::authenticate`], as on the host.
pub const AUTHENTICATION_TTL: Duration = Duration::from_secs(10);

/// The largest answer body read; past it the server (or a proxy) is misbehaving, and reading on
/// would only exhaust the instance's memory.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

const JSON: &str = "application/json";

/// How long one `changes` call's watch request runs: the server ends it after this many seconds
/// and the changes it sent are the batch. (This adapter keeps nothing between calls, so it cannot
/// hold a watch open as the lethe host does.)
pub const CHANGES_WATCH_SECONDS: u32 = 1;

/// The prefix of this adapter's bookmarks, which are resourceVersions.
const BOOKMARK_PREFIX: &str = "rv:";

/// An HTTP method the client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

/// One request, complete with its headers. `Debug` hides the `Authorization` value.
#[derive(Clone, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The cluster URL's scheme.
    pub scheme: Scheme,
    /// The cluster URL's authority.
    pub authority: String,
    /// The path (with the cluster URL's prefix) and query.
    pub path_with_query: String,
    /// Header names (lower case) and values.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body, when the method has one.
    pub body: Option<Vec<u8>>,
}

impl Request {
    /// The value of header `name`.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, String)> = self
            .headers
            .iter()
            .map(|(n, v)| {
                let shown = if n == "authorization" {
                    "<redacted>".to_owned()
                } else {
                    String::from_utf8_lossy(v).into_owned()
                };
                (n.as_str(), shown)
            })
            .collect();
        f.debug_struct("Request")
            .field("method", &self.method)
            .field("path_with_query", &self.path_with_query)
            .field("headers", &headers)
            .field("body_len", &self.body.as_ref().map(Vec::len))
            .finish()
    }
}

/// What the client needs from its environment: one HTTP exchange, sleeping, randomness, a
/// monotonic clock. On wasm this is `wasi:http`, `wasi:clocks` and `wasi:random`.
pub trait Transport {
    /// Sends `request` once and reads the whole answer.
    fn send(&self, request: &Request) -> Attempt;
    /// Sleeps for `delay`.
    fn sleep(&self, delay: Duration);
    /// A random number, for backoff jitter.
    fn random(&self) -> u64;
    /// Monotonic time since an arbitrary origin.
    fn now(&self) -> Duration;
}

/// Whether `token` can travel in `Authorization: Bearer <token>`: visible ASCII (and tabs)
/// only, as an HTTP header value must be. A newline could otherwise smuggle a header.
fn header_safe(token: &str) -> bool {
    token
        .bytes()
        .all(|b| b == b'\t' || (0x20..0x7f).contains(&b))
}

/// The cluster and bearer token a client for `identity` uses, from `env`.
///
/// A blank or malformed caller token is `unauthorized` (as on the host). The privileged identity
/// exists only when `LETHE_KUBE_TOKEN` is set, else it is `forbidden`: a component was given no
/// such identity. A missing or unusable `LETHE_KUBE_URL` is `unavailable`. No message repeats a
/// token.
pub fn credentials(
    identity: &Identity,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(ClusterUrl, String), Error> {
    let token = match identity {
        Identity::Caller(token) => {
            if token.trim().is_empty() {
                return Err(unauthorized("empty bearer token"));
            }
            if !header_safe(token) {
                return Err(unauthorized("malformed bearer token"));
            }
            token.clone()
        }
        Identity::Privileged => {
            // Trimmed: a token pasted from a file often keeps its newline.
            let token = env(TOKEN_ENV)
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .ok_or_else(|| {
                    forbidden(format!(
                        "no privileged identity is configured: set {TOKEN_ENV} to the bearer token the adapter acts with"
                    ))
                })?;
            if !header_safe(&token) {
                return Err(forbidden(format!(
                    "{TOKEN_ENV} is not a usable bearer token"
                )));
            }
            token
        }
    };
    let text = env(URL_ENV).filter(|u| !u.trim().is_empty()).ok_or_else(|| {
        Error::Unavailable(format!(
            "no Kubernetes cluster is configured: set {URL_ENV} to the API server's URL (http:// or https://)"
        ))
    })?;
    let url = ClusterUrl::parse(&text)
        .map_err(|m| Error::Unavailable(format!("cannot use the Kubernetes cluster URL: {m}")))?;
    Ok((url, token))
}

/// The body of a delete: `DeleteOptions` with the propagation policy and preconditions.
pub fn delete_options_body(options: &DeleteOptions) -> Vec<u8> {
    let mut body = serde_json::Map::new();
    body.insert("apiVersion".into(), "v1".into());
    body.insert("kind".into(), "DeleteOptions".into());
    if let Some(policy) = options.propagation_policy {
        let policy = match policy {
            PropagationPolicy::Background => "Background",
            PropagationPolicy::Foreground => "Foreground",
            PropagationPolicy::Orphan => "Orphan",
        };
        body.insert("propagationPolicy".into(), policy.into());
    }
    let mut preconditions = serde_json::Map::new();
    if let Some(uid) = &options.precondition_uid {
        preconditions.insert("uid".into(), uid.as_str().into());
    }
    if let Some(rv) = &options.precondition_resource_version {
        preconditions.insert("resourceVersion".into(), rv.as_str().into());
    }
    if !preconditions.is_empty() {
        body.insert("preconditions".into(), preconditions.into());
    }
    Json::Object(body).to_string().into_bytes()
}

fn body_text(body: Vec<u8>) -> Result<String, Error> {
    String::from_utf8(body)
        .map_err(|e| Error::Unavailable(format!("the API server answered with invalid UTF-8: {e}")))
}

/// A connection to the cluster under one bearer token. `Debug` shows no token.
pub struct Client<T> {
    transport: T,
    url: ClusterUrl,
    token: String,
    discovery: Rc<RefCell<DiscoveryCache>>,
    authenticated_at: Cell<Option<Duration>>,
}

impl<T> fmt::Debug for Client<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl<T: Transport> Client<T> {
    /// A client of `url` with `token`, sharing `discovery` with the instance's other clients
    /// (what a kind resolves to does not depend on who asks).
    pub fn new(
        transport: T,
        url: ClusterUrl,
        token: String,
        discovery: Rc<RefCell<DiscoveryCache>>,
    ) -> Self {
        Client {
            transport,
            url,
            token,
            discovery,
            authenticated_at: Cell::new(None),
        }
    }

    fn request(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> Request {
        let mut headers = vec![
            (
                "authorization".to_owned(),
                format!("Bearer {}", self.token).into_bytes(),
            ),
            ("accept".to_owned(), JSON.as_bytes().to_vec()),
            (
                "user-agent".to_owned(),
                concat!("lethe-wasi-adapter/", env!("CARGO_PKG_VERSION"))
                    .as_bytes()
                    .to_vec(),
            ),
        ];
        let body = body.map(|(content_type, bytes)| {
            headers.push(("content-type".to_owned(), content_type.as_bytes().to_vec()));
            headers.push((
                "content-length".to_owned(),
                bytes.len().to_string().into_bytes(),
            ));
            bytes
        });
        Request {
            method,
            scheme: self.url.scheme,
            authority: self.url.authority.clone(),
            path_with_query: format!("{}{path_and_query}", self.url.prefix),
            headers,
            body,
        }
    }

    /// Sends a request under the retry policy for `safety`.
    fn call(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&str, Vec<u8>)>,
        safety: Safety,
    ) -> Result<Answer, Error> {
        let request = self.request(method, path_and_query, body);
        let mut budget = Budget::new(retry::POLICY);
        loop {
            let attempt = self.transport.send(&request);
            let setback = attempt.setback();
            match retry::judge(attempt, safety) {
                Verdict::Done(answer) => return Ok(answer),
                Verdict::Fail(error) => return Err(error),
                Verdict::Retry { error, retry_after } => {
                    let random = self.transport.random();
                    match budget.next(setback, retry_after, None, random) {
                        Some(delay) => self.transport.sleep(delay),
                        None => return Err(retry::exhausted(error, budget.attempts())),
                    }
                }
            }
        }
    }

    fn call_text(
        &self,
        method: Method,
        path_and_query: &str,
        body: Option<(&str, Vec<u8>)>,
        safety: Safety,
    ) -> Result<String, Error> {
        body_text(self.call(method, path_and_query, body, safety)?.body)
    }

    /// Resolves a kind, asking discovery (with this client's token) on a cache miss.
    pub fn resolve(&self, api_version: &str, kind: &str) -> Result<Resolved, Error> {
        if let Some(hit) = self.discovery.borrow().get(api_version, kind) {
            return Ok(hit);
        }
        if kind.is_empty() {
            return Err(Error::bad_request("empty kind"));
        }
        let (group, version) = split_api_version(api_version)?;
        let path = group_version_path(group, version);
        let answer = self
            .call(Method::Get, &path, None, Safety::Repeatable)
            .map_err(|e| match e {
                Error::NotFound(_) => discovery::version_not_served(api_version),
                other => other,
            })?;
        let kinds = discovery::parse(api_version, group, version, &answer.body)?;
        self.discovery.borrow_mut().fill(&kinds);
        kinds
            .into_iter()
            .find(|r| r.kind == kind)
            .ok_or_else(|| discovery::kind_not_served(api_version, kind))
    }

    /// Resolves the target's kind and checks its name and (for namespaced kinds, required)
    /// namespace.
    fn locate<'a>(&self, target: &'a ObjectRef) -> Result<(Resolved, Option<&'a str>), Error> {
        let resolved = self.resolve(&target.api_version, &target.kind)?;
        let namespace = lethe_kube_model::target_namespace(target, resolved.namespaced)?;
        Ok((resolved, namespace))
    }

    /// Checks that the API server accepts this client's token with a `SelfSubjectReview`.
    ///
    /// Only 401 fails: a 403 still proves the token authenticated. A server without the
    /// review API (before Kubernetes 1.28) is asked the host's way, a one-item namespace list.
    /// Success is remembered for [`AUTHENTICATION_TTL`].
    pub fn authenticate(&self) -> Result<(), Error> {
        let now = self.transport.now();
        if self
            .authenticated_at
            .get()
            .is_some_and(|at| now.saturating_sub(at) < AUTHENTICATION_TTL)
        {
            return Ok(());
        }
        let review = br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#;
        // The review is not stored, so repeating it is harmless.
        let outcome = self.call(
            Method::Post,
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            Some((JSON, review.to_vec())),
            Safety::Repeatable,
        );
        match outcome {
            Ok(_) | Err(Error::Forbidden(_)) => {}
            Err(Error::NotFound(_)) => {
                let one = ListOptions {
                    label_selector: None,
                    field_selector: None,
                    limit: Some(1),
                    continue_token: None,
                };
                match self.list("v1", "Namespace", None, &one) {
                    Ok(_) | Err(Error::Forbidden(_)) => {}
                    Err(e) => return Err(e),
                }
            }
            Err(e) => return Err(e),
        }
        self.authenticated_at.set(Some(self.transport.now()));
        Ok(())
    }

    /// Reads one object.
    pub fn get(&self, target: &ObjectRef) -> Result<Object, Error> {
        let (resolved, namespace) = self.locate(target)?;
        let path = resolved.object_path(namespace, &target.name, None);
        let text = self.call_text(Method::Get, &path, None, Safety::Repeatable)?;
        parse::object(text, &resolved.api_version, &resolved.kind)
    }

    /// Lists one page of a kind, in `namespace` or (with `None`) across all namespaces.
    pub fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ObjectList, Error> {
        let resolved = self.resolve(api_version, kind)?;
        if let Some(ns) = namespace {
            check_segment("namespace", ns)?;
        }
        let path = format!(
            "{}{}",
            resolved.collection_path(namespace),
            url::list_query(options)
        );
        let text = self.call_text(Method::Get, &path, None, Safety::Repeatable)?;
        parse::list(&text, &resolved.api_version, &resolved.kind)
    }

    /// What changed in `collection` since bookmark `since` (WIT `client.changes`), with one
    /// bounded watch request: `since: None` answers the collection's current resourceVersion
    /// (a list of one item) as the bookmark; otherwise the changes the server sends within
    /// [`CHANGES_WATCH_SECONDS`] from that version, at most `max`. An expired version (410), or a
    /// bookmark that is not this adapter's, is `gone`.
    pub fn changes(
        &self,
        collection: &Collection,
        since: Option<&str>,
        max: u32,
    ) -> Result<ChangeBatch, Error> {
        let resolved = self.resolve(&collection.api_version, &collection.kind)?;
        let namespace = collection
            .namespace
            .as_deref()
            .filter(|_| resolved.namespaced);
        if let Some(ns) = namespace {
            check_segment("namespace", ns)?;
        }
        let Some(since) = since else {
            let options = ListOptions {
                label_selector: collection.label_selector.clone(),
                limit: Some(1),
                ..ListOptions::default()
            };
            let list = self.list(
                &collection.api_version,
                &collection.kind,
                namespace,
                &options,
            )?;
            return Ok(ChangeBatch {
                bookmark: format!("{BOOKMARK_PREFIX}{}", list.resource_version),
                ..ChangeBatch::default()
            });
        };
        let gone = |message: String| {
            Error::Gone(Status {
                code: 410,
                reason: "Expired".into(),
                message,
            })
        };
        let from = since
            .strip_prefix(BOOKMARK_PREFIX)
            .filter(|rv| !rv.is_empty())
            .ok_or_else(|| gone(format!("{since:?} is not a bookmark of this host")))?;
        let timeout = CHANGES_WATCH_SECONDS.to_string();
        let path = format!(
            "{}{}",
            resolved.collection_path(namespace),
            url::query(&[
                ("watch", Some("1")),
                ("resourceVersion", Some(from)),
                ("allowWatchBookmarks", Some("true")),
                ("timeoutSeconds", Some(&timeout)),
                ("labelSelector", collection.label_selector.as_deref()),
            ])
        );
        let text = self
            .call_text(Method::Get, &path, None, Safety::Repeatable)
            .map_err(|e| match e {
                Error::Gone(s) => gone(s.message),
                other => other,
            })?;
        let mut batch = ChangeBatch {
            bookmark: since.to_owned(),
            ..ChangeBatch::default()
        };
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let event = parse::watch_event(line, &resolved.api_version, &resolved.kind)?;
            if let parse::WatchEvent::Error(status) = &event {
                return Err(if status.code == 410 {
                    gone(status.message.clone())
                } else {
                    Error::from_status(status.clone())
                });
            }
            if let parse::WatchEvent::Change(change) = event.clone() {
                if batch.changes.len() >= usize::try_from(max.max(1)).unwrap_or(usize::MAX) {
                    batch.more = true;
                    break;
                }
                batch.changes.push(*change);
            }
            if let Some(rv) = event.resource_version().filter(|rv| !rv.is_empty()) {
                batch.bookmark = format!("{BOOKMARK_PREFIX}{rv}");
            }
        }
        Ok(batch)
    }

    /// Creates an object from its JSON; where it goes is read from the body. Never repeated
    /// once it may have reached the server.
    pub fn create(&self, json: &str) -> Result<Object, Error> {
        let (body, api_version, kind) = lethe_kube_model::new_object(json)?;
        let resolved = self.resolve(&api_version, &kind)?;
        let namespace = lethe_kube_model::create_namespace(&body, resolved.namespaced)?;
        let path = resolved.collection_path(namespace);
        let text = self.call_text(
            Method::Post,
            &path,
            Some((JSON, json.as_bytes().to_vec())),
            Safety::Unsafe,
        )?;
        parse::object(text, &resolved.api_version, &resolved.kind)
    }

    /// Replaces an object (PUT); repeated only when the body's resourceVersion guards it.
    pub fn replace(&self, target: &ObjectRef, json: &str) -> Result<Object, Error> {
        let safety = replace_safety(json)?;
        let (resolved, namespace) = self.locate(target)?;
        let path = resolved.object_path(namespace, &target.name, None);
        let text = self.call_text(
            Method::Put,
            &path,
            Some((JSON, json.as_bytes().to_vec())),
            safety,
        )?;
        parse::object(text, &resolved.api_version, &resolved.kind)
    }

    /// Patches an object, or its subresource (`status`).
    pub fn patch(
        &self,
        target: &ObjectRef,
        kind: PatchKind,
        patch: &str,
        subresource: Option<&str>,
    ) -> Result<Object, Error> {
        let safety = patch_safety(kind, patch)?;
        if let Some(sub) = subresource {
            check_segment("subresource", sub)?;
        }
        let (resolved, namespace) = self.locate(target)?;
        let path = resolved.object_path(namespace, &target.name, subresource);
        let text = self.call_text(
            Method::Patch,
            &path,
            Some((kind.content_type(), patch.as_bytes().to_vec())),
            safety,
        )?;
        parse::object(text, &resolved.api_version, &resolved.kind)
    }

    /// Deletes an object: `pending` with the served object while finalizers hold it, else
    /// `deleted`. Deletes are repeated like reads (a repeat after a lost answer may report
    /// `not-found`, which callers treat as done).
    pub fn delete(
        &self,
        target: &ObjectRef,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, Error> {
        let (resolved, namespace) = self.locate(target)?;
        let path = resolved.object_path(namespace, &target.name, None);
        let text = self.call_text(
            Method::Delete,
            &path,
            Some((JSON, delete_options_body(options))),
            Safety::Repeatable,
        )?;
        Ok(
            match parse::deleted(text, &resolved.api_version, &resolved.kind)? {
                Some(object) => DeleteOutcome::Pending(object),
                None => DeleteOutcome::Deleted,
            },
        )
    }
}

#[cfg(test)]
mod tests;
