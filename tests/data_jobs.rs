//! End-to-end tests of the data-jobs control plane: the real `lethe up` serving the data-jobs
//! component against its embedded cluster, passes driven deterministically with
//! `lethe sync --once`, and the cluster inspected over its REST API with the admin token.
//!
//! Every scenario runs on SQLite and on PostgreSQL (`LETHE_TEST_POSTGRES_URL`; skipped visibly
//! when unset, failed under CI).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};
use support::standalone::{StandaloneCluster, kubeconfig_server_and_token, kubectl};
use support::{Answer, Lethe, request};

/// Where the database lives.
#[derive(Clone)]
enum Backend {
    Sqlite,
    Postgres(String),
}

fn manifest(cron: Option<&str>, variables: &str) -> String {
    let cron = cron
        .map(|expr| {
            format!("[[trigger.cron]]\ncron_expression = \"{expr}\"\ncomponent = \"data-jobs\"\n")
        })
        .unwrap_or_default();
    format!(
        r#"
spin_manifest_version = 2

[application]
name = "data-jobs-test"

# The host acts as lethe's ServiceAccount (deploy/rbac.json), and data-jobs as its own
# (components/data-jobs/kubernetes/rbac.json), as in a real cluster.
[application.tool.lethe]
kubernetes_manifests = ["{crds}", "{rbac}"]
service_account = "lethe-system/lethe"
error_format = "cf"

[[trigger.http]]
route = "/data-jobs/..."
component = "data-jobs"

[[trigger.http]]
route = "/v3/jobs/:guid"
component = "data-jobs"

{cron}

[component.data-jobs]
source = "{wasm}"
sqlite_databases = ["data-jobs"]
variables = {{ namespace = "data-jobs", backoff_base_ms = "300", deletion_timeout_seconds = "120"{variables} }}

[component.data-jobs.tool.lethe]
capabilities = ["sql", "kube", "log", "config"]
kube_identities = ["caller", "privileged"]
kubernetes_manifests = ["{own_rbac}"]
migrations = "{migrations}"
timeout_ms = 60000
memory_limit_mb = 128
"#,
        wasm = support::component("data_jobs").display(),
        crds = support::repo_root()
            .join("components/cf-core/kubernetes/crds.json")
            .display(),
        rbac = support::repo_root().join("deploy/rbac.json").display(),
        own_rbac = support::repo_root()
            .join("components/data-jobs/kubernetes/rbac.json")
            .display(),
        migrations = support::repo_root()
            .join("components/data-jobs/migrations")
            .display(),
    )
}

/// One `lethe up` (no cron: passes run only when a test says so), its database and cluster.
struct World {
    lethe: Lethe,
    backend: Backend,
    token: String,
    kubeconfig: PathBuf,
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

impl World {
    fn start(backend: &Backend) -> World {
        World::start_with(backend, "")
    }

    fn start_with(backend: &Backend, variables: &str) -> World {
        World::start_manifest(backend, &manifest(None, variables))
    }

    /// `lethe up` with the data-jobs pass on a cron trigger of `expression`.
    fn start_on_cron(backend: &Backend, expression: &str) -> World {
        World::start_manifest(backend, &manifest(Some(expression), ""))
    }

    fn start_manifest(backend: &Backend, manifest: &str) -> World {
        let args: Vec<&str> = match backend {
            Backend::Sqlite => vec![],
            Backend::Postgres(url) => vec!["--database-url", url],
        };
        let lethe = Lethe::up(manifest, &args);
        let kubeconfig = lethe.data_dir.path().join("data/cluster/kubeconfig");
        let (_, token) = kubeconfig_server_and_token(&kubeconfig);
        World {
            lethe,
            backend: backend.clone(),
            token,
            kubeconfig,
        }
    }

    fn data_dir(&self) -> PathBuf {
        self.lethe.data_dir.path().join("data")
    }

    /// The application's database location (each label's database derives from it).
    fn database_url(&self) -> String {
        match &self.backend {
            Backend::Sqlite => format!("sqlite:{}", self.data_dir().join("lethe.db").display()),
            Backend::Postgres(url) => url.clone(),
        }
    }

    /// `lethe sync --once --json`: the report, or the error output when no pass ran.
    fn try_sync(&self) -> Result<Json, String> {
        self.try_sync_within(None)
    }

