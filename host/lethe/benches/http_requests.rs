//! Per-request cost of the host: HTTP in → fresh instance → trivial component → response,
//! measured side by side with a plain hyper handler doing the same work natively (the
//! component's own Rust code, compiled for the host).
//!
//! Run: `cargo bench -p lethe --bench http_requests -- [seconds] [connections] [rounds]`
//! The two targets take turns for `rounds` rounds of `seconds` each, so that drift in the
//! machine's speed (large on a shared VM) falls on both alike. It prints p50/p99 latency and
//! requests/s for both over all rounds, the ratio of each round and their median, and the cost of
//! one instantiation with the pooling allocator.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // `cargo bench` appends `--bench`; everything else is ours.
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let connections: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(5).max(1);

    let dir = tempfile::tempdir()?;
    let manifest = dir.path().join("spin.toml");
    std::fs::write(
        &manifest,
        format!(
            "spin_manifest_version = 2\n[application]\nname = \"bench\"\n\
             [[trigger.http]]\nroute = \"/...\"\ncomponent = \"trivial\"\n\
             [component.trivial]\nsource = \"{}\"\n",
            std::path::Path::new(lethe::COMPONENTS_DIR)
                .join("misbehave.wasm")
                .display()
        ),
    )?;
    let app = lethe::app::App::start(lethe::app::UpOptions {
        manifest,
        listen: "127.0.0.1:0".parse()?,
        admin_listen: "127.0.0.1:0".parse()?,
        admin_auth: lethe::admin::access::AdminAuth::Auto,
        data_dir: dir.path().join("data"),
        database_url: None,
        cache: lethe::configure::CacheOptions::for_user(None, &dir.path().join("data")),
        cluster: lethe::configure::ClusterSource::Kubeconfig(dir.path().join("unused-kubeconfig")),
        watch: false,
    })
    .await?;
    let native = start_native().await?;

    println!(
        "{rounds} rounds of {seconds} s per target, {connections} keep-alive connections, {} cores",
        std::thread::available_parallelism()?.get()
    );
    let probe = Arc::new(support::Probe {
        path: "/ok".into(),
        headers: Vec::new(),
        callers: Vec::new(),
        interval: None,
        check: |body| {
            anyhow::ensure!(body == b"\"ok\"", "unexpected body");
            Ok(())
        },
    });
    let (mut wasm, mut plain, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let (mut wasm_cpu, mut plain_cpu) = (Duration::ZERO, Duration::ZERO);
    for round in 1..=rounds {
        let w = support::keep_alive_load(app.addr, probe.clone(), seconds, connections).await?;
        let p = support::keep_alive_load(native, probe.clone(), seconds, connections).await?;
        let ratio = w.latencies.len() as f64 / p.latencies.len().max(1) as f64;
        println!(
            "round {round}: wasm {:.0} req/s, native {:.0} req/s, {:.0}%; CPU per request: wasm {:.1} µs, native {:.1} µs",
            w.latencies.len() as f64 / seconds as f64,
            p.latencies.len() as f64 / seconds as f64,
            100.0 * ratio,
            w.cpu_per_request().as_secs_f64() * 1e6,
            p.cpu_per_request().as_secs_f64() * 1e6,
        );
        ratios.push(ratio);
        wasm_cpu += w.cpu;
        plain_cpu += p.cpu;
        wasm.extend(w.latencies);
        plain.extend(p.latencies);
    }
    wasm.sort();
    plain.sort();
    let total = seconds * rounds as u64;
    support::report("wasm component (fresh instance per request)", &wasm, total);
    support::report("plain hyper handler (native)", &plain, total);
    ratios.sort_by(f64::total_cmp);
    println!(
        "wasm throughput = {:.0}% of native over all rounds; median round {:.0}%",
        100.0 * wasm.len() as f64 / plain.len().max(1) as f64,
        100.0 * ratios[ratios.len() / 2]
    );
    // Both targets keep the machine's cores busy, so their CPU per request (server and load
    // generator together) bounds their throughput; its ratio is the steadier figure.
    let per_request = |cpu: Duration, n: usize| cpu.as_secs_f64() * 1e6 / n.max(1) as f64;
    let (w, p) = (
        per_request(wasm_cpu, wasm.len()),
        per_request(plain_cpu, plain.len()),
    );
    println!(
        "process CPU per request: wasm {w:.1} µs, native {p:.1} µs; native/wasm = {:.0}%",
        100.0 * p / w.max(1e-9)
    );
    let per_instance = app.runtime.measure_instantiation("trivial", 20_000).await?;
    println!(
        "instantiation (pooling allocator, InstancePre): {:.1} µs",
        per_instance.as_secs_f64() * 1e6
    );
    app.shutdown().await;
    Ok(())
}

async fn start_native() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(async move {
                let service = service_fn(|req| async move { Ok::<_, Infallible>(native(req)) });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// The component's own work, compiled natively: the same request model, the same
/// `misbehave::perform` and the same response shape (status, headers, `content-length`), behind
/// a plain hyper handler instead of the host's route → instance → `wasi:http` path.
fn native(req: hyper::Request<hyper::body::Incoming>) -> hyper::Response<Full<Bytes>> {
    let (parts, _) = req.into_parts();
    // Looked up on demand, as the component asks the host for the headers it reads.
    let headers = parts.headers;
    let request = lethe_guest::Request {
        method: parts.method.as_str().to_ascii_uppercase(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        headers: lethe_guest::Headers::lookup(move |name| {
            headers.get(name).map(|v| v.as_bytes().to_vec())
        }),
        body: Vec::new(),
        // As the wasm path's `wasi:http` request carries them.
        scheme: parts.uri.scheme_str().map(str::to_string),
        authority: parts.uri.authority().map(|a| a.to_string()),
    };
    let response = misbehave::perform(&request);
    let length = response.body.len();
    let mut resp = hyper::Response::new(Full::new(Bytes::from(response.body)));
    *resp.status_mut() = hyper::StatusCode::from_u16(response.status)
        .unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR);
    for (name, value) in &response.headers {
        if let (Ok(n), Ok(v)) = (
            hyper::header::HeaderName::try_from(name.as_str()),
            hyper::header::HeaderValue::try_from(value.as_str()),
        ) {
            resp.headers_mut().append(n, v);
        }
    }
    resp.headers_mut().insert(
        hyper::header::CONTENT_LENGTH,
        hyper::header::HeaderValue::from(length),
    );
    resp
}
