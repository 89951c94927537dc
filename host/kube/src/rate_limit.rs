//! The client-side rate limit: a token bucket per component and identity, as client-go gives each
//! client (`QPS` and `Burst` of a `rest.Config`). It is waited out before every attempt of every
//! call, retries and discovery included, so that a reconciler on a bad day does not multiply its
//! load on the API server with its own retries.
//!
//! The privileged identity has one bucket per [`RateLimit`] (the host builds one per component),
//! and its Events another: controller-runtime's event recorder is a client of its own, with its
//! own bucket, so that telling what a reconciler did never slows what it does. Each caller token
//! has its own, since each is a different client of the API server whose
//! requests its own priority and fairness rules account for. A wait that would pass the call's
//! deadline is not started: the call fails with [`KubeError::Timeout`] while the component can
//! still answer.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota};

use crate::error::{KubeError, Result};

/// QPS and burst of one component's Kubernetes calls, per identity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimitOptions {
    /// Sustained calls per second (fractions allowed, e.g. 0.5).
    pub qps: f64,
    /// Calls that may go at once after a quiet spell.
    pub burst: u32,
}

impl Default for RateLimitOptions {
    /// client-go's defaults: 5 QPS, burst 10.
    fn default() -> Self {
        RateLimitOptions {
            qps: 5.0,
            burst: 10,
        }
    }
}

/// Why a [`RateLimitOptions`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateLimitError {
    /// QPS must be a positive, finite number.
    #[error("kube_qps must be a positive number, not {0}")]
    Qps(String),
    /// Burst must be at least 1.
    #[error("kube_burst must be at least 1")]
    Burst,
}

/// The buckets of one component: one for the privileged identity, one for the Events it records,
/// one per caller token.
pub struct RateLimit {
    options: RateLimitOptions,
    privileged: DefaultDirectRateLimiter,
    recorder: DefaultDirectRateLimiter,
    callers: DefaultKeyedRateLimiter<[u8; 32]>,
    waited_nanos: AtomicU64,
}

impl std::fmt::Debug for RateLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit")
            .field("options", &self.options)
            .finish()
    }
}

/// How many caller buckets are kept before idle ones are dropped.
const CALLER_BUCKETS: usize = 4096;

impl RateLimit {
    /// Buckets for `options`.
    pub fn new(options: RateLimitOptions) -> std::result::Result<RateLimit, RateLimitError> {
        if !(options.qps.is_finite() && options.qps > 0.0) {
            return Err(RateLimitError::Qps(options.qps.to_string()));
        }
        let burst = NonZeroU32::new(options.burst).ok_or(RateLimitError::Burst)?;
        // One call per period; a period under a nanosecond is no limit worth keeping apart.
        let period = Duration::from_secs_f64(1.0 / options.qps).max(Duration::from_nanos(1));
        let quota = Quota::with_period(period)
            .ok_or_else(|| RateLimitError::Qps(options.qps.to_string()))?
            .allow_burst(burst);
        Ok(RateLimit {
            options,
            privileged: DefaultDirectRateLimiter::direct(quota),
            recorder: DefaultDirectRateLimiter::direct(quota),
            callers: DefaultKeyedRateLimiter::keyed(quota),
            waited_nanos: AtomicU64::new(0),
        })
    }

    /// The options in force.
    pub fn options(&self) -> RateLimitOptions {
        self.options
    }

    /// The time calls have waited for these buckets, in total.
    pub fn waited(&self) -> Duration {
        Duration::from_nanos(self.waited_nanos.load(Ordering::Relaxed))
    }

    /// How long `bucket` asks to wait now; zero when a call may go, and then it has been counted.
    fn check(&self, bucket: Bucket<'_>) -> Duration {
        let answer = match bucket {
            Bucket::Privileged => self.privileged.check(),
            Bucket::Recorder => self.recorder.check(),
            Bucket::Caller(key) => {
                if self.callers.len() >= CALLER_BUCKETS {
                    self.callers.retain_recent();
                }
                self.callers.check_key(key)
            }
        };
        match answer {
            Ok(()) => Duration::ZERO,
            Err(not_until) => not_until
                .wait_time_from(DefaultClock::default().now())
                .max(Duration::from_millis(1)),
        }
    }
}

/// Which of a [`RateLimit`]'s buckets a call draws from.
#[derive(Debug, Clone, Copy)]
enum Bucket<'a> {
    Privileged,
    /// The privileged identity's Events.
    Recorder,
    Caller(&'a [u8; 32]),
}

/// A client's place in a [`RateLimit`]: its bucket, and where the waits of its calls are summed
/// (the host sums one component instance's).
#[derive(Debug, Clone)]
pub(crate) struct Admission {
    /// The limit shared by every client of the cluster.
    pub limit: Arc<RateLimit>,
    /// The caller's bucket within it (the SHA-256 of its token); none for the privileged identity.
    pub caller: Option<[u8; 32]>,
    /// Whether its privileged calls are Events, which draw from the recorder's bucket.
    pub recorder: bool,
    /// Where the time spent waiting for the limit is summed.
    pub waited: Arc<Waited>,
}

