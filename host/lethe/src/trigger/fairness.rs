//! Per-caller fairness on the HTTP routes, in the manner of kube-apiserver's API Priority and
//! Fairness: every request is put in a flow by its caller's identity, and each flow gets its own
//! share of the host: a token bucket (`caller_qps`, `caller_burst`) and a number of instances it
//! may hold at once (`caller_concurrency`). A request over its flow's share waits for it in that
//! flow's own queue, at most `caller_queue_ms`; past that it is answered `429` with
//! `Retry-After`. So a caller who floods waits for, or is refused, its own share, and other
//! callers never wait behind it.
//!
//! The flow is the user the caller's bearer token authenticates as (a `TokenReview`, cached:
//! [`crate::identity`]), so a user's many tokens share one flow. Requests without a token, and
//! tokens the cluster refuses, share the one anonymous flow; a flood of made-up tokens is limited
//! by the rate at which new tokens are reviewed, past which they are anonymous too. Without a
//! cluster to ask (or while it cannot answer), each token is a flow of its own.
//!
//! Every answer carries Cloud Controller's `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
//! `X-RateLimit-Reset` (Unix seconds at which the caller's bucket is full again).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use http::HeaderMap;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::identity::TokenReviews;
use crate::manifest::FairnessSettings;

/// How many new tokens the host reviews per second (burst twice that) to learn whose they
/// are; tokens past it are put in the anonymous flow until a review is free.
const REVIEWS_PER_SECOND: u32 = 50;

/// How many flows are kept before idle ones are dropped.
const FLOWS: usize = 4096;

/// Whose request it is, for fairness.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Flow {
    /// No bearer token, or one the cluster refused.
    Anonymous,
    /// The user a token authenticated as.
    User(String),
    /// A token nobody could say whose it is (no cluster to ask, or it failed to answer), by its
    /// SHA-256.
    Token([u8; 32]),
}

/// One flow's place in the host: its instances and the requests waiting for its share.
struct FlowState {
    seats: Arc<Semaphore>,
    waiting: AtomicU32,
}

type Buckets =
    RateLimiter<Flow, DefaultKeyedStateStore<Flow>, DefaultClock, StateInformationMiddleware>;

/// Per-caller fairness for one application's routes.
pub struct Fairness {
    settings: FairnessSettings,
    buckets: Buckets,
    flows: Mutex<HashMap<Flow, Arc<FlowState>>>,
    users: Arc<TokenReviews>,
    cluster: Option<lethe_kube::Cluster>,
    reviews: DefaultDirectRateLimiter,
}

/// A request's share, held while it runs.
pub struct Admitted {
    _seat: OwnedSemaphorePermit,
    /// The `X-RateLimit-*` values to answer with.
    pub limits: Limits,
}

/// What a caller is told of its share: Cloud Controller's `X-RateLimit-*` headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `X-RateLimit-Limit`: the bucket's size.
    pub limit: u32,
    /// `X-RateLimit-Remaining`: requests left in it now.
    pub remaining: u32,
    /// `X-RateLimit-Reset`: Unix seconds at which it is full again.
    pub reset: u64,
}

/// A request refused for being over its caller's share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    /// Seconds after which the caller's share has room again (`Retry-After`).
    pub retry_after: u32,
    /// The `X-RateLimit-*` values to answer with.
    pub limits: Limits,
}

impl Limits {
    /// Sets the `X-RateLimit-*` headers of an answer.
    pub fn write(&self, headers: &mut HeaderMap) {
        for (name, value) in [
            ("x-ratelimit-limit", u64::from(self.limit)),
            ("x-ratelimit-remaining", u64::from(self.remaining)),
            ("x-ratelimit-reset", self.reset),
        ] {
            headers.insert(name, http::HeaderValue::from(value));
        }
    }
}

