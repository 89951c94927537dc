use std::cell::RefCell;
use std::collections::BTreeMap;

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
    Request {
        method: method.into(),
        path: format!("/smoke{path_info}"),
        headers: vec![("spin-path-info".into(), path_info.as_bytes().to_vec())].into(),
        body: body.as_bytes().to_vec(),
        ..Default::default()
    }
}

#[test]
fn put_creates_then_replaces_a_note() {
    let host = FakeHost::default();
    assert_eq!(
        handle(&host, &request("PUT", "/notes/a", "one")).status,
        201
    );
    let replaced = handle(&host, &request("PUT", "/notes/a", "two"));
    assert_eq!(replaced.status, 200);
    let read = handle(&host, &request("GET", "/notes/a", ""));
    assert_eq!(read.status, 200);
    assert_eq!(read.json_body().expect("json")["body"], "two");
}

#[test]
fn missing_note_is_a_cf_not_found() {
    let host = FakeHost::default();
    let r = handle(&host, &request("GET", "/notes/nope", ""));
    assert_eq!(r.status, 404);
    assert_eq!(r.json_body().expect("json")["errors"][0]["code"], 10010);
}

#[test]
fn invalid_note_name_is_unprocessable() {
    let host = FakeHost::default();
    let r = handle(&host, &request("PUT", "/notes/bad%20name", "x"));
    assert_eq!(r.status, 422);
    assert_eq!(
        r.json_body().expect("json")["errors"][0]["title"],
        "CF-UnprocessableEntity"
    );
}

#[test]
fn constraint_violation_becomes_422_not_500() {
    let host = FakeHost::default();
    let r = handle(&host, &request("PUT", "/notes/empty", ""));
    assert_eq!(r.status, 422);
}

#[test]
fn non_utf8_body_is_a_parse_error() {
    let host = FakeHost::default();
    let mut req = request("PUT", "/notes/bin", "");
    req.body = vec![0xff, 0xfe];
    assert_eq!(handle(&host, &req).status, 400);
}

#[test]
fn database_failure_is_an_unknown_error_500() {
    let host = FakeHost {
        fail: true,
        ..Default::default()
    };
    let r = handle(&host, &request("GET", "/notes", ""));
    assert_eq!(r.status, 500);
    assert_eq!(r.json_body().expect("json")["errors"][0]["code"], 10001);
}

#[test]
fn wrong_method_is_405_and_unknown_route_404() {
    let host = FakeHost::default();
    assert_eq!(handle(&host, &request("DELETE", "/notes", "")).status, 405);
    assert_eq!(handle(&host, &request("GET", "/elsewhere", "")).status, 404);
}

#[test]
fn ticks_are_recorded_once_per_second() {
    let host = FakeHost::default();
    record_tick(&host, 100).expect("tick");
    record_tick(&host, 100).expect("same tick again");
    record_tick(&host, 101).expect("next tick");
    let r = handle(&host, &request("GET", "/ticks", ""));
    assert_eq!(r.json_body().expect("json")["count"], 2);
}

#[test]
fn greeting_comes_from_configuration() {
    let host = FakeHost::default();
    let r = handle(&host, &request("GET", "/greeting", ""));
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
    let r = handle(&host, &request("PUT", "/notes/a", "x\u{0}y"));
    assert_eq!(r.status, 422);
    assert_eq!(r.json_body().expect("envelope")["errors"][0]["code"], 10008);
}