impl Admission {
    /// The same place for recording an Event: the privileged identity's Events draw from a
    /// bucket of their own; a caller's stay in the caller's.
    pub fn for_events(&self) -> Admission {
        Admission {
            recorder: self.caller.is_none(),
            ..self.clone()
        }
    }

    /// Waits until the bucket lets one call go. Fails with [`KubeError::Timeout`], without
    /// waiting, when the wait would pass `deadline`.
    pub async fn admit(&self, deadline: Option<Instant>) -> Result<()> {
        let mut total = Duration::ZERO;
        loop {
            let bucket = match &self.caller {
                Some(key) => Bucket::Caller(key),
                None if self.recorder => Bucket::Recorder,
                None => Bucket::Privileged,
            };
            let wait = self.limit.check(bucket);
            if wait.is_zero() {
                break;
            }
            if deadline.is_some_and(|at| Instant::now() + wait >= at) {
                self.record(total);
                return Err(KubeError::Timeout(format!(
                    "the client-side rate limit ({} QPS, burst {}) would hold this call past its deadline",
                    self.limit.options.qps, self.limit.options.burst
                )));
            }
            tokio::time::sleep(wait).await;
            total += wait;
        }
        self.record(total);
        Ok(())
    }

    fn record(&self, waited: Duration) {
        if waited.is_zero() {
            return;
        }
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        self.limit.waited_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.waited.0.fetch_add(nanos, Ordering::Relaxed);
    }
}

/// The time a set of clients (one component instance's, say) waited for the rate limit.
#[derive(Debug, Default)]
pub struct Waited(AtomicU64);

impl Waited {
    /// The total so far.
    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admission(qps: f64, burst: u32) -> Admission {
        Admission {
            limit: Arc::new(RateLimit::new(RateLimitOptions { qps, burst }).expect("options")),
            caller: None,
            recorder: false,
            waited: Arc::default(),
        }
    }

    #[test]
    fn options_must_be_positive() {
        let bad = |qps, burst| RateLimit::new(RateLimitOptions { qps, burst }).err();
        assert_eq!(bad(0.0, 1), Some(RateLimitError::Qps("0".into())));
        assert_eq!(bad(-1.0, 1), Some(RateLimitError::Qps("-1".into())));
        assert!(matches!(bad(f64::NAN, 1), Some(RateLimitError::Qps(_))));
        assert_eq!(bad(1.0, 0), Some(RateLimitError::Burst));
        assert!(bad(0.5, 1).is_none());
    }

    #[tokio::test]
    async fn a_burst_goes_at_once_and_the_rest_waits_its_turn() {
        let a = admission(20.0, 3);
        for _ in 0..3 {
            a.admit(None).await.expect("admitted");
        }
        assert!(a.waited.total().is_zero(), "the burst does not wait");
        a.admit(None).await.expect("admitted");
        assert!(a.waited.total() > Duration::ZERO, "the fourth call waits");
        assert_eq!(a.limit.waited(), a.waited.total());
    }

    #[tokio::test]
    async fn a_wait_past_the_deadline_is_not_started() {
        let a = admission(0.1, 1);
        a.admit(None).await.expect("the burst");
        let deadline = Instant::now() + Duration::from_millis(50);
        let started = Instant::now();
        let refused = a.admit(Some(deadline)).await;
        assert!(matches!(refused, Err(KubeError::Timeout(_))), "{refused:?}");
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "it did not wait"
        );
    }

    #[test]
    fn each_caller_has_a_bucket_of_its_own() {
        let limit = RateLimit::new(RateLimitOptions { qps: 0.1, burst: 1 }).expect("options");
        assert!(limit.check(Bucket::Caller(&[1; 32])).is_zero());
        assert!(
            !limit.check(Bucket::Caller(&[1; 32])).is_zero(),
            "caller 1 spent its burst"
        );
        assert!(
            limit.check(Bucket::Caller(&[2; 32])).is_zero(),
            "caller 2 has its own"
        );
        assert!(
            limit.check(Bucket::Privileged).is_zero(),
            "and so has the privileged identity"
        );
    }

    #[tokio::test]
    async fn the_privileged_identitys_events_have_a_bucket_of_their_own() {
        let a = admission(0.1, 1);
        a.admit(None).await.expect("the burst");
        let events = a.for_events();
        events
            .admit(None)
            .await
            .expect("an Event waits not for the reconciler's calls");
        assert!(a.waited.total().is_zero());
        let deadline = Some(Instant::now() + Duration::from_millis(50));
        let refused = events.admit(deadline).await;
        assert!(
            matches!(refused, Err(KubeError::Timeout(_))),
            "the recorder's burst is spent: {refused:?}"
        );
        let caller = Admission {
            caller: Some([3; 32]),
            ..a.clone()
        }
        .for_events();
        caller.admit(None).await.expect("a caller's own burst");
        let refused = caller.admit(deadline).await;
        assert!(
            matches!(refused, Err(KubeError::Timeout(_))),
            "a caller's Events are the caller's: {refused:?}"
        );
    }
}
