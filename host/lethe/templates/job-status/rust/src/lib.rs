//! The `__NAME__` component: the state of a deletion job of a `__KIND__`
//! (`__API_VERSION__`), derived from the live object, as the caller sees it.
//!
//! A job's GUID names the object: `__JOB_TYPE__.delete~<namespace>~<name>` (or
//! `__JOB_TYPE__.delete~<name>` for a cluster-scoped kind). Its state:
//!
//! - the object is gone: `COMPLETE`;
//! - it is being deleted (it has a `deletionTimestamp`) for less than `deletion_timeout_seconds`
//!   (a component variable, default 120): `PROCESSING`;
//! - for longer: `FAILED` (10008), naming the finalizers it still waits for;
//! - it exists and nobody is deleting it, the GUID is malformed, or the caller may not read it:
//!   404, so a caller learns nothing of objects it may not see.
//!
//! Answered over HTTP (`GET /__NAME__/jobs/<guid>`, with the caller's bearer token) and through
//! the typed export `lethe:platform/job-status` (`src/wasm.rs`). The logic is [`job`], a function
//! of the GUID, the caller and the host's `Kube` and `Env`, tested natively against the SDK's
//! fake cluster (`src/tests.rs`). It takes only those two: what a component calls is what it
//! imports, and so what its manifest must grant (no `sql` here).

use lethe_guest::cf::{CfError, HttpError, JobState};
use lethe_guest::env::{Env, format_rfc3339, parse_rfc3339_ms};
use lethe_guest::kube::{Identity, Kube, KubeError, ObjectRef};
use lethe_guest::{Request, Response};
use serde_json::json;

/// The kind whose deletions this component tracks.
pub const API_VERSION: &str = "__API_VERSION__";
/// The kind's name.
pub const KIND: &str = "__KIND__";
/// The job type the GUIDs start with.
pub const JOB_TYPE: &str = "__JOB_TYPE__";
/// How long a deletion may take before its job is `FAILED`, when the configuration says nothing.
pub const DEFAULT_TIMEOUT_SECONDS: i64 = 120;

/// One job, as `GET /v3/jobs/<guid>` renders it.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The GUID it was asked for.
    pub guid: String,
    /// `<type>.delete`.
    pub operation: String,
    /// The derived state.
    pub state: JobState,
    /// Why a `FAILED` job failed.
    pub errors: Vec<CfError>,
    /// RFC 3339: when the deletion started (when the object is gone: now).
    pub created_at: String,
    /// RFC 3339: when the state was derived.
    pub updated_at: String,
}

impl Job {
    /// The JSON body Cloud Controller answers with.
    pub fn to_json(&self, self_href: &str) -> serde_json::Value {
        json!({
            "guid": self.guid,
            "operation": self.operation,
            "state": self.state.as_str(),
            "errors": self.errors.iter().map(|e| json!({
                "code": e.code, "title": e.title, "detail": e.detail,
            })).collect::<Vec<_>>(),
            "warnings": [],
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "links": { "self": { "href": self_href } },
        })
    }
}

/// The object a GUID names: `(namespace, name)`, or `None` for a GUID that is not this
/// component's or is malformed.
fn target(guid: &str) -> Option<(Option<&str>, &str)> {
    let rest = guid.strip_prefix(JOB_TYPE)?.strip_prefix(".delete~")?;
    let valid = |s: &str| {
        (1..=253).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    };
    match rest.split('~').collect::<Vec<_>>().as_slice() {
        [name] if valid(name) => Some((None, name)),
        [namespace, name] if valid(namespace) && valid(name) => Some((Some(namespace), name)),
        _ => None,
    }
}

/// The job `guid`, as `caller` may see it.
pub fn job(
    kube: &dyn Kube,
    env: &dyn Env,
    guid: &str,
    caller: &Identity,
) -> Result<Job, HttpError> {
    let (namespace, name) = target(guid).ok_or_else(HttpError::job_not_found)?;
    let now = env.now_ms();
    let timeout_s = env
        .config("deletion_timeout_seconds")
        .and_then(|v| v.parse::<i64>().ok())
        .filter(|s| *s > 0)
        .unwrap_or(DEFAULT_TIMEOUT_SECONDS);
    let object = ObjectRef {
        api_version: API_VERSION.into(),
        kind: KIND.into(),
        namespace: namespace.map(str::to_string),
        name: name.into(),
    };
    let job = |state, errors, started: i64| Job {
        guid: guid.to_string(),
        operation: format!("{JOB_TYPE}.delete"),
        state,
        errors,
        created_at: format_rfc3339(started),
        updated_at: format_rfc3339(now),
    };
    match kube.get(caller, &object) {
        Err(KubeError::NotFound(_)) => Ok(job(JobState::Complete, Vec::new(), now)),
        Err(KubeError::Unauthorized(_)) => Err(HttpError::invalid_token()),
        Err(KubeError::Unavailable(m) | KubeError::Timeout(m)) => Err(HttpError::unavailable(m)),
        // Forbidden, or a GUID the API server refuses: nothing to tell.
        Err(_) => Err(HttpError::job_not_found()),
        Ok(live) => {
            let Some(since) = live
                .metadata
                .deletion_timestamp
                .as_deref()
                .and_then(parse_rfc3339_ms)
            else {
                return Err(HttpError::job_not_found());
            };
            if now - since < timeout_s * 1000 {
                return Ok(job(JobState::Processing, Vec::new(), since));
            }
            let waiting = live.metadata.finalizers.join(", ");
            Ok(job(
                JobState::Failed,
                vec![CfError {
                    code: 10008,
                    title: "CF-UnprocessableEntity".into(),
                    detail: format!(
                        "{KIND} {name} is still being deleted after {timeout_s} s, waiting for: {waiting}"
                    ),
                }],
                since,
            ))
        }
    }
}

/// Answers `GET /__NAME__/jobs/<guid>`.
pub fn handle(kube: &dyn Kube, env: &dyn Env, req: &Request) -> Response {
    let info = req.path_info();
    let answer = match (req.method.as_str(), info.trim_matches('/').split('/').collect::<Vec<_>>().as_slice()) {
        ("GET", ["jobs", guid]) => match req.bearer_token() {
            Ok(Some(token)) => job(kube, env, guid, &Identity::Caller(token)).map(|job| {
                let base = req
                    .base_url(None)
                    .unwrap_or_else(|| "http://localhost".to_string());
                let href = format!("{base}/__NAME__/jobs/{guid}");
                Response::json(200, &job.to_json(&href))
            }),
            Ok(None) => Err(HttpError::not_authenticated()),
            Err(_) => Err(HttpError::invalid_token()),
        },
        (_, ["jobs", _]) => Err(HttpError::method_not_allowed()),
        _ => Err(HttpError::unknown_request()),
    };
    answer.unwrap_or_else(HttpError::into_response)
}

#[cfg(target_arch = "wasm32")]
mod wasm;

#[cfg(test)]
mod tests;
