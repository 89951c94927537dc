//! `lethe-apiserver`: an embedded, Kubernetes-API-compatible server.
//!
//! It serves the parts of the Kubernetes REST API that lethe uses, well enough that `kubectl`
//! (v1.32) and the `kube` crate cannot tell it from a real kube-apiserver:
//!
//! - discovery (`/version`, `/api`, `/apis`, aggregated `apidiscovery.k8s.io/v2` and the legacy
//!   resource lists); an OpenAPI v3 document of paths without schemas (enough for kubectl's
//!   server-side field validation check, so `kubectl apply` needs no `--validate=false`; there is
//!   nothing for `kubectl explain`) and an empty OpenAPI v2 one (for kubectl's client-side
//!   validation of `List` files); server-side Table printing for `kubectl get`;
//! - Namespaces, ConfigMaps, Secrets, ServiceAccounts, Events, CronJobs (with the real
//!   server's defaults and validation; unknown fields are dropped, or refused under strict field
//!   validation, as the real server's decoding does), Leases, RBAC objects (the bootstrap
//!   `admin`, `edit` and `view` composed once; no aggregation controller),
//!   `ClusterIP` Services (the v1 defaults and validation; nothing is allocated, so the other
//!   types and client-chosen cluster IPs are refused),
//!   CustomResourceDefinitions and the custom resources they define (status subresource,
//!   structural-schema pruning, defaults and validation), and access reviews
//!   (`kubectl auth can-i`, `kubectl auth whoami`);
//! - object semantics: uid, one cluster-wide resourceVersion counter, generation, finalizers and
//!   deletionTimestamp, delete preconditions, Background/Foreground/Orphan propagation with a
//!   garbage collector, namespace deletion, `Status` errors shaped like the real server's;
//! - lists with label/field selectors and limit/continue; watches that replay from a ring of
//!   recent events, report selector transitions, send bookmarks, and answer 410 Gone once a
//!   version has been compacted away;
//! - token authentication from a `--token-auth-file` style CSV and from TokenRequests
//!   (`kubectl create token`: service-account JWTs signed with a key kept in the data dir,
//!   so they outlive a restart, and void once their account is gone; every namespace gets its
//!   `default` ServiceAccount), and RBAC authorization (`system:masters` may do everything);
//!   impersonation (`kubectl --as`, `Impersonate-User`/`-Group`/`-Uid`/`-Extra-*`), each name
//!   authorized with the `impersonate` verb as kube-apiserver does.
//!
//! Request bodies are JSON; kubectl's protobuf bodies are decoded for the kinds its typed
//! clients send (`kubectl create namespace|configmap|secret|role|rolebinding|token…`,
//! `auth can-i`), but not for Services or kinds with a pod template (`kubectl create
//! service|cronjob|deployment` are refused with 415; `kubectl apply` and `create -f` send JSON). Pods, Nodes and Jobs are not
//! served: nothing here runs workloads, and lethe reads none.
//! kubectl only sends bearer tokens over TLS, so serve HTTPS (`tls: true`) for kubectl; the
//! `kube` crate works over both.
//!
//! State lives in memory (BTreeMap indexes) and is written through to SQLite when a data
//! directory is given. Faults (latency, error rates, dropped connections, stale reads) can be
//! injected for tests, by configuration or at runtime through the admin-only `/lethe/faults`
//! endpoint (`GET`/`PUT` a [`FaultConfig`] as JSON); `POST /lethe/compact` drops the watch
//! history, like an etcd compaction; `POST /lethe/drop-watches` ends every open watch, like an
//! API server restart. `GET /lethe/requests` counts the requests answered, by verb and resource,
//! for benchmarks.
//!
//! Start it with [`start`]; the returned [`RunningApiServer`] knows its URL, admin token and
//! kubeconfig.

mod auth;
mod bootstrap_policy;
mod controllers;
mod front;
mod kinds;
mod managed;
mod openapi;
mod patch;
mod proto;
mod resources;
mod sa_token;
mod schema;
mod selector;
mod shape;
mod status;
mod store;
mod table;
mod tls;
mod util;
mod validation;
mod verbs;

