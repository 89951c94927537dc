use std::cell::RefCell;
use std::collections::BTreeMap;

use lethe_guest::fake::FakeCluster;
use serde_json::json;

use super::*;

/// An in-memory stand-in for the host, answering exactly the statements the smoke logic makes.
#[derive(Default)]
struct FakeHost {
    notes: RefCell<BTreeMap<String, String>>,
    ticks: RefCell<Vec<i64>>,
    fail: bool,
}

impl Capabilities for FakeHost {
    fn query(&self, sql: &str, params: &[Param]) -> Result<Vec<Vec<Param>>, CapError> {
        if self.fail {
            return Err(CapError::Failed("database down".into()));
        }
        let notes = self.notes.borrow();
        let row = |(n, b): (&String, &String)| vec![Param::Text(n.clone()), Param::Text(b.clone())];
        Ok(match (sql, params) {
            (s, []) if s.starts_with("SELECT name, body FROM smoke_note ORDER BY") => {
                notes.iter().map(row).collect()
            }
            (s, [Param::Text(name)]) if s.starts_with("SELECT name, body") => {
                notes.get_key_value(name).map(row).into_iter().collect()
            }
            (s, [Param::Text(name)]) if s.starts_with("SELECT 1") => notes
                .get(name)
                .map(|_| vec![Param::Int(1)])
                .into_iter()
                .collect(),
            (s, []) if s.starts_with("SELECT COUNT(*) FROM smoke_tick") => {
                vec![vec![Param::Int(self.ticks.borrow().len() as i64)]]
            }
            _ => return Err(CapError::Failed(format!("unexpected query {sql}"))),
        })
    }

    fn execute(&self, sql: &str, params: &[Param]) -> Result<u64, CapError> {
        match (sql, params) {
            (s, [Param::Text(name), Param::Text(body)])
                if s.starts_with("INSERT INTO smoke_note") =>
            {
                if body.is_empty() {
                    return Err(CapError::Constraint("smoke_note_body_not_empty".into()));
                }
                self.notes.borrow_mut().insert(name.clone(), body.clone());
                Ok(1)
            }
            (s, [Param::Int(ts)]) if s.starts_with("INSERT INTO smoke_tick") => {
                let mut ticks = self.ticks.borrow_mut();
                if ticks.contains(ts) {
                    return Ok(0);
                }
                ticks.push(*ts);
                Ok(1)
            }
            _ => Err(CapError::Failed(format!("unexpected statement {sql}"))),
        }
    }

    fn config(&self, key: &str) -> Option<String> {
        (key == "greeting").then(|| "hello from config".to_string())
    }
}

fn request(method: &str, path_info: &str, body: &str) -> Request {
    request_as(method, path_info, body, None)
}

fn request_as(method: &str, path_info: &str, body: &str, token: Option<&str>) -> Request {
    let mut headers = vec![("spin-path-info".to_string(), path_info.as_bytes().to_vec())];
    if let Some(token) = token {
        headers.push((
            "authorization".into(),
            format!("Bearer {token}").into_bytes(),
        ));
    }
    Request {
        method: method.into(),
        path: format!("/smoke{path_info}"),
        headers: headers.into(),
        body: body.as_bytes().to_vec(),
        ..Default::default()
    }
}

#[test]
fn put_creates_then_replaces_a_note() {
    let host = FakeHost::default();
    assert_eq!(
        handle(
            &host,
            &FakeCluster::new(),
            &request("PUT", "/notes/a", "one")
        )
        .status,
        201
    );
    let replaced = handle(
        &host,
        &FakeCluster::new(),
        &request("PUT", "/notes/a", "two"),
    );
    assert_eq!(replaced.status, 200);
    let read = handle(&host, &FakeCluster::new(), &request("GET", "/notes/a", ""));
    assert_eq!(read.status, 200);
    assert_eq!(read.json_body().expect("json")["body"], "two");
}

#[test]
fn missing_note_is_a_cf_not_found() {
    let host = FakeHost::default();
    let r = handle(
        &host,
        &FakeCluster::new(),
        &request("GET", "/notes/nope", ""),
    );
    assert_eq!(r.status, 404);
    assert_eq!(r.json_body().expect("json")["errors"][0]["code"], 10010);
}

#[test]
fn invalid_note_name_is_unprocessable() {
    let host = FakeHost::default();
    let r = handle(
        &host,
        &FakeCluster::new(),
        &request("PUT", "/notes/bad%20name", "x"),
    );
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json_body().expect("json")["errors"][0]["title"],
        "CF-UnprocessableEntity"
    );
}

