//! Helpers of the Cloud Foundry end-to-end tests: requests to lethe's CF API, orgs and spaces
//! made by the administrator, role bindings made with kubectl, and bounded polling of jobs.

use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::{Answer, Lethe, request};

/// Sends `method path` to lethe as `token` (no `Authorization` without one).
pub fn call(
    lethe: &Lethe,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Answer {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let url = if path.starts_with("http") {
        path.to_string()
    } else {
        format!("{}{path}", lethe.url)
    };
    request(method, &url, body, &headers)
}

/// `name` made unique to this test run, so runs against one external cluster never collide.
pub fn unique(name: &str) -> String {
    format!("{name}-{}", std::process::id())
}

/// Creates an org as the administrator under a run-unique `name`; its guid.
pub fn create_org(lethe: &Lethe, name: &str) -> String {
    let admin = lethe.admin_token();
    let name = unique(name);
    let r = call(
        lethe,
        "POST",
        "/v3/organizations",
        Some(&admin),
        Some(&format!(r#"{{"name":"{name}"}}"#)),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["guid"].as_str().expect("guid").to_string()
}

/// Creates a space in `org` as the administrator; its guid.
pub fn create_space(lethe: &Lethe, org: &str, name: &str) -> String {
    let admin = lethe.admin_token();
    let body = format!(
        r#"{{"name":"{name}","relationships":{{"organization":{{"data":{{"guid":"{org}"}}}}}}}}"#
    );
    let r = call(lethe, "POST", "/v3/spaces", Some(&admin), Some(&body));
    assert_eq!(r.status, 201, "{}", r.body);
    r.json()["guid"].as_str().expect("guid").to_string()
}

/// Binds the CF role `role` (`organization-manager`, …) to `user` in `namespace`, with kubectl
/// as the administrator.
pub fn bind(lethe: &Lethe, namespace: &str, role: &str, user: &str) {
    lethe.kubectl_ok(&[
        "create",
        "rolebinding",
        &format!("{user}-{role}"),
        "-n",
        namespace,
        &format!("--clusterrole=lethe-cf-{role}"),
        &format!("--user={user}"),
    ]);
}

/// Patches the Org `org` in the `cf` namespace with kubectl as the administrator; `kind` is
/// kubectl's `--type` (`json`, `merge`).
pub fn patch_org(lethe: &Lethe, org: &str, kind: &str, patch: &str) {
    lethe.kubectl_ok(&[
        "patch",
        "orgs.cf.lethe.dev",
        org,
        "-n",
        "cf",
        &format!("--type={kind}"),
        "-p",
        patch,
    ]);
}

/// The status and body of the job at `location`, polled as `token`.
pub fn job_state(lethe: &Lethe, location: &str, token: &str) -> (u16, Json) {
    let r = call(lethe, "GET", location, Some(token), None);
    let body = r.json();
    (r.status, body)
}

/// Polls the job at `location` until it is in `state`, for at most `within`; its body.
pub fn wait_for_state(
    lethe: &Lethe,
    location: &str,
    token: &str,
    state: &str,
    within: Duration,
) -> Json {
    let deadline = Instant::now() + within;
    loop {
        let (status, body) = job_state(lethe, location, token);
        assert_eq!(status, 200, "{body}");
        if body["state"] == state || Instant::now() > deadline {
            assert_eq!(body["state"], state, "waiting for {state}: {body}");
            return body;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The guids of `collection` (`organizations`, `spaces`) that `token` is shown, among `among`
/// only (on a shared cluster other tests' objects are listed too).
pub fn listed(lethe: &Lethe, token: &str, collection: &str, among: &[&String]) -> Vec<String> {
    let r = call(
        lethe,
        "GET",
        &format!("/v3/{collection}?per_page=5000"),
        Some(token),
        None,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let mut guids: Vec<String> = r.json()["resources"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|o| o["guid"].as_str().map(str::to_string))
        .filter(|g| among.contains(&g))
        .collect();
    guids.sort();
    guids
}
