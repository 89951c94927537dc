//! Benchmark: one data-jobs reconciler pass over N desired deployments (default 100 000) of
//! which 1% changed, against the embedded cluster.
//!
//! It starts the embedded API server in this process (in memory), seeds the steady state
//! directly (data_job, desired and actual rows in SQLite or PostgreSQL, and the CronJobs the
//! component would have written, created concurrently), changes the image of every 100th
//! desired deployment, then runs the real `lethe sync --once --json` as a child process and
//! reports its wall time, the Kubernetes requests the pass made (counted by the component, Lease
//! included) and the child's peak RSS.
//!
//! Then (unless `--idle-seconds 0`) it starts the real `lethe up` with the pass on a cron trigger
//! of every second over the same world, waits for its first (full) pass, and measures what the
//! pass costs while nothing changes — the requests the embedded cluster answered
//! (`RunningApiServer::requests`) and lethe's CPU over `--idle-seconds` — and how long a desired
//! change takes to reach the cluster: `--changes` image changes made one by one through the API,
//! spread over the pass's period, each timed from its 202 to the CronJob's watch event that shows
//! the new image.
//!
//! ```text
//! cargo bench -p lethe --bench data_jobs_sync -- [--jobs 100000] [--changed-percent 1] [--database-url URL]
//!     [--idle-seconds 60] [--changes 100]
//! ```

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use data_jobs_core::model::{self, CronJobParams, Resources, Spec};
use lethe_sql::{Statement, Value};

struct Args {
    jobs: usize,
    changed_percent: usize,
    database_url: Option<String>,
    idle_seconds: u64,
    changes: usize,
}

fn args() -> anyhow::Result<Args> {
    let mut out = Args {
        jobs: 100_000,
        changed_percent: 1,
        database_url: None,
        idle_seconds: 60,
        changes: 100,
    };
    // `cargo bench` appends `--bench`; everything else is ours.
    let mut it = std::env::args().skip(1).filter(|a| a != "--bench");
    while let Some(a) = it.next() {
        match a.as_str() {
            "--jobs" => out.jobs = it.next().context("--jobs N")?.parse()?,
            "--changed-percent" => {
                out.changed_percent = it.next().context("--changed-percent P")?.parse()?
            }
            "--database-url" => out.database_url = Some(it.next().context("--database-url URL")?),
            "--idle-seconds" => {
                out.idle_seconds = it.next().context("--idle-seconds S")?.parse()?
            }
            "--changes" => out.changes = it.next().context("--changes N")?.parse()?,
            other => bail!("unknown argument {other}"),
        }
    }
    Ok(out)
}

