//! The retry policy: how each attempt's outcome is judged, and how long to wait before the next.
//!
//! An attempt ends in a 2xx answer, a failure status, or a transport error, which is either
//! *not sent* (the connection was never made, so no call can have been applied), *lost* (the
//! request may have reached the server), or *fatal* (the host refuses it; a repeat fails the
//! same way). Which of these are repeated depends on the call's [`Safety`], exactly as on the
//! lethe host: a write whose outcome is unknown is never repeated unless repeating is harmless.

use std::time::Duration;

use wasip2::http::types::ErrorCode;

use crate::kube::parse;
use lethe_kube_model::KubeError as Error;

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

/// Whether repeating a call can change its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Safety {
    /// Reads, deletes, merge patches and guarded writes: repeated on 429, 5xx, transport errors
    /// and timeouts.
    Repeatable,
    /// Creates and unguarded writes: repeated only on 429 and when the request was never sent.
    Unsafe,
}

/// A successful (2xx) answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub code: u16,
    /// The whole body.
    pub body: Vec<u8>,
}

/// How far a request got before the transport failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The connection was never made: nothing can have been applied.
    NotSent,
    /// The request may have reached the server.
    Lost,
    /// The host refused the request itself (denied, invalid, misconfigured); a repeat would fail
    /// the same way.
    Fatal,
}

/// A transport failure of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    /// How far the request got.
    pub reach: Reach,
    /// Whether a time limit ran out (the final error is then `timeout`).
    pub timeout: bool,
    /// What happened, for the error message.
    pub message: String,
}

impl TransportError {
    /// A failure the host caused, not to be repeated.
    pub fn fatal(message: impl Into<String>) -> TransportError {
        TransportError {
            reach: Reach::Fatal,
            timeout: false,
            message: message.into(),
        }
    }

    /// A failure after the request may have been sent.
    pub fn lost(message: impl Into<String>) -> TransportError {
        TransportError {
            reach: Reach::Lost,
            timeout: false,
            message: message.into(),
        }
    }
}

/// The outcome of one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// A 2xx answer.
    Done(Answer),
    /// Any other status.
    Failed {
        /// The status code.
        code: u16,
        /// The body (a `Status`, usually).
        body: Vec<u8>,
        /// The server's `Retry-After`, when it sent a usable one.
        retry_after: Option<Duration>,
    },
    /// No answer.
    Transport(TransportError),
}

/// What to do after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Return the answer.
    Done(Answer),
    /// Return the error without another attempt.
    Fail(Error),
    /// Try again (if attempts remain), reporting `error` if none do.
    Retry {
        /// The error to report if this was the last attempt.
        error: Error,
        /// The server's requested delay.
        retry_after: Option<Duration>,
    },
}

/// Judges one attempt of a call of the given safety (the host's rules, case by case).
pub fn judge(attempt: Attempt, safety: Safety) -> Verdict {
    let repeatable = safety == Safety::Repeatable;
    match attempt {
        Attempt::Done(answer) => Verdict::Done(answer),
        Attempt::Failed {
            code,
            body,
            retry_after,
        } => {
            let status = parse::status(code, &body);
            match code {
                // The server refused before doing anything, so even a create may be repeated.
                429 => Verdict::Retry {
                    error: Error::from_status(status),
                    retry_after,
                },
                500..=599 if repeatable => Verdict::Retry {
                    error: Error::from_status(status),
                    retry_after,
                },
                500..=599 => {
                    let message = format!(
                        "outcome unknown: the server answered {} {} ({}) to a write that is not safe to repeat",
                        status.code, status.reason, status.message
                    );
                    Verdict::Fail(if code == 504 {
                        Error::Timeout(message)
                    } else {
                        Error::Unavailable(message)
                    })
                }
                _ => Verdict::Fail(Error::from_status(status)),
            }
        }
        Attempt::Transport(TransportError {
            reach,
            timeout,
            message,
        }) => match reach {
            Reach::Fatal => Verdict::Fail(Error::Unavailable(format!(
                "the request to the API server failed: {message}"
            ))),
            Reach::NotSent => Verdict::Retry {
                error: if timeout {
                    Error::Timeout(format!("cannot reach the API server: {message}"))
                } else {
                    Error::Unavailable(format!("cannot reach the API server: {message}"))
                },
                retry_after: None,
            },
            Reach::Lost if repeatable => Verdict::Retry {
                error: if timeout {
                    Error::Timeout(format!("no answer from the API server: {message}"))
                } else {
                    Error::Unavailable(format!("connection to the API server failed: {message}"))
                },
                retry_after: None,
            },
            Reach::Lost if timeout => Verdict::Fail(Error::Timeout(format!(
                "no answer from the API server ({message}); outcome unknown, and the write is not safe to repeat"
            ))),
            Reach::Lost => Verdict::Fail(Error::Unavailable(format!(
                "outcome unknown: the connection failed after the request was sent and the write is not safe to repeat: {message}"
            ))),
        },
    }
}