use crate::util::meta_str;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Fault injection; everything off by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultConfig {
    /// Added latency per request, in milliseconds.
    pub latency_ms: u64,
    /// Fraction (0..1) of requests answered with `error_status`.
    pub error_rate: f64,
    /// 500, 503 or 429.
    pub error_status: u16,
    /// Fraction (0..1) of requests answered 429 with `Retry-After`, besides those of
    /// `error_rate`: with both, a storm of server errors and throttling at once.
    pub throttle_rate: f64,
    /// `Retry-After` for 429 answers, in seconds.
    pub retry_after_seconds: u64,
    /// Fraction (0..1) of requests whose connection is closed without a response.
    pub drop_rate: f64,
    /// After a write, GET and LIST return the previous version of the object for this long.
    pub stale_read_ms: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            latency_ms: 0,
            error_rate: 0.0,
            error_status: 500,
            throttle_rate: 0.0,
            retry_after_seconds: 1,
            drop_rate: 0.0,
            stale_read_ms: 0,
        }
    }
}

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ApiServerConfig {
    /// None = in-memory (tests); Some(dir) = SQLite file `dir/cluster.db`, token file
    /// `dir/tokens.csv`, kubeconfig `dir/kubeconfig`, service-account signing key `dir/sa.key`.
    pub data_dir: Option<PathBuf>,
    /// Default 127.0.0.1:0 (any free port).
    pub listen: SocketAddr,
    /// Serve HTTPS with a generated self-signed CA (CA written into the kubeconfig).
    pub tls: bool,
    /// Also serve the same cluster over plain HTTP here, beside the TLS listener. Hosts whose
    /// `wasi:http` trusts only the public web roots need it, while kubectl keeps the kubeconfig's
    /// TLS address: client-go sends no bearer token over plain HTTP.
    pub plain_listen: Option<SocketAddr>,
    /// Fault injection, off by default.
    pub faults: FaultConfig,
}

impl Default for ApiServerConfig {
    fn default() -> Self {
        ApiServerConfig {
            data_dir: None,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            tls: false,
            plain_listen: None,
            faults: FaultConfig::default(),
        }
    }
}

/// A running server; dropping it does not stop it, call [`RunningApiServer::shutdown`].
pub struct RunningApiServer {
    url: String,
    plain_url: Option<String>,
    admin_token: String,
    kubeconfig_yaml: String,
    kubeconfig_path: Option<PathBuf>,
    temp_dir: Option<PathBuf>,
    shared: Arc<front::Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    connections: Arc<parking_lot::Mutex<tokio::task::JoinSet<()>>>,
}

impl RunningApiServer {
    /// e.g. `http://127.0.0.1:41234`
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The plain HTTP address served beside the main one ([`ApiServerConfig::plain_listen`]),
    /// e.g. `http://127.0.0.1:6480`.
    pub fn plain_url(&self) -> Option<&str> {
        self.plain_url.as_deref()
    }

    /// The kubeconfig file (in the data dir, or a temporary file for in-memory servers).
    pub fn kubeconfig_path(&self) -> Option<&Path> {
        self.kubeconfig_path.as_deref()
    }

    /// The admin kubeconfig content.
    pub fn kubeconfig_yaml(&self) -> String {
        self.kubeconfig_yaml.clone()
    }

    /// The bearer token of the `system:masters` admin the kubeconfig uses; on disk it is reused
    /// from `tokens.csv` across restarts.
    pub fn admin_token(&self) -> &str {
        &self.admin_token
    }

    /// Adds a user to the token table (persisted to tokens.csv when on disk).
    pub fn add_token(&self, token: &str, user: &str, uid: &str, groups: &[&str]) {
        self.shared.tokens.add(token, user, uid, groups);
    }

    /// Replaces the fault injection in force, as a PUT of `/lethe/faults` does; out-of-range rates
    /// are clamped to 0..1 and an `error_status` other than 429, 500 or 503 becomes 500.
    pub fn set_faults(&self, faults: FaultConfig) {
        self.shared.set_faults(faults);
    }

    /// Ends every open watch stream, as `POST /lethe/drop-watches` does.
    pub fn drop_watches(&self) {
        self.shared.store.drop_watches();
    }

    /// Drops the watch history, as `POST /lethe/compact` does: a watch from an older version
    /// is answered 410 Gone. Returns the version compacted to.
    pub fn compact(&self) -> u64 {
        self.shared.store.compact()
    }

    /// The requests answered so far, keyed `"<verb> <resource>"` (for example
    /// `"GET cronjobs"`, `"WATCH cronjobs"`), as `GET /lethe/requests` answers them.
    pub fn requests(&self) -> std::collections::BTreeMap<String, u64> {
        self.shared.requests.snapshot()
    }

