//! End to end: what an operator relies on. The admin listener's probes, metrics and status page
//! (in headless Chromium) after a real deletion and real passes; request ids in answers and logs;
//! JSON logs; readiness that waits for an unreachable cluster; and clients that see no 5xx and
//! no 404 while the API server answers a fifth of all requests 503 and another fifth 429.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value as Json, json};
use support::cf::{call, create_org, patch_org};
use support::{Answer, Lethe, get, request};

const ALICE: &str = "alice-token-0123456789";

fn start(env: &[(&str, &str)]) -> Lethe {
    Lethe::up_app(&[(ALICE, "alice", &[])], env)
}

/// Polls `check` every 200 ms until it gives `Some`, for at most `within`.
fn wait_for<T>(within: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The value of the sample `name{labels}` in a metrics text, where `labels` is the exact label
/// set as the encoder writes it.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(series)?;
        rest.strip_prefix(' ')?.trim().parse().ok()
    })
}

/// `/metrics`, read with the administrator's token (which an open admin listener ignores).
fn metrics(lethe: &Lethe) -> String {
    let auth = format!("Bearer {}", lethe.admin_token());
    let m = request(
        "GET",
        &format!("{}/metrics", lethe.admin_url),
        None,
        &[("Authorization", &auth)],
    );
    assert_eq!(m.status, 200, "{}", m.body);
    assert!(
        m.header("content-type")
            .is_some_and(|c| c.starts_with("application/openmetrics-text")),
        "{:?}",
        m.headers
    );
    m.body
}

