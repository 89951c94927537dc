//! One HTTP call with retries: each attempt classified by how far it got, judged by the rules of
//! `lethe_kube_model::retry` (the same as the `wasi-adapter`'s), and waited out under
//! `lethe_retry`'s budget and backoff.

use std::error::Error as StdError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use http_body_util::BodyExt;
use kube::client::Body;

pub(crate) use lethe_kube_model::retry::{Answer, Safety};
use lethe_kube_model::retry::{Attempt, Reach, TransportError, Verdict, exhausted, judge};
use lethe_retry::{Budget, Setback, parse_retry_after};

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
    /// Time limit of one attempt.
    pub attempt_timeout: Duration,
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
        attempt_timeout,
        counters,
        deadline,
        admission,
    } = *route;
    let mut budget = Budget::new(*policy);
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
            Some(at) => attempt_timeout.min(at.saturating_duration_since(Instant::now())),
            None => attempt_timeout,
        };
        if limit.is_zero() {
            return Err(match last_error.take() {
                // A retry not sent: the caller gets what the attempt before it met.
                Some(error) => exhausted(error, budget.attempts()),
                // Nothing was sent, so nothing can have been applied.
                None => KubeError::Timeout(format!(
                    "{what}: the caller's time ran out before it was sent"
                )),
            });
        }
        let outcome = once(client, request, limit).await;
        let setback = outcome.setback();
        if setback == Setback::Throttled {
            counters.throttled.fetch_add(1, Ordering::Relaxed);
        }
        let (error, retry_after) = match judge(outcome, safety) {
            Verdict::Done(answer) => return Ok(answer),
            Verdict::Fail(error) => return Err(error),
            Verdict::Retry { error, retry_after } => (error, retry_after),
        };
        let time_left = deadline.map(|at| at.saturating_duration_since(Instant::now()));
        let Some(delay) = budget.next(setback, retry_after, time_left, rand::random()) else {
            // Out of attempts, or a retry that could not finish before the caller's deadline: the
            // caller gets the failure while it still has time to answer.
            let attempts = budget.attempts();
            tracing::warn!(request = %what, attempts, throttled = budget.throttled(), error = %error, "Kubernetes retries exhausted");
            return Err(exhausted(error, attempts));
        };
        let attempt = budget.attempts();
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
            .and_then(|v| parse_retry_after(v.as_bytes(), SystemTime::now()));
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
