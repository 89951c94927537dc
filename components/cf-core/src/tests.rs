//! Behaviour of the CF slice against the in-memory fake.

use serde_json::json;

use lethe_guest::Request;
use lethe_guest::kube::{Collection, Identity, Kube, Object};

use crate::config::Settings;
use crate::jobs::{JobState, job_status};
use crate::kind::ResourceKind;
use crate::names::NameClaim;
use crate::ownership::Owner;
use crate::reconcile::{Backoff, pass};
use crate::{FINALIZER, access, api, deletion};
use lethe_guest::fake::{FakeCluster, FakeHost};

const ORG: &str = "0f1c2a4e-1b2c-4d5e-8f90-123456789abc";
const SPACE: &str = "5a9b2a4e-1b2c-4d5e-8f90-123456789abc";

fn caller(token: &str) -> Identity {
    Identity::Caller(token.into())
}

fn setup() -> (FakeCluster, Settings) {
    let cluster = FakeCluster::new();
    let fake = FakeHost::on(&cluster);
    let settings = Settings::from_env(&fake).expect("defaults");
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cf"}}));
    let org = fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": ORG, "namespace": "cf", "finalizers": [FINALIZER]}, "spec": {"displayName": "o"}}));
    put_owned_namespace(&fake, "org", &org);
    let space = fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Space",
        "metadata": {"name": SPACE, "namespace": ORG, "finalizers": [FINALIZER]}, "spec": {"displayName": "s", "orgGUID": ORG}}));
    put_owned_namespace(&fake, "space", &space);
    // Their names are claimed, as the API's creates claim them.
    claim(&fake, &settings, ResourceKind::Org, &org);
    claim(&fake, &settings, ResourceKind::Space, &space);
    // An org user sees the org (its spaces may be listed) but reads no space; an org manager
    // reads and deletes them (it may list the org's role bindings).
    fake.grant("orguser", "list", "Space", ORG);
    fake.grant("orguser", "get", "Space", ORG);
    fake.grant("manager", "*", "Space", ORG);
    fake.grant("manager", "list", "RoleBinding", ORG);
    fake.grant("nobody", "list", "Namespace", "*");
    (cluster, settings)
}

/// The cf-reconciler component's database, migrated, as its passes keep their state in it.
fn reconciler_sql() -> lethe_guest::fake::FakeSql {
    lethe_guest::fake::FakeSql::migrated(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../cf-reconciler/migrations"
    ))
}

/// Claims the name of `object`, of `kind`, as its create through the API would have.
fn claim(fake: &FakeHost<'_>, settings: &Settings, kind: ResourceKind, object: &Object) {
    let t = settings.kind(kind).expect("configured");
    let claim = NameClaim::of(&settings.root_namespace, kind, t, object).expect("named");
    assert!(
        claim
            .take(fake, fake, &object.target.name)
            .expect("claimed")
    );
}

/// The RoleBindings in `namespace`.
fn role_bindings(fake: &FakeHost<'_>, namespace: &str) -> Vec<Object> {
    fake.list_all(
        &Identity::Privileged,
        &Collection::new(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            Some(namespace),
        ),
        &Default::default(),
    )
    .expect("role bindings")
}

/// Puts the namespace `owner` owns, with the mark lethe gives it.
fn put_owned_namespace(fake: &FakeHost<'_>, type_name: &str, owner: &Object) {
    let labels = Owner::new(type_name, owner).labels();
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": owner.target.name, "labels": labels}}));
}

#[derive(Default)]
struct NoBackoff;

impl Backoff for NoBackoff {
    fn due(&self, _key: &str, _now_ms: i64) -> bool {
        true
    }
    fn failed(&self, _key: &str, _now_ms: i64, _reason: &str) {}
    fn succeeded(&self, _key: &str) {}
    fn due_now(&self, _now_ms: i64) -> Vec<String> {
        Vec::new()
    }
}

fn job(
    fake: &FakeHost<'_>,
    settings: &Settings,
    guid: &str,
    token: &str,
) -> Result<crate::jobs::Job, crate::errors::HttpError> {
    job_status(fake, fake, settings, guid, &caller(token))
}

#[test]
fn admin_delete_marks_the_org_deleting_and_the_job_is_processing() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let j =
        deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("admin")).expect("accepted");
    assert_eq!(j.render(), format!("org.delete~{ORG}"));
    assert!(
        fake.object("Org", "cf", ORG)
            .expect("still there")
            .metadata
            .deletion_timestamp
            .is_some()
    );
    let status = job(&fake, &settings, &j.render(), "admin").expect("job");
    assert_eq!(status.state, JobState::Processing);
}

#[test]
fn delete_of_an_invisible_org_is_404_and_of_a_visible_but_forbidden_one_is_403() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let hidden = deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("nobody"))
        .expect_err("hidden");
    assert_eq!((hidden.status, hidden.errors[0].code), (404, 10010));
    let forbidden = deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("orguser"))
        .expect_err("forbidden");
    assert_eq!((forbidden.status, forbidden.errors[0].code), (403, 10003));
    assert!(
        fake.object("Org", "cf", ORG)
            .expect("kept")
            .metadata
            .deletion_timestamp
            .is_none()
    );
}

#[test]
fn org_manager_may_delete_a_space_but_org_user_may_not() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    // An org user does not read the org's spaces at all (Cloud Controller's reading roles are
    // the space roles and the org manager): 404.
    let e = deletion::delete(&fake, &fake, &settings, "space", SPACE, &caller("orguser"))
        .expect_err("user");
    assert_eq!(e.status, 404);
    deletion::delete(&fake, &fake, &settings, "space", SPACE, &caller("manager"))
        .expect("manager deletes");
}

#[test]
fn bad_token_is_401_invalid_auth_token() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let e = deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("bad"))
        .expect_err("bad token");
    assert_eq!((e.status, e.errors[0].code), (401, 1000));
    let e = job(&fake, &settings, &format!("org.delete~{ORG}"), "bad").expect_err("bad token");
    assert_eq!(e.status, 401);
}

#[test]
fn job_is_complete_once_the_resource_is_gone() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let j = job(
        &fake,
        &settings,
        "org.delete~6f1c2a4e-0000-4d5e-8f90-123456789abc",
        "admin",
    )
    .expect("job");
    assert_eq!(j.state, JobState::Complete);
    assert!(j.errors.is_empty());
}

#[test]
fn org_job_stays_processing_after_the_callers_role_bindings_are_gone() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("admin")).expect("accepted");
    // "nobody" cannot see the org's namespace (as if the cascade had removed their bindings).
    let j = job(&fake, &settings, &format!("org.delete~{ORG}"), "nobody").expect("job");
    assert_eq!(
        j.state,
        JobState::Processing,
        "completion comes from the org record, not permissions"
    );
}

#[test]
fn user_with_no_role_gets_complete_for_an_org_that_is_not_being_deleted() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let j = job(&fake, &settings, &format!("org.delete~{ORG}"), "nobody").expect("job");
    assert_eq!(j.state, JobState::Complete);
}

#[test]
fn visible_org_that_is_not_being_deleted_is_404_after_a_bounded_reread() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let before = fake.now.get();
    let e = job(&fake, &settings, &format!("org.delete~{ORG}"), "admin").expect_err("404");
    assert_eq!(
        (e.status, e.errors[0].detail.as_str()),
        (404, crate::errors::JOB_NOT_FOUND)
    );
    let waited = fake.now.get() - before;
    assert!(
        (2000..3000).contains(&waited),
        "re-read for job_reread_ms, waited {waited}"
    );
}

/// A poll of a resource that is not being deleted reads it twice, at the start and at the end
/// of the re-read window, then asks whether the caller may see it: at most three reads, not one
/// every few milliseconds, so a caller polling such jobs cannot multiply its load on the cluster.
#[test]
fn a_poll_of_a_resource_not_being_deleted_makes_at_most_three_reads() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    for (who, answer) in [("admin", "404"), ("nobody", "COMPLETE")] {
        let guid = format!("org.delete~{ORG}");
        let before = fake.reads.get();
        let result = job(&fake, &settings, &guid, who);
        let org_reads = fake.reads.get() - before;
        match answer {
            "404" => assert_eq!(result.expect_err("404").status, 404),
            _ => assert_eq!(result.expect("job").state, JobState::Complete),
        }
        assert!(org_reads <= 3, "{who}: {org_reads} reads");
    }
}

#[test]
fn stuck_deletion_turns_failed_at_the_timeout_and_complete_when_released() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    fake.patch(
        &Identity::Privileged,
        &fake.object("Org", "cf", ORG).expect("org").target,
        &lethe_guest::kube::Patch::Merge(
            json!({"metadata": {"finalizers": [FINALIZER, "example.com/stuck"]}}),
        ),
    )
    .expect("add foreign finalizer");
    deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("admin")).expect("accepted");
    let guid = format!("org.delete~{ORG}");
    let before = job(&fake, &settings, &guid, "admin").expect("job");
    assert_eq!(
        before.warnings,
        Vec::<String>::new(),
        "lethe's cleanup is not done yet: no warning about others"
    );
    for _ in 0..6 {
        pass(&fake, &fake, &settings, &NoBackoff);
        fake.run_namespace_controller();
    }
    let held = job(&fake, &settings, &guid, "admin").expect("job");
    assert_eq!(held.state, JobState::Processing);
    assert_eq!(held.warnings.len(), 1, "{:?}", held.warnings);
    assert!(
        held.warnings[0].contains("example.com/stuck"),
        "{:?}",
        held.warnings
    );
    // lethe's part is done; the org says what holds it, once, however many passes come, and
    // each pass reports the deletion as still under way.
    for _ in 0..3 {
        // Far enough apart that a repeated Event would be counted in its series.
        fake.advance(lethe_guest::events::SERIES_EVERY_MS + 1);
        let report = pass(&fake, &fake, &settings, &NoBackoff);
        assert!(
            report
                .deletions
                .iter()
                .any(|d| d.item == format!("org/{ORG}")),
            "{:?}",
            report.deletions
        );
    }
    let org = fake.object("Org", "cf", ORG).expect("org");
    assert_eq!(
        lethe_guest::conditions::condition(&org, "Blocked"),
        Some(("True", "ForeignFinalizers"))
    );
    let blocked: Vec<Object> = cluster
        .all("Event")
        .into_iter()
        .filter(|e| e.json()["reason"] == "DeletionBlocked")
        .collect();
    assert_eq!(blocked.len(), 1);
    assert!(
        blocked[0].json().get("series").is_none(),
        "recorded once, not again on each pass: {}",
        blocked[0].json()
    );
    assert!(
        blocked[0].json()["note"]
            .as_str()
            .is_some_and(|n| n.contains("example.com/stuck")),
        "{:?}",
        blocked[0].json()
    );
    fake.now
        .set(fake.now.get() + 121_000 - 3 * (lethe_guest::events::SERIES_EVERY_MS + 1));
    let failed = job(&fake, &settings, &guid, "admin").expect("job");
    assert_eq!(failed.state, JobState::Failed);
    assert_eq!(failed.errors[0].code, 10008);
    assert_eq!(
        failed.errors[0].detail,
        format!("org deletion timed out, check the remaining \"{ORG}\" resource")
    );
    fake.clear_finalizers("Org", "cf", ORG);
    assert_eq!(
        job(&fake, &settings, &guid, "admin").expect("job").state,
        JobState::Complete
    );
}

