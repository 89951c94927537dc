use crate::model::*;
use crate::status::*;

#[test]
fn job_guids_parse_only_when_anchored_and_well_formed() {
    let uid = "0b8e6a54-5a4f-4c1e-9d3f-1b2c3d4e5f60";
    assert_eq!(
        parse_guid(&format!("deployment.delete~{uid}")),
        Some((Operation::DeploymentDelete, uid))
    );
    assert_eq!(
        parse_guid(&format!("data_job.delete~{uid}")),
        Some((Operation::DataJobDelete, uid))
    );
    assert_eq!(parse_guid(&format!("org.delete~{uid}")), None);
    assert_eq!(parse_guid(&format!("xdata_job.delete~{uid}")), None);
    assert_eq!(parse_guid(&format!("data_job.delete~{uid}x")), None);
    assert_eq!(
        parse_guid(&format!("data_job.delete~{}", uid.to_uppercase())),
        None
    );
    assert_eq!(parse_guid("data_job.delete~"), None);
    assert!(is_data_job_guid("data_job.delete~nonsense"));
    assert!(!is_data_job_guid("org.delete~x"));
}

#[test]
fn schedules_follow_kubernetes_five_field_syntax() {
    for ok in [
        "*/5 * * * *",
        "0 3 * * MON-FRI",
        "15,45 0-23/2 1 JAN-DEC 0",
        "@hourly",
        "0  3 * *\t*",
    ] {
        assert!(valid_schedule(ok), "{ok}");
    }
    for bad in [
        "",
        "* * * *",
        "61 * * * *",
        "* * * * * *",
        "every minute",
        "*/0 * * * *",
        "5-1 * * * *",
        "0 0 * * 7",
    ] {
        assert!(!valid_schedule(bad), "{bad}");
    }
}

#[test]
fn images_and_quantities_are_checked() {
    for ok in [
        "busybox",
        "registry:5000/team/job:1.2",
        "ghcr.io/a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ] {
        assert!(valid_image(ok), "{ok}");
    }
    for bad in ["", "Busybox", "a b", "repo:", "/x", "x//y", "x@md5:00"] {
        assert!(!valid_image(bad), "{bad}");
    }
    assert!(valid_quantity("500m") && valid_quantity("1.5") && valid_quantity("128Mi"));
    assert!(!valid_quantity("m") && !valid_quantity("1.2.3") && !valid_quantity("5X"));
}

#[test]
fn cronjob_names_fit_and_differ_by_team() {
    let long = "a".repeat(45);
    assert!(cronjob_name("team", &long).len() <= 52);
    assert_ne!(cronjob_name("a-b", "c"), cronjob_name("a", "b-c"));
    assert_eq!(cronjob_name("t", "job"), cronjob_name("t", "job"));
}

fn spec() -> Spec {
    Spec {
        image: "busybox:1".into(),
        schedule: "*/5 * * * *".into(),
        enabled: true,
        resources: Resources {
            cpu_request: Some("500m".into()),
            ..Resources::default()
        },
    }
}

#[test]
fn the_rendered_cronjob_fingerprints_to_the_spec_hash() {
    let s = spec();
    let hash = s.hash();
    let json = render_cronjob(&CronJobParams {
        namespace: "ns",
        team: "t",
        job_name: "job",
        job_uid: "u",
        spec: &s,
        hash: &hash,
        resource_version: None,
    });
    assert_eq!(live_fingerprint(&json).as_deref(), Some(hash.as_str()));
    // A hand edit of the schedule changes the fingerprint.
    let mut edited = json.clone();
    edited["spec"]["schedule"] = serde_json::json!("0 0 * * *");
    assert_ne!(live_fingerprint(&edited).as_deref(), Some(hash.as_str()));
    // Server defaulting (empty resources maps, extra fields) does not.
    let mut v = json;
    v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] =
        serde_json::json!({});
    v["spec"]["successfulJobsHistoryLimit"] = serde_json::json!(3);
    assert_eq!(live_fingerprint(&v).as_deref(), Some(hash.as_str()));
}

#[test]
fn disabling_or_changing_resources_changes_the_hash() {
    let a = spec();
    let mut b = spec();
    b.enabled = false;
    let mut c = spec();
    c.resources.memory_limit = Some("1Gi".into());
    assert_ne!(a.hash(), b.hash());
    assert_ne!(a.hash(), c.hash());
}

#[test]
fn uuids_are_version_4() {
    let u = lethe_guest::env::uuid_from_bytes([0xff; 16]);
    assert!(valid_uuid(&u), "{u}");
    assert_eq!(&u[14..15], "4");
}

pub(crate) mod flows {
    use serde_json::{Value as Json, json};

    use crate::sync::{Tick, tick, tick_with};
    use crate::{Identity, Kube as _, ObjectRef, Request};
    use lethe_guest::fake::{FakeCluster, FakeHost, FakeSql};
    use lethe_guest::kube::DeleteOptions;
    use lethe_guest::kube::KubeError;

    /// A database with the data-jobs migrations, and a cluster where the token `t` may do
    /// anything and a CronJob needs a valid schedule, as the real server's validation says.
    pub(crate) fn world() -> (FakeSql, FakeCluster) {
        let kube = FakeCluster::new();
        kube.grant("t", "*", "*", "*");
        kube.admit_with(Box::new(|o| {
            let valid = o["spec"]["schedule"]
                .as_str()
                .is_some_and(crate::model::valid_schedule);
            if o["kind"] == "CronJob" && !valid {
                return Err(KubeError::Invalid("spec.schedule: Invalid value".into()));
            }
            Ok(())
        }));
        let migrations = concat!(env!("CARGO_MANIFEST_DIR"), "/../data-jobs/migrations");
        (FakeSql::migrated(migrations), kube)
    }

    /// A request as the caller `t`, who may do anything: its status and JSON body.
    pub(crate) fn call(
        host: &FakeHost<'_>,
        method: &str,
        path: &str,
        body: Option<Json>,
    ) -> (u16, Json) {
        call_as(host, "t", method, path, body)
    }

    /// A request with bearer `token`: its status and JSON body.
    pub(crate) fn call_as(
        host: &FakeHost<'_>,
        token: &str,
        method: &str,
        path: &str,
        body: Option<Json>,
    ) -> (u16, Json) {
        let req = Request {
            method: method.into(),
            path: path.into(),
            headers: vec![(
                "authorization".into(),
                format!("Bearer {token}").into_bytes(),
            )]
            .into(),
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
            ..Default::default()
        };
        let r = crate::api::handle(host, &req);
        (r.status, r.json_body().unwrap_or(Json::Null))
    }

    pub(crate) fn deploy(host: &FakeHost<'_>, job: &str) -> String {
        let (status, body) = call(
            host,
            "POST",
            "/data-jobs/for-team/t/jobs",
            Some(json!({"job_name": job, "config": {"schedule": {"schedule_cron": "0 * * * *"}}})),
        );
        assert_eq!(status, 201, "{body}");
        let (status, body) = call(
            host,
            "POST",
            &format!("/data-jobs/for-team/t/jobs/{job}/deployments"),
            Some(json!({"job_version": "v1"})),
        );
        assert_eq!(status, 202, "{body}");
        assert!(body["desired"]["spec_hash"].is_string(), "{body}");
        let (_, job) = call(
            host,
            "GET",
            &format!("/data-jobs/for-team/t/jobs/{job}"),
            None,
        );
        job["uid"].as_str().expect("uid").to_string()
    }

