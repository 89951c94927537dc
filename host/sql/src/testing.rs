//! Helpers for tests that need a PostgreSQL server, shared with the host's tests.
//!
//! The rule: the server's URL comes from the environment variable
//! [`POSTGRES_URL_ENV`] (`LETHE_TEST_POSTGRES_URL`). When it is unset or the server does not
//! answer, a test skips (prints the reason to stderr and returns) — except under CI
//! (`CI=true`), where it fails with a message saying what is missing.

// Test support: under CI, a missing server fails the test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::time::Duration;

/// The environment variable holding the PostgreSQL URL for tests.
pub const POSTGRES_URL_ENV: &str = "LETHE_TEST_POSTGRES_URL";

/// Whether the environment says this is a CI run (`CI=true` or `CI=1`).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// Returns the test PostgreSQL URL when the server is reachable; otherwise skips (returns
/// `None` after printing why to stderr) or, under CI, panics.
///
/// Reachability is checked with a real login (5 s timeout), so a wrong password is reported
/// here rather than as a confusing failure inside the test.
///
/// # Panics
///
/// Under CI (`CI=true`) when the variable is unset or the server cannot be reached: a test
/// suite must not silently skip its PostgreSQL half there.
pub async fn postgres_url_or_skip(test: &str) -> Option<String> {
    let url = match std::env::var(POSTGRES_URL_ENV) {
        Ok(url) if !url.trim().is_empty() => url,
        _ => return skip_or_fail(test, &format!("{POSTGRES_URL_ENV} is not set")),
    };
    match check(&url).await {
        Ok(()) => Some(url),
        Err(reason) => skip_or_fail(
            test,
            &format!(
                "PostgreSQL at {} is unreachable: {reason}",
                crate::redact_url(&url)
            ),
        ),
    }
}

fn skip_or_fail(test: &str, reason: &str) -> Option<String> {
    if in_ci() {
        panic!(
            "{test}: {reason}; CI=true requires a reachable PostgreSQL (set {POSTGRES_URL_ENV}, e.g. postgres://lethe:lethe@127.0.0.1:5432/lethe_test)"
        );
    }
    // Written to the process's stderr directly, not through `eprintln!`, so that the test
    // harness's output capture does not hide that a part of the suite was skipped.
    let _ = writeln!(
        std::io::stderr(),
        "skipping the PostgreSQL part of {test}: {reason}"
    );
    None
}

async fn check(url: &str) -> Result<(), String> {
    let config: tokio_postgres::Config = url.parse().map_err(|e| format!("invalid URL: {e}"))?;
    let connect = config.connect(tokio_postgres::NoTls);
    let (client, connection) = tokio::time::timeout(Duration::from_secs(5), connect)
        .await
        .map_err(|_| "timed out connecting".to_owned())?
        .map_err(|e| match e.as_db_error() {
            Some(db) => db.message().to_owned(),
            None => match std::error::Error::source(&e) {
                Some(cause) => format!("{e}: {cause}"),
                None => e.to_string(),
            },
        })?;
    let task = tokio::spawn(connection);
    let result = client
        .simple_query("SELECT 1")
        .await
        .map(|_| ())
        .map_err(|e| e.to_string());
    drop(client);
    let _ = task.await;
    result
}

/// Creates a database named `<prefix>_<random hex>` on the server at `url` (its user needs
/// `CREATEDB`) and returns its name and its URL: `url` with the database replaced, so tests never
/// see each other's tables.
pub async fn fresh_database(url: &str, prefix: &str) -> (String, String) {
    let name = format!("{prefix}_{:016x}", rand::random::<u64>());
    let server = crate::Database::open(url).await.expect("open the server");
    server
        .execute(&format!("CREATE DATABASE {name}"), &[])
        .await
        .expect("CREATE DATABASE (the role needs CREATEDB)");
    let (head, query) = match url.split_once('?') {
        Some((head, query)) => (head, Some(query)),
        None => (url, None),
    };
    let base = head.rsplit_once('/').map_or(head, |(base, _)| base);
    let fresh = match query {
        Some(query) => format!("{base}/{name}?{query}"),
        None => format!("{base}/{name}"),
    };
    (name, fresh)
}