#[test]
fn reconciler_finalizes_an_org_with_its_spaces_and_namespaces() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("admin")).expect("accepted");
    let (mut deleted, mut updated) = (0, 0);
    for _ in 0..8 {
        let report = pass(&fake, &fake, &settings, &NoBackoff);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        (deleted, updated) = (deleted + report.deleted, updated + report.updated);
        fake.run_namespace_controller();
    }
    // What the passes reported: the space and both namespaces deleted, both finalizers removed.
    assert_eq!((deleted, updated), (3, 2));
    assert!(!fake.exists("Org", "cf", ORG));
    assert!(!fake.exists("Space", ORG, SPACE));
    assert!(!fake.exists("Namespace", "", ORG));
    assert!(!fake.exists("Namespace", "", SPACE));
    // Each step is an Event on the object it was done for. The space's went with the org's
    // namespace, where they lived, as any Event in a deleted namespace does.
    let said: Vec<(String, String)> = cluster
        .all("Event")
        .iter()
        .map(|e| {
            let e = e.json();
            let reason = e["reason"].as_str().unwrap_or_default().to_string();
            (
                reason,
                e["regarding"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    for step in [
        ("SpaceDeleted", ORG),
        ("NamespaceDeleted", ORG),
        ("Released", ORG),
    ] {
        assert!(
            said.contains(&(step.0.to_string(), step.1.to_string())),
            "{step:?} in {said:?}"
        );
    }
}

#[test]
fn reconciler_adds_missing_finalizers_and_namespaces() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": "bare", "namespace": "cf"}, "spec": {"displayName": "bare"}}));
    let first = pass(&fake, &fake, &settings, &NoBackoff);
    let second = pass(&fake, &fake, &settings, &NoBackoff);
    // The finalizer, then the namespace: each counted as made.
    assert_eq!((first.created, second.created), (1, 1));
    assert_eq!(
        fake.object("Org", "cf", "bare")
            .expect("org")
            .metadata
            .finalizers,
        vec![FINALIZER.to_string()]
    );
    assert!(fake.exists("Namespace", "", "bare"));
}

fn api_request(method: &str, path: &str, token: Option<&str>, body: &str) -> Request {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    let mut headers = vec![(
        "spin-full-url".to_string(),
        format!("http://api.test{path}").into_bytes(),
    )];
    if let Some(t) = token {
        headers.push(("authorization".into(), format!("Bearer {t}").into_bytes()));
    }
    Request {
        method: method.into(),
        path: path.into(),
        query: query.into(),
        headers: headers.into(),
        body: body.as_bytes().to_vec(),
        ..Default::default()
    }
}

#[test]
fn api_creates_lists_and_rejects_duplicate_orgs() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let created = api::handle(
        &fake,
        &fake,
        &api_request(
            "POST",
            "/v3/organizations",
            Some("admin"),
            r#"{"name":"new"}"#,
        ),
    );
    assert_eq!(created.status, 201, "{:?}", created.json_body());
    let guid = created.json_body().expect("json")["guid"]
        .as_str()
        .expect("guid")
        .to_string();
    assert!(
        fake.exists("Namespace", "", &guid),
        "the org's namespace is created"
    );
    let dup = api::handle(
        &fake,
        &fake,
        &api_request(
            "POST",
            "/v3/organizations",
            Some("admin"),
            r#"{"name":"new"}"#,
        ),
    );
    assert_eq!(dup.status, 422);
    let listed = api::handle(
        &fake,
        &fake,
        &api_request("GET", "/v3/organizations?names=new", Some("admin"), ""),
    );
    let body = listed.json_body().expect("json");
    assert_eq!(body["pagination"]["total_results"], 1);
    assert_eq!(body["resources"][0]["guid"], guid.as_str());
}

#[test]
fn names_are_unique_without_case_and_have_no_control_characters() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let post = |path: &str, token: &str, body: &str| {
        let r = api::handle(&fake, &fake, &api_request("POST", path, Some(token), body));
        let detail = r.json_body().expect("json")["errors"][0]["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        (r.status, detail)
    };
    assert_eq!(
        post("/v3/organizations", "admin", r#"{"name":"O"}"#),
        (422, "Organization 'O' already exists.".to_string())
    );
    assert_eq!(
        post("/v3/organizations", "admin", "{\"name\":\"tab\\tname\"}"),
        (422, "Name must not contain escaped characters".to_string())
    );
    assert_eq!(
        post("/v3/organizations", "admin", r#"{"name":null}"#),
        (422, "Name can't be blank".to_string())
    );
    // Only admins create organizations; others are told so before the body is read.
    assert_eq!(
        post("/v3/organizations", "manager", r#"{"bad":1}"#),
        (
            403,
            "You are not authorized to perform the requested action".to_string()
        )
    );
    let space = format!(
        r#"{{"name":"S","relationships":{{"organization":{{"data":{{"guid":"{ORG}"}}}}}}}}"#
    );
    assert_eq!(
        post("/v3/spaces", "admin", &space),
        (422, "Name must be unique per organization".to_string())
    );
    // The right to create comes before the name, as in Cloud Controller: an org user who may
    // see the org but not create spaces in it is refused, even for a taken name.
    assert_eq!(
        post("/v3/spaces", "orguser", &space),
        (
            403,
            "You are not authorized to perform the requested action".to_string()
        )
    );
    assert_eq!(
        post("/v3/spaces", "manager", &space),
        (422, "Name must be unique per organization".to_string())
    );
}

/// `POST path` with `body` as `token`: the status, and the guid created or the error's detail.
fn post(fake: &FakeHost<'_>, path: &str, token: &str, body: &str) -> (u16, String) {
    let r = api::handle(fake, fake, &api_request("POST", path, Some(token), body));
    let json = r.json_body().expect("json");
    let said = json["guid"]
        .as_str()
        .or(json["errors"][0]["detail"].as_str())
        .unwrap_or_default()
        .to_string();
    (r.status, said)
}

/// The body of a create of the space `name` in the org `org`.
fn space_body(name: &str, org: &str) -> String {
    format!(
        r#"{{"name":"{name}","relationships":{{"organization":{{"data":{{"guid":"{org}"}}}}}}}}"#
    )
}

#[test]
fn a_create_checks_its_name_without_listing_what_else_exists() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    // Many orgs, and many spaces in ORG: a name check that listed them would read them all.
    for i in 0..300 {
        fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": format!("org-{i}"), "namespace": "cf", "finalizers": [FINALIZER]},
            "spec": {"displayName": format!("org {i}")}}));
        fake.put(
            json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Space",
            "metadata": {"name": format!("space-{i}"), "namespace": ORG, "finalizers": [FINALIZER]},
            "spec": {"displayName": format!("space {i}"), "orgGUID": ORG}}),
        );
    }
    let before = fake.objects_read.get();
    let (status, _) = post(&fake, "/v3/organizations", "admin", r#"{"name":"fresh"}"#);
    assert_eq!(status, 201);
    let (status, _) = post(&fake, "/v3/spaces", "admin", &space_body("fresh", ORG));
    assert_eq!(status, 201);
    // Taken names are refused the same way, in either case.
    assert_eq!(
        post(&fake, "/v3/organizations", "admin", r#"{"name":"FRESH"}"#),
        (422, "Organization 'FRESH' already exists.".to_string())
    );
    assert_eq!(
        post(&fake, "/v3/spaces", "admin", &space_body("Fresh", ORG)),
        (422, "Name must be unique per organization".to_string())
    );
    // A space's name is unique within its org only.
    let (_, other_org) = post(&fake, "/v3/organizations", "admin", r#"{"name":"other"}"#);
    let (status, _) = post(
        &fake,
        "/v3/spaces",
        "admin",
        &space_body("fresh", &other_org),
    );
    assert_eq!(status, 201);
    let read = fake.objects_read.get() - before;
    assert!(read < 60, "{read} objects read by seven creates");
}

#[test]
fn a_failed_create_frees_its_name_at_once() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    fake.fail("create", "Org");
    let (status, _) = post(&fake, "/v3/organizations", "admin", r#"{"name":"again"}"#);
    assert_eq!(status, 503);
    fake.heal();
    let (status, _) = post(&fake, "/v3/organizations", "admin", r#"{"name":"again"}"#);
    assert_eq!(status, 201);
}

#[test]
fn a_deleted_orgs_name_is_free_once_its_job_completes() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("admin")).expect("accepted");
    // While it is being deleted, its name is still its own.
    assert_eq!(
        post(&fake, "/v3/organizations", "admin", r#"{"name":"o"}"#).0,
        422
    );
    for _ in 0..8 {
        pass(&fake, &fake, &settings, &NoBackoff);
        fake.run_namespace_controller();
    }
    assert!(!fake.exists("Org", "cf", ORG));
    // Released with the org, not left for a minute as a stale claim.
    assert_eq!(
        post(&fake, "/v3/organizations", "admin", r#"{"name":"o"}"#).0,
        201
    );
    assert_eq!(fake.all("ConfigMap").len(), 1, "only the new org's claim");
}

#[test]
fn the_reconciler_claims_the_names_of_objects_made_outside_the_api() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    // Made with kubectl (no finalizer yet), and made before claims existed (a finalizer).
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": "by-hand", "namespace": "cf"}, "spec": {"displayName": "Hand"}}));
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": "legacy", "namespace": "cf", "finalizers": [FINALIZER]},
        "spec": {"displayName": "Old"}}));
    fake.put(
        json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Space",
        "metadata": {"name": "legacy-space", "namespace": ORG, "finalizers": [FINALIZER]},
        "spec": {"displayName": "old space", "orgGUID": ORG}}),
    );
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    for name in ["hand", "OLD"] {
        let body = format!(r#"{{"name":"{name}"}}"#);
        assert_eq!(post(&fake, "/v3/organizations", "admin", &body).0, 422);
    }
    let space = space_body("Old Space", ORG);
    assert_eq!(post(&fake, "/v3/spaces", "admin", &space).0, 422);
    // A second pass finds every claim and makes none.
    let claims = fake.all("ConfigMap").len();
    pass(&fake, &fake, &settings, &NoBackoff);
    assert_eq!(fake.all("ConfigMap").len(), claims);
}

/// The claim on the org name `name`, made for an org named `name` that is gone since: the claim
/// of a create that crashed before its org was made, or of an org deleted without it.
fn orphan_claim(fake: &FakeHost<'_>, settings: &Settings, name: &str) -> String {
    let org = fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": name, "namespace": "cf"}, "spec": {"displayName": name}}));
    claim(fake, settings, ResourceKind::Org, &org);
    fake.delete(&Identity::Privileged, &org.target, &Default::default())
        .expect("deleted");
    let t = settings.kind(ResourceKind::Org).expect("org type");
    let claim = NameClaim::of(&settings.root_namespace, ResourceKind::Org, t, &org);
    claim.expect("named").target().name
}

/// The claim on the org name `name`.
fn org_name_claim<'a>(settings: &'a Settings, name: &'a str) -> NameClaim<'a> {
    NameClaim {
        root: "cf",
        kind: ResourceKind::Org,
        namespace: "cf",
        t: settings.kind(ResourceKind::Org).expect("org type"),
        name,
    }
}

#[test]
fn a_claim_whose_holder_never_came_is_taken_over_after_a_minute() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    orphan_claim(&fake, &settings, "ghost");
    let body = r#"{"name":"ghost"}"#;
    // A create may still be under way: the name stays taken for a minute.
    assert_eq!(post(&fake, "/v3/organizations", "admin", body).0, 422);
    fake.advance(crate::names::IN_FLIGHT_MS);
    assert_eq!(post(&fake, "/v3/organizations", "admin", body).0, 201);
}

#[test]
fn a_name_taken_again_for_its_holder_stays_its_own_and_another_is_refused() {
    // A create retried after a lost answer, or a full pass's backfill finding the claim a
    // create made, takes the name for the same holder again: it is that holder's already.
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let claim = org_name_claim(&settings, "Mine");
    assert_eq!(claim.take(&fake, &fake, "guid-a"), Ok(true));
    assert_eq!(
        claim.take(&fake, &fake, "guid-a"),
        Ok(true),
        "its own claim"
    );
    assert_eq!(claim.take(&fake, &fake, "guid-b"), Ok(false), "another's");
}

#[test]
fn a_claim_whose_holder_was_renamed_by_hand_frees_the_old_name_after_a_minute() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let (status, guid) = post(&fake, "/v3/organizations", "admin", r#"{"name":"first"}"#);
    assert_eq!(status, 201);
    let body = r#"{"name":"first"}"#;
    // Renamed by hand in case only: it still bears the name, which stays taken.
    cluster.edit("Org", "cf", &guid, |o| {
        o["spec"]["displayName"] = json!("FIRST")
    });
    fake.advance(crate::names::IN_FLIGHT_MS + 1);
    assert_eq!(post(&fake, "/v3/organizations", "admin", body).0, 422);
    // Renamed for good: its claim on the old name is stale, and the name is free.
    cluster.edit("Org", "cf", &guid, |o| {
        o["spec"]["displayName"] = json!("second")
    });
    assert_eq!(post(&fake, "/v3/organizations", "admin", body).0, 201);
}