    /// Stops accepting, closes every connection and the controllers.
    pub async fn shutdown(self) {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        let mut conns = std::mem::take(&mut *self.connections.lock());
        conns.abort_all();
        while conns.join_next().await.is_some() {}
        if let Some(d) = &self.temp_dir {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn random_token() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..32)
        .map(|_| format!("{:x}", rng.random_range(0..16u8)))
        .collect()
}

fn kubeconfig(url: &str, token: &str, ca_pem: Option<&str>) -> String {
    use base64::Engine;
    let ca = ca_pem
        .map(|p| {
            format!(
                "    certificate-authority-data: {}\n",
                base64::engine::general_purpose::STANDARD.encode(p)
            )
        })
        .unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lethe\n  cluster:\n    server: {url}\n{ca}users:\n- name: lethe-admin\n  user:\n    token: {token}\ncontexts:\n- name: lethe\n  context:\n    cluster: lethe\n    user: lethe-admin\n    namespace: default\ncurrent-context: lethe\npreferences: {{}}\n"
    )
}

/// Creates the default namespaces and RBAC objects on a fresh store, and what the controllers
/// keep in place (each namespace's defaults) before serving.
fn bootstrap(store: &store::Store, info: &controllers::ClusterInfo) -> anyhow::Result<()> {
    let namespaces = ["default", "kube-system", "kube-public", "kube-node-lease"].map(|ns| {
        let obj =
            serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        ("namespaces", obj)
    });
    for (plural, obj) in namespaces
        .into_iter()
        .chain(bootstrap_policy::default_rbac())
    {
        let def = resources::builtins()
            .iter()
            .find(|d| d.plural == plural)
            .ok_or_else(|| anyhow::anyhow!("no built-in {plural}"))?;
        let name = meta_str(&obj, "name").to_string();
        if store.get(def.key(), "", &name, false).is_none() {
            controllers::create_own(store, def, "", obj)
                .map_err(|e| anyhow::anyhow!("bootstrap {plural} {name}: {e}"))?;
        }
    }
    for _ in 0..5 {
        if !controllers::pass(store, &controllers::all(info)) {
            break;
        }
    }
    Ok(())
}

/// The store, the static tokens, the admin's token and (without a data dir) the temporary dir
/// the kubeconfig goes to: kept in `data_dir` when there is one (created private, as it holds
/// the admin token and the CA key), else in memory with a fresh admin token.
fn open_state(
    data_dir: Option<&Path>,
) -> anyhow::Result<(store::Store, auth::Tokens, String, Option<PathBuf>)> {
    Ok(match data_dir {
        Some(dir) => {
            if !dir.exists() {
                std::fs::create_dir_all(dir)?;
                // It holds the admin token and the CA key.
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
                }
            }
            let store = store::Store::open(Some(&dir.join("cluster.db")))?;
            let token_file = dir.join("tokens.csv");
            let content = std::fs::read_to_string(&token_file).unwrap_or_default();
            let tokens = auth::Tokens::new(Some(token_file.clone()), &content);
            let admin = content
                .lines()
                .filter_map(auth::parse_token_line)
                .find(|(_, u)| u.is_master())
                .map(|(t, _)| t);
            let admin = match admin {
                Some(t) => t,
                None => {
                    let t = random_token();
                    tokens.add(&t, "admin", "admin", &["system:masters"]);
                    #[cfg(unix)]
                    {
                        use std::os::unix::fs::PermissionsExt;
                        let _ = std::fs::set_permissions(
                            &token_file,
                            std::fs::Permissions::from_mode(0o600),
                        );
                    }
                    t
                }
            };
            (store, tokens, admin, None)
        }
        None => {
            let store = store::Store::open(None)?;
            let t = random_token();
            let tokens = auth::Tokens::new(None, "");
            tokens.add(&t, "admin", "admin", &["system:masters"]);
            let tmp =
                std::env::temp_dir().join(format!("lethe-apiserver-{}", uuid::Uuid::new_v4()));
            (store, tokens, t, Some(tmp))
        }
    })
}

/// The serving certificate and its CA, whose key is kept in `data_dir` (and reused) when there
/// is one.
fn tls_identity(data_dir: Option<&Path>) -> anyhow::Result<tls::Generated> {
    let key_file = data_dir.map(|d| d.join("ca.key"));
    let existing = key_file
        .as_ref()
        .and_then(|f| std::fs::read_to_string(f).ok());
    // The certificate is only meaningful with the key it was made with.
    let existing_cert = data_dir
        .filter(|_| existing.is_some())
        .and_then(|d| std::fs::read_to_string(d.join("ca.crt")).ok());
    let generated = tls::generate(
        existing
            .as_deref()
            .map(|key| (key, existing_cert.as_deref())),
    )?;
    if let (Some(f), None) = (&key_file, &existing) {
        crate::util::write_private(f, &generated.ca_key_pem)?;
    }
    Ok(generated)
}

