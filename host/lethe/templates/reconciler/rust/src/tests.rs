//! The API and the pass against the guest SDK's fake host: a real SQLite database with this
//! component's migrations, and an in-memory cluster that keeps finalizers, deletion timestamps,
//! watches and a permission table per token.

use lethe_guest::fake::{FakeCluster, FakeHost, FakeSql};
use lethe_guest::{Request, Response};
use serde_json::{Value as Json, json};

use crate::api::{handle, job};
use crate::reconcile::tick;
use crate::{FINALIZER, KIND, UID_LABEL};

/// Content for the tests. The fake cluster does not validate content; the kind's real fields
/// (`spec`, `data`...) are what a real cluster takes.
fn content(greeting: &str) -> Json {
    json!({ "data": { "greeting": greeting } })
}

fn database() -> FakeSql {
    FakeSql::migrated(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
}

/// A cluster where alice may do anything to the kind in `team`, and bob nothing.
fn cluster() -> FakeCluster {
    let cluster = FakeCluster::new();
    cluster.grant("alice", "*", KIND, "team");
    cluster
}

fn call(
    host: &FakeHost,
    method: &str,
    path_info: &str,
    body: Option<Json>,
    token: Option<&str>,
) -> Response {
    let mut headers = vec![("spin-path-info".to_string(), path_info.as_bytes().to_vec())];
    if let Some(token) = token {
        headers.push((
            "authorization".into(),
            format!("Bearer {token}").into_bytes(),
        ));
    }
    handle(
        host,
        &Request {
            method: method.into(),
            path: format!("/__NAME__{path_info}"),
            headers: headers.into(),
            body: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
            ..Default::default()
        },
    )
}

fn code(r: &Response) -> i64 {
    r.json_body().expect("a JSON body")["errors"][0]["code"]
        .as_i64()
        .unwrap_or_default()
}

fn state(host: &FakeHost, token: &str) -> Result<String, u16> {
    let guid = format!("{}.delete~team~settings", crate::JOB_TYPE);
    job(
        host,
        host,
        host,
        &guid,
        &lethe_guest::kube::Identity::Caller(token.into()),
    )
    .map(|j| j.state.as_str().to_string())
    .map_err(|e| e.status)
}

#[test]
fn a_desired_object_is_made_then_deleted_and_its_job_completes() {
    let (sql, cluster) = (database(), cluster());
    let host = FakeHost::new(&sql, &cluster, "test");
    let put = call(
        &host,
        "PUT",
        "/objects/team/settings",
        Some(content("hello")),
        Some("alice"),
    );
    assert_eq!(put.status, 201);
    let created = tick(&host, false).expect("pass");
    assert_eq!(created.created, 1, "{created:?}");
    let live = cluster.object(KIND, "team", "settings").expect("made");
    assert_eq!(live.json()["data"]["greeting"], "hello");
    assert_eq!(live.metadata.finalizers, [FINALIZER]);
    assert!(live.label(UID_LABEL).is_some());
    assert_eq!(
        state(&host, "alice"),
        Err(404),
        "no deletion asked for: no job"
    );

    let deleted = call(
        &host,
        "DELETE",
        "/objects/team/settings",
        None,
        Some("alice"),
    );
    assert_eq!(deleted.status, 202);
    let location = deleted.header("location").expect("a Location");
    assert!(
        location.ends_with("/__NAME__/jobs/__JOB_TYPE__.delete~team~settings"),
        "{location}"
    );
    assert_eq!(
        state(&host, "alice"),
        Ok("PROCESSING".into()),
        "the first poll never 404s"
    );
    let again = call(
        &host,
        "DELETE",
        "/objects/team/settings",
        None,
        Some("alice"),
    );
    assert_eq!(
        (again.status, again.header("location")),
        (202, Some(location))
    );

    let pass = tick(&host, false).expect("pass");
    assert_eq!(pass.deleted, 1, "{pass:?}");
    assert!(
        !cluster.exists(KIND, "team", "settings"),
        "its finalizer was ours alone"
    );
    assert_eq!(state(&host, "alice"), Ok("COMPLETE".into()));
    // Someone else's object that takes the free name is not the one deleted: still COMPLETE.
    cluster.put(json!({
        "apiVersion": crate::API_VERSION, "kind": KIND,
        "metadata": { "name": "settings", "namespace": "team" },
        "data": { "owner": "someone else" },
    }));
    assert_eq!(state(&host, "alice"), Ok("COMPLETE".into()));
}

#[test]
fn drift_is_put_back_and_an_object_not_ours_is_never_touched() {
    let (sql, cluster) = (database(), cluster());
    let host = FakeHost::new(&sql, &cluster, "test");
    call(
        &host,
        "PUT",
        "/objects/team/settings",
        Some(content("hello")),
        Some("alice"),
    );
    tick(&host, false).expect("pass");
    cluster.edit(KIND, "team", "settings", |o| {
        o["data"]["greeting"] = json!("edited")
    });
    let pass = tick(&host, false).expect("pass");
    assert_eq!(pass.updated, 1, "{pass:?}");
    let live = cluster.object(KIND, "team", "settings").expect("kept");
    assert_eq!(live.json()["data"]["greeting"], "hello");

    cluster.put(json!({
        "apiVersion": crate::API_VERSION, "kind": KIND,
        "metadata": { "name": "theirs", "namespace": "team" },
        "data": { "owner": "someone else" },
    }));
    call(
        &host,
        "PUT",
        "/objects/team/theirs",
        Some(content("mine")),
        Some("alice"),
    );
    let pass = tick(&host, false).expect("pass");
    assert!(
        pass.failed
            .iter()
            .any(|f| f.item == "team/theirs" && !f.parked),
        "reported, and tried again with backoff: {pass:?}"
    );
    let theirs = cluster.object(KIND, "team", "theirs").expect("still there");
    assert_eq!(theirs.json()["data"], json!({ "owner": "someone else" }));
    assert!(theirs.metadata.finalizers.is_empty() && theirs.metadata.labels.is_empty());

    // Once its owner takes it away, the backoff's next try makes ours.
    cluster.clear_finalizers(KIND, "team", "theirs");
    let gone = lethe_guest::kube::Kube::delete(
        &cluster,
        &lethe_guest::kube::Identity::Privileged,
        &crate::target("team", "theirs"),
        &Default::default(),
    );
    assert!(gone.is_ok(), "{gone:?}");
    host.advance(2_000);
    let pass = tick(&host, false).expect("pass");
    assert_eq!(pass.created, 1, "{pass:?}");
    let ours = cluster.object(KIND, "team", "theirs").expect("made");
    assert_eq!(ours.json()["data"]["greeting"], "mine");
}

#[test]
fn the_cluster_decides_who_may_ask_and_bad_input_is_refused() {
    let (sql, cluster) = (database(), cluster());
    let host = FakeHost::new(&sql, &cluster, "test");
    let refused = call(
        &host,
        "PUT",
        "/objects/team/settings",
        Some(content("x")),
        Some("bob"),
    );
    assert_eq!((refused.status, code(&refused)), (403, 10003));
    let anonymous = call(
        &host,
        "PUT",
        "/objects/team/settings",
        Some(content("x")),
        None,
    );
    assert_eq!((anonymous.status, code(&anonymous)), (401, 10002));
    for (path, body) in [
        ("/objects/Team/settings", content("x")),
        ("/objects/team/settings", json!(["not", "an", "object"])),
        (
            "/objects/team/settings",
            json!({ "metadata": { "name": "x" } }),
        ),
    ] {
        let bad = call(&host, "PUT", path, Some(body), Some("alice"));
        assert_eq!((bad.status, code(&bad)), (422, 10008), "{path}");
    }
    call(
        &host,
        "PUT",
        "/objects/team/settings",
        Some(content("x")),
        Some("alice"),
    );
    call(
        &host,
        "DELETE",
        "/objects/team/settings",
        None,
        Some("alice"),
    );
    assert_eq!(
        state(&host, "bob"),
        Err(404),
        "bob may not read it: he learns nothing"
    );
    assert_eq!(
        state(&host, "alice"),
        Ok("COMPLETE".into()),
        "never made, so nothing to wait for"
    );
}

#[test]
fn only_the_lease_holder_runs_passes() {
    let (sql, cluster) = (database(), cluster());
    let first = FakeHost::new(&sql, &cluster, "host-1");
    let second = FakeHost::new(&sql, &cluster, "host-2");
    assert_eq!(tick(&first, false).expect("pass").leader_elsewhere, None);
    let skipped = tick(&second, false).expect("no pass");
    assert_eq!(skipped.leader_elsewhere.as_deref(), Some("host-1"));
}