fn uid(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

fn spec(i: usize, version: &str) -> Spec {
    Spec {
        image: format!("registry.local/data-jobs/team-{}/job-{i}:{version}", i % 50),
        schedule: format!("{} * * * *", i % 60),
        enabled: true,
        resources: Resources {
            cpu_request: Some("250m".into()),
            memory_limit: Some("512Mi".into()),
            ..Resources::default()
        },
    }
}

/// The bench's manifest: `triggers`, then the data-jobs component with `limits` (its
/// `tool.lethe` memory and request-rate settings, which each run picks).
fn data_jobs_manifest(triggers: &str, migrations: &std::path::Path, limits: &str) -> String {
    let wasm = PathBuf::from(lethe::COMPONENTS_DIR).join("data_jobs.wasm");
    format!(
        r#"spin_manifest_version = 2
[application]
name = "bench"
{triggers}[component.data-jobs]
source = "{}"
sqlite_databases = ["data-jobs"]
variables = {{ namespace = "data-jobs", max_changes_per_pass = "100000" }}
[component.data-jobs.tool.lethe]
capabilities = ["sql", "kube", "log", "config"]
kube_identities = ["caller", "privileged"]
migrations = "{}"
timeout_ms = 600000
{limits}"#,
        wasm.display(),
        migrations.display(),
    )
}

/// Gives the desired deployments of jobs `indexes` the spec of `version` (its image and hash),
/// 200 rows to a batch.
async fn set_version(
    db: &lethe_sql::Database,
    indexes: &[usize],
    version: &str,
) -> anyhow::Result<()> {
    for chunk in indexes.chunks(200) {
        let statements: Vec<Statement> = chunk
            .iter()
            .map(|&i| {
                let s = spec(i, version);
                Statement {
                    sql: "UPDATE desired_data_job_deployment SET job_version = $4, image = $2, spec_hash = $3 WHERE job_uid = $1".into(),
                    params: vec![Value::Text(uid(i)), Value::Text(s.image.clone()), Value::Text(s.hash()), Value::Text(version.into())],
                }
            })
            .collect();
        db.batch(&statements).await?;
    }
    Ok(())
}

fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    let server = lethe_apiserver::start(lethe_apiserver::ApiServerConfig {
        tls: true,
        ..Default::default()
    })
    .await?;
    let kubeconfig = server
        .kubeconfig_path()
        .context("kubeconfig")?
        .to_path_buf();
    let cluster = lethe_kube::Cluster::from_kubeconfig(&kubeconfig, Default::default()).await?;
    let client = Arc::new(cluster.privileged());
    // As an administrator sets a cluster up for lethe: its namespaces and account, then data-jobs'
    // own account and rights, which the pass acts with (the host impersonates it).
    for file in [
        "deploy/rbac.json",
        "components/data-jobs/kubernetes/rbac.json",
    ] {
        lethe::kubernetes_manifests::apply_file(
            &cluster,
            &PathBuf::from(lethe::REPO_ROOT).join(file),
        )
        .await?;
    }

    let db_url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite:{}", dir.path().join("bench.db").display()));
    // The rows go where data-jobs' own database label keeps them.
    let db = lethe_sql::Database::open_label(&db_url, "data-jobs", Default::default()).await?;
    let repo = PathBuf::from(lethe::REPO_ROOT);
    db.migrate(&lethe::migrations::load(
        "data-jobs",
        &repo.join("components/data-jobs/migrations"),
    )?)
    .await?;

    // Seed: jobs and desired rows, 200 per transaction.
    eprintln!("seeding {} jobs…", args.jobs);
    for chunk in (0..args.jobs).collect::<Vec<_>>().chunks(200) {
        let mut statements = Vec::new();
        for &i in chunk {
            let s = spec(i, "v1");
            let (team, name) = (format!("team-{}", i % 50), format!("job-{i}"));
            statements.push(Statement {
                sql: "INSERT INTO data_job (uid, team, name, description, config, created_at) VALUES ($1, $2, $3, '', '{}', 0)".into(),
                params: vec![Value::Text(uid(i)), Value::Text(team.clone()), Value::Text(name.clone())],
            });
            statements.push(Statement {
                sql: "INSERT INTO desired_data_job_deployment (job_uid, team, job_name, job_version, image, schedule, enabled, resources, spec_hash, updated_at) VALUES ($1, $2, $3, 'v1', $4, $5, TRUE, $6, $7, 0)".into(),
                params: vec![
                    Value::Text(uid(i)),
                    Value::Text(team),
                    Value::Text(name),
                    Value::Text(s.image.clone()),
                    Value::Text(s.schedule.clone()),
                    Value::Text(s.resources.to_vdk().to_string()),
                    Value::Text(s.hash()),
                ],
            });
        }
        db.batch(&statements).await?;
    }
    eprintln!("  rows seeded at {:?}", started.elapsed());

    // Seed: the CronJobs a previous pass would have written, 32 creates in flight.
    let semaphore = Arc::new(tokio::sync::Semaphore::new(32));
    let mut tasks = tokio::task::JoinSet::new();
    let mut created = Vec::with_capacity(args.jobs);
    for i in 0..args.jobs {
        let permit = semaphore.clone().acquire_owned().await?;
        let client = client.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let s = spec(i, "v1");
            let hash = s.hash();
            let (team, name) = (format!("team-{}", i % 50), format!("job-{i}"));
            let body = model::render_cronjob(&CronJobParams {
                namespace: "data-jobs",
                team: &team,
                job_name: &name,
                job_uid: &uid(i),
                spec: &s,
                hash: &hash,
                resource_version: None,
            });
            let obj = client.create(&body.to_string()).await?;
            anyhow::Ok((
                i,
                obj.target.name,
                obj.metadata.uid,
                obj.metadata.resource_version,
            ))
        });
        while tasks.len() > 256 {
            if let Some(done) = tasks.join_next().await {
                created.push(done??);
            }
        }
    }
    while let Some(done) = tasks.join_next().await {
        created.push(done??);
    }
    eprintln!("  CronJobs seeded at {:?}", started.elapsed());
    for chunk in created.chunks(200) {
        let statements: Vec<Statement> = chunk
            .iter()
            .map(|(i, name, cj_uid, rv)| {
                let s = spec(*i, "v1");
                Statement {
                    sql: "INSERT INTO actual_data_job_deployment (job_uid, team, job_name, job_version, image, schedule, enabled, resources, spec_hash, cronjob_name, cronjob_uid, resource_version, applied_at) VALUES ($1, $2, $3, 'v1', $4, $5, TRUE, $6, $7, $8, $9, $10, 0)".into(),
                    params: vec![
                        Value::Text(uid(*i)),
                        Value::Text(format!("team-{}", i % 50)),
                        Value::Text(format!("job-{i}")),
                        Value::Text(s.image.clone()),
                        Value::Text(s.schedule.clone()),
                        Value::Text(s.resources.to_vdk().to_string()),
                        Value::Text(s.hash()),
                        Value::Text(name.clone()),
                        Value::Text(cj_uid.clone()),
                        Value::Text(rv.clone()),
                    ],
                }
            })
            .collect();
        db.batch(&statements).await?;
    }
    // Change 1%: a new image for every (100 / percent)-th job.
    let step = 100 / args.changed_percent.clamp(1, 100);
    let indexes: Vec<usize> = (0..args.jobs).step_by(step).collect();
    set_version(&db, &indexes, "v2").await?;
    let changed = indexes.len();
    eprintln!(
        "  steady state with {changed} changed at {:?}",
        started.elapsed()
    );

    let manifest = dir.path().join("spin.toml");
    let limits = format!(
        "# A full pass holds every job's rows and CronJob summary: about 1 KiB each.
memory_limit_mb = {}
# The pass itself is measured, not the client-side rate limit (spin.toml's 50/s would make the
# 1 000 replaces alone take 20 s).
kube_qps = 100000
kube_burst = 100000
",
        (args.jobs / 250).clamp(1024, 4000)
    );
    let migrations = repo.join("components/data-jobs/migrations");
    std::fs::write(&manifest, data_jobs_manifest("", &migrations, &limits))?;
    let lethe_bin = PathBuf::from(env!("CARGO_BIN_EXE_lethe"));
    let run = |label: &str| -> anyhow::Result<()> {
        let t = Instant::now();
        let mut child = Command::new(&lethe_bin)
            .args(["sync", "--once", "--json", "--manifest"])
            .arg(&manifest)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .arg("--database-url")
            .arg(&db_url)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .env("LETHE_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()?;
        let pid = child.id();
        let mut peak = 0;
        while child.try_wait()?.is_none() {
            peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
            std::thread::sleep(Duration::from_millis(20));
        }
        let out = child.wait_with_output()?;
        let wall = t.elapsed();
        let report = String::from_utf8_lossy(&out.stdout);
        println!(
            "{label}: wall {:.2} s (process, incl. start-up), peak RSS {} MiB, report {}",
            wall.as_secs_f64(),
            peak / 1024,
            report.trim()
        );
        Ok(())
    };
    // The first run compiles the component into the data dir's cache; the second is the
    // measured pass over the same 1% change (the first one applied it, so reset it first).
    run("warm-up pass (compiles the component, applies the change)")?;
    set_version(&db, &indexes, "v3").await?;
    run("measured pass (1% changed)")?;
    let rows = db
        .query(
            "SELECT report FROM data_job_sync_report ORDER BY started_at",
            &[],
        )
        .await?;
    for row in &rows.rows {
        if let Some(Value::Text(r)) = row.first() {
            println!("stored report: {r}");
        }
    }
    run("no-change pass")?;
    if args.idle_seconds > 0 {
        let world = World {
            dir: dir.path().to_path_buf(),
            db_url: db_url.clone(),
            kubeconfig: kubeconfig.clone(),
            lethe_bin: lethe_bin.clone(),
            migrations: repo.join("components/data-jobs/migrations"),
        };
        follow(&args, &world, &server, &cluster, &db).await?;
    }
    server.shutdown().await;
    Ok(())
}

