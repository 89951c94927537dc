//! lethe's Kubernetes capability: dynamic objects as JSON, caller or privileged identity, and
//! retries that never repeat a write whose outcome is unknown.
//!
//! This crate backs the WIT interface `lethe:platform/kube` and knows nothing about
//! WebAssembly: the host maps `client.open(identity)` onto [`Cluster::client`], each client
//! method onto the [`KubeClient`] method of the same name, and each [`KubeError`] variant onto
//! the WIT `error` case of the same name.
//!
//! * **Cluster.** A [`Cluster`] is built from a `kube::Config` (kubeconfig, in-cluster, or the
//!   embedded dev cluster). It owns the privileged client and a discovery cache that resolves
//!   (apiVersion, kind) to the resource's plural and scope, refreshed on a miss.
//! * **Identity.** [`Identity::Privileged`] uses the configuration's own credentials;
//!   [`Identity::Caller`] uses a client with the same server and TLS settings whose only
//!   credential is the caller's bearer token.
//! * **Retries.** See [`RetryPolicy`]: 429 (honouring `Retry-After`), 5xx, transport errors and
//!   timeouts are retried for reads, deletes, merge/strategic patches, JSON patches with a `test`
//!   operation and replaces carrying a resourceVersion. Creates and other unguarded writes are
//!   retried only on 429 and connect errors; otherwise they fail with
//!   [`KubeError::Unavailable`] ("outcome unknown …") or [`KubeError::Timeout`].

#![warn(missing_docs)]

mod changes;
mod config;
mod discovery;
mod rate_limit;
mod transport;

// The model, errors and parsing are shared with the wasi-adapter component.
use lethe_kube_model::{check_segment, error, parse, types};

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use kube::core::Request;
use kube::core::params::{DeleteParams, GetParams, ListParams, PostParams, Preconditions};
use sha2::{Digest, Sha256};

pub use changes::{BUFFER as CHANGES_BUFFER, MAX_BATCH as CHANGES_MAX_BATCH};
pub use config::{ClusterOptions, RetryPolicy};
pub use error::{KubeError, Result};
pub use lethe_kube_model::{convert_collection, convert_list_options, convert_metadata};
pub use rate_limit::{RateLimit, RateLimitError, RateLimitOptions, Waited};
pub use types::{
    Change, ChangeBatch, ChangeType, Collection, DeleteOptions, DeleteOutcome, Identity,
    ListOptions, Metadata, Object, ObjectList, ObjectRef, PatchKind, PropagationPolicy, Status,
};

use discovery::{DiscoveryCache, Resolved};
use lethe_kube_model::retry::{patch_safety, replace_safety};
use transport::Safety;

/// A cached caller client.
struct CallerClient {
    client: kube::Client,
    created: Instant,
    /// When the API server last accepted this token (see [`KubeClient::authenticate`]).
    authenticated: Option<Instant>,
}

/// How long a successful [`KubeClient::authenticate`] is remembered for the same token.
pub const AUTHENTICATION_TTL: Duration = Duration::from_secs(10);

struct ClusterInner {
    /// The configuration clients are derived from (kube's own retries disabled).
    base: kube::Config,
    privileged: kube::Client,
    /// Shared with the clusters [`Cluster::impersonating`] derives: what the API server serves
    /// is the same whoever asks.
    discovery: Arc<DiscoveryCache>,
    callers: Mutex<HashMap<[u8; 32], CallerClient>>,
    options: ClusterOptions,
    counters: transport::Counters,
    /// The collections followed for `changes`.
    feeds: changes::Feeds,
}

/// A snapshot of a [`Cluster`]'s counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KubeStats {
    /// Attempts replayed by the retry policy since the cluster was built (all clients).
    pub retries: u64,
    /// Answers of 429 Too Many Requests since the cluster was built (each one was waited out).
    pub throttled: u64,
    /// Collections followed for `changes` now (each one open watch).
    pub followed: usize,
}

/// One Kubernetes cluster: the privileged client, the discovery cache and the caller-client
/// cache. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<ClusterInner>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("url", &self.inner.base.cluster_url.to_string())
            .finish()
    }
}

fn config_error(e: impl std::fmt::Display) -> KubeError {
    KubeError::Unavailable(format!("cannot configure the Kubernetes client: {e}"))
}

