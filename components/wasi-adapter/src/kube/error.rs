//! Building `kube.error` values, with the same case for the same failure as the lethe host.

use crate::bindings::exports::lethe::platform::kube::{Error, Status};

/// A `Status` the adapter reports itself (no server involved).
pub fn status(code: u16, reason: &str, message: impl Into<String>) -> Status {
    Status {
        code,
        reason: reason.to_owned(),
        message: message.into(),
    }
}

/// The error for an HTTP failure status and its `Status`.
///
/// 404 not-found, 409 conflict, 403 forbidden, 401 unauthorized, 410 gone, 504 timeout, 429 and
/// other 5xx unavailable, and every other status invalid (a 405 or 415 is a request the server
/// will never accept, so retrying cannot help).
pub fn from_status(status: Status) -> Error {
    match status.code {
        404 => Error::NotFound(status),
        409 => Error::Conflict(status),
        403 => Error::Forbidden(status),
        401 => Error::Unauthorized(status),
        410 => Error::Gone(status),
        504 => Error::Timeout(format!("{} ({})", status.message, status.reason)),
        429 | 500..=599 => Error::Unavailable(format!(
            "{} {}: {}",
            status.code, status.reason, status.message
        )),
        _ => Error::Invalid(status),
    }
}

/// An `invalid` (400 BadRequest) for a request refused before it was sent.
pub fn bad_request(message: impl Into<String>) -> Error {
    Error::Invalid(status(400, "BadRequest", message))
}

/// A `not-found` (404) the adapter decides itself, e.g. a kind discovery does not know.
pub fn not_found(message: impl Into<String>) -> Error {
    Error::NotFound(status(404, "NotFound", message))
}

/// An `unauthorized` (401) for a caller token that cannot be used at all.
pub fn unauthorized(message: impl Into<String>) -> Error {
    Error::Unauthorized(status(401, "Unauthorized", message))
}

/// A `forbidden` (403) for an identity the adapter cannot act as.
pub fn forbidden(message: impl Into<String>) -> Error {
    Error::Forbidden(status(403, "Forbidden", message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_the_hosts_cases() {
        let s = |code| status(code, "R", "m");
        assert!(matches!(from_status(s(404)), Error::NotFound(_)));
        assert!(matches!(from_status(s(409)), Error::Conflict(_)));
        assert!(matches!(from_status(s(403)), Error::Forbidden(_)));
        assert!(matches!(from_status(s(401)), Error::Unauthorized(_)));
        assert!(matches!(from_status(s(400)), Error::Invalid(_)));
        assert!(matches!(from_status(s(422)), Error::Invalid(_)));
        assert!(matches!(from_status(s(405)), Error::Invalid(_)));
        assert!(matches!(from_status(s(410)), Error::Gone(_)));
        assert_eq!(from_status(s(504)), Error::Timeout("m (R)".into()));
        assert_eq!(from_status(s(429)), Error::Unavailable("429 R: m".into()));
        assert_eq!(from_status(s(503)), Error::Unavailable("503 R: m".into()));
        assert_eq!(
            from_status(status(404, "NotFound", "x")),
            Error::NotFound(status(404, "NotFound", "x"))
        );
    }
}
