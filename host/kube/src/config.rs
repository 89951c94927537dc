//! Configuration: the retry policy and the cluster's client settings.

use std::time::Duration;

/// When and how often a failed call is retried: lethe's one retry policy (`lethe_retry`).
/// Its default allows ten failures (5xx, transport errors, timeouts) and ten 429s per call, with
/// full-jitter backoff from 100 ms up to 5 s, and a server's `Retry-After` honoured within 5 s.
pub use lethe_retry::Policy as RetryPolicy;

/// Settings of a [`Cluster`](crate::Cluster).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterOptions {
    /// Retry policy of every call, including discovery.
    pub retry: RetryPolicy,
    /// Time limit of one attempt (request and response body).
    pub attempt_timeout: Duration,
    /// How long a caller's client (keyed by a hash of the token) is reused.
    pub caller_client_ttl: Duration,
    /// How many caller clients are cached at most.
    pub caller_client_cache_size: usize,
}

impl Default for ClusterOptions {
    /// Default retry policy, 30 s per attempt; caller clients cached for 60 s, at most 256.
    fn default() -> Self {
        ClusterOptions {
            retry: RetryPolicy::default(),
            attempt_timeout: Duration::from_secs(30),
            caller_client_ttl: Duration::from_secs(60),
            caller_client_cache_size: 256,
        }
    }
}
