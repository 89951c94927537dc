//! The `__NAME__` component: HTTP handlers with SQL and Kubernetes, on lethe's guest SDK.
//!
//! Routes, below `/__NAME__`:
//! - `PUT items/{key}` stores the request body (201 new, 200 replaced), `GET items/{key}` reads
//!   it back and `GET items` lists every item;
//! - `GET configmaps/{namespace}` lists the names of the ConfigMaps in `namespace`, as the caller
//!   (the request's bearer token) may see them.
//!
//! Errors are Cloud Foundry V3 envelopes (`lethe_guest::cf`).
//!
//! The logic is [`handle`], a function of the request and the host's capabilities, so it is
//! tested natively against the SDK's fake host (`src/tests.rs`: `cargo test`) and runs as wasm
//! against lethe or Spin (`src/wasm.rs`).

use lethe_guest::cf::HttpError;
use lethe_guest::kube::{Collection, Identity, ListOptions};
use lethe_guest::sql::{SqlError, Value};
use lethe_guest::{Capabilities, Request, Response};
use serde_json::json;

/// Answers one request.
pub fn handle(host: &dyn Capabilities, req: &Request) -> Response {
    let info = req.path_info();
    let segments: Vec<&str> = info.trim_matches('/').split('/').collect();
    let answer = match (req.method.as_str(), segments.as_slice()) {
        ("GET", ["items"]) => list_items(host),
        ("GET", ["items", key]) => get_item(host, key),
        ("PUT", ["items", key]) => put_item(host, key, &req.body),
        ("GET", ["configmaps", namespace]) => list_configmaps(host, req, namespace),
        (_, ["items"] | ["items", _] | ["configmaps", _]) => Err(HttpError::method_not_allowed()),
        _ => Err(HttpError::unknown_request()),
    };
    answer.unwrap_or_else(HttpError::into_response)
}

/// A database failure, as the caller should see it: their input when a constraint refused it,
/// otherwise the service.
fn from_sql(e: SqlError) -> HttpError {
    match e {
        SqlError::Constraint(c) => HttpError::unprocessable(format!("refused by {c}")),
        SqlError::Failed(_) => HttpError::unavailable("The database is not available"),
    }
}

fn valid_key(key: &str) -> bool {
    (1..=63).contains(&key.len())
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn list_items(host: &dyn Capabilities) -> Result<Response, HttpError> {
    let rows = host
        .query(
            "SELECT item_key, body FROM __SNAKE___item ORDER BY item_key",
            &[],
        )
        .map_err(from_sql)?;
    let items: Vec<_> = rows
        .iter()
        .map(|row| json!({ "key": row[0].text(), "body": row[1].text() }))
        .collect();
    Ok(Response::json(200, &json!({ "resources": items })))
}

fn get_item(host: &dyn Capabilities, key: &str) -> Result<Response, HttpError> {
    if !valid_key(key) {
        return Err(HttpError::not_found("Item not found"));
    }
    let rows = host
        .query(
            "SELECT body FROM __SNAKE___item WHERE item_key = $1",
            &[Value::Text(key.into())],
        )
        .map_err(from_sql)?;
    let row = rows.first().ok_or_else(|| HttpError::not_found("Item not found"))?;
    Ok(Response::json(
        200,
        &json!({ "key": key, "body": row[0].text() }),
    ))
}

fn put_item(host: &dyn Capabilities, key: &str, body: &[u8]) -> Result<Response, HttpError> {
    if !valid_key(key) {
        return Err(HttpError::unprocessable(
            "Item keys are 1-63 letters, digits, '-' and '_'",
        ));
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| HttpError::parse_error("The body must be UTF-8 text"))?;
    // PostgreSQL cannot store NUL in text (SQLite can): refuse it the same way on both.
    if text.contains('\0') {
        return Err(HttpError::unprocessable("The body must not contain NUL"));
    }
    let existed = !host
        .query(
            "SELECT 1 FROM __SNAKE___item WHERE item_key = $1",
            &[Value::Text(key.into())],
        )
        .map_err(from_sql)?
        .is_empty();
    host.execute(
        "INSERT INTO __SNAKE___item (item_key, body) VALUES ($1, $2) \
         ON CONFLICT (item_key) DO UPDATE SET body = excluded.body",
        &[Value::Text(key.into()), Value::Text(text.into())],
    )
    .map_err(from_sql)?;
    Ok(Response::json(
        if existed { 200 } else { 201 },
        &json!({ "key": key, "body": text }),
    ))
}

fn list_configmaps(
    host: &dyn Capabilities,
    req: &Request,
    namespace: &str,
) -> Result<Response, HttpError> {
    let caller = match req.bearer_token() {
        Ok(Some(token)) => Identity::Caller(token),
        Ok(None) => return Err(HttpError::not_authenticated()),
        Err(_) => return Err(HttpError::invalid_token()),
    };
    let configmaps = Collection::new("v1", "ConfigMap", Some(namespace));
    let items = host
        .list_all(&caller, &configmaps, &ListOptions::default())
        .map_err(|e| HttpError::from_kube(e, "Namespace not found"))?;
    let mut names: Vec<&str> = items.iter().map(|o| o.target.name.as_str()).collect();
    names.sort_unstable();
    Ok(Response::json(
        200,
        &json!({ "namespace": namespace, "configmaps": names }),
    ))
}

#[cfg(target_arch = "wasm32")]
mod wasm;

#[cfg(test)]
mod tests;