#[test]
fn constraint_violation_becomes_422_not_500() {
    let host = FakeHost::default();
    let r = handle(
        &host,
        &FakeCluster::new(),
        &request("PUT", "/notes/empty", ""),
    );
    assert_eq!(r.status, 422);
}

#[test]
fn non_utf8_body_is_a_parse_error() {
    let host = FakeHost::default();
    let mut req = request("PUT", "/notes/bin", "");
    req.body = vec![0xff, 0xfe];
    assert_eq!(handle(&host, &FakeCluster::new(), &req).status, 400);
}

#[test]
fn database_failure_is_an_unknown_error_500() {
    let host = FakeHost {
        fail: true,
        ..Default::default()
    };
    let r = handle(&host, &FakeCluster::new(), &request("GET", "/notes", ""));
    assert_eq!(r.status, 500);
    assert_eq!(r.json_body().expect("json")["errors"][0]["code"], 10001);
}

#[test]
fn wrong_method_is_405_and_unknown_route_404() {
    let host = FakeHost::default();
    assert_eq!(
        handle(&host, &FakeCluster::new(), &request("DELETE", "/notes", "")).status,
        405
    );
    assert_eq!(
        handle(
            &host,
            &FakeCluster::new(),
            &request("GET", "/elsewhere", "")
        )
        .status,
        404
    );
}

#[test]
fn ticks_are_recorded_once_per_second() {
    let host = FakeHost::default();
    record_tick(&host, 100).expect("tick");
    record_tick(&host, 100).expect("same tick again");
    record_tick(&host, 101).expect("next tick");
    let r = handle(&host, &FakeCluster::new(), &request("GET", "/ticks", ""));
    assert_eq!(r.json_body().expect("json")["count"], 2);
}

#[test]
fn greeting_comes_from_configuration() {
    let host = FakeHost::default();
    let r = handle(&host, &FakeCluster::new(), &request("GET", "/greeting", ""));
    assert_eq!(
        r.json_body().expect("json")["greeting"],
        "hello from config"
    );
}

#[test]
fn a_note_with_nul_is_refused_before_it_reaches_sql() {
    let host = FakeHost {
        fail: true,
        ..Default::default()
    };
    let r = handle(
        &host,
        &FakeCluster::new(),
        &request("PUT", "/notes/a", "x\u{0}y"),
    );
    assert_eq!(r.status, 422);
    assert_eq!(r.json_body().expect("envelope")["errors"][0]["code"], 10008);
}

fn cluster_with_namespace(name: &str) -> FakeCluster {
    let cluster = FakeCluster::new();
    cluster.put(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": name },
        "status": { "phase": "Active" },
    }));
    cluster
}

#[test]
fn a_namespace_is_read_as_the_caller() {
    let cluster = cluster_with_namespace("team-a");
    cluster.grant("alice", "get", "Namespace", "*");
    let get = |token, name: &str| {
        let req = request_as("GET", &format!("/namespaces/{name}"), "", token);
        handle(&FakeHost::default(), &cluster, &req)
    };
    let seen = get(Some("alice"), "team-a");
    assert_eq!(seen.status, 200);
    assert_eq!(
        seen.json_body().expect("json"),
        json!({ "name": "team-a", "phase": "Active" })
    );
    let missing = get(Some("alice"), "team-b");
    assert_eq!(missing.status, 404);
    assert_eq!(
        missing.json_body().expect("json")["errors"][0]["code"],
        10010
    );
    // Bob may not read it: refused, never told whether it exists.
    let hidden = get(Some("bob"), "team-a");
    assert_eq!(hidden.status, 403, "{:?}", hidden.json_body());
    assert_eq!(
        hidden.json_body().expect("json")["errors"][0]["code"],
        10003
    );
    assert_eq!(get(Some("bob"), "team-b").status, 403);
}

#[test]
fn a_namespace_read_needs_credentials_and_a_valid_name() {
    let cluster = cluster_with_namespace("team-a");
    let anonymous = request_as("GET", "/namespaces/team-a", "", None);
    let r = handle(&FakeHost::default(), &cluster, &anonymous);
    assert_eq!(r.status, 401);
    assert_eq!(r.json_body().expect("json")["errors"][0]["code"], 10002);
    cluster.reject("stale");
    let stale = request_as("GET", "/namespaces/team-a", "", Some("stale"));
    assert_eq!(handle(&FakeHost::default(), &cluster, &stale).status, 401);
    // No cluster call for a name no Namespace can have: the fake would have refused `bob`.
    let bad = request_as("GET", "/namespaces/Team_A", "", Some("bob"));
    assert_eq!(handle(&FakeHost::default(), &cluster, &bad).status, 404);
}