#[test]
fn a_config_map_with_only_one_of_lethes_claim_labels_is_never_taken_for_a_claim() {
    use crate::names::{CLAIM_LABEL, HOLDER_ANNOTATION};
    use crate::ownership::MANAGED_BY;
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let half_labelled = [
        json!({CLAIM_LABEL: "org"}),
        json!({MANAGED_BY.0: MANAGED_BY.1}),
    ];
    for (n, labels) in half_labelled.into_iter().enumerate() {
        let name = format!("half-{n}");
        let target = org_name_claim(&settings, &name).target().name;
        fake.put(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": target, "namespace": "cf", "labels": labels}}));
        fake.advance(crate::names::IN_FLIGHT_MS + 1);
        let body = format!(r#"{{"name":"{name}"}}"#);
        assert_eq!(post(&fake, "/v3/organizations", "admin", &body).0, 422);
        let report = pass(&fake, &fake, &settings, &NoBackoff);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        let kept = cluster
            .object("ConfigMap", "cf", &target)
            .expect("left in place");
        assert!(kept.annotation(HOLDER_ANNOTATION).is_none());
    }
}

#[test]
fn a_full_pass_deletes_claims_whose_holder_is_gone_and_leaves_foreign_config_maps() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let orphan = orphan_claim(&fake, &settings, "gone");
    // Someone else's ConfigMap where a claim would go: never touched, and the name stays taken.
    let foreign = org_name_claim(&settings, "theirs");
    fake.put(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": foreign.target().name, "namespace": "cf"}}));
    let young = pass(&fake, &fake, &settings, &NoBackoff);
    assert!(young.failed.is_empty(), "{:?}", young.failed);
    assert_eq!(
        fake.all("ConfigMap").len(),
        4,
        "a young orphan may be a create under way"
    );
    fake.advance(crate::names::IN_FLIGHT_MS + 1);
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    assert_eq!(report.deleted, 1, "{report:?}");
    assert!(!fake.exists("ConfigMap", "cf", &orphan));
    assert!(fake.exists("ConfigMap", "cf", &foreign.target().name));
    assert_eq!(
        post(&fake, "/v3/organizations", "admin", r#"{"name":"theirs"}"#).0,
        422
    );
}

#[test]
fn names_filter_and_sort_regardless_of_case() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    for name in ["Zed", "alpha"] {
        let r = api::handle(
            &fake,
            &fake,
            &api_request(
                "POST",
                "/v3/organizations",
                Some("admin"),
                &format!(r#"{{"name":"{name}"}}"#),
            ),
        );
        assert_eq!(r.status, 201);
    }
    let names = |query: &str| -> Vec<String> {
        let r = api::handle(
            &fake,
            &fake,
            &api_request(
                "GET",
                &format!("/v3/organizations?{query}"),
                Some("admin"),
                "",
            ),
        );
        r.json_body().expect("json")["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .map(|o| o["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(names("names=ZED,O"), ["o", "Zed"]);
    assert_eq!(names("order_by=name"), ["alpha", "o", "Zed"]);
    assert_eq!(names("order_by=-name"), ["Zed", "o", "alpha"]);
}

#[test]
fn a_suspended_org_takes_no_space_writes_but_from_admins() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    fake.grant("manager", "get", "Org", "cf");
    // The same org, suspended (same uid: an update, not a re-creation).
    let uid = fake.object("Org", "cf", ORG).expect("org").metadata.uid;
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": ORG, "namespace": "cf", "finalizers": [FINALIZER], "uid": uid},
        "spec": {"displayName": "o", "suspended": true}}));
    let space = format!(
        r#"{{"name":"new","relationships":{{"organization":{{"data":{{"guid":"{ORG}"}}}}}}}}"#
    );
    let suspended = |r: lethe_guest::Response| {
        let body = r.json_body().expect("json");
        (r.status, body["errors"][0]["code"].as_i64())
    };
    assert_eq!(
        suspended(api::handle(
            &fake,
            &fake,
            &api_request("POST", "/v3/spaces", Some("manager"), &space)
        )),
        (403, Some(10017))
    );
    assert_eq!(
        suspended(api::handle(
            &fake,
            &fake,
            &api_request(
                "DELETE",
                &format!("/v3/spaces/{SPACE}"),
                Some("manager"),
                ""
            )
        )),
        (403, Some(10017))
    );
    let r = api::handle(
        &fake,
        &fake,
        &api_request("POST", "/v3/spaces", Some("admin"), &space),
    );
    assert_eq!(r.status, 201, "{:?}", r.json_body());
}

#[test]
fn api_rejects_bad_input_with_the_envelope() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let cases = [
        (
            api_request("POST", "/v3/organizations", Some("admin"), "{not json"),
            400,
            1001,
        ),
        (
            api_request("POST", "/v3/organizations", Some("admin"), r#"{"name": 7}"#),
            422,
            10008,
        ),
        (
            api_request("GET", "/v3/organizations?per_page=0", Some("admin"), ""),
            400,
            10005,
        ),
        (
            api_request("GET", "/v3/organizations?bogus=1", Some("admin"), ""),
            400,
            10005,
        ),
        (
            api_request("GET", "/v3/organizations/NOT_A_GUID", Some("admin"), ""),
            404,
            10010,
        ),
        (
            api_request("DELETE", "/v3/organizations/..%2f..", Some("admin"), ""),
            404,
            10010,
        ),
        (
            api_request("GET", "/v3/organizations", None, ""),
            401,
            10002,
        ),
        (
            api_request("GET", "/v3/nothing/here", Some("admin"), ""),
            404,
            10000,
        ),
        (
            api_request("PATCH", "/v3/organizations", None, ""),
            404,
            10000,
        ),
    ];
    for (req, status, code) in cases {
        let r = api::handle(&fake, &fake, &req);
        let body = r.json_body().expect("envelope");
        assert_eq!(
            (r.status, body["errors"][0]["code"].as_i64()),
            (status, Some(code)),
            "{} {}?{}",
            req.method,
            req.path,
            req.query
        );
    }
}

#[test]
fn api_delete_answers_202_with_the_job_location() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let r = api::handle(
        &fake,
        &fake,
        &api_request("DELETE", &format!("/v3/spaces/{SPACE}"), Some("admin"), ""),
    );
    assert_eq!(r.status, 202);
    assert!(r.body.is_empty());
    let location = r
        .headers
        .iter()
        .find(|(n, _)| n == "location")
        .map(|(_, v)| v.clone());
    assert_eq!(
        location,
        Some(format!("http://api.test/v3/jobs/space.delete~{SPACE}"))
    );
}

#[test]
fn org_users_see_only_their_orgs() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": "other", "namespace": "cf", "finalizers": [FINALIZER]}, "spec": {"displayName": "other"}}));
    fake.grant("orguser", "list", "Namespace", "*");
    let r = api::handle(
        &fake,
        &fake,
        &api_request("GET", "/v3/organizations", Some("orguser"), ""),
    );
    let body = r.json_body().expect("json");
    assert_eq!(body["pagination"]["total_results"], 1);
    assert_eq!(body["resources"][0]["guid"], ORG);
}

#[test]
fn malformed_escapes_and_unknown_order_by_are_bad_query_parameters() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    for query in [
        "names=%ff",
        "names=%zz",
        "guids=a%",
        "per_page=%ff",
        "page=%zz",
        "%ff=1",
        "order_by=garbage",
        "order_by=",
        "order_by=--name",
        "order_by=name%00",
    ] {
        let r = api::handle(
            &fake,
            &fake,
            &api_request(
                "GET",
                &format!("/v3/organizations?{query}"),
                Some("admin"),
                "",
            ),
        );
        let body = r.json_body().expect("envelope");
        assert_eq!(
            (r.status, body["errors"][0]["code"].as_i64()),
            (400, Some(10005)),
            "{query}: {body}"
        );
    }
}

#[test]
fn order_by_sorts_by_name_or_creation_either_way() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    for (guid, name, created) in [
        (
            "b0000000-0000-4000-8000-000000000001",
            "b",
            "2026-01-01T00:00:01Z",
        ),
        (
            "c0000000-0000-4000-8000-000000000002",
            "a",
            "2026-01-01T00:00:02Z",
        ),
    ] {
        fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": guid, "namespace": "cf", "creationTimestamp": created},
            "spec": {"displayName": name}}));
    }
    let names = |query: &str| -> Vec<String> {
        let r = api::handle(
            &fake,
            &fake,
            &api_request(
                "GET",
                &format!("/v3/organizations?names=a,b&{query}"),
                Some("admin"),
                "",
            ),
        );
        assert_eq!(r.status, 200, "{query}: {:?}", r.json_body());
        r.json_body().expect("json")["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .map(|o| o["name"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(names(""), ["b", "a"]);
    assert_eq!(names("order_by=created_at"), ["b", "a"]);
    assert_eq!(names("order_by=-updated_at"), ["a", "b"]);
    assert_eq!(names("order_by=name"), ["a", "b"]);
    assert_eq!(names("order_by=-name"), ["b", "a"]);
    assert_eq!(names("order_by=%2Bname"), ["a", "b"]);
    // Lists take spaces after their commas; time filters compare creation times.
    assert_eq!(names("names=a,%20b&order_by=name"), ["a", "b"]);
    assert_eq!(names("created_ats[gt]=2026-01-01T00:00:01Z"), ["a"]);
    assert_eq!(names("created_ats=2026-01-01T00:00:01Z"), ["b"]);
    // No labels are kept, so a selector that wants one matches nothing.
    assert_eq!(names("label_selector=!env"), ["b", "a"]);
    assert!(names("label_selector=env%3Dprod").is_empty());
}

#[test]
fn query_parameters_are_refused_in_cloud_controllers_words() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let detail = |path: &str| -> String {
        let r = api::handle(&fake, &fake, &api_request("GET", path, Some("admin"), ""));
        assert_eq!(r.status, 400, "{path}");
        r.json_body().expect("envelope")["errors"][0]["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        detail("/v3/organizations?foo=bar&baz=1"),
        "The query parameter is invalid: Unknown query parameter(s): 'foo', 'baz'. Valid parameters are: 'page', 'per_page', 'order_by', 'created_ats', 'updated_ats', 'guids', 'names', 'isolation_segment_guid', 'label_selector'"
    );
    assert_eq!(
        detail("/v3/spaces?page=0&per_page=0"),
        "The query parameter is invalid: Page must be a positive integer, Per page must be a positive integer"
    );
    assert_eq!(
        detail("/v3/spaces?per_page=5001"),
        "The query parameter is invalid: Per page must be between 1 and 5000"
    );
    assert_eq!(
        detail("/v3/organizations?created_ats=yesterday"),
        "The query parameter is invalid: Created ats has an invalid timestamp format. Timestamps should be formatted as 'YYYY-MM-DDThh:mm:ssZ'"
    );
}

#[test]
fn spaces_include_their_organizations_on_request() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let r = api::handle(
        &fake,
        &fake,
        &api_request("GET", "/v3/spaces?include=organization", Some("admin"), ""),
    );
    assert_eq!(r.status, 200);
    let body = r.json_body().expect("json");
    let included = body["included"]["organizations"]
        .as_array()
        .expect("included");
    assert_eq!(included.len(), 1);
    assert_eq!(included[0]["guid"], ORG);
}

#[test]
fn a_bad_token_is_401_before_the_body_query_or_guid_is_looked_at() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    for req in [
        api_request("POST", "/v3/organizations", Some("bad"), "{not json"),
        api_request("POST", "/v3/organizations", Some("bad"), r#"{"name": ""}"#),
        api_request("POST", "/v3/spaces", Some("bad"), r#"{"name": "s"}"#),
        api_request("GET", "/v3/organizations?per_page=0", Some("bad"), ""),
        api_request("GET", "/v3/spaces?bogus=%ff", Some("bad"), ""),
    ] {
        let r = api::handle(&fake, &fake, &req);
        let body = r.json_body().expect("envelope");
        assert_eq!(
            (r.status, body["errors"][0]["code"].as_i64()),
            (401, Some(1000)),
            "{} {}?{}",
            req.method,
            req.path,
            req.query
        );
    }
    let e = job(&fake, &settings, "not-a-job", "bad").expect_err("bad token");
    assert_eq!((e.status, e.errors[0].code), (401, 1000));
}

#[test]
fn unknown_fields_and_metadata_that_would_be_lost_are_422() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let in_org = |extra: &str| {
        format!(
            r#"{{"name":"t","relationships":{{"organization":{{"data":{{"guid":"{ORG}"}}}}}}{extra}}}"#
        )
    };
    for (path, body) in [
        ("/v3/organizations", r#"{"name":"n","bogus":1}"#.to_string()),
        (
            "/v3/organizations",
            r#"{"name":"n","relationships":{}}"#.to_string(),
        ),
        (
            "/v3/organizations",
            r#"{"name":"n","metadata":{"labels":{"a":"b"}}}"#.to_string(),
        ),
        (
            "/v3/organizations",
            r#"{"name":"n","metadata":{"owner":"x"}}"#.to_string(),
        ),
        (
            "/v3/organizations",
            r#"{"name":"n","metadata":[]}"#.to_string(),
        ),
        ("/v3/spaces", in_org(r#","suspended":true"#)),
        (
            "/v3/spaces",
            in_org(r#","metadata":{"annotations":{"a":"b"}}"#),
        ),
    ] {
        let r = api::handle(
            &fake,
            &fake,
            &api_request("POST", path, Some("admin"), &body),
        );
        let json = r.json_body().expect("envelope");
        assert_eq!(
            (r.status, json["errors"][0]["code"].as_i64()),
            (422, Some(10008)),
            "{path} {body}: {json}"
        );
    }
    let r = api::handle(
        &fake,
        &fake,
        &api_request(
            "POST",
            "/v3/organizations",
            Some("admin"),
            r#"{"name":"n","metadata":{"labels":{},"annotations":null}}"#,
        ),
    );
    assert_eq!(
        r.status,
        201,
        "empty metadata loses nothing: {:?}",
        r.json_body()
    );
}

#[test]
fn whoami_names_users_and_service_accounts_as_korifi_does() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let r = api::handle(
        &fake,
        &fake,
        &api_request("GET", "/whoami", Some("orguser"), ""),
    );
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json_body().expect("json"),
        json!({"name": "orguser", "kind": "User"})
    );
    let r = api::handle(
        &fake,
        &fake,
        &api_request("GET", "/whoami", Some("system:serviceaccount:ns:robot"), ""),
    );
    assert_eq!(
        r.json_body().expect("json"),
        json!({"name": "robot", "kind": "ServiceAccount"})
    );
    let r = api::handle(
        &fake,
        &fake,
        &api_request("GET", "/whoami", Some("bad"), ""),
    );
    assert_eq!(r.status, 401);
}

/// Before Kubernetes 1.28 there is no SelfSubjectReview: the host reviews the token instead.
#[test]
fn whoami_falls_back_to_a_token_review_on_clusters_without_self_subject_review() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    fake.missing_kinds
        .borrow_mut()
        .push("SelfSubjectReview".into());
    let whoami = |token: &str| {
        let r = api::handle(
            &fake,
            &fake,
            &api_request("GET", "/whoami", Some(token), ""),
        );
        (r.status, r.json_body().unwrap_or_default())
    };
    assert_eq!(
        whoami("orguser"),
        (200, json!({"name": "orguser", "kind": "User"}))
    );
    assert_eq!(
        whoami("system:serviceaccount:ns:robot"),
        (200, json!({"name": "robot", "kind": "ServiceAccount"}))
    );
    // A token the review does not accept is 401.
    assert_eq!(whoami("bad").0, 401);
}

#[test]
fn roles_are_assigned_as_cloud_controller_allows_them() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let post = |token: &str, body: serde_json::Value| {
        let r = api::handle(
            &fake,
            &fake,
            &api_request("POST", "/v3/roles", Some(token), &body.to_string()),
        );
        let json = r.json_body().unwrap_or(serde_json::Value::Null);
        (r.status, json)
    };
    let org_role = |kind: &str, user: &str| {
        json!({"type": kind, "relationships": {"user": {"data": {"username": user}},
            "organization": {"data": {"guid": ORG}}}})
    };
    let space_role = |kind: &str, user: &str| {
        json!({"type": kind, "relationships": {"user": {"data": {"guid": user}},
            "space": {"data": {"guid": SPACE}}}})
    };
    let detail = |j: &serde_json::Value| {
        j["errors"][0]["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };

    let (status, role) = post("admin", org_role("organization_manager", "alice"));
    assert_eq!(status, 201, "{role}");
    assert_eq!(role["type"], "organization_manager");
    assert_eq!(role["relationships"]["organization"]["data"]["guid"], ORG);
    assert_eq!(role["relationships"]["user"]["data"]["guid"], "alice");
    let bindings = role_bindings(&fake, ORG);
    assert!(bindings.iter().any(|b| b.json()["roleRef"]["name"]
        == "lethe-cf-organization-manager"
        && b.json()["subjects"][0]["name"] == "alice"));

    let (status, again) = post("admin", org_role("organization_manager", "alice"));
    assert_eq!(status, 422);
    assert!(
        detail(&again).starts_with("User 'alice' already has 'organization_manager' role"),
        "{again}"
    );
    // A space role needs an org role first.
    let (status, lonely) = post("admin", space_role("space_developer", "bob"));
    assert_eq!(status, 422);
    assert_eq!(
        detail(&lonely),
        "Users cannot be assigned roles in a space if they do not have a role in that space's organization."
    );
    // Org managers assign space roles in their org's spaces.
    let (status, dev) = post("manager", space_role("space_developer", "alice"));
    assert_eq!(status, 201, "{dev}");
    assert_eq!(dev["relationships"]["space"]["data"]["guid"], SPACE);
    // An org user may see the org but not assign roles in it; a stranger does not see it.
    assert_eq!(
        post("orguser", org_role("organization_user", "carol")).0,
        403
    );
    let (status, hidden) = post("nobody", org_role("organization_user", "carol"));
    assert_eq!(status, 422);
    assert!(
        detail(&hidden).starts_with("Invalid organization."),
        "{hidden}"
    );
    let (status, bad) = post("admin", org_role("boss", "carol"));
    assert_eq!(
        (status, detail(&bad).as_str()),
        (422, "Type must be one of the allowed types")
    );
    assert_eq!(
        post("admin", org_role("organization_auditor", "carol")).0,
        422
    );
}

// --- The privileged boundary (SECURITY.md): never act on what lethe does not own -------------

/// A Space named after a foreign namespace (which holds a ConfigMap), as an administrator's
/// `kubectl create` or an older CF role could make it.
fn put_space_named_after(fake: &FakeHost<'_>, name: &str) {
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {"team": "payments"}}}));
    fake.put(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "precious", "namespace": name}}));
    fake.put(
        json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Space",
        "metadata": {"name": name, "namespace": ORG, "finalizers": [FINALIZER]},
        "spec": {"displayName": name, "orgGUID": ORG}}),
    );
}