impl Cluster {
    /// A cluster from a `kube::Config`, with default [`ClusterOptions`].
    ///
    /// kube's own retry layer is switched off (`default_retry = false`): this crate's
    /// [`RetryPolicy`] decides what is repeated. Fails with [`KubeError::Unavailable`] when the
    /// client cannot be built (e.g. unreadable certificates).
    pub fn from_config(config: kube::Config) -> Result<Cluster> {
        Cluster::from_config_with(config, ClusterOptions::default())
    }

    /// A cluster from a `kube::Config` with explicit options.
    pub fn from_config_with(config: kube::Config, options: ClusterOptions) -> Result<Cluster> {
        Cluster::build(config, options, Default::default())
    }

    fn build(
        mut config: kube::Config,
        options: ClusterOptions,
        discovery: Arc<DiscoveryCache>,
    ) -> Result<Cluster> {
        config.default_retry = false;
        let privileged = kube::Client::try_from(config.clone()).map_err(config_error)?;
        Ok(Cluster {
            inner: Arc::new(ClusterInner {
                base: config,
                privileged,
                discovery,
                callers: Mutex::new(HashMap::new()),
                options,
                counters: Default::default(),
                feeds: Default::default(),
            }),
        })
    }

    /// A cluster from a kubeconfig file (its current context).
    pub async fn from_kubeconfig(path: &Path, options: ClusterOptions) -> Result<Cluster> {
        let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(config_error)?;
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(config_error)?;
        Cluster::from_config_with(config, options)
    }

    /// A cluster from the environment, as `kube::Config::infer` finds it: `KUBECONFIG` or
    /// `~/.kube/config`, else the in-cluster service account.
    pub async fn infer(options: ClusterOptions) -> Result<Cluster> {
        let config = kube::Config::infer().await.map_err(config_error)?;
        Cluster::from_config_with(config, options)
    }

    /// The API server URL.
    pub fn url(&self) -> String {
        self.inner.base.cluster_url.to_string()
    }

    /// Counters since the cluster was built.
    pub fn stats(&self) -> KubeStats {
        KubeStats {
            retries: self.inner.counters.retries.load(Ordering::Relaxed),
            throttled: self.inner.counters.throttled.load(Ordering::Relaxed),
            followed: self.inner.feeds.len(),
        }
    }

    /// The options in force.
    pub fn options(&self) -> ClusterOptions {
        self.inner.options
    }

    /// A client for `identity`.
    ///
    /// [`Identity::Privileged`] gets the host's client. [`Identity::Caller`] gets a client
    /// with the same URL, TLS and proxy settings and the token as its only credential (client
    /// certificates, exec plugins, impersonation and `Authorization` headers of the base
    /// configuration are dropped); such clients are cached briefly by a SHA-256 of the token.
    /// An empty (or blank) token fails with [`KubeError::Unauthorized`], a token that cannot be
    /// an HTTP header value too. This does not check grants: the host does, before calling.
    pub fn client(&self, identity: &Identity) -> Result<KubeClient> {
        let (client, token_key) = match identity {
            Identity::Privileged => (self.inner.privileged.clone(), None),
            Identity::Caller(token) => {
                let client = self.caller_client(token)?;
                (client, Some(Sha256::digest(token.as_bytes()).into()))
            }
        };
        Ok(KubeClient {
            cluster: self.clone(),
            client,
            privileged: matches!(identity, Identity::Privileged),
            token_key,
            deadline: None,
            admission: None,
            waker: None,
        })
    }

    /// The client of the host's own identity.
    pub fn privileged(&self) -> KubeClient {
        KubeClient {
            cluster: self.clone(),
            client: self.inner.privileged.clone(),
            privileged: true,
            token_key: None,
            deadline: None,
            admission: None,
            waker: None,
        }
    }

    /// The same cluster with `token` as the host's own (privileged) identity: the same URL, TLS
    /// and proxy settings and options, and the token as the only credential, as for callers.
    /// This is how the host acts as a ServiceAccount whose token it holds (on the embedded
    /// cluster, the one `deploy/` binds), instead of as the credentials it was configured with.
    pub fn with_privileged_token(&self, token: &str) -> Result<Cluster> {
        Cluster::from_config_with(self.token_config(token), self.inner.options)
    }

