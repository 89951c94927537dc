//! Errors the adapter decides itself (no server involved). The status mapping for server answers
//! is the host's own, [`KubeError::from_status`].

use lethe_kube_model::{KubeError as Error, Status};

/// A `Status` the adapter reports itself (no server involved).
pub fn status(code: u16, reason: &str, message: impl Into<String>) -> Status {
    Status {
        code,
        reason: reason.to_owned(),
        message: message.into(),
    }
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
    use lethe_kube_model::KubeError;

    fn from_status(status: Status) -> Error {
        KubeError::from_status(status)
    }

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
