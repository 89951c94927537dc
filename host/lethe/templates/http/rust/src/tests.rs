//! The logic against the guest SDK's fake host: a real SQLite database with this component's
//! migrations, and an in-memory cluster that enforces who may list what.

use lethe_guest::fake::{FakeCluster, FakeHost, FakeSql};
use lethe_guest::{Request, Response};
use serde_json::{Value as Json, json};

use super::handle;

fn database() -> FakeSql {
    FakeSql::migrated(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
}

fn call(host: &FakeHost, method: &str, path_info: &str, body: &str, token: Option<&str>) -> Response {
    let mut headers = vec![("spin-path-info".to_string(), path_info.as_bytes().to_vec())];
    if let Some(token) = token {
        headers.push(("authorization".into(), format!("Bearer {token}").into_bytes()));
    }
    let req = Request {
        method: method.into(),
        path: format!("/__NAME__{path_info}"),
        headers: headers.into(),
        body: body.as_bytes().to_vec(),
        ..Default::default()
    };
    handle(host, &req)
}

fn body(r: &Response) -> Json {
    r.json_body().expect("a JSON body")
}

fn code(r: &Response) -> i64 {
    body(r)["errors"][0]["code"].as_i64().unwrap_or_default()
}

#[test]
fn items_are_stored_replaced_and_listed() {
    let (sql, cluster) = (database(), FakeCluster::new());
    let host = FakeHost::new(&sql, &cluster, "test");
    assert_eq!(call(&host, "PUT", "/items/a", "one", None).status, 201);
    assert_eq!(call(&host, "PUT", "/items/a", "two", None).status, 200);
    let read = call(&host, "GET", "/items/a", "", None);
    assert_eq!(body(&read), json!({ "key": "a", "body": "two" }));
    let list = call(&host, "GET", "/items", "", None);
    assert_eq!(body(&list)["resources"], json!([{ "key": "a", "body": "two" }]));
}

#[test]
fn bad_input_gets_the_documented_errors() {
    let (sql, cluster) = (database(), FakeCluster::new());
    let host = FakeHost::new(&sql, &cluster, "test");
    for (method, path, sent, status, cf_code) in [
        ("GET", "/items/absent", "", 404, 10010),
        ("PUT", "/items/bad%20key", "x", 422, 10008),
        ("PUT", "/items/empty", "", 422, 10008),
        ("PUT", "/items/nul", "a\u{0}b", 422, 10008),
        ("DELETE", "/items", "", 405, 10000),
        ("GET", "/elsewhere", "", 404, 10000),
    ] {
        let r = call(&host, method, path, sent, None);
        assert_eq!((r.status, code(&r)), (status, cf_code), "{method} {path}");
    }
}

#[test]
fn configmaps_are_listed_as_the_caller_sees_them() {
    let (sql, cluster) = (database(), FakeCluster::new());
    for name in ["b", "a"] {
        cluster.put(json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": { "name": name, "namespace": "team" },
        }));
    }
    cluster.grant("alice", "list", "ConfigMap", "team");
    let host = FakeHost::new(&sql, &cluster, "test");
    let seen = call(&host, "GET", "/configmaps/team", "", Some("alice"));
    assert_eq!(seen.status, 200);
    assert_eq!(body(&seen), json!({ "namespace": "team", "configmaps": ["a", "b"] }));
    // Bob has no rights there, and nobody is anonymous.
    let refused = call(&host, "GET", "/configmaps/team", "", Some("bob"));
    assert_eq!((refused.status, code(&refused)), (403, 10003));
    let anonymous = call(&host, "GET", "/configmaps/team", "", None);
    assert_eq!((anonymous.status, code(&anonymous)), (401, 10002));
}