fn untouched(fake: &FakeHost<'_>, name: &str) {
    let ns = fake
        .object("Namespace", "", name)
        .expect("namespace still there");
    assert!(
        ns.metadata.deletion_timestamp.is_none(),
        "namespace {name} was deleted"
    );
    assert_eq!(
        ns.metadata.labels,
        vec![("team".to_string(), "payments".to_string())],
        "namespace {name} was relabelled"
    );
    assert!(fake.exists("ConfigMap", name, "precious"));
}

#[test]
fn a_full_pass_checks_namespaces_against_one_list_and_visits_its_objects_a_page_at_a_time() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    // More orgs than a page holds, each with its marked namespace, and one whose namespace is
    // missing.
    let count = crate::reconcile::LIST_PAGE as usize + 20;
    for i in 0..count {
        let org = fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": format!("org-{i:04}"), "namespace": "cf", "finalizers": [FINALIZER]},
            "spec": {"displayName": format!("o{i}")}}));
        if i != 7 {
            put_owned_namespace(&fake, "org", &org);
        }
    }
    // No namespace is read one by one: a GET of one would fail the visit.
    cluster.fail("get", "Namespace");
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    assert_eq!(report.failed, Vec::<(String, String)>::new());
    assert_eq!(
        report.examined as usize,
        count + 2,
        "every org, the setup's org and space"
    );
    assert_eq!(report.created, 1, "the missing namespace, made at once");
    let made = fake
        .object("Namespace", "", "org-0007")
        .expect("made again");
    assert_eq!(
        made.label(crate::ownership::OWNER_LABEL),
        Some("org.org-0007")
    );
    assert!(fake.exists("Namespace", "", "org-0519"));

    // A namespace in the way that the LIST did not show as lethe's is still read and judged
    // before anything is done with it (the create's AlreadyExists is read, never adopted).
    cluster.heal();
    put_space_named_after(&fake, "payments");
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    untouched(&fake, "payments");
    assert!(
        report
            .failed
            .iter()
            .any(|(item, reason)| item == "space/payments"
                && reason.starts_with("Namespace payments is in the way")),
        "{:?}",
        report.failed
    );
}

#[test]
fn reconciler_never_adopts_or_deletes_a_namespace_it_does_not_own() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    put_space_named_after(&fake, "payments");
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    untouched(&fake, "payments");
    let (item, reason) = report
        .failed
        .iter()
        .find(|(item, _)| item == "space/payments")
        .expect("the clash is in the pass report");
    assert!(
        reason.starts_with("Namespace payments is in the way of space payments"),
        "{item}: {reason}"
    );

    // Deleting the Space must not steer the reconciler onto the namespace either.
    deletion::delete(
        &fake,
        &fake,
        &settings,
        "space",
        "payments",
        &caller("admin"),
    )
    .expect("accepted");
    for _ in 0..4 {
        pass(&fake, &fake, &settings, &NoBackoff);
        fake.run_namespace_controller();
    }
    untouched(&fake, "payments");
    // The Space keeps its finalizer, and its job says at once why it cannot finish.
    assert!(fake.exists("Space", ORG, "payments"));
    let j = job(&fake, &settings, "space.delete~payments", "admin").expect("job");
    assert_eq!(j.state, JobState::Failed);
    assert_eq!(j.errors[0].code, 10008);
    assert!(
        j.errors[0]
            .detail
            .contains("Namespace payments is in the way"),
        "{:?}",
        j.errors
    );
}

#[test]
fn a_space_re_created_under_the_same_name_inherits_nothing() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    // The space is replaced by another of the same name (a new uid); its namespace still
    // carries the old space's mark, so the new one may neither adopt nor delete it.
    fake.put(
        json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Space",
        "metadata": {"name": SPACE, "namespace": ORG, "finalizers": [FINALIZER],
                     "deletionTimestamp": "2023-11-14T22:13:20Z"},
        "spec": {"displayName": "s", "orgGUID": ORG}}),
    );
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    assert!(
        report
            .failed
            .iter()
            .any(|(item, reason)| item == &format!("space/{SPACE}")
                && reason.contains(&format!("Namespace {SPACE} is in the way"))),
        "{:?}",
        report.failed
    );
    let ns = fake.object("Namespace", "", SPACE).expect("namespace");
    assert!(ns.metadata.deletion_timestamp.is_none());
}

/// A namespace create whose answer was lost is made again: the namespace exists afterwards,
/// whether or not the lost attempt landed, and a space created in a storm finds it.
#[test]
fn a_namespace_create_with_an_unknown_outcome_is_made_again() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let orgs = [
        (false, "1a2b3c4d-0000-4000-8000-000000000001"),
        (true, "1a2b3c4d-0000-4000-8000-000000000002"),
    ];
    for (applied, guid) in orgs {
        let org = fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": guid, "namespace": "cf", "finalizers": [FINALIZER]},
            "spec": {"displayName": guid}}));
        fake.lose_next_create("Namespace", applied);
        let made = crate::ownership::ensure_namespace_now(&fake, &fake, Owner::new("org", &org));
        assert_eq!(made, Ok(!applied), "applied: {applied}");
        let ns = fake.object("Namespace", "", guid).expect("namespace made");
        assert!(Owner::new("org", &org).check(&ns).is_ok());
    }
}

#[test]
fn a_namespace_that_appears_between_the_read_and_the_create_is_not_adopted() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "payments", "labels": {"team": "payments"}}}));
    fake.put(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "precious", "namespace": "payments"}}));
    let space = fake.put(
        json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Space",
        "metadata": {"name": "payments", "namespace": ORG, "finalizers": [FINALIZER]},
        "spec": {"displayName": "p", "orgGUID": ORG}}),
    );
    // The first read misses it, so the create answers AlreadyExists: not "created".
    fake.hide_once("Namespace", "payments");
    let result = crate::ownership::ensure_namespace(&fake, Owner::new("space", &space));
    assert!(
        matches!(result, Err(crate::ownership::Refusal::NotOurs(_))),
        "{result:?}"
    );
    untouched(&fake, "payments");
    // And the namespace of an object that is its own is adopted on that conflict.
    let org = fake.object("Org", "cf", ORG).expect("org");
    fake.hide_once("Namespace", ORG);
    let result = crate::ownership::ensure_namespace(&fake, Owner::new("org", &org));
    assert_eq!(result, Ok(false));
}

#[test]
fn roles_are_never_written_into_a_namespace_lethe_does_not_own() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    put_space_named_after(&fake, "payments");
    fake.grant("manager", "list", "RoleBinding", "payments");
    let body = json!({"type": "space_developer", "relationships": {
        "user": {"data": {"guid": "manager"}}, "space": {"data": {"guid": "payments"}}}});
    // The manager holds an org role, so only the namespace's ownership can stop this.
    fake.put(
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "m", "namespace": ORG},
        "roleRef": {"kind": "ClusterRole", "name": "lethe-cf-organization-manager"},
        "subjects": [{"kind": "User", "name": "manager"}]}),
    );
    let r = api::handle(
        &fake,
        &fake,
        &api_request("POST", "/v3/roles", Some("manager"), &body.to_string()),
    );
    let json = r.json_body().expect("json");
    assert_eq!(r.status, 422, "{json}");
    assert!(
        json["errors"][0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("Namespace payments is in the way")),
        "{json}"
    );
    let bindings = role_bindings(&fake, "payments");
    assert!(bindings.is_empty(), "{bindings:?}");
    untouched(&fake, "payments");
}

#[test]
fn role_bindings_carry_the_uid_of_what_they_are_for() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let body = json!({"type": "organization_user", "relationships": {
        "user": {"data": {"guid": "dana"}}, "organization": {"data": {"guid": ORG}}}});
    let r = api::handle(
        &fake,
        &fake,
        &api_request("POST", "/v3/roles", Some("admin"), &body.to_string()),
    );
    assert_eq!(r.status, 201);
    let org = fake.object("Org", "cf", ORG).expect("org");
    let bindings = role_bindings(&fake, ORG);
    assert_eq!(bindings.len(), 1);
    assert!(Owner::new("org", &org).owns(&bindings[0]));
}

#[test]
fn a_space_is_created_only_in_a_namespace_that_is_its_orgs() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    // The org's namespace is replaced by a foreign one of the same name.
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ORG}}));
    let space = json!({"name": "new", "relationships": {"organization": {"data": {"guid": ORG}}}});
    let r = api::handle(
        &fake,
        &fake,
        &api_request("POST", "/v3/spaces", Some("manager"), &space.to_string()),
    );
    assert_eq!(r.status, 422, "{:?}", r.json_body());
    assert_eq!(
        fake.list_all(
            &Identity::Privileged,
            &Collection::new("cf.lethe.dev/v1alpha1", "Space", Some(ORG)),
            &Default::default()
        )
        .expect("list")
        .len(),
        1,
        "no new space"
    );
}

#[test]
fn org_managers_create_spaces_through_lethe_which_marks_their_namespaces() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    let space = json!({"name": "new", "relationships": {"organization": {"data": {"guid": ORG}}}});
    // The manager's grants in the fake are wider, but lethe creates the Space privileged.
    let r = api::handle(
        &fake,
        &fake,
        &api_request("POST", "/v3/spaces", Some("manager"), &space.to_string()),
    );
    assert_eq!(r.status, 201, "{:?}", r.json_body());
    let guid = r.json_body().expect("json")["guid"]
        .as_str()
        .expect("guid")
        .to_string();
    let created = fake.object("Space", ORG, &guid).expect("space");
    let ns = fake.object("Namespace", "", &guid).expect("namespace");
    assert!(Owner::new("space", &created).owns(&ns));
    // An org user, who manages nothing, may not.
    let r = api::handle(
        &fake,
        &fake,
        &api_request("POST", "/v3/spaces", Some("orguser"), &space.to_string()),
    );
    assert_eq!(r.status, 403);
}

#[test]
fn a_suspended_org_check_that_cannot_be_made_refuses_the_delete() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let uid = fake.object("Org", "cf", ORG).expect("org").metadata.uid;
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": ORG, "namespace": "cf", "finalizers": [FINALIZER], "uid": uid},
        "spec": {"displayName": "o", "suspended": true}}));
    // The org cannot be read: the manager's delete in it must fail, not slip through.
    fake.fail("get", "Org");
    let result = deletion::delete(&fake, &fake, &settings, "space", SPACE, &caller("manager"));
    let e = result.expect_err("refused while the org cannot be read");
    assert_eq!(e.status, 503, "{e:?}");
    let space = fake.object("Space", ORG, SPACE).expect("space");
    assert!(
        space.metadata.deletion_timestamp.is_none(),
        "the space was deleted"
    );
}

#[test]
fn what_blocks_an_object_is_recorded_on_it_and_cleared_once_the_way_is_free() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    put_space_named_after(&fake, "payments");
    pass(&fake, &fake, &settings, &NoBackoff);
    let space = fake.object("Space", ORG, "payments").expect("space");
    assert!(
        crate::ownership::blocked_by(&space)
            .is_some_and(|b| b.starts_with("Namespace payments is in the way")),
        "{:?}",
        space.json()["metadata"]
    );
    // The administrator removes the foreign namespace: the space gets its own, and the record
    // goes.
    fake.delete(
        &Identity::Privileged,
        &lethe_guest::kube::ObjectRef::new("v1", "Namespace", None, "payments"),
        &Default::default(),
    )
    .expect("delete");
    fake.run_namespace_controller();
    assert!(!fake.exists("Namespace", "", "payments"));
    pass(&fake, &fake, &settings, &NoBackoff);
    let space = fake.object("Space", ORG, "payments").expect("space");
    assert_eq!(crate::ownership::blocked_by(&space), None);
    let ns = fake
        .object("Namespace", "", "payments")
        .expect("its own namespace");
    assert!(Owner::new("space", &space).owns(&ns));
}

