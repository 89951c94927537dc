//! The Cloud Foundry V3 error envelope: `{"errors":[{"code","title","detail"}]}`.

use serde::Serialize;

use crate::Response;

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

/// 404 `CF-ResourceNotFound` (10010) for `what`, e.g. "Organization not found".
pub fn not_found(detail: impl Into<String>) -> Response {
    error(404, 10010, "CF-ResourceNotFound", detail)
}

/// 400 `CF-MessageParseError` (1001) for a body that is not the expected JSON.
pub fn message_parse_error(detail: impl Into<String>) -> Response {
    error(400, 1001, "CF-MessageParseError", detail)
}

/// 422 `CF-UnprocessableEntity` (10008).
pub fn unprocessable(detail: impl Into<String>) -> Response {
    error(422, 10008, "CF-UnprocessableEntity", detail)
}

/// 401 `CF-NotAuthenticated` (10002): no credentials were given.
pub fn not_authenticated() -> Response {
    error(401, 10002, "CF-NotAuthenticated", "Authentication error")
}

/// 401 `CF-InvalidAuthToken` (1000): the credentials were not accepted.
pub fn invalid_auth_token() -> Response {
    error(401, 1000, "CF-InvalidAuthToken", "Invalid Auth Token")
}

/// 403 `CF-NotAuthorized` (10003).
pub fn not_authorized() -> Response {
    error(
        403,
        10003,
        "CF-NotAuthorized",
        "You are not authorized to perform the requested action",
    )
}

/// 500 `UnknownError` (10001).
pub fn unknown_error() -> Response {
    error(500, 10001, "UnknownError", "An unknown error occurred.")
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
