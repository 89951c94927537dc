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
//! ```text
//! cargo bench -p lethe --bench data_jobs_sync -- [--jobs 100000] [--changed-percent 1] [--database-url URL]
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
}

fn args() -> anyhow::Result<Args> {
    let mut out = Args {
        jobs: 100_000,
        changed_percent: 1,
        database_url: None,
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
    client
        .create(r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"data-jobs"}}"#)
        .await?;

    let db_url = args
        .database_url
        .clone()
        .unwrap_or_else(|| format!("sqlite:{}", dir.path().join("bench.db").display()));
    let db = lethe_sql::Database::open(&db_url).await?;
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
    let mut changed = 0;
    let indexes: Vec<usize> = (0..args.jobs).step_by(step).collect();
    for chunk in indexes.chunks(200) {
        let statements: Vec<Statement> = chunk
            .iter()
            .map(|&i| {
                let s = spec(i, "v2");
                Statement {
                    sql: "UPDATE desired_data_job_deployment SET job_version = 'v2', image = $2, spec_hash = $3 WHERE job_uid = $1".into(),
                    params: vec![Value::Text(uid(i)), Value::Text(s.image.clone()), Value::Text(s.hash())],
                }
            })
            .collect();
        changed += statements.len();
        db.batch(&statements).await?;
    }
    eprintln!(
        "  steady state with {changed} changed at {:?}",
        started.elapsed()
    );

    let manifest = dir.path().join("spin.toml");
    std::fs::write(
        &manifest,
        format!(
            r#"spin_manifest_version = 2
[application]
name = "bench"
[component.data-jobs]
source = "{wasm}"
variables = {{ namespace = "data-jobs", max_changes_per_pass = "100000" }}
[component.data-jobs.tool.lethe]
capabilities = ["sql", "kube", "log", "config"]
kube_identities = ["caller", "privileged"]
migrations = "{migrations}"
timeout_ms = 600000
memory_limit_mb = 1024
"#,
            wasm = PathBuf::from(lethe::COMPONENTS_DIR)
                .join("data_jobs.wasm")
                .display(),
            migrations = repo.join("components/data-jobs/migrations").display(),
        ),
    )?;
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
    for chunk in indexes.chunks(200) {
        let statements: Vec<Statement> = chunk
            .iter()
            .map(|&i| {
                let s = spec(i, "v3");
                Statement {
                    sql: "UPDATE desired_data_job_deployment SET job_version = 'v3', image = $2, spec_hash = $3 WHERE job_uid = $1".into(),
                    params: vec![Value::Text(uid(i)), Value::Text(s.image.clone()), Value::Text(s.hash())],
                }
            })
            .collect();
        db.batch(&statements).await?;
    }
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
    server.shutdown().await;
    Ok(())
}
