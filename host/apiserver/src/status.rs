//! Kubernetes `Status` error bodies, shaped like the real kube-apiserver's.

use serde_json::{Map, Value, json};

/// One entry of `details.causes`.
#[derive(Debug, Clone)]
pub struct Cause {
    /// The machine-readable cause, e.g. `FieldValueRequired` or `FieldValueInvalid`.
    pub reason: &'static str,
    /// The human-readable explanation, without the field path.
    pub message: String,
    /// The JSON path of the offending field, e.g. `metadata.name`; empty when no field applies,
    /// and then left out of the body.
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
/// with it. Empty fields are left out of the body.
#[derive(Debug, Clone, Default)]
pub struct Details {
    /// The object's name.
    pub name: String,
    /// The API group of the resource.
    pub group: String,
    /// The Kind for a 422, else the resource (e.g. `pods`), as the real server fills it in.
    pub kind: String,
    /// What is wrong, one entry per field.
    pub causes: Vec<Cause>,
    /// `retryAfterSeconds`: how long the client should wait before retrying.
    pub retry_after_seconds: Option<u64>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

fn details(name: &str, group: &str, kind: &str) -> Option<Box<Details>> {
    Some(Box::new(Details {
        name: name.to_string(),
        group: group.to_string(),
        kind: kind.to_string(),
        ..Default::default()
    }))
}

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

    /// 404 `NotFound` for object `name` of `resource` in `group`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: format!("{} \"{}\" not found", qualified(group, resource), name),
            details: details(name, group, resource),
            retry_after: None,
            continue_token: None,
        }
    }

    /// The generic 404 for an unknown path.
    pub fn path_not_found() -> Self {
        ApiError {
            code: 404,
            reason: "NotFound",
            message: "the server could not find the requested resource".into(),
            details: Some(Box::default()),
            retry_after: None,
            continue_token: None,
        }
    }

    /// 409 `AlreadyExists`: a create found an object of that name already stored.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        ApiError {
            code: 409,
            reason: "AlreadyExists",
            message: format!("{} \"{}\" already exists", qualified(group, resource), name),
            details: details(name, group, resource),
            retry_after: None,
            continue_token: None,
        }
    }

    /// 409 `Conflict` on object `name`, `why` saying what went wrong, e.g. a failed precondition.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        ApiError {
            code: 409,
            reason: "Conflict",
            message: format!(
                "Operation cannot be fulfilled on {} \"{}\": {}",
                qualified(group, resource),
                name,
                why
            ),
            details: details(name, group, resource),
            retry_after: None,
            continue_token: None,
        }
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
        let gk = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        ApiError {
            code: 422,
            reason: "Invalid",
            message: format!("{gk} \"{name}\" is invalid: {summary}"),
            details: Some(Box::new(Details {
                name: name.to_string(),
                group: group.to_string(),
                kind: kind.to_string(),
                causes,
                retry_after_seconds: None,
            })),
            retry_after: None,
            continue_token: None,
        }
    }

    /// 403 `Forbidden` on `resource` (object `name`, or the collection when `name` is empty).
    pub fn forbidden(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let subject = if name.is_empty() {
            qualified(group, resource)
        } else {
            format!("{} \"{}\"", qualified(group, resource), name)
        };
        ApiError {
            code: 403,
            reason: "Forbidden",
            message: format!("{subject} is forbidden: {why}"),
            details: details(name, group, resource),
            retry_after: None,
            continue_token: None,
        }
    }

    /// 400 `BadRequest` with `message` and no `details`, for a request the server cannot parse.
    pub fn bad_request(message: impl Into<String>) -> Self {
        ApiError {
            code: 400,
            reason: "BadRequest",
            message: message.into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    /// 401 `Unauthorized`: a missing or unknown bearer token. It carries no `details`, as in
    /// kube-apiserver.
    pub fn unauthorized() -> Self {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// 405 `MethodNotAllowed`: the resource does not serve the verb the request's method maps to.
    pub fn method_not_allowed(group: &str, resource: &str) -> Self {
        ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".into(),
            details: Some(Box::new(Details {
                group: group.to_string(),
                kind: resource.to_string(),
                ..Default::default()
            })),
            retry_after: None,
            continue_token: None,
        }
    }

    /// A PATCH in a media type that is not a patch type (the server names the ones it takes).
    pub fn unsupported_media_type() -> Self {
        ApiError {
            code: 415,
            reason: "UnsupportedMediaType",
            message: "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml".into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    /// 410 `Expired`: a continue token or resourceVersion older than the history kept.
    pub fn expired(message: impl Into<String>) -> Self {
        ApiError::new(410, "Expired", message)
    }

    /// A list or watch for a version the store has not reached (504 `Timeout`, as
    /// `storage.NewTooLargeResourceVersionError` makes it).
    pub fn too_large_resource_version(wanted: u64, current: u64, retry_seconds: u64) -> Self {
        let mut e = ApiError::new(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {wanted}, current: {current}"),
        );
        e.details = Some(Box::new(Details {
            causes: vec![Cause {
                reason: "ResourceVersionTooLarge",
                message: "Too large resource version".into(),
                field: String::new(),
            }],
            retry_after_seconds: (retry_seconds > 0).then_some(retry_seconds),
            ..Default::default()
        }));
        e.retry_after = (retry_seconds > 0).then_some(retry_seconds);
        e
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
        let mut e = ApiError::new(code, reason, message);
        if code == 429 {
            e.retry_after = Some(retry_after);
            e.details = Some(Box::new(Details {
                retry_after_seconds: Some(retry_after),
                ..Default::default()
            }));
        }
        e
    }

    /// The `Status` object.
    pub fn to_value(&self) -> Value {
        let mut m = Map::new();
        m.insert("kind".into(), json!("Status"));
        m.insert("apiVersion".into(), json!("v1"));
        m.insert(
            "metadata".into(),
            match &self.continue_token {
                Some(c) => json!({"continue": c}),
                None => json!({}),
            },
        );
        m.insert("status".into(), json!("Failure"));
        m.insert("message".into(), json!(self.message));
        // Go leaves an empty reason out (`omitempty`): a plain error the server did not map
        // to a status has none.
        if !self.reason.is_empty() {
            m.insert("reason".into(), json!(self.reason));
        }
        if let Some(d) = &self.details {
            let mut dm = Map::new();
            if !d.name.is_empty() {
                dm.insert("name".into(), json!(d.name));
            }
            if !d.group.is_empty() {
                dm.insert("group".into(), json!(d.group));
            }
            if !d.kind.is_empty() {
                dm.insert("kind".into(), json!(d.kind));
            }
            if !d.causes.is_empty() {
                let causes: Vec<Value> = d
                    .causes
                    .iter()
                    .map(|c| {
                        // Go leaves an empty `field` out (`omitempty`).
                        let mut cause = json!({"reason": c.reason, "message": c.message});
                        if !c.field.is_empty() {
                            cause["field"] = json!(c.field);
                        }
                        cause
                    })
                    .collect();
                dm.insert("causes".into(), Value::Array(causes));
            }
            if let Some(r) = d.retry_after_seconds {
                dm.insert("retryAfterSeconds".into(), json!(r));
            }
            m.insert("details".into(), Value::Object(dm));
        }
        m.insert("code".into(), json!(self.code));
        Value::Object(m)
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
