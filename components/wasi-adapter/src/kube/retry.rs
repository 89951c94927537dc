//! The adapter's side of the retry policy: how a `wasi:http` error is classified by how far the
//! request got, the time limits, and the budget. How an attempt's outcome is judged is
//! `lethe_kube_model::retry`, and the backoff, `Retry-After` and the budgets are `lethe_retry`'s:
//! the same rules as on the lethe host.

use std::time::Duration;

use lethe_retry::Policy;
use wasip2::http::types::ErrorCode;

pub use lethe_kube_model::retry::{
    Answer, Attempt, Reach, Safety, TransportError, Verdict, exhausted, judge, patch_safety,
    replace_safety,
};

/// The adapter's retry budget: `lethe_retry`'s policy with fewer attempts than the host's
/// (four failures and four 429s per call, where the host allows ten of each). The host bounds a
/// call by its caller's deadline as well; a foreign host tells the adapter of no deadline, so
/// attempts alone bound how long a component's request stalls, and it should not stall for longer
/// than a person would wait.
pub const POLICY: Policy = Policy {
    max_attempts: 4,
    max_throttled: 4,
    base_delay: Duration::from_millis(100),
    max_delay: Duration::from_secs(5),
};
/// The time to establish a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The time from sending to the first byte of the answer.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest pause between two bytes of the answer.
pub const BETWEEN_BYTES_TIMEOUT: Duration = Duration::from_secs(30);

/// Classifies a `wasi:http` error code by how far the request got.
pub fn classify(code: &ErrorCode) -> TransportError {
    use ErrorCode as E;
    let (reach, timeout, message): (Reach, bool, String) = match code {
        E::DnsTimeout => (Reach::NotSent, true, "DNS lookup timed out".into()),
        E::DnsError(p) => (
            Reach::NotSent,
            false,
            format!(
                "DNS error{}",
                p.rcode
                    .as_deref()
                    .map(|r| format!(" ({r})"))
                    .unwrap_or_default()
            ),
        ),
        E::DestinationNotFound => (Reach::NotSent, false, "host not found".into()),
        E::DestinationUnavailable => (Reach::NotSent, false, "host unavailable".into()),
        E::DestinationIpUnroutable => (Reach::NotSent, false, "address unroutable".into()),
        E::ConnectionRefused => (Reach::NotSent, false, "connection refused".into()),
        E::ConnectionTimeout => (
            Reach::NotSent,
            true,
            format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()),
        ),
        E::ConnectionLimitReached => (Reach::NotSent, false, "connection limit reached".into()),
        E::TlsProtocolError => (Reach::NotSent, false, "TLS protocol error".into()),
        E::TlsAlertReceived(p) => (
            Reach::NotSent,
            false,
            format!(
                "TLS alert{}",
                p.alert_message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            ),
        ),
        E::TlsCertificateError => (
            Reach::Fatal,
            false,
            "the server's TLS certificate was rejected".into(),
        ),
        E::DestinationIpProhibited => (
            Reach::Fatal,
            false,
            "the host prohibits connecting to this address".into(),
        ),
        E::HttpRequestDenied => (
            Reach::Fatal,
            false,
            "the host denied the outgoing request (is the API server an allowed outbound host?)"
                .into(),
        ),
        E::HttpRequestUriInvalid => (
            Reach::Fatal,
            false,
            "the request URI is invalid (check LETHE_KUBE_URL)".into(),
        ),
        E::ConfigurationError => (
            Reach::Fatal,
            false,
            "the host's HTTP client is misconfigured".into(),
        ),
        E::HttpRequestLengthRequired
        | E::HttpRequestBodySize(_)
        | E::HttpRequestMethodInvalid
        | E::HttpRequestUriTooLong
        | E::HttpRequestHeaderSectionSize(_)
        | E::HttpRequestHeaderSize(_)
        | E::HttpRequestTrailerSectionSize(_)
        | E::HttpRequestTrailerSize(_)
        | E::LoopDetected => (Reach::Fatal, false, format!("{code:?}")),
        E::ConnectionReadTimeout | E::ConnectionWriteTimeout => (
            Reach::Lost,
            true,
            format!(
                "the connection stalled for {} s",
                BETWEEN_BYTES_TIMEOUT.as_secs()
            ),
        ),
        E::HttpResponseTimeout => (
            Reach::Lost,
            true,
            format!("no response within {} s", FIRST_BYTE_TIMEOUT.as_secs()),
        ),
        E::ConnectionTerminated => (Reach::Lost, false, "connection closed".into()),
        E::HttpResponseIncomplete => (Reach::Lost, false, "incomplete response".into()),
        E::InternalError(Some(m)) => (Reach::Lost, false, format!("internal error: {m}")),
        E::InternalError(None) => (Reach::Lost, false, "internal error".into()),
        E::HttpResponseHeaderSectionSize(_)
        | E::HttpResponseHeaderSize(_)
        | E::HttpResponseBodySize(_)
        | E::HttpResponseTrailerSectionSize(_)
        | E::HttpResponseTrailerSize(_)
        | E::HttpResponseTransferCoding(_)
        | E::HttpResponseContentCoding(_)
        | E::HttpUpgradeFailed
        | E::HttpProtocolError => (Reach::Lost, false, format!("{code:?}")),
    };
    TransportError {
        reach,
        timeout,
        message,
    }
}