/// The page at `url` as headless Chromium renders it (its DOM after load), or `None` when
/// Chromium is not installed and this is not CI.
fn chromium_dom(url: &str) -> Option<String> {
    let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(chromium) = chromium else {
        assert!(
            std::env::var_os("CI").is_none(),
            "Chromium is missing (install Debian's `chromium`): the status page test needs it in CI"
        );
        eprintln!("skipping the Chromium check: /usr/bin/chromium is not installed");
        return None;
    };
    let profile = tempfile::tempdir().expect("tempdir");
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(["--dump-dom", url])
        .stdin(Stdio::null())
        .output()
        .expect("run chromium");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn probes_metrics_request_ids_and_the_status_page_follow_a_real_deletion() {
    // As deployed: the admin listener asks for tokens beyond its probes.
    let lethe = start(&[("LETHE_ADMIN_AUTH", "token")]);
    let admin = lethe.admin_token();

    let health = get(&format!("{}/healthz", lethe.admin_url));
    assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
    let ready = wait_for(Duration::from_secs(60), "/readyz to pass", || {
        let r = get(&format!("{}/readyz", lethe.admin_url));
        (r.status == 200).then_some(r.body)
    });
    for check in ["components", "database", "cluster", "manifests"] {
        assert!(ready.contains(&format!("[+]{check} ok")), "{ready}");
    }

    // An org held by a foreign finalizer stays in flight after its DELETE.
    let org = create_org(&lethe, "observed");
    patch_org(
        &lethe,
        &org,
        "json",
        r#"[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/hold"}]"#,
    );
    let auth = format!("Bearer {admin}");
    let deleted = request(
        "DELETE",
        &format!("{}/v3/organizations/{org}", lethe.url),
        None,
        &[("authorization", &auth), ("x-vcap-request-id", "trace-42")],
    );
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    let id = deleted.header("x-vcap-request-id").expect("request id");
    let (given, fresh) = id.split_once("::").expect("the caller's id, then lethe's");
    assert_eq!(given, "trace-42");
    assert!(uuid::Uuid::parse_str(fresh).is_ok(), "{id}");
    let plain = call(&lethe, "GET", "/v3", None, None);
    let own = plain.header("x-vcap-request-id").expect("request id");
    assert!(uuid::Uuid::parse_str(own).is_ok(), "{own}");
    assert!(
        lethe.wait_for_log(id, Duration::from_secs(5)),
        "the request id is not in the log:\n{}",
        lethe.log()
    );
    let access = lethe
        .log()
        .lines()
        .find(|l| l.contains(id) && l.contains("DELETE"))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(
        access.contains("202"),
        "no access line for {id}:\n{}",
        lethe.log()
    );

    // A pass sees the deletion; the metrics and the page say so.
    let processing = "lethe_deletions_in_flight{component=\"cf-reconciler\",state=\"PROCESSING\"}";
    let text = wait_for(
        Duration::from_secs(60),
        "a pass to see the deletion",
        || {
            let text = metrics(&lethe);
            (sample(&text, processing).unwrap_or(0.0) >= 1.0).then_some(text)
        },
    );
    for (series, at_least) in [
        (
            "lethe_http_requests_total{route=\"/v3/organizations/...\",method=\"DELETE\",status=\"202\"}",
            1.0,
        ),
        (
            "lethe_http_requests_total{route=\"/v3\",method=\"GET\",status=\"200\"}",
            1.0,
        ),
        (
            "lethe_component_instantiations_total{component=\"cf-api\"}",
            3.0,
        ),
        (
            "lethe_kube_requests_total{component=\"cf-api\",verb=\"create\",kind=\"Org\",code=\"2xx\"}",
            1.0,
        ),
        (
            "lethe_kube_requests_total{component=\"cf-api\",verb=\"delete\",kind=\"Org\",code=\"2xx\"}",
            1.0,
        ),
        (
            "lethe_reconcile_passes_total{component=\"cf-reconciler\",outcome=\"ran\"}",
            1.0,
        ),
        (
            "lethe_reconcile_pass_duration_seconds_count{component=\"cf-reconciler\"}",
            1.0,
        ),
        (
            "lethe_reconcile_items_total{component=\"cf-reconciler\"}",
            1.0,
        ),
        ("lethe_reconciler_leader{component=\"cf-reconciler\"}", 1.0),
        (
            "lethe_reconciler_leader_transitions_total{component=\"cf-reconciler\"}",
            1.0,
        ),
        (
            "lethe_sql_statements_total{component=\"cf-reconciler\",outcome=\"ok\"}",
            1.0,
        ),
    ] {
        let value = sample(&text, series).unwrap_or_else(|| panic!("no {series} in:\n{text}"));
        assert!(value >= at_least, "{series} is {value}");
    }
    for family in [
        "# TYPE lethe_http_request_duration_seconds histogram",
        "# UNIT lethe_http_request_duration_seconds seconds",
        "# TYPE lethe_deletion_oldest_age_seconds gauge",
        "# TYPE lethe_kube_retries counter",
    ] {
        assert!(text.contains(family), "no `{family}` in:\n{text}");
    }

    // A browser answers the listener's Basic challenge with the token as the password; without
    // credentials it gets no page.
    let with_token = lethe
        .admin_url
        .replacen("http://", &format!("http://operator:{admin}@"), 1);
    if let Some(dom) = chromium_dom(&format!("{}/lethe/status", lethe.admin_url)) {
        assert!(
            !dom.contains("<h1>lethe"),
            "the page without a token:\n{dom}"
        );
    }
    if let Some(dom) = chromium_dom(&format!("{with_token}/lethe/status")) {
        for needle in [
            "<h1>lethe: lethe</h1>",
            "<td><code>/v3/jobs/:guid</code></td><td>cf-job-status</td>",
            "<td>cf-reconciler</td><td><code>* * * * * *</code></td>",
            "Leader: <strong>this host</strong>",
            &format!("<td>org/{org}</td><td>PROCESSING</td>"),
        ] {
            assert!(dom.contains(needle), "no `{needle}` on the page:\n{dom}");
        }
    }

    // Once the hold is gone the deletion finishes, and the next pass no longer reports it.
    patch_org(
        &lethe,
        &org,
        "json",
        r#"[{"op":"remove","path":"/metadata/finalizers/0"}]"#,
    );
    wait_for(
        Duration::from_secs(60),
        "the deletion to leave the metrics",
        || (sample(&metrics(&lethe), processing) == Some(0.0)).then_some(()),
    );
    let page = request(
        "GET",
        &format!("{}/lethe/status", lethe.admin_url),
        None,
        &[("Authorization", &auth)],
    );
    assert_eq!(page.status, 200);
    assert!(!page.body.contains(&format!("org/{org}")), "{}", page.body);

    assert!(
        !lethe.log().contains(&admin),
        "the admin token is in the log"
    );
}

/// A token for a new ServiceAccount `name` in `lethe-system`, made through the cluster's
/// administrator (so the test needs no users of its own, on any cluster).
fn service_account_token(lethe: &Lethe, name: &str) -> String {
    let (ok, _, err) = lethe.kubectl(&["create", "serviceaccount", name, "-n", "lethe-system"]);
    assert!(ok || err.contains("AlreadyExists"), "{err}");
    let token = lethe.kubectl_ok(&["create", "token", name, "-n", "lethe-system"]);
    token.trim().to_string()
}

/// `--admin-auth=token` (the default off loopback): the probes answer anyone; `/metrics`,
/// `/lethe/status` and `/readyz?verbose` answer 401 without a token, 403 to a token whose user
/// lacks `get` on the path, and 200 once `deploy/`'s `lethe-metrics-reader` is bound to it. A
/// browser's Basic credentials, with the token as the password, count as the token.
#[test]
fn the_admin_listener_shows_internals_only_to_those_allowed() {
    let lethe = start(&[("LETHE_ADMIN_AUTH", "token")]);
    let admin = |path: &str, token: Option<&str>| {
        let auth = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> =
            auth.iter().map(|a| ("Authorization", a.as_str())).collect();
        request("GET", &format!("{}{path}", lethe.admin_url), None, &headers)
    };
    let ready = wait_for(Duration::from_secs(60), "/readyz to pass", || {
        let r = admin("/readyz", None);
        (r.status == 200).then_some(r.body)
    });
    assert!(ready.contains("readyz check passed"), "{ready}");
    assert_eq!(admin("/healthz", None).status, 200);
    assert_eq!(admin("/livez", None).status, 200);

    let guarded = ["/metrics", "/lethe/status", "/readyz?verbose"];
    for path in guarded {
        let r = admin(path, None);
        assert_eq!(r.status, 401, "{path} without a token: {}", r.body);
        assert!(
            r.headers
                .iter()
                .any(|(k, v)| k == "www-authenticate" && v.starts_with("Bearer")),
            "{path}: {:?}",
            r.headers
        );
        let r = admin(path, Some("not-a-token-the-cluster-knows"));
        assert_eq!(r.status, 401, "{path} with an unknown token: {}", r.body);
    }

    let nosy = service_account_token(&lethe, "nosy");
    let scraper = service_account_token(&lethe, "scraper");
    for path in guarded {
        let r = admin(path, Some(&nosy));
        assert_eq!(r.status, 403, "{path} as nosy: {}", r.body);
        assert!(
            r.body.contains("system:serviceaccount:lethe-system:nosy"),
            "{path}: {}",
            r.body
        );
        assert!(
            !r.body.contains("lethe_"),
            "{path} leaked metrics: {}",
            r.body
        );
    }

    let reader = support::repo_root().join("deploy/metrics-reader.yaml");
    lethe.kubectl_ok(&["apply", "-f", &reader.to_string_lossy()]);
    lethe.kubectl_ok(&[
        "create",
        "clusterrolebinding",
        "scraper-reads-lethe",
        "--clusterrole=lethe-metrics-reader",
        "--serviceaccount=lethe-system:scraper",
    ]);
    let metrics = admin("/metrics", Some(&scraper));
    assert_eq!(metrics.status, 200, "{}", metrics.body);
    assert!(
        metrics.body.contains("# TYPE lethe_kube_retries counter"),
        "{}",
        metrics.body
    );
    let status = admin("/lethe/status", Some(&scraper));
    assert_eq!(status.status, 200, "{}", status.body);
    assert!(
        status.body.contains("<h1>lethe: lethe</h1>"),
        "{}",
        status.body
    );
    let verbose = admin("/readyz?verbose", Some(&scraper));
    assert_eq!(verbose.status, 200, "{}", verbose.body);
    assert!(verbose.body.contains("[+]database ok"), "{}", verbose.body);

    // A browser sends Basic credentials; the token is their password.
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("prometheus:{scraper}"))
    );
    let r = request(
        "GET",
        &format!("{}/metrics", lethe.admin_url),
        None,
        &[("Authorization", &basic)],
    );
    assert_eq!(r.status, 200, "{}", r.body);

    // The reviews are cached, not the tokens: neither appears in the log.
    let log = lethe.log();
    for token in [&nosy, &scraper] {
        assert!(!log.contains(token.as_str()), "a token is in the log");
    }
}