/// The final error once the attempts are used up, saying how many there were.
pub fn exhausted(error: Error, attempts: u32) -> Error {
    let suffix = format!(" (gave up after {attempts} attempts)");
    match error {
        Error::Unavailable(m) => Error::Unavailable(m + &suffix),
        Error::Timeout(m) => Error::Timeout(m + &suffix),
        other => other,
    }
}

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

    fn failed(code: u16) -> Attempt {
        Attempt::Failed {
            code,
            body: Vec::new(),
            retry_after: None,
        }
    }

    fn transport(reach: Reach, timeout: bool) -> Attempt {
        Attempt::Transport(TransportError {
            reach,
            timeout,
            message: "m".into(),
        })
    }

    fn retried(v: &Verdict) -> bool {
        matches!(v, Verdict::Retry { .. })
    }

    #[test]
    fn status_verdicts() {
        use Safety::*;
        let ok = Answer {
            code: 201,
            body: b"{}".to_vec(),
        };
        assert_eq!(judge(Attempt::Done(ok.clone()), Unsafe), Verdict::Done(ok));
        for safety in [Repeatable, Unsafe] {
            assert!(retried(&judge(failed(429), safety)));
            for code in [400, 401, 403, 404, 409, 410, 422] {
                assert!(matches!(judge(failed(code), safety), Verdict::Fail(_)));
            }
        }
        for code in [500, 502, 503, 504] {
            assert!(retried(&judge(failed(code), Repeatable)));
        }
        let Verdict::Fail(Error::Unavailable(m)) = judge(failed(503), Unsafe) else {
            panic!("a 503 to a create is final");
        };
        assert!(m.starts_with("outcome unknown"));
        assert!(matches!(
            judge(failed(504), Unsafe),
            Verdict::Fail(Error::Timeout(_))
        ));
        let with_delay = Attempt::Failed {
            code: 429,
            body: Vec::new(),
            retry_after: Some(Duration::from_secs(2)),
        };
        assert!(matches!(
            judge(with_delay, Unsafe),
            Verdict::Retry { retry_after: Some(d), error: Error::Unavailable(_) } if d == Duration::from_secs(2)
        ));
    }

    #[test]
    fn transport_verdicts() {
        use Safety::*;
        for safety in [Repeatable, Unsafe] {
            assert!(retried(&judge(transport(Reach::NotSent, false), safety)));
            assert!(matches!(
                judge(transport(Reach::NotSent, true), safety),
                Verdict::Retry {
                    error: Error::Timeout(_),
                    ..
                }
            ));
            assert!(matches!(
                judge(transport(Reach::Fatal, false), safety),
                Verdict::Fail(Error::Unavailable(_))
            ));
        }
        assert!(matches!(
            judge(transport(Reach::Lost, false), Repeatable),
            Verdict::Retry {
                error: Error::Unavailable(_),
                ..
            }
        ));
        assert!(matches!(
            judge(transport(Reach::Lost, true), Repeatable),
            Verdict::Retry {
                error: Error::Timeout(_),
                ..
            }
        ));
        assert!(matches!(
            judge(transport(Reach::Lost, false), Unsafe),
            Verdict::Fail(Error::Unavailable(m)) if m.starts_with("outcome unknown")
        ));
        assert!(matches!(
            judge(transport(Reach::Lost, true), Unsafe),
            Verdict::Fail(Error::Timeout(m)) if m.contains("outcome unknown")
        ));
    }

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

    #[test]
    fn exhaustion_says_how_often() {
        assert_eq!(
            exhausted(Error::Unavailable("x".into()), 4),
            Error::Unavailable("x (gave up after 4 attempts)".into())
        );
        assert_eq!(
            exhausted(Error::Timeout("x".into()), 4),
            Error::Timeout("x (gave up after 4 attempts)".into())
        );
    }
}