/// Classifies an error code `outgoing-handler.handle` returned at once: the request was never
/// dispatched, so nothing is lost, whatever the code says.
pub fn classify_refused(code: &ErrorCode) -> TransportError {
    let mut error = classify(code);
    if error.reach == Reach::Lost {
        error.reach = Reach::NotSent;
    }
    error
}

/// Classifies an error while the answer's body was being read: the request was sent, so nothing
/// is "not sent" any more.
pub fn classify_in_body(code: &ErrorCode) -> TransportError {
    let mut error = classify(code);
    if error.reach == Reach::NotSent {
        error.reach = Reach::Lost;
    }
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_by_reach() {
        let reach = |c: ErrorCode| {
            let e = classify(&c);
            (e.reach, e.timeout)
        };
        assert_eq!(reach(ErrorCode::ConnectionRefused), (Reach::NotSent, false));
        assert_eq!(reach(ErrorCode::ConnectionTimeout), (Reach::NotSent, true));
        assert_eq!(reach(ErrorCode::DnsTimeout), (Reach::NotSent, true));
        assert_eq!(
            reach(ErrorCode::DnsError(wasip2::http::types::DnsErrorPayload {
                rcode: Some("NXDOMAIN".into()),
                info_code: None
            })),
            (Reach::NotSent, false)
        );
        assert_eq!(reach(ErrorCode::ConnectionTerminated), (Reach::Lost, false));
        assert_eq!(reach(ErrorCode::HttpResponseTimeout), (Reach::Lost, true));
        assert_eq!(reach(ErrorCode::ConnectionReadTimeout), (Reach::Lost, true));
        assert_eq!(reach(ErrorCode::InternalError(None)), (Reach::Lost, false));
        assert_eq!(reach(ErrorCode::HttpRequestDenied), (Reach::Fatal, false));
        assert_eq!(reach(ErrorCode::TlsCertificateError), (Reach::Fatal, false));
        assert_eq!(
            classify_refused(&ErrorCode::InternalError(Some("x".into()))).reach,
            Reach::NotSent
        );
        assert_eq!(
            classify_refused(&ErrorCode::HttpRequestDenied).reach,
            Reach::Fatal
        );
        assert_eq!(
            classify_in_body(&ErrorCode::ConnectionRefused).reach,
            Reach::Lost
        );
        assert!(
            classify(&ErrorCode::DnsError(wasip2::http::types::DnsErrorPayload {
                rcode: Some("NXDOMAIN".into()),
                info_code: None
            }))
            .message
            .contains("NXDOMAIN")
        );
    }
}
