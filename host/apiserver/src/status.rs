//! Kubernetes `Status` error bodies, shaped like the real kube-apiserver's.

use serde::Serialize;
use serde_json::{Map, Value, json};

/// One entry of `details.causes`.
#[derive(Debug, Clone, Serialize)]
pub struct Cause {
    /// The machine-readable cause, e.g. `FieldValueRequired` or `FieldValueInvalid`.
    pub reason: &'static str,
    /// The human-readable explanation, without the field path.
    pub message: String,
    /// The JSON path of the offending field, e.g. `metadata.name`; empty when no field applies,
    /// and then left out of the body (Go's `omitempty`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub field: String,
}

/// An API error that renders as a `Status` object.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status code, also the Status's `code`.
    pub code: u16,
    /// The Status's `reason`, e.g. `NotFound` or `Conflict`; empty leaves it out.
    pub reason: &'static str,
    /// The Status's `message`, as kubectl prints it.
    pub message: String,
    /// `details`: None leaves the field out (as the real server does for 401).
    pub details: Option<Box<Details>>,
    /// A `Retry-After` header to send, in seconds.
    pub retry_after: Option<u64>,
    /// `metadata.continue` of the Status: the token a 410 for an expired continue token offers.
    pub continue_token: Option<String>,
}

/// The `details` of a `Status`: which object the error is about and, for 422s, what is wrong
/// with it. Empty fields are left out of the body (Go's `omitempty`).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Details {
    /// The object's name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The API group of the resource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// The Kind for a 422, else the resource (e.g. `pods`), as the real server fills it in.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// What is wrong, one entry per field.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<Cause>,
    /// `retryAfterSeconds`: how long the client should wait before retrying.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u64>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `"configmaps"` or `"cronjobs.batch"` as used in messages.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl ApiError {
    /// An error with this code, reason and message, and no `details`.
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    /// The same error with `details` naming the object it is about.
    fn about(self, name: &str, group: &str, kind: &str) -> Self {
        self.with_details(Details {
            name: name.to_string(),
            group: group.to_string(),
            kind: kind.to_string(),
            ..Default::default()
        })
    }

    /// The same error with these `details`.
    pub fn with_details(self, details: Details) -> Self {
        ApiError {
            details: Some(Box::new(details)),
            ..self
        }
    }

    /// 404 `NotFound` for object `name` of `resource` in `group`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let message = format!("{} \"{name}\" not found", qualified(group, resource));
        ApiError::new(404, "NotFound", message).about(name, group, resource)
    }

    /// The generic 404 for an unknown path.
    pub fn path_not_found() -> Self {
        let message = "the server could not find the requested resource";
        ApiError::new(404, "NotFound", message).with_details(Details::default())
    }

    /// 409 `AlreadyExists`: a create found an object of that name already stored.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let message = format!("{} \"{name}\" already exists", qualified(group, resource));
        ApiError::new(409, "AlreadyExists", message).about(name, group, resource)
    }

    /// 409 `Conflict` on object `name`, `why` saying what went wrong, e.g. a failed precondition.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let on = qualified(group, resource);
        let message = format!("Operation cannot be fulfilled on {on} \"{name}\": {why}");
        ApiError::new(409, "Conflict", message).about(name, group, resource)
    }

    /// 409 `Conflict` for a write whose `resourceVersion` is not the stored one: the client read
    /// an older version and must re-read before writing again.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid; `kind` is the Kind (not the resource), as the real server does.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let summary: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let summary = if summary.len() == 1 {
            summary[0].clone()
        } else {
            format!("[{}]", summary.join(", "))
        };
        let message = format!(
            "{} \"{name}\" is invalid: {summary}",
            qualified(group, kind)
        );
        let mut e = ApiError::new(422, "Invalid", message).about(name, group, kind);
        if let Some(details) = e.details.as_mut() {
            details.causes = causes;
        }
        e
    }

    /// `Ok` when there are no `causes`; otherwise the 422 [`ApiError::invalid`] of them.
    pub fn invalid_if_any(
        group: &str,
        kind: &str,
        name: &str,
        causes: Vec<Cause>,
    ) -> Result<(), Self> {
        if causes.is_empty() {
            return Ok(());
        }
        Err(Self::invalid(group, kind, name, causes))
    }

    /// 403 `Forbidden` on `resource` (object `name`, or the collection when `name` is empty).
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let subject = if name.is_empty() {
            qualified(group, resource)
        } else {
            format!("{} \"{}\"", qualified(group, resource), name)
        };
        let message = format!("{subject} is forbidden: {why}");
        ApiError::new(403, "Forbidden", message).about(name, group, resource)
    }

    /// 400 `BadRequest` with `message` and no `details`, for a request the server cannot parse.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError::new(400, "BadRequest", message)
    }

    /// 401 `Unauthorized`: a missing or unknown bearer token. It carries no `details`, as in
    /// kube-apiserver.
    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 405 `MethodNotAllowed`: the resource does not serve the verb the request's method maps to.
    pub fn method_not_allowed(group: &str, resource: &str) -> Self {
        let message = "the server does not allow this method on the requested resource";
        ApiError::new(405, "MethodNotAllowed", message).about("", group, resource)
    }

    /// A PATCH in a media type that is not a patch type (the server names the ones it takes).
    pub fn unsupported_media_type() -> Self {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml",
        )
    }

    /// 410 `Expired`: a continue token or resourceVersion older than the history kept.
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// A list or watch for a version the store has not reached (504 `Timeout`, as
    /// `storage.NewTooLargeResourceVersionError` makes it).
    pub fn too_large_resource_version(wanted: u64, current: u64, retry_seconds: u64) -> Self {
        let message = format!("Timeout: Too large resource version: {wanted}, current: {current}");
        let retry_after = (retry_seconds > 0).then_some(retry_seconds);
        let e = ApiError::new(504, "Timeout", message).with_details(Details {
            causes: vec![Cause {
                reason: "ResourceVersionTooLarge",
                message: "Too large resource version".into(),
                field: String::new(),
            }],
            retry_after_seconds: retry_after,
            ..Default::default()
        });
        ApiError { retry_after, ..e }
    }

    /// 413 `RequestEntityTooLarge`: a request body above the 3 MiB limit.
    pub fn too_large() -> Self {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            "Request entity too large: limit is 3145728",
        )
    }

    /// 500 `InternalError`, such as a failed SQLite write; `message` is appended to the
    /// generic text.
    pub fn internal(message: impl Into<String>) -> Self {
        ApiError::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", message.into()),
        )
    }

    /// The body of an injected fault.
    pub fn injected(code: u16, retry_after: u64) -> Self {
        let (reason, message) = match code {
            429 => (
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later (injected fault)",
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request (injected fault)",
            ),
            _ => (
                "InternalError",
                "an error on the server (\"injected fault\") has prevented the request from succeeding",
            ),
        };
        let e = ApiError::new(code, reason, message);
        if code != 429 {
            return e;
        }
        let e = e.with_details(Details {
            retry_after_seconds: Some(retry_after),
            ..Default::default()
        });
        ApiError {
            retry_after: Some(retry_after),
            ..e
        }
    }

    /// The `Status` object.
    pub fn to_value(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        if let Some(c) = &self.continue_token {
            status["metadata"]["continue"] = json!(c);
        }
        // Go leaves an empty reason out (`omitempty`): a plain error the server did not map
        // to a status has none.
        if !self.reason.is_empty() {
            status["reason"] = json!(self.reason);
        }
        if let Some(d) = &self.details {
            status["details"] = json!(d);
        }
        status
    }
}

/// The `Status` returned by a DELETE that removed the object at once.
pub fn delete_success(group: &str, resource: &str, name: &str, uid: &str) -> Value {
    let mut details = Map::new();
    details.insert("name".into(), json!(name));
    if !group.is_empty() {
        details.insert("group".into(), json!(group));
    }
    details.insert("kind".into(), json!(resource));
    details.insert("uid".into(), json!(uid));
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": Value::Object(details),
    })
}

/// The warnings one request's operations produced, in order: sent back as `Warning: 299`
/// headers (kubectl prints them). Each request owns its own, passed down to the verbs it runs, as
/// kube-apiserver records them in the request's context, so a warning can never be lost or land
/// on another request's answer.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Warnings(Vec<String>);

impl Warnings {
    /// Records `warning`.
    pub fn push(&mut self, warning: impl Into<String>) {
        self.0.push(warning.into());
    }

    /// The warnings, in the order they were recorded.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}
