//! End-to-end tests of the lethe host: the real `lethe up` binary serving real wasm components.

use crate::support;

use std::time::{Duration, Instant};

use support::{Lethe, get, request};

/// A manifest serving the smoke and misbehave components; `smoke_grants` and `cron` vary by test.
fn manifest(smoke_capabilities: &str, cron: Option<&str>) -> String {
    let cron = cron
        .map(|expr| {
            format!("[[trigger.cron]]\ncron_expression = \"{expr}\"\ncomponent = \"smoke\"\n")
        })
        .unwrap_or_default();
    format!(
        r#"
spin_manifest_version = 2

[application]
name = "host-test"

[application.tool.lethe]
timeout_ms = 2000
memory_limit_mb = 32
error_format = "cf"

[variables]
greeting = {{ default = "hello" }}

[[trigger.http]]
route = "/smoke/..."
component = "smoke"

[[trigger.http]]
route = "/misbehave/..."
component = "misbehave"

[[trigger.http]]
route = "/misbehave/exact"
component = "smoke"

{cron}

[component.smoke]
source = "{smoke}"
variables = {{ greeting = "{{{{ greeting }}}} world" }}

[component.smoke.tool.lethe]
capabilities = [{smoke_capabilities}]
kube_identities = ["caller"]
migrations = "{migrations}"

[component.misbehave]
source = "{misbehave}"

[component.misbehave.tool.lethe]
timeout_ms = 500
memory_limit_mb = 16
"#,
        smoke = support::component("smoke").display(),
        misbehave = support::component("misbehave").display(),
        migrations = support::repo_root()
            .join("components/smoke/migrations")
            .display(),
    )
}

const SMOKE_CAPS: &str = r#""kube", "sql", "log", "config""#;

fn exercise_smoke_notes(lethe: &Lethe) {
    let put = request(
        "PUT",
        &format!("{}/smoke/notes/first", lethe.url),
        Some("remember me"),
        &[],
    );
    assert_eq!(put.status, 201, "{}", put.body);
    let again = request(
        "PUT",
        &format!("{}/smoke/notes/first", lethe.url),
        Some("changed"),
        &[],
    );
    assert_eq!(again.status, 200, "{}", again.body);
    let read = get(&format!("{}/smoke/notes/first", lethe.url));
    assert_eq!(read.status, 200);
    assert_eq!(read.json()["body"], "changed");
    let list = get(&format!("{}/smoke/notes", lethe.url));
    assert_eq!(list.json()["resources"].as_array().map(Vec::len), Some(1));
    let missing = get(&format!("{}/smoke/notes/absent", lethe.url));
    assert_eq!(missing.status, 404);
    assert_eq!(missing.cf_code(), 10010);
}

#[test]
fn smoke_component_round_trips_through_sqlite() {
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &[]);
    exercise_smoke_notes(&lethe);
    assert!(
        lethe.data_dir.path().join("data/lethe-default.db").exists(),
        "the SQLite file of smoke's label (`default`) in the data dir"
    );
}

#[test]
fn smoke_component_round_trips_through_postgres() {
    let Some(url) = support::postgres_url_or_skip("smoke_component_round_trips_through_postgres")
    else {
        return;
    };
    let db = support::fresh_postgres_database(&url, "lethe_host_smoke");
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &["--database-url", &db]);
    assert!(
        lethe.wait_for_log("(database and role", Duration::from_secs(5)),
        "serves from PostgreSQL:\n{}",
        lethe.log()
    );
    exercise_smoke_notes(&lethe);
}