/// Every authorization decision treats "could not find out" as "no" (SECURITY.md A2–A5): with
/// the probe it rests on failing, the answer is 503, never the success or the "not yours" that a
/// swallowed error would give.
#[test]
fn every_authorization_decision_fails_closed_when_its_probe_fails() {
    let space_body =
        json!({"name": "n", "relationships": {"organization": {"data": {"guid": ORG}}}})
            .to_string();
    let role_body = json!({"type": "organization_user", "relationships": {
        "user": {"data": {"guid": "x"}}, "organization": {"data": {"guid": ORG}}}})
    .to_string();
    // (decision, failing call, request, token)
    type Case<'a> = (
        &'a str,
        (&'a str, &'a str),
        (&'a str, String, &'a str),
        &'a str,
    );
    let cases: [Case; 5] = [
        (
            "A2 visible",
            ("list", "RoleBinding"),
            ("GET", format!("/v3/spaces/{SPACE}"), ""),
            "manager",
        ),
        (
            "A3 admin",
            ("list", "Org"),
            ("POST", "/v3/organizations".into(), r#"{"name":"x"}"#),
            "manager",
        ),
        (
            "A4 manages",
            ("list", "RoleBinding"),
            ("POST", "/v3/spaces".into(), &space_body),
            "manager",
        ),
        (
            "A4 manages (roles)",
            ("list", "RoleBinding"),
            ("POST", "/v3/roles".into(), &role_body),
            "manager",
        ),
        (
            "A2 visible (org)",
            ("list", "Space"),
            ("GET", format!("/v3/organizations/{ORG}"), ""),
            "orguser",
        ),
    ];
    for (decision, (verb, kind), (method, path, body), token) in cases {
        let (cluster, _) = setup();
        let fake = FakeHost::on(&cluster);
        fake.grant("manager", "list", "Space", ORG);
        fake.fail(verb, kind);
        let r = api::handle(&fake, &fake, &api_request(method, &path, Some(token), body));
        assert_eq!(r.status, 503, "{decision}: {:?}", r.json_body());
    }
    // A5: the job of an org that is not being deleted, for one who may see it.
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    fake.fail("list", "Space");
    let e = job(&fake, &settings, &format!("org.delete~{ORG}"), "orguser")
        .expect_err("no COMPLETE while visibility is unknown");
    assert_eq!(e.status, 503, "{e:?}");
}

/// SECURITY.md "What a job poll reveals": a deletion in flight is PROCESSING to anyone who
/// presents the job guid, visible to them or not (filtering by visibility here is the
/// early-COMPLETE bug), and the job names nothing but the guid.
#[test]
fn a_deletion_in_flight_is_processing_to_any_caller_and_reveals_no_name() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": ORG, "namespace": "cf", "finalizers": [FINALIZER],
                     "uid": fake.object("Org", "cf", ORG).expect("org").metadata.uid},
        "spec": {"displayName": "secret-project"}}));
    deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("admin")).expect("accepted");
    let j = job(&fake, &settings, &format!("org.delete~{ORG}"), "nobody").expect("job");
    assert_eq!(j.state, JobState::Processing);
    let rendered = j.to_json("http://x").to_string();
    assert!(!rendered.contains("secret-project"), "{rendered}");
}

/// A create of an object whose name lethe chose is safe to make again: when the answer to one
/// that landed is lost, the next attempt's AlreadyExists is recognised by the request's mark,
/// and the client gets its 201 for exactly one new org.
#[test]
fn a_create_whose_answer_was_lost_is_made_again_and_counted_once() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    fake.lose_next_create("Org", true);
    let r = api::handle(
        &fake,
        &fake,
        &api_request(
            "POST",
            "/v3/organizations",
            Some("admin"),
            r#"{"name":"lost"}"#,
        ),
    );
    assert_eq!(r.status, 201, "{:?}", r.json_body());
    let guid = r.json_body().expect("json")["guid"]
        .as_str()
        .expect("guid")
        .to_string();
    let orgs = fake
        .list_all(
            &Identity::Privileged,
            &Collection::new("cf.lethe.dev/v1alpha1", "Org", Some("cf")),
            &Default::default(),
        )
        .expect("orgs");
    let named: Vec<&Object> = orgs
        .iter()
        .filter(|o| o.str_at("/spec/displayName") == Some("lost"))
        .collect();
    assert_eq!(named.len(), 1);
    assert_eq!(named[0].target.name, guid);
    // A create that never landed is simply made again.
    fake.lose_next_create("Space", false);
    let space =
        json!({"name": "again", "relationships": {"organization": {"data": {"guid": ORG}}}});
    let r = api::handle(
        &fake,
        &fake,
        &api_request("POST", "/v3/spaces", Some("manager"), &space.to_string()),
    );
    assert_eq!(r.status, 201, "{:?}", r.json_body());
}

/// ... and someone else's object of that name is never taken for the request's own.
#[test]
fn an_already_exists_without_the_requests_mark_stays_a_conflict() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    fake.put(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "taken", "namespace": "cf",
                     "annotations": {crate::ownership::CREATE_REQUEST_ANNOTATION: "someone-else"}}}));
    fake.lose_next_create("ConfigMap", false);
    let object = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "taken", "namespace": "cf"}});
    let result = crate::ownership::create_once(&fake, &fake, &Identity::Privileged, object);
    assert!(
        matches!(result, Err(lethe_guest::kube::KubeError::Conflict(_))),
        "{result:?}"
    );
}

#[test]
fn only_callers_who_see_every_org_may_ask_for_a_pass_and_the_check_fails_closed() {
    let (cluster, mut settings) = setup();
    let fake = FakeHost::on(&cluster);
    let allowed = |fake: &FakeHost<'_>, settings: &Settings, token: &str| {
        access::authorize_pass(fake, &caller(token), settings).map_err(|e| e.status)
    };
    assert_eq!(allowed(&fake, &settings, "admin"), Ok(()));
    assert_eq!(allowed(&fake, &settings, "manager"), Err(403));
    assert_eq!(allowed(&fake, &settings, "bad"), Err(401));

    // Orgs found in any namespace: the probe lists them everywhere, it is not skipped.
    for (name, t) in &mut settings.types {
        if name == "org" {
            t.namespace = crate::config::NamespaceRule::Any;
        }
    }
    fake.grant("rooted", "list", "Org", "cf");
    assert_eq!(allowed(&fake, &settings, "rooted"), Err(403));
    assert_eq!(allowed(&fake, &settings, "admin"), Ok(()));

    // A probe that fails is no permission; nor is a configuration without orgs.
    fake.fail("list", "Org");
    assert_eq!(allowed(&fake, &settings, "admin"), Err(403));
    settings.types.retain(|(name, _)| name != "org");
    assert_eq!(
        allowed(&FakeHost::on(&FakeCluster::new()), &settings, "admin"),
        Err(403)
    );
}

/// The passes between full passes follow the changes: an idle one visits nothing, a deletion
/// is carried through by the changes it makes, a hand-deleted namespace comes back, and a lost
/// watch or the resync interval brings a full pass.
#[test]
fn passes_on_changes_visit_only_what_changed_and_fall_back_to_a_full_pass() {
    use crate::follow::pass_on_changes;
    let (cluster, settings) = setup();
    let sql = reconciler_sql();
    let fake = FakeHost::new(&sql, &cluster, "host-1");
    let run = |full: bool| {
        let report = pass_on_changes(&fake, &fake, &fake, &settings, &NoBackoff, full);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        report
    };
    let first = run(false);
    assert!(first.full, "no bookmark yet: a full pass");
    assert_eq!(first.examined, 2, "the org and its space");
    // It wrote their conditions: the pass on that change visits them again, and writes nothing.
    let echo = run(false);
    assert!(!echo.full);
    assert_eq!(echo.examined, 2);
    let idle = run(false);
    assert!(!idle.full);
    assert_eq!(idle.examined, 0, "nothing changed, nothing visited");

    // A new org is given its finalizer and namespace by the changes alone.
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": "bare", "namespace": "cf"}, "spec": {"displayName": "bare"}}));
    for _ in 0..3 {
        assert!(!run(false).full);
    }
    assert_eq!(
        fake.object("Org", "cf", "bare")
            .expect("org")
            .metadata
            .finalizers,
        vec![FINALIZER.to_string()]
    );
    assert!(fake.exists("Namespace", "", "bare"));

    // A namespace deleted by hand is made again: its deletion is a change of a followed
    // namespace, which names its owner.
    fake.delete(
        &Identity::Privileged,
        &lethe_guest::kube::ObjectRef::new("v1", "Namespace", None, "bare"),
        &Default::default(),
    )
    .expect("delete");
    fake.run_namespace_controller();
    assert!(!fake.exists("Namespace", "", "bare"));
    for _ in 0..2 {
        assert!(!run(false).full);
    }
    assert!(fake.exists("Namespace", "", "bare"), "made again");

    // An org deletion goes through: its space first, then the namespaces, then the org, each
    // step set off by the change the one before made.
    deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("admin")).expect("accepted");
    let mut reported = false;
    for _ in 0..10 {
        let report = run(false);
        assert!(!report.full);
        reported |= report
            .deletions
            .iter()
            .any(|d| d.item == format!("org/{ORG}"));
        fake.run_namespace_controller();
    }
    assert!(reported, "the deletion under way was reported");
    assert!(!fake.exists("Org", "cf", ORG));
    assert!(!fake.exists("Space", ORG, SPACE));
    assert!(!fake.exists("Namespace", "", ORG));
    assert!(!fake.exists("Namespace", "", SPACE));
    assert!(
        run(false).deletions.is_empty(),
        "nothing under way any more"
    );

    // A watch the host lost (its bookmarks gone) brings a full pass, and so does the interval.
    fake.expire_watches();
    assert!(run(false).full);
    assert!(!run(false).full);
    fake.advance(i64::try_from(settings.full_resync_ms).expect("ms"));
    assert!(run(false).full);
    assert!(run(true).full, "and asking for one");

    // Another host runs no pass while this one holds the Lease. Once this one stops renewing
    // it, the other takes over; its bookmarks are its own, so its first pass is full.
    let mut other = FakeHost::new(&sql, &cluster, "host-2");
    other.now = fake.now.clone();
    let other_pass = || pass_on_changes(&other, &other, &other, &settings, &NoBackoff, false);
    let report = other_pass();
    assert_eq!(report.leader_elsewhere.as_deref(), Some("host-1"));
    assert_eq!((report.examined, report.full), (0, false));
    fake.advance(15_000);
    let report = other_pass();
    assert_eq!(report.leader_elsewhere, None);
    assert!(report.full);
    assert!(!other_pass().full);
    let report = pass_on_changes(&fake, &fake, &fake, &settings, &NoBackoff, false);
    assert_eq!(report.leader_elsewhere.as_deref(), Some("host-2"));
    assert_eq!(report.examined, 0);
}

/// A namespace made again for an org after lethe released it, while another's finalizer holds
/// the org (a space create that raced with the deletion), is deleted by the next full pass, as
/// the org's cleanup would have deleted it; a pass on the changes reads nothing for it.
#[test]
fn a_full_pass_deletes_the_namespace_made_again_for_an_org_lethe_let_go() {
    use crate::follow::pass_on_changes;
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let released = "6f1c2a4e-1b2c-4d5e-8f90-000000000003";
    let now = lethe_guest::env::format_rfc3339(cluster.now.get());
    let org = fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": released, "namespace": "cf", "deletionTimestamp": now,
            "finalizers": ["example.com/hold"]},
        "spec": {"displayName": "released"}}));
    put_owned_namespace(&fake, "org", &org);
    // A pass on the changes hears of it, and leaves it to the full pass.
    let sql = reconciler_sql();
    let host = FakeHost::new(&sql, &cluster, "host-1");
    let recorded = Recorded::new(&host);
    let on_changes = || pass_on_changes(&recorded, &host, &host, &settings, &NoBackoff, false);
    assert!(on_changes().full, "the first pass is full");
    let ns = fake.object("Namespace", "", released).expect("still there");
    assert!(
        ns.metadata.deletion_timestamp.is_some(),
        "the full pass deleted it"
    );
    fake.run_namespace_controller();
    assert!(!fake.exists("Namespace", "", released));
    // Made again: the changes do not read it, the next full pass deletes it again.
    while on_changes().examined > 0 {} // the echoes of the full pass's own writes
    put_owned_namespace(&fake, "org", &org);
    recorded.calls.borrow_mut().clear();
    assert!(!on_changes().full);
    assert_eq!(recorded.made("get", "Namespace"), 0);
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let ns = fake.object("Namespace", "", released).expect("still there");
    assert!(ns.metadata.deletion_timestamp.is_some(), "{report:?}");
    assert_eq!(
        fake.object("Org", "cf", released)
            .expect("held")
            .metadata
            .finalizers,
        ["example.com/hold"],
        "another's finalizer is left alone"
    );
}