    /// The same cluster whose host identity acts as `user` (a ServiceAccount's user name,
    /// `system:serviceaccount:<namespace>:<name>`) through impersonation: every privileged
    /// request carries the configured credential and `Impersonate-User: <user>`, so the API
    /// server first checks that the host may impersonate `user` (RBAC's `impersonate` verb,
    /// which `resourceNames` narrows to named accounts) and then authorizes the request with
    /// `user`'s rights alone. Any impersonation the configuration had is replaced. Caller clients
    /// are unchanged (a caller's token never impersonates); the watches kept for `changes`,
    /// the caller-client cache and the counters are its own, discovery is shared. Nothing is
    /// sent until the first call.
    pub fn impersonating(&self, user: &str) -> Result<Cluster> {
        let mut config = self.inner.base.clone();
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups = None;
        config.auth_info.impersonate_uid = None;
        config.auth_info.impersonate_user_extra = None;
        config
            .headers
            .retain(|(name, _)| !name.as_str().starts_with("impersonate-"));
        Cluster::build(config, self.inner.options, self.inner.discovery.clone())
    }

    /// The base configuration with `token` as its only credential.
    fn token_config(&self, token: &str) -> kube::Config {
        let mut config = self.inner.base.clone();
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.to_owned().into()),
            ..Default::default()
        };
        config.headers.retain(|(name, _)| {
            let name = name.as_str();
            name != "authorization" && !name.starts_with("impersonate-")
        });
        config.default_retry = false;
        config
    }

    fn caller_client(&self, token: &str) -> Result<kube::Client> {
        let unauthorized = |message: &str| {
            KubeError::Unauthorized(Status {
                code: 401,
                reason: "Unauthorized".into(),
                message: message.into(),
            })
        };
        if token.trim().is_empty() {
            return Err(unauthorized("empty bearer token"));
        }
        if http::HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
            return Err(unauthorized("malformed bearer token"));
        }
        let key: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let ttl = self.inner.options.caller_client_ttl;
        {
            let cache = self
                .inner
                .callers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(hit) = cache.get(&key)
                && hit.created.elapsed() < ttl
            {
                return Ok(hit.client.clone());
            }
        }
        // Building the client never echoes the token; report it generically anyway.
        let client = kube::Client::try_from(self.token_config(token))
            .map_err(|_| unauthorized("cannot build a client for the bearer token"))?;
        let mut cache = self
            .inner
            .callers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let limit = self.inner.options.caller_client_cache_size;
        if limit == 0 {
            return Ok(client);
        }
        if cache.len() >= limit {
            cache.retain(|_, c| c.created.elapsed() < ttl);
        }
        if cache.len() >= limit
            && let Some(oldest) = cache.iter().min_by_key(|(_, c)| c.created).map(|(k, _)| *k)
        {
            cache.remove(&oldest);
        }
        cache.insert(
            key,
            CallerClient {
                client: client.clone(),
                created: Instant::now(),
                authenticated: None,
            },
        );
        Ok(client)
    }

    /// Resolves a kind through discovery, with the privileged client, giving up on retries that
    /// would pass `deadline`.
    async fn resolve(
        &self,
        api_version: &str,
        kind: &str,
        deadline: Option<Instant>,
        admission: Option<&rate_limit::Admission>,
    ) -> Result<Resolved> {
        let route = transport::Route {
            client: &self.inner.privileged,
            policy: &self.inner.options.retry,
            attempt_timeout: self.inner.options.attempt_timeout,
            counters: &self.inner.counters,
            deadline,
            admission,
        };
        self.inner
            .discovery
            .resolve(&route, api_version, kind)
            .await
    }
}

/// A connection to the cluster under one identity. Cheap to clone; `Debug` shows no token.
#[derive(Clone)]
pub struct KubeClient {
    cluster: Cluster,
    client: kube::Client,
    privileged: bool,
    /// SHA-256 of a caller's token, keying the caller-client cache.
    token_key: Option<[u8; 32]>,
    /// When the caller must have its answer: no retry is started that would end later.
    deadline: Option<Instant>,
    /// The rate limit its calls wait for, if any.
    admission: Option<rate_limit::Admission>,
    /// Woken when a collection it follows through `changes` changes.
    waker: Option<Arc<tokio::sync::Notify>>,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient")
            .field("url", &self.cluster.url())
            .field(
                "identity",
                &if self.privileged {
                    "privileged"
                } else {
                    "caller"
                },
            )
            .finish()
    }
}

/// A PATCH of `url` with `body` as `content_type`, answered as JSON.
fn patch_request(url: &str, content_type: &str, body: &str) -> Result<http::Request<Vec<u8>>> {
    http::Request::patch(url)
        .header(http::header::ACCEPT, "application/json")
        .header(http::header::CONTENT_TYPE, content_type)
        .body(body.as_bytes().to_vec())
        .map_err(build_error)
}

fn build_error(e: impl std::fmt::Display) -> KubeError {
    KubeError::bad_request(format!("cannot build the request: {e}"))
}