#[test]
fn routes_follow_spin_precedence_and_unknown_paths_get_the_envelope() {
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &[]);
    let greeting = get(&format!("{}/smoke/greeting", lethe.url));
    assert_eq!(greeting.status, 200);
    assert_eq!(
        greeting.json()["greeting"],
        "hello world",
        "config variables are templated"
    );
    // The exact route `/misbehave/exact` wins over the wildcard `/misbehave/...` and reaches smoke,
    // which answers 404 for a path it does not know (misbehave would also 404, but with another detail).
    let exact = get(&format!("{}/misbehave/exact", lethe.url));
    assert_eq!(exact.status, 404);
    assert_eq!(exact.json()["errors"][0]["detail"], "Unknown smoke route");
    let unknown = get(&format!("{}/no/such/route", lethe.url));
    assert_eq!(unknown.status, 404);
    assert_eq!(unknown.json()["errors"][0]["title"], "CF-NotFound");
}

#[test]
fn cron_trigger_fires_every_second() {
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, Some("* * * * * *")), &[]);
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut count = 0;
    while Instant::now() < deadline {
        count = get(&format!("{}/smoke/ticks", lethe.url)).json()["count"]
            .as_i64()
            .unwrap_or(0);
        if count >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        count >= 2,
        "at least two ticks recorded, got {count}\n{}",
        lethe.log()
    );
}

#[test]
fn ungranted_import_refuses_to_start_and_names_component_and_interface() {
    let failure = match Lethe::try_up(&manifest(r#""kube", "log", "config""#, None), &[], &[]) {
        Ok(_) => panic!("lethe up must refuse a component importing an ungranted capability"),
        Err(f) => f,
    };
    assert!(!failure.status.success());
    assert!(failure.log.contains("component `smoke`"), "{}", failure.log);
    assert!(
        failure.log.contains("lethe:platform/sql"),
        "{}",
        failure.log
    );
}

fn assert_contained_failure(lethe: &Lethe, misdeed: &str, log_reason: &str) {
    let r = get(&format!("{}/misbehave/{misdeed}", lethe.url));
    assert_eq!(r.status, 500, "{misdeed}: {}", r.body);
    assert_eq!(r.cf_code(), 10001);
    assert_eq!(r.json()["errors"][0]["title"], "UnknownError");
    assert!(
        lethe.wait_for_log(log_reason, Duration::from_secs(5)),
        "the log says the misbehave component {log_reason}:\n{}",
        lethe.log()
    );
    let ok = get(&format!("{}/misbehave/ok", lethe.url));
    assert_eq!(ok.status, 200, "the host keeps serving after {misdeed}");
}

#[test]
fn trapping_component_gives_500_and_host_keeps_serving() {
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &[]);
    assert_contained_failure(&lethe, "trap", "trapped");
}

#[test]
fn component_over_its_time_limit_gives_500_and_host_keeps_serving() {
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &[]);
    let started = Instant::now();
    assert_contained_failure(&lethe, "spin", "exceeded its time limit");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn component_over_its_memory_limit_gives_500_and_host_keeps_serving() {
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &[]);
    assert_contained_failure(&lethe, "hog", "memory");
}

#[test]
fn a_body_larger_than_the_host_buffers_streams_whole() {
    // 4 MiB cannot be buffered before the head is sent: the instance must keep running (and
    // writing) after its response has gone to the client.
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &[]);
    for _ in 0..3 {
        let r = get(&format!("{}/misbehave/flood", lethe.url));
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), misbehave::FLOOD_BYTES);
        assert!(r.body.bytes().all(|b| b == b'x'));
        let length = r.headers.iter().find(|(n, _)| n == "content-length");
        assert_eq!(
            length.map(|(_, v)| v.as_str()),
            Some(misbehave::FLOOD_BYTES.to_string().as_str())
        );
    }
    assert_eq!(get(&format!("{}/misbehave/ok", lethe.url)).status, 200);
}