    /// Someone else's CronJob named `name` in the data-jobs namespace, on schedule `1 1 * * *`.
    pub(crate) fn foreign_cronjob(name: &str, labels: Json, annotations: Json) -> Json {
        json!({
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": name, "namespace": "data-jobs", "labels": labels,
                         "annotations": annotations},
            "spec": {"schedule": "1 1 * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "theirs", "image": "theirs"}]}}}}},
        })
    }

    pub(crate) fn ran(t: Tick) -> crate::sync::Report {
        match t {
            Tick::Ran(r) => r,
            Tick::NotLeader { holder } => panic!("not the leader ({holder})"),
        }
    }

    #[test]
    fn a_malformed_reports_query_is_a_bad_query_parameter_not_the_default() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        for (query, status) in [
            ("limit=%ff", 400),
            ("limit=%zz", 400),
            ("%ff=1&limit=5", 400),
            ("limit=0", 400),
            ("limit=%35", 200),
        ] {
            let req = Request {
                method: "GET".into(),
                path: "/data-jobs/sync/reports".into(),
                query: query.into(),
                headers: vec![("authorization".into(), b"Bearer t".to_vec())].into(),
                ..Default::default()
            };
            let r = crate::api::handle(&host, &req);
            let body = r.json_body().unwrap_or(Json::Null);
            assert_eq!(r.status, status, "{query}: {body}");
            if status == 400 {
                assert_eq!(body["errors"][0]["code"], 10005, "{query}: {body}");
            }
        }
    }

    #[test]
    fn a_description_with_nul_is_422_on_every_database() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let (status, body) = call(
            &host,
            "POST",
            "/data-jobs/for-team/t/jobs",
            Some(json!({"job_name": "nul", "description": "a\u{0}b"})),
        );
        assert_eq!(
            (status, &body["errors"][0]["code"]),
            (422, &json!(10008)),
            "{body}"
        );
        let (status, _) = call(&host, "GET", "/data-jobs/for-team/t/jobs/nul", None);
        assert_eq!(status, 404, "nothing was stored");
    }

    #[test]
    fn a_pass_reports_its_progress_to_the_end() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        for job in ["one", "two", "three"] {
            deploy(&host, job);
        }
        assert_eq!(ran(tick(&host).expect("pass")).created, 3);
        assert_eq!(
            host.progress.get(),
            (3, 3),
            "the last report says every item is done"
        );
    }

    #[test]
    fn a_deleted_job_is_removed_by_the_next_pass_and_its_job_completes() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let uid = deploy(&host, "ingest");
        assert_eq!(ran(tick(&host).expect("pass")).created, 1);
        let (status, _) = call(&host, "DELETE", "/data-jobs/for-team/t/jobs/ingest", None);
        assert_eq!(status, 202);
        let guid = format!("/v3/jobs/data_job.delete~{uid}");
        assert_eq!(call(&host, "GET", &guid, None).1["state"], "PROCESSING");
        host.advance(5_000);
        let report = ran(tick(&host).expect("pass"));
        assert_eq!((report.deleted, report.forgotten), (1, 1));
        assert!(kube.all("CronJob").is_empty());
        let complete = call(&host, "GET", &guid, None).1;
        assert_eq!(complete["state"], "COMPLETE");
        assert!(
            complete["updated_at"].as_str() > complete["created_at"].as_str(),
            "a COMPLETE job was updated when the pass completed it: {complete}"
        );
    }

    #[test]
    fn a_job_poll_tells_a_rejected_or_refused_caller_so_and_reads_at_most_one_cronjob() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let uid = deploy(&host, "ingest");
        tick(&host).expect("pass");
        call(&host, "DELETE", "/data-jobs/for-team/t/jobs/ingest", None);
        tick(&host).expect("pass");
        let guid = format!("data_job.delete~{uid}");
        let settings = crate::Settings::load(&host);
        let poll = |token: &str| {
            crate::status::job_status(&host, &Identity::Caller(token.into()), &settings, &guid)
        };
        assert_eq!(
            poll("t").map(|j| j.state),
            Ok(lethe_guest::cf::JobState::Complete)
        );
        assert_eq!(
            poll("bad").map_err(|e| e.status),
            Err(401),
            "a token the cluster rejects"
        );
        assert_eq!(
            poll("nobody").map_err(|e| e.status),
            Err(403),
            "may not list CronJobs"
        );
        // CronJobs that still carry the job's uid keep it PROCESSING; one is enough to know.
        for name in ["left-1", "left-2", "left-3"] {
            kube.put(foreign_cronjob(
                name,
                json!({ crate::model::JOB_UID_LABEL: uid }),
                json!({}),
            ));
        }
        let before = kube.objects_read.get();
        assert_eq!(
            poll("t").map(|j| j.state),
            Ok(lethe_guest::cf::JobState::Processing)
        );
        assert!(
            kube.objects_read.get() - before <= 1,
            "a poll lists with limit=1"
        );
    }

    #[test]
    fn a_pass_makes_its_missing_namespace_and_reports_when_it_started() {
        let (sql, kube) = world();
        kube.namespaces_must_exist.set(true);
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        let report = ran(tick(&host).expect("pass"));
        assert!(
            kube.exists("Namespace", "", "data-jobs"),
            "made for the Lease and CronJobs"
        );
        assert_eq!(report.created, 1);
        assert_eq!(report.started_at, crate::time::rfc3339(host.now.get()));
        assert_eq!(report.duration_ms, 0, "on a clock that did not move");
    }

    #[test]
    fn a_pass_that_changed_something_says_so_at_info_and_an_idle_one_at_debug() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let summary = |host: &FakeHost<'_>| {
            host.logged
                .borrow()
                .iter()
                .rev()
                .find(|(_, line)| line.starts_with("data-jobs sync "))
                .map(|(level, _)| *level)
        };
        tick(&host).expect("an idle pass");
        assert_eq!(summary(&host), Some(crate::Level::Debug));
        deploy(&host, "ingest");
        assert_eq!(ran(tick(&host).expect("pass")).created, 1);
        assert_eq!(
            summary(&host),
            Some(crate::Level::Info),
            "one create is a change"
        );
    }

    #[test]
    fn failures_past_the_logged_twenty_are_counted_in_one_line() {
        for jobs in [20, 21] {
            let (sql, kube) = world();
            let host = FakeHost::new(&sql, &kube, "a");
            for i in 0..jobs {
                deploy(&host, &format!("job{i}"));
            }
            kube.fail("create", "CronJob");
            let report = ran(tick(&host).expect("pass"));
            assert_eq!(report.failed.len(), jobs);
            let logged = host.logged.borrow();
            let each = logged
                .iter()
                .filter(|(_, line)| line.starts_with("data-jobs sync: t/"))
                .count();
            assert_eq!(each, 20);
            let more = logged
                .iter()
                .filter(|(_, line)| line.ends_with("more failures in the stored report"))
                .map(|(_, line)| line.as_str())
                .collect::<Vec<_>>();
            let expected: &[&str] = if jobs == 21 {
                &["data-jobs sync: 1 more failures in the stored report"]
            } else {
                &[]
            };
            assert_eq!(more, expected, "{jobs} failures");
        }
    }

    #[test]
    fn the_reports_kept_are_those_of_full_passes_and_of_passes_that_examined_something() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let stored = || {
            use crate::Sql as _;
            sql.query("SELECT COUNT(*) FROM data_job_sync_report", &[])
                .expect("count")[0][0]
                .int()
                .unwrap_or(-1)
        };
        assert!(ran(tick(&host).expect("pass")).full);
        assert_eq!(stored(), 1, "a full pass, even with nothing to examine");
        assert!(!ran(tick(&host).expect("pass")).full);
        assert_eq!(stored(), 1, "an idle pass on the changes is not kept");
        deploy(&host, "ingest");
        let report = ran(tick(&host).expect("pass"));
        assert!(!report.full && report.examined == 1 && report.failed.is_empty());
        assert_eq!(stored(), 2, "a pass on the changes that examined a job");
    }

    #[test]
    fn an_unfinished_deletion_turns_failed_after_the_timeout() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let uid = deploy(&host, "ingest");
        tick(&host).expect("pass");
        call(
            &host,
            "DELETE",
            "/data-jobs/for-team/t/jobs/ingest/deployments/production",
            None,
        );
        let guid = format!("/v3/jobs/deployment.delete~{uid}");
        host.advance(120_000);
        assert_eq!(
            call(&host, "GET", &guid, None).1["state"],
            "PROCESSING",
            "FAILED only once the deletion is older than the timeout"
        );
        host.advance(1_000);
        let (status, job) = call(&host, "GET", &guid, None);
        assert_eq!(status, 200);
        assert_eq!(job["state"], "FAILED");
        assert_eq!(job["errors"][0]["code"], 10008);
        tick(&host).expect("pass");
        assert_eq!(call(&host, "GET", &guid, None).1["state"], "COMPLETE");
    }

    #[test]
    fn a_second_host_runs_only_once_the_lease_expired() {
        let (sql, kube) = world();
        let a = FakeHost::new(&sql, &kube, "a");
        let b = FakeHost::new(&sql, &kube, "b");
        deploy(&a, "ingest");
        ran(tick(&a).expect("a leads"));
        assert_eq!(
            tick(&b).expect("b ticks"),
            Tick::NotLeader { holder: "a".into() }
        );
        b.advance(14_000);
        assert!(matches!(tick(&b).expect("b ticks"), Tick::NotLeader { .. }));
        b.advance(2_000);
        let report = ran(tick(&b).expect("b takes over"));
        assert_eq!(report.holder, "b");
        assert!(matches!(tick(&a).expect("a ticks"), Tick::NotLeader { .. }));
    }

    #[test]
    fn failing_writes_back_off_then_recover() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        tick(&host).expect("lease first");
        let name = kube.all("CronJob")[0].target.name.clone();
        kube.delete(
            &Identity::Privileged,
            &ObjectRef::new("batch/v1", "CronJob", Some("data-jobs"), &name),
            &DeleteOptions {
                precondition_uid: None,
                ..Default::default()
            },
        )
        .expect("delete by hand");
        for verb in ["create", "update", "delete"] {
            kube.fail(verb, "CronJob");
        }
        let failing = ran(tick(&host).expect("pass"));
        assert_eq!(failing.failed.len(), 1);
        assert!(!failing.failed[0].parked);
        let waiting = ran(tick(&host).expect("pass"));
        assert_eq!((waiting.backing_off, waiting.failed.len()), (1, 0));
        let full = ran(tick_with(&host, true).expect("a full pass"));
        assert_eq!(
            (full.backing_off, full.failed.len()),
            (1, 0),
            "a full pass visits it and counts it"
        );
        kube.heal();
        host.advance(1_500);
        let recovered = ran(tick(&host).expect("pass"));
        assert_eq!(recovered.created, 1);
        assert_eq!(kube.all("CronJob").len(), 1);
    }

    #[test]
    fn every_page_of_the_list_is_visited_and_a_converged_pass_writes_nothing() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        host.set_config("page_size", "2");
        for i in 0..5 {
            deploy(&host, &format!("job-{i}"));
        }
        assert_eq!(ran(tick(&host).expect("pass")).created, 5);
        let quiet = ran(tick_with(&host, true).expect("full pass"));
        assert!(quiet.full);
        assert_eq!(
            (quiet.examined, quiet.created, quiet.updated, quiet.recorded),
            (5, 0, 0, 0)
        );
        // The Lease read (renewed less than lease_renew_seconds ago, so not written), the
        // bookmark, and three pages of two.
        assert_eq!(quiet.kube_requests, 1 + 1 + 3);
    }

    /// A host whose pass is slow or paused: its clock moves `per_call_ms` on each Kubernetes
    /// call, and once `pause_when` says so of the count of CronJobs it stops for `pause_ms`,
    /// during which `rival` takes the Lease if it has expired. `cronjobs_when_taken`: how many
    /// CronJobs there were when the rival took it.
    struct Stalled<'h, 'a> {
        host: &'h FakeHost<'a>,
        rival: &'h FakeHost<'a>,
        rival_lease: lethe_guest::lease::LeaseConfig,
        per_call_ms: i64,
        pause_when: fn(usize) -> bool,
        pause_ms: i64,
        cronjobs_when_taken: std::cell::Cell<Option<usize>>,
    }

    impl<'h, 'a> Stalled<'h, 'a> {
        fn new(
            host: &'h FakeHost<'a>,
            rival: &'h FakeHost<'a>,
            per_call_ms: i64,
            pause_when: fn(usize) -> bool,
            pause_ms: i64,
        ) -> Self {
            Stalled {
                host,
                rival,
                rival_lease: crate::Settings::load(rival).lease(),
                per_call_ms,
                pause_when,
                pause_ms,
                cronjobs_when_taken: std::cell::Cell::new(None),
            }
        }

        /// Runs a pass paused for 20 s once `pause_when` holds, which must end for the Lease
        /// lost to the rival; how many CronJobs there were when the rival took it.
        fn paused_pass(
            host: &'h FakeHost<'a>,
            rival: &'h FakeHost<'a>,
            pause_when: fn(usize) -> bool,
        ) -> usize {
            let paused = Stalled::new(host, rival, 10, pause_when, 20_000);
            let stopped = tick_with(&paused, false);
            assert!(
                stopped
                    .as_ref()
                    .is_err_and(|e| e.contains("lost the lease")),
                "the pass stops once it finds its Lease taken: {stopped:?}"
            );
            paused
                .cronjobs_when_taken
                .get()
                .expect("the rival took the Lease during the pause")
        }
    }

    impl lethe_guest::kube::KubeVia for Stalled<'_, '_> {
        fn via(&self) -> &dyn lethe_guest::kube::Kube {
            use lethe_guest::env::Env as _;
            self.host.advance(self.per_call_ms);
            let made = self.host.kube.all("CronJob").len();
            if (self.pause_when)(made) && self.cronjobs_when_taken.get().is_none() {
                self.host.advance(self.pause_ms);
                let now = self.host.now_ms();
                let taken = lethe_guest::lease::Lease::acquire(self.rival, &self.rival_lease, now);
                if matches!(taken, Ok(lethe_guest::lease::Leadership::Held(_))) {
                    self.cronjobs_when_taken.set(Some(made));
                }
            }
            self.host
        }
    }

    impl lethe_guest::sql::Sql for Stalled<'_, '_> {
        fn query(
            &self,
            sql: &str,
            params: &[lethe_guest::sql::Value],
        ) -> Result<Vec<Vec<lethe_guest::sql::Value>>, lethe_guest::sql::SqlError> {
            self.host.query(sql, params)
        }
        fn execute(
            &self,
            sql: &str,
            params: &[lethe_guest::sql::Value],
        ) -> Result<u64, lethe_guest::sql::SqlError> {
            self.host.execute(sql, params)
        }
        fn batch(
            &self,
            statements: &[lethe_guest::sql::Statement],
        ) -> Result<Vec<u64>, lethe_guest::sql::SqlError> {
            self.host.batch(statements)
        }
    }

    impl lethe_guest::env::Env for Stalled<'_, '_> {
        fn now_ms(&self) -> i64 {
            self.host.now_ms()
        }
        fn sleep_ms(&self, ms: u64) {
            self.host.sleep_ms(ms);
        }
        fn config(&self, key: &str) -> Option<String> {
            self.host.config(key)
        }
        fn log(&self, level: lethe_guest::env::Level, message: &str) {
            self.host.log(level, message);
        }
        fn random_bytes(&self, n: usize) -> Vec<u8> {
            self.host.random_bytes(n)
        }
        fn new_uuid(&self) -> String {
            self.host.new_uuid()
        }
    }

    const MANY_JOBS: usize = 120;

    /// Hosts `a` and `b` on one clock.
    fn two_hosts<'a>(sql: &'a FakeSql, kube: &'a FakeCluster) -> (FakeHost<'a>, FakeHost<'a>) {
        let a = FakeHost::new(sql, kube, "a");
        let mut b = FakeHost::new(sql, kube, "b");
        b.now = a.now.clone();
        (a, b)
    }

    /// [`two_hosts`], and `MANY_JOBS` deployments that no pass has made yet.
    fn many_jobs<'a>(sql: &'a FakeSql, kube: &'a FakeCluster) -> (FakeHost<'a>, FakeHost<'a>) {
        let (a, b) = two_hosts(sql, kube);
        for i in 0..MANY_JOBS {
            deploy(&a, &format!("job{i}"));
        }
        (a, b)
    }

    #[test]
    fn a_slow_leader_renews_its_lease_inside_a_long_pass() {
        let (sql, kube) = world();
        let (a, b) = many_jobs(&sql, &kube);
        // Each call takes a second, so the pass lasts minutes, far past the Lease's 15 s.
        let slow = Stalled::new(&a, &b, 1_000, |made| made >= MANY_JOBS / 2, 0);
        let report = ran(tick_with(&slow, false).expect("the pass"));
        assert_eq!(report.created as usize, MANY_JOBS);
        assert_eq!(
            slow.cronjobs_when_taken.get(),
            None,
            "the rival never finds the Lease expired mid-pass"
        );
        assert_eq!(
            tick(&b).expect("the rival ticks"),
            Tick::NotLeader { holder: "a".into() }
        );
    }

    #[test]
    fn a_leader_paused_past_its_lease_stops_before_it_acts_beside_the_new_one() {
        let (sql, kube) = world();
        let (a, b) = many_jobs(&sql, &kube);
        let taken_with = Stalled::paused_pass(&a, &b, |made| made >= 10);
        // The call the pause interrupted goes through; nothing after it.
        let made = kube.all("CronJob").len();
        assert!(
            made - taken_with <= 1,
            "{} CronJobs made after the Lease was taken",
            made - taken_with
        );
        let rest = ran(tick(&b).expect("the new leader's pass"));
        assert_eq!(kube.all("CronJob").len(), MANY_JOBS, "{rest:?}");
    }

    #[test]
    fn a_leader_paused_past_its_lease_deletes_no_more_orphans_beside_the_new_one() {
        let (sql, kube) = world();
        let (a, b) = two_hosts(&sql, &kube);
        // CronJobs labelled as lethe's that name no job: a pass deletes them.
        for i in 0..20 {
            kube.put(json!({"apiVersion": "batch/v1", "kind": "CronJob",
                "metadata": {"name": format!("orphan-{i}"), "namespace": "data-jobs",
                    "labels": {crate::model::MANAGED_BY_LABEL: crate::model::MANAGED_BY}},
                "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                    "containers": [{"name": "c", "image": "i"}]}}}}}}));
        }
        let left_when_taken = Stalled::paused_pass(&a, &b, |left| left <= 15);
        let left = kube.all("CronJob").len();
        assert!(
            left_when_taken - left <= 1,
            "{} orphans deleted after the Lease was taken",
            left_when_taken - left
        );
    }

    /// A host with `n` jobs deployed and a first (full) pass behind it.
    fn deployed(sql: &FakeSql, kube: &FakeCluster, jobs: &[&str]) {
        let host = FakeHost::new(sql, kube, "a");
        for job in jobs {
            deploy(&host, job);
        }
        assert!(ran(tick(&host).expect("first pass")).full);
    }

    fn change_pass(host: &FakeHost<'_>) -> crate::sync::Report {
        let report = ran(tick(host).expect("pass"));
        assert!(!report.full, "a pass on the changes: {report:?}");
        report
    }

    #[test]
    fn desired_changes_hand_edits_and_deletions_are_acted_on_between_full_passes() {
        let (sql, kube) = world();
        deployed(&sql, &kube, &["ingest", "other"]);
        let host = FakeHost::new(&sql, &kube, "a");
        change_pass(&host);
        let (status, _) = call(
            &host,
            "POST",
            "/data-jobs/for-team/t/jobs/ingest/deployments",
            Some(json!({"image": "busybox:2"})),
        );
        assert_eq!(status, 202);
        let changed = change_pass(&host);
        assert_eq!((changed.examined, changed.updated), (1, 1), "{changed:?}");
        let name = crate::model::cronjob_name("t", "ingest");
        let container = |kube: &FakeCluster| {
            kube.object("CronJob", "data-jobs", &name)
                .expect("cronjob")
                .json()["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
                .clone()
        };
        assert_eq!(container(&kube)["image"], "busybox:2");
        // Its own write comes back as a change, and is seen as settled.
        assert_eq!(change_pass(&host).examined, 0);

        kube.edit("CronJob", "data-jobs", &name, |v| {
            v["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] =
                json!("evil:1");
        });
        let repaired = change_pass(&host);
        assert_eq!(
            (repaired.examined, repaired.updated),
            (1, 1),
            "{repaired:?}"
        );
        assert_eq!(container(&kube)["image"], "busybox:2");

        let (status, _) = call(&host, "DELETE", "/data-jobs/for-team/t/jobs/ingest", None);
        assert_eq!(status, 202);
        let deleted = change_pass(&host);
        assert_eq!((deleted.deleted, deleted.forgotten), (1, 1), "{deleted:?}");
        assert!(!kube.exists("CronJob", "data-jobs", &name));
        assert_eq!(
            kube.all("CronJob").len(),
            1,
            "the other job's CronJob stays"
        );
    }

    #[test]
    fn orphans_past_the_write_budget_are_deferred_to_the_next_pass() {
        let (sql, kube) = world();
        deployed(&sql, &kube, &[]);
        let host = FakeHost::new(&sql, &kube, "a");
        host.set_config("max_changes_per_pass", "1");
        for name in ["stray-1", "stray-2"] {
            kube.put(foreign_cronjob(
                name,
                json!({"app.kubernetes.io/managed-by": "lethe"}),
                json!({}),
            ));
        }
        let first = ran(tick(&host).expect("pass"));
        assert_eq!((first.deleted, first.deferred), (1, 1), "{first:?}");
        let second = ran(tick(&host).expect("pass"));
        assert!(second.full, "deferred work makes the next pass full");
        assert_eq!(second.deleted, 1);
        assert!(kube.all("CronJob").is_empty());
    }

    #[test]
    fn the_write_budget_counts_replaces_and_never_defers_recording() {
        // Budget 1: of two drifted CronJobs one is replaced and one deferred; the actual rows
        // to write back (no Kubernetes write) are written whatever the order of the items.
        for instance in ["a", "b", "c", "d"] {
            let (sql, kube) = world();
            let host = FakeHost::new(&sql, &kube, instance);
            for job in ["one", "two", "three", "four"] {
                deploy(&host, job);
            }
            assert_eq!(ran(tick(&host).expect("pass")).created, 4);
            host.set_config("max_changes_per_pass", "1");
            for job in ["one", "two"] {
                let name = crate::model::cronjob_name("t", job);
                kube.edit("CronJob", "data-jobs", &name, |v| {
                    v["spec"]["schedule"] = json!("5 5 * * *");
                });
            }
            {
                use crate::Sql as _;
                sql.execute(
                    "DELETE FROM actual_data_job_deployment WHERE job_name IN ('three', 'four')",
                    &[],
                )
                .expect("forget two actual rows");
            }
            let report = ran(tick_with(&host, true).expect("a full pass"));
            assert_eq!(
                (report.updated, report.deferred, report.recorded),
                (1, 1, 2),
                "{instance}: {report:?}"
            );
        }
    }

    #[test]
    fn recording_a_cronjob_again_keeps_when_its_spec_was_applied() {
        use crate::Sql as _;
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        ran(tick(&host).expect("pass"));
        let applied = || {
            sql.query("SELECT applied_at FROM actual_data_job_deployment", &[])
                .expect("actual row")[0][0]
                .int()
        };
        let first = applied();
        assert!(first.is_some());
        host.advance(10_000);
        // An edit that leaves the spec as it was: a new generation, nothing to replace.
        let name = crate::model::cronjob_name("t", "ingest");
        kube.edit("CronJob", "data-jobs", &name, |_| {});
        let report = ran(tick(&host).expect("pass"));
        assert_eq!((report.recorded, report.updated), (1, 0), "{report:?}");
        assert_eq!(
            applied(),
            first,
            "the same spec on the same CronJob: applied when it was"
        );
        // The same spec on another CronJob (deleted and made again by hand, a new uid): that
        // one was applied when it was adopted.
        host.advance(10_000);
        let cronjob = kube.object("CronJob", "data-jobs", &name).expect("cronjob");
        kube.delete(
            &Identity::Privileged,
            &cronjob.target,
            &DeleteOptions::default(),
        )
        .expect("deleted by hand");
        let mut again = cronjob.json().clone();
        again["metadata"]
            .as_object_mut()
            .expect("metadata")
            .retain(|k, _| ["name", "namespace", "labels", "annotations"].contains(&k.as_str()));
        kube.put(again);
        let adopted = kube
            .object("CronJob", "data-jobs", &name)
            .expect("made again");
        assert_ne!(adopted.metadata.uid, cronjob.metadata.uid);
        let report = ran(tick_with(&host, true).expect("a full pass"));
        assert_eq!((report.recorded, report.created), (1, 0), "{report:?}");
        assert_eq!(applied(), Some(host.now.get()), "adopted now");
    }

    #[test]
    fn a_cronjob_of_the_job_under_another_name_goes_before_its_own_is_made() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let uid = deploy(&host, "ingest");
        // A CronJob lethe made for this job under an older naming scheme.
        kube.put(foreign_cronjob(
            "ingest-old-scheme",
            json!({"app.kubernetes.io/managed-by": "lethe", "lethe.dev/data-job-uid": uid}),
            json!({}),
        ));
        let report = ran(tick(&host).expect("pass"));
        assert_eq!((report.deleted, report.created), (1, 1), "{report:?}");
        assert!(!kube.exists("CronJob", "data-jobs", "ingest-old-scheme"));
        assert_eq!(kube.all("CronJob").len(), 1);
        // And beside its own, converged CronJob: recorded, and the other one deleted.
        kube.put(foreign_cronjob(
            "ingest-old-scheme",
            json!({"app.kubernetes.io/managed-by": "lethe", "lethe.dev/data-job-uid": uid}),
            json!({}),
        ));
        let report = ran(tick(&host).expect("pass"));
        assert_eq!((report.deleted, report.created), (1, 0), "{report:?}");
        assert_eq!(kube.all("CronJob").len(), 1);
    }

    #[test]
    fn a_deleted_jobs_cronjob_that_lost_every_label_is_deleted_by_the_uid_recorded() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        ran(tick(&host).expect("pass"));
        let (status, _) = call(&host, "DELETE", "/data-jobs/for-team/t/jobs/ingest", None);
        assert_eq!(status, 202);
        // No LIST finds it now; the actual row still names it, by name and uid.
        let name = crate::model::cronjob_name("t", "ingest");
        kube.edit("CronJob", "data-jobs", &name, |v| {
            v["metadata"]["labels"] = json!({});
        });
        let report = ran(tick(&host).expect("pass"));
        assert_eq!(report.deleted, 1, "{report:?}");
        assert!(kube.all("CronJob").is_empty());
    }

    #[test]
    fn the_failures_of_a_job_that_no_longer_exists_are_forgotten() {
        let (sql, kube) = world();
        deployed(&sql, &kube, &[]);
        let host = FakeHost::new(&sql, &kube, "a");
        let table = lethe_guest::backoff::BackoffTable::new(&sql, "data-jobs");
        let failures = lethe_guest::backoff::Failures::after(
            None,
            0,
            (1000, 300_000),
            0,
            None,
            "long ago".into(),
        );
        table.record("a-job-long-gone", &failures).expect("record");
        ran(tick_with(&host, true).expect("a full pass"));
        assert_eq!(table.of("a-job-long-gone").expect("read"), None);
    }

    #[test]
    fn a_job_deleted_and_made_again_under_its_name_gets_its_cronjob_in_one_pass() {
        // Deletions run first, whatever order the two uids sort in: try hosts whose uids differ.
        for instance in ["a", "b", "c", "d", "e", "f"] {
            let (sql, kube) = world();
            let host = FakeHost::new(&sql, &kube, instance);
            let old = deploy(&host, "ingest");
            ran(tick(&host).expect("pass"));
            let (status, _) = call(&host, "DELETE", "/data-jobs/for-team/t/jobs/ingest", None);
            assert_eq!(status, 202);
            let new = deploy(&host, "ingest");
            assert_ne!(old, new);
            let report = ran(tick(&host).expect("pass"));
            assert!(report.failed.is_empty(), "{instance}: {:?}", report.failed);
            assert_eq!(
                (report.deleted, report.created),
                (1, 1),
                "{instance}: {report:?}"
            );
            let cronjob = the_cronjob(&kube);
            assert_eq!(
                cronjob["metadata"]["labels"]["lethe.dev/data-job-uid"],
                json!(new)
            );
        }
    }

    #[test]
    fn orphans_and_a_cronjob_that_lost_its_uid_label_are_handled_between_full_passes() {
        let (sql, kube) = world();
        deployed(&sql, &kube, &["ingest"]);
        let host = FakeHost::new(&sql, &kube, "a");
        change_pass(&host);
        kube.create(
            &Identity::Privileged,
            &foreign_cronjob(
                "stray",
                json!({"app.kubernetes.io/managed-by": "lethe"}),
                json!({}),
            ),
        )
        .expect("a labelled orphan");
        let swept = change_pass(&host);
        assert_eq!(swept.deleted, 1, "{swept:?}");
        assert!(!kube.exists("CronJob", "data-jobs", "stray"));

        // Someone strips the job's uid from its CronJob: that CronJob is now an orphan, and
        // the job, found by the name its actual row records, gets its CronJob back.
        let name = crate::model::cronjob_name("t", "ingest");
        kube.edit("CronJob", "data-jobs", &name, |v| {
            v["metadata"]["labels"]
                .as_object_mut()
                .expect("labels")
                .remove("lethe.dev/data-job-uid");
        });
        let report = change_pass(&host);
        assert_eq!((report.deleted, report.created), (1, 1), "{report:?}");
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let cronjob = the_cronjob(&kube);
        assert!(cronjob["metadata"]["labels"]["lethe.dev/data-job-uid"].is_string());
    }

    #[test]
    fn a_cronjob_swapped_for_another_jobs_under_its_name_is_noticed_between_full_passes() {
        let (sql, kube) = world();
        deployed(&sql, &kube, &["ingest", "other"]);
        let host = FakeHost::new(&sql, &kube, "a");
        change_pass(&host);
        // Between two passes, ingest's CronJob is deleted and one of the same name, marked
        // with the other job's uid, takes its place: the last change of that name is the
        // newcomer's, yet ingest must still be visited.
        let name = crate::model::cronjob_name("t", "ingest");
        let mut swapped = kube
            .object("CronJob", "data-jobs", &name)
            .expect("cronjob")
            .json()
            .clone();
        let other = kube
            .all("CronJob")
            .into_iter()
            .find(|c| c.target.name != name)
            .expect("the other CronJob");
        kube.delete(
            &Identity::Privileged,
            &ObjectRef::new("batch/v1", "CronJob", Some("data-jobs"), &name),
            &DeleteOptions::default(),
        )
        .expect("delete by hand");
        swapped["metadata"]["labels"]["lethe.dev/data-job-uid"] =
            json!(other.label("lethe.dev/data-job-uid").expect("uid"));
        for field in ["uid", "resourceVersion", "generation"] {
            swapped["metadata"]
                .as_object_mut()
                .expect("metadata")
                .remove(field);
        }
        kube.create(&Identity::Privileged, &swapped)
            .expect("the swap");
        let report = change_pass(&host);
        assert!(
            report
                .failed
                .iter()
                .any(|f| f.item == "t/ingest" && f.reason.contains("is not lethe's for this job")),
            "{report:?}"
        );
    }

    #[test]
    fn a_lost_watch_the_resync_interval_and_deferred_work_bring_a_full_pass() {
        let (sql, kube) = world();
        deployed(&sql, &kube, &["ingest"]);
        let host = FakeHost::new(&sql, &kube, "a");
        change_pass(&host);
        kube.expire_watches();
        assert!(ran(tick(&host).expect("pass")).full, "a gone bookmark");
        change_pass(&host);
        host.advance(599_000);
        change_pass(&host);
        host.advance(1_000);
        assert!(ran(tick(&host).expect("pass")).full, "full_resync_seconds");
        change_pass(&host);

        host.set_config("max_changes_per_pass", "1");
        for job in ["a", "b", "c"] {
            deploy(&host, job);
        }
        let first = change_pass(&host);
        assert_eq!((first.created, first.deferred), (1, 2), "{first:?}");
        let second = ran(tick(&host).expect("pass"));
        assert!(second.full, "deferred work is found again by a full pass");
        assert_eq!((second.created, second.deferred), (1, 1), "{second:?}");
        let third = ran(tick(&host).expect("pass"));
        assert!(third.full);
        assert_eq!((third.created, third.deferred), (1, 0), "{third:?}");
        assert_eq!(kube.all("CronJob").len(), 4);
        change_pass(&host);
    }

    #[test]
    fn more_changed_jobs_than_a_page_holds_bring_a_full_pass() {
        let (sql, kube) = world();
        deployed(&sql, &kube, &[]);
        let host = FakeHost::new(&sql, &kube, "a");
        host.set_config("page_size", "2");
        deploy(&host, "one");
        deploy(&host, "two");
        assert_eq!(change_pass(&host).created, 2, "two fit in a page");
        for job in ["three", "four", "five"] {
            deploy(&host, job);
        }
        let bulk = ran(tick(&host).expect("pass"));
        assert!(bulk.full, "three LISTs would cost more than the pages");
        assert_eq!(bulk.created, 3);
        change_pass(&host);
    }

    #[test]
    fn a_create_whose_answer_was_lost_is_adopted_once_its_backoff_is_over() {
        let (sql, kube) = world();
        deployed(&sql, &kube, &[]);
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        kube.lose_next_create("CronJob", true);
        let lost = change_pass(&host);
        assert_eq!(lost.failed.len(), 1, "{lost:?}");
        assert_eq!(kube.all("CronJob").len(), 1, "the create was carried out");
        host.advance(60_000);
        let adopted = change_pass(&host);
        assert_eq!((adopted.created, adopted.recorded), (0, 1), "{adopted:?}");
        assert_eq!(kube.all("CronJob").len(), 1, "no duplicate");
        assert_eq!(change_pass(&host).examined, 0);
    }

    #[test]
    fn an_idle_pass_on_the_changes_visits_nothing_and_lists_nothing() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        for i in 0..5 {
            deploy(&host, &format!("job-{i}"));
        }
        let first = ran(tick(&host).expect("pass"));
        assert!(first.full, "the first pass has no bookmark");
        assert_eq!(first.created, 5);
        // The next pass hears of its own creates, and sees them recorded.
        let next = ran(tick(&host).expect("pass"));
        assert!(!next.full);
        assert_eq!((next.examined, next.created, next.recorded), (0, 0, 0));
        let idle = ran(tick(&host).expect("pass"));
        assert!(!idle.full);
        assert_eq!(idle.examined, 0);
        // The Lease read, and the (empty) changes of the CronJobs.
        assert_eq!(idle.kube_requests, 1 + 1);
        // Once the renewal is due, the Lease is written too.
        host.advance(5_000);
        assert_eq!(ran(tick(&host).expect("pass")).kube_requests, 2 + 1);
    }

    #[test]
    fn a_rejected_spec_is_parked_until_it_changes() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let uid = deploy(&host, "ingest");
        use crate::Sql as _;
        sql.execute(
            "UPDATE desired_data_job_deployment SET schedule = 'bad', spec_hash = 'x' WHERE job_uid = $1",
            &[uid.clone().into()],
        )
        .expect("corrupt the spec");
        let first = ran(tick(&host).expect("pass"));
        assert!(first.failed[0].parked);
        host.advance(10_000_000);
        let later = ran(tick(&host).expect("pass"));
        assert_eq!((later.parked, later.failed.len()), (1, 0));
        let (status, _) = call(
            &host,
            "POST",
            "/data-jobs/for-team/t/jobs/ingest/deployments",
            Some(json!({"schedule": "5 * * * *"})),
        );
        assert_eq!(status, 202);
        assert_eq!(ran(tick(&host).expect("pass")).created, 1);
    }

    fn the_cronjob(kube: &FakeCluster) -> Json {
        let all = kube.all("CronJob");
        assert_eq!(all.len(), 1, "one CronJob");
        all[0].json().clone()
    }

    #[test]
    fn a_cronjob_that_lost_its_managed_label_is_taken_back_not_fought_over() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        ran(tick(&host).expect("pass"));
        let name = crate::model::cronjob_name("t", "ingest");
        kube.edit("CronJob", "data-jobs", &name, |v| {
            v["metadata"]["labels"]
                .as_object_mut()
                .expect("labels")
                .remove("app.kubernetes.io/managed-by");
        });
        let report = ran(tick(&host).expect("pass"));
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        assert_eq!((report.created, report.updated), (0, 1));
        assert_eq!(
            the_cronjob(&kube)["metadata"]["labels"]["app.kubernetes.io/managed-by"],
            "lethe"
        );
        let quiet = ran(tick(&host).expect("pass"));
        assert_eq!(
            (quiet.updated, quiet.recorded, quiet.failed.len()),
            (0, 0, 0)
        );
    }

    #[test]
    fn someone_elses_cronjob_under_the_name_is_reported_and_left_alone() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        tick(&host).expect("lease first");
        let name = crate::model::cronjob_name("t", "ingest");
        let uid = kube.all("CronJob")[0].metadata.uid.clone();
        kube.delete(
            &Identity::Privileged,
            &ObjectRef::new("batch/v1", "CronJob", Some("data-jobs"), &name),
            &DeleteOptions {
                precondition_uid: Some(uid.clone()),
                ..Default::default()
            },
        )
        .expect("delete by hand");
        let foreign = foreign_cronjob(&name, json!({}), json!({}));
        kube.create(&Identity::Privileged, &foreign)
            .expect("a foreign CronJob");
        let report = ran(tick(&host).expect("pass"));
        assert_eq!(report.failed.len(), 1);
        assert!(
            report.failed[0].reason.contains(&format!(
                "CronJob data-jobs/{name} exists and is not lethe's"
            )),
            "{:?}",
            report.failed
        );
        assert_eq!(the_cronjob(&kube)["spec"]["schedule"], "1 1 * * *");
    }

    /// A CronJob under the job's CronJob name that copies lethe's annotation (or another job's
    /// uid) but not this job's uid is not this job's, and is never taken over.
    #[test]
    fn lethes_marks_without_this_jobs_uid_do_not_make_a_cronjob_ours() {
        for (labels, annotations) in [
            (json!({}), json!({"lethe.dev/data-job": "t/ingest"})),
            (
                json!({"lethe.dev/data-job-uid": "00000000-0000-4000-8000-00000000beef"}),
                json!({}),
            ),
        ] {
            let (sql, kube) = world();
            let host = FakeHost::new(&sql, &kube, "a");
            ran(tick(&host).expect("lease first"));
            let name = crate::model::cronjob_name("t", "ingest");
            let foreign = foreign_cronjob(&name, labels, annotations);
            // It appears after the deployment was accepted, so only the sync can meet it.
            deploy(&host, "ingest");
            kube.create(&Identity::Privileged, &foreign)
                .expect("a foreign CronJob");
            let report = ran(tick(&host).expect("pass"));
            assert_eq!(report.failed.len(), 1, "{:?}", report.failed);
            assert!(
                report.failed[0].reason.contains("is not lethe's"),
                "{:?}",
                report.failed
            );
            assert_eq!(the_cronjob(&kube)["spec"]["schedule"], "1 1 * * *");
        }
    }

    /// The deployment that would take a foreign CronJob's name is refused when it is submitted.
    #[test]
    fn a_deployment_whose_cronjob_name_is_taken_is_refused_with_422() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        ran(tick(&host).expect("lease first"));
        let name = crate::model::cronjob_name("t", "ingest");
        let foreign = foreign_cronjob(&name, json!({}), json!({}));
        kube.create(&Identity::Privileged, &foreign)
            .expect("a foreign CronJob");
        let (status, body) = call(
            &host,
            "POST",
            "/data-jobs/for-team/t/jobs",
            Some(
                json!({"job_name": "ingest", "config": {"schedule": {"schedule_cron": "0 * * * *"}}}),
            ),
        );
        assert_eq!(status, 201, "{body}");
        let (status, body) = call(
            &host,
            "POST",
            "/data-jobs/for-team/t/jobs/ingest/deployments",
            Some(json!({"job_version": "v1"})),
        );
        assert_eq!(status, 422, "{body}");
        assert!(
            body["errors"][0]["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&format!("CronJob data-jobs/{name}"))),
            "{body}"
        );
        assert_eq!(the_cronjob(&kube)["spec"]["schedule"], "1 1 * * *");
    }

    /// A Lease under the sync's name that lethe did not write is never overwritten.
    #[test]
    fn a_foreign_lease_under_the_sync_name_is_reported_and_left_alone() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": crate::sync::LEASE_NAME, "namespace": "data-jobs"},
            "spec": {"holderIdentity": "someone-else"},
        });
        kube.create(&Identity::Privileged, &lease)
            .expect("a foreign Lease");
        host.advance(3_600_000);
        let e = tick(&host).expect_err("no pass on someone else's Lease");
        assert!(
            e.contains("Lease data-jobs/data-jobs-sync exists and is not lethe's"),
            "{e}"
        );
        let after = kube.all("Lease");
        assert_eq!(after.len(), 1);
        let spec: Json = after[0].json().clone();
        assert_eq!(spec["spec"]["holderIdentity"], "someone-else");
    }

    #[test]
    fn hand_edits_of_the_fixed_fields_are_reverted_too() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        ran(tick(&host).expect("pass"));
        let name = crate::model::cronjob_name("t", "ingest");
        kube.edit("CronJob", "data-jobs", &name, |v| {
            v["spec"]["concurrencyPolicy"] = json!("Allow");
            v["spec"]["jobTemplate"]["spec"]["backoffLimit"] = json!(0);
        });
        assert_eq!(ran(tick(&host).expect("pass")).updated, 1);
        let cronjob = the_cronjob(&kube);
        assert_eq!(cronjob["spec"]["concurrencyPolicy"], "Forbid");
        assert_eq!(cronjob["spec"]["jobTemplate"]["spec"]["backoffLimit"], 3);
        // `kubectl describe cronjob` says what lethe did to it, and why.
        let said: Vec<(String, String)> = kube
            .all("Event")
            .iter()
            .filter(|e| e.json()["regarding"]["name"] == name.as_str())
            .map(|e| {
                let e = e.json();
                let text = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                (text("reason"), text("note"))
            })
            .collect();
        assert!(
            said.contains(&(
                "CronJobReplaced".into(),
                "reverted a hand edit of its spec".into()
            )),
            "{said:?}"
        );
        assert!(said.iter().any(|(r, _)| r == "CronJobCreated"), "{said:?}");
    }

    /// Found by the simulator (lethe-sim seed 2): reverting a hand edit replaced the CronJob
    /// with lethe's rendering alone, which dropped a finalizer someone else had added.
    #[test]
    fn reverting_a_hand_edit_keeps_the_finalizers_of_others() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        ran(tick(&host).expect("pass"));
        let name = crate::model::cronjob_name("t", "ingest");
        kube.edit("CronJob", "data-jobs", &name, |v| {
            v["spec"]["schedule"] = json!("7 7 * * *");
            v["metadata"]["finalizers"] = json!(["example.com/keep"]);
        });
        assert_eq!(ran(tick(&host).expect("pass")).updated, 1);
        let cronjob = the_cronjob(&kube);
        assert_eq!(
            cronjob["spec"]["schedule"], "0 * * * *",
            "the edit is reverted"
        );
        assert_eq!(
            cronjob["metadata"]["finalizers"],
            json!(["example.com/keep"])
        );
    }

    #[test]
    fn a_deployment_update_merges_resources_and_patch_needs_a_deployment() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let path = "/data-jobs/for-team/t/jobs/ingest/deployments";
        deploy(&host, "ingest");
        let (status, _) = call(
            &host,
            "POST",
            path,
            Some(json!({"resources": {"cpu_request": "500m", "memory_limit": "1Gi"}})),
        );
        assert_eq!(status, 202);
        let (status, view) = call(
            &host,
            "PATCH",
            &format!("{path}/production"),
            Some(json!({"resources": {"cpu_request": "1", "memory_limit": null}})),
        );
        assert_eq!(status, 202, "{view}");
        assert_eq!(view["resources"], json!({"cpu_request": "1"}), "{view}");
        let (status, view) = call(
            &host,
            "PATCH",
            &format!("{path}/production"),
            Some(json!({"enabled": false})),
        );
        assert_eq!(
            (status, &view["resources"]),
            (202, &json!({"cpu_request": "1"}))
        );
        assert_eq!(view["enabled"], false, "{view}");
        let (status, _) = call(&host, "PATCH", &format!("{path}/staging"), Some(json!({})));
        assert_eq!(status, 404);
        call(&host, "DELETE", &format!("{path}/production"), None);
        let (status, body) = call(
            &host,
            "PATCH",
            &format!("{path}/production"),
            Some(json!({})),
        );
        assert_eq!(
            (status, &body["errors"][0]["code"]),
            (404, &json!(10010)),
            "{body}"
        );
    }

    #[test]
    fn a_repeated_deployment_delete_gets_the_same_job_until_the_cronjob_is_gone() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        deploy(&host, "ingest");
        ran(tick(&host).expect("pass"));
        let path = "/data-jobs/for-team/t/jobs/ingest/deployments/production";
        let (first, a) = call(&host, "DELETE", path, None);
        let (second, b) = call(&host, "DELETE", path, None);
        assert_eq!((first, second), (202, 202));
        assert_eq!(a["job_guid"], b["job_guid"]);
        ran(tick(&host).expect("pass"));
        assert!(kube.all("CronJob").is_empty());
        assert_eq!(call(&host, "DELETE", path, None).0, 404);
        let guid = a["job_guid"].as_str().expect("guid");
        assert_eq!(
            call(&host, "GET", &format!("/v3/jobs/{guid}"), None).1["state"],
            "COMPLETE"
        );
    }

    #[test]
    fn a_cronjob_held_by_a_finalizer_is_deleted_once_and_waited_for() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let uid = deploy(&host, "ingest");
        ran(tick(&host).expect("pass"));
        call(&host, "DELETE", "/data-jobs/for-team/t/jobs/ingest", None);
        // The fake deletes at once; a finalizer keeps the object as a real server would.
        let name = crate::model::cronjob_name("t", "ingest");
        kube.edit("CronJob", "data-jobs", &name, |v| {
            v["metadata"]["deletionTimestamp"] = json!("2026-11-30T00:00:00Z");
            v["metadata"]["finalizers"] = json!(["example.com/hold"]);
        });
        let guid = format!("/v3/jobs/data_job.delete~{uid}");
        for _ in 0..3 {
            let report = ran(tick(&host).expect("pass"));
            assert_eq!(
                report.deleted, 0,
                "a terminating CronJob is not deleted again"
            );
            assert_eq!(kube.all("CronJob").len(), 1);
            assert_eq!(call(&host, "GET", &guid, None).1["state"], "PROCESSING");
        }
        kube.clear_finalizers("CronJob", "data-jobs", &name);
        assert_eq!(call(&host, "GET", &guid, None).1["state"], "COMPLETE");
    }

    #[test]
    fn a_job_keeps_its_whole_config_and_is_updated_with_put() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let config = json!({
            "schedule": {"schedule_cron": "0 * * * *"},
            "contacts": {"notified_on_job_failure_user_error": ["a@example.com"]},
            "enable_execution_notifications": true,
            "notification_delay_period_minutes": 240,
        });
        let (status, created) = call(
            &host,
            "POST",
            "/data-jobs/for-team/t/jobs",
            Some(json!({"job_name": "ingest", "config": config})),
        );
        assert_eq!(status, 201, "{created}");
        let (_, read) = call(&host, "GET", "/data-jobs/for-team/t/jobs/ingest", None);
        assert_eq!(read["config"], config, "VDK's settings read back as sent");
        let path = "/data-jobs/for-team/t/jobs/ingest";
        let (status, updated) = call(
            &host,
            "PUT",
            path,
            Some(
                json!({"job_name": "ingest", "team": "t", "description": "nightly",
                        "config": {"schedule": {"schedule_cron": "5 4 * * *"}}}),
            ),
        );
        assert_eq!(status, 200, "{updated}");
        assert_eq!(
            updated["description"], "nightly",
            "the answer is the job updated"
        );
        assert_eq!(
            updated["config"],
            json!({"schedule": {"schedule_cron": "5 4 * * *"}})
        );
        let (_, read) = call(&host, "GET", path, None);
        assert_eq!(read["description"], "nightly");
        assert_eq!(
            read["config"],
            json!({"schedule": {"schedule_cron": "5 4 * * *"}})
        );
        assert_eq!(read["uid"], created["uid"], "the same job");
        for (body, status) in [
            (json!({"job_name": "other"}), 422),
            (json!({"team": "u"}), 422),
            (
                json!({"config": {"schedule": {"schedule_cron": "not cron"}}}),
                422,
            ),
            (json!([]), 400),
        ] {
            assert_eq!(
                call(&host, "PUT", path, Some(body.clone())).0,
                status,
                "{body}"
            );
        }
        assert_eq!(
            call(
                &host,
                "PUT",
                "/data-jobs/for-team/t/jobs/absent",
                Some(json!({}))
            )
            .0,
            404
        );
        assert_eq!(call(&host, "GET", path, None).1["description"], "nightly");
    }

    #[test]
    fn a_name_in_the_create_query_must_be_the_bodys() {
        let (sql, kube) = world();
        let host = FakeHost::new(&sql, &kube, "a");
        let create = |query: &str| {
            let req = Request {
                method: "POST".into(),
                path: "/data-jobs/for-team/t/jobs".into(),
                query: query.into(),
                headers: vec![("authorization".into(), b"Bearer t".to_vec())].into(),
                body: json!({"job_name": "ingest"}).to_string().into_bytes(),
                ..Default::default()
            };
            crate::api::handle(&host, &req).status
        };
        assert_eq!(create("name=other"), 422);
        assert_eq!(create("name=%zz"), 400);
        assert_eq!(create("name=ingest"), 201);
    }
}
