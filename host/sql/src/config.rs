//! Configuration: the retry policy and per-backend connection settings.

use std::time::Duration;

use rand::Rng;

/// Bounded exponential backoff with full jitter.
///
/// Attempt `n` (1-based) that fails transiently is followed by a sleep drawn uniformly from
/// `[0, min(max_delay, base_delay * 2^(n-1))]`, until `max_attempts` attempts were made.
/// `max_attempts == 1` disables retries; `0` is treated as `1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total number of attempts, including the first.
    pub max_attempts: u32,
    /// The backoff ceiling before the first retry.
    pub base_delay: Duration,
    /// The largest backoff ceiling, whatever the attempt number.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    /// Five attempts, 50 ms base, 2 s cap: rides out a database restart or a short lock storm
    /// without holding a request for long.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 5,
            base_delay: Duration::from_millis(50),
            max_delay: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The number of attempts to make, at least 1.
    pub fn attempts(&self) -> u32 {
        self.max_attempts.max(1)
    }

    /// The backoff ceiling after failed attempt `attempt` (1-based), before jitter.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let shift = attempt.saturating_sub(1).min(31);
        let factor = 1u32 << shift;
        self.base_delay
            .checked_mul(factor)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// The delay to sleep after failed attempt `attempt` (1-based): full jitter over
    /// [`ceiling`](Self::ceiling).
    pub fn backoff(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        if ceiling.is_zero() {
            return ceiling;
        }
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(rand::rng().random_range(0..=nanos))
    }
}

/// Settings of the SQLite backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqliteConfig {
    /// How long SQLite itself waits for a lock before reporting `SQLITE_BUSY`.
    pub busy_timeout: Duration,
    /// Maximum number of open connections to a database file (at least 1). An in-memory
    /// database always uses exactly one connection, since each connection would otherwise see
    /// its own empty database.
    pub max_connections: usize,
}

impl Default for SqliteConfig {
    /// 5 s busy timeout, 4 connections.
    fn default() -> Self {
        SqliteConfig {
            busy_timeout: Duration::from_secs(5),
            max_connections: 4,
        }
    }
}

/// Settings of the PostgreSQL backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresConfig {
    /// Maximum number of pooled connections (at least 1).
    pub max_connections: usize,
    /// Timeout of one TCP connect + startup; applied when the URL does not set `connect_timeout`.
    pub connect_timeout: Duration,
}

impl Default for PostgresConfig {
    /// 8 connections, 5 s connect timeout.
    fn default() -> Self {
        PostgresConfig {
            max_connections: 8,
            connect_timeout: Duration::from_secs(5),
        }
    }
}

/// Everything [`Database::open_with`](crate::Database::open_with) can tune.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SqlConfig {
    /// Retry policy for work that cannot have been applied.
    pub retry: RetryPolicy,
    /// How long to wait for a free pooled connection before failing with `Unavailable`.
    /// `None` means 30 s.
    pub acquire_timeout: Option<Duration>,
    /// SQLite settings.
    pub sqlite: SqliteConfig,
    /// PostgreSQL settings.
    pub postgres: PostgresConfig,
}

impl SqlConfig {
    /// The effective pool acquire timeout.
    pub fn acquire_timeout(&self) -> Duration {
        self.acquire_timeout.unwrap_or(Duration::from_secs(30))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_grows_and_caps() {
        let p = RetryPolicy {
            max_attempts: 10,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_millis(100),
        };
        assert_eq!(p.ceiling(1), Duration::from_millis(10));
        assert_eq!(p.ceiling(2), Duration::from_millis(20));
        assert_eq!(p.ceiling(4), Duration::from_millis(80));
        assert_eq!(p.ceiling(5), Duration::from_millis(100));
        assert_eq!(p.ceiling(200), Duration::from_millis(100));
        for attempt in 1..20 {
            assert!(p.backoff(attempt) <= p.ceiling(attempt));
        }
    }

    #[test]
    fn zero_attempts_means_one() {
        let p = RetryPolicy {
            max_attempts: 0,
            ..RetryPolicy::default()
        };
        assert_eq!(p.attempts(), 1);
    }
}
