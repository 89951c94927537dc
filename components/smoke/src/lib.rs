//! The smoke component: the smallest thing that proves lethe's whole path.
//!
//! HTTP (mounted at `/smoke/...`):
//! - `PUT /smoke/notes/{name}` stores the body as a note (201 new, 200 replaced);
//! - `GET /smoke/notes/{name}` reads it back; `GET /smoke/notes` lists all;
//! - `GET /smoke/ticks` counts the cron ticks recorded;
//! - `GET /smoke/greeting` returns the `greeting` configuration value;
//! - `GET /smoke/namespaces/{name}` reads a Namespace from Kubernetes as the caller (the request's
//!   bearer token): its name and phase, or the CF error for what the cluster answered.
//!
//! Cron: every tick records its timestamp in `smoke_tick`.
//!
//! The logic is [`handle`], a function of the request, a [`Capabilities`] implementation and a
//! [`Kube`], so it is unit-tested natively with in-memory fakes and runs as wasm against the host.
//! `components/smoke-py` is its twin in Python, held to the same end-to-end test.

use lethe_guest::cf::HttpError;
use lethe_guest::kube::{Identity, Kube, ObjectRef, is_dns_label};
use lethe_guest::{Request, Response, cf};
use serde_json::json;

/// The capability calls the smoke logic makes.
pub trait Capabilities {
    /// Runs a read; `Err` carries a printable reason.
    fn query(&self, sql: &str, params: &[Param]) -> Result<Vec<Vec<Param>>, CapError>;
    /// Runs a write and returns the rows affected.
    fn execute(&self, sql: &str, params: &[Param]) -> Result<u64, CapError>;
    /// Reads a configuration value.
    fn config(&self, key: &str) -> Option<String>;
}

/// The values the smoke logic exchanges with SQL.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// Text.
    Text(String),
}

/// A capability failure, classified for the HTTP answer.
#[derive(Debug, Clone, PartialEq)]
pub enum CapError {
    /// A constraint rejected the write (bad input).
    Constraint(String),
    /// Anything else (the host or database failed).
    Failed(String),
}

/// Routes one request.
pub fn handle(caps: &dyn Capabilities, kube: &dyn Kube, req: &Request) -> Response {
    let info = req.path_info().trim_end_matches('/').to_string();
    let segments: Vec<&str> = info.trim_start_matches('/').split('/').collect();
    let result = match (req.method.as_str(), segments.as_slice()) {
        ("GET", ["notes"]) => list_notes(caps),
        ("GET", ["notes", name]) => get_note(caps, name),
        ("PUT", ["notes", name]) => put_note(caps, name, &req.body),
        ("GET", ["ticks"]) => count_ticks(caps),
        ("GET", ["greeting"]) => Ok(Response::json(
            200,
            &json!({ "greeting": caps.config("greeting").unwrap_or_default() }),
        )),
        ("GET", ["namespaces", name]) => Ok(get_namespace(kube, req, name)),
        (_, ["notes"] | ["notes", _] | ["ticks"] | ["greeting"] | ["namespaces", _]) => {
            Ok(cf::error(
                405,
                10000,
                "CF-MethodNotAllowed",
                format!("{} is not allowed here", req.method),
            ))
        }
        _ => Ok(cf::not_found("Unknown smoke route")),
    };
    result.unwrap_or_else(|e| match e {
        CapError::Constraint(c) => cf::unprocessable(format!("rejected by constraint {c}")),
        CapError::Failed(_) => cf::unknown_error(),
    })
}

