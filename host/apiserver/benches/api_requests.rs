//! Benchmarks the embedded API server over loopback HTTP/1.1 keep-alive:
//! creates/s, GET/s, LIST of 10k objects, and watch fan-out to 100 watchers.
//!
//! `cargo bench -p lethe-apiserver --bench api_requests` (set `BENCH_DATA_DIR` to a fresh
//! directory to include SQLite write-through).

// A benchmark: a failed set-up ends the run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use lethe_apiserver::{ApiServerConfig, start};
use std::time::{Duration, Instant};

const OBJECTS: usize = 10_000;
const CONNECTIONS: usize = 8;
const GET_SECONDS: u64 = 5;
const WATCHERS: usize = 100;
const WATCH_EVENTS: usize = 200;

async fn connect(addr: &str) -> anyhow::Result<SendRequest<Full<Bytes>>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    Ok(sender)
}

async fn send(
    s: &mut SendRequest<Full<Bytes>>,
    req: http::Request<Full<Bytes>>,
) -> anyhow::Result<http::Response<hyper::body::Incoming>> {
    s.ready().await?;
    Ok(s.send_request(req).await?)
}

fn request(
    method: &str,
    addr: &str,
    path: &str,
    token: &str,
    body: Option<String>,
) -> http::Request<Full<Bytes>> {
    http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .expect("request")
}

/// Runs `work` on [`CONNECTIONS`] connections at once, each given its index and the server's
/// address and token; what each returned, in order.
async fn on_connections<T, Work, Done>(
    addr: &str,
    token: &str,
    work: Work,
) -> anyhow::Result<Vec<T>>
where
    T: Send + 'static,
    Work: Fn(usize, String, String) -> Done,
    Done: std::future::Future<Output = anyhow::Result<T>> + Send + 'static,
{
    let handles: Vec<_> = (0..CONNECTIONS)
        .map(|c| tokio::spawn(work(c, addr.to_string(), token.to_string())))
        .collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await??);
    }
    Ok(out)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // BENCH_DATA_DIR=/some/dir benchmarks with SQLite persistence; default is in memory.
    let data_dir = std::env::var_os("BENCH_DATA_DIR").map(std::path::PathBuf::from);
    println!(
        "storage: {}",
        if data_dir.is_some() {
            "SQLite"
        } else {
            "memory"
        }
    );
    let server = start(ApiServerConfig {
        data_dir,
        ..Default::default()
    })
    .await?;
    let addr = server.url().trim_start_matches("http://").to_string();
    let token = server.admin_token().to_string();

    // Creates.
    let t = Instant::now();
    on_connections(&addr, &token, |c, addr, token| async move {
        let mut s = connect(&addr).await?;
        for i in (c..OBJECTS).step_by(CONNECTIONS) {
            let body = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{i:05}","labels":{{"bench":"yes"}}}},"data":{{"key":"value-{i}"}}}}"#
            );
            let r = send(&mut s, request("POST", &addr, "/api/v1/namespaces/default/configmaps", &token, Some(body)))
                .await?;
            anyhow::ensure!(r.status() == 201, "create failed: {}", r.status());
            r.into_body().collect().await?;
        }
        anyhow::Ok(())
    })
    .await?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "creates: {OBJECTS} in {secs:.2}s = {:.0}/s",
        OBJECTS as f64 / secs
    );

    // GET/s over keep-alive connections.
    let deadline = Instant::now() + Duration::from_secs(GET_SECONDS);
    let counts = on_connections(&addr, &token, |c, addr, token| async move {
        let mut s = connect(&addr).await?;
        let mut n = 0u64;
        let mut i = c;
        while Instant::now() < deadline {
            let path = format!(
                "/api/v1/namespaces/default/configmaps/cm-{:05}",
                i % OBJECTS
            );
            let r = send(&mut s, request("GET", &addr, &path, &token, None)).await?;
            anyhow::ensure!(r.status() == 200, "get failed: {}", r.status());
            r.into_body().collect().await?;
            n += 1;
            i += CONNECTIONS;
        }
        anyhow::Ok(n)
    })
    .await?;
    let total: u64 = counts.into_iter().sum();
    println!(
        "GET: {total} in {GET_SECONDS}s = {:.0}/s ({CONNECTIONS} keep-alive connections)",
        total as f64 / GET_SECONDS as f64
    );

    let get = |path: &str| request("GET", &addr, path, &token, None);
    // LIST of 10k objects.
    let mut s = connect(&addr).await?;
    let mut best = Duration::MAX;
    let mut size = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let r = send(&mut s, get("/api/v1/namespaces/default/configmaps")).await?;
        let body = r.into_body().collect().await?.to_bytes();
        best = best.min(t.elapsed());
        size = body.len();
    }
    println!(
        "LIST {OBJECTS} objects: best of 5 = {:.1} ms ({} KiB)",
        best.as_secs_f64() * 1000.0,
        size / 1024
    );
    let t = Instant::now();
    let r = send(
        &mut s,
        get("/api/v1/namespaces/default/configmaps?labelSelector=bench%3Dyes"),
    )
    .await?;
    r.into_body().collect().await?;
    println!(
        "LIST {OBJECTS} objects with a label selector: {:.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );

    // Watch fan-out.
    let rv = {
        let r = send(&mut s, get("/api/v1/namespaces/default/configmaps?limit=1")).await?;
        let v: serde_json::Value =
            serde_json::from_slice(&r.into_body().collect().await?.to_bytes())?;
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .to_string()
    };
    let mut watchers = vec![];
    let start_gate = std::sync::Arc::new(tokio::sync::Barrier::new(WATCHERS + 1));
    for _ in 0..WATCHERS {
        let addr = addr.clone();
        let token = token.clone();
        let rv = rv.clone();
        let gate = start_gate.clone();
        watchers.push(tokio::spawn(async move {
            let mut s = connect(&addr).await?;
            let path = format!("/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={rv}&labelSelector=fan%3Dout");
            let r = send(&mut s, request("GET", &addr, &path, &token, None)).await?;
            gate.wait().await;
            let mut body = r.into_body();
            let mut lines = 0;
            while lines < WATCH_EVENTS {
                match body.frame().await {
                    Some(Ok(f)) => {
                        if let Some(d) = f.data_ref() {
                            lines += d.iter().filter(|b| **b == b'\n').count();
                        }
                    }
                    _ => anyhow::bail!("watch ended early after {lines} events"),
                }
            }
            anyhow::Ok(Instant::now())
        }));
    }
    start_gate.wait().await;
    let t = Instant::now();
    for i in 0..WATCH_EVENTS {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"fan-{i}","labels":{{"fan":"out"}}}}}}"#
        );
        let r = send(
            &mut s,
            request(
                "POST",
                &addr,
                "/api/v1/namespaces/default/configmaps",
                &token,
                Some(body),
            ),
        )
        .await?;
        r.into_body().collect().await?;
    }
    let mut last = t;
    for w in watchers {
        last = last.max(w.await??);
    }
    let secs = (last - t).as_secs_f64();
    println!(
        "watch fan-out: {WATCH_EVENTS} events to {WATCHERS} watchers ({} deliveries) in {secs:.2}s = {:.0} deliveries/s",
        WATCH_EVENTS * WATCHERS,
        (WATCH_EVENTS * WATCHERS) as f64 / secs
    );
    server.shutdown().await;
    Ok(())
}
