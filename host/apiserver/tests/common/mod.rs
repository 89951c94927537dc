//! Shared helpers: a cluster from `KUBECONFIG` when set, else the embedded server in memory.
#![allow(dead_code)]

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use lethe_apiserver::{ApiServerConfig, RunningApiServer, start};
use serde_json::Value;
use std::time::Duration;

pub struct TestCluster {
    pub client: Client,
    pub config: Config,
    pub server: Option<RunningApiServer>,
}

pub fn suffix() -> String {
    uuid_like()
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("{:x}{n}", t % 0xfffff)
}

pub async fn config_from_yaml(yaml: &str) -> Config {
    let kc = Kubeconfig::from_yaml(yaml).expect("kubeconfig parses");
    Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig is usable")
}

impl TestCluster {
    /// The cluster in `KUBECONFIG` when set, else a fresh in-memory embedded server.
    pub async fn new() -> TestCluster {
        if std::env::var_os("KUBECONFIG").is_some() {
            let mut config = Config::infer().await.expect("KUBECONFIG is usable");
            config.default_retry = false;
            let client = Client::try_from(config.clone()).expect("client");
            return TestCluster {
                client,
                config,
                server: None,
            };
        }
        TestCluster::embedded(ApiServerConfig::default()).await
    }

    pub async fn embedded(cfg: ApiServerConfig) -> TestCluster {
        let server = start(cfg).await.expect("embedded server starts");
        let mut config = config_from_yaml(&server.kubeconfig_yaml()).await;
        config.default_retry = false;
        let client = Client::try_from(config.clone()).expect("client");
        TestCluster {
            client,
            config,
            server: Some(server),
        }
    }

    /// A client acting as `user` (and `groups`): on the embedded server, with a token of its
    /// own (the embedded server serves no impersonation); on another cluster, impersonating
    /// them through the admin credentials.
    pub async fn client_as(&self, user: &str, groups: &[&str]) -> Client {
        if let Some(server) = &self.server {
            let token = format!("as-{user}-{}", suffix());
            server.add_token(&token, user, &format!("uid-{token}"), groups);
            return self.client_with_token(&token).await.expect("embedded");
        }
        let mut c = self.config.clone();
        c.auth_info.impersonate = Some(user.to_string());
        if !groups.is_empty() {
            c.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        }
        Client::try_from(c).expect("client")
    }

    /// A client with its own bearer token (embedded server only).
    pub async fn client_with_token(&self, token: &str) -> Option<Client> {
        let server = self.server.as_ref()?;
        let yaml = server
            .kubeconfig_yaml()
            .replace(server.admin_token(), token);
        let mut config = config_from_yaml(&yaml).await;
        config.default_retry = false;
        Some(Client::try_from(config).expect("client"))
    }

    /// Creates a uniquely named namespace.
    pub async fn namespace(&self, prefix: &str) -> String {
        use k8s_openapi::api::core::v1::Namespace;
        use kube::api::{Api, PostParams};
        let name = format!("{prefix}-{}", suffix());
        let api: Api<Namespace> = Api::all(self.client.clone());
        let ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name}
        }))
        .expect("namespace");
        api.create(&PostParams::default(), &ns)
            .await
            .expect("namespace created");
        // A real cluster's root-CA publisher adds kube-root-ca.crt a moment later (the embedded
        // one publishes none); wait for it, so that a test counting the namespace's contents
        // counts a settled set.
        let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
            Api::namespaced(self.client.clone(), &name);
        for _ in 0..if self.server.is_some() { 0 } else { 300 } {
            if configmaps
                .get_opt("kube-root-ca.crt")
                .await
                .ok()
                .flatten()
                .is_some()
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        name
    }

    pub fn embedded_server(&self) -> Option<&RunningApiServer> {
        self.server.as_ref()
    }

    pub async fn shutdown(self) {
        if let Some(s) = self.server {
            s.shutdown().await;
        }
    }
}

/// Asks the server to compact its watch history (`POST /lethe/compact`, admin only). Real
/// clusters answer 404 and compact on their own; that is fine.
/// Returns whether the server compacted.
pub async fn compact(c: &TestCluster) -> bool {
    let req = http::Request::post("/lethe/compact")
        .body(Vec::new())
        .expect("request");
    let res = c.client.request_text(req).await;
    if c.server.is_some() {
        res.expect("the embedded server compacts");
        return true;
    }
    res.is_ok()
}

/// The `Status` of a failed kube call.
pub fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `f` until it returns Some, or panics after `secs` seconds.
pub async fn eventually<T, F, Fut>(secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("condition not met within {secs}s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A raw HTTP/1.1 response.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawResponse {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("JSON body")
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one plain-HTTP request on a fresh connection. Err when the connection closes
/// without a response.
pub async fn raw_request(
    url: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Result<RawResponse, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url
        .strip_prefix("http://")
        .ok_or("raw requests need a plain-HTTP server")?;
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    let body = body.unwrap_or_default();
    req.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ));
    s.write_all(req.as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = vec![];
    s.read_to_end(&mut buf).await.map_err(|e| e.to_string())?;
    if buf.is_empty() {
        return Err("connection closed without a response".into());
    }
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, rest) = text.split_once("\r\n\r\n").ok_or("malformed response")?;
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or("no status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked"));
    let body = if chunked {
        let mut out = String::new();
        let mut r = rest;
        while let Some((size, tail)) = r.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 || tail.len() < n {
                break;
            }
            out.push_str(&tail[..n]);
            r = tail[n..].trim_start_matches("\r\n");
        }
        out.into_bytes()
    } else {
        rest.as_bytes().to_vec()
    };
    Ok(RawResponse {
        status,
        headers,
        body,
    })
}
