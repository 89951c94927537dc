//! Configuration: the retry policy and the cluster's client settings.

use std::time::Duration;

use rand::Rng;

/// Bounded exponential backoff with full jitter, plus a per-attempt timeout.
///
/// After failed attempt `n` (1-based) the client sleeps a time drawn uniformly from
/// `[0, min(max_delay, base_delay * 2^(n-1))]`, or, when the answer (429 or 5xx) carried
/// `Retry-After`, the server's delay capped at `max_delay`. Failures (5xx, transport errors,
/// timeouts) end the call after `max_attempts` attempts in all (`0` counts as `1`). A 429 is
/// counted apart, up to `max_throttled` of them: the server applied nothing and asked the client
/// to come back, so being throttled does not use up the budget for failures. Each attempt
/// (request and response body) is bounded by `per_call_timeout`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Number of attempts, including the first, that may end in a failure other than 429.
    pub max_attempts: u32,
    /// Number of 429 answers waited out before the call gives up.
    pub max_throttled: u32,
    /// The backoff ceiling before the first retry.
    pub base_delay: Duration,
    /// The largest backoff, and the cap on a server's `Retry-After`.
    pub max_delay: Duration,
    /// Time limit of one attempt.
    pub per_call_timeout: Duration,
}

impl Default for RetryPolicy {
    /// Ten attempts and ten 429s (client-go retries up to ten times too), 100 ms base, 5 s cap,
    /// 30 s per attempt. A storm of 20 % 5xx and 20 % 429 then fails about one call in a million.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 10,
            max_throttled: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(5),
            per_call_timeout: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// The number of attempts to make, at least 1.
    pub fn attempts(&self) -> u32 {
        self.max_attempts.max(1)
    }

    /// The backoff ceiling after failed attempt `attempt` (1-based), before jitter.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(31);
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// The delay after failed attempt `attempt`: the server's `retry_after` capped at
    /// `max_delay` when given, else full jitter over [`ceiling`](Self::ceiling).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(server) = retry_after {
            return server.min(self.max_delay);
        }
        let ceiling = self.ceiling(attempt);
        if ceiling.is_zero() {
            return ceiling;
        }
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }
}

/// Settings of a [`Cluster`](crate::Cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterOptions {
    /// Retry policy of every call, including discovery.
    pub retry: RetryPolicy,
    /// How long a caller's client (keyed by a hash of the token) is reused.
    pub caller_client_ttl: Duration,
    /// How many caller clients are cached at most.
    pub caller_client_cache_size: usize,
}

impl Default for ClusterOptions {
    /// Default retry policy; caller clients cached for 60 s, at most 256.
    fn default() -> Self {
        ClusterOptions {
            retry: RetryPolicy::default(),
            caller_client_ttl: Duration::from_secs(60),
            caller_client_cache_size: 256,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_bounded_and_retry_after_capped() {
        let p = RetryPolicy {
            max_attempts: 4,
            max_throttled: 4,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(50),
            per_call_timeout: Duration::from_secs(1),
        };
        assert_eq!(p.ceiling(1), Duration::from_millis(10));
        assert_eq!(p.ceiling(3), Duration::from_millis(40));
        assert_eq!(p.ceiling(9), Duration::from_millis(50));
        for a in 1..10 {
            assert!(p.delay(a, None) <= p.ceiling(a));
        }
        assert_eq!(
            p.delay(1, Some(Duration::from_millis(20))),
            Duration::from_millis(20)
        );
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3600))),
            Duration::from_millis(50)
        );
    }
}
