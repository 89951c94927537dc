//! The Cloud Foundry V3 error envelope: `{"errors":[{"code","title","detail"}]}`.

use serde::Serialize;

use crate::Response;
use crate::kube::KubeError;

/// One entry of the envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CfError {
    /// Numeric CF code, e.g. 10010.
    pub code: u32,
    /// CF title, e.g. `CF-ResourceNotFound`.
    pub title: String,
    /// Human-readable detail.
    pub detail: String,
}

#[derive(Serialize)]
struct Envelope<'a> {
    errors: &'a [CfError],
}

/// A response carrying the envelope with `errors`.
pub fn error_response(status: u16, errors: &[CfError]) -> Response {
    Response::json(status, &Envelope { errors })
}

/// A response carrying one error.
pub fn error(status: u16, code: u32, title: &str, detail: impl Into<String>) -> Response {
    error_response(
        status,
        &[CfError {
            code,
            title: title.into(),
            detail: detail.into(),
        }],
    )
}

// Shorthands for handlers that answer a response directly; each is the `HttpError` of the same
// name, so codes, titles and wording live in one place.

/// 404 `CF-ResourceNotFound` (10010) with `detail`, e.g. "Organization not found".
pub fn not_found(detail: impl Into<String>) -> Response {
    HttpError::not_found(detail).into_response()
}

/// 400 `CF-MessageParseError` (1001) for a body that is not the expected JSON.
pub fn message_parse_error(detail: impl Into<String>) -> Response {
    HttpError::parse_error(detail).into_response()
}

/// 422 `CF-UnprocessableEntity` (10008).
pub fn unprocessable(detail: impl Into<String>) -> Response {
    HttpError::unprocessable(detail).into_response()
}

/// 401 `CF-NotAuthenticated` (10002): no credentials were given.
pub fn not_authenticated() -> Response {
    HttpError::not_authenticated().into_response()
}

/// 401 `CF-InvalidAuthToken` (1000): the credentials were not accepted.
pub fn invalid_auth_token() -> Response {
    HttpError::invalid_token().into_response()
}

/// 403 `CF-NotAuthorized` (10003).
pub fn not_authorized() -> Response {
    HttpError::not_authorized().into_response()
}

/// 500 `UnknownError` (10001).
pub fn unknown_error() -> Response {
    error(500, 10001, "UnknownError", "An unknown error occurred.")
}

/// A job's state, as Cloud Controller spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Still running.
    Processing,
    /// Done.
    Complete,
    /// Cannot finish (past its timeout).
    Failed,
    /// Waits on another system's asynchronous work (a service broker's), as Cloud Controller's
    /// `POLLING`.
    Polling,
}

impl JobState {
    /// `PROCESSING`, `COMPLETE`, `FAILED` or `POLLING`.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Processing => "PROCESSING",
            JobState::Complete => "COMPLETE",
            JobState::Failed => "FAILED",
            JobState::Polling => "POLLING",
        }
    }
}

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

    /// 403 `CF-OrgSuspended` (10017): a write in a suspended organization.
    pub fn org_suspended() -> Self {
        Self::one(
            403,
            10017,
            "CF-OrgSuspended",
            "The organization is suspended",
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

    /// 405 for lethe's own endpoints (the CF API itself answers an unknown method with
    /// [`HttpError::unknown_request`]).
    pub fn method_not_allowed() -> Self {
        Self::one(
            405,
            10000,
            "CF-MethodNotAllowed",
            "The request method is not allowed for this resource",
        )
    }

    /// 404 `CF-NotFound` (10000): no route takes the request (Cloud Controller's router has no
    /// "method not allowed"; a method a path does not take is an unknown request too).
    pub fn unknown_request() -> Self {
        Self::one(404, 10000, "CF-NotFound", "Unknown request")
    }

    /// Maps a Kubernetes failure of a call made for the caller. `not_found` is the detail to use
    /// when the object is missing or hidden.
    ///
    /// ```
    /// use lethe_guest::cf::HttpError;
    /// use lethe_guest::kube::KubeError;
    ///
    /// // What a caller is told when their own read failed.
    /// let hidden = HttpError::from_kube(KubeError::Forbidden("...".into()), "Note not found");
    /// assert_eq!((hidden.status, hidden.errors[0].code), (403, 10003));
    /// let gone = HttpError::from_kube(KubeError::NotFound("...".into()), "Note not found");
    /// assert_eq!((gone.status, gone.errors[0].detail.as_str()), (404, "Note not found"));
    /// let down = HttpError::from_kube(KubeError::Unavailable("...".into()), "Note not found");
    /// assert_eq!(down.status, 503);
    /// ```
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
    pub fn response(&self) -> Response {
        error_response(self.status, &self.errors)
    }

    /// The HTTP response, consuming the error.
    pub fn into_response(self) -> Response {
        self.response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_has_code_title_detail() {
        let r = not_found("Job not found. Ensure it exists and you have access to it.");
        assert_eq!(r.status, 404);
        let body = r.json_body().expect("json");
        assert_eq!(body["errors"][0]["code"], 10010);
        assert_eq!(body["errors"][0]["title"], "CF-ResourceNotFound");
        assert_eq!(
            body["errors"][0]["detail"],
            "Job not found. Ensure it exists and you have access to it."
        );
        assert_eq!(body["errors"].as_array().map(Vec::len), Some(1));
    }
}
