//! The job states against the guest SDK's fake cluster, which keeps finalizers, deletion
//! timestamps and a permission table per token, with a clock the test moves.

use lethe_guest::cf::JobState;
use lethe_guest::fake::{FakeCluster, FakeHost};
use lethe_guest::kube::{DeleteOptions, Identity, Kube as _, ObjectRef};
use lethe_guest::{Request, Response};
use serde_json::json;

use super::{API_VERSION, JOB_TYPE, KIND, handle, job};

const HOLD: &str = "example.com/hold";

fn guid() -> String {
    format!("{JOB_TYPE}.delete~team~settings")
}

fn target() -> ObjectRef {
    ObjectRef {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        namespace: Some("team".into()),
        name: "settings".into(),
    }
}

/// A cluster with one object that waits for a finalizer when deleted, readable by alice only.
fn cluster() -> FakeCluster {
    let cluster = FakeCluster::new();
    cluster.put(json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": { "name": "settings", "namespace": "team", "finalizers": [HOLD] },
    }));
    cluster.grant("alice", "get", KIND, "team");
    cluster
}

fn state(host: &FakeHost, who: &str) -> Result<JobState, u16> {
    job(host, host, &guid(), &Identity::Caller(who.into()))
        .map(|j| j.state)
        .map_err(|e| e.status)
}

#[test]
fn a_deletion_is_processing_then_failed_then_complete() {
    let cluster = cluster();
    let host = FakeHost::on(&cluster);
    assert_eq!(state(&host, "alice"), Err(404), "nothing is being deleted yet");
    cluster
        .delete(&Identity::Privileged, &target(), &DeleteOptions::default())
        .expect("delete");
    assert_eq!(state(&host, "alice"), Ok(JobState::Processing));
    cluster.advance(121_000);
    let failed = job(&host, &host, &guid(), &Identity::Caller("alice".into())).expect("job");
    assert_eq!(failed.state, JobState::Failed);
    assert!(failed.errors[0].detail.contains(HOLD), "{:?}", failed.errors);
    cluster.remove_finalizer(KIND, "team", "settings", HOLD);
    assert_eq!(state(&host, "alice"), Ok(JobState::Complete));
}

#[test]
fn a_caller_who_may_not_read_the_object_learns_nothing() {
    let cluster = cluster();
    let host = FakeHost::on(&cluster);
    assert_eq!(state(&host, "bob"), Err(404));
    cluster
        .delete(&Identity::Privileged, &target(), &DeleteOptions::default())
        .expect("delete");
    assert_eq!(state(&host, "bob"), Err(404), "refused alike while it is deleted");
    for malformed in ["", "other.delete~team~settings", &format!("{JOB_TYPE}.delete~a~b~c")] {
        let answer = job(&host, &host, malformed, &Identity::Caller("alice".into()));
        assert_eq!(answer.map_err(|e| e.status), Err(404), "{malformed:?}");
    }
}

#[test]
fn the_http_route_needs_a_token_and_renders_the_job() {
    let cluster = cluster();
    let host = FakeHost::on(&cluster);
    cluster
        .delete(&Identity::Privileged, &target(), &DeleteOptions::default())
        .expect("delete");
    let get = |token: Option<&str>| -> Response {
        let path_info = format!("/jobs/{}", guid());
        let mut headers = vec![("spin-path-info".to_string(), path_info.clone().into_bytes())];
        if let Some(t) = token {
            headers.push(("authorization".into(), format!("Bearer {t}").into_bytes()));
        }
        handle(&host, &host, &Request {
            method: "GET".into(),
            path: format!("/__NAME__{path_info}"),
            headers: headers.into(),
            ..Default::default()
        })
    };
    let seen = get(Some("alice"));
    assert_eq!(seen.status, 200);
    let body = seen.json_body().expect("json");
    assert_eq!(body["state"], "PROCESSING");
    assert_eq!(body["operation"], format!("{JOB_TYPE}.delete"));
    assert_eq!(get(None).status, 401);
}
