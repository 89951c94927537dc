//! Typed Kubernetes errors, one variant per case of the WIT `kube.error` variant.

use crate::types::Status;

/// Why a Kubernetes call failed.
///
/// The variants mirror `lethe:platform/kube.error` one to one. Messages never contain a bearer
/// token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    /// 404: the object, its namespace or its kind does not exist.
    #[error("not found: {}", .0.message)]
    NotFound(Status),
    /// 409: a stale resourceVersion, a failed precondition, or AlreadyExists.
    #[error("conflict: {}", .0.message)]
    Conflict(Status),
    /// 403: the identity may not do this.
    #[error("forbidden: {}", .0.message)]
    Forbidden(Status),
    /// 401: the token was missing, unknown or expired.
    #[error("unauthorized: {}", .0.message)]
    Unauthorized(Status),
    /// 422 or 400 (and other 4xx): the object or the request is invalid; retrying cannot help.
    #[error("invalid: {}", .0.message)]
    Invalid(Status),
    /// 410: the list continue token or watch resourceVersion expired.
    #[error("gone: {}", .0.message)]
    Gone(Status),
    /// The server stayed unreachable, overloaded (429) or failing (5xx) through all retries, or a
    /// write's outcome is unknown and it was not safe to retry (the message says "outcome
    /// unknown").
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The call did not finish within the per-call timeout (or the server answered 504).
    #[error("timeout: {0}")]
    Timeout(String),
}

impl KubeError {
    /// The error for an HTTP failure status and its `Status` body.
    ///
    /// 404 NotFound, 409 Conflict, 403 Forbidden, 401 Unauthorized, 410 Gone, 504 Timeout,
    /// 5xx and 429 Unavailable, every other status Invalid.
    pub fn from_status(status: Status) -> KubeError {
        match status.code {
            404 => KubeError::NotFound(status),
            409 => KubeError::Conflict(status),
            403 => KubeError::Forbidden(status),
            401 => KubeError::Unauthorized(status),
            410 => KubeError::Gone(status),
            504 => KubeError::Timeout(format!("{} ({})", status.message, status.reason)),
            429 | 500..=599 => KubeError::Unavailable(format!(
                "{} {}: {}",
                status.code, status.reason, status.message
            )),
            _ => KubeError::Invalid(status),
        }
    }

    /// The `Status` carried by the error, when the server reported one.
    pub fn status(&self) -> Option<&Status> {
        match self {
            KubeError::NotFound(s)
            | KubeError::Conflict(s)
            | KubeError::Forbidden(s)
            | KubeError::Unauthorized(s)
            | KubeError::Invalid(s)
            | KubeError::Gone(s) => Some(s),
            KubeError::Unavailable(_) | KubeError::Timeout(_) => None,
        }
    }

    /// A local `Invalid` (400 BadRequest) for a request rejected before it was sent.
    pub fn bad_request(message: impl Into<String>) -> KubeError {
        KubeError::Invalid(Status {
            code: 400,
            reason: "BadRequest".into(),
            message: message.into(),
        })
    }
}

/// Convenience alias for results of this crate.
pub type Result<T, E = KubeError> = std::result::Result<T, E>;