/// Records one cron tick; repeated ticks for the same second are recorded once.
pub fn record_tick(caps: &dyn Capabilities, timestamp: u64) -> Result<(), CapError> {
    let ts =
        i64::try_from(timestamp).map_err(|_| CapError::Failed("timestamp out of range".into()))?;
    caps.execute(
        "INSERT INTO smoke_tick (fired_at) VALUES ($1) ON CONFLICT (fired_at) DO NOTHING",
        &[Param::Int(ts)],
    )?;
    Ok(())
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn list_notes(caps: &dyn Capabilities) -> Result<Response, CapError> {
    let rows = caps.query("SELECT name, body FROM smoke_note ORDER BY name", &[])?;
    let notes: Vec<_> = rows.iter().filter_map(|r| note_json(r)).collect();
    Ok(Response::json(200, &json!({ "resources": notes })))
}

fn get_note(caps: &dyn Capabilities, name: &str) -> Result<Response, CapError> {
    if !valid_name(name) {
        return Ok(cf::not_found("Note not found"));
    }
    let rows = caps.query(
        "SELECT name, body FROM smoke_note WHERE name = $1",
        &[Param::Text(name.into())],
    )?;
    Ok(match rows.first().and_then(|r| note_json(r)) {
        Some(note) => Response::json(200, &note),
        None => cf::not_found("Note not found"),
    })
}

fn put_note(caps: &dyn Capabilities, name: &str, body: &[u8]) -> Result<Response, CapError> {
    if !valid_name(name) {
        return Ok(cf::unprocessable(
            "Note names are 1-63 characters of letters, digits, '-' and '_'",
        ));
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Ok(cf::message_parse_error("The note must be UTF-8 text"));
    };
    // PostgreSQL cannot store NUL in text (SQLite can): refusing it here gives the same answer on
    // both, instead of a database error the caller could do nothing about.
    if text.contains('\0') {
        return Ok(cf::unprocessable(
            "The note must not contain NUL characters",
        ));
    }
    let existed = !caps
        .query(
            "SELECT 1 FROM smoke_note WHERE name = $1",
            &[Param::Text(name.into())],
        )?
        .is_empty();
    caps.execute(
        "INSERT INTO smoke_note (name, body) VALUES ($1, $2) \
         ON CONFLICT (name) DO UPDATE SET body = excluded.body",
        &[Param::Text(name.into()), Param::Text(text.into())],
    )?;
    let status = if existed { 200 } else { 201 };
    Ok(Response::json(
        status,
        &json!({ "name": name, "body": text }),
    ))
}

/// The Namespace `name` as the caller sees it. A name Kubernetes could not hold is not found
/// without asking the cluster.
fn get_namespace(kube: &dyn Kube, req: &Request, name: &str) -> Response {
    const NOT_FOUND: &str = "Namespace not found";
    let caller = match req.bearer_token() {
        Ok(Some(token)) => Identity::Caller(token),
        Ok(None) => return cf::not_authenticated(),
        Err(_) => return HttpError::invalid_token().into_response(),
    };
    if !is_dns_label(name) {
        return cf::not_found(NOT_FOUND);
    }
    let target = ObjectRef {
        api_version: "v1".into(),
        kind: "Namespace".into(),
        namespace: None,
        name: name.into(),
    };
    match kube.get(&caller, &target) {
        Ok(namespace) => Response::json(
            200,
            &json!({ "name": name, "phase": namespace.str_at("/status/phase") }),
        ),
        Err(e) => HttpError::from_kube(e, NOT_FOUND).into_response(),
    }
}

fn count_ticks(caps: &dyn Capabilities) -> Result<Response, CapError> {
    let rows = caps.query("SELECT COUNT(*) FROM smoke_tick", &[])?;
    let count = match rows.first().and_then(|r| r.first()) {
        Some(Param::Int(n)) => *n,
        _ => 0,
    };
    Ok(Response::json(200, &json!({ "count": count })))
}

fn note_json(row: &[Param]) -> Option<serde_json::Value> {
    match row {
        [Param::Text(name), Param::Text(body)] => Some(json!({ "name": name, "body": body })),
        _ => None,
    }
}

#[cfg(target_arch = "wasm32")]
mod wasm;

#[cfg(test)]
mod tests;