#[test]
fn a_request_whose_client_goes_away_still_runs_to_the_end() {
    use std::io::Write as _;
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &[]);
    let authority = lethe.url.trim_start_matches("http://").to_string();
    for i in 0..5 {
        let body = format!("left behind {i}");
        let request = format!(
            "PUT /smoke/notes/gone-{i} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
        stream.write_all(request.as_bytes()).expect("send");
        // Gone before any answer: hyper abandons the request, the instance must not stop halfway.
        drop(stream);
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let note = get(&format!("{}/smoke/notes/gone-{i}", lethe.url));
            if note.status == 200 {
                assert_eq!(note.json()["body"], body.as_str());
                break;
            }
            assert!(
                Instant::now() < deadline,
                "note {i} never stored: {}",
                note.body
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn sigterm_shuts_down_gracefully() {
    let mut lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &[]);
    assert_eq!(get(&format!("{}/misbehave/ok", lethe.url)).status, 200);
    let status = lethe.stop().expect("exits after SIGTERM");
    assert!(status.success(), "clean exit: {status}\n{}", lethe.log());
    assert!(lethe.log().contains("lethe stopped"));
}

#[test]
fn a_shutdown_delay_fails_readyz_first_and_serves_until_it_is_over() {
    let mut lethe = Lethe::up(
        &manifest(SMOKE_CAPS, None),
        &["--shutdown-delay-seconds", "3"],
    );
    let readyz = format!("{}/readyz?verbose", lethe.admin_url);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = get(&readyz);
        if answer.status == 200 {
            assert!(answer.body.contains("[+]shutdown ok"), "{}", answer.body);
            break;
        }
        assert!(Instant::now() < deadline, "never ready: {}", answer.body);
        std::thread::sleep(Duration::from_millis(50));
    }
    lethe.terminate();
    let deadline = Instant::now() + Duration::from_secs(10);
    let draining = loop {
        let answer = get(&readyz);
        if answer.status == 503 {
            break answer;
        }
        assert!(
            Instant::now() < deadline,
            "readyz never failed: {}",
            answer.body
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        draining
            .body
            .contains("[-]shutdown failed: process is shutting down"),
        "{}",
        draining.body
    );
    // Still served while the Service would be dropping this host from its endpoints.
    assert_eq!(get(&format!("{}/misbehave/ok", lethe.url)).status, 200);
    // No second signal: it closes by itself once the delay is over.
    let status = lethe
        .exit_within(Duration::from_secs(20))
        .expect("exits once the delay is over");
    assert!(status.success(), "clean exit: {status}\n{}", lethe.log());
    assert!(
        lethe.log().contains("serving for 3.0 s more"),
        "{}",
        lethe.log()
    );
}

#[test]
fn a_component_is_compiled_once_for_every_data_dir_of_the_user() {
    let cache = tempfile::tempdir().expect("tempdir");
    let cache_dir = cache.path().join("components");
    let env = [("LETHE_CACHE_DIR", cache_dir.to_str().expect("utf-8"))];
    let manifest = manifest(SMOKE_CAPS, None);
    let first = Lethe::try_up(&manifest, &[], &env).unwrap_or_else(|f| panic!("{}", f.log));
    assert!(
        first
            .log()
            .contains("(0 from the cache, 2 compiled, cache "),
        "{}",
        first.log()
    );
    let artifacts = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .expect("the cache dir")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
            })
            .count()
    };
    assert_eq!(artifacts(&cache_dir), 2, "one artifact per component");
    // Another data dir, as a second `lethe up` elsewhere or another test, compiles nothing.
    let second = Lethe::try_up(&manifest, &[], &env).unwrap_or_else(|f| panic!("{}", f.log));
    assert_ne!(first.data_dir.path(), second.data_dir.path());
    assert!(
        second
            .log()
            .contains("(2 from the cache, 0 compiled, cache "),
        "{}",
        second.log()
    );
    assert!(
        !second.data_dir.path().join("data/cache").exists(),
        "nothing is compiled into the data dir"
    );
    // The start-up steps are in the metrics too.
    let metrics = get(&format!("{}/metrics", second.admin_url));
    for step in ["database", "cluster", "compile", "link", "total"] {
        assert!(
            metrics
                .body
                .contains(&format!("lethe_startup_step_seconds{{step=\"{step}\"}}")),
            "{step}: {}",
            metrics.body
        );
    }
    // `lethe cache clear` empties it; `info` says so.
    let run = |action: &str| {
        let out = std::process::Command::new(support::lethe_bin())
            .args(["cache", action])
            .env("LETHE_CACHE_DIR", &cache_dir)
            .output()
            .expect("lethe cache");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).expect("utf-8")
    };
    assert!(run("clear").contains("removed 2 compiled component(s)"));
    assert_eq!(artifacts(&cache_dir), 0);
    assert!(run("info").contains(": 0 compiled component(s), 0.0 MiB of 1024 MiB"));
}