/// Starts the server; returns once it is listening.
pub async fn start(config: ApiServerConfig) -> anyhow::Result<RunningApiServer> {
    let (store, tokens, admin_token, temp_dir) = open_state(config.data_dir.as_deref())?;
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = advertised(listener.local_addr()?);
    let plain_listener = match config.plain_listen {
        Some(plain) => Some(tokio::net::TcpListener::bind(plain).await?),
        None => None,
    };
    let tls = if config.tls {
        Some(tls_identity(config.data_dir.as_deref())?)
    } else {
        None
    };
    let sa_key = config.data_dir.as_ref().map(|d| d.join("sa.key"));
    let sa_tokens = Arc::new(sa_token::Signer::load_or_generate(sa_key.as_deref())?);
    let cluster_info = controllers::ClusterInfo {
        ca_pem: tls.as_ref().map(|t| t.ca_pem.clone()).unwrap_or_default(),
        signer: Some(sa_tokens.clone()),
    };
    bootstrap(&store, &cluster_info)?;
    let store = Arc::new(store);
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{addr}");
    let shared = Arc::new(front::Shared {
        store: store.clone(),
        tokens,
        sa_tokens,
        admin_token: admin_token.clone(),
        faults: parking_lot::RwLock::new(FaultConfig::default()),
        faults_active: AtomicBool::new(false),
        server_address: addr.to_string(),
        requests: front::RequestCounts::default(),
        audit: front::AuditLog::default(),
    });
    shared.set_faults(config.faults.clone());
    let kubeconfig_yaml = kubeconfig(&url, &admin_token, tls.as_ref().map(|t| t.ca_pem.as_str()));
    let kubeconfig_path = match config.data_dir.as_ref().or(temp_dir.as_ref()) {
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            let p = dir.join("kubeconfig");
            crate::util::write_private(&p, &kubeconfig_yaml)?;
            Some(p)
        }
        None => None,
    };
    if let (Some(dir), Some(t)) = (&config.data_dir, &tls) {
        std::fs::write(dir.join("ca.crt"), &t.ca_pem)?;
    }
    let connections = Arc::new(parking_lot::Mutex::new(tokio::task::JoinSet::new()));
    let acceptor = tls.map(|t| t.acceptor);
    let mut tasks = vec![tokio::spawn(accept(
        listener,
        acceptor,
        shared.clone(),
        connections.clone(),
    ))];
    let mut plain_url = None;
    if let Some(plain) = plain_listener {
        plain_url = Some(format!("http://{}", advertised(plain.local_addr()?)));
        tasks.push(tokio::spawn(accept(
            plain,
            None,
            shared.clone(),
            connections.clone(),
        )));
    }
    tasks.push(tokio::spawn(controllers::run(store.clone(), cluster_info)));
    tracing::info!(%url, plain_url = ?plain_url, kubeconfig = ?kubeconfig_path, "lethe-apiserver listening");
    Ok(RunningApiServer {
        url,
        plain_url,
        admin_token,
        kubeconfig_yaml,
        kubeconfig_path,
        temp_dir,
        shared,
        tasks,
        connections,
    })
}

/// The address clients are told to use for a listener bound to `bound`: they cannot connect to
/// 0.0.0.0 or [::], so loopback stands in for those.
fn advertised(bound: SocketAddr) -> SocketAddr {
    match bound.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::from(([127, 0, 0, 1], bound.port()))
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, bound.port()))
        }
        _ => bound,
    }
}

/// Accepts connections on `listener` for ever, over TLS when there is an acceptor, each served
/// in `connections`.
async fn accept(
    listener: tokio::net::TcpListener,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    shared: Arc<front::Shared>,
    connections: Arc<parking_lot::Mutex<tokio::task::JoinSet<()>>>,
) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let shared = shared.clone();
        let acceptor = acceptor.clone();
        let mut set = connections.lock();
        // Reap finished connections so the set does not grow without bound.
        while set.try_join_next().is_some() {}
        set.spawn(async move {
            let svc = hyper::service::service_fn(move |req| front::handle(shared.clone(), req));
            let builder = hyper::server::conn::http1::Builder::new();
            match acceptor {
                Some(acc) => {
                    if let Ok(tls_stream) = acc.accept(stream).await {
                        let io = hyper_util::rt::TokioIo::new(tls_stream);
                        let _ = builder.serve_connection(io, svc).await;
                    }
                }
                None => {
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = builder.serve_connection(io, svc).await;
                }
            }
        });
    }
}