impl Fairness {
    /// Fairness by `settings`, learning whose tokens are through `users` from `cluster` (`None`:
    /// each token is its own flow).
    pub fn new(
        settings: FairnessSettings,
        users: Arc<TokenReviews>,
        cluster: Option<lethe_kube::Cluster>,
    ) -> anyhow::Result<Fairness> {
        let burst = NonZeroU32::new(settings.caller_burst)
            .ok_or_else(|| anyhow::anyhow!("caller_burst must be at least 1"))?;
        if !(settings.caller_qps.is_finite() && settings.caller_qps > 0.0) {
            anyhow::bail!(
                "caller_qps must be a positive number, not {}",
                settings.caller_qps
            );
        }
        if settings.caller_concurrency == 0 {
            anyhow::bail!("caller_concurrency must be at least 1");
        }
        let period =
            Duration::from_secs_f64(1.0 / settings.caller_qps).max(Duration::from_nanos(1));
        let quota = Quota::with_period(period)
            .ok_or_else(|| anyhow::anyhow!("caller_qps {} is too large", settings.caller_qps))?
            .allow_burst(burst);
        let (reviews, review_burst) = (
            NonZeroU32::new(REVIEWS_PER_SECOND).unwrap_or(NonZeroU32::MIN),
            NonZeroU32::new(REVIEWS_PER_SECOND * 2).unwrap_or(NonZeroU32::MIN),
        );
        Ok(Fairness {
            settings,
            buckets: RateLimiter::keyed(quota).with_middleware::<StateInformationMiddleware>(),
            flows: Mutex::new(HashMap::new()),
            users,
            cluster,
            reviews: DefaultDirectRateLimiter::direct(
                Quota::per_second(reviews).allow_burst(review_burst),
            ),
        })
    }

    /// The flow of a request carrying the bearer `token` (none: anonymous), whose SHA-256 is
    /// `key` ([`crate::identity::token_key`]; the caller has it already).
    pub async fn classify(&self, token: Option<&str>, key: [u8; 32]) -> Flow {
        let Some(token) = token else {
            return Flow::Anonymous;
        };
        if let Some(known) = self.users.cached(&key) {
            return known.map_or(Flow::Anonymous, |user| Flow::User(user.name));
        }
        let Some(cluster) = &self.cluster else {
            return Flow::Token(key);
        };
        // A review is an API call: new tokens past the review rate wait as anonymous.
        if self.reviews.check().is_err() {
            return Flow::Anonymous;
        }
        match self.users.user(cluster, token).await {
            Ok(Some(user)) => Flow::User(user.name),
            Ok(None) => Flow::Anonymous,
            Err(why) => {
                tracing::debug!("cannot learn whose token a request carries: {why}");
                Flow::Token(key)
            }
        }
    }

    /// Waits for `flow`'s share (at most `caller_queue_ms`), or says when to try again.
    pub async fn admit(&self, flow: &Flow) -> Result<Admitted, Refused> {
        let state = self.state(flow);
        let queue = Duration::from_millis(self.settings.caller_queue_ms);
        let until = Instant::now() + queue;
        let _waiting = Waiting::enter(&state.waiting);
        let limits = loop {
            match self.buckets.check_key(flow) {
                Ok(snapshot) => {
                    break self.limits(snapshot.remaining_burst_capacity());
                }
                Err(not_until) => {
                    let wait = not_until.wait_time_from(DefaultClock::default().now());
                    let queue_full =
                        state.waiting.load(Ordering::Relaxed) > self.settings.caller_concurrency;
                    if queue_full || Instant::now() + wait > until {
                        return Err(Refused {
                            retry_after: whole_seconds(wait),
                            limits: self.limits(0),
                        });
                    }
                    tokio::time::sleep(wait).await;
                }
            }
        };
        let left = until.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, state.seats.clone().acquire_owned()).await {
            Ok(Ok(seat)) => Ok(Admitted {
                _seat: seat,
                limits,
            }),
            // Every seat stayed taken through the wait (a semaphore is never closed here).
            _ => Err(Refused {
                retry_after: 1,
                limits,
            }),
        }
    }

    /// The `X-RateLimit-*` values with `remaining` requests left in the bucket.
    fn limits(&self, remaining: u32) -> Limits {
        let burst = self.settings.caller_burst;
        let refill = f64::from(burst.saturating_sub(remaining)) / self.settings.caller_qps;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        Limits {
            limit: burst,
            remaining,
            reset: (now.as_secs_f64() + refill).ceil() as u64,
        }
    }

    fn state(&self, flow: &Flow) -> Arc<FlowState> {
        let mut flows = self.flows.lock().unwrap_or_else(PoisonError::into_inner);
        if flows.len() >= FLOWS && !flows.contains_key(flow) {
            let seats = self.settings.caller_concurrency as usize;
            flows.retain(|_, s| {
                s.waiting.load(Ordering::Relaxed) > 0 || s.seats.available_permits() < seats
            });
            self.buckets.retain_recent();
        }
        flows
            .entry(flow.clone())
            .or_insert_with(|| {
                Arc::new(FlowState {
                    seats: Arc::new(Semaphore::new(self.settings.caller_concurrency as usize)),
                    waiting: AtomicU32::new(0),
                })
            })
            .clone()
    }
}

