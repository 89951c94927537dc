//! The data-jobs API's routes, its caller check and its input limits, request by request.

use serde_json::{Value as Json, json};

use crate::sync::tick;
use crate::tests::flows::{call, call_as, deploy, foreign_cronjob, ran, world};
use crate::{Identity, Kube as _};
use lethe_guest::fake::FakeHost;

/// Every route the API serves, with a body where it takes one.
fn routes(guid: &str) -> Vec<(&'static str, String, Option<Json>)> {
    let job = "/data-jobs/for-team/t/jobs/ingest";
    vec![
        ("GET", format!("/v3/jobs/{guid}"), None),
        ("GET", "/data-jobs/sync/reports".into(), None),
        (
            "POST",
            "/data-jobs/for-team/t/jobs".into(),
            Some(json!({"job_name": "other"})),
        ),
        ("GET", "/data-jobs/for-team/t/jobs".into(), None),
        ("GET", job.into(), None),
        ("PUT", job.into(), Some(json!({"description": "taken"}))),
        ("DELETE", job.into(), None),
        (
            "POST",
            format!("{job}/deployments"),
            Some(json!({"job_version": "v2"})),
        ),
        ("GET", format!("{job}/deployments"), None),
        ("GET", format!("{job}/deployments/production"), None),
        (
            "PATCH",
            format!("{job}/deployments/production"),
            Some(json!({"enabled": false})),
        ),
        ("DELETE", format!("{job}/deployments/production"), None),
    ]
}

#[test]
fn a_caller_the_cluster_rejects_or_refuses_gets_401_or_403_on_every_route_and_changes_nothing() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    let uid = deploy(&host, "ingest");
    let guid = format!("data_job.delete~{uid}");
    let job_before = call(&host, "GET", "/data-jobs/for-team/t/jobs/ingest", None);
    let deployment_before = call(
        &host,
        "GET",
        "/data-jobs/for-team/t/jobs/ingest/deployments/production",
        None,
    );
    // `bad` is a token the cluster rejects; `nobody` is authenticated but may not read the
    // data-jobs namespace.
    for (token, status, title) in [
        ("bad", 401, "CF-InvalidAuthToken"),
        ("nobody", 403, "CF-NotAuthorized"),
    ] {
        for (method, path, body) in routes(&guid) {
            let (got, answer) = call_as(&host, token, method, &path, body);
            assert_eq!(
                (got, answer["errors"][0]["title"].as_str()),
                (status, Some(title)),
                "{token}: {method} {path}: {answer}"
            );
        }
    }
    assert_eq!(
        call(&host, "GET", "/data-jobs/for-team/t/jobs/ingest", None),
        job_before,
        "the job is as it was"
    );
    assert_eq!(
        call(
            &host,
            "GET",
            "/data-jobs/for-team/t/jobs/ingest/deployments/production",
            None
        ),
        deployment_before,
        "its deployment is as it was"
    );
    let (_, jobs) = call(&host, "GET", "/data-jobs/for-team/t/jobs", None);
    assert_eq!(
        jobs.as_array().map(Vec::len),
        Some(1),
        "no job was made: {jobs}"
    );
}

/// The names of team `t`'s jobs, as the API lists them (which must answer 200).
fn job_names(host: &FakeHost<'_>) -> Vec<String> {
    let (status, jobs) = call(host, "GET", "/data-jobs/for-team/t/jobs", None);
    assert_eq!(status, 200, "{jobs}");
    jobs.as_array()
        .into_iter()
        .flatten()
        .filter_map(|j| j["job_name"].as_str().map(str::to_string))
        .collect()
}

#[test]
fn the_read_routes_answer_what_was_written() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    deploy(&host, "load");
    deploy(&host, "ingest");
    assert_eq!(job_names(&host), ["ingest", "load"], "by name");
    assert_eq!(
        call(&host, "GET", "/data-jobs/for-team/u/jobs", None),
        (200, json!([])),
        "a team without jobs"
    );
    assert_eq!(
        call(&host, "GET", "/data-jobs/for-team/No_Team/jobs", None).0,
        404,
        "a malformed team"
    );
    let deployments = "/data-jobs/for-team/t/jobs/ingest/deployments";
    let (status, one) = call(&host, "GET", &format!("{deployments}/production"), None);
    assert_eq!(status, 200, "{one}");
    assert_eq!(one["id"], "production");
    assert_eq!(one["job_version"], "v1");
    assert_eq!(call(&host, "GET", deployments, None), (200, json!([one])));
    assert_eq!(
        call(&host, "GET", &format!("{deployments}/staging"), None).0,
        404,
        "the one deployment is production"
    );
}