#[test]
fn json_logs_are_one_object_per_line_and_carry_the_request_id() {
    let lethe = start(&[("LETHE_LOG_FORMAT", "json")]);
    let r = request(
        "GET",
        &format!("{}/v3", lethe.url),
        None,
        &[("x-vcap-request-id", "trace-json")],
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let id = r
        .header("x-vcap-request-id")
        .expect("request id")
        .to_string();
    assert!(
        lethe.wait_for_log(&id, Duration::from_secs(5)),
        "{}",
        lethe.log()
    );
    let lines: Vec<Json> = lethe
        .log()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let access = lines
        .iter()
        .find(|l| {
            l["spans"]
                .as_array()
                .is_some_and(|spans| spans.iter().any(|s| s["id"] == id.as_str()))
        })
        .unwrap_or_else(|| panic!("no line carries {id}:\n{}", lethe.log()));
    assert_eq!(access["target"], "lethe::access", "{access}");
    assert_eq!(access["fields"]["status"], 200, "{access}");
    assert_eq!(access["fields"]["route"], "/v3", "{access}");
    assert!(
        access["timestamp"].is_string() && access["level"] == "INFO",
        "{access}"
    );
}

#[test]
fn readyz_names_an_unreachable_cluster_until_it_answers() {
    let port = support::free_port();
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             users:\n- name: u\n  user: {{}}\n\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n"
        ),
    )
    .expect("kubeconfig");
    let manifest = format!(
        r#"
spin_manifest_version = 2

[application]
name = "readiness"

[variables]
greeting = {{ default = "hello" }}

[[trigger.http]]
route = "/smoke/..."
component = "smoke"

[component.smoke]
source = "{smoke}"
variables = {{ greeting = "{{{{ greeting }}}}" }}

[component.smoke.tool.lethe]
capabilities = ["sql", "log", "config", "kube"]
migrations = "{migrations}"
"#,
        smoke = support::component("smoke").display(),
        migrations = support::repo_root()
            .join("components/smoke/migrations")
            .display(),
    );
    let lethe = Lethe::up(&manifest, &["--kubeconfig", &kubeconfig.to_string_lossy()]);
    let not_ready = get(&format!("{}/readyz", lethe.admin_url));
    assert_eq!(not_ready.status, 503, "{}", not_ready.body);
    assert!(
        not_ready.body.contains("[-]cluster failed:"),
        "{}",
        not_ready.body
    );
    assert!(
        not_ready.body.contains("[+]database ok"),
        "{}",
        not_ready.body
    );
    let health = get(&format!("{}/healthz", lethe.admin_url));
    assert_eq!(health.status, 200, "alive while not ready");

    let cluster_dir = dir.path().join("cluster");
    let mut cluster = support::spawn_cluster(
        &cluster_dir,
        &["--plain-http", "--listen", &format!("127.0.0.1:{port}")],
    );
    let ready = std::panic::catch_unwind(|| {
        wait_for(
            Duration::from_secs(60),
            "/readyz once the cluster is up",
            || {
                let r: Answer = get(&format!("{}/readyz", lethe.admin_url));
                (r.status == 200).then_some(r.body)
            },
        )
    });
    let _ = cluster.kill();
    let _ = cluster.wait();
    let ready = ready.unwrap_or_else(|e| std::panic::resume_unwind(e));
    assert!(ready.contains("[+]cluster ok"), "{ready}");
}

