//! One HTTP call with retries: each attempt classified by how far it got, judged by the rules of
//! `lethe_kube_model::retry` (the same as the `wasi-adapter`'s), and the backoff loop.

use std::error::Error as StdError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use kube::client::Body;

pub(crate) use lethe_kube_model::retry::{Answer, Safety};
use lethe_kube_model::retry::{Attempt, Reach, TransportError, Verdict, exhausted, judge};

use crate::config::RetryPolicy;
use crate::error::{KubeError, Result};
use crate::rate_limit::Admission;

/// What the retry loop counts across calls (all clients of one cluster).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    /// Attempts replayed.
    pub retries: AtomicU64,
    /// Answers of 429 Too Many Requests.
    pub throttled: AtomicU64,
}

/// Where a call goes and under which rules: the client, the retry policy, the counters, the
/// caller's deadline, and the rate limit every attempt waits for.
#[derive(Clone, Copy)]
pub(crate) struct Route<'a> {
    /// The client that sends the requests.
    pub client: &'a kube::Client,
    /// When and how often a failed attempt is retried.
    pub policy: &'a RetryPolicy,
    /// Where attempts, retries and throttling are counted.
    pub counters: &'a Counters,
    /// The caller's deadline: no attempt runs past it, and none starts once it has passed.
    pub deadline: Option<Instant>,
    /// The rate limit every attempt waits for; none when unlimited.
    pub admission: Option<&'a Admission>,
}

/// Runs the request built by `build` along `route`.
pub(crate) async fn call<F>(route: &Route<'_>, safety: Safety, build: F) -> Result<Answer>
where
    F: Fn() -> Result<http::Request<Vec<u8>>>,
{
    let Route {
        client,
        policy,
        counters,
        deadline,
        admission,
    } = *route;
    let attempts = policy.attempts();
    // Attempts that failed (5xx, transport, timeout) and that were throttled (429), apart.
    let (mut failed, mut throttled) = (0u32, 0u32);
    // The last attempt's failure, once there was one.
    let mut last_error = None;
    loop {
        let request = build()?;
        if let Some(admission) = admission {
            admission.admit(deadline).await?;
        }
        let what = format!("{} {}", request.method(), request.uri().path());
        // An attempt never runs past the deadline (an unsafe write cut short is outcome unknown).
        let limit = match deadline {
            Some(at) => policy
                .per_call_timeout
                .min(at.saturating_duration_since(Instant::now())),
            None => policy.per_call_timeout,
        };
        if limit.is_zero() {
            return Err(match last_error.take() {
                // A retry not sent: the caller gets what the attempt before it met.
                Some(error) => exhausted(error, failed + throttled),
                // Nothing was sent, so nothing can have been applied.
                None => KubeError::Timeout(format!(
                    "{what}: the caller's time ran out before it was sent"
                )),
            });
        }
        let outcome = once(client, request, limit).await;
        let was_throttled = matches!(outcome, Attempt::Failed { code: 429, .. });
        if was_throttled {
            counters.throttled.fetch_add(1, Ordering::Relaxed);
        }
        let (error, retry_after) = match judge(outcome, safety) {
            Verdict::Done(answer) => return Ok(answer),
            Verdict::Fail(error) => return Err(error),
            Verdict::Retry { error, retry_after } => (error, retry_after),
        };
        if was_throttled {
            throttled += 1;
        } else {
            failed += 1;
        }
        let attempt = failed + throttled;
        if failed >= attempts || throttled >= policy.max_throttled.max(1) {
            tracing::warn!(request = %what, attempts = attempt, throttled, error = %error, "Kubernetes retries exhausted");
            return Err(exhausted(error, attempt));
        }
        // Backoff grows with the failures; a 429 waits what the server asked for.
        let delay = policy.delay(failed.max(1), retry_after);
        // A retry that could not finish before the caller's deadline is not started: the caller
        // gets the failure while it still has time to answer.
        if deadline.is_some_and(|at| Instant::now() + delay >= at) {
            tracing::debug!(request = %what, attempts = attempt, error = %error, "Kubernetes retry would pass the deadline; giving up");
            return Err(exhausted(error, attempt));
        }
        tracing::debug!(request = %what, attempt, delay_ms = delay.as_millis() as u64, error = %error, "transient Kubernetes failure; retrying");
        last_error = Some(error);
        counters.retries.fetch_add(1, Ordering::Relaxed);
        tokio::time::sleep(delay).await;
    }
}

/// One attempt: send, then read the whole body, within `timeout` (a connect error is
/// [`Reach::NotSent`]: the request provably never reached the server).
async fn once(
    client: &kube::Client,
    request: http::Request<Vec<u8>>,
    timeout: Duration,
) -> Attempt {
    let work = async {
        let response = match client.send(request.map(Body::from)).await {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Transport(TransportError {
                    reach: if is_connect_error(&e) {
                        Reach::NotSent
                    } else {
                        Reach::Lost
                    },
                    timeout: false,
                    message: describe(&e),
                });
            }
        };
        let code = response.status().as_u16();
        let retry_after = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(parse_retry_after);
        let body = match response.into_body().collect().await {
            Ok(collected) => collected.to_bytes().to_vec(),
            Err(e) => {
                return Attempt::Transport(TransportError::lost(format!(
                    "reading the response: {}",
                    describe(&e)
                )));
            }
        };
        Attempt::answered(code, body, retry_after)
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| {
            Attempt::Transport(TransportError {
                reach: Reach::Lost,
                timeout: true,
                message: format!("none within {timeout:?}"),
            })
        })
}

/// `Retry-After` as delay-seconds or an HTTP date.
pub(crate) fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = chrono::DateTime::parse_from_rfc2822(value).ok()?;
    let delta = when.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(delta.to_std().unwrap_or(Duration::ZERO))
}

/// Whether the request provably never reached the server: the connection could not be made.
fn is_connect_error(e: &kube::Error) -> bool {
    let mut current: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = current {
        if let Some(h) = err.downcast_ref::<hyper_util::client::legacy::Error>()
            && h.is_connect()
        {
            return true;
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        current = err.source();
    }
    false
}

/// The error and its causes on one line.
fn describe(e: &(dyn StdError + 'static)) -> String {
    let mut out = e.to_string();
    let mut current = e.source();
    while let Some(err) = current {
        let text = err.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        current = err.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0 "), Some(Duration::ZERO));
        assert_eq!(
            parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after("soon"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