#[test]
fn other_methods_are_405_and_other_cf_job_requests_are_unknown_as_cloud_controller_says() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    let job = "/data-jobs/for-team/t/jobs/ingest";
    for (method, path) in [
        ("DELETE", "/data-jobs/sync/reports".to_string()),
        ("PATCH", "/data-jobs/for-team/t/jobs".into()),
        ("POST", job.into()),
        ("PUT", format!("{job}/deployments")),
        ("POST", format!("{job}/deployments/production")),
    ] {
        let (status, body) = call(&host, method, &path, None);
        assert_eq!(
            (status, &body["errors"][0]["title"]),
            (405, &json!("CF-MethodNotAllowed")),
            "{method} {path}: {body}"
        );
    }
    let (status, body) = call(&host, "POST", "/v3/jobs/anything", None);
    assert_eq!(
        (status, &body["errors"][0]),
        (
            404,
            &json!({"code": 10000, "title": "CF-NotFound", "detail": "Unknown request"})
        ),
        "{body}"
    );
    let (status, body) = call(&host, "GET", "/data-jobs/nothing-here", None);
    assert_eq!(
        (status, &body["errors"][0]["title"]),
        (404, &json!("CF-ResourceNotFound")),
        "{body}"
    );
}

/// A job `name` created with `fields` besides its name: the status.
fn create(host: &FakeHost<'_>, name: &str, mut fields: Json) -> u16 {
    fields["job_name"] = json!(name);
    call(host, "POST", "/data-jobs/for-team/t/jobs", Some(fields)).0
}

#[test]
fn a_description_and_a_config_are_refused_one_byte_past_their_limits() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    assert_eq!(
        create(&host, "d1", json!({"description": "d".repeat(4000)})),
        201
    );
    assert_eq!(
        create(&host, "d2", json!({"description": "d".repeat(4001)})),
        422
    );
    // A config stored as exactly 64 KiB of JSON, and one a byte longer: what is stored is the
    // config sent with its schedule made explicit (empty, as this one has none).
    let sent = |pad: usize| json!({"pad": "p".repeat(pad)});
    let stored = |pad: usize| json!({"pad": "p".repeat(pad), "schedule": {"schedule_cron": ""}});
    let pad = 64 * 1024 - stored(0).to_string().len();
    assert_eq!(stored(pad).to_string().len(), 64 * 1024);
    assert_eq!(create(&host, "c1", json!({"config": sent(pad)})), 201);
    assert_eq!(create(&host, "c2", json!({"config": sent(pad + 1)})), 422);
    assert_eq!(
        job_names(&host),
        ["c1", "d1"],
        "only those within the limits"
    );
}

#[test]
fn a_schedule_keeps_the_fields_sent_beside_its_cron() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    let schedule = json!({"schedule_cron": "0 * * * *", "time_zone": "UTC"});
    assert_eq!(
        create(&host, "ingest", json!({"config": {"schedule": schedule}})),
        201
    );
    let (_, job) = call(&host, "GET", "/data-jobs/for-team/t/jobs/ingest", None);
    assert_eq!(job["config"]["schedule"], schedule);
}

/// A job `name` with an hourly schedule, made through the API.
fn job(host: &FakeHost<'_>, name: &str) {
    let config = json!({"config": {"schedule": {"schedule_cron": "0 * * * *"}}});
    assert_eq!(create(host, name, config), 201);
}

/// A write of `name`'s production deployment: the status and the deployment as answered.
fn deployment(host: &FakeHost<'_>, method: &str, name: &str, body: Json) -> (u16, Json) {
    let mut path = format!("/data-jobs/for-team/t/jobs/{name}/deployments");
    if method == "PATCH" {
        path.push_str("/production");
    }
    call(host, method, &path, Some(body))
}

#[test]
fn a_job_version_is_1_to_128_letters_digits_dots_underscores_and_dashes() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    job(&host, "ingest");
    for (version, status) in [
        (String::new(), 422),
        ("v 1".into(), 422),
        ("v/1".into(), 422),
        ("v".repeat(129), 422),
        ("v".repeat(128), 202),
        ("v1.2_3-rc".into(), 202),
    ] {
        // With an image given, so that the version's own rules refuse it, not the image's tag.
        let body = json!({"job_version": version, "image": "registry.example/ingest:7"});
        let (got, body) = deployment(&host, "POST", "ingest", body);
        assert_eq!(got, status, "{version:?}: {body}");
    }
}