/// An org's deletion, carried by the changes it makes, reads only what it waits on: a deletion
/// under way is not woken by its own updates, nor a parent by its children's, a namespace heard
/// deleted is not read again, and an object heard deleted is not looked up again.
#[test]
fn an_org_deletion_over_the_changes_reads_only_what_it_waits_on() {
    use crate::follow::pass_on_changes;
    let (cluster, settings) = setup();
    let sql = reconciler_sql();
    let fake = FakeHost::new(&sql, &cluster, "host-1");
    let recorded = Recorded::new(&fake);
    let run = || {
        let report = pass_on_changes(&recorded, &fake, &fake, &settings, &NoBackoff, false);
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        report
    };
    while run().examined > 0 {}
    recorded.calls.borrow_mut().clear();
    deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("admin")).expect("accepted");
    for _ in 0..10 {
        run();
        fake.run_namespace_controller();
    }
    assert!(!fake.exists("Org", "cf", ORG), "converged");
    assert!(!fake.exists("Namespace", "", ORG));
    let calls = recorded.calls.borrow().clone();
    let calls: Vec<_> = calls.iter().filter(|(_, kind)| kind != "Lease").collect();
    // Each owner's namespace is read when its deletion starts, the org's again once its space is
    // gone (to delete it), and each once more by the sweep when the owner is heard deleted;
    // never while it waits, nor once heard gone.
    assert_eq!(recorded.made("get", "Namespace"), 5, "{calls:?}");
    // The org is read when its space is gone and when its namespace is (those changes name it,
    // they do not carry it), not when its space or itself is updated.
    assert_eq!(recorded.made("get", "Org"), 2, "{calls:?}");
    // Spaces are listed: the org's children when its deletion starts and once its space is gone,
    // and the space by name once its namespace is gone; not once the space is heard deleted.
    assert_eq!(recorded.made("list", "Space"), 3, "{calls:?}");
    assert_eq!(recorded.made("delete", "Namespace"), 2, "{calls:?}");
}

/// A host that cannot renew its Lease in the middle of a pass (another host took it, or the
/// cluster refuses the write) stops at its next checkpoint: another host may be running passes
/// by then. The pass says it was cut short, so the next one is full.
#[test]
fn a_pass_that_cannot_keep_its_lease_stops() {
    use crate::follow::pass_on_changes;
    let (cluster, mut settings) = setup();
    settings.pass_budget_ms = 600_000;
    let sql = reconciler_sql();
    for i in 0..20 {
        cluster.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": format!("org-{i}"), "namespace": "cf"},
            "spec": {"displayName": format!("org {i}")}}));
    }
    let mut host = FakeHost::new(&sql, &cluster, "host-1");
    host.now = cluster.now.clone();
    // A slow host: each namespace it makes takes it two seconds, so its Lease (renewed every
    // five) is due again three orgs in; and the renewal is refused.
    let clock = cluster.now.clone();
    cluster.admit_with(Box::new(move |_| {
        clock.set(clock.get() + 2_000);
        Ok(())
    }));
    cluster.fail("update", "Lease");
    let report = pass_on_changes(&host, &host, &host, &settings, &NoBackoff, false);
    assert!(report.deferred, "{report:?}");
    assert!(report.examined < 10, "went on after losing it: {report:?}");
    // Once the Lease can be kept, the next pass is full and goes through.
    cluster.heal();
    let report = pass_on_changes(&host, &host, &host, &settings, &NoBackoff, false);
    assert!(report.full && !report.deferred, "{report:?}");
    assert_eq!(report.examined, 22);
}

/// A namespace lethe made whose owner is gone (a space create raced with its org's deletion; an
/// org made by hand was deleted before it had lethe's finalizer) is deleted: by the full pass,
/// and by the pass on the changes that hears of the owner's deletion. A namespace without the
/// mark, or whose mark names an object of that name that is there (another uid), is left alone.
#[test]
fn a_namespace_that_outlived_its_owner_is_swept() {
    use crate::follow::pass_on_changes;
    use crate::ownership::{MANAGED_BY, OWNER_LABEL, OWNER_UID_LABEL};
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let orphan = "6f1c2a4e-1b2c-4d5e-8f90-000000000001";
    let mark = |name: &str, uid: &str| json!({OWNER_LABEL: format!("org.{name}"), OWNER_UID_LABEL: uid, MANAGED_BY.0: MANAGED_BY.1});
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": orphan, "labels": mark(orphan, "uid-gone")}}));
    // The org's own namespace, but marked for an earlier org of that name.
    fake.edit("Namespace", "", ORG, |ns| {
        ns["metadata"]["labels"][OWNER_UID_LABEL] = json!("uid-earlier");
    });
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "payments", "labels": {"team": "payments"}}}));

    let report = pass(&fake, &fake, &settings, &NoBackoff);
    let swept = fake.object("Namespace", "", orphan).expect("terminating");
    assert!(swept.metadata.deletion_timestamp.is_some(), "{report:?}");
    assert!(
        fake.object("Namespace", "", ORG)
            .expect("kept")
            .metadata
            .deletion_timestamp
            .is_none(),
        "an org of that name is there: the clash is reported on it, the namespace is kept"
    );
    let theirs = fake.object("Namespace", "", "payments").expect("kept");
    assert!(theirs.metadata.deletion_timestamp.is_none(), "not lethe's");
    fake.run_namespace_controller();
    assert!(!fake.exists("Namespace", "", orphan));

    // On the changes: an org made by hand gets a namespace from a space create before the
    // reconciler ever saw it, and is deleted at once (it has no finalizer yet).
    let sql = reconciler_sql();
    let host = FakeHost::new(&sql, &cluster, "host-1");
    assert!(pass_on_changes(&host, &host, &host, &settings, &NoBackoff, false).full);
    let hand_made = "6f1c2a4e-1b2c-4d5e-8f90-000000000002";
    let org = fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": hand_made, "namespace": "cf"}, "spec": {"displayName": "h"}}));
    put_owned_namespace(&fake, "org", &org);
    fake.delete(
        &Identity::Privileged,
        &lethe_guest::kube::ObjectRef::new("cf.lethe.dev/v1alpha1", "Org", Some("cf"), hand_made),
        &Default::default(),
    )
    .expect("gone at once");
    let report = pass_on_changes(&host, &host, &host, &settings, &NoBackoff, false);
    assert!(!report.full);
    let swept = fake
        .object("Namespace", "", hand_made)
        .expect("terminating");
    assert!(swept.metadata.deletion_timestamp.is_some(), "{report:?}");
}

/// A budget of 0 would stop every full pass before its first object, so it is refused at start.
#[test]
fn a_pass_budget_of_nothing_is_refused() {
    let (cluster, _) = setup();
    let fake = FakeHost::on(&cluster);
    fake.config
        .borrow_mut()
        .insert("pass_budget_ms".into(), "0".into());
    let e = Settings::from_env(&fake).expect_err("refused");
    assert!(e.contains("pass_budget_ms"), "{e}");
}

/// A pass that runs out of its budget stops visiting instead of running into its time limit:
/// a full pass cut short sweeps nothing (owners not listed yet are not gone), and the pass after
/// any cut pass is full, so what was left is visited then.
#[test]
fn a_kind_the_server_does_not_serve_has_its_namespaces_left_alone() {
    use crate::ownership::{MANAGED_BY, OWNER_LABEL, OWNER_UID_LABEL};
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    // A namespace lethe made for a space, while the Space kind is not served (its CRD is being
    // reinstalled, or the server restarts): its owner cannot be listed or read, which is not
    // the same as gone.
    let space = "6f1c2a4e-1b2c-4d5e-8f90-000000000002";
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": space, "labels": {OWNER_LABEL: format!("space.{space}"),
            OWNER_UID_LABEL: "uid-of-the-space", MANAGED_BY.0: MANAGED_BY.1}}}));
    cluster.missing_kinds.borrow_mut().push("Space".into());
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert!(
        fake.object("Namespace", "", space)
            .expect("not swept")
            .metadata
            .deletion_timestamp
            .is_none()
    );
}

#[test]
fn a_pass_out_of_its_budget_defers_the_rest_to_a_full_pass() {
    use crate::follow::pass_on_changes;
    use crate::ownership::{MANAGED_BY, OWNER_LABEL, OWNER_UID_LABEL};
    let (cluster, mut settings) = setup();
    let sql = reconciler_sql();
    let fake = FakeHost::new(&sql, &cluster, "host-1");
    let orphan = "6f1c2a4e-1b2c-4d5e-8f90-000000000001";
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": orphan, "labels": {OWNER_LABEL: format!("org.{orphan}"),
            OWNER_UID_LABEL: "uid-gone", MANAGED_BY.0: MANAGED_BY.1}}}));
    let bare = |name: &str| {
        fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": name, "namespace": "cf"}, "spec": {"displayName": name}}));
    };
    bare("bare");

    settings.pass_budget_ms = 0;
    let cut = pass_on_changes(&fake, &fake, &fake, &settings, &NoBackoff, false);
    assert!(cut.full && cut.deferred, "{cut:?}");
    assert_eq!(cut.examined, 0);
    assert!(
        cut.failed.is_empty(),
        "nothing fails for the cut: {:?}",
        cut.failed
    );
    assert!(
        fake.object("Namespace", "", orphan)
            .expect("not swept")
            .metadata
            .deletion_timestamp
            .is_none()
    );
    assert!(
        fake.object("Org", "cf", "bare")
            .expect("org")
            .metadata
            .finalizers
            .is_empty()
    );

    settings.pass_budget_ms = 10_000;
    let next = pass_on_changes(&fake, &fake, &fake, &settings, &NoBackoff, false);
    assert!(
        next.full && !next.deferred,
        "the pass after a cut one is full: {next:?}"
    );
    assert_eq!(
        fake.object("Org", "cf", "bare")
            .expect("org")
            .metadata
            .finalizers,
        vec![FINALIZER.to_string()]
    );
    assert!(
        fake.object("Namespace", "", orphan)
            .expect("terminating")
            .metadata
            .deletion_timestamp
            .is_some()
    );
    assert!(!pass_on_changes(&fake, &fake, &fake, &settings, &NoBackoff, false).full);

    // A pass on the changes cut short leaves the rest to a full pass too.
    bare("late");
    settings.pass_budget_ms = 0;
    let cut = pass_on_changes(&fake, &fake, &fake, &settings, &NoBackoff, false);
    assert!(!cut.full && cut.deferred, "{cut:?}");
    assert!(
        fake.object("Org", "cf", "late")
            .expect("org")
            .metadata
            .finalizers
            .is_empty()
    );
    settings.pass_budget_ms = 10_000;
    let next = pass_on_changes(&fake, &fake, &fake, &settings, &NoBackoff, false);
    assert!(next.full, "{next:?}");
    assert_eq!(
        fake.object("Org", "cf", "late")
            .expect("org")
            .metadata
            .finalizers,
        vec![FINALIZER.to_string()]
    );
}

/// What a person sees with `kubectl describe`: conditions on the org, and Events of what lethe
/// did and of what held it up, telling the same story as the deletion job.
#[test]
fn conditions_and_events_tell_what_the_reconciler_did_and_what_blocks_it() {
    use lethe_guest::conditions::condition;
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let events = |reason: &str| {
        cluster
            .all("Event")
            .into_iter()
            .filter(|e| e.json()["reason"] == reason)
            .collect::<Vec<_>>()
    };
    pass(&fake, &fake, &settings, &NoBackoff);
    let org = fake.object("Org", "cf", ORG).expect("org");
    assert_eq!(condition(&org, "Ready"), Some(("True", "NamespaceReady")));
    assert_eq!(
        condition(&org, "Blocked"),
        Some(("False", "NothingInTheWay"))
    );
    assert_eq!(
        org.json()["status"]["conditions"][0]["observedGeneration"],
        1
    );

    // Someone swaps the org's namespace for one of their own, then the org is deleted.
    fake.delete(
        &Identity::Privileged,
        &lethe_guest::kube::ObjectRef::new("v1", "Namespace", None, ORG),
        &Default::default(),
    )
    .expect("delete");
    fake.run_namespace_controller();
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ORG}}));
    deletion::delete(&fake, &fake, &settings, "org", ORG, &caller("admin")).expect("accepted");
    pass(&fake, &fake, &settings, &NoBackoff);
    let org = fake.object("Org", "cf", ORG).expect("org");
    assert_eq!(condition(&org, "Ready"), Some(("False", "Deleting")));
    assert_eq!(condition(&org, "Deleting"), Some(("True", "CleaningUp")));
    assert_eq!(condition(&org, "Blocked"), Some(("True", "NotLethes")));
    let blocked = events("DeletionBlocked");
    assert_eq!(blocked.len(), 1, "one Event, however many passes");
    let said = blocked[0].json();
    assert_eq!(said["type"], "Warning");
    assert_eq!(said["regarding"]["name"], ORG);
    let note = said["note"].as_str().unwrap_or_default();
    assert!(note.contains("is not lethe's"), "{note}");
    // The job says the same.
    let job = job(&fake, &settings, &format!("org.delete~{ORG}"), "admin").expect("job");
    assert_eq!(job.state, JobState::Failed);
    assert!(job.errors[0].detail.contains(note), "{:?}", job.errors);

    // The way is cleared: the deletion goes through, and says so.
    fake.delete(
        &Identity::Privileged,
        &lethe_guest::kube::ObjectRef::new("v1", "Namespace", None, ORG),
        &Default::default(),
    )
    .expect("delete");
    fake.run_namespace_controller();
    for _ in 0..6 {
        pass(&fake, &fake, &settings, &NoBackoff);
        fake.run_namespace_controller();
    }
    assert!(!fake.exists("Org", "cf", ORG));
    assert_eq!(events("Unblocked").len(), 1);
    // The org's; the space's went with the namespace it lived in, as Events do.
    assert_eq!(events("Released").len(), 1);
}

