//! The adapter's side of the retry policy: how a `wasi:http` error is classified by how far the
//! request got, the time limits, and how long to wait before the next attempt. How an attempt's
//! outcome is judged is `lethe_kube_model::retry`, the same rules as on the lethe host.

use std::time::Duration;

use wasip2::http::types::ErrorCode;

pub use lethe_kube_model::retry::{
    Answer, Attempt, Reach, Safety, TransportError, Verdict, exhausted, judge, patch_safety,
    replace_safety,
};

/// Attempts per call, the first included.
pub const MAX_ATTEMPTS: u32 = 4;
/// The backoff ceiling before the first retry; it doubles per attempt.
pub const BASE_DELAY: Duration = Duration::from_millis(100);
/// The largest backoff, and the cap on a server's `Retry-After`: a component's request should
/// not stall for longer than a person would wait.
pub const MAX_DELAY: Duration = Duration::from_secs(5);
/// The time to establish a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The time from sending to the first byte of the answer.
pub const FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest pause between two bytes of the answer.
pub const BETWEEN_BYTES_TIMEOUT: Duration = Duration::from_secs(30);

/// The backoff ceiling after failed attempt `attempt` (1-based): `BASE_DELAY * 2^(attempt-1)`,
/// at most [`MAX_DELAY`].
pub fn ceiling(attempt: u32) -> Duration {
    let factor = 1u32 << attempt.saturating_sub(1).min(31);
    BASE_DELAY
        .checked_mul(factor)
        .unwrap_or(MAX_DELAY)
        .min(MAX_DELAY)
}

/// The delay after failed attempt `attempt`: the server's `Retry-After` capped at
/// [`MAX_DELAY`] when given, else full jitter over [`ceiling`] drawn from `random`, so that
/// many instances failing together do not retry together.
pub fn delay(attempt: u32, retry_after: Option<Duration>, random: u64) -> Duration {
    if let Some(server) = retry_after {
        return server.min(MAX_DELAY);
    }
    let nanos = u64::try_from(ceiling(attempt).as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(random % nanos.saturating_add(1))
}

/// `Retry-After` as delay-seconds. (The HTTP-date form is not used by the API server; without a
/// calendar it is ignored, and the backoff applies.)
pub fn parse_retry_after(value: &[u8]) -> Option<Duration> {
    let text = std::str::from_utf8(value).ok()?.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Digits only, so a parse failure is an overflow: wait as long as allowed.
    Some(Duration::from_secs(text.parse::<u64>().unwrap_or(u64::MAX)))
}

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

    #[test]
    fn backoff_is_bounded_with_jitter() {
        assert_eq!(ceiling(1), Duration::from_millis(100));
        assert_eq!(ceiling(3), Duration::from_millis(400));
        assert_eq!(ceiling(9), MAX_DELAY);
        assert_eq!(ceiling(u32::MAX), MAX_DELAY);
        for attempt in 1..10 {
            for random in [0, 1, 12_345_678_901, u64::MAX] {
                assert!(delay(attempt, None, random) <= ceiling(attempt));
            }
        }
        assert_eq!(delay(1, None, 0), Duration::ZERO);
        assert_ne!(delay(3, None, 12_345_678), delay(3, None, 87_654_321));
        assert_eq!(
            delay(1, Some(Duration::from_secs(2)), 7),
            Duration::from_secs(2)
        );
        assert_eq!(delay(1, Some(Duration::from_secs(3600)), 7), MAX_DELAY);
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after(b"3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(b" 0 "), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after(b"99999999999999999999999"),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(parse_retry_after(b"Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after(b"soon"), None);
        assert_eq!(parse_retry_after(b"-1"), None);
        assert_eq!(parse_retry_after(b""), None);
        assert_eq!(parse_retry_after(&[0xff]), None);
    }
}
