//! CF V3 errors as values: what a handler answers with when it cannot do what was asked.

use lethe_guest::Response;
use lethe_guest::cf::{CfError, error_response};
use lethe_guest::kube::KubeError;

/// The detail of every unknown or malformed job GUID (Cloud Controller's words).
pub const JOB_NOT_FOUND: &str = "Job not found. Ensure it exists and you have access to it.";

/// An HTTP status with the CF envelope's entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// The HTTP status.
    pub status: u16,
    /// The envelope's entries (never empty).
    pub errors: Vec<CfError>,
}

impl HttpError {
    fn one(status: u16, code: u32, title: &str, detail: impl Into<String>) -> Self {
        HttpError {
            status,
            errors: vec![CfError {
                code,
                title: title.into(),
                detail: detail.into(),
            }],
        }
    }

    /// 404 `CF-ResourceNotFound` (10010).
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::one(404, 10010, "CF-ResourceNotFound", detail)
    }

    /// 404 for a job GUID that is unknown or malformed.
    pub fn job_not_found() -> Self {
        Self::not_found(JOB_NOT_FOUND)
    }

    /// 401 `CF-NotAuthenticated` (10002): no token.
    pub fn not_authenticated() -> Self {
        Self::one(401, 10002, "CF-NotAuthenticated", "Authentication error")
    }

    /// 401 `CF-InvalidAuthToken` (1000): a token that is malformed or not accepted.
    pub fn invalid_token() -> Self {
        Self::one(401, 1000, "CF-InvalidAuthToken", "Invalid Auth Token")
    }

    /// 403 `CF-NotAuthorized` (10003).
    pub fn not_authorized() -> Self {
        Self::one(
            403,
            10003,
            "CF-NotAuthorized",
            "You are not authorized to perform the requested action",
        )
    }

    /// 422 `CF-UnprocessableEntity` (10008).
    pub fn unprocessable(detail: impl Into<String>) -> Self {
        Self::one(422, 10008, "CF-UnprocessableEntity", detail)
    }

    /// 400 `CF-MessageParseError` (1001).
    pub fn parse_error(detail: impl Into<String>) -> Self {
        Self::one(400, 1001, "CF-MessageParseError", detail)
    }

    /// 400 `CF-BadQueryParameter` (10005).
    pub fn bad_query(detail: impl Into<String>) -> Self {
        Self::one(400, 10005, "CF-BadQueryParameter", detail)
    }

    /// 503 `CF-ServiceUnavailable` (10015): Kubernetes could not be reached.
    pub fn unavailable(detail: impl Into<String>) -> Self {
        Self::one(503, 10015, "CF-ServiceUnavailable", detail)
    }

    /// 405 `CF-NotFound`-style method error.
    pub fn method_not_allowed() -> Self {
        Self::one(
            405,
            10000,
            "CF-MethodNotAllowed",
            "The request method is not allowed for this resource",
        )
    }

    /// Maps a Kubernetes failure of a call made for the caller. `not_found` is the detail to use
    /// when the object is missing or hidden.
    pub fn from_kube(e: KubeError, not_found: &str) -> Self {
        match e {
            KubeError::NotFound(_) => Self::not_found(not_found),
            KubeError::Unauthorized(_) => Self::invalid_token(),
            KubeError::Forbidden(_) => Self::not_authorized(),
            KubeError::Invalid(m) => Self::unprocessable(m),
            KubeError::Conflict(m) => Self::unprocessable(m),
            KubeError::Gone(m) | KubeError::Unavailable(m) | KubeError::Timeout(m) => {
                Self::unavailable(m)
            }
        }
    }

    /// The HTTP response.
    pub fn into_response(self) -> Response {
        error_response(self.status, &self.errors)
    }
}
