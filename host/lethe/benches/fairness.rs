//! A polite caller beside a flooding one, with `spin.toml` as shipped: does the flood cost the
//! polite caller anything, and what does it get itself?
//!
//! Run: `cargo bench -p lethe --bench fairness -- [seconds] [flood_connections] [rounds] [latency_ms]`
//!
//! Each round has two phases of `seconds`: the polite caller alone (one connection, 10 polls/s of
//! a `PROCESSING` job), then the polite caller while the flooder polls, from `flood_connections`
//! connections back to back, the job of an org that is not being deleted (each such poll is held
//! for the re-read window). Printed: the polite caller's p50 and p99 in both phases and their
//! ratio, the flooder's answers by status, and the Kubernetes reads each admitted flood poll cost
//! (the embedded cluster's own request count). `latency_ms` is the embedded cluster's
//! `latency_ms` fault, as in the `job_status` benchmark.

mod support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use lethe_kube::{Cluster, ObjectRef};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(5);
    let flood_connections: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(40);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let latency_ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let dir = tempfile::tempdir()?;
    let callers = support::seed_callers(&dir.path().join("data"), 2)?;
    let (polite, flooder) = (callers[0].clone(), callers[1].clone());
    let app = support::start_app(&dir.path().join("data"), latency_ms).await?;
    let embedded = app
        .cluster
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("no embedded cluster"))?;
    let cluster = Cluster::from_kubeconfig(
        &dir.path().join("data/cluster/kubeconfig"),
        Default::default(),
    )
    .await?;
    let client = cluster.privileged();
    let org = |name: &str, finalizers: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": name, "namespace": "cf", "finalizers": finalizers},
            "spec": {"displayName": name}
        })
        .to_string()
    };
    // The polite caller's job: an org held in deletion, so every poll is PROCESSING at once.
    let held = "0b5e7a4e-1b2c-4d5e-8f90-123456789abc";
    client
        .create(&org(held, serde_json::json!(["bench/hold"])))
        .await?;
    client
        .delete(
            &ObjectRef {
                api_version: "cf.lethe.dev/v1alpha1".into(),
                kind: "Org".into(),
                namespace: Some("cf".into()),
                name: held.into(),
            },
            &Default::default(),
        )
        .await?;
    // The flooder's: an org that is not being deleted.
    let live = "1c6f8b5f-2c3d-4e6f-9a01-23456789abcd";
    client.create(&org(live, serde_json::json!([]))).await?;

    let polite_probe = Arc::new(support::Probe {
        path: format!("/v3/jobs/org.delete~{held}"),
        headers: Vec::new(),
        callers: vec![polite],
        interval: Some(Duration::from_millis(100)),
        check: |body| {
            anyhow::ensure!(
                body.windows(10).any(|w| w == b"PROCESSING"),
                "job not PROCESSING"
            );
            Ok(())
        },
    });
    let flood_path = format!("/v3/jobs/org.delete~{live}");
    println!(
        "{rounds} rounds of 2 × {seconds} s; polite: 1 connection, 10 polls/s; flooder: \
         {flood_connections} connections back to back; cluster latency {latency_ms} ms"
    );
    let (mut alone, mut beside) = (Vec::new(), Vec::new());
    let mut statuses = BTreeMap::new();
    for round in 1..=rounds {
        let a = support::keep_alive_load(app.addr, polite_probe.clone(), seconds, 1).await?;
        let counts_before = embedded.requests();
        let gets_before = gets(counts_before.clone());
        let flood = tokio::spawn(flood(
            app.addr,
            flood_path.clone(),
            flooder.clone(),
            seconds,
            flood_connections,
        ));
        let b = support::keep_alive_load(app.addr, polite_probe.clone(), seconds, 1).await?;
        let answered = flood.await??;
        let counts_after = embedded.requests();
        let gets_during = gets(counts_after.clone()) - gets_before;
        let read: BTreeMap<&String, u64> = counts_after
            .iter()
            .filter(|(k, _)| k.starts_with("GET "))
            .map(|(k, n)| (k, n - counts_before.get(k).copied().unwrap_or(0)))
            .filter(|(_, n)| *n > 0)
            .collect();
        let admitted = answered.get(&200).copied().unwrap_or(0);
        let polite_gets = b.latencies.len() as u64; // one GET of the held org per poll
        let (mut sa, mut sb) = (a.latencies.clone(), b.latencies.clone());
        sa.sort();
        sb.sort();
        println!(
            "round {round}: polite p99 {:.0} µs alone, {:.0} µs beside the flood ({:.2} ×); \
             flooder answers {answered:?}; Kubernetes reads per admitted flood poll {:.2} \
             (all reads of the phase: {read:?})",
            micros(&sa, 0.99),
            micros(&sb, 0.99),
            micros(&sb, 0.99) / micros(&sa, 0.99).max(1e-9),
            gets_during.saturating_sub(polite_gets) as f64 / admitted.max(1) as f64,
        );
        alone.extend(a.latencies);
        beside.extend(b.latencies);
        for (status, n) in answered {
            *statuses.entry(status).or_insert(0u64) += n;
        }
    }
    alone.sort();
    beside.sort();
    let total = seconds * rounds as u64;
    support::report("polite caller alone", &alone, total);
    support::report("polite caller beside the flood", &beside, total);
    println!(
        "all rounds: polite p50 beside / alone = {:.2} ×, p99 beside / alone = {:.2} ×; flooder answers by status {statuses:?}",
        micros(&beside, 0.5) / micros(&alone, 0.5).max(1e-9),
        micros(&beside, 0.99) / micros(&alone, 0.99).max(1e-9),
    );
    app.shutdown().await;
    Ok(())
}

fn micros(sorted: &[Duration], q: f64) -> f64 {
    support::quantile(sorted, q).as_secs_f64() * 1e6
}

/// The GETs the cluster answered of what a job poll reads (orgs, and the kinds whose lists say
/// whether the caller may see one). The reconcilers' own reads (their Leases, and the namespaces
/// of the orgs this bench made without them) go on whatever the callers do; the round's line
/// prints every read, theirs included.
fn gets(counts: BTreeMap<String, u64>) -> u64 {
    counts
        .iter()
        .filter(|(k, _)| {
            k.starts_with("GET ") && !matches!(k.as_str(), "GET leases" | "GET namespaces")
        })
        .map(|(_, n)| n)
        .sum()
}

/// `connections` keep-alive clients sending `GET path` as `token` back to back for `seconds`,
/// whatever the answers (a flooder does not wait for `Retry-After`); the answers by status.
async fn flood(
    addr: SocketAddr,
    path: String,
    token: String,
    seconds: u64,
    connections: usize,
) -> anyhow::Result<BTreeMap<u16, u64>> {
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let (path, auth) = (path.clone(), format!("Bearer {token}"));
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut seen = BTreeMap::new();
            while Instant::now() < deadline {
                let req = hyper::Request::get(path.as_str())
                    .header("host", "bench")
                    .header("authorization", auth.as_str())
                    .body(Empty::<Bytes>::new())?;
                let resp = sender.send_request(req).await?;
                let status = resp.status().as_u16();
                resp.into_body().collect().await?;
                *seen.entry(status).or_insert(0u64) += 1;
            }
            anyhow::Ok(seen)
        }));
    }
    let mut all = BTreeMap::new();
    for t in tasks {
        for (status, n) in t.await?? {
            *all.entry(status).or_insert(0) += n;
        }
    }
    Ok(all)
}