/// After an upgrade over many objects, their conditions and name claims are upkeep: a pass
/// writes at most `UPKEEP_PER_PASS` of them and a full pass comes again soon for the rest, so
/// no pass is cut short by them and a deletion is carried out by the passes in between.
#[test]
fn upkeep_drains_a_hundred_writes_a_pass_and_deletions_go_on_meanwhile() {
    use crate::follow::{UPKEEP_AGAIN_MS, pass_on_changes};
    use crate::reconcile::UPKEEP_PER_PASS;
    use lethe_guest::conditions::condition;
    let (cluster, settings) = setup();
    let sql = reconciler_sql();
    let mut host = FakeHost::new(&sql, &cluster, "host-1");
    host.now = cluster.now.clone();
    // Orgs as an earlier lethe left them: finalizer and namespace, no conditions, no claim.
    for i in 0..150 {
        let org = host.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": format!("old-{i}"), "namespace": "cf", "finalizers": [FINALIZER]},
            "spec": {"displayName": format!("old {i}")}}));
        put_owned_namespace(&host, "org", &org);
    }
    let ready = || {
        cluster
            .all("Org")
            .iter()
            .filter(|o| condition(o, "Ready").is_some())
            .count()
    };
    let run = || pass_on_changes(&host, &host, &host, &settings, &NoBackoff, false);
    let first = run();
    assert!(
        first.full && !first.deferred && first.upkeep_behind,
        "{first:?}"
    );
    let written = u32::try_from(ready()).expect("few");
    assert!(
        written <= UPKEEP_PER_PASS,
        "{written} conditions in one pass"
    );
    // A deletion meanwhile goes through on the passes on the changes.
    deletion::delete(&host, &host, &settings, "org", ORG, &caller("admin")).expect("accepted");
    for _ in 0..8 {
        let report = run();
        assert!(!report.full, "{report:?}");
        host.run_namespace_controller();
    }
    assert!(
        !host.exists("Org", "cf", ORG),
        "the deletion waited for the upkeep"
    );
    // Full passes come back every UPKEEP_AGAIN_MS until the upkeep is done.
    let mut full = 0;
    for _ in 0..20 {
        host.advance(UPKEEP_AGAIN_MS);
        let report = run();
        full += usize::from(report.full);
        assert!(!report.deferred, "{report:?}");
        if !report.upkeep_behind && ready() == 150 {
            break;
        }
    }
    assert_eq!(ready(), 150);
    let claims = cluster.all("ConfigMap").len();
    assert!(claims >= 150, "{claims} claims");
    assert!(full >= 2, "{full} full passes");
}

/// The jobs of `job_types = "korifi"` (`config::korifi`), polled through
/// [`crate::jobs::job_status`] and deleted through the API, on a fake cluster.
mod korifi_jobs {
    use lethe_guest::fake::{FakeCluster, FakeHost};
    use lethe_guest::kube::{DeleteOptions, Identity, Kube as _, ObjectRef};
    use serde_json::{Value as Json, json};

    use crate::config::Settings;
    use crate::errors::HttpError;
    use crate::jobs::{Job, JobState, job_status};

    const SPACE: &str = "5a9b2a4e-1b2c-4d5e-8f90-123456789abc";
    const SI: &str = "7c1d2a4e-1b2c-4d5e-8f90-123456789abc";

    fn world() -> (FakeCluster, Settings) {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        host.set_config("job_types", "korifi");
        let settings = Settings::from_env(&host).expect("the preset");
        // "dev" may see what is in the space's namespace; "nobody" sees nothing there.
        cluster.grant("dev", "get", "CFServiceInstance", SPACE);
        cluster.grant("dev", "list", "CFRoute", SPACE);
        cluster.grant("nobody", "list", "Namespace", "*");
        (cluster, settings)
    }

    fn poll(
        cluster: &FakeCluster,
        settings: &Settings,
        guid: &str,
        token: &str,
    ) -> Result<Job, HttpError> {
        let host = FakeHost::on(cluster);
        job_status(
            &host,
            &host,
            settings,
            guid,
            &Identity::Caller(token.into()),
        )
    }

    fn instance(cluster: &FakeCluster, generation: i64, status: Json) {
        cluster.put(json!({
            "apiVersion": crate::config::korifi::API_VERSION, "kind": "CFServiceInstance",
            "metadata": {"name": SI, "namespace": SPACE, "generation": generation},
            "spec": {"type": "managed"}, "status": status
        }));
    }

    fn ready(status: &str, reason: &str, message: &str, observed: i64) -> Json {
        json!({"observedGeneration": observed, "conditions": [
            {"type": "Ready", "status": status, "reason": reason, "message": message}]})
    }

    #[test]
    fn a_state_job_polls_until_ready_at_its_generation_and_fails_on_a_terminal_reason() {
        let (cluster, settings) = world();
        let guid = format!("managed_service_instance.create~{SI}");
        let state = |token: &str| poll(&cluster, &settings, &guid, token).map(|j| j.state);
        instance(&cluster, 1, json!({}));
        assert_eq!(state("dev"), Ok(JobState::Polling), "nothing reported yet");
        instance(&cluster, 1, ready("False", "ProvisionInProgress", "", 1));
        assert_eq!(state("dev"), Ok(JobState::Polling));
        instance(&cluster, 1, ready("True", "Ready", "", 1));
        let done = poll(&cluster, &settings, &guid, "dev").expect("job");
        assert_eq!(done.state, JobState::Complete);
        assert_eq!(
            done.to_json("https://api")["links"]["service_instance"]["href"],
            format!("https://api/v3/service_instances/{SI}")
        );
        // Ready, but for the generation before the last change: not yet done.
        instance(&cluster, 2, ready("True", "Ready", "", 1));
        assert_eq!(state("dev"), Ok(JobState::Polling));
        instance(
            &cluster,
            2,
            ready("False", "ProvisionFailed", "the broker said no", 2),
        );
        let failed = poll(&cluster, &settings, &guid, "dev").expect("job");
        assert_eq!(failed.state, JobState::Failed);
        assert_eq!(failed.errors[0].detail, "the broker said no");
        assert_eq!(failed.errors[0].code, 10008);
        // A reason a retry may mend stays POLLING, as Korifi's.
        instance(
            &cluster,
            2,
            ready("False", "GetLastOperationFailed", "timeout", 2),
        );
        assert_eq!(state("dev"), Ok(JobState::Polling));
        // Who may not see it learns nothing; nor does anyone once it is gone.
        assert_eq!(state("nobody").map_err(|e| e.status), Err(404));
        let host = FakeHost::on(&cluster);
        let target = ObjectRef::new(
            crate::config::korifi::API_VERSION,
            "CFServiceInstance",
            Some(SPACE),
            SI,
        );
        // While it is being deleted, an unfinished job still links it.
        cluster.edit("CFServiceInstance", SPACE, SI, |o| {
            o["metadata"]["finalizers"] = json!(["example.com/hold"]);
        });
        host.delete(&Identity::Privileged, &target, &DeleteOptions::default())
            .expect("deleting");
        let deleting = poll(&cluster, &settings, &guid, "dev").expect("job");
        assert_eq!(deleting.state, JobState::Polling);
        assert!(
            deleting.resource.is_some(),
            "linked while it exists: {deleting:?}"
        );
        cluster.clear_finalizers("CFServiceInstance", SPACE, SI);
        assert_eq!(state("dev").map_err(|e| e.status), Err(404));
    }

    #[test]
    fn an_app_is_deleted_as_the_caller_through_its_cloud_controller_route() {
        let (cluster, settings) = world();
        let host = FakeHost::on(&cluster);
        host.set_config("job_types", "korifi");
        cluster.put(
            json!({"apiVersion": crate::config::korifi::API_VERSION, "kind": "CFApp",
            "metadata": {"name": "a1", "namespace": SPACE, "finalizers": ["example.com/hold"]}}),
        );
        cluster.grant("dev", "get", "CFApp", SPACE);
        let request = |path: &str, token: &str| lethe_guest::Request {
            method: "DELETE".into(),
            path: path.into(),
            headers: vec![(
                "authorization".to_string(),
                format!("Bearer {token}").into_bytes(),
            )]
            .into(),
            ..lethe_guest::Request::default()
        };
        let delete = |token: &str| crate::api::handle(&host, &host, &request("/v3/apps/a1", token));
        let location = |r: &lethe_guest::Response| {
            r.headers
                .iter()
                .find(|(n, _)| n == "location")
                .map(|(_, v)| v.clone())
        };
        assert_eq!(delete("nobody").status, 404, "may not see it");
        assert_eq!(delete("dev").status, 403, "may see it, not delete it");
        let first = delete("admin");
        assert_eq!(first.status, 202);
        let job_location = location(&first);
        assert!(
            job_location
                .as_deref()
                .is_some_and(|l| l.ends_with("/v3/jobs/app.delete~a1")),
            "{job_location:?}"
        );
        assert_eq!(location(&delete("admin")), job_location, "the same job");
        let job = poll(&cluster, &settings, "app.delete~a1", "admin").expect("job");
        assert_eq!(job.state, JobState::Processing);
        // A collection no configured type deletes is no route of lethe's.
        let unrouted = crate::api::handle(&host, &host, &request("/v3/buildpacks/b1", "admin"));
        assert_eq!(unrouted.status, 404);
    }

    #[test]
    fn a_user_provided_instance_and_its_bindings_are_deleted_at_once_without_a_job() {
        let (cluster, _) = world();
        let host = FakeHost::on(&cluster);
        host.set_config("job_types", "korifi");
        let object = |kind: &str, name: &str, spec: Json| {
            json!({"apiVersion": crate::config::korifi::API_VERSION, "kind": kind,
                "metadata": {"name": name, "namespace": SPACE}, "spec": spec})
        };
        cluster.put(object(
            "CFServiceInstance",
            "upsi",
            json!({"type": "user-provided"}),
        ));
        cluster.put(object(
            "CFServiceInstance",
            "msi",
            json!({"type": "managed"}),
        ));
        cluster.put(object(
            "CFServiceInstance",
            "hidden",
            json!({"type": "user-provided"}),
        ));
        // "dev" may read the instances (as `world` grants), "binder" only the bindings.
        for user in ["dev", "binder"] {
            cluster.grant(user, "get", "CFServiceBinding", SPACE);
            cluster.grant(user, "delete", "CFServiceBinding", SPACE);
        }
        cluster.grant("dev", "delete", "CFServiceInstance", SPACE);
        for (binding, instance) in [("b-upsi", "upsi"), ("b-msi", "msi"), ("b-hidden", "hidden")] {
            cluster.put(object(
                "CFServiceBinding",
                binding,
                json!({"type": "app", "service": {"kind": "CFServiceInstance", "name": instance}}),
            ));
        }
        let delete = |path: &str, token: &str| {
            let req = lethe_guest::Request {
                method: "DELETE".into(),
                path: path.into(),
                headers: vec![(
                    "authorization".to_string(),
                    format!("Bearer {token}").into_bytes(),
                )]
                .into(),
                ..lethe_guest::Request::default()
            };
            let answer = crate::api::handle(&host, &host, &req);
            let location = answer.headers.iter().any(|(n, _)| n == "location");
            (answer.status, location)
        };
        // A binding is decided by its instance, read as the caller: one they may not read
        // makes it a job, which is right either way.
        assert_eq!(
            delete("/v3/service_credential_bindings/b-hidden", "binder"),
            (202, true)
        );
        assert_eq!(
            delete("/v3/service_credential_bindings/b-upsi", "dev"),
            (204, false)
        );
        assert_eq!(
            delete("/v3/service_credential_bindings/b-msi", "dev"),
            (202, true)
        );
        assert_eq!(delete("/v3/service_instances/upsi", "dev"), (204, false));
        assert_eq!(delete("/v3/service_instances/msi", "dev"), (202, true));
        for gone in ["b-hidden", "b-upsi", "b-msi"] {
            assert!(
                !cluster.exists("CFServiceBinding", SPACE, gone),
                "{gone} deleted"
            );
        }
        for gone in ["upsi", "msi"] {
            assert!(
                !cluster.exists("CFServiceInstance", SPACE, gone),
                "{gone} deleted"
            );
        }
    }

    #[test]
    fn orgs_and_spaces_korifi_owns_are_not_created_through_lethe() {
        let (cluster, _) = world();
        let host = FakeHost::on(&cluster);
        host.set_config("job_types", "korifi");
        for (path, body) in [
            ("/v3/organizations", r#"{"name": "o"}"#),
            ("/v3/spaces", r#"{"name": "s"}"#),
        ] {
            let req = lethe_guest::Request {
                method: "POST".into(),
                path: path.into(),
                headers: vec![("authorization".to_string(), b"Bearer admin".to_vec())].into(),
                body: body.as_bytes().to_vec(),
                ..lethe_guest::Request::default()
            };
            let answer = crate::api::handle(&host, &host, &req);
            assert_eq!(answer.status, 404, "{path}");
            let envelope: Json = serde_json::from_slice(&answer.body).expect("envelope");
            assert_eq!(envelope["errors"][0]["title"], "CF-NotFound", "{path}");
        }
        for kind in ["CFOrg", "CFSpace", "Namespace"] {
            assert!(cluster.all(kind).is_empty(), "no {kind} made");
        }
    }

    #[test]
    fn a_broker_create_is_processing_not_polling() {
        let (cluster, settings) = world();
        cluster.put(json!({
            "apiVersion": crate::config::korifi::API_VERSION, "kind": "CFServiceBroker",
            "metadata": {"name": "b1", "namespace": "cf"}, "status": {}
        }));
        let job = poll(&cluster, &settings, "service_broker.create~b1", "admin").expect("job");
        assert_eq!(job.state, JobState::Processing);
        assert_eq!(job.to_json("x")["operation"], "service_broker.create");
    }

    #[test]
    fn a_role_is_found_by_its_label_not_its_name() {
        let (cluster, settings) = world();
        let role = "9e1d2a4e-1b2c-4d5e-8f90-123456789abc";
        let guid = format!("role.delete~{role}");
        // A RoleBinding named after the guid, but without the label, is not the role.
        cluster.put(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": SPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"}}));
        let state = |token: &str| poll(&cluster, &settings, &guid, token).map(|j| j.state);
        assert_eq!(state("admin"), Ok(JobState::Complete));
        let now = lethe_guest::env::format_rfc3339(cluster.now.get());
        cluster.put(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "cf-abc", "namespace": SPACE,
                "labels": {crate::config::korifi::ROLE_GUID_LABEL: role},
                "deletionTimestamp": now, "finalizers": ["example.com/hold"]},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "x"}}));
        assert_eq!(state("admin"), Ok(JobState::Processing), "being deleted");
        assert_eq!(
            state("nobody"),
            Ok(JobState::Processing),
            "a deletion under way, to anyone"
        );
        FakeHost::on(&cluster).advance(120_000);
        assert_eq!(state("admin"), Ok(JobState::Failed), "past the timeout");
    }

    #[test]
    fn apply_manifest_is_complete_and_unmapped_routes_wait_for_destinations() {
        let (cluster, settings) = world();
        let applied = poll(
            &cluster,
            &settings,
            &format!("space.apply_manifest~{SPACE}"),
            "dev",
        )
        .expect("job");
        assert_eq!(applied.state, JobState::Complete);
        assert_eq!(
            applied.to_json("https://api")["links"]["space"]["href"],
            format!("https://api/v3/spaces/{SPACE}")
        );
        let guid = format!("space.delete_unapped_routes~{SPACE}");
        let route = |name: &str, destinations: Json| {
            cluster.put(
                json!({"apiVersion": crate::config::korifi::API_VERSION, "kind": "CFRoute",
                "metadata": {"name": name, "namespace": SPACE},
                "spec": {"host": name, "destinations": destinations}}),
            );
        };
        route("mapped", json!([{"appRef": {"name": "a"}}]));
        route("unmapped", json!([]));
        let state = |token: &str| poll(&cluster, &settings, &guid, token).map(|j| j.state);
        assert_eq!(state("dev"), Ok(JobState::Processing));
        route("unmapped", json!([{"appRef": {"name": "b"}}]));
        assert_eq!(state("dev"), Ok(JobState::Complete));
        assert_eq!(
            state("nobody").map_err(|e| e.status),
            Err(404),
            "may not list them"
        );
        assert_eq!(
            poll(
                &cluster,
                &settings,
                &format!("space.frobnicate~{SPACE}"),
                "dev"
            )
            .map_err(|e| e.status),
            Err(404),
            "a verb the type does not have"
        );
    }
}

