//! Creating an org as the number of orgs grows: Cloud Controller's unique index makes a create's
//! name check cost the same at any size, and lethe's name claim must too.
//!
//! Run: `cargo bench -p lethe --bench org_create -- [creates] [large] [rounds] [latency_ms]`
//!
//! Two lethe hosts on `spin.toml` as shipped run side by side in this process: one whose
//! embedded cluster holds 10 orgs, one whose cluster holds `large` (10,000). Every seeded org is
//! as the API leaves it (lethe's finalizer, its marked namespace, its name claim), written
//! straight into the cluster, so that seeding takes seconds and the reconcilers have nothing to
//! catch up on. Each round then creates `creates` orgs through each host's API in turn, as the
//! cluster's administrator, one every 200 ms (the pace keeps the `cf-api` component's
//! client-side rate limit, 100 requests/s, from setting the latency). Printed: each host's p50
//! and p99 per round and over all rounds, and their ratio. `latency_ms` is the embedded
//! cluster's `latency_ms` fault, as in the `job_status` benchmark.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cf_core::kind::ResourceKind;
use cf_core::names::NameClaim;
use cf_core::ownership::Owner;
use futures::StreamExt as _;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use lethe_kube::{Cluster, KubeClient};

/// The orgs of the small host.
const SMALL: usize = 10;
/// The pace of the creates.
const PACE: Duration = Duration::from_millis(200);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let creates: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let large: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3).max(1);
    let latency_ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let dir = tempfile::tempdir()?;
    let mut hosts = Vec::new();
    for (label, orgs) in [("10 orgs", SMALL), ("large", large)] {
        let data = dir.path().join(label.replace(' ', "-"));
        let app = support::start_app(&data, latency_ms).await?;
        let kubeconfig = data.join("cluster/kubeconfig");
        let cluster = Cluster::from_kubeconfig(&kubeconfig, Default::default()).await?;
        let started = Instant::now();
        seed(&cluster.privileged(), orgs).await?;
        println!(
            "{orgs} orgs seeded in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        hosts.push((format!("{orgs} orgs"), app, admin_token(&kubeconfig)?));
    }
    println!(
        "{rounds} rounds; each creates {creates} orgs through each host in turn, one every {} ms; \
         cluster latency {latency_ms} ms",
        PACE.as_millis()
    );
    let mut all: Vec<Vec<Duration>> = vec![Vec::new(); hosts.len()];
    for round in 1..=rounds {
        let mut line = format!("round {round}:");
        let mut p50s = Vec::new();
        for (i, (label, app, token)) in hosts.iter().enumerate() {
            let mut latencies = create_orgs(app.addr, token, &format!("r{round}"), creates).await?;
            latencies.sort();
            p50s.push(micros(&latencies, 0.5));
            line += &format!(
                " {label}: p50 {:.0} µs, p99 {:.0} µs;",
                micros(&latencies, 0.5),
                micros(&latencies, 0.99)
            );
            all[i].extend(latencies);
        }
        println!(
            "{line} large ÷ small p50 {:.2} ×",
            p50s[1] / p50s[0].max(1e-9)
        );
    }
    for latencies in &mut all {
        latencies.sort();
    }
    for ((label, _, _), latencies) in hosts.iter().zip(&all) {
        println!(
            "create at {label}: p50 {:.0} µs, p99 {:.0} µs ({} creates)",
            micros(latencies, 0.5),
            micros(latencies, 0.99),
            latencies.len()
        );
    }
    println!(
        "all rounds: p50 at {} ÷ at {} = {:.2} ×, p99 {:.2} ×",
        hosts[1].0,
        hosts[0].0,
        micros(&all[1], 0.5) / micros(&all[0], 0.5).max(1e-9),
        micros(&all[1], 0.99) / micros(&all[0], 0.99).max(1e-9),
    );
    for (_, app, _) in hosts {
        app.shutdown().await;
    }
    Ok(())
}

/// Writes `count` orgs into the cluster as `POST /v3/organizations` leaves them: the org with
/// lethe's finalizer, the namespace it owns with its mark, and the claim on its name.
async fn seed(client: &KubeClient, count: usize) -> anyhow::Result<()> {
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(0..count)
        .map(|i| async move {
            let guid = format!("5eed0000-0000-4000-8000-{i:012}");
            let name = format!("seeded {i}");
            let org = client
                .create(
                    &serde_json::json!({
                        "apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
                        "metadata": {"name": guid, "namespace": "cf", "finalizers": [cf_core::FINALIZER]},
                        "spec": {"displayName": name, "suspended": false},
                    })
                    .to_string(),
                )
                .await?;
            let org = lethe_guest::kube::object_from_json(serde_json::from_str(&org.json)?);
            let labels = Owner::new("org", &org).labels();
            client
                .create(
                    &serde_json::json!({
                        "apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": guid, "labels": labels},
                    })
                    .to_string(),
                )
                .await?;
            let types = cf_core::config::default_types("cf");
            let claim = NameClaim {
                root: "cf",
                kind: ResourceKind::Org,
                namespace: "cf",
                t: &types[0].1,
                name: &name,
            };
            client.create(&claim.object(&guid).to_string()).await?;
            anyhow::Ok(())
        })
        .buffer_unordered(32)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Creates `count` orgs named `<prefix>-<i>` through lethe's API at `addr` as `token`, one every
/// [`PACE`]; the latency of each. Anything but a 201 ends the run.
async fn create_orgs(
    addr: SocketAddr,
    token: &str,
    prefix: &str,
    count: usize,
) -> anyhow::Result<Vec<Duration>> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let auth = format!("Bearer {token}");
    let mut latencies = Vec::new();
    let mut next = Instant::now();
    for i in 0..count {
        tokio::time::sleep_until(next.into()).await;
        next += PACE;
        let body = format!(r#"{{"name":"{prefix}-{i}"}}"#);
        let req = hyper::Request::post("/v3/organizations")
            .header("host", "bench")
            .header("authorization", auth.as_str())
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)))?;
        let start = Instant::now();
        let resp = sender.send_request(req).await?;
        let status = resp.status();
        let answer = resp.into_body().collect().await?.to_bytes();
        anyhow::ensure!(
            status == 201,
            "create {prefix}-{i}: {status} {}",
            String::from_utf8_lossy(&answer)
        );
        latencies.push(start.elapsed());
    }
    Ok(latencies)
}

/// The administrator's bearer token in the embedded cluster's `kubeconfig`.
fn admin_token(kubeconfig: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(kubeconfig)?;
    text.lines()
        .find_map(|l| l.trim().strip_prefix("token:"))
        .map(|t| t.trim().trim_matches('"').to_string())
        .ok_or_else(|| anyhow::anyhow!("no token in {}", kubeconfig.display()))
}

fn micros(sorted: &[Duration], q: f64) -> f64 {
    support::quantile(sorted, q).as_secs_f64() * 1e6
}