#[test]
fn cron_tick_over_its_time_limit_is_stopped_and_logged_and_host_keeps_serving() {
    // smoke's `handle-cron-event` (an `async func`) loops forever when `cron_tick = "spin"`.
    let manifest = manifest(SMOKE_CAPS, Some("* * * * * *"))
        .replace(
            r#"greeting = "{{ greeting }} world" }"#,
            r#"greeting = "{{ greeting }} world", cron_tick = "spin" }"#,
        )
        .replace(
            "[component.smoke.tool.lethe]\n",
            "[component.smoke.tool.lethe]\ntimeout_ms = 400\n",
        );
    assert!(manifest.contains(r#"cron_tick = "spin""#) && manifest.contains("timeout_ms = 400"));
    let lethe = Lethe::up(&manifest, &[]);
    let logged = |lethe: &Lethe| {
        lethe
            .log()
            .lines()
            .filter(|l| l.contains("cron tick at") && l.contains("exceeded its time limit"))
            .count()
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while logged(&lethe) < 2 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        logged(&lethe) >= 2,
        "every runaway tick is stopped and logged, and the next one still runs:\n{}",
        lethe.log()
    );
    let greeting = get(&format!("{}/smoke/greeting", lethe.url));
    assert_eq!(greeting.status, 200, "the host keeps serving HTTP");
    let ticks = get(&format!("{}/smoke/ticks", lethe.url));
    assert_eq!(
        ticks.json()["count"],
        0,
        "no runaway tick got to record itself"
    );
}

#[test]
fn embedded_cluster_faults_can_be_configured_at_start() {
    if support::external_kubeconfig().is_some() {
        eprintln!("skipping: it needs the embedded cluster's fault injection");
        return;
    }
    let faults = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(faults.path(), r#"{"stale_read_ms": 1234}"#).expect("write faults");
    let path = faults.path().to_string_lossy().into_owned();
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &["--cluster-faults", &path]);
    let active = lethe.kubectl_ok(&["get", "--raw", "/lethe/faults"]);
    let active: serde_json::Value = serde_json::from_str(&active).expect("fault JSON");
    assert_eq!(active["stale_read_ms"], 1234, "{active}");
    assert_eq!(active["error_rate"], 0.0);
}

/// A cluster slower than a component's time limit: the component's call ends before the limit,
/// with time left for the component to answer the failure itself (503, which the caller may
/// retry) rather than be cut off (a 500 that blames the component).
#[test]
fn a_cluster_slower_than_the_time_limit_gets_the_components_own_503() {
    if support::external_kubeconfig().is_some() {
        eprintln!("skipping: it needs the embedded cluster's fault injection");
        return;
    }
    let lethe = Lethe::up(&manifest(SMOKE_CAPS, None), &[]);
    let admin = lethe.admin_token();
    let auth = format!("Bearer {admin}");
    let read = || {
        request(
            "GET",
            &format!("{}/smoke/namespaces/default", lethe.url),
            None,
            &[("authorization", &auth)],
        )
    };
    let before = read();
    assert_eq!(before.status, 200, "before the faults: {}", before.body);
    // Every request takes longer than smoke's whole time limit (2 s).
    lethe.set_cluster_faults(&serde_json::json!({"latency_ms": 5000}));
    for _ in 0..3 {
        let slow = read();
        assert_eq!(slow.status, 503, "{}", slow.body);
        assert_eq!(slow.cf_code(), 10015, "{}", slow.body);
    }
    assert!(
        !lethe.log().contains("exceeded its time limit"),
        "{}",
        lethe.log()
    );
    lethe.set_cluster_faults(&serde_json::json!({}));
    assert_eq!(read().status, 200, "the cluster answers again");
}

#[test]
fn malformed_cluster_fault_file_refuses_to_start() {
    let faults = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(faults.path(), "{not json").expect("write faults");
    let path = faults.path().to_string_lossy().into_owned();
    let failure = match Lethe::try_up(
        &manifest(SMOKE_CAPS, None),
        &["--cluster-faults", &path],
        &[],
    ) {
        Ok(_) => panic!("a malformed fault file must stop lethe up"),
        Err(f) => f,
    };
    assert!(
        failure.log.contains("is not a fault configuration"),
        "{}",
        failure.log
    );
}

/// `lethe migrate` prepares the databases for a host that applies no migrations (Spin, with a
/// runtime config that maps each label to its file): each label's file beside the one named,
/// with its own components' tables alone, recorded as applied, so a second run (or the next
/// `lethe up` on the same database) applies nothing and nothing fails.
#[test]
fn migrate_prepares_a_database_per_label_once_and_is_then_up_to_date() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite:{}", dir.path().join("lethe.db").display());
    let run = || {
        let out = std::process::Command::new(support::lethe_bin())
            .current_dir(support::repo_root())
            .args(["migrate", "--manifest", "spin.toml", "--database-url", &url])
            .env("LETHE_LOG", "warn")
            .output()
            .expect("lethe migrate runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let first = run();
    for component in ["smoke", "data-jobs", "cf-reconciler"] {
        assert!(
            first
                .lines()
                .any(|l| l.starts_with(&format!("{component}: applied "))),
            "{first}"
        );
    }
    assert!(
        !dir.path().join("lethe.db").exists(),
        "nothing is kept in the application's own file"
    );
    let tables = |label: &str| -> Vec<String> {
        let conn =
            rusqlite::Connection::open(dir.path().join(format!("lethe-{label}.db"))).expect("open");
        conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .expect("prepare")
            .query_map([], |r| r.get(0))
            .expect("query")
            .collect::<Result<_, _>>()
            .expect("rows")
    };
    for (label, has, lacks) in [
        (
            "smoke",
            &["smoke_note"][..],
            &["data_job", "cf_reconcile_state"][..],
        ),
        (
            "data-jobs",
            &["data_job", "data_job_change", "reconcile_backoff"][..],
            &["smoke_note", "cf_reconcile_state", "data_job_sync_state"][..],
        ),
        (
            "cf",
            &["cf_reconcile_state", "reconcile_backoff"][..],
            &["data_job", "smoke_note", "cf_reconcile_backoff"][..],
        ),
    ] {
        let tables = tables(label);
        for table in has {
            assert!(
                tables.iter().any(|t| t == table),
                "{label}: {table} in {tables:?}"
            );
        }
        for table in lacks {
            assert!(
                !tables.iter().any(|t| t == table),
                "{label}: {table} in {tables:?}"
            );
        }
    }
    let conn = rusqlite::Connection::open(dir.path().join("lethe-data-jobs.db")).expect("open");
    let generation: i64 = conn
        .query_row(
            "SELECT count(*) FROM pragma_table_info('actual_data_job_deployment') WHERE name = 'generation'",
            [],
            |r| r.get(0),
        )
        .expect("columns");
    assert_eq!(generation, 1, "the later migrations are applied too");
    drop(conn);
    let second = run();
    assert!(
        second.lines().all(|l| l.ends_with(": up to date")) && !second.is_empty(),
        "{second}"
    );
}
