//! Throughput and latency of `GET /v3/jobs/{guid}` through the host against the embedded cluster,
//! side by side in one run with a bare GET of the same object from the same cluster, and with the
//! floor of any design that serves the poll over HTTP: a native hyper handler that does nothing
//! but the same GET with the same client and answers a constant.
//!
//! Run: `cargo bench -p lethe --bench job_status -- [seconds] [concurrency] [rounds] [latency_ms]
//! [pace]`. `latency_ms` makes the embedded cluster answer every request that much later (its
//! `latency_ms` fault), as a real API server whose GET costs about a millisecond does. `pace`
//! (polls per second per connection; 0, the default, polls back to back) paces each connection
//! as a polling client does.
//!
//! lethe serves the repository's `spin.toml` as shipped. Each connection is a caller of its own
//! (a user of the embedded cluster's token file), as many users polling their jobs are: each
//! caller has its own share of the host and its own client-side rate limit.
//! The three targets take turns for `rounds` rounds, so drift in the machine's speed falls on
//! all of them alike; latencies are pooled over the rounds, and each round's ratios are printed.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper_util::rt::TokioIo;
use lethe_kube::{Cluster, ObjectRef};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // `cargo bench` appends `--bench`; everything else is ours.
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let concurrency: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let latency_ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let pace: f64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(0.0);
    let dir = tempfile::tempdir()?;
    let callers = support::seed_callers(&dir.path().join("data"), concurrency)?;
    let app = support::start_app(&dir.path().join("data"), latency_ms).await?;
    let kubeconfig = dir.path().join("data/cluster/kubeconfig");
    let cluster = Cluster::from_kubeconfig(&kubeconfig, Default::default()).await?;

    // An org whose deletion is in progress (a foreign finalizer holds it), so every poll does
    // the full PROCESSING path.
    let org = "0b5e7a4e-1b2c-4d5e-8f90-123456789abc";
    let client = cluster.privileged();
    client
        .create(&serde_json::json!({
            "apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": org, "namespace": "cf", "finalizers": ["cf.lethe.dev/cleanup", "bench/hold"]},
            "spec": {"displayName": "bench"}
        }).to_string())
        .await?;
    let target = ObjectRef {
        api_version: "cf.lethe.dev/v1alpha1".into(),
        kind: "Org".into(),
        namespace: Some("cf".into()),
        name: org.into(),
    };
    client.delete(&target, &Default::default()).await?;

    let floor_addr = start_floor(client.clone(), target.clone()).await?;
    let probe = Arc::new(support::Probe {
        path: format!("/v3/jobs/org.delete~{org}"),
        headers: Vec::new(),
        callers,
        interval: (pace > 0.0).then(|| Duration::from_secs_f64(1.0 / pace)),
        check: |body| {
            anyhow::ensure!(
                body.windows(10).any(|w| w == b"PROCESSING"),
                "job not PROCESSING"
            );
            Ok(())
        },
    });
    println!(
        "{rounds} rounds of {seconds} s per target, concurrency {concurrency} (one caller each), \
         cluster latency {latency_ms} ms, {}",
        if pace > 0.0 {
            format!("{pace} polls/s per connection")
        } else {
            "back to back".into()
        }
    );
    let p50 = |l: &[Duration]| {
        let mut sorted = l.to_vec();
        sorted.sort();
        support::quantile(&sorted, 0.5).as_secs_f64()
    };
    let (mut jobs, mut floor, mut bare) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        let j = support::keep_alive_load(app.addr, probe.clone(), seconds, concurrency).await?;
        let f = support::keep_alive_load(floor_addr, probe.clone(), seconds, concurrency).await?;
        let b = load(seconds, concurrency, probe.interval, {
            let client = client.clone();
            let target = target.clone();
            move || {
                let client = client.clone();
                let target = target.clone();
                async move {
                    client.get(&target).await?;
                    Ok(())
                }
            }
        })
        .await?;
        println!(
            "round {round}: job-status p50 / bare GET p50 = {:.2}; floor p50 / bare GET p50 = {:.2}; \
             job-status polls / bare GETs = {:.2}; process CPU per poll: job status {:.0} µs, floor {:.0} µs",
            p50(&j.latencies) / p50(&b).max(1e-9),
            p50(&f.latencies) / p50(&b).max(1e-9),
            j.latencies.len() as f64 / b.len().max(1) as f64,
            j.cpu_per_request().as_secs_f64() * 1e6,
            f.cpu_per_request().as_secs_f64() * 1e6,
        );
        jobs.extend(j.latencies);
        floor.extend(f.latencies);
        bare.extend(b);
    }
    jobs.sort();
    floor.sort();
    bare.sort();
    let seconds = seconds * rounds as u64;
    support::report(
        "GET /v3/jobs/{guid} via lethe (fresh wasm instance per request)",
        &jobs,
        seconds,
    );
    support::report(
        "floor: native hyper handler doing only the same GET",
        &floor,
        seconds,
    );
    support::report(
        "bare GET of the Org (kube client, pooled connection)",
        &bare,
        seconds,
    );
    println!(
        "all rounds: job-status p50 / bare GET p50 = {:.2}; floor p50 / bare GET p50 = {:.2}",
        p50(&jobs) / p50(&bare).max(1e-9),
        p50(&floor) / p50(&bare).max(1e-9)
    );
    app.shutdown().await;
    Ok(())
}

/// A plain hyper server whose every request does the privileged GET of `target` and answers a
/// constant `PROCESSING` job: the least any HTTP-served job status can cost.
async fn start_floor(
    client: lethe_kube::KubeClient,
    target: ObjectRef,
) -> anyhow::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            let (client, target) = (client.clone(), target.clone());
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |_req| {
                    let (client, target) = (client.clone(), target.clone());
                    async move {
                        let status = match client.get(&target).await {
                            Ok(_) => 200,
                            Err(_) => 500,
                        };
                        let mut resp = hyper::Response::new(http_body_util::Full::new(
                            Bytes::from_static(br#"{"state":"PROCESSING"}"#),
                        ));
                        *resp.status_mut() =
                            hyper::StatusCode::from_u16(status).unwrap_or_default();
                        Ok::<_, std::convert::Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// `concurrency` tasks doing `op` for `seconds`, back to back or once every `interval`.
async fn load<F, Fut>(
    seconds: u64,
    concurrency: usize,
    interval: Option<Duration>,
    op: F,
) -> anyhow::Result<Vec<Duration>>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = anyhow::Result<()>> + Send,
{
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let op = op.clone();
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut next = Instant::now();
            while Instant::now() < deadline {
                if let Some(interval) = interval {
                    tokio::time::sleep_until(next.into()).await;
                    next += interval;
                }
                let start = Instant::now();
                op().await?;
                latencies.push(start.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(all)
}
