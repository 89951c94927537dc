//! Configuration: the retry policy and per-backend connection settings.

use std::time::Duration;

/// When a failure that applied nothing is retried: lethe's one retry policy (`lethe_retry`).
/// SQL has no throttling answer, so only `max_attempts` bounds it.
pub use lethe_retry::Policy as RetryPolicy;

/// The default SQL retry policy: five attempts, 50 ms base, 2 s cap. It rides out a database
/// restart or a short lock storm without holding a request for long.
pub const DEFAULT_RETRY: RetryPolicy = RetryPolicy {
    max_attempts: 5,
    max_throttled: 5,
    base_delay: Duration::from_millis(50),
    max_delay: Duration::from_secs(2),
};

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
#[derive(Debug, Clone, PartialEq, Eq)]
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

impl Default for SqlConfig {
    /// [`DEFAULT_RETRY`], a 30 s acquire timeout, and each backend's defaults.
    fn default() -> Self {
        SqlConfig {
            retry: DEFAULT_RETRY,
            acquire_timeout: None,
            sqlite: SqliteConfig::default(),
            postgres: PostgresConfig::default(),
        }
    }
}

impl SqlConfig {
    /// The effective pool acquire timeout.
    pub fn acquire_timeout(&self) -> Duration {
        self.acquire_timeout.unwrap_or(Duration::from_secs(30))
    }
}