/// Issue 16's storm: a fifth of all API requests answered 503 and another fifth 429 (with
/// `Retry-After: 1`), from before lethe starts. CF and data-jobs clients doing their whole work
/// (create, list, delete, poll to `COMPLETE`) see neither a 5xx nor a 404.
#[test]
fn clients_see_no_5xx_and_no_404_in_a_storm_of_503s_and_429s() {
    if support::external_kubeconfig().is_some() {
        eprintln!("skipping the storm test: it needs the embedded cluster's faults");
        return;
    }
    let faults = tempfile::tempdir().expect("tempdir");
    let path = faults.path().join("faults.json");
    std::fs::write(
        &path,
        r#"{"error_rate": 0.2, "error_status": 503, "throttle_rate": 0.2, "retry_after_seconds": 1}"#,
    )
    .expect("faults");
    let lethe = start(&[("LETHE_CLUSTER_FAULTS", &path.to_string_lossy())]);
    let admin = lethe.admin_token();
    let mut seen: Vec<(String, u16)> = Vec::new();
    let mut send = |method: &str, path: &str, body: Option<&str>| -> Answer {
        let a = call(&lethe, method, path, Some(&admin), body);
        seen.push((format!("{method} {path}"), a.status));
        a
    };
    let poll_to_complete = |send: &mut dyn FnMut(&str, &str, Option<&str>) -> Answer,
                            location: &str| {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let job = send("GET", location, None);
            if job.status == 200 && job.json()["state"] == "COMPLETE" {
                return;
            }
            assert!(Instant::now() < deadline, "{location} never completed");
            std::thread::sleep(Duration::from_millis(300));
        }
    };

    for round in 0..2 {
        let name = support::cf::unique(&format!("storm-{round}"));
        let org = send(
            "POST",
            "/v3/organizations",
            Some(&format!(r#"{{"name":"{name}"}}"#)),
        );
        assert_eq!(org.status, 201, "{}", org.body);
        let org = org.json()["guid"].as_str().expect("guid").to_string();
        let space_body = format!(
            r#"{{"name":"s","relationships":{{"organization":{{"data":{{"guid":"{org}"}}}}}}}}"#
        );
        let space = send("POST", "/v3/spaces", Some(&space_body));
        assert_eq!(space.status, 201, "{}", space.body);
        let space = space.json()["guid"].as_str().expect("guid").to_string();
        send("GET", &format!("/v3/organizations/{org}"), None);
        send("GET", "/v3/organizations", None);
        send("GET", &format!("/v3/spaces?organization_guids={org}"), None);
        let deleted = send("DELETE", &format!("/v3/spaces/{space}"), None);
        let location = deleted.header("location").unwrap_or_default().to_string();
        poll_to_complete(&mut send, &location);
        let deleted = send("DELETE", &format!("/v3/organizations/{org}"), None);
        let location = deleted.header("location").unwrap_or_default().to_string();
        poll_to_complete(&mut send, &location);

        let job = format!("storm{round}");
        let created = send(
            "POST",
            "/data-jobs/for-team/alpha/jobs",
            Some(
                &json!({"job_name": job, "team": "alpha", "config": {"schedule": {"schedule_cron": "*/5 * * * *"}}})
                    .to_string(),
            ),
        );
        assert_eq!(created.status, 201, "{}", created.body);
        send(
            "POST",
            &format!("/data-jobs/for-team/alpha/jobs/{job}/deployments"),
            Some(r#"{"job_version": "v1"}"#),
        );
        send(
            "GET",
            &format!("/data-jobs/for-team/alpha/jobs/{job}/deployments"),
            None,
        );
        let deleted = send(
            "DELETE",
            &format!("/data-jobs/for-team/alpha/jobs/{job}"),
            None,
        );
        let location = deleted.header("location").unwrap_or_default().to_string();
        poll_to_complete(&mut send, &location);
    }
    let bad: Vec<&(String, u16)> = seen
        .iter()
        .filter(|(_, status)| *status >= 500 || *status == 404)
        .collect();
    assert!(
        bad.is_empty(),
        "{} of {} answers were 5xx or 404: {bad:?}",
        bad.len(),
        seen.len()
    );
    // The storm was real: lethe waited out throttling and retried failures.
    let text = metrics(&lethe);
    for series in ["lethe_kube_throttled_total", "lethe_kube_retries_total"] {
        let n = sample(&text, series).unwrap_or(0.0);
        assert!(n >= 10.0, "{series} is only {n}");
    }
    eprintln!("storm: {} answers, none 5xx or 404", seen.len());
}

/// `deploy/` is a kustomize base the real server accepts: `kubectl kustomize` builds it, and a
/// server dry run against the cluster (where lethe's namespaces exist) creates every object and
/// stores none. A Deployment whose selector misses its template's labels is refused as the real
/// server refuses it, so the dry run checks something. Its `spin.toml` is the repository's.
#[test]
fn the_deploy_base_passes_a_server_dry_run() {
    let root = support::repo_root();
    assert_eq!(
        std::fs::read_to_string(root.join("deploy/spin.toml")).expect("deploy/spin.toml"),
        std::fs::read_to_string(root.join("spin.toml")).expect("spin.toml"),
        "deploy/spin.toml must be a copy of spin.toml: cp spin.toml deploy/spin.toml"
    );
    let deploy = root.join("deploy");
    let deploy = deploy.to_string_lossy();
    let built = Command::new("kubectl")
        .args(["kustomize", &deploy])
        .output()
        .expect("kubectl kustomize");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let built = String::from_utf8_lossy(&built.stdout).into_owned();
    for kind in [
        "kind: Deployment",
        "kind: Service",
        "kind: PodDisruptionBudget",
        "kind: Secret",
        "kind: ServiceAccount",
        "kind: ClusterRole",
        "kind: NetworkPolicy",
    ] {
        assert!(built.contains(kind), "no `{kind}` in the base:\n{built}");
    }
    // The generated ConfigMaps carry a content hash, and the Deployment refers to that name.
    let manifest_map = built
        .lines()
        .find_map(|l| l.trim().strip_prefix("name: lethe-manifest-"))
        .expect("the manifest ConfigMap");
    assert!(
        built
            .matches(&format!("lethe-manifest-{manifest_map}"))
            .count()
            >= 2,
        "{built}"
    );
    // Nothing newer than the oldest supported Kubernetes (v1.21): no preStop `sleep` action
    // (v1.30); lethe drains by itself on SIGTERM instead.
    assert!(!built.contains("preStop"), "{built}");
    assert!(built.contains("LETHE_SHUTDOWN_DELAY_SECONDS"), "{built}");

    let lethe = start(&[]);
    let (ok, out, err) = lethe.kubectl(&["apply", "--dry-run=server", "-k", &deploy]);
    assert!(ok, "the server dry run failed:\n{err}\n{out}");
    for line in [
        "deployment.apps/lethe",
        "poddisruptionbudget.policy/lethe",
        "service/lethe",
        "secret/lethe-database",
        "networkpolicy.networking.k8s.io/lethe",
        "clusterrole.rbac.authorization.k8s.io/lethe-metrics-reader",
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(line) && l.ends_with("(server dry run)")),
            "no `{line} … (server dry run)` in:\n{out}"
        );
    }
    let (found, _, _) = lethe.kubectl(&["get", "deployment", "lethe", "-n", "lethe-system"]);
    assert!(!found, "a dry run stored the Deployment");

    // An overlay with the Korifi component: the preset is set, and lethe's identity is granted
    // reads of Korifi's kinds and nothing else.
    let overlay = tempfile::tempdir_in(root.join("target")).expect("overlay dir");
    std::fs::write(
        overlay.path().join("kustomization.yaml"),
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [../../deploy]\ncomponents: [../../deploy/korifi]\n",
    )
    .expect("overlay");
    let overlay = overlay.path().to_string_lossy().into_owned();
    let built = Command::new("kubectl")
        .args(["kustomize", &overlay])
        .output()
        .expect("kubectl kustomize");
    let built = String::from_utf8_lossy(&built.stdout).into_owned();
    assert!(built.contains("LETHE_VAR_JOB_TYPES: korifi"), "{built}");
    let korifi_rules = std::fs::read_to_string(root.join("deploy/korifi/rbac.yaml")).expect("rbac");
    assert!(
        korifi_rules.contains(r#"verbs: ["get", "list"]"#),
        "{korifi_rules}"
    );
    for write in ["create", "update", "patch", "delete"] {
        assert!(
            !korifi_rules.contains(write),
            "lethe writes no Korifi object: {write}"
        );
    }
    let (ok, out, err) = lethe.kubectl(&["apply", "--dry-run=server", "-k", &overlay]);
    assert!(ok, "the overlay's server dry run failed:\n{err}\n{out}");
    assert!(
        out.contains(
            "clusterrole.rbac.authorization.k8s.io/lethe-korifi-jobs created (server dry run)"
        ),
        "{out}"
    );

    let broken = r#"
apiVersion: apps/v1
kind: Deployment
metadata:
  name: broken
  namespace: lethe-system
spec:
  selector:
    matchLabels:
      app: a
  template:
    metadata:
      labels:
        app: b
    spec:
      containers:
        - name: c
          image: lethe:0.1.0
"#;
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("broken.yaml");
    std::fs::write(&file, broken).expect("write");
    let (ok, _, err) = lethe.kubectl(&["apply", "--dry-run=server", "-f", &file.to_string_lossy()]);
    assert!(!ok, "a selector that misses the labels passed the dry run");
    assert!(
        err.contains("`selector` does not match template `labels`"),
        "{err}"
    );
}

/// `lethe cluster --plain-listen`: kubectl reaches the cluster through the kubeconfig's HTTPS
/// address, and a foreign host (whose `wasi:http` trusts only public roots) reaches the same
/// cluster over plain HTTP, with the same bearer tokens and the same authorization.
#[test]
fn the_embedded_cluster_serves_kubectl_over_https_and_foreign_hosts_over_plain_http() {
    let (tls_port, plain_port) = (support::free_port(), support::free_port());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cluster = support::spawn_cluster(
        dir.path(),
        &[
            "--listen",
            &format!("127.0.0.1:{tls_port}"),
            "--plain-listen",
            &format!("127.0.0.1:{plain_port}"),
        ],
    );
    let checked = std::panic::catch_unwind(|| {
        let kubeconfig = dir.path().join("cluster/kubeconfig");
        let namespaces = wait_for(Duration::from_secs(60), "kubectl over HTTPS", || {
            let out = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .args(["get", "namespaces", "-o", "name"])
                .output()
                .ok()?;
            out.status
                .success()
                .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
        });
        assert!(namespaces.contains("namespace/default"), "{namespaces}");
        let config = std::fs::read_to_string(&kubeconfig).expect("kubeconfig");
        assert!(
            config.contains(&format!("server: https://127.0.0.1:{tls_port}")),
            "kubectl is pointed at HTTPS: {config}"
        );
        let token = config
            .lines()
            .find_map(|l| l.trim().strip_prefix("token: "))
            .expect("the admin token")
            .to_string();
        let plain = format!("http://127.0.0.1:{plain_port}/api/v1/namespaces/default");
        let with_token = request(
            "GET",
            &plain,
            None,
            &[("authorization", &format!("Bearer {token}"))],
        );
        assert_eq!(with_token.status, 200, "{}", with_token.body);
        assert_eq!(with_token.json()["metadata"]["name"], "default");
        let anonymous = request("GET", &plain, None, &[]);
        assert!(
            matches!(anonymous.status, 401 | 403),
            "no token, no namespace: {}",
            anonymous.status
        );
    });
    let _ = cluster.kill();
    let _ = cluster.wait();
    checked.unwrap_or_else(|e| std::panic::resume_unwind(e));
}

/// SECURITY.md's "Each component's data" table is every component of `spin.toml`, with the
/// account its privileged calls act as and the one database label its `sql` calls reach.
#[test]
fn every_components_account_and_database_are_the_ones_security_md_lists() {
    let root = support::repo_root();
    let manifest = lethe::manifest::load(&root.join("spin.toml")).expect("spin.toml");
    let security = std::fs::read_to_string(root.join("SECURITY.md")).expect("SECURITY.md");
    let section = security
        .split("## Each component's data")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the section");
    let first_code = |cell: &str| -> Option<String> {
        let mut parts = cell.split('`');
        parts.next()?;
        parts.next().map(str::to_owned)
    };
    let mut listed = std::collections::BTreeMap::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
        assert_eq!(cells.len(), 3, "{row}");
        let component = first_code(cells[0]).expect("a component");
        listed.insert(component, (first_code(cells[1]), first_code(cells[2])));
    }
    let expected: std::collections::BTreeMap<String, (Option<String>, Option<String>)> = manifest
        .components
        .iter()
        .map(|(id, decl)| {
            let account = manifest
                .component_account(id)
                .map(|(namespace, name)| format!("{namespace}/{name}"));
            (id.clone(), (account, decl.database.clone()))
        })
        .collect();
    assert_eq!(listed, expected);
}