fn body_text(body: Vec<u8>) -> Result<String> {
    String::from_utf8(body).map_err(|e| {
        KubeError::Unavailable(format!("the API server answered with invalid UTF-8: {e}"))
    })
}

impl KubeClient {
    /// Checks that the API server accepts this client's credentials: `Ok` for the privileged
    /// identity, `Unauthorized` for a caller token it rejects. A caller token accepted within the
    /// last [`AUTHENTICATION_TTL`] is not checked again, so calling this on every request costs
    /// one API call per token per TTL. (Only acceptance is cached: a rejected token is checked
    /// every time, and every other call still carries the token to the API server.)
    pub async fn authenticate(&self) -> Result<()> {
        let Some(key) = self.token_key else {
            return Ok(());
        };
        let recently = {
            let cache = self
                .cluster
                .inner
                .callers
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            cache
                .get(&key)
                .and_then(|c| c.authenticated)
                .is_some_and(|at| at.elapsed() < AUTHENTICATION_TTL)
        };
        if recently {
            return Ok(());
        }
        // Any authenticated identity gets 200 or 403 here; only an unknown token gets 401.
        let options = ListOptions {
            limit: Some(1),
            ..Default::default()
        };
        match self.list("v1", "Namespace", None, &options).await {
            Ok(_) | Err(KubeError::Forbidden(_)) => {}
            Err(e) => return Err(e),
        }
        let mut cache = self
            .cluster
            .inner
            .callers
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = cache.get_mut(&key) {
            entry.authenticated = Some(Instant::now());
        }
        Ok(())
    }

    /// The same client, whose calls give up once a retry could not end before `at`: an attempt
    /// is cut short at `at`, and no retry is started that would end later, so that a caller
    /// with a time limit (a component instance) gets the failure while it can still answer.
    pub fn with_deadline(mut self, at: Instant) -> KubeClient {
        self.deadline = Some(at);
        self
    }

    /// This client, whose `changes` calls register `waker` with the collections they follow:
    /// it is notified whenever one of them changes (see [`changes`](KubeClient::changes)).
    pub fn with_waker(mut self, waker: Arc<tokio::sync::Notify>) -> KubeClient {
        self.waker = Some(waker);
        self
    }

    /// The same client, whose calls (every attempt, discovery included) first wait for their
    /// identity's bucket in `limit`; the time they wait is added to `waited`. A wait that would
    /// pass the deadline fails the call with [`KubeError::Timeout`].
    pub fn with_rate_limit(mut self, limit: Arc<RateLimit>, waited: Arc<Waited>) -> KubeClient {
        self.admission = Some(rate_limit::Admission {
            limit,
            caller: self.token_key,
            recorder: false,
            waited,
        });
        self
    }

    /// The same client, whose calls draw from the rate-limit bucket of the caller whose token
    /// has SHA-256 `caller` (see [`with_rate_limit`](Self::with_rate_limit)): privileged calls
    /// made while answering that caller's request are that caller's load, not the background
    /// work's. A caller's own client already draws from its bucket.
    pub fn charged_to(mut self, caller: [u8; 32]) -> KubeClient {
        if let Some(admission) = &mut self.admission {
            admission.caller = Some(caller);
        }
        self
    }