#[test]
fn a_deployments_image_follows_its_version_unless_one_was_given() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    job(&host, "ingest");
    let (_, first) = deployment(&host, "POST", "ingest", json!({"job_version": "v1"}));
    let registry_v1 = first["image"].as_str().unwrap_or_default().to_string();
    assert!(registry_v1.ends_with("/t/ingest:v1"), "{first}");
    let custom = "registry.example/custom:7";
    let (_, given) = deployment(
        &host,
        "POST",
        "ingest",
        json!({"job_version": "v1", "image": custom}),
    );
    assert_eq!(given["image"], custom);
    let (_, patched) = deployment(&host, "PATCH", "ingest", json!({"enabled": false}));
    assert_eq!(
        (&patched["image"], &patched["enabled"]),
        (&json!(custom), &json!(false)),
        "a change that names no version keeps the image given"
    );
    let (_, next) = deployment(&host, "PATCH", "ingest", json!({"job_version": "v2"}));
    assert_eq!(
        next["image"],
        registry_v1.replace(":v1", ":v2"),
        "a new version without an image is the registry's image of that version"
    );
}

#[test]
fn a_deployments_schedule_is_a_cron_string_or_an_object_holding_one() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    job(&host, "ingest");
    for (schedule, cron) in [
        (json!("5 * * * *"), "5 * * * *"),
        (json!({"schedule_cron": "6 * * * *"}), "6 * * * *"),
    ] {
        let (status, view) = deployment(
            &host,
            "POST",
            "ingest",
            json!({"job_version": "v1", "schedule": schedule}),
        );
        assert_eq!(status, 202, "{view}");
        assert_eq!(view["schedule"]["schedule_cron"], cron);
    }
    let (status, _) = deployment(&host, "POST", "ingest", json!({"schedule": 5}));
    assert_eq!(status, 422);
}

#[test]
fn a_deployment_is_pending_until_its_cronjob_runs_its_spec_and_after_each_change() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    deploy(&host, "ingest");
    let path = "/data-jobs/for-team/t/jobs/ingest/deployments/production";
    let (_, view) = call(&host, "GET", path, None);
    assert_eq!(
        (&view["sync"]["state"], &view["actual"]),
        (&json!("pending"), &Json::Null),
        "{view}"
    );
    ran(tick(&host).expect("pass"));
    let cronjob = kube.all("CronJob").pop().expect("the CronJob");
    let (_, view) = call(&host, "GET", path, None);
    assert_eq!(view["sync"]["state"], "in_sync", "{view}");
    assert_eq!(
        view["actual"]["cronjob"]["name"],
        cronjob.target.name.as_str()
    );
    assert_eq!(
        view["actual"]["cronjob"]["uid"],
        cronjob.metadata.uid.as_str()
    );
    assert_eq!(view["actual"]["spec_hash"], view["desired"]["spec_hash"]);
    let (_, changed) = deployment(&host, "PATCH", "ingest", json!({"enabled": false}));
    assert_eq!(changed["sync"]["state"], "pending", "{changed}");
    assert_ne!(
        changed["actual"]["spec_hash"],
        changed["desired"]["spec_hash"]
    );
}

#[test]
fn a_new_spec_starts_without_backoff_and_the_same_spec_keeps_it() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    deploy(&host, "ingest");
    kube.fail("create", "CronJob");
    let failed = ran(tick(&host).expect("pass"));
    assert_eq!(failed.failed.len(), 1, "{failed:?}");
    let again = json!({"job_version": "v1"});
    let (_, same) = deployment(&host, "POST", "ingest", again);
    assert_eq!(
        same["sync"]["error"]["attempts"], 1,
        "the same spec waits out its backoff: {same}"
    );
    let (_, new) = deployment(&host, "PATCH", "ingest", json!({"enabled": false}));
    assert_eq!(
        new["sync"]["error"],
        Json::Null,
        "a new spec is tried at once: {new}"
    );
}

#[test]
fn a_cronjob_with_either_of_lethes_marks_is_not_in_a_new_deployments_way() {
    let (sql, kube) = world();
    let host = FakeHost::new(&sql, &kube, "a");
    ran(tick(&host).expect("lease first"));
    for (name, labels) in [
        // A job deleted and made again under its name: its old CronJob names the old uid.
        (
            "ingest",
            json!({ crate::model::JOB_UID_LABEL: "an-older-uid" }),
        ),
        (
            "load",
            json!({ crate::model::MANAGED_BY_LABEL: crate::model::MANAGED_BY }),
        ),
    ] {
        let cronjob = crate::model::cronjob_name("t", name);
        kube.create(
            &Identity::Privileged,
            &foreign_cronjob(&cronjob, labels, json!({})),
        )
        .expect("a CronJob under the name");
        job(&host, name);
        let (status, body) = deployment(&host, "POST", name, json!({"job_version": "v1"}));
        assert_eq!(status, 202, "{name}: {body}");
    }
}
