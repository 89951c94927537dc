//! End to end: the Cloud Foundry V3 deletion jobs of the first seed, through `lethe up` on the
//! repository's `spin.toml` against the embedded cluster, with `kubectl` as a second, real client.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value as Json;
use support::Lethe;
use support::cf::{
    bind, call, create_org, create_space, job_state, listed, patch_org, unique, wait_for_state,
};

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";
const EVE: &str = "eve-token-0123456789";

fn start(env: &[(&str, &str)]) -> Lethe {
    Lethe::up_app(
        &[(ALICE, "alice", &[]), (BOB, "bob", &[]), (EVE, "eve", &[])],
        env,
    )
}

fn add_foreign_finalizer(lethe: &Lethe, org: &str) {
    patch_org(
        lethe,
        org,
        "json",
        r#"[{"op":"add","path":"/metadata/finalizers/-","value":"example.com/stuck"}]"#,
    );
}

fn delete_org(lethe: &Lethe, org: &str, token: &str) -> String {
    let r = call(
        lethe,
        "DELETE",
        &format!("/v3/organizations/{org}"),
        Some(token),
        None,
    );
    assert_eq!(r.status, 202, "{}", r.body);
    assert!(r.body.is_empty(), "202 has an empty body");
    let location = r.header("location").expect("Location").to_string();
    assert_eq!(location, format!("{}/v3/jobs/org.delete~{org}", lethe.url));
    location
}

#[test]
fn cf_cli_like_poller_deletes_an_org_with_spaces_to_complete_and_everything_is_gone() {
    let lethe = start(&[]);
    if support::external_kubeconfig().is_none() {
        // Without the Korifi preset, no account is granted Korifi's reads.
        let (ok, _, err) = lethe.kubectl(&["get", "clusterrolebinding", "lethe-korifi-jobs"]);
        assert!(!ok && err.contains("NotFound"), "{err}");
    }
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "poller-org");
    let spaces = [
        create_space(&lethe, &org, "s1"),
        create_space(&lethe, &org, "s2"),
    ];
    lethe.kubectl_ok(&["get", "namespace", &org]);
    let location = delete_org(&lethe, &org, &admin);
    // Like `cf delete-org`: poll the Location, fail on any error or FAILED.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut states = Vec::new();
    loop {
        let (status, body) = job_state(&lethe, &location, &admin);
        assert_eq!(status, 200, "poll failed: {body}");
        let state = body["state"].as_str().expect("state").to_string();
        assert_ne!(state, "FAILED", "{body}");
        assert_eq!(body["operation"], "org.delete");
        assert_eq!(body["guid"], format!("org.delete~{org}"));
        assert_eq!(body["links"]["self"]["href"], location);
        assert!(body["errors"].as_array().is_some_and(Vec::is_empty));
        states.push(state.clone());
        if state == "COMPLETE" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not COMPLETE within 60 s: {states:?}\n{}",
            lethe.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(
        states[0], "PROCESSING",
        "the first poll sees the deletion in progress"
    );
    let (found, _, stderr) = lethe.kubectl(&["get", "orgs.cf.lethe.dev", &org, "-n", "cf"]);
    assert!(!found && stderr.contains("NotFound"), "org gone: {stderr}");
    for space in &spaces {
        let (found, _, stderr) = lethe.kubectl(&["get", "spaces.cf.lethe.dev", space, "-n", &org]);
        assert!(
            !found && stderr.contains("NotFound"),
            "space gone: {stderr}"
        );
        let (found, _, _) = lethe.kubectl(&["get", "namespace", space]);
        assert!(!found, "space namespace {space} gone");
    }
    let (found, _, _) = lethe.kubectl(&["get", "namespace", &org]);
    assert!(!found, "org namespace gone");
}

/// A crash in the middle of a deletion loses nothing: the org's deletion is recorded in the
/// cluster (deletionTimestamp and finalizers), so after a restart the job is still PROCESSING and
/// the next reconciler passes finish what the crashed process started.
#[test]
fn a_crash_in_the_middle_of_an_org_deletion_is_finished_after_the_restart() {
    let mut lethe = start(&[]);
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "crash-org");
    let held = create_space(&lethe, &org, "held");
    let free = create_space(&lethe, &org, "free");
    // Something else in the held space's namespace is still being cleaned up, so that namespace
    // (and with it the org) cannot finish before the crash.
    lethe.kubectl_ok(&["create", "configmap", "hold", "-n", &held]);
    lethe.kubectl_ok(&[
        "patch",
        "configmap",
        "hold",
        "-n",
        &held,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
    ]);
    let location = delete_org(&lethe, &org, &admin);
    let old_url = lethe.url.clone();
    // Crash once the reconciler is under way: the free space's namespace is gone and the held
    // one is terminating.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (free_left, _, _) = lethe.kubectl(&["get", "namespace", &free]);
        let held_ns = lethe.kubectl_ok(&["get", "namespace", &held, "-o", "json"]);
        let terminating =
            serde_json::from_str::<Json>(&held_ns).expect("namespace json")["metadata"]
                .get("deletionTimestamp")
                .is_some();
        if !free_left && terminating {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the reconciler did not get under way within 60 s:\n{}",
            lethe.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    lethe.crash_and_restart();
    // The restarted host listens on another port here; a real one keeps its address.
    let location = location.replacen(&old_url, &lethe.url, 1);

    wait_for_state(
        &lethe,
        &location,
        &admin,
        "PROCESSING",
        Duration::from_secs(10),
    );
    lethe.kubectl_ok(&["get", "orgs.cf.lethe.dev", &org, "-n", "cf"]);
    lethe.kubectl_ok(&[
        "patch",
        "configmap",
        "hold",
        "-n",
        &held,
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    wait_for_state(
        &lethe,
        &location,
        &admin,
        "COMPLETE",
        Duration::from_secs(60),
    );
    let (found, _, stderr) = lethe.kubectl(&["get", "orgs.cf.lethe.dev", &org, "-n", "cf"]);
    assert!(!found && stderr.contains("NotFound"), "org gone: {stderr}");
    for namespace in [&org, &held, &free] {
        let (found, _, _) = lethe.kubectl(&["get", "namespace", namespace]);
        assert!(!found, "namespace {namespace} gone");
    }
}

#[test]
fn first_poll_after_delete_is_processing_even_when_reads_are_stale() {
    if support::external_kubeconfig().is_some() {
        eprintln!(
            "skipping first_poll_after_delete_is_processing_even_when_reads_are_stale: \
             fault injection exists only in the embedded cluster"
        );
        return;
    }
    let lethe = start(&[]);
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "stale-org");
    add_foreign_finalizer(&lethe, &org);
    let faults = lethe.data_dir.path().join("faults.json");
    std::fs::write(&faults, r#"{"stale_read_ms": 1500}"#).expect("write faults");
    lethe.kubectl_ok(&[
        "replace",
        "--raw",
        "/lethe/faults",
        "-f",
        faults.to_str().expect("utf-8 path"),
    ]);
    let location = delete_org(&lethe, &org, &admin);
    let (status, body) = job_state(&lethe, &location, &admin);
    assert_eq!(status, 200, "never 404 on the first poll: {body}");
    assert_eq!(body["state"], "PROCESSING");
}

#[test]
fn org_job_stays_processing_when_the_callers_role_bindings_are_already_gone() {
    if support::skip_without_test_users(
        "org_job_stays_processing_when_the_callers_role_bindings_are_already_gone",
    ) {
        return;
    }
    let lethe = start(&[]);
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "early-org");
    bind(&lethe, &org, "organization-user", "bob");
    add_foreign_finalizer(&lethe, &org);
    let location = delete_org(&lethe, &org, &admin);
    // The cascade removes bob's role binding while the org is still terminating (the
    // reconciler may have removed it already).
    lethe.kubectl_ok(&[
        "delete",
        "rolebinding",
        "bob-organization-user",
        "-n",
        &org,
        "--wait=false",
        "--ignore-not-found",
    ]);
    std::thread::sleep(Duration::from_secs(2));
    let (status, body) = job_state(&lethe, &location, BOB);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["state"], "PROCESSING",
        "completion comes from the org record itself"
    );
    lethe.kubectl_ok(&["get", "orgs.cf.lethe.dev", &org, "-n", "cf"]);
}