    fn route(&self) -> transport::Route<'_> {
        self.route_admitted_by(self.admission.as_ref())
    }

    fn route_admitted_by<'a>(
        &'a self,
        admission: Option<&'a rate_limit::Admission>,
    ) -> transport::Route<'a> {
        transport::Route {
            client: &self.client,
            policy: &self.cluster.inner.options.retry,
            attempt_timeout: self.cluster.inner.options.attempt_timeout,
            counters: &self.cluster.inner.counters,
            deadline: self.deadline,
            admission,
        }
    }

    /// Whether this client runs as the host's own identity.
    pub fn is_privileged(&self) -> bool {
        self.privileged
    }

    async fn send(
        &self,
        safety: Safety,
        build: impl Fn() -> Result<http::Request<Vec<u8>>>,
    ) -> Result<String> {
        let answer = transport::call(&self.route(), safety, build).await?;
        body_text(answer.body)
    }

    /// Resolves a kind through discovery, within this client's deadline and rate limit.
    async fn resolve(&self, api_version: &str, kind: &str) -> Result<Resolved> {
        self.cluster
            .resolve(api_version, kind, self.deadline, self.admission.as_ref())
            .await
    }

    /// Resolves the target's kind and checks its namespace and name.
    async fn locate(&self, target: &ObjectRef) -> Result<(Resolved, String)> {
        let resolved = self.resolve(&target.api_version, &target.kind).await?;
        let namespace = lethe_kube_model::target_namespace(target, resolved.namespaced)?;
        let path = resolved.collection_path(namespace);
        Ok((resolved, path))
    }

    /// The API server's version (`GET /version`, which every identity may read), as its
    /// `gitVersion`, e.g. `v1.32.0`. Retried as a read. Answers whether the server is reachable
    /// and serving, for readiness checks.
    pub async fn server_version(&self) -> Result<String> {
        let text = self
            .send(Safety::Repeatable, || {
                http::Request::get("/version")
                    .body(Vec::new())
                    .map_err(build_error)
            })
            .await?;
        let version: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            KubeError::Unavailable(format!("the API server's /version is not JSON: {e}"))
        })?;
        Ok(version
            .get("gitVersion")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string())
    }

    /// Reads one object. Retried on 429, 5xx, transport errors and timeouts.
    pub async fn get(&self, target: &ObjectRef) -> Result<Object> {
        let (resolved, path) = self.locate(target).await?;
        let request = Request::new(path);
        let text = self
            .send(Safety::Repeatable, || {
                request
                    .get(&target.name, &GetParams::default())
                    .map_err(build_error)
            })
            .await?;
        resolved.object(text)
    }

    /// Lists objects of a kind in `namespace`, or across all namespaces with `None` (the
    /// namespace is ignored for cluster-scoped kinds). Retried like [`get`](Self::get). An
    /// expired continue token gives [`KubeError::Gone`].
    pub async fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ObjectList> {
        let resolved = self.resolve(api_version, kind).await?;
        if let Some(ns) = namespace {
            check_segment("namespace", ns)?;
        }
        let request = Request::new(resolved.collection_path(namespace));
        let params = ListParams {
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            limit: options.limit,
            continue_token: options.continue_token.clone(),
            ..ListParams::default()
        };
        let text = self
            .send(Safety::Repeatable, || {
                request.list(&params).map_err(build_error)
            })
            .await?;
        parse::list(
            &text,
            &resolved.resource.api_version,
            &resolved.resource.kind,
        )
    }

    /// Creates an object from its JSON: apiVersion, kind, metadata.name (or generateName) and,
    /// for namespaced kinds, metadata.namespace are taken from the body.
    ///
    /// Retried only on 429 and connect errors, which prove it was not applied; a 5xx, transport
    /// error or timeout gives [`KubeError::Unavailable`] / [`KubeError::Timeout`] saying the
    /// outcome is unknown.
    pub async fn create(&self, json: &str) -> Result<Object> {
        let (body, api_version, kind) = lethe_kube_model::new_object(json)?;
        let resolved = self.resolve(&api_version, &kind).await?;
        let namespace = lethe_kube_model::create_namespace(&body, resolved.namespaced)?;
        let request = Request::new(resolved.collection_path(namespace));
        // An Event is the recorder's, whose bucket is its own (see `rate_limit`).
        let events = (kind == "Event")
            .then(|| {
                self.admission
                    .as_ref()
                    .map(rate_limit::Admission::for_events)
            })
            .flatten();
        let route = match &events {
            Some(admission) => self.route_admitted_by(Some(admission)),
            None => self.route(),
        };
        let answer = transport::call(&route, Safety::Unsafe, || {
            request
                .create(&PostParams::default(), json.as_bytes().to_vec())
                .map_err(build_error)
        })
        .await?;
        resolved.object(body_text(answer.body)?)
    }

    /// Asks the API server a question through a create-only review kind (`TokenReview`,
    /// `SubjectAccessReview`) and gives its whole answer, whose `status` holds the verdict. A
    /// review stores nothing, so it is retried like a read.
    pub async fn review(&self, json: &str) -> Result<serde_json::Value> {
        let (body, api_version, kind) = lethe_kube_model::new_object(json)?;
        let resolved = self.resolve(&api_version, &kind).await?;
        let namespace = lethe_kube_model::create_namespace(&body, resolved.namespaced)?;
        let request = Request::new(resolved.collection_path(namespace));
        let text = self
            .send(Safety::Repeatable, || {
                request
                    .create(&PostParams::default(), json.as_bytes().to_vec())
                    .map_err(build_error)
            })
            .await?;
        serde_json::from_str(&text).map_err(|e| {
            KubeError::Unavailable(format!("the API server's {kind} answer is not JSON: {e}"))
        })
    }

    /// Replaces an object (PUT). When the body's metadata.resourceVersion is set, the server
    /// rejects a stale write with [`KubeError::Conflict`] and the call is retried like a read;
    /// without it the write is unguarded and retried only when provably not applied.
    pub async fn replace(&self, target: &ObjectRef, json: &str) -> Result<Object> {
        let safety = replace_safety(json)?;
        let (resolved, path) = self.locate(target).await?;
        let request = Request::new(path);
        let text = self
            .send(safety, || {
                request
                    .replace(
                        &target.name,
                        &PostParams::default(),
                        json.as_bytes().to_vec(),
                    )
                    .map_err(build_error)
            })
            .await?;
        resolved.object(text)
    }

    /// Patches an object, or its subresource (e.g. `Some("status")`).
    ///
    /// Merge and strategic-merge patches are idempotent and retried like reads; a JSON patch is
    /// retried like a read only when it contains a `test` operation, else only when provably
    /// not applied. A body that is not a JSON object (merge) or array of operations (JSON
    /// patch) is [`KubeError::Invalid`] without a request.
    pub async fn patch(
        &self,
        target: &ObjectRef,
        kind: PatchKind,
        patch: &str,
        subresource: Option<&str>,
    ) -> Result<Object> {
        let safety = patch_safety(kind, patch)?;
        if let Some(sub) = subresource {
            check_segment("subresource", sub)?;
        }
        let (resolved, path) = self.locate(target).await?;
        let mut url = format!("{path}/{}", target.name);
        if let Some(sub) = subresource {
            url.push('/');
            url.push_str(sub);
        }
        let text = self
            .send(safety, || patch_request(&url, kind.content_type(), patch))
            .await?;
        resolved.object(text)
    }

    /// Applies `object` server-side (`PATCH` as `application/apply-patch+yaml`) as
    /// `field_manager`, taking over conflicting fields (`force=true`). Applying the same object
    /// again changes nothing, so it is retried like a read. A `metadata.resourceVersion` in the
    /// object makes it a precondition ([`KubeError::Conflict`] when the object changed since).
    pub async fn apply(
        &self,
        target: &ObjectRef,
        object: &str,
        field_manager: &str,
    ) -> Result<Object> {
        // It goes into the query string as it is.
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':');
        if field_manager.is_empty()
            || field_manager.len() > 128
            || !field_manager.chars().all(plain)
        {
            return Err(KubeError::bad_request(format!(
                "invalid field manager {field_manager:?}"
            )));
        }
        let (resolved, path) = self.locate(target).await?;
        let url = format!(
            "{path}/{}?fieldManager={field_manager}&force=true",
            target.name
        );
        let text = self
            .send(Safety::Repeatable, || {
                patch_request(&url, "application/apply-patch+yaml", object)
            })
            .await?;
        resolved.object(text)
    }

    /// Deletes an object. Deletes are safe to repeat and retried like reads (a repeat after a
    /// lost answer may report [`KubeError::NotFound`], which callers treat as done). Returns
    /// [`DeleteOutcome::Pending`] with the served object when it now waits for finalizers or
    /// dependents, [`DeleteOutcome::Deleted`] when it is gone. A failed precondition is
    /// [`KubeError::Conflict`].
    pub async fn delete(
        &self,
        target: &ObjectRef,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome> {
        let (resolved, path) = self.locate(target).await?;
        let request = Request::new(path);
        let preconditions = (options.precondition_uid.is_some()
            || options.precondition_resource_version.is_some())
        .then(|| Preconditions {
            uid: options.precondition_uid.clone(),
            resource_version: options.precondition_resource_version.clone(),
        });
        let params = DeleteParams {
            propagation_policy: options.propagation_policy.map(|p| match p {
                PropagationPolicy::Background => kube::core::params::PropagationPolicy::Background,
                PropagationPolicy::Foreground => kube::core::params::PropagationPolicy::Foreground,
                PropagationPolicy::Orphan => kube::core::params::PropagationPolicy::Orphan,
            }),
            preconditions,
            ..DeleteParams::default()
        };
        let text = self
            .send(Safety::Repeatable, || {
                request.delete(&target.name, &params).map_err(build_error)
            })
            .await?;
        Ok(
            match parse::deleted(
                text,
                &resolved.resource.api_version,
                &resolved.resource.kind,
            )? {
                Some(object) => DeleteOutcome::Pending(object),
                None => DeleteOutcome::Deleted,
            },
        )
    }
}