/// SECURITY.md's table of each account's rights is the RBAC files, row for row: every rule that
/// `deploy/rbac.json` and each component's `kubernetes_manifests` bind to an account is listed
/// under that account, with its verbs, scope and resource names, and the table lists nothing
/// else. Each component granted the privileged identity has an account of its own, which no other
/// component's file binds.
#[test]
fn every_accounts_rules_are_the_ones_security_md_lists() {
    let root = support::repo_root();
    let manifest = lethe::manifest::load(&root.join("spin.toml")).expect("spin.toml");
    // What the files bind: (account, group, resource, verbs, scope, resource names), and where.
    let mut bound: Vec<[String; 6]> = Vec::new();
    let mut bound_in: Vec<(String, std::path::PathBuf)> = Vec::new();
    let mut files = vec![root.join("deploy/rbac.json")];
    files.extend(
        manifest
            .components
            .values()
            .flat_map(|c| c.grants.kubernetes_manifests.clone()),
    );
    for file in &files {
        let list: Json =
            serde_json::from_str(&std::fs::read_to_string(file).expect("rbac file")).expect("JSON");
        let items = list["items"].as_array().expect("a List");
        for binding in items
            .iter()
            .filter(|i| i["kind"].as_str().is_some_and(|k| k.ends_with("Binding")))
        {
            let namespace = binding["metadata"]["namespace"].as_str().unwrap_or("");
            let role = items
                .iter()
                .find(|i| {
                    i["kind"] == binding["roleRef"]["kind"]
                        && i["metadata"]["name"] == binding["roleRef"]["name"]
                        && i["metadata"]["namespace"].as_str().unwrap_or("") == namespace
                })
                .unwrap_or_else(|| {
                    panic!("{}: {binding} binds a role of another file", file.display())
                });
            for subject in binding["subjects"].as_array().expect("subjects") {
                for rule in role["rules"].as_array().expect("rules") {
                    let join = |key: &str| {
                        rule[key]
                            .as_array()
                            .map(|a| {
                                a.iter()
                                    .filter_map(Json::as_str)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            })
                            .unwrap_or_default()
                    };
                    let account = subject["name"].as_str().expect("name").to_string();
                    bound_in.push((account.clone(), file.clone()));
                    bound.push([
                        account,
                        match join("apiGroups").as_str() {
                            "" => "\"\"".to_string(),
                            g => g.to_string(),
                        },
                        join("resources"),
                        join("verbs"),
                        if namespace.is_empty() {
                            "ClusterRole".into()
                        } else {
                            namespace.to_string()
                        },
                        join("resourceNames"),
                    ]);
                }
            }
        }
    }
    // What SECURITY.md lists: "| `account` | `group` `resource`: verbs[, on names] | scope | …".
    let security = std::fs::read_to_string(root.join("SECURITY.md")).expect("SECURITY.md");
    let section = security
        .split("## Each account's rights")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("the section");
    let mut listed: Vec<[String; 6]> = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = row
            .split(" | ")
            .map(|c| c.trim_matches(|ch| ch == '|' || ch == ' '))
            .collect();
        let account = cells[0].trim_matches('`').to_string();
        let (what, verbs) = cells[1]
            .split_once(": ")
            .expect("`group` `resource`: verbs");
        let mut what = what.split('`').filter(|p| !p.trim().is_empty());
        let group = what.next().expect("group").to_string();
        let resource = what.next().expect("resource").to_string();
        let (verbs, names) = match verbs.split_once(", on ") {
            Some((verbs, names)) => (
                verbs,
                names
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .filter(|n| n.starts_with("lethe-"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            None => (verbs, String::new()),
        };
        let scope = if cells[2].starts_with("ClusterRole") {
            "ClusterRole".to_string()
        } else {
            cells[2]
                .split('`')
                .nth(1)
                .expect("Role in `namespace`")
                .to_string()
        };
        listed.push([account, group, resource, verbs.to_string(), scope, names]);
    }
    let mut sorted = bound.clone();
    sorted.sort();
    listed.sort();
    assert_eq!(
        listed, sorted,
        "SECURITY.md's table and the RBAC files differ"
    );
    // Every privileged component has its own account, bound only in its own file, which also
    // holds the one impersonation lethe's account gets for it.
    for id in manifest.components.keys() {
        let Some((_, account)) = manifest.component_account(id) else {
            continue;
        };
        assert_eq!(account, format!("lethe-{id}"));
        let own = root.join(format!("components/{id}/kubernetes/rbac.json"));
        assert!(
            bound_in.iter().any(|(a, f)| *a == account && *f == own),
            "{account} has no rights in {}",
            own.display()
        );
        for (a, f) in &bound_in {
            assert!(
                *a != account || *f == own,
                "{account} is bound in {}",
                f.display()
            );
        }
        let impersonation = bound
            .iter()
            .zip(&bound_in)
            .filter(|(rule, _)| {
                rule[0] == "lethe" && rule[3] == "impersonate" && rule[5] == account
            })
            .map(|(_, (_, f))| f)
            .collect::<Vec<_>>();
        assert_eq!(
            impersonation,
            vec![&own],
            "lethe may impersonate {account} by its own file only"
        );
    }
}