/// A request counted among its flow's waiting ones until dropped.
struct Waiting<'a>(&'a AtomicU32);

impl<'a> Waiting<'a> {
    fn enter(count: &'a AtomicU32) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Waiting(count)
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// `wait` in whole seconds, rounded up, at least one.
fn whole_seconds(wait: Duration) -> u32 {
    u32::try_from(wait.as_millis().div_ceil(1000))
        .unwrap_or(u32::MAX)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::token_key;

    fn fairness(qps: f64, burst: u32, concurrency: u32, queue_ms: u64) -> Fairness {
        let settings = FairnessSettings {
            caller_qps: qps,
            caller_burst: burst,
            caller_concurrency: concurrency,
            caller_queue_ms: queue_ms,
        };
        Fairness::new(settings, Arc::default(), None).expect("fairness")
    }

    #[tokio::test]
    async fn without_a_cluster_each_token_is_a_flow_and_no_token_is_anonymous() {
        let f = fairness(10.0, 10, 4, 0);
        let classify =
            |token: Option<&'static str>| f.classify(token, token_key(token.unwrap_or_default()));
        assert_eq!(classify(None).await, Flow::Anonymous);
        let a = classify(Some("a")).await;
        assert_eq!(a, Flow::Token(token_key("a")));
        assert_ne!(a, classify(Some("b")).await);
    }

    #[tokio::test]
    async fn a_caller_over_its_burst_is_refused_while_another_is_admitted() {
        let f = fairness(1.0, 3, 100, 0);
        let flooder = Flow::User("flooder".into());
        let polite = Flow::User("polite".into());
        let mut remaining = Vec::new();
        for _ in 0..3 {
            let admitted = f.admit(&flooder).await.expect("within the burst");
            remaining.push(admitted.limits.remaining);
        }
        assert_eq!(remaining, [2, 1, 0]);
        let refused = f.admit(&flooder).await.err().expect("over the burst");
        assert_eq!(refused.retry_after, 1, "one request a second comes back");
        assert_eq!((refused.limits.limit, refused.limits.remaining), (3, 0));
        let admitted = f
            .admit(&polite)
            .await
            .expect("another caller is not held up");
        assert_eq!(admitted.limits.remaining, 2);
    }

    #[tokio::test]
    async fn a_request_over_the_rate_waits_for_its_share_within_the_queue_time() {
        let f = fairness(20.0, 1, 100, 1000);
        let flow = Flow::Anonymous;
        let first = f.admit(&flow).await.expect("the burst");
        drop(first);
        let started = Instant::now();
        f.admit(&flow)
            .await
            .expect("waits one period, well within the queue time");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(40), "{waited:?}");
    }

    #[tokio::test]
    async fn a_caller_holds_at_most_its_concurrency_and_the_next_is_refused() {
        let f = fairness(1000.0, 1000, 2, 50);
        let flow = Flow::User("busy".into());
        let one = f.admit(&flow).await.expect("seat one");
        let two = f.admit(&flow).await.expect("seat two");
        let refused = f.admit(&flow).await.err().expect("no third seat");
        assert_eq!(refused.retry_after, 1);
        f.admit(&Flow::User("other".into()))
            .await
            .expect("another caller has seats of its own");
        drop(one);
        f.admit(&flow).await.expect("a seat freed");
        drop(two);
    }

    #[test]
    fn the_limits_are_written_as_cloud_controller_names_them() {
        let mut headers = HeaderMap::new();
        Limits {
            limit: 400,
            remaining: 399,
            reset: 1_800_000_000,
        }
        .write(&mut headers);
        assert_eq!(headers["x-ratelimit-limit"], "400");
        assert_eq!(headers["x-ratelimit-remaining"], "399");
        assert_eq!(headers["x-ratelimit-reset"], "1800000000");
    }

    #[test]
    fn settings_that_cannot_work_are_refused() {
        let good = FairnessSettings {
            caller_qps: 1.0,
            caller_burst: 1,
            caller_concurrency: 1,
            caller_queue_ms: 0,
        };
        for bad in [
            FairnessSettings {
                caller_qps: 0.0,
                ..good
            },
            FairnessSettings {
                caller_qps: f64::NAN,
                ..good
            },
            FairnessSettings {
                caller_burst: 0,
                ..good
            },
            FairnessSettings {
                caller_concurrency: 0,
                ..good
            },
        ] {
            assert!(Fairness::new(bad, Arc::default(), None).is_err(), "{bad:?}");
        }
    }
}
