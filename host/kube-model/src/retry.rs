//! The retry rules of a Kubernetes call, the same on both implementations of
//! `lethe:platform/kube`: how the outcome of one attempt is judged, by how far the request got
//! and whether repeating the call can change what it does.
//!
//! An attempt ends in a 2xx answer, a failure status, or a transport error, which is either
//! *not sent* (the connection was never made, so no call can have been applied), *lost* (the
//! request may have reached the server), or *fatal* (the host refuses it; a repeat fails the
//! same way). A write whose outcome is unknown is never repeated unless repeating is harmless:
//! that verdict, the backoff, `Retry-After` and the budgets are `lethe_retry`'s, lethe's one retry
//! policy; this module says what a Kubernetes answer means to it.

use std::time::Duration;

use lethe_retry::{Effect, Setback, may_repeat};
use serde_json::Value as Json;

use crate::KubeError as Error;
use crate::PatchKind;
use crate::parse;

/// Whether repeating a call can change its outcome: reads, deletes, merge patches and guarded
/// writes are [`Safety::Repeatable`], and repeated on 429, 5xx, transport errors and timeouts;
/// creates and unguarded writes are [`Safety::Unsafe`], repeated only on 429 and when the request
/// was never sent.
pub use lethe_retry::Safety;

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

impl Attempt {
    /// What kind of setback this attempt is to the retry budget, should it be retried: a 429 is
    /// the server throttling, anything else a failure.
    pub fn setback(&self) -> Setback {
        match self {
            Attempt::Failed { code: 429, .. } => Setback::Throttled,
            _ => Setback::Failed,
        }
    }

    /// An attempt the server answered with status `code`: done on a 2xx, failed on anything else.
    pub fn answered(code: u16, body: Vec<u8>, retry_after: Option<Duration>) -> Attempt {
        if (200..300).contains(&code) {
            Attempt::Done(Answer { code, body })
        } else {
            Attempt::Failed {
                code,
                body,
                retry_after,
            }
        }
    }
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
    // Whether an attempt that may have been applied can be made again.
    let repeatable = may_repeat(safety, Effect::Unknown);
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

/// Checks a patch body and decides whether it may be repeated: merge and strategic-merge
/// patches are idempotent; a JSON patch only when a `test` operation guards it.
pub fn patch_safety(kind: PatchKind, patch: &str) -> Result<Safety, Error> {
    let body: Json = serde_json::from_str(patch)
        .map_err(|e| Error::bad_request(format!("the patch is not valid JSON: {e}")))?;
    match kind {
        PatchKind::Merge | PatchKind::StrategicMerge => {
            if !body.is_object() {
                return Err(Error::bad_request("a merge patch must be a JSON object"));
            }
            Ok(Safety::Repeatable)
        }
        PatchKind::Json => {
            let ops = body
                .as_array()
                .ok_or_else(|| Error::bad_request("a JSON patch must be an array of operations"))?;
            let mut guarded = false;
            for op in ops {
                match op.get("op").and_then(Json::as_str) {
                    Some("test") => guarded = true,
                    Some(_) => {}
                    None => {
                        return Err(Error::bad_request(
                            "every JSON patch operation needs an \"op\"",
                        ));
                    }
                }
            }
            Ok(if guarded {
                Safety::Repeatable
            } else {
                Safety::Unsafe
            })
        }
    }
}

/// Checks a replace body and decides whether it may be repeated: only when its
/// metadata.resourceVersion makes a stale repeat fail with a conflict.
pub fn replace_safety(json: &str) -> Result<Safety, Error> {
    let body: Json = serde_json::from_str(json)
        .map_err(|e| Error::bad_request(format!("the object is not valid JSON: {e}")))?;
    if !body.is_object() {
        return Err(Error::bad_request("the object must be a JSON object"));
    }
    let guarded = body
        .pointer("/metadata/resourceVersion")
        .and_then(Json::as_str)
        .is_some_and(|rv| !rv.is_empty());
    Ok(if guarded {
        Safety::Repeatable
    } else {
        Safety::Unsafe
    })
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
