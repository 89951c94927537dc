//! The load generator and report the HTTP benchmarks share.
// Each benchmark includes this module and uses a part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// What each request of a load run sends, and how its answer is judged.
pub struct Probe {
    pub path: String,
    pub headers: Vec<(&'static str, String)>,
    /// Bearer tokens: connection `i` sends the `i % len`-th, so that each connection can be a
    /// caller of its own. Empty: none beyond `headers`.
    pub callers: Vec<String>,
    /// `Some(t)`: each connection sends one request every `t` (paced, as a polling client does)
    /// instead of back to back.
    pub interval: Option<Duration>,
    /// `Err` for a body that shows the target did not do the work.
    pub check: fn(&[u8]) -> anyhow::Result<()>,
}

/// What one load run measured.
pub struct Load {
    /// The latency of every request.
    pub latencies: Vec<Duration>,
    /// CPU time (user and system) the whole process spent during the run: the target and the
    /// load generator together, since both run here. Per request, it varies far less from run
    /// to run than requests/s on a shared machine, so it shows small changes that throughput
    /// hides.
    pub cpu: Duration,
}

impl Load {
    /// CPU time per request.
    pub fn cpu_per_request(&self) -> Duration {
        self.cpu / u32::try_from(self.latencies.len().max(1)).unwrap_or(u32::MAX)
    }
}

/// CPU time (user and system) this process has used so far.
pub fn process_cpu() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills in the whole struct it is given, and we read it only on success.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) } != 0 {
        return Duration::ZERO;
    }
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// `connections` keep-alive HTTP/1.1 clients sending `probe` to `addr` back to back for
/// `seconds`. Any non-200 answer or failed check ends the run.
pub async fn keep_alive_load(
    addr: SocketAddr,
    probe: Arc<Probe>,
    seconds: u64,
    connections: usize,
) -> anyhow::Result<Load> {
    let cpu_before = process_cpu();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for connection in 0..connections {
        let probe = probe.clone();
        let caller = (!probe.callers.is_empty())
            .then(|| format!("Bearer {}", probe.callers[connection % probe.callers.len()]));
        tasks.push(tokio::spawn(async move {
            let stream = TcpStream::connect(addr).await?;
            stream.set_nodelay(true)?;
            let (mut sender, conn) =
                hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
            tokio::spawn(conn);
            let mut latencies = Vec::new();
            let mut next = Instant::now();
            while Instant::now() < deadline {
                if let Some(interval) = probe.interval {
                    tokio::time::sleep_until(next.into()).await;
                    next += interval;
                }
                let mut req = hyper::Request::get(probe.path.as_str()).header("host", "bench");
                for (name, value) in &probe.headers {
                    req = req.header(*name, value.as_str());
                }
                if let Some(caller) = &caller {
                    req = req.header("authorization", caller.as_str());
                }
                let req = req.body(Empty::<Bytes>::new())?;
                let start = Instant::now();
                let resp = sender.send_request(req).await?;
                anyhow::ensure!(resp.status() == 200, "unexpected status {}", resp.status());
                let body = resp.into_body().collect().await?.to_bytes();
                (probe.check)(&body)?;
                latencies.push(start.elapsed());
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await??);
    }
    Ok(Load {
        latencies,
        cpu: process_cpu().saturating_sub(cpu_before),
    })
}

/// `lethe up` in process on the repository's `spin.toml` as shipped, with its data in `data_dir`
/// and the embedded cluster answering every request `latency_ms` late (its `latency_ms` fault,
/// as a real API server whose GET costs about a millisecond does).
pub async fn start_app(
    data_dir: &std::path::Path,
    latency_ms: u64,
) -> anyhow::Result<lethe::app::App> {
    lethe::app::App::start(lethe::app::UpOptions {
        manifest: std::path::Path::new(lethe::REPO_ROOT).join("spin.toml"),
        listen: "127.0.0.1:0".parse()?,
        admin_listen: "127.0.0.1:0".parse()?,
        admin_auth: lethe::admin::access::AdminAuth::Auto,
        data_dir: data_dir.to_path_buf(),
        database_url: None,
        cache: lethe::configure::CacheOptions::for_user(None, data_dir),
        cluster: lethe::configure::ClusterSource::Embedded(lethe::configure::EmbeddedCluster {
            faults: lethe_apiserver::FaultConfig {
                latency_ms,
                ..Default::default()
            },
            ..Default::default()
        }),
        watch: false,
    })
    .await
}

/// Writes `count` users into the embedded cluster's token file under `data_dir` (before
/// `lethe up` starts it), `caller-<i>` with token `bench-caller-<i>-token`; their tokens.
pub fn seed_callers(data_dir: &std::path::Path, count: usize) -> anyhow::Result<Vec<String>> {
    let cluster = data_dir.join("cluster");
    std::fs::create_dir_all(&cluster)?;
    let tokens: Vec<String> = (0..count.max(1))
        .map(|i| format!("bench-caller-{i}-token"))
        .collect();
    let lines: Vec<String> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| format!("{t},caller-{i},caller-{i},\"\""))
        .collect();
    std::fs::write(cluster.join("tokens.csv"), lines.join("\n") + "\n")?;
    Ok(tokens)
}

/// The `q` quantile of sorted `latencies` (zero when there are none).
pub fn quantile(latencies: &[Duration], q: f64) -> Duration {
    latencies
        .get(((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1)))
        .copied()
        .unwrap_or_default()
}

/// Prints requests/s, p50 and p99 of sorted `latencies` gathered over `seconds`.
pub fn report(name: &str, latencies: &[Duration], seconds: u64) {
    println!(
        "{name}: {:.0} req/s, p50 {:.0} µs, p99 {:.0} µs ({} requests)",
        latencies.len() as f64 / seconds as f64,
        quantile(latencies, 0.50).as_secs_f64() * 1e6,
        quantile(latencies, 0.99).as_secs_f64() * 1e6,
        latencies.len()
    );
}
