//! The retry loop shared by both backends, under `lethe_retry`'s budget and backoff.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};

use lethe_retry::{Budget, Setback};

use crate::config::RetryPolicy;
use crate::error::{Failure, Result, SqlError};

/// Counters a [`Database`](crate::Database) keeps about its own behaviour.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// How many attempts were retried after a transient failure.
    pub retries: AtomicU64,
}

/// Runs `op` until it succeeds, fails with a non-retryable [`Failure`], or the policy's
/// attempts are used up. `op` receives the 1-based attempt number.
///
/// Only failures the backend marked `retry` are replayed; the backend sets that flag only when
/// the attempt cannot have applied anything.
pub(crate) async fn run<T, F, Fut>(
    policy: &RetryPolicy,
    counters: &Counters,
    what: &str,
    mut op: F,
) -> Result<T>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = std::result::Result<T, Failure>>,
{
    let mut budget = Budget::new(*policy);
    loop {
        let attempt = budget.attempts() + 1;
        match op(attempt).await {
            Ok(value) => return Ok(value),
            Err(failure) if failure.retry => {
                let Some(delay) = budget.next(Setback::Failed, None, None, rand::random()) else {
                    tracing::warn!(operation = what, attempts = attempt, error = %failure.error, "SQL retries exhausted");
                    return Err(exhausted(failure.error, attempt));
                };
                tracing::debug!(
                    operation = what,
                    attempt,
                    delay_ms = delay.as_millis() as u64,
                    error = %failure.error,
                    "transient SQL failure; retrying"
                );
                counters.retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(delay).await;
            }
            Err(failure) => return Err(failure.error),
        }
    }
}

/// Adds the number of attempts to the message, keeping the variant.
fn exhausted(error: SqlError, attempts: u32) -> SqlError {
    let suffix = |m: String| format!("{m} (gave up after {attempts} attempts)");
    match error {
        SqlError::ConstraintViolation(m) => SqlError::ConstraintViolation(m),
        // `conflict` is reserved for interactive transactions, which the caller must redo
        // itself; replayable work that kept conflicting is reported as not applied.
        SqlError::Conflict(m) => SqlError::Unavailable(suffix(format!(
            "kept conflicting with concurrent transactions, nothing was applied: {m}"
        ))),
        SqlError::InvalidStatement(m) => SqlError::InvalidStatement(m),
        SqlError::InvalidValue(m) => SqlError::InvalidValue(m),
        SqlError::Unavailable(m) => SqlError::Unavailable(suffix(m)),
        SqlError::OutcomeUnknown(m) => SqlError::OutcomeUnknown(m),
        SqlError::Denied(m) => SqlError::Denied(m),
        SqlError::Other(m) => SqlError::Other(suffix(m)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;
    use std::time::Duration;

    fn fast(max_attempts: u32) -> RetryPolicy {
        RetryPolicy {
            max_attempts,
            max_throttled: 1,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(2),
        }
    }

    #[tokio::test]
    async fn retries_transient_until_success() {
        let calls = AtomicU32::new(0);
        let counters = Counters::default();
        let out = run(&fast(5), &counters, "t", |_| async {
            if calls.fetch_add(1, Ordering::SeqCst) < 2 {
                Err(Failure::transient(SqlError::Unavailable("down".into())))
            } else {
                Ok(7)
            }
        })
        .await;
        assert_eq!(out, Ok(7));
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(counters.retries.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn never_retries_fatal() {
        let calls = AtomicU32::new(0);
        let out: Result<()> = run(&fast(5), &Counters::default(), "t", |_| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Failure::fatal(SqlError::OutcomeUnknown("lost".into())))
        })
        .await;
        assert!(matches!(out, Err(SqlError::OutcomeUnknown(_))));
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn gives_up_after_max_attempts() {
        let calls = AtomicU32::new(0);
        let out: Result<()> = run(&fast(3), &Counters::default(), "t", |_| async {
            calls.fetch_add(1, Ordering::SeqCst);
            Err(Failure::transient(SqlError::Unavailable("down".into())))
        })
        .await;
        match out {
            Err(SqlError::Unavailable(m)) => assert!(m.contains("3 attempts"), "{m}"),
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(calls.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn exhausted_conflicts_become_unavailable() {
        let out: Result<()> = run(&fast(2), &Counters::default(), "t", |_| async {
            Err(Failure::transient(SqlError::Conflict("40001".into())))
        })
        .await;
        assert!(matches!(out, Err(SqlError::Unavailable(m)) if m.contains("40001")));
    }
}