/// One LIST as [`Lists`] records it: the kind, the label selector, the page size asked for and
/// the objects answered.
type Listed = (String, Option<String>, Option<u32>, usize);

/// The cluster as the reconciler sees it, with every LIST recorded (`seen`), and every call's
/// verb and kind (`calls`).
struct Recorded<'a> {
    inner: &'a FakeHost<'a>,
    seen: std::cell::RefCell<Vec<Listed>>,
    calls: std::cell::RefCell<Vec<(&'static str, String)>>,
}

impl<'a> Recorded<'a> {
    fn new(inner: &'a FakeHost<'a>) -> Self {
        Recorded {
            inner,
            seen: Default::default(),
            calls: Default::default(),
        }
    }

    fn call(&self, verb: &'static str, kind: &str) {
        self.calls.borrow_mut().push((verb, kind.to_string()));
    }

    /// How many calls of `verb` on `kind` were made.
    fn made(&self, verb: &str, kind: &str) -> usize {
        let calls = self.calls.borrow();
        calls
            .iter()
            .filter(|(v, k)| *v == verb && k == kind)
            .count()
    }
}

impl Kube for Recorded<'_> {
    fn authenticate(&self, id: &Identity) -> lethe_guest::kube::Result<()> {
        self.inner.authenticate(id)
    }
    fn get(
        &self,
        id: &Identity,
        at: &lethe_guest::kube::ObjectRef,
    ) -> lethe_guest::kube::Result<Object> {
        self.call("get", &at.kind);
        self.inner.get(id, at)
    }
    fn list(
        &self,
        id: &Identity,
        of: &Collection,
        page: &lethe_guest::kube::ListOptions,
    ) -> lethe_guest::kube::Result<lethe_guest::kube::ObjectList> {
        self.call("list", &of.kind);
        let listed = self.inner.list(id, of, page)?;
        self.seen.borrow_mut().push((
            of.kind.clone(),
            page.label_selector.clone(),
            page.limit,
            listed.items.len(),
        ));
        Ok(listed)
    }
    fn create(
        &self,
        id: &Identity,
        object: &serde_json::Value,
    ) -> lethe_guest::kube::Result<Object> {
        self.call("create", object["kind"].as_str().unwrap_or_default());
        self.inner.create(id, object)
    }
    fn patch(
        &self,
        id: &Identity,
        at: &lethe_guest::kube::ObjectRef,
        patch: &lethe_guest::kube::Patch,
    ) -> lethe_guest::kube::Result<Object> {
        self.call("patch", &at.kind);
        self.inner.patch(id, at, patch)
    }
    fn patch_status(
        &self,
        id: &Identity,
        at: &lethe_guest::kube::ObjectRef,
        patch: &lethe_guest::kube::Patch,
    ) -> lethe_guest::kube::Result<Object> {
        self.call("patch_status", &at.kind);
        self.inner.patch_status(id, at, patch)
    }
    fn replace(
        &self,
        id: &Identity,
        at: &lethe_guest::kube::ObjectRef,
        object: &serde_json::Value,
    ) -> lethe_guest::kube::Result<Object> {
        self.call("replace", &at.kind);
        self.inner.replace(id, at, object)
    }
    fn delete(
        &self,
        id: &Identity,
        at: &lethe_guest::kube::ObjectRef,
        options: &lethe_guest::kube::DeleteOptions,
    ) -> lethe_guest::kube::Result<lethe_guest::kube::Deletion> {
        self.call("delete", &at.kind);
        self.inner.delete(id, at, options)
    }
    fn changes(
        &self,
        id: &Identity,
        of: &Collection,
        since: lethe_guest::kube::Since<'_>,
    ) -> lethe_guest::kube::Result<lethe_guest::kube::ChangeBatch> {
        self.inner.changes(id, of, since)
    }
}

/// A full pass reads a page at a time, and of the namespaces only those carrying lethe's mark:
/// its cost is bounded by what lethe owns, not by the size of the cluster.
#[test]
fn a_full_pass_lists_pages_of_its_own_and_only_marked_namespaces() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let count = crate::reconcile::LIST_PAGE as usize + 20;
    for i in 0..count {
        fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
            "metadata": {"name": format!("org-{i:04}"), "namespace": "cf", "finalizers": [FINALIZER]},
            "spec": {"displayName": format!("o{i}")}}));
        // Namespaces that are nobody's business of lethe's.
        fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": format!("theirs-{i:04}")}}));
    }
    let lists = Recorded::new(&fake);
    let report = pass(&lists, &fake, &settings, &NoBackoff);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    let seen = lists.seen.into_inner();
    let page = Some(crate::reconcile::LIST_PAGE);
    for (kind, selector, limit, items) in &seen {
        assert_eq!(*limit, page, "{kind}: every LIST is a page");
        assert!(
            *items as u32 <= crate::reconcile::LIST_PAGE,
            "{kind}: {items}"
        );
        if kind == "Namespace" {
            assert_eq!(
                selector.as_deref(),
                Some(crate::ownership::OWNER_UID_LABEL),
                "only namespaces carrying lethe's mark"
            );
        }
    }
    let listed = |of: &str| -> usize {
        seen.iter()
            .filter(|(kind, ..)| kind == of)
            .map(|(.., items)| items)
            .sum()
    };
    assert_eq!(listed("Org"), count + 1, "every org, in pages");
    assert_eq!(
        listed("Namespace"),
        2,
        "the setup's org and space namespaces"
    );
}

/// A namespace whose owner is gone is swept, and counted; one that is only half marked (its
/// owner's name without the owner's uid, as a namespace relabelled after the LIST shows it) is
/// not lethe's to delete.
#[test]
fn a_namespace_that_outlived_its_owner_is_swept_and_a_half_marked_one_is_left() {
    use crate::ownership::{OWNER_LABEL, OWNER_UID_LABEL};
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let gone = "6f1c2a4e-1b2c-4d5e-8f90-0000000000aa";
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": gone, "labels": {OWNER_LABEL: format!("org.{gone}"),
            OWNER_UID_LABEL: "uid-of-the-org"}}}));
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
    assert_eq!(report.deleted, 1, "the orphan, and nothing else");
    assert!(
        fake.object("Namespace", "", gone)
            .is_none_or(|ns| ns.metadata.deletion_timestamp.is_some()),
        "swept"
    );

    let half = "6f1c2a4e-1b2c-4d5e-8f90-0000000000bb";
    fake.put(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": half, "labels": {OWNER_LABEL: format!("org.{half}")}}}));
    let events = lethe_guest::events::Recorder::new(&fake, &fake, crate::tell::CONTROLLER);
    let reconciler = crate::reconcile::Reconciler {
        kube: &fake,
        env: &fake,
        settings: &settings,
        backoff: &NoBackoff,
        lease: None,
        events: &events,
        upkeep: std::cell::Cell::new(crate::reconcile::UPKEEP_PER_PASS),
    };
    let mut report = crate::reconcile::Report::default();
    let org_type = settings
        .reconciled_type("org")
        .expect("orgs are reconciled");
    reconciler.sweep("org", org_type, half, &mut report);
    assert_eq!(report.deleted, 0);
    assert!(
        fake.object("Namespace", "", half)
            .expect("left")
            .metadata
            .deletion_timestamp
            .is_none()
    );
}

/// What the host hears of a pass: its counts, failures, duration (the clock did not move) and
/// whether upkeep is behind (it is not, in a quiet pass); and a failed step's condition names
/// the step.
#[test]
fn a_pass_reports_its_counts_duration_and_failed_steps_by_name() {
    use lethe_guest::conditions::condition;
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let quiet = pass(&fake, &fake, &settings, &NoBackoff);
    assert_eq!(quiet.duration_ms, 0, "the fake clock stood still");
    assert!(!quiet.upkeep_behind, "nothing left for later: {quiet:?}");

    // An org whose namespace cannot be made.
    let org = "6f1c2a4e-1b2c-4d5e-8f90-0000000000cc";
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": org, "namespace": "cf", "finalizers": [FINALIZER]},
        "spec": {"displayName": "n"}}));
    cluster.fail("create", "Namespace");
    let failing = pass(&fake, &fake, &settings, &NoBackoff);
    let made = fake.object("Org", "cf", org).expect("org");
    assert_eq!(
        condition(&made, "Ready").map(|(status, reason)| (status.to_string(), reason.to_string())),
        Some(("False".to_string(), "MakingNamespaceFailed".to_string()))
    );
    let heard = lethe_guest::reconciler::PassReport::from(failing.clone());
    assert_eq!(
        (heard.examined, heard.created, heard.updated, heard.deleted),
        (
            failing.examined,
            failing.created,
            failing.updated,
            failing.deleted
        )
    );
    assert!(heard.examined >= 3, "{heard:?}");
    assert_eq!(
        heard
            .failed
            .iter()
            .map(|f| f.item.clone())
            .collect::<Vec<_>>(),
        failing
            .failed
            .iter()
            .map(|(item, _)| item.clone())
            .collect::<Vec<_>>()
    );
    assert!(
        heard.failed.iter().any(|f| f.item == format!("org/{org}")),
        "{heard:?}"
    );
}

/// A backoff under which nothing is due yet.
struct NothingDue;

impl Backoff for NothingDue {
    fn due(&self, _key: &str, _now_ms: i64) -> bool {
        false
    }
    fn failed(&self, _key: &str, _now_ms: i64, _reason: &str) {}
    fn succeeded(&self, _key: &str) {}
    fn due_now(&self, _now_ms: i64) -> Vec<String> {
        Vec::new()
    }
}

/// Objects whose next attempt is not due yet are counted as backing off and left alone.
#[test]
fn objects_backing_off_are_counted_and_left_alone() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": "bare", "namespace": "cf"}, "spec": {"displayName": "bare"}}));
    let report = pass(&fake, &fake, &settings, &NothingDue);
    assert_eq!((report.examined, report.backing_off), (3, 3), "{report:?}");
    let bare = fake.object("Org", "cf", "bare").expect("org");
    assert!(bare.metadata.finalizers.is_empty(), "left alone");
    assert!(!fake.exists("Namespace", "", "bare"));
}

/// When the name claims cannot be listed, an org made outside the API (without lethe's
/// finalizer) still claims its name at once; one with lethe's finalizer, made through the API,
/// holds its claim already or gets it as upkeep, from a pass that could list them.
#[test]
fn a_hand_made_org_claims_its_name_even_when_the_claims_cannot_be_listed() {
    let (cluster, settings) = setup();
    let fake = FakeHost::on(&cluster);
    let bare = fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": "bare", "namespace": "cf"}, "spec": {"displayName": "bare-name"}}));
    let kept = fake.put(json!({"apiVersion": "cf.lethe.dev/v1alpha1", "kind": "Org",
        "metadata": {"name": "kept", "namespace": "cf", "finalizers": [FINALIZER]},
        "spec": {"displayName": "kept-name"}}));
    cluster.fail("list", "ConfigMap");
    let report = pass(&fake, &fake, &settings, &NoBackoff);
    assert!(
        report.failed.iter().any(|(item, _)| item == "name-claim/*"),
        "{:?}",
        report.failed
    );
    let t = settings.kind(ResourceKind::Org).expect("orgs");
    let claim_of = |o: &Object| {
        NameClaim::of(&settings.root_namespace, ResourceKind::Org, t, o)
            .expect("named")
            .target()
    };
    let exists = |at: lethe_guest::kube::ObjectRef| {
        fake.exists("ConfigMap", at.namespace.as_deref().unwrap_or(""), &at.name)
    };
    assert!(
        exists(claim_of(&bare)),
        "the hand-made org's name is claimed"
    );
    assert!(
        !exists(claim_of(&kept)),
        "an org with lethe's finalizer waits for a pass that lists the claims"
    );
}