/// A malformed `job_types` stops `lethe up` with the component's own words, naming the variable,
/// rather than letting every job poll fail.
#[test]
fn malformed_job_types_stop_the_start_naming_the_variable() {
    let failure = match Lethe::try_up_repo_app(&[], &[("LETHE_VAR_JOB_TYPES", "{\"org\": korifi")])
    {
        Ok(_) => panic!("lethe up started with a malformed job_types"),
        Err(failure) => failure,
    };
    assert!(!failure.status.success());
    assert!(
        failure
            .log
            .contains("configuration `job_types` is not valid JSON"),
        "{}",
        failure.log
    );
    assert!(failure.log.contains("component `cf-"), "{}", failure.log);
}

/// A job type on a kind lethe's own identity has no RBAC for: the caller (an admin) gets 503
/// `CF-ServiceUnavailable` naming nothing of lethe, never a 403 for lethe's missing right; the
/// log and `/readyz` name the right, in the API server's words.
#[test]
fn a_kind_lethe_may_not_read_is_503_to_the_caller_and_named_to_the_operator() {
    let widget = r#"{"widget": {"api_version": "example.com/v1", "kind": "Widget",
        "namespace": {"fixed": "cf"}, "display": "Widget", "visibility": "get"}}"#;
    let lethe = start(&[("LETHE_VAR_JOB_TYPES", widget)]);
    let crd = tempfile::NamedTempFile::new().expect("temp file");
    std::fs::write(
        crd.path(),
        r#"{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
              "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
              "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}}"#,
    )
    .expect("write the CRD");
    lethe.kubectl_ok(&["apply", "-f", &crd.path().to_string_lossy()]);
    let admin = lethe.admin_token();
    let location = format!("{}/v3/jobs/widget.delete~w1", lethe.url);
    // The CRD is served within moments; until then the kind is not found (404).
    let deadline = Instant::now() + Duration::from_secs(30);
    let (status, body) = loop {
        let (status, body) = job_state(&lethe, &location, &admin);
        if status != 404 {
            break (status, body);
        }
        assert!(Instant::now() < deadline, "still 404: {body}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body["errors"][0]["title"], "CF-ServiceUnavailable",
        "{body}"
    );
    let detail = body["errors"][0]["detail"].as_str().unwrap_or_default();
    assert!(
        !detail.contains("widgets"),
        "names lethe's internals: {detail}"
    );
    assert!(
        !detail.contains("serviceaccount"),
        "names lethe's identity: {detail}"
    );
    let readyz = support::get(&format!("{}/readyz?verbose", lethe.admin_url));
    assert_eq!(readyz.status, 503, "{}", readyz.body);
    assert!(
        readyz
            .body
            .contains("[-]permissions failed: component `cf-job-status`: "),
        "{}",
        readyz.body
    );
    assert!(
        readyz
            .body
            .contains(r#"cannot get resource "widgets" in API group "example.com""#),
        "{}",
        readyz.body
    );
    assert!(
        lethe.log().contains("grant it") && lethe.log().contains("widgets"),
        "{}",
        lethe.log()
    );
}

#[test]
fn stuck_finalizer_gives_processing_then_failed_at_the_timeout_then_complete_once_removed() {
    let lethe = start(&[("LETHE_VAR_DELETION_TIMEOUT_SECONDS", "4")]);
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "stuck-org");
    add_foreign_finalizer(&lethe, &org);
    let location = delete_org(&lethe, &org, &admin);
    assert_eq!(
        job_state(&lethe, &location, &admin).1["state"],
        "PROCESSING"
    );
    let failed = wait_for_state(&lethe, &location, &admin, "FAILED", Duration::from_secs(20));
    assert_eq!(failed["errors"][0]["code"], 10008);
    assert_eq!(failed["errors"][0]["title"], "CF-UnprocessableEntity");
    assert_eq!(
        failed["errors"][0]["detail"],
        format!("org deletion timed out, check the remaining \"{org}\" resource")
    );
    // lethe's own cleanup finishes (on a real cluster the namespace controller may take longer
    // than the timeout); then only the foreign finalizer holds the org, and the job stays FAILED.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let finalizers = lethe.kubectl_ok(&[
            "get",
            "orgs.cf.lethe.dev",
            &org,
            "-n",
            "cf",
            "-o",
            "jsonpath={.metadata.finalizers}",
        ]);
        if finalizers.trim() == r#"["example.com/stuck"]"# {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lethe's cleanup did not finish: {finalizers}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let (_, held) = job_state(&lethe, &location, &admin);
    assert_eq!(held["state"], "FAILED");
    // As Cloud Controller: the resource's link while it exists, and what the job waits on.
    assert_eq!(
        held["links"]["organization"]["href"],
        format!("{}/v3/organizations/{org}", lethe.url),
        "{held}"
    );
    assert_eq!(
        held["warnings"],
        serde_json::json!([{"detail": "lethe's cleanup is done; waiting for finalizers that are not lethe's: example.com/stuck"}]),
        "{held}"
    );
    // The status page tells the job poll's story: the deletion in flight, FAILED, and why.
    let row = format!("<tr><td>org/{org}</td><td>FAILED</td>");
    let why = format!("org deletion timed out, check the remaining &quot;{org}&quot; resource");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = support::get(&format!("{}/lethe/status", lethe.admin_url));
        assert_eq!(page.status, 200, "{}", page.body);
        if page.body.contains(&row) && page.body.contains(&why) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the status page does not show {row} … {why}: {}",
            page.body
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    // A person with kubectl sees the same story: the org's conditions say what holds it, and an
    // Event on it says so (lethe writes both right after its finalizer goes).
    let deadline = Instant::now() + Duration::from_secs(30);
    let described = loop {
        let described = lethe.kubectl_ok(&["describe", "orgs.cf.lethe.dev", &org, "-n", "cf"]);
        if described.contains("DeletionBlocked") && described.contains("ForeignFinalizers") {
            break described;
        }
        assert!(
            Instant::now() < deadline,
            "kubectl describe shows neither: {described}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    assert!(described.contains("example.com/stuck"), "{described}");
    assert!(described.contains("Deleting"), "{described}");
    let listed = lethe.kubectl_ok(&["get", "orgs.cf.lethe.dev", &org, "-n", "cf"]);
    let mut lines = listed.lines();
    let header = lines.next().unwrap_or_default();
    assert!(header.contains("READY"), "{listed}");
    assert!(
        lines.next().is_some_and(|l| l.contains("False")),
        "{listed}"
    );
    patch_org(&lethe, &org, "merge", r#"{"metadata":{"finalizers":null}}"#);
    let complete = wait_for_state(
        &lethe,
        &location,
        &admin,
        "COMPLETE",
        Duration::from_secs(10),
    );
    assert_eq!(complete["warnings"], serde_json::json!([]), "{complete}");
    assert!(
        complete["links"].get("organization").is_none(),
        "{complete}"
    );
}

#[test]
fn user_with_no_role_gets_404_on_delete_and_complete_on_the_job() {
    if support::skip_without_test_users(
        "user_with_no_role_gets_404_on_delete_and_complete_on_the_job",
    ) {
        return;
    }
    let lethe = start(&[]);
    let org = create_org(&lethe, "eve-org");
    let r = call(
        &lethe,
        "DELETE",
        &format!("/v3/organizations/{org}"),
        Some(EVE),
        None,
    );
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(r.cf_code(), 10010);
    assert_eq!(r.json()["errors"][0]["title"], "CF-ResourceNotFound");
    let (status, body) = job_state(&lethe, &format!("/v3/jobs/org.delete~{org}"), EVE);
    assert_eq!(status, 200);
    assert_eq!(body["state"], "COMPLETE");
    lethe.kubectl_ok(&["get", "orgs.cf.lethe.dev", &org, "-n", "cf"]);
}

#[test]
fn permissions_follow_cloud_controller() {
    if support::skip_without_test_users("permissions_follow_cloud_controller") {
        return;
    }
    let lethe = start(&[]);
    let org = create_org(&lethe, "perm-org");
    let space = create_space(&lethe, &org, "perm-space");
    bind(&lethe, &org, "organization-manager", "alice");
    bind(&lethe, &org, "organization-user", "bob");
    // An org manager sees the org but may not delete it: 403 CF-NotAuthorized.
    let r = call(
        &lethe,
        "DELETE",
        &format!("/v3/organizations/{org}"),
        Some(ALICE),
        None,
    );
    assert_eq!((r.status, r.cf_code()), (403, 10003), "{}", r.body);
    // An org user does not read the org's spaces at all (Cloud Controller's reading roles are
    // the space roles and the org manager): 404. An org manager reads and deletes them.
    let r = call(
        &lethe,
        "DELETE",
        &format!("/v3/spaces/{space}"),
        Some(BOB),
        None,
    );
    assert_eq!((r.status, r.cf_code()), (404, 10010), "{}", r.body);
    let r = call(&lethe, "GET", "/v3/spaces", Some(BOB), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["pagination"]["total_results"], 0, "{}", r.body);
    // A space role (bound in the space's own namespace) reads the space, but may not delete it.
    bind(&lethe, &space, "space-developer", "bob");
    let r = call(
        &lethe,
        "GET",
        &format!("/v3/spaces/{space}"),
        Some(BOB),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = call(
        &lethe,
        "DELETE",
        &format!("/v3/spaces/{space}"),
        Some(BOB),
        None,
    );
    assert_eq!((r.status, r.cf_code()), (403, 10003), "{}", r.body);
    let r = call(
        &lethe,
        "DELETE",
        &format!("/v3/spaces/{space}"),
        Some(ALICE),
        None,
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let location = r.header("location").expect("Location").to_string();
    assert!(location.ends_with(&format!("/v3/jobs/space.delete~{space}")));
    wait_for_state(
        &lethe,
        &location,
        ALICE,
        "COMPLETE",
        Duration::from_secs(30),
    );
    let (found, _, _) = lethe.kubectl(&["get", "namespace", &space]);
    assert!(!found, "the space's namespace is gone");
    // Listing: bob sees his org only; eve sees none. (Only this test's orgs count: on a shared
    // cluster other tests give bob roles of their own.)
    let other = create_org(&lethe, "other-org");
    assert_eq!(
        listed(&lethe, BOB, "organizations", &[&org, &other]),
        vec![org.clone()]
    );
    assert!(listed(&lethe, EVE, "organizations", &[&org, &other]).is_empty());
    let r = call(
        &lethe,
        "GET",
        &format!("/v3/organizations/{org}"),
        Some(EVE),
        None,
    );
    assert_eq!(r.status, 404);
}

#[test]
fn missing_and_bad_tokens_are_401_with_the_right_codes() {
    let lethe = start(&[]);
    let org = create_org(&lethe, "auth-org");
    let r = call(
        &lethe,
        "DELETE",
        &format!("/v3/organizations/{org}"),
        None,
        None,
    );
    assert_eq!((r.status, r.cf_code()), (401, 10002));
    assert_eq!(r.json()["errors"][0]["title"], "CF-NotAuthenticated");
    let r = call(
        &lethe,
        "DELETE",
        &format!("/v3/organizations/{org}"),
        Some("not-a-real-token"),
        None,
    );
    assert_eq!((r.status, r.cf_code()), (401, 1000));
    assert_eq!(r.json()["errors"][0]["title"], "CF-InvalidAuthToken");
    let r = call(
        &lethe,
        "GET",
        &format!("/v3/jobs/org.delete~{org}"),
        Some("not-a-real-token"),
        None,
    );
    assert_eq!((r.status, r.cf_code()), (401, 1000));
    assert!(
        !lethe.log().contains("not-a-real-token"),
        "tokens never appear in logs"
    );
    assert!(
        !lethe.log().contains(&lethe.admin_token()),
        "tokens never appear in logs"
    );
}

#[test]
fn bad_input_gets_4xx_with_the_envelope() {
    let lethe = start(&[]);
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "input-org");
    let long = "a".repeat(5000);
    let duplicate = format!(r#"{{"name": "{}"}}"#, unique("input-org"));
    let cases: Vec<(&str, String, Option<&str>, u16, i64)> = vec![
        ("GET", "/v3/jobs/org.delete".into(), None, 404, 10010),
        ("GET", "/v3/jobs/org.delete~".into(), None, 404, 10010),
        ("GET", "/v3/jobs/org.purge~abc".into(), None, 404, 10010),
        ("GET", "/v3/jobs/app.delete~abc".into(), None, 404, 10010),
        (
            "GET",
            "/v3/jobs/org.delete~NOT_A_GUID".into(),
            None,
            404,
            10010,
        ),
        (
            "GET",
            format!("/v3/jobs/org.delete~{org}%00"),
            None,
            404,
            10010,
        ),
        ("GET", format!("/v3/jobs/{long}"), None, 404, 10010),
        (
            "DELETE",
            "/v3/organizations/not..a..guid".into(),
            None,
            404,
            10010,
        ),
        (
            "DELETE",
            format!("/v3/organizations/{long}"),
            None,
            404,
            10010,
        ),
        // No route takes it: an unknown request.
        ("GET", "/v3/organizations/a/b/c".into(), None, 404, 10000),
        (
            "POST",
            "/v3/organizations".into(),
            Some("{not json"),
            400,
            1001,
        ),
        ("POST", "/v3/organizations".into(), Some("[1,2]"), 400, 1001),
        (
            "POST",
            "/v3/organizations".into(),
            Some(r#"{"name": ""}"#),
            422,
            10008,
        ),
        (
            "POST",
            "/v3/spaces".into(),
            Some(r#"{"name": "s"}"#),
            422,
            10008,
        ),
        (
            "POST",
            "/v3/organizations".into(),
            Some(duplicate.as_str()),
            422,
            10008,
        ),
        (
            "GET",
            "/v3/organizations?per_page=abc".into(),
            None,
            400,
            10005,
        ),
    ];
    for (method, path, body, status, code) in cases {
        let r = call(&lethe, method, &path, Some(&admin), body);
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
        assert_eq!(r.cf_code(), code, "{method} {path}: {}", r.body);
    }
    let r = call(
        &lethe,
        "GET",
        "/v3/jobs/org.delete~Not-A-Guid",
        Some(&admin),
        None,
    );
    assert_eq!(
        r.json()["errors"][0]["detail"],
        "Job not found. Ensure it exists and you have access to it."
    );
}

#[test]
fn visible_org_that_is_not_being_deleted_has_no_job() {
    let lethe = start(&[("LETHE_VAR_JOB_REREAD_MS", "300")]);
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "alive-org");
    let r = call(
        &lethe,
        "GET",
        &format!("/v3/jobs/org.delete~{org}"),
        Some(&admin),
        None,
    );
    assert_eq!((r.status, r.cf_code()), (404, 10010), "{}", r.body);
}

/// Per-caller fairness with `spin.toml` as shipped: one caller floods job polls of a live org
/// (each held for the re-read window) from 40 connections, more than its share of instances.
/// Its extra requests wait in its own queue and are then refused `429` with Cloud Controller's
/// envelope, `Retry-After` and `X-RateLimit-*`; another caller polling meanwhile sees no error.
#[test]
fn a_flooding_caller_gets_429s_and_a_polite_one_sees_no_error() {
    if support::skip_without_test_users(
        "a_flooding_caller_gets_429s_and_a_polite_one_sees_no_error",
    ) {
        return;
    }
    let lethe = start(&[]);
    let admin = lethe.admin_token();
    let live = create_org(&lethe, "flooded");
    let gone = create_org(&lethe, "polled");
    delete_org(&lethe, &gone, &admin);
    wait_for_state(
        &lethe,
        &format!("/v3/jobs/org.delete~{gone}"),
        &admin,
        "COMPLETE",
        Duration::from_secs(60),
    );

    let flooding = std::sync::atomic::AtomicBool::new(true);
    let (flood, polite) = std::thread::scope(|scope| {
        let flooders: Vec<_> = (0..40)
            .map(|_| {
                scope.spawn(|| {
                    let mut seen = Vec::new();
                    while flooding.load(std::sync::atomic::Ordering::Relaxed) {
                        let path = format!("/v3/jobs/org.delete~{live}");
                        seen.push(call(&lethe, "GET", &path, Some(&admin), None));
                    }
                    seen
                })
            })
            .collect();
        // The flood fills its share first.
        std::thread::sleep(Duration::from_millis(500));
        let mut polite = Vec::new();
        for _ in 0..30 {
            let path = format!("/v3/jobs/org.delete~{gone}");
            polite.push(call(&lethe, "GET", &path, Some(ALICE), None));
            std::thread::sleep(Duration::from_millis(100));
        }
        flooding.store(false, std::sync::atomic::Ordering::Relaxed);
        let flood: Vec<_> = flooders
            .into_iter()
            .flat_map(|f| f.join().expect("flooder"))
            .collect();
        (flood, polite)
    });
    for r in &polite {
        assert_eq!(r.status, 200, "the polite caller: {}", r.body);
        assert_eq!(r.json()["state"], "COMPLETE", "{}", r.body);
        assert!(r.header("x-ratelimit-limit").is_some(), "{:?}", r.headers);
    }
    let refused: Vec<_> = flood.iter().filter(|r| r.status == 429).collect();
    assert!(
        !refused.is_empty(),
        "the flood was never refused: {:?}",
        flood.iter().map(|r| r.status).collect::<Vec<_>>()
    );
    for r in &refused {
        assert_eq!(r.cf_code(), 10013, "{}", r.body);
        assert_eq!(r.json()["errors"][0]["title"], "CF-RateLimitExceeded");
        assert!(
            r.header("retry-after")
                .is_some_and(|v| v.parse::<u32>().is_ok_and(|s| s >= 1)),
            "{:?}",
            r.headers
        );
        assert!(
            r.header("x-ratelimit-remaining")
                .and_then(|v| v.parse::<u64>().ok())
                .is_some(),
            "{:?}",
            r.headers
        );
        assert!(
            r.header("x-ratelimit-reset")
                .and_then(|v| v.parse::<u64>().ok())
                .is_some(),
            "{:?}",
            r.headers
        );
    }
    for r in &flood {
        assert!(
            matches!(r.status, 404 | 429),
            "the flood saw {}: {}",
            r.status,
            r.body
        );
    }
}

/// Two hosts on one cluster and one database, as `deploy/` runs them: only the holder of the
/// `cf-reconciler` Lease runs cf passes, and when it is killed the other takes the Lease within
/// its duration and finishes the deletion the first one left.
#[test]
fn two_hosts_run_one_cf_leader_and_a_killed_leader_is_replaced_within_the_lease() {
    use support::standalone::{
        StandaloneCluster, is_instance_of, kubeconfig_server_and_token, lease_holder,
    };
    let cluster = StandaloneCluster::start();
    let (_, admin) = kubeconfig_server_and_token(&cluster.kubeconfig());
    let host_kubeconfig = cluster.service_account_kubeconfig().display().to_string();
    let shared = tempfile::tempdir().expect("tempdir");
    let db_url = format!("sqlite:{}", shared.path().join("shared.db").display());
    let args = [
        "--database-url",
        db_url.as_str(),
        "--kubeconfig",
        host_kubeconfig.as_str(),
    ];
    let env = [
        ("LETHE_VAR_LEASE_DURATION_SECONDS", "6"),
        ("LETHE_VAR_LEASE_RENEW_SECONDS", "1"),
    ];
    let mut a = Lethe::up_repo_app(&args, &env);
    let mut b = Lethe::up_repo_app(&args, &env);
    let holder = || lease_holder(&cluster.kubeconfig(), "cf", "cf-reconciler");

    let deadline = Instant::now() + Duration::from_secs(30);
    let leader = loop {
        if let Some(h) = holder() {
            break h;
        }
        assert!(
            Instant::now() < deadline,
            "no host took the cf-reconciler Lease"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        is_instance_of(a.pid(), &leader) || is_instance_of(b.pid(), &leader),
        "{leader} is neither host"
    );
    // The holder does not change while it lives, though both hosts tick every second.
    for _ in 0..15 {
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(holder().as_deref(), Some(leader.as_str()));
    }
    let (leader_host, survivor) = if is_instance_of(a.pid(), &leader) {
        (&mut a, &b)
    } else {
        (&mut b, &a)
    };
    let body = format!(r#"{{"name":"{}"}}"#, unique("failover"));
    let created = call(
        survivor,
        "POST",
        "/v3/organizations",
        Some(&admin),
        Some(&body),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let org = created.json()["guid"].as_str().expect("guid").to_string();
    let deleted = call(
        survivor,
        "DELETE",
        &format!("/v3/organizations/{org}"),
        Some(&admin),
        None,
    );
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    leader_host.crash();
    let killed = Instant::now();
    let new_leader = loop {
        if let Some(h) = holder().filter(|h| *h != leader) {
            break h;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(6 + 4),
            "no takeover within the Lease's 6 s and a tick"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(is_instance_of(survivor.pid(), &new_leader), "{new_leader}");
    let location = deleted.header("location").expect("Location").to_string();
    wait_for_state(
        survivor,
        &location,
        &admin,
        "COMPLETE",
        Duration::from_secs(60),
    );
}

/// Sends `body` to `path` as the administrator from `n` threads at once; the statuses, and the
/// guids of what was created.
fn create_at_once(lethe: &Lethe, path: &str, bodies: &[String]) -> (Vec<u16>, Vec<String>) {
    let admin = lethe.admin_token();
    let start = std::sync::Barrier::new(bodies.len());
    let answers: Vec<_> = std::thread::scope(|scope| {
        let racers: Vec<_> = bodies
            .iter()
            .map(|body| {
                let (admin, start) = (&admin, &start);
                scope.spawn(move || {
                    start.wait();
                    call(lethe, "POST", path, Some(admin), Some(body))
                })
            })
            .collect();
        racers
            .into_iter()
            .map(|r| r.join().expect("racer"))
            .collect()
    });
    for r in answers.iter().filter(|r| r.status != 201) {
        assert_eq!(r.status, 422, "{}", r.body);
        assert_eq!(r.cf_code(), 10008, "{}", r.body);
    }
    let created = answers
        .iter()
        .filter(|r| r.status == 201)
        .map(|r| r.json()["guid"].as_str().expect("guid").to_string())
        .collect();
    (answers.iter().map(|r| r.status).collect(), created)
}

/// Cloud Controller's unique index, without listing: of concurrent creates of one name (in
/// any case), exactly one wins, for orgs and for the spaces of one org; and a name is free
/// again once its holder's deletion is complete.
#[test]
fn concurrent_creates_of_one_name_give_exactly_one_201() {
    let lethe = start(&[]);
    let name = unique("race");
    let bodies: Vec<String> = (0..12)
        .map(|i| {
            let cased = if i % 2 == 0 {
                name.clone()
            } else {
                name.to_uppercase()
            };
            format!(r#"{{"name":"{cased}"}}"#)
        })
        .collect();
    let (statuses, created) = create_at_once(&lethe, "/v3/organizations", &bodies);
    assert_eq!(created.len(), 1, "{statuses:?}");
    let org = &created[0];
    let space_bodies: Vec<String> = (0..12)
        .map(|_| {
            format!(
                r#"{{"name":"s","relationships":{{"organization":{{"data":{{"guid":"{org}"}}}}}}}}"#
            )
        })
        .collect();
    let (statuses, spaces) = create_at_once(&lethe, "/v3/spaces", &space_bodies);
    assert_eq!(spaces.len(), 1, "{statuses:?}");
    // The cluster holds what the answers said: one org of that name, one space in it.
    let admin = lethe.admin_token();
    let orgs = call(
        &lethe,
        "GET",
        &format!("/v3/organizations?names={name}"),
        Some(&admin),
        None,
    );
    assert_eq!(
        orgs.json()["pagination"]["total_results"],
        1,
        "{}",
        orgs.body
    );
    let in_org = lethe.kubectl_ok(&["get", "spaces", "-n", org, "-o", "name"]);
    assert_eq!(in_org.lines().count(), 1, "{in_org}");

    let location = delete_org(&lethe, org, &admin);
    wait_for_state(
        &lethe,
        &location,
        &admin,
        "COMPLETE",
        Duration::from_secs(120),
    );
    let (statuses, created) = create_at_once(&lethe, "/v3/organizations", &bodies[..1]);
    assert_eq!(statuses, [201]);
    delete_org(&lethe, &created[0], &admin);
}

/// The GET requests the embedded cluster has answered, by resource (`GET /lethe/requests`), but
/// for the Lease renewals of the reconcilers.
fn gets_answered(lethe: &Lethe) -> std::collections::BTreeMap<String, u64> {
    let counts = lethe.kubectl_ok(&["get", "--raw", "/lethe/requests"]);
    let counts: std::collections::BTreeMap<String, u64> =
        serde_json::from_str(&counts).expect("request counts");
    // The reconcilers renew their Leases whatever else happens; those reads are not a poll's.
    counts
        .into_iter()
        .filter(|(k, _)| k.starts_with("GET ") && k != "GET leases")
        .collect()
}

/// A poll of the job of an org that is not being deleted costs the cluster at most three reads
/// (the org at the start and at the end of the re-read window, then whether the caller may see
/// it), counted by the embedded cluster itself.
#[test]
fn a_poll_of_a_live_orgs_job_makes_at_most_three_reads() {
    if support::external_kubeconfig().is_some() {
        eprintln!("skipping: the request counts are the embedded cluster's");
        return;
    }
    let lethe = start(&[]);
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "counted");
    let poll = || {
        call(
            &lethe,
            "GET",
            &format!("/v3/jobs/org.delete~{org}"),
            Some(&admin),
            None,
        )
    };
    // The first poll also learns who the token is and where the kinds live.
    assert_eq!(poll().status, 404);
    let before = gets_answered(&lethe);
    assert_eq!(poll().status, 404);
    let after = gets_answered(&lethe);
    let made: Vec<(String, u64)> = after
        .iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect();
    let reads: u64 = made.iter().map(|(_, n)| n).sum();
    assert!(reads <= 3, "{reads} reads for one poll: {made:?}");
    assert!(made.iter().any(|(k, _)| k == "GET orgs"), "{made:?}");
}

/// What `cf create-org` and `cf create-space` send after the create: the creator gets the
/// manager role, through which the cluster then lets them work in the org.
#[test]
fn roles_assigned_through_the_api_give_their_rights() {
    let lethe = start(&[]);
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "roles-org");
    let hidden = call(
        &lethe,
        "GET",
        &format!("/v3/organizations/{org}"),
        Some(ALICE),
        None,
    );
    assert_eq!(hidden.status, 404, "{}", hidden.body);
    let role = format!(
        r#"{{"type":"organization_manager","relationships":{{"user":{{"data":{{"username":"alice"}}}},"organization":{{"data":{{"guid":"{org}"}}}}}}}}"#
    );
    let r = call(&lethe, "POST", "/v3/roles", Some(&admin), Some(&role));
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["type"], "organization_manager");
    let seen = call(
        &lethe,
        "GET",
        &format!("/v3/organizations/{org}"),
        Some(ALICE),
        None,
    );
    assert_eq!(seen.status, 200, "{}", seen.body);
    // As org manager, alice creates a space and makes herself its developer.
    let body = format!(
        r#"{{"name":"work","relationships":{{"organization":{{"data":{{"guid":"{org}"}}}}}}}}"#
    );
    let space = call(&lethe, "POST", "/v3/spaces", Some(ALICE), Some(&body));
    assert_eq!(space.status, 201, "{}", space.body);
    let space = space.json()["guid"].as_str().expect("guid").to_string();
    let role = format!(
        r#"{{"type":"space_developer","relationships":{{"user":{{"data":{{"username":"alice"}}}},"space":{{"data":{{"guid":"{space}"}}}}}}}}"#
    );
    let r = call(&lethe, "POST", "/v3/roles", Some(ALICE), Some(&role));
    assert_eq!(r.status, 201, "{}", r.body);
    // Bob has no role: he may not hand one out.
    let role = format!(
        r#"{{"type":"organization_user","relationships":{{"user":{{"data":{{"username":"bob"}}}},"organization":{{"data":{{"guid":"{org}"}}}}}}}}"#
    );
    let r = call(&lethe, "POST", "/v3/roles", Some(BOB), Some(&role));
    assert_eq!((r.status, r.cf_code()), (422, 10008), "{}", r.body);
}

/// `GET /whoami`, which the cf CLI calls before its commands on a Cloud Foundry on Kubernetes:
/// the caller's user name and kind, from the cluster.
#[test]
fn whoami_names_the_caller_as_the_cluster_knows_them() {
    let lethe = start(&[]);
    let r = call(&lethe, "GET", "/whoami", Some(ALICE), None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"name": "alice", "kind": "User"})
    );
    let r = call(&lethe, "GET", "/whoami", None, None);
    assert_eq!((r.status, r.cf_code()), (401, 10002), "{}", r.body);
    let r = call(&lethe, "GET", "/whoami", Some("not-a-token"), None);
    assert_eq!((r.status, r.cf_code()), (401, 1000), "{}", r.body);
}

#[test]
fn root_and_v3_links_use_the_external_url() {
    let lethe = start(&[("LETHE_VAR_EXTERNAL_URL", "https://api.example.test")]);
    let root = call(&lethe, "GET", "/", None, None);
    assert_eq!(root.status, 200);
    assert_eq!(
        root.json()["links"]["cloud_controller_v3"]["href"],
        "https://api.example.test/v3"
    );
    let v3 = call(&lethe, "GET", "/v3", None, None);
    assert_eq!(
        v3.json()["links"]["organizations"]["href"],
        "https://api.example.test/v3/organizations"
    );
}

#[test]
fn data_job_deletions_are_answered_by_the_shared_jobs_endpoint() {
    let lethe = start(&[]);
    let admin = lethe.admin_token();
    let body = r#"{"job_name": "ingest", "team": "alpha", "config": {"schedule": {"schedule_cron": "*/5 * * * *"}}}"#;
    let created = call(
        &lethe,
        "POST",
        "/data-jobs/for-team/alpha/jobs",
        Some(&admin),
        Some(body),
    );
    assert_eq!(created.status, 201, "{}", created.body);
    let uid = created.json()["uid"].as_str().expect("uid").to_string();
    let deleted = call(
        &lethe,
        "DELETE",
        "/data-jobs/for-team/alpha/jobs/ingest",
        Some(&admin),
        None,
    );
    assert_eq!(deleted.status, 202, "{}", deleted.body);
    let location = deleted.header("location").expect("Location").to_string();
    assert!(
        location.ends_with(&format!("/v3/jobs/data_job.delete~{uid}")),
        "{location}"
    );
    // /v3/jobs/:guid is the CF job-status component's route; it delegates data-jobs GUIDs.
    let job = wait_for_state(
        &lethe,
        &location,
        &admin,
        "COMPLETE",
        Duration::from_secs(30),
    );
    assert_eq!(job["operation"], "data_job.delete");
    let malformed = call(
        &lethe,
        "GET",
        "/v3/jobs/data_job.delete~not-a-uuid",
        Some(&admin),
        None,
    );
    assert_eq!((malformed.status, malformed.cf_code()), (404, 10010));
}

/// A failing API server at start is waited for, not a reason to exit: with half of all requests
/// answered 503 from the very start, the manifests are applied (each write whose outcome is
/// unknown made again after a fresh read), the ServiceAccount's token is taken, and lethe serves.
#[test]
fn start_rides_out_a_failing_api_server() {
    if support::external_kubeconfig().is_some() {
        eprintln!(
            "skipping start_rides_out_a_failing_api_server: it needs the embedded cluster's faults"
        );
        return;
    }
    let faults = tempfile::tempdir().expect("tempdir");
    let path = faults.path().join("faults.json");
    std::fs::write(&path, r#"{"error_rate": 0.5, "error_status": 503}"#).expect("faults");
    let lethe = start(&[("LETHE_CLUSTER_FAULTS", &path.to_string_lossy())]);
    let log = lethe.log();
    assert!(
        log.contains("trying again"),
        "no fault was met at start:\n{log}"
    );
    assert!(
        log.contains("host identity: system:serviceaccount:lethe-system:lethe"),
        "{log}"
    );
    let r = call(&lethe, "GET", "/", None, None);
    assert_eq!(r.status, 200, "{}", r.body);
}

/// The cf-reconciler stays correct and finishes an org's deletion (its spaces, their namespaces,
/// the org's namespace, the org) while its client-side rate limit (2 requests/s, burst 2) makes
/// it wait; the wait shows in the metrics.
#[test]
fn a_throttled_reconciler_finishes_an_org_deletion() {
    let manifest = support::shipped_manifest();
    let limits = "# controller-runtime's defaults (client-go's are 5 and 10).\nkube_qps = 20\nkube_burst = 30\n";
    assert!(manifest.contains(limits), "the cf-reconciler's limits");
    let manifest = manifest.replace(limits, "kube_qps = 2\nkube_burst = 2\n");
    // On the cluster the other tests use (KUBECONFIG's, when set), so its administrator's token
    // is the one lethe's cluster knows.
    let lethe = Lethe::up_app_manifest(&manifest, &[], &[]);
    let admin = lethe.admin_token();
    let org = create_org(&lethe, "throttled-org");
    let spaces = [
        create_space(&lethe, &org, "s1"),
        create_space(&lethe, &org, "s2"),
    ];
    let location = delete_org(&lethe, &org, &admin);
    wait_for_state(
        &lethe,
        &location,
        &admin,
        "COMPLETE",
        Duration::from_secs(120),
    );
    for name in spaces.iter().chain([&org]) {
        let (found, _, _) = lethe.kubectl(&["get", "namespace", name]);
        assert!(!found, "namespace {name} gone");
    }
    let (waited, metrics) = lethe.rate_limit_wait_seconds("cf-reconciler");
    assert!(
        waited > 0.0,
        "the limiter made the reconciler wait: {metrics}"
    );
}

/// One resource a deletion job of `job_types = "korifi"` follows: its job type, its Cloud
/// Controller collection, kubectl's name for its kind, where it lives, its name, and its guid
/// (the name, but for a role: the label on its RoleBinding).
struct Deletable {
    job_type: &'static str,
    collection: &'static str,
    resource: &'static str,
    namespace: String,
    name: String,
    guid: String,
}

/// `job_types = "korifi"` end to end, on CRDs shaped like Korifi's
/// (`tests/fixtures/korifi-crds.json`) with cf-api's and cf-job-status's accounts granted exactly
/// `deploy/korifi/`'s reads, by lethe itself on the embedded cluster: every job type through each of its states, as alice (who may see and delete what is in
/// the org's, the space's and the root namespace, and nothing else) and as eve (who may see
/// nothing):
/// - deletions of every deletable kind through its DELETE route: PROCESSING → COMPLETE, and
///   PROCESSING → FAILED (past `deletion_timeout_seconds`) → COMPLETE;
/// - creates and updates that Korifi's controllers carry out: PROCESSING or POLLING → COMPLETE
///   once Ready at the resource's generation, and Ready=False for a terminal reason → FAILED;
/// - the space's two special jobs.
#[test]
fn every_korifi_job_type_goes_through_its_states_as_each_caller_sees_it() {
    const TIMEOUT_S: u64 = 15;
    let root_ns = unique("kroot");
    let lethe = start(&[
        ("LETHE_VAR_JOB_TYPES", "korifi"),
        ("LETHE_VAR_CF_ROOT_NAMESPACE", &root_ns),
        ("LETHE_VAR_DELETION_TIMEOUT_SECONDS", &TIMEOUT_S.to_string()),
    ]);
    let repo = support::repo_root();
    lethe.kubectl_ok(&[
        "apply",
        "-f",
        &repo
            .join("tests/fixtures/korifi-crds.json")
            .to_string_lossy(),
    ]);
    // On the embedded cluster lethe granted the preset's reads itself (spin.toml's
    // kubernetes_manifests_when); on a cluster of its own an administrator applies them.
    if support::external_kubeconfig().is_some() {
        lethe.kubectl_ok(&[
            "apply",
            "-f",
            &repo.join("deploy/korifi/rbac.yaml").to_string_lossy(),
        ]);
    } else {
        let bound = lethe.kubectl_ok(&[
            "get",
            "clusterrolebinding",
            "lethe-korifi-jobs",
            "-o",
            "jsonpath={.subjects[*].name}",
        ]);
        assert_eq!(bound, "lethe-cf-api lethe-cf-job-status");
    }
    let space = unique("kspace");
    let orgs = [unique("korg-a"), unique("korg-b")];
    for ns in [&root_ns, &space, &orgs[0], &orgs[1]] {
        lethe.kubectl_ok(&["create", "namespace", ns]);
    }
    let korifi = |kind: &str, ns: &str, name: &str, spec: Json| {
        serde_json::json!({"apiVersion": "korifi.cloudfoundry.org/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": ns, "finalizers": ["example.com/hold"]},
            "spec": spec})
    };
    let access = unique("korifi-user");
    let mut objects = vec![serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": access},
        "rules": [
            {"apiGroups": ["korifi.cloudfoundry.org"], "verbs": ["get", "list", "delete"],
             "resources": ["cforgs", "cfspaces", "cfapps", "cfroutes", "cfdomains",
                           "cfservicebrokers", "cfserviceinstances", "cfservicebindings"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "verbs": ["get", "list", "delete"],
             "resources": ["rolebindings"]}]})];
    for ns in [&root_ns, &space, &orgs[0], &orgs[1]] {
        objects.push(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "alice-korifi", "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": access},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}));
    }

    // Two of each deletable kind: set 0 is released before its timeout, set 1 after.
    let mut sets: [Vec<Deletable>; 2] = [Vec::new(), Vec::new()];
    for (i, set) in sets.iter_mut().enumerate() {
        let name = |prefix: &str| unique(&format!("{prefix}-{i}"));
        let mapped = serde_json::json!({"destinations": [{"guid": "d1", "appRef": {"name": "a"}}]});
        let role = name("role-guid");
        let made = [
            (
                "org",
                "organizations",
                "cforgs",
                "CFOrg",
                root_ns.clone(),
                orgs[i].clone(),
            ),
            (
                "space",
                "spaces",
                "cfspaces",
                "CFSpace",
                orgs[0].clone(),
                name("kspace"),
            ),
            ("app", "apps", "cfapps", "CFApp", space.clone(), name("app")),
            (
                "route",
                "routes",
                "cfroutes",
                "CFRoute",
                space.clone(),
                name("route"),
            ),
            (
                "domain",
                "domains",
                "cfdomains",
                "CFDomain",
                root_ns.clone(),
                name("domain"),
            ),
            (
                "service_broker",
                "service_brokers",
                "cfservicebrokers",
                "CFServiceBroker",
                root_ns.clone(),
                name("broker"),
            ),
            (
                "managed_service_instance",
                "service_instances",
                "cfserviceinstances",
                "CFServiceInstance",
                space.clone(),
                name("si"),
            ),
            (
                "managed_service_binding",
                "service_credential_bindings",
                "cfservicebindings",
                "CFServiceBinding",
                space.clone(),
                name("binding"),
            ),
        ];
        for (job_type, collection, resource, kind, namespace, name) in made {
            let spec = if kind == "CFRoute" {
                mapped.clone()
            } else {
                serde_json::json!({"displayName": name})
            };
            objects.push(korifi(kind, &namespace, &name, spec));
            set.push(Deletable {
                job_type,
                collection,
                resource,
                guid: name.clone(),
                namespace,
                name,
            });
        }
        let binding = format!("binding-of-{role}");
        objects.push(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": binding, "namespace": space, "finalizers": ["example.com/hold"],
                         "labels": {"cloudfoundry.org/role-guid": role}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": access},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"}]}));
        set.push(Deletable {
            job_type: "role",
            collection: "roles",
            resource: "rolebindings",
            namespace: space.clone(),
            name: binding,
            guid: role,
        });
    }
    // What Korifi's controllers work on: a broker, instances and bindings being made, and a
    // route the space's `delete_unapped_routes` waits for.
    let broker = unique("broker-made");
    let instances = [unique("si-ready"), unique("si-failed")];
    let bindings = [unique("binding-ready"), unique("binding-failed")];
    let unmapped = unique("route-unmapped");
    let mut made = vec![
        korifi(
            "CFServiceBroker",
            &root_ns,
            &broker,
            serde_json::json!({"name": "b"}),
        ),
        korifi(
            "CFRoute",
            &space,
            &unmapped,
            serde_json::json!({"destinations": []}),
        ),
    ];
    for name in &instances {
        made.push(korifi(
            "CFServiceInstance",
            &space,
            name,
            serde_json::json!({"type": "managed"}),
        ));
    }
    for name in &bindings {
        made.push(korifi(
            "CFServiceBinding",
            &space,
            name,
            serde_json::json!({"type": "app"}),
        ));
    }
    // A user-provided instance and a binding to it, whose DELETEs are finished at once.
    let user_provided = unique("si-user");
    let user_binding = unique("binding-user");
    made.push(korifi(
        "CFServiceInstance",
        &space,
        &user_provided,
        serde_json::json!({"type": "user-provided"}),
    ));
    made.push(korifi(
        "CFServiceBinding",
        &space,
        &user_binding,
        serde_json::json!({"type": "app", "service": {"kind": "CFServiceInstance", "name": user_provided}}),
    ));
    for object in &mut made {
        object["metadata"]["finalizers"] = serde_json::json!([]);
    }
    objects.extend(made);
    let file = tempfile::NamedTempFile::new().expect("temp file");
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
    std::fs::write(file.path(), list.to_string()).expect("write");
    // The CRDs are served within moments of their creation.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !lethe
        .kubectl(&["apply", "-f", &file.path().to_string_lossy()])
        .0
    {
        assert!(Instant::now() < deadline, "Korifi's kinds never served");
        std::thread::sleep(Duration::from_millis(250));
    }

    let job = |operation: &str, guid: &str| format!("{}/v3/jobs/{operation}~{guid}", lethe.url);
    let release = |d: &Deletable| {
        lethe.kubectl_ok(&[
            "patch",
            d.resource,
            &d.name,
            "-n",
            &d.namespace,
            "--type=merge",
            "-p",
            r#"{"metadata": {"finalizers": null}}"#,
        ]);
    };
    // Deleted through lethe as alice (eve, who may not see it, is told it does not exist): the
    // same job on a repeated DELETE, and PROCESSING at the first poll, whoever polls
    // (SECURITY.md, "What a job poll reveals").
    let delete = |d: &Deletable| -> String {
        let path = format!("/v3/{}/{}", d.collection, d.guid);
        let hidden = call(&lethe, "DELETE", &path, Some(EVE), None);
        assert_eq!(
            (hidden.status, hidden.cf_code()),
            (404, 10010),
            "{path}: {}",
            hidden.body
        );
        let location = job(&format!("{}.delete", d.job_type), &d.guid);
        for _ in 0..2 {
            let accepted = call(&lethe, "DELETE", &path, Some(ALICE), None);
            assert_eq!(accepted.status, 202, "{path}: {}", accepted.body);
            assert_eq!(
                accepted.header("location"),
                Some(location.as_str()),
                "{path}"
            );
        }
        for token in [ALICE, EVE] {
            let (status, body) = job_state(&lethe, &location, token);
            assert_eq!(
                (status, body["state"].as_str()),
                (200, Some("PROCESSING")),
                "{body}"
            );
        }
        location
    };
    let late: Vec<String> = sets[1].iter().map(delete).collect();
    for d in &sets[0] {
        let location = delete(d);
        release(d);
        for token in [ALICE, EVE] {
            wait_for_state(
                &lethe,
                &location,
                token,
                "COMPLETE",
                Duration::from_secs(30),
            );
        }
    }

    // Creates and updates, while set 1 waits for its timeout: only alice learns of them.
    let status = |resource: &str,
                  ns: &str,
                  name: &str,
                  ready: &str,
                  reason: &str,
                  generation: i64| {
        let patch = serde_json::json!({"status": {"observedGeneration": generation, "conditions": [
            {"type": "Ready", "status": ready, "reason": reason, "message": format!("{reason} here"),
             "lastTransitionTime": "2026-12-06T00:00:00Z"}]}});
        lethe.kubectl_ok(&[
            "patch",
            resource,
            name,
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch.to_string(),
        ]);
    };
    let polled = |location: &str, state: &str| {
        let (code, body) = job_state(&lethe, location, ALICE);
        assert_eq!(
            (code, body["state"].as_str()),
            (200, Some(state)),
            "{location}: {body}"
        );
        let (code, body) = job_state(&lethe, location, EVE);
        assert_eq!(
            (code, body["errors"][0]["code"].as_i64()),
            (404, Some(10010)),
            "{body}"
        );
    };
    let broker_create = job("service_broker.create", &broker);
    polled(&broker_create, "PROCESSING");
    status("cfservicebrokers", &root_ns, &broker, "True", "Ready", 1);
    wait_for_state(
        &lethe,
        &broker_create,
        ALICE,
        "COMPLETE",
        Duration::from_secs(10),
    );
    lethe.kubectl_ok(&[
        "patch",
        "cfservicebrokers",
        &broker,
        "-n",
        &root_ns,
        "--type=merge",
        "-p",
        r#"{"spec": {"name": "renamed"}}"#,
    ]);
    let broker_update = job("service_broker.update", &broker);
    polled(&broker_update, "PROCESSING");
    status("cfservicebrokers", &root_ns, &broker, "True", "Ready", 2);
    wait_for_state(
        &lethe,
        &broker_update,
        ALICE,
        "COMPLETE",
        Duration::from_secs(10),
    );
    for (job_type, resource, names, failure) in [
        (
            "managed_service_instance",
            "cfserviceinstances",
            &instances,
            "ProvisionFailed",
        ),
        (
            "managed_service_binding",
            "cfservicebindings",
            &bindings,
            "BindingFailed",
        ),
    ] {
        let [ready, failed] = names
            .each_ref()
            .map(|n| job(&format!("{job_type}.create"), n));
        polled(&ready, "POLLING");
        polled(&failed, "POLLING");
        status(resource, &space, &names[0], "True", "Ready", 1);
        status(resource, &space, &names[1], "False", failure, 1);
        wait_for_state(&lethe, &ready, ALICE, "COMPLETE", Duration::from_secs(10));
        let failed = wait_for_state(&lethe, &failed, ALICE, "FAILED", Duration::from_secs(10));
        assert_eq!(failed["errors"][0]["code"], 10008, "{failed}");
        assert!(
            failed["errors"][0]["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&format!("{failure} here"))),
            "the condition's message: {failed}"
        );
    }

    // A user-provided instance and its binding: `204`, no job, and gone.
    for (path, resource, name) in [
        (
            "service_credential_bindings",
            "cfservicebindings",
            &user_binding,
        ),
        ("service_instances", "cfserviceinstances", &user_provided),
    ] {
        let done = call(
            &lethe,
            "DELETE",
            &format!("/v3/{path}/{name}"),
            Some(ALICE),
            None,
        );
        assert_eq!(
            (done.status, done.header("location")),
            (204, None),
            "{path}: {}",
            done.body
        );
        let (found, _, _) = lethe.kubectl(&["get", resource, name, "-n", &space]);
        assert!(!found, "{name} deleted");
    }

    // The space's special jobs: a manifest is applied before Korifi answers; unmapped routes are
    // gone once none is left, which only a caller who may list the space's routes learns.
    let applied = job("space.apply_manifest", &space);
    for token in [ALICE, EVE] {
        let (code, body) = job_state(&lethe, &applied, token);
        assert_eq!(
            (code, body["state"].as_str()),
            (200, Some("COMPLETE")),
            "{body}"
        );
    }
    let unapped = job("space.delete_unapped_routes", &space);
    polled(&unapped, "PROCESSING");
    lethe.kubectl_ok(&["delete", "cfroutes", &unmapped, "-n", &space]);
    wait_for_state(&lethe, &unapped, ALICE, "COMPLETE", Duration::from_secs(10));

    // Set 1: FAILED once its deletion is older than the timeout, for as long as it is held;
    // COMPLETE once released.
    for (d, location) in sets[1].iter().zip(&late) {
        for token in [ALICE, EVE] {
            let failed = wait_for_state(
                &lethe,
                location,
                token,
                "FAILED",
                Duration::from_secs(TIMEOUT_S + 30),
            );
            assert_eq!(failed["errors"][0]["code"], 10008, "{failed}");
        }
        release(d);
        for token in [ALICE, EVE] {
            wait_for_state(&lethe, location, token, "COMPLETE", Duration::from_secs(30));
        }
    }
    for ns in [&root_ns, &space, &orgs[0], &orgs[1]] {
        lethe.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
    }
    lethe.kubectl_ok(&["delete", "clusterrole", &access]);
}