    /// `lethe sync --once`, waiting `manifests_patience` seconds (else the default) per object of
    /// the manifests while the embedded cluster fails.
    fn try_sync_within(&self, manifests_patience: Option<u64>) -> Result<Json, String> {
        let mut command = Command::new(support::lethe_bin());
        command.arg("sync");
        if let Some(seconds) = manifests_patience {
            command.arg(format!("--manifests-patience-seconds={seconds}"));
        }
        let out = command
            .arg("--once")
            .arg("--json")
            .arg("--manifest")
            .arg(self.lethe.data_dir.path().join("spin.toml"))
            .arg("--data-dir")
            .arg(self.data_dir())
            .arg("--database-url")
            .arg(self.database_url())
            .env_remove("KUBECONFIG")
            .env("LETHE_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("run lethe sync");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "{}{}",
                stdout,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        serde_json::from_str(stdout.trim()).map_err(|e| format!("{e}: {stdout}"))
    }

    fn sync(&self) -> Json {
        self.try_sync()
            .unwrap_or_else(|e| panic!("lethe sync --once failed: {e}"))
    }

    fn api(&self, method: &str, path: &str, body: Option<Json>) -> Answer {
        let auth = format!("Bearer {}", self.token);
        let body = body.map(|b| b.to_string());
        request(
            method,
            &format!("{}{path}", self.lethe.url),
            body.as_deref(),
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
        )
    }

    /// The CronJobs in the data-jobs namespace.
    fn cronjobs(&self) -> Vec<Json> {
        let out = kubectl(
            &self.kubeconfig,
            &["get", "cronjobs", "-n", "data-jobs", "-o", "json"],
            None,
        )
        .expect("kubectl get cronjobs");
        out["items"].as_array().cloned().unwrap_or_default()
    }

    fn create_cronjob(&self, body: Json) -> Json {
        kubectl(
            &self.kubeconfig,
            &["create", "-o", "json", "-f", "-"],
            Some(body),
        )
        .expect("kubectl create")
    }

    fn delete_cronjob(&self, name: &str) {
        kubectl(
            &self.kubeconfig,
            &["delete", "cronjob", "-n", "data-jobs", name],
            None,
        )
        .expect("kubectl delete");
    }

    /// Kubernetes calls of verb `verb` the data-jobs component made so far (its /metrics).
    fn kube_calls(&self, verb: &str) -> u64 {
        let metrics = support::get(&format!("{}/metrics", self.lethe.admin_url));
        let label = format!("verb=\"{verb}\"");
        metrics
            .body
            .lines()
            .filter(|l| {
                l.starts_with("lethe_kube_requests_total{")
                    && l.contains("component=\"data-jobs\"")
                    && l.contains(&label)
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    }

    /// The report of the latest pass.
    fn last_report(&self) -> Json {
        self.api("GET", "/data-jobs/sync/reports?limit=1", None)
            .json()[0]
            .clone()
    }

    /// Waits (bounded) until `done` says yes; panics with `what` otherwise.
    fn wait_until(&self, what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "{what}: {}", self.lethe.log());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Deploys `alpha/ingest` (every 10 minutes) through the API and waits (bounded) until a
    /// pass gave it its CronJob; the job's uid and the CronJob's name.
    fn deploy_ingest_and_wait(&self, what: &str) -> (String, String) {
        let uid = self.deploy(
            "alpha",
            "ingest",
            json!({"job_version": "v1", "schedule": {"schedule_cron": "*/10 * * * *"}}),
        );
        self.wait_until(what, || !labelled(&self.cronjobs(), &uid).is_empty());
        let name = labelled(&self.cronjobs(), &uid)[0]["metadata"]["name"]
            .as_str()
            .expect("name")
            .to_string();
        (uid, name)
    }

    /// Calls one of the embedded cluster's own endpoints (`/lethe/...`) as its administrator.
    fn cluster_post(&self, path: &str) {
        kubectl(
            &self.kubeconfig,
            &["create", "--raw", path, "-f", "-"],
            Some(json!({})),
        )
        .unwrap_or_else(|e| panic!("POST {path}: {e}"));
    }

    fn patch_cronjob(&self, name: &str, patch: Json) {
        let patch = patch.to_string();
        kubectl(
            &self.kubeconfig,
            &[
                "patch",
                "cronjob",
                "-n",
                "data-jobs",
                name,
                "--type",
                "merge",
                "-p",
                &patch,
            ],
            None,
        )
        .expect("kubectl patch");
    }

    fn set_faults(&self, faults: Json) {
        kubectl(
            &self.kubeconfig,
            &["create", "--raw", "/lethe/faults", "-f", "-"],
            Some(faults),
        )
        .expect("set faults");
    }

    fn sql(&self, statement: &str, params: &[lethe_sql::Value]) -> Vec<Vec<lethe_sql::Value>> {
        let url = self.database_url();
        block_on(async {
            let db =
                lethe_sql::Database::open_label_as_owner(&url, "data-jobs", Default::default())
                    .await
                    .expect("open data-jobs' database");
            if statement
                .trim_start()
                .to_ascii_uppercase()
                .starts_with("SELECT")
            {
                db.query(statement, params).await.expect("query").rows
            } else {
                db.execute(statement, params).await.expect("execute");
                Vec::new()
            }
        })
    }

    fn count(&self, table: &str, job_uid: &str) -> usize {
        let column = match table {
            "data_job" => "uid",
            "reconcile_backoff" => "object_key",
            _ => "job_uid",
        };
        self.sql(
            &format!("SELECT 1 FROM {table} WHERE {column} = $1"),
            &[lethe_sql::Value::Text(job_uid.into())],
        )
        .len()
    }

    /// Creates a job and sets its deployment; returns the job's uid.
    fn deploy(&self, team: &str, job: &str, deployment: Json) -> String {
        let created = self.api(
            "POST",
            &format!("/data-jobs/for-team/{team}/jobs"),
            Some(json!({
                "job_name": job,
                "team": team,
                "description": "test job",
                "config": { "schedule": { "schedule_cron": "*/5 * * * *" } },
            })),
        );
        assert_eq!(created.status, 201, "{}", created.body);
        let uid = created.json()["uid"].as_str().expect("uid").to_string();
        let deployed = self.api(
            "POST",
            &format!("/data-jobs/for-team/{team}/jobs/{job}/deployments"),
            Some(deployment),
        );
        assert_eq!(deployed.status, 202, "{}", deployed.body);
        uid
    }

    fn job_state(&self, location: &str) -> Json {
        let a = self.api("GET", location, None);
        assert_eq!(a.status, 200, "{}", a.body);
        a.json()
    }
}

fn labelled(cronjobs: &[Json], uid: &str) -> Vec<Json> {
    cronjobs
        .iter()
        .filter(|c| c["metadata"]["labels"]["lethe.dev/data-job-uid"] == uid)
        .cloned()
        .collect()
}

/// The path of a `Location` header (the base URL is the test server's).
fn location_path(a: &Answer) -> String {
    let loc = a.header("location").expect("Location header");
    let path = loc.find("/v3/jobs/").map(|i| &loc[i..]).unwrap_or(loc);
    path.to_string()
}

/// Declares `<name>_on_sqlite` and `<name>_on_postgres` for a scenario `fn(&Backend)`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[test]
                fn $name() {
                    super::$name(&super::Backend::Sqlite);
                }
            )*
        }
        mod postgres {
            $(
                #[test]
                fn $name() {
                    let test = concat!(stringify!($name), "_on_postgres");
                    let Some(url) = super::support::postgres_url_or_skip(test) else {
                        return;
                    };
                    let db = super::support::fresh_postgres_database(&url, "lethe_data_jobs");
                    super::$name(&super::Backend::Postgres(db));
                }
            )*
        }
    };
}

on_both_backends!(
    api_rejects_bad_input_with_the_envelope_and_never_500,
    deletion_while_sync_is_stopped_is_carried_out_by_the_next_pass,
    crash_between_cronjob_delete_and_row_delete_converges_on_the_next_pass,
    crash_between_cronjob_create_and_actual_write_converges_without_a_duplicate,
    job_recreated_under_the_same_name_replaces_the_old_cronjob_and_keeps_the_new_one,
    orphaned_labelled_cronjobs_are_swept_and_unlabelled_ones_left_alone,
    hand_edited_cronjob_is_restored,
    transient_failures_back_off_per_item_and_a_5xx_storm_is_retried,
    invalid_spec_is_parked_until_the_desired_spec_changes,
    deleting_a_data_job_row_leaves_its_actual_row,
    redeploying_after_a_deployment_delete_supersedes_the_deletion,
    two_hosts_run_one_leader_and_the_other_takes_over_within_the_lease,
    shipped_app_runs_data_jobs_on_its_cron_and_answers_their_jobs_under_v3_jobs,
    the_cron_pass_follows_the_changes_and_lists_nothing_while_idle,
    a_throttled_reconciler_converges,
    a_change_made_while_lethe_is_down_is_picked_up_at_start,
    a_reconciler_is_woken_by_its_api_and_by_what_it_follows_not_only_by_its_schedule,
);