/// Where the benchmark's world lives.
struct World {
    dir: PathBuf,
    db_url: String,
    kubeconfig: PathBuf,
    lethe_bin: PathBuf,
    migrations: PathBuf,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// CPU seconds (user and system) process `pid` has used.
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .context("stat")?
        .1
        .split_whitespace()
        .collect();
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    // SAFETY: sysconf only reads a configuration value.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok(ticks / hz)
}

/// The p-th percentile of sorted `v`.
fn percentile(v: &[Duration], p: f64) -> Duration {
    let index = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[index.min(v.len() - 1)]
}

/// `lethe up` with the pass on a cron trigger of every second: what an idle pass costs, and how
/// long a desired change takes to reach the cluster.
async fn follow(
    args: &Args,
    world: &World,
    server: &lethe_apiserver::RunningApiServer,
    cluster: &lethe_kube::Cluster,
    db: &lethe_sql::Database,
) -> anyhow::Result<()> {
    let manifest = world.dir.join("spin-up.toml");
    let triggers = r#"[[trigger.http]]
route = "/data-jobs/..."
component = "data-jobs"
[[trigger.cron]]
cron_expression = "* * * * * *"
component = "data-jobs"
"#;
    let limits = "memory_limit_mb = 1024\nkube_qps = 50\nkube_burst = 100\n";
    std::fs::write(
        &manifest,
        data_jobs_manifest(triggers, &world.migrations, limits),
    )?;
    let (port, admin_port) = (free_port()?, free_port()?);
    let mut child = Command::new(&world.lethe_bin)
        .args(["up", "--manifest"])
        .arg(&manifest)
        .arg("--data-dir")
        .arg(world.dir.join("data"))
        .arg("--database-url")
        .arg(&world.db_url)
        .arg("--kubeconfig")
        .arg(&world.kubeconfig)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
        .env("LETHE_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()?;
    let pid = child.id();
    let result = measure(args, port, pid, server, cluster, db).await;
    let _ = child.kill();
    let _ = child.wait();
    result
}

async fn measure(
    args: &Args,
    port: u16,
    pid: u32,
    server: &lethe_apiserver::RunningApiServer,
    cluster: &lethe_kube::Cluster,
    db: &lethe_sql::Database,
) -> anyhow::Result<()> {
    // The first pass of `lethe up` is full; it waits for the Lease `lethe sync` held to expire.
    let t = Instant::now();
    loop {
        anyhow::ensure!(
            t.elapsed() < Duration::from_secs(300),
            "lethe up ran no full pass"
        );
        let rows = db
            .query(
                "SELECT report FROM data_job_sync_report ORDER BY started_at DESC LIMIT 1",
                &[],
            )
            .await?;
        let last: Option<serde_json::Value> =
            rows.rows
                .first()
                .and_then(|r| r.first())
                .and_then(|v| match v {
                    Value::Text(t) => serde_json::from_str(t).ok(),
                    _ => None,
                });
        if let Some(r) = last
            && r["full"] == true
            && !r["holder"].as_str().unwrap_or_default().ends_with("-sync")
        {
            println!(
                "lethe up: first (full) pass {} ms, {} Kubernetes requests",
                r["duration_ms"], r["kube_requests"]
            );
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(5)).await;

    // Idle.
    let (before, cpu_before, t) = (server.requests(), cpu_seconds(pid)?, Instant::now());
    tokio::time::sleep(Duration::from_secs(args.idle_seconds)).await;
    let (after, cpu_after, window) = (
        server.requests(),
        cpu_seconds(pid)?,
        t.elapsed().as_secs_f64(),
    );
    let mut total = 0;
    let mut lease = 0;
    let mut lines = Vec::new();
    for (key, n) in &after {
        let d = n - before.get(key).copied().unwrap_or(0);
        if d == 0 {
            continue;
        }
        lines.push(format!("{key} {d}"));
        if key.ends_with(" leases") {
            lease += d;
        } else if !key.starts_with("WATCH ") {
            total += d;
        }
    }
    println!(
        "idle {window:.0} s at {} deployments: {:.2} Kubernetes requests/s (Lease {:.2}/s and watches aside), lethe CPU {:.2}% of one core; answered: {}",
        args.jobs,
        total as f64 / window,
        lease as f64 / window,
        100.0 * (cpu_after - cpu_before) / window,
        lines.join(", ")
    );

    // Change -> converged, one change at a time, timed from the API's 202 to the watch event.
    let token = server.admin_token().to_string();
    let client = cluster.privileged();
    let collection = lethe_kube::Collection {
        api_version: "batch/v1".into(),
        kind: "CronJob".into(),
        namespace: Some("data-jobs".into()),
        label_selector: Some(model::MANAGED_SELECTOR.into()),
    };
    let mut bookmark = client.changes(&collection, None, 1).await?.bookmark;
    let mut latencies = Vec::with_capacity(args.changes);
    let step = (args.jobs / args.changes.max(1)).max(1);
    let http = ureq::Agent::new_with_defaults();
    for k in 0..args.changes {
        // Changes come at any moment of the pass's 1 s period, not right after a pass: each
        // waits a spread of 0-999 ms first (a fixed sequence, so runs compare).
        tokio::time::sleep(Duration::from_millis(((k * 7919) % 1000) as u64)).await;
        let i = (k * step + 7) % args.jobs;
        let image = format!("registry.local/bench/changed:{k}");
        let url = format!(
            "http://127.0.0.1:{port}/data-jobs/for-team/team-{}/jobs/job-{i}/deployments",
            i % 50
        );
        let body = serde_json::json!({ "image": image }).to_string();
        let answer = tokio::task::block_in_place(|| {
            http.post(&url)
                .header("authorization", &format!("Bearer {token}"))
                .content_type("application/json")
                .send(body.as_str())
        })?;
        anyhow::ensure!(answer.status() == 202, "the change was not accepted");
        let t0 = Instant::now();
        let job_uid = uid(i);
        'seen: loop {
            anyhow::ensure!(
                t0.elapsed() < Duration::from_secs(60),
                "change {k} never reached the cluster"
            );
            let batch = client.changes(&collection, Some(&bookmark), 1000).await?;
            bookmark = batch.bookmark;
            for change in batch.changes {
                let o: serde_json::Value = serde_json::from_str(&change.object.json)?;
                if o["metadata"]["labels"][model::JOB_UID_LABEL] == job_uid.as_str()
                    && o["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"]
                        == image.as_str()
                {
                    latencies.push(t0.elapsed());
                    break 'seen;
                }
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    latencies.sort();
    println!(
        "change -> CronJob updated, {} changes at {} deployments (pass every second): p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        latencies.len(),
        args.jobs,
        percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        latencies.last().copied().unwrap_or_default().as_secs_f64() * 1000.0
    );
    Ok(())
}
