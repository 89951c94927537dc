//! A small fake Kubernetes API server for tests: discovery for a few kinds plus scripted
//! responses per (method, path), with every request recorded.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use lethe_kube::{Cluster, ClusterOptions, RetryPolicy};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The host's (privileged) token the fake cluster is configured with.
pub const HOST_TOKEN: &str = "host-token-0123";

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A status code and JSON body.
    Json(u16, String),
    /// A status code, one extra header and a JSON body.
    WithHeader(u16, &'static str, String, String),
    /// Close the connection without answering.
    Drop,
    /// Wait, then answer 200 with the body.
    Hang(Duration, String),
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    pub body: String,
}

#[derive(Default)]
struct State {
    routes: Mutex<HashMap<(String, String), VecDeque<Reply>>>,
    requests: Mutex<Vec<Recorded>>,
}

/// The fake server; stops when dropped.
pub struct FakeApi {
    pub addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
    connections: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        self.task.abort();
        for c in self.connections.lock().unwrap().drain(..) {
            c.abort();
        }
    }
}

/// A Kubernetes `Status` body.
pub fn status_body(code: u16, reason: &str, message: &str) -> String {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": if code < 300 { "Success" } else { "Failure" },
        "reason": reason, "message": message, "code": code
    })
    .to_string()
}

/// The discovery document of example.com/v1, optionally with the `Thing` kind.
pub fn example_discovery(with_thing: bool) -> String {
    let mut resources = vec![
        serde_json::json!({"name": "widgets", "singularName": "widget", "namespaced": true, "kind": "Widget", "verbs": ["get", "list", "create", "update", "patch", "delete"]}),
        serde_json::json!({"name": "widgets/status", "singularName": "", "namespaced": true, "kind": "Widget", "verbs": ["get", "patch", "update"]}),
        serde_json::json!({"name": "gadgets", "singularName": "gadget", "namespaced": false, "kind": "Gadget", "verbs": ["get", "list", "create", "delete"]}),
    ];
    if with_thing {
        resources.push(serde_json::json!({"name": "things", "singularName": "thing", "namespaced": true, "kind": "Thing", "verbs": ["get"]}));
    }
    serde_json::json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "example.com/v1", "resources": resources}).to_string()
}

fn core_discovery() -> String {
    serde_json::json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
        {"name": "configmaps", "singularName": "configmap", "namespaced": true, "kind": "ConfigMap", "verbs": ["get"]},
        {"name": "namespaces", "singularName": "namespace", "namespaced": false, "kind": "Namespace", "verbs": ["get"]},
    ]})
    .to_string()
}

/// A Widget object body.
pub fn widget(namespace: &str, name: &str, extra_metadata: serde_json::Value) -> String {
    let mut metadata = serde_json::json!({
        "name": name, "namespace": namespace, "uid": format!("uid-{name}"),
        "resourceVersion": "42", "generation": 3, "creationTimestamp": "2024-01-02T03:04:05Z",
        "labels": {"app": "web", "tier": "front"}, "annotations": {"note": "x"}
    });
    if let (Some(m), Some(extra)) = (metadata.as_object_mut(), extra_metadata.as_object()) {
        for (k, v) in extra {
            m.insert(k.clone(), v.clone());
        }
    }
    serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": metadata, "spec": {"size": 1}})
        .to_string()
}

impl FakeApi {
    /// Starts the server on 127.0.0.1 with discovery for `v1` and `example.com/v1`.
    pub async fn start() -> FakeApi {
        FakeApi::start_on("127.0.0.1:0".parse().expect("addr")).await
    }

    /// Starts the server on `addr` (e.g. to bring a stopped server back on its port).
    pub async fn start_on(addr: SocketAddr) -> FakeApi {
        let listener = TcpListener::bind(addr).await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let state = Arc::new(State::default());
        let connections: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let conns = connections.clone();
        let fake = FakeApi {
            addr,
            state: state.clone(),
            connections,
            task: tokio::spawn(async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let state = state.clone();
                    conns.lock().unwrap().push(tokio::spawn(async move {
                        let service = service_fn(move |req| handle(req, state.clone()));
                        let _ = http1::Builder::new()
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    }));
                }
            }),
        };
        fake.script("GET", "/api/v1", vec![Reply::Json(200, core_discovery())]);
        fake.script(
            "GET",
            "/apis/example.com/v1",
            vec![Reply::Json(200, example_discovery(false))],
        );
        fake
    }

    /// Scripts the answers to `method path`: each request takes the next; the last one repeats.
    pub fn script(&self, method: &str, path: &str, replies: Vec<Reply>) {
        self.state
            .routes
            .lock()
            .unwrap()
            .insert((method.to_owned(), path.to_owned()), replies.into());
    }

    /// Stops listening and closes every open connection; new connections are refused.
    pub async fn shutdown(self) {
        drop(self);
        // Let clients notice their pooled connections closing.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// The requests to `method path`.
    pub fn requests_to(&self, method: &str, path: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method && r.path == path)
            .collect()
    }

    /// How many requests hit `method path`.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.requests_to(method, path).len()
    }

    /// A `kube::Config` for this server with the host token.
    pub fn config(&self) -> kube::Config {
        let mut config = kube::Config::new(format!("http://{}", self.addr).parse().expect("uri"));
        config.auth_info.token = Some(HOST_TOKEN.to_owned().into());
        config
    }

    /// A cluster on this server with `retry`, 5 s per attempt.
    pub fn cluster(&self, retry: RetryPolicy) -> Cluster {
        self.cluster_with(ClusterOptions {
            retry,
            attempt_timeout: Duration::from_secs(5),
            ..ClusterOptions::default()
        })
    }

    /// A cluster on this server with `options`.
    pub fn cluster_with(&self, options: ClusterOptions) -> Cluster {
        Cluster::from_config_with(self.config(), options).expect("cluster")
    }
}

/// A quick policy for tests.
pub fn fast(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        max_throttled: max_attempts,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_secs(2),
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

async fn handle(
    req: Request<hyper::body::Incoming>,
    state: Arc<State>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let method = req.method().to_string();
    let path = req.uri().path().to_owned();
    let query = req.uri().query().map(str::to_owned);
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let authorization = header("authorization");
    let content_type = header("content-type");
    let body = req.into_body().collect().await?.to_bytes();
    state.requests.lock().unwrap().push(Recorded {
        method: method.clone(),
        path: path.clone(),
        query,
        authorization,
        content_type,
        body: String::from_utf8_lossy(&body).into_owned(),
    });
    let reply = {
        let mut routes = state.routes.lock().unwrap();
        match routes.get_mut(&(method, path.clone())) {
            Some(queue) if queue.len() > 1 => queue.pop_front(),
            Some(queue) => queue.front().cloned(),
            None => None,
        }
    };
    let reply = reply.unwrap_or_else(|| {
        Reply::Json(
            404,
            status_body(404, "NotFound", &format!("{path} not found")),
        )
    });
    let respond = |code: u16, body: String| {
        Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))
    };
    Ok(match reply {
        Reply::Json(code, body) => respond(code, body)?,
        Reply::WithHeader(code, name, value, body) => {
            let mut r = respond(code, body)?;
            r.headers_mut().insert(name, value.parse()?);
            r
        }
        Reply::Drop => return Err("dropping the connection".into()),
        Reply::Hang(delay, body) => {
            tokio::time::sleep(delay).await;
            respond(200, body)?
        }
    })
}