/// With a schedule that never comes due while the test runs (once a year), the data-jobs pass
/// still runs: a write to its API wakes it, and so does a change to a CronJob it follows.
fn a_reconciler_is_woken_by_its_api_and_by_what_it_follows_not_only_by_its_schedule(
    backend: &Backend,
) {
    let w = World::start_on_cron(backend, "0 0 0 1 1 *");
    let (uid, name) = w.deploy_ingest_and_wait("the write to the API deploys the job");
    w.patch_cronjob(&name, json!({"spec": {"schedule": "0 0 * * *"}}));
    w.wait_until("the hand edit wakes the pass, which undoes it", || {
        labelled(&w.cronjobs(), &uid)[0]["spec"]["schedule"] == "*/10 * * * *"
    });
    let deleted = w.api("DELETE", "/data-jobs/for-team/alpha/jobs/ingest", None);
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    w.wait_until(
        "the delete wakes the pass, which removes the CronJob",
        || labelled(&w.cronjobs(), &uid).is_empty(),
    );
}

/// A host that starts has no watch and no bookmark the host knows, so its first pass is full:
/// what changed while no lethe ran — here a desired image written straight into SQL, past the
/// API and its change feed — reaches the cluster without waiting for the resync interval.
fn a_change_made_while_lethe_is_down_is_picked_up_at_start(backend: &Backend) {
    let mut w = World::start_on_cron(backend, "* * * * * *");
    let (uid, _) = w.deploy_ingest_and_wait("the cron pass deploys the job");
    w.lethe.crash();
    let spec = data_jobs_core::model::Spec {
        image: "busybox:while-down".into(),
        schedule: "*/10 * * * *".into(),
        enabled: true,
        resources: Default::default(),
    };
    w.sql(
        "UPDATE desired_data_job_deployment SET image = $2, spec_hash = $3 WHERE job_uid = $1",
        &[
            lethe_sql::Value::Text(uid.clone()),
            lethe_sql::Value::Text(spec.image.clone()),
            lethe_sql::Value::Text(spec.hash()),
        ],
    );
    w.lethe.restart();
    w.wait_until("the change made while down is applied", || {
        labelled(&w.cronjobs(), &uid)[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            ["containers"][0]["image"]
            == "busybox:while-down"
    });
    let report = w.last_report();
    assert_eq!(report["full"], true, "{report}");
}

/// Under a client-side rate limit far below what the pass would use (2 requests/s, burst 2), the
/// cron pass still deploys every job, waiting for the limiter rather than failing, and the wait
/// shows in the metrics.
fn a_throttled_reconciler_converges(backend: &Backend) {
    let throttled = manifest(Some("* * * * * *"), "").replace(
        "memory_limit_mb = 128\n",
        "memory_limit_mb = 128\nkube_qps = 2\nkube_burst = 2\n",
    );
    assert!(throttled.contains("kube_qps = 2"));
    let w = World::start_manifest(backend, &throttled);
    let uids: Vec<String> = (0..6)
        .map(|i| {
            w.deploy(
                "alpha",
                &format!("job-{i}"),
                json!({"job_version": "v1", "schedule": {"schedule_cron": "*/10 * * * *"}}),
            )
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cronjobs = w.cronjobs();
        if uids.iter().all(|uid| labelled(&cronjobs, uid).len() == 1) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not every job was deployed: {}",
            w.lethe.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let (waited, metrics) = w.lethe.rate_limit_wait_seconds("data-jobs");
    assert!(waited > 0.0, "the limiter made the pass wait: {metrics}");
}

/// Between full passes, the data-jobs pass acts on what changed (desired state through its SQL
/// change feed, CronJobs through the host's watch) and makes no LIST while nothing changes; a
/// dropped watch loses no change, and a watch whose history is gone (410) brings a full pass.
fn the_cron_pass_follows_the_changes_and_lists_nothing_while_idle(backend: &Backend) {
    let w = World::start_on_cron(backend, "* * * * * *");
    let (uid, name) = w.deploy_ingest_and_wait("the cron pass deploys the job");

    // Idle: passes keep running on the changes, and none lists anything.
    let (lists, passes) = (w.kube_calls("list"), w.kube_calls("get"));
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        w.kube_calls("get") > passes,
        "passes ran (each reads the Lease)"
    );
    assert_eq!(w.kube_calls("list"), lists, "an idle pass lists nothing");

    // A desired change reaches the CronJob through the change feed, without a full pass.
    let changed = w.api(
        "POST",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments",
        Some(json!({"image": "busybox:2"})),
    );
    assert_eq!(changed.status, 202, "{}", changed.body);
    let image = |w: &World| {
        labelled(&w.cronjobs(), &uid)[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
            ["containers"][0]["image"]
            .clone()
    };
    w.wait_until("the new image is applied", || image(&w) == "busybox:2");
    let report = w.last_report();
    assert_eq!(
        (&report["full"], &report["updated"]),
        (&json!(false), &json!(1)),
        "{report}"
    );
    let full_lists = w.kube_calls("list") - lists;
    assert!(
        full_lists <= 1,
        "one LIST of the job's CronJobs at most, no full pass ({full_lists})"
    );

    // A hand edit is undone through the watch; so is one made after every watch was dropped.
    w.patch_cronjob(&name, json!({"spec": {"schedule": "0 0 * * *"}}));
    let schedule = |w: &World| labelled(&w.cronjobs(), &uid)[0]["spec"]["schedule"].clone();
    w.wait_until("the hand edit is undone", || schedule(&w) == "*/10 * * * *");
    w.cluster_post("/lethe/drop-watches");
    w.patch_cronjob(&name, json!({"spec": {"schedule": "0 1 * * *"}}));
    w.wait_until("the edit after a dropped watch is undone", || {
        schedule(&w) == "*/10 * * * *"
    });

    // History compacted and the watch dropped: the host relists, the bookmark is gone, and the
    // next pass is full; an edit made meanwhile is repaired all the same.
    w.wait_until("passes on the changes again", || {
        w.last_report()["full"] == false
    });
    let full_passes = || -> Vec<Json> {
        let reports = w
            .api("GET", "/data-jobs/sync/reports?limit=50", None)
            .json();
        let reports = reports.as_array().cloned().unwrap_or_default();
        reports
            .into_iter()
            .filter(|r| r["full"] == true)
            .map(|r| r["started_at"].clone())
            .collect()
    };
    let before = full_passes();
    // A write the watch does not follow moves the store past the watch's version first.
    kubectl(
        &w.kubeconfig,
        &["create", "configmap", "unfollowed", "-n", "default"],
        None,
    )
    .expect("create a ConfigMap");
    w.cluster_post("/lethe/compact");
    w.cluster_post("/lethe/drop-watches");
    w.patch_cronjob(&name, json!({"spec": {"schedule": "0 2 * * *"}}));
    w.wait_until("a full pass after the relist", || {
        full_passes().iter().any(|p| !before.contains(p))
    });
    w.wait_until("the edit made around the relist is undone", || {
        schedule(&w) == "*/10 * * * *"
    });

    // Deleting the job reaches the cluster through the change feed too.
    let deleted = w.api("DELETE", "/data-jobs/for-team/alpha/jobs/ingest", None);
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    w.wait_until("the CronJob is deleted", || {
        labelled(&w.cronjobs(), &uid).is_empty()
    });
    w.wait_until("the deletion job completes", || {
        w.job_state(&location_path(&deleted))["state"] == "COMPLETE"
    });
}

fn api_rejects_bad_input_with_the_envelope_and_never_500(backend: &Backend) {
    let w = World::start(backend);
    let url = format!("{}/data-jobs/for-team/alpha/jobs", w.lethe.url);
    let none = request("GET", &url, None, &[]);
    assert_eq!((none.status, none.cf_code()), (401, 10002));
    let bad = request(
        "GET",
        &url,
        None,
        &[("authorization", "Bearer not-a-token")],
    );
    assert_eq!((bad.status, bad.cf_code()), (401, 1000));

    let post = |body: &str| {
        let auth = format!("Bearer {}", w.token);
        request("POST", &url, Some(body), &[("authorization", &auth)])
    };
    let malformed = post("{not json");
    assert_eq!((malformed.status, malformed.cf_code()), (400, 1001));
    let bad_name = post(r#"{"job_name": "Bad Name"}"#);
    assert_eq!((bad_name.status, bad_name.cf_code()), (422, 10008));
    let bad_schedule =
        post(r#"{"job_name": "j", "config": {"schedule": {"schedule_cron": "61 * * * *"}}}"#);
    assert_eq!((bad_schedule.status, bad_schedule.cf_code()), (422, 10008));
    let wrong_team = post(r#"{"job_name": "j", "team": "beta"}"#);
    assert_eq!(wrong_team.status, 422);

    w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    let dup = post(r#"{"job_name": "ingest"}"#);
    assert_eq!((dup.status, dup.cf_code()), (409, 10016));
    let bad_image = w.api(
        "POST",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments",
        Some(json!({"image": "Not An Image"})),
    );
    assert_eq!(bad_image.status, 422, "{}", bad_image.body);
    let bad_resources = w.api(
        "POST",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments",
        Some(json!({"resources": {"cpu_limit": "lots"}})),
    );
    assert_eq!(bad_resources.status, 422, "{}", bad_resources.body);
    let unknown = w.api("GET", "/data-jobs/for-team/alpha/jobs/nope", None);
    assert_eq!((unknown.status, unknown.cf_code()), (404, 10010));
    let unknown_deploy = w.api(
        "DELETE",
        "/data-jobs/for-team/alpha/jobs/nope/deployments/production",
        None,
    );
    assert_eq!(unknown_deploy.status, 404);
    let not_production = w.api(
        "GET",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments/staging",
        None,
    );
    assert_eq!(not_production.status, 404);
    for guid in [
        "data_job.delete~not-a-uuid",
        "org.delete~0b8e6a54-5a4f-4c1e-9d3f-1b2c3d4e5f60",
        "data_job.delete~0b8e6a54-5a4f-4c1e-9d3f-1b2c3d4e5f60",
    ] {
        let a = w.api("GET", &format!("/v3/jobs/{guid}"), None);
        assert_eq!((a.status, a.cf_code()), (404, 10010), "{guid}");
        assert_eq!(
            a.json()["errors"][0]["detail"],
            "Job not found. Ensure it exists and you have access to it."
        );
    }
    let listed = w.api("GET", "/data-jobs/for-team/alpha/jobs", None);
    assert_eq!(listed.status, 200);
    assert_eq!(listed.json()[0]["job_name"], "ingest");
}

fn deletion_while_sync_is_stopped_is_carried_out_by_the_next_pass(backend: &Backend) {
    let w = World::start(backend);
    let uid = w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    assert!(w.cronjobs().is_empty(), "the API alone writes no CronJob");
    let first = w.sync();
    assert_eq!(first["created"], 1, "{first}");
    let live = labelled(&w.cronjobs(), &uid);
    assert_eq!(live.len(), 1);
    assert_eq!(
        live[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.local/data-jobs/alpha/ingest:v1"
    );

    // The sync is stopped: the deletion is only recorded.
    let deleted = w.api(
        "DELETE",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments/production",
        None,
    );
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    let location = location_path(&deleted);
    assert_eq!(location, format!("/v3/jobs/deployment.delete~{uid}"));
    let job = w.job_state(&location);
    assert_eq!(job["state"], "PROCESSING");
    assert_eq!(job["operation"], "deployment.delete");
    // Reads show the window: desired gone, actual still there.
    let view = w.api(
        "GET",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments/production",
        None,
    );
    assert_eq!(view.status, 200, "{}", view.body);
    assert_eq!(view.json()["desired"], Json::Null);
    assert_eq!(view.json()["sync"]["state"], "deleting");
    assert!(view.json()["actual"]["cronjob"]["uid"].is_string());
    assert_eq!(labelled(&w.cronjobs(), &uid).len(), 1);

    let pass = w.sync();
    assert_eq!(pass["deleted"], 1, "{pass}");
    assert!(labelled(&w.cronjobs(), &uid).is_empty());
    assert_eq!(w.count("actual_data_job_deployment", &uid), 0);
    assert_eq!(w.job_state(&location)["state"], "COMPLETE");
    let gone = w.api(
        "GET",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments/production",
        None,
    );
    assert_eq!(gone.status, 404);

    // A whole job: deleted with its desired row, the actual row left as the tombstone.
    let uid2 = w.deploy("alpha", "report", json!({"job_version": "v7"}));
    w.sync();
    let deleted = w.api("DELETE", "/data-jobs/for-team/alpha/jobs/report", None);
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    let location = location_path(&deleted);
    assert_eq!(location, format!("/v3/jobs/data_job.delete~{uid2}"));
    assert_eq!(w.count("data_job", &uid2), 0);
    assert_eq!(w.count("desired_data_job_deployment", &uid2), 0);
    assert_eq!(w.count("actual_data_job_deployment", &uid2), 1);
    assert_eq!(w.job_state(&location)["state"], "PROCESSING");
    assert_eq!(
        w.api("GET", "/data-jobs/for-team/alpha/jobs/report", None)
            .status,
        404
    );
    let pass = w.sync();
    assert_eq!(pass["deleted"], 1, "{pass}");
    assert!(labelled(&w.cronjobs(), &uid2).is_empty());
    assert_eq!(w.count("actual_data_job_deployment", &uid2), 0);
    assert_eq!(w.job_state(&location)["state"], "COMPLETE");
}

fn crash_between_cronjob_delete_and_row_delete_converges_on_the_next_pass(backend: &Backend) {
    let w = World::start(backend);
    let uid = w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    w.sync();
    let name = labelled(&w.cronjobs(), &uid)[0]["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    let deleted = w.api(
        "DELETE",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments/production",
        None,
    );
    let location = location_path(&deleted);
    // The first half of a pass that crashed: the CronJob is deleted, the actual row is not.
    w.delete_cronjob(&name);
    assert_eq!(w.count("actual_data_job_deployment", &uid), 1);
    assert_eq!(w.job_state(&location)["state"], "PROCESSING");

    let pass = w.sync();
    assert_eq!(pass["failed"], json!([]), "{pass}");
    assert_eq!(pass["deleted"], 0, "the CronJob was already gone: {pass}");
    assert_eq!(w.count("actual_data_job_deployment", &uid), 0);
    assert!(w.cronjobs().is_empty());
    assert_eq!(w.job_state(&location)["state"], "COMPLETE");
}

fn crash_between_cronjob_create_and_actual_write_converges_without_a_duplicate(backend: &Backend) {
    let w = World::start(backend);
    let uid = w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    w.sync();
    let before = labelled(&w.cronjobs(), &uid);
    assert_eq!(before.len(), 1);
    // The pass crashed after the create: no actual row was written.
    w.sql(
        "DELETE FROM actual_data_job_deployment WHERE job_uid = $1",
        &[lethe_sql::Value::Text(uid.clone())],
    );

    let pass = w.sync();
    assert_eq!(pass["failed"], json!([]), "{pass}");
    assert_eq!(
        (pass["created"].clone(), pass["updated"].clone()),
        (json!(0), json!(0)),
        "{pass}"
    );
    let after = labelled(&w.cronjobs(), &uid);
    assert_eq!(after.len(), 1, "no duplicate");
    assert_eq!(
        after[0]["metadata"]["uid"], before[0]["metadata"]["uid"],
        "adopted, not re-created"
    );
    let rows = w.sql(
        "SELECT cronjob_uid FROM actual_data_job_deployment WHERE job_uid = $1",
        &[lethe_sql::Value::Text(uid.clone())],
    );
    assert_eq!(
        rows,
        vec![vec![lethe_sql::Value::Text(
            before[0]["metadata"]["uid"].as_str().expect("uid").into()
        )]]
    );
    // Converged: the next pass does nothing.
    let quiet = w.sync();
    assert_eq!(
        (
            quiet["created"].clone(),
            quiet["updated"].clone(),
            quiet["deleted"].clone()
        ),
        (json!(0), json!(0), json!(0)),
        "{quiet}"
    );
}

fn job_recreated_under_the_same_name_replaces_the_old_cronjob_and_keeps_the_new_one(
    backend: &Backend,
) {
    let w = World::start(backend);
    let old = w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    w.sync();
    let old_cronjob = labelled(&w.cronjobs(), &old)[0].clone();
    let deleted = w.api("DELETE", "/data-jobs/for-team/alpha/jobs/ingest", None);
    assert_eq!(deleted.status, 202);
    let location = location_path(&deleted);
    // Re-created at once, before any pass.
    let new = w.deploy("alpha", "ingest", json!({"job_version": "v2"}));
    assert_ne!(old, new);

    let pass = w.sync();
    assert_eq!(pass["failed"], json!([]), "{pass}");
    assert_eq!(
        (pass["deleted"].clone(), pass["created"].clone()),
        (json!(1), json!(1)),
        "{pass}"
    );
    let all = w.cronjobs();
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(
        all[0]["metadata"]["labels"]["lethe.dev/data-job-uid"],
        new.as_str()
    );
    assert_eq!(
        all[0]["metadata"]["name"], old_cronjob["metadata"]["name"],
        "same name"
    );
    assert_ne!(all[0]["metadata"]["uid"], old_cronjob["metadata"]["uid"]);
    assert_eq!(
        all[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"],
        "registry.local/data-jobs/alpha/ingest:v2"
    );
    assert_eq!(w.job_state(&location)["state"], "COMPLETE");
    assert_eq!(w.count("actual_data_job_deployment", &old), 0);

    // A stale tombstone of the old job (as if its row delete had been lost) must never hit the
    // new CronJob: the delete carries the old uid as precondition.
    w.sql(
        "INSERT INTO actual_data_job_deployment (job_uid, team, job_name, job_version, image, schedule, enabled, resources, spec_hash, cronjob_name, cronjob_uid, resource_version, applied_at) \
         VALUES ($1, 'alpha', 'ingest', 'v1', 'x', '* * * * *', TRUE, '{}', 'h', $2, $3, '1', 0)",
        &[
            lethe_sql::Value::Text(old.clone()),
            lethe_sql::Value::Text(old_cronjob["metadata"]["name"].as_str().expect("name").into()),
            lethe_sql::Value::Text(old_cronjob["metadata"]["uid"].as_str().expect("uid").into()),
        ],
    );
    let again = w.sync();
    assert_eq!(again["failed"], json!([]), "{again}");
    let all = w.cronjobs();
    assert_eq!(all.len(), 1);
    assert_eq!(
        all[0]["metadata"]["labels"]["lethe.dev/data-job-uid"],
        new.as_str()
    );
    assert_eq!(w.count("actual_data_job_deployment", &old), 0);
    assert_eq!(w.count("actual_data_job_deployment", &new), 1);
}

fn foreign_cronjob(name: &str, labels: Json) -> Json {
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": { "name": name, "namespace": "data-jobs", "labels": labels },
        "spec": {
            "schedule": "0 * * * *",
            "jobTemplate": { "spec": { "template": { "spec": {
                "restartPolicy": "OnFailure",
                "containers": [{ "name": "c", "image": "busybox" }],
            } } } },
        },
    })
}

fn orphaned_labelled_cronjobs_are_swept_and_unlabelled_ones_left_alone(backend: &Backend) {
    let w = World::start(backend);
    let uid = w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    w.sync();
    w.create_cronjob(foreign_cronjob(
        "orphan-no-uid",
        json!({"app.kubernetes.io/managed-by": "lethe"}),
    ));
    w.create_cronjob(foreign_cronjob(
        "orphan-unknown-job",
        json!({"app.kubernetes.io/managed-by": "lethe", "lethe.dev/data-job-uid": "0b8e6a54-5a4f-4c1e-9d3f-1b2c3d4e5f60"}),
    ));
    w.create_cronjob(foreign_cronjob("not-ours", json!({"app": "other"})));

    let pass = w.sync();
    assert_eq!(pass["deleted"], 2, "{pass}");
    assert_eq!(pass["failed"], json!([]), "{pass}");
    let mut names: Vec<String> = w
        .cronjobs()
        .iter()
        .map(|c| {
            c["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"not-ours".to_string()));
    assert_eq!(labelled(&w.cronjobs(), &uid).len(), 1);
}

fn hand_edited_cronjob_is_restored(backend: &Backend) {
    let w = World::start(backend);
    let uid = w.deploy(
        "alpha",
        "ingest",
        json!({"job_version": "v1", "schedule": {"schedule_cron": "*/10 * * * *"}, "resources": {"cpu_request": "250m", "memory_limit": "512Mi"}}),
    );
    w.sync();
    let name = labelled(&w.cronjobs(), &uid)[0]["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    // Someone edits the schedule and suspends it by hand (the hash annotation is untouched).
    w.patch_cronjob(
        &name,
        json!({"spec": {"schedule": "0 0 * * *", "suspend": true}}),
    );

    let pass = w.sync();
    assert_eq!(pass["updated"], 1, "{pass}");
    let restored = labelled(&w.cronjobs(), &uid);
    assert_eq!(restored[0]["spec"]["schedule"], "*/10 * * * *");
    assert_eq!(restored[0]["spec"]["suspend"], false);
    assert_eq!(
        restored[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resources"],
        json!({"requests": {"cpu": "250m"}, "limits": {"memory": "512Mi"}})
    );
    let quiet = w.sync();
    assert_eq!(quiet["updated"], 0, "restored state is stable: {quiet}");

    // A controller writing status changes the resourceVersion, not the spec or generation: no
    // re-read, no write.
    kubectl(
        &w.kubeconfig,
        &[
            "patch",
            "cronjob",
            "-n",
            "data-jobs",
            &name,
            "--subresource=status",
            "--type",
            "merge",
            "-p",
            r#"{"status":{"lastScheduleTime":"2026-01-01T00:00:00Z"}}"#,
        ],
        None,
    )
    .expect("status patch");
    let after_status = w.sync();
    assert_eq!(after_status["updated"], 0, "{after_status}");
    let stored = w.api("GET", "/data-jobs/sync/reports?limit=1", None).json();
    assert_eq!(stored[0]["recorded"], 0, "{stored}");
}

fn transient_failures_back_off_per_item_and_a_5xx_storm_is_retried(backend: &Backend) {
    let w = World::start(backend);
    // Learn the CronJob name of `ingest`, then free it again.
    let uid = w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    w.sync();
    let name = labelled(&w.cronjobs(), &uid)[0]["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_string();
    w.api(
        "DELETE",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments/production",
        None,
    );
    w.sync();
    assert!(w.cronjobs().is_empty());

    // A foreign CronJob on the name refuses the deployment when it is submitted (SECURITY.md P5).
    w.create_cronjob(foreign_cronjob(&name, json!({"app": "squatter"})));
    let refused = w.api(
        "POST",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments",
        Some(json!({"job_version": "v2"})),
    );
    assert_eq!(refused.status, 422, "{}", refused.body);
    assert!(
        refused.body.contains(&format!("CronJob data-jobs/{name}")),
        "{}",
        refused.body
    );
    // One that appears after the deployment was accepted: the create conflicts (transient), the
    // item backs off, the other item is deployed in the same pass.
    w.delete_cronjob(&name);
    let redeployed = w.api(
        "POST",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments",
        Some(json!({"job_version": "v2"})),
    );
    assert_eq!(redeployed.status, 202);
    w.create_cronjob(foreign_cronjob(&name, json!({"app": "squatter"})));
    let other = w.deploy("alpha", "other", json!({"job_version": "v1"}));
    let pass = w.sync();
    assert_eq!(pass["created"], 1, "{pass}");
    let failed = pass["failed"].as_array().expect("failed");
    assert_eq!(failed.len(), 1, "{pass}");
    assert_eq!(failed[0]["item"], "alpha/ingest");
    assert_eq!(failed[0]["parked"], false);
    assert_eq!(labelled(&w.cronjobs(), &other).len(), 1);
    let state = w.sql(
        "SELECT attempts FROM reconcile_backoff WHERE reconciler = 'data-jobs' AND object_key = $1",
        &[lethe_sql::Value::Text(uid.clone())],
    );
    assert_eq!(state, vec![vec![lethe_sql::Value::Integer(1)]]);
    // Immediately after, the item is backing off: not retried.
    let reports = w.api("GET", "/data-jobs/sync/reports?limit=1", None);
    assert_eq!(reports.status, 200);
    let quick = w.sync();
    let stored = w.api("GET", "/data-jobs/sync/reports?limit=1", None).json();
    if quick["failed"] == json!([]) {
        assert_eq!(stored[0]["backing_off"], 1, "{stored}");
    }

    // A 5xx storm: no pass can even read the Lease; nothing is written.
    w.delete_cronjob(&name);
    w.set_faults(json!({"error_rate": 1.0, "error_status": 503}));
    // A `sync --once` would wait out the default patience (two minutes) for the manifests first.
    let stormy = w.try_sync_within(Some(3));
    assert!(
        stormy.is_err(),
        "a pass ran through a total outage: {stormy:?}"
    );
    w.set_faults(json!({"error_rate": 0.0}));
    // After the storm and the backoff, the next passes converge.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        std::thread::sleep(Duration::from_millis(400));
        let pass = w.sync();
        if labelled(&w.cronjobs(), &uid).len() == 1 {
            assert_eq!(pass["failed"], json!([]), "{pass}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "did not converge after the storm: {pass}"
        );
    }
    assert_eq!(
        w.count("reconcile_backoff", &uid),
        0,
        "success clears the backoff"
    );
    assert_eq!(w.cronjobs().len(), 2);
}

fn invalid_spec_is_parked_until_the_desired_spec_changes(backend: &Backend) {
    let w = World::start(backend);
    let uid = w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    // A desired row the cluster rejects (422), as an older API version might have written it.
    w.sql(
        "UPDATE desired_data_job_deployment SET schedule = 'every minute', spec_hash = 'bad-spec' WHERE job_uid = $1",
        &[lethe_sql::Value::Text(uid.clone())],
    );
    let first = w.sync();
    let failed = first["failed"].as_array().expect("failed");
    assert_eq!(failed.len(), 1, "{first}");
    assert_eq!(failed[0]["parked"], true, "{first}");
    assert!(w.cronjobs().is_empty());

    // Parked: later passes do not retry it, however long we wait.
    std::thread::sleep(Duration::from_millis(700));
    let second = w.sync();
    assert_eq!(second["failed"], json!([]), "{second}");
    assert_eq!(second["created"], 0);
    let stored = w.api("GET", "/data-jobs/sync/reports?limit=1", None).json();
    assert_eq!(stored[0]["parked"], 1, "{stored}");
    let view = w
        .api(
            "GET",
            "/data-jobs/for-team/alpha/jobs/ingest/deployments/production",
            None,
        )
        .json();
    assert_eq!(view["sync"]["error"]["parked"], true, "{view}");

    // A spec change un-parks it.
    let fixed = w.api(
        "POST",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments",
        Some(json!({"schedule": {"schedule_cron": "*/15 * * * *"}})),
    );
    assert_eq!(fixed.status, 202, "{}", fixed.body);
    let third = w.sync();
    assert_eq!(third["created"], 1, "{third}");
    assert_eq!(
        labelled(&w.cronjobs(), &uid)[0]["spec"]["schedule"],
        "*/15 * * * *"
    );
}

fn deleting_a_data_job_row_leaves_its_actual_row(backend: &Backend) {
    let w = World::start(backend);
    let uid = w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    w.sync();
    // Straight in SQL, bypassing the API: no foreign key from actual to data_job, no cascade.
    w.sql(
        "DELETE FROM desired_data_job_deployment WHERE job_uid = $1",
        &[lethe_sql::Value::Text(uid.clone())],
    );
    w.sql(
        "DELETE FROM data_job WHERE uid = $1",
        &[lethe_sql::Value::Text(uid.clone())],
    );
    assert_eq!(w.count("data_job", &uid), 0);
    assert_eq!(
        w.count("actual_data_job_deployment", &uid),
        1,
        "the tombstone stays"
    );
    let pass = w.sync();
    assert_eq!(pass["deleted"], 1, "{pass}");
    assert_eq!(w.count("actual_data_job_deployment", &uid), 0);
    assert!(w.cronjobs().is_empty());
}

fn redeploying_after_a_deployment_delete_supersedes_the_deletion(backend: &Backend) {
    let w = World::start(backend);
    let uid = w.deploy("alpha", "ingest", json!({"job_version": "v1"}));
    w.sync();
    let before = labelled(&w.cronjobs(), &uid);
    let deleted = w.api(
        "DELETE",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments/production",
        None,
    );
    let location = location_path(&deleted);
    assert_eq!(w.job_state(&location)["state"], "PROCESSING");
    let again = w.api(
        "POST",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments",
        Some(json!({"job_version": "v2"})),
    );
    assert_eq!(again.status, 202, "{}", again.body);
    let job = w.job_state(&location);
    assert_eq!(job["state"], "COMPLETE", "{job}");
    assert_eq!(job["warnings"].as_array().map(Vec::len), Some(1), "{job}");
    let pass = w.sync();
    assert_eq!(
        (pass["deleted"].clone(), pass["updated"].clone()),
        (json!(0), json!(1)),
        "{pass}"
    );
    let after = labelled(&w.cronjobs(), &uid);
    assert_eq!(after.len(), 1);
    assert_eq!(
        after[0]["metadata"]["uid"], before[0]["metadata"]["uid"],
        "updated in place"
    );
}

fn shipped_app_runs_data_jobs_on_its_cron_and_answers_their_jobs_under_v3_jobs(backend: &Backend) {
    let env: Vec<(&str, &str)> = match backend {
        Backend::Sqlite => vec![],
        Backend::Postgres(url) => vec![("LETHE_VAR_DATABASE_URL", url.as_str())],
    };
    let lethe = Lethe::up_app(&[], &env);
    if matches!(backend, Backend::Postgres(_)) {
        assert!(
            lethe.wait_for_log("(database and role", Duration::from_secs(5)),
            "{}",
            lethe.log()
        );
    }
    let auth = format!("Bearer {}", lethe.admin_token());
    let call = |method: &str, path: &str, body: Option<&str>| {
        let url = if path.starts_with("http") {
            path.to_string()
        } else {
            format!("{}{path}", lethe.url)
        };
        request(method, &url, body, &[("authorization", auth.as_str())])
    };
    let created = call(
        "POST",
        "/data-jobs/for-team/alpha/jobs",
        Some(r#"{"job_name": "ingest", "config": {"schedule": {"schedule_cron": "*/5 * * * *"}}}"#),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let uid = created.json()["uid"].as_str().expect("uid").to_string();
    let deployed = call(
        "POST",
        "/data-jobs/for-team/alpha/jobs/ingest/deployments",
        Some(r#"{"job_version": "v1"}"#),
    );
    assert_eq!(deployed.status, 202, "{}", deployed.body);

    // The cron trigger (every second) deploys it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while labelled(&cronjobs_of(&lethe.kubeconfig()), &uid).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the cron pass did not deploy the job"
        );
        std::thread::sleep(Duration::from_millis(250));
    }

    let deleted = call("DELETE", "/data-jobs/for-team/alpha/jobs/ingest", None);
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    let location = deleted.header("location").expect("Location").to_string();
    assert!(
        location.starts_with("http://")
            && location.ends_with(&format!("/v3/jobs/data_job.delete~{uid}")),
        "{location}"
    );
    // Served by the CF job-status component, which delegates data-jobs GUIDs.
    let first = call("GET", &location, None);
    assert_eq!(first.status, 200, "{}", first.body);
    assert!(
        matches!(
            first.json()["state"].as_str(),
            Some("PROCESSING" | "COMPLETE")
        ),
        "{}",
        first.body
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let job = call("GET", &location, None);
        if job.json()["state"] == "COMPLETE" {
            break;
        }
        assert!(Instant::now() < deadline, "never COMPLETE: {}", job.body);
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(labelled(&cronjobs_of(&lethe.kubeconfig()), &uid).is_empty());
    let malformed = call("GET", "/v3/jobs/data_job.delete~nonsense", None);
    assert_eq!((malformed.status, malformed.cf_code()), (404, 10010));
}

fn cronjobs_of(kubeconfig: &Path) -> Vec<Json> {
    kubectl(
        kubeconfig,
        &["get", "cronjobs", "-n", "data-jobs", "-o", "json"],
        None,
    )
    .map(|v| v["items"].as_array().cloned().unwrap_or_default())
    .unwrap_or_default()
}

/// The holder of the data-jobs sync's Lease, in the standalone cluster.
fn lease_holder(kubeconfig: &Path) -> Option<String> {
    support::standalone::lease_holder(kubeconfig, "data-jobs", "data-jobs-sync")
}

fn two_hosts_run_one_leader_and_the_other_takes_over_within_the_lease(backend: &Backend) {
    let cluster = StandaloneCluster::start();
    let (_, token) = kubeconfig_server_and_token(&cluster.kubeconfig());
    let shared_db = tempfile::tempdir().expect("tempdir");
    let db_url = match backend {
        Backend::Sqlite => format!("sqlite:{}", shared_db.path().join("shared.db").display()),
        Backend::Postgres(url) => url.clone(),
    };
    let lease_vars = r#", lease_duration_seconds = "6", lease_renew_seconds = "1""#;
    let kubeconfig = cluster.service_account_kubeconfig().display().to_string();
    let args = [
        "--database-url",
        db_url.as_str(),
        "--kubeconfig",
        kubeconfig.as_str(),
    ];
    let mut a = Lethe::up(&manifest(Some("* * * * * *"), lease_vars), &args);
    let mut b = Lethe::up(&manifest(Some("* * * * * *"), lease_vars), &args);

    // A job, so that passes have work to show.
    let auth = format!("Bearer {token}");
    let created = request(
        "POST",
        &format!("{}/data-jobs/for-team/alpha/jobs", a.url),
        Some(r#"{"job_name": "ingest", "config": {"schedule": {"schedule_cron": "*/5 * * * *"}}}"#),
        &[("authorization", &auth)],
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let deployed = request(
        "POST",
        &format!("{}/data-jobs/for-team/alpha/jobs/ingest/deployments", b.url),
        Some(r#"{"job_version": "v1"}"#),
        &[("authorization", &auth)],
    );
    assert_eq!(deployed.status, 202, "{}", deployed.body);

    // Wait for a leader, then watch: the holder does not change while it lives.
    let deadline = Instant::now() + Duration::from_secs(20);
    let leader = loop {
        if let Some(h) = lease_holder(&cluster.kubeconfig()).filter(|h| !h.is_empty()) {
            break h;
        }
        assert!(Instant::now() < deadline, "no host took the lease");
        std::thread::sleep(Duration::from_millis(200));
    };
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            lease_holder(&cluster.kubeconfig()).as_deref(),
            Some(leader.as_str())
        );
    }
    let reports = |url: &str| {
        request(
            "GET",
            &format!("{url}/data-jobs/sync/reports?limit=100"),
            None,
            &[("authorization", &auth)],
        )
        .json()
    };
    let before = reports(&a.url);
    let holders: std::collections::BTreeSet<String> = before
        .as_array()
        .expect("reports")
        .iter()
        .map(|r| r["holder"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(holders.len(), 1, "only the leader ran passes: {holders:?}");
    assert!(holders.contains(&leader));

    // Kill the leader (whichever it is): it cannot release the Lease, and the other takes over
    // once it lapses, within the lease time.
    let a_led = lethe_instance_of(&a, &leader);
    let (leader_host, survivor) = if a_led {
        (&mut a, b.url.clone())
    } else {
        (&mut b, a.url.clone())
    };
    leader_host.crash();
    let stopped = Instant::now();
    let new_leader = loop {
        if let Some(h) = lease_holder(&cluster.kubeconfig()).filter(|h| *h != leader) {
            break h;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(6 + 3),
            "no takeover within the lease time (6 s) plus one tick"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let takeover = stopped.elapsed();
    assert!(!new_leader.is_empty());
    std::thread::sleep(Duration::from_millis(1500));
    let after = reports(&survivor);
    assert!(
        after
            .as_array()
            .expect("reports")
            .iter()
            .any(|r| r["holder"] == new_leader.as_str()),
        "the new leader ran passes"
    );
    // Passes of different holders never overlapped in time.
    let mut spans: Vec<(String, i64, i64)> = after
        .as_array()
        .expect("reports")
        .iter()
        .filter_map(|r| {
            let start = parse_rfc3339_seconds(r["started_at"].as_str()?)? * 1000;
            Some((
                r["holder"].as_str()?.to_string(),
                start,
                start + r["duration_ms"].as_i64()?,
            ))
        })
        .collect();
    spans.sort_by_key(|s| s.1);
    for pair in spans.windows(2) {
        if pair[0].0 != pair[1].0 {
            // Seconds precision on start times: allow the rounding.
            assert!(
                pair[1].1 + 1000 >= pair[0].2,
                "overlapping passes: {pair:?}"
            );
        }
    }
    eprintln!("takeover after {takeover:?}");

    // A clean stop of the new leader releases the Lease (client-go's `ReleaseOnCancel`): no
    // holder once it has exited, so the killed host, started again, leads without waiting out
    // the lease.
    let (mut new_leader_host, mut restarted) = if a_led { (b, a) } else { (a, b) };
    assert!(lethe_instance_of(&new_leader_host, &new_leader));
    let status = new_leader_host.stop().expect("exits");
    assert!(status.success(), "{}", new_leader_host.log());
    assert!(
        new_leader_host
            .log()
            .contains("released Lease data-jobs/data-jobs-sync"),
        "{}",
        new_leader_host.log()
    );
    assert_eq!(
        lease_holder(&cluster.kubeconfig()),
        None,
        "the stopped leader left the Lease with no holder"
    );
    restarted.restart();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(h) = lease_holder(&cluster.kubeconfig()) {
            assert!(lethe_instance_of(&restarted, &h), "{h}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the restarted host never took the Lease"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `instance` (`<hostname>-<pid>-<uuid>`) is the instance id of `lethe`'s process.
fn lethe_instance_of(lethe: &Lethe, instance: &str) -> bool {
    support::standalone::is_instance_of(lethe.pid(), instance)
}

fn parse_rfc3339_seconds(s: &str) -> Option<i64> {
    // `YYYY-MM-DDTHH:MM:SSZ`, UTC.
    let (date, time) = s.trim_end_matches('Z').split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, sec) = (t.next()??, t.next()??, t.next()??);
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec)
}
