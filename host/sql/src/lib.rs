//! lethe's SQL capability: one portable dialect over SQLite and PostgreSQL, with safe retries.
//!
//! This crate backs the WIT interface `lethe:platform/sql` and knows nothing about WebAssembly:
//! the host maps each WIT call onto a [`Database`] or [`Transaction`] method and each
//! [`SqlError`] variant onto the WIT `error` case of the same name.
//!
//! * **Dialect.** Statements use `$1`…`$n` placeholders on both backends (rewritten to `?N` for
//!   SQLite outside literals, quoted identifiers and comments). On PostgreSQL each [`Value`] is
//!   bound to the type the server inferred for its placeholder; see [`Value`] for what comes back.
//! * **Retries.** Only work that cannot have been applied is replayed, with the
//!   [`RetryPolicy`]: failing to get a connection, a statement that was never sent, a read whose
//!   connection was lost, an autocommit statement or a whole [`Database::batch`] that the
//!   database aborted (serialization failure, deadlock, `SQLITE_BUSY`). A write whose connection
//!   was lost after it was sent, or a lost `COMMIT`, gives [`SqlError::OutcomeUnknown`] and is
//!   never retried. [`Transaction`] calls are never replayed.
//! * **Migrations.** [`Database::migrate`] applies pending [`Migration`]s in order, each in its
//!   own transaction under a database-wide lock, recorded in `lethe_schema_migrations`.

#![warn(missing_docs)]

mod config;
/// The shared portable dialect, with its rule's refusal as this crate's error.
mod dialect {
    pub(crate) use lethe_sql_model::{is_read_only, to_sqlite};

    pub(crate) fn reject_transaction_control(sql: &str) -> Result<(), crate::SqlError> {
        lethe_sql_model::reject_transaction_control(sql)
            .map_err(|m| crate::SqlError::InvalidStatement(m.into()))
    }
}
mod error;
mod label;
mod migration;
mod pgtls;
mod pgtypes;
mod postgres;
mod retry;
mod sqlite;
pub mod testing;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub use config::{DEFAULT_RETRY, PostgresConfig, RetryPolicy, SqlConfig, SqliteConfig};
pub use error::{Result, SqlError};
pub use label::{MAX_LABEL_LEN, check_label, is_postgres, sqlite_label_location};
pub use lethe_sql_model::{RowSet, Statement, Value};
pub use migration::Migration;

use error::Failure;
use retry::Counters;

/// DDL of the migrations table; portable, idempotent.
pub(crate) const MIGRATIONS_TABLE_DDL: &str = "CREATE TABLE IF NOT EXISTS lethe_schema_migrations (\
     version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)";

/// Which database a [`Database`] talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// SQLite (bundled), a file or in memory.
    Sqlite,
    /// PostgreSQL over TCP.
    Postgres,
}

impl Backend {
    /// `"sqlite"` or `"postgres"`.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }
}

/// A snapshot of a [`Database`]'s counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SqlStats {
    /// Attempts replayed by the retry policy since the database was opened (all clones).
    pub retries: u64,
}

enum Inner {
    Sqlite(sqlite::SqliteBackend),
    Postgres(postgres::PgBackend),
}

struct Shared {
    inner: Inner,
    retry: RetryPolicy,
    counters: Counters,
    location: String,
}

/// A handle on one database: cheap to clone, `Send + Sync`, safe to use from many tasks.
///
/// All clones share one connection pool and one set of counters.
#[derive(Clone)]
pub struct Database {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("backend", &self.backend().name())
            .field("location", &self.shared.location)
            .finish()
    }
}

impl Database {
    /// Opens a database with the default [`SqlConfig`]; see [`open_with`](Self::open_with).
    pub async fn open(url_or_path: &str) -> Result<Database> {
        Database::open_with(url_or_path, SqlConfig::default()).await
    }

    /// Opens a database.
    ///
    /// * `postgres://…` or `postgresql://…`: PostgreSQL (libpq URL syntax). TLS follows libpq's
    ///   `sslmode` (`disable`, `prefer` — the default —, `require`, `verify-ca`, `verify-full`)
    ///   and `sslrootcert` (else the system roots). The pool connects lazily, so an unreachable
    ///   server is reported, after retries, by the first call.
    /// * `sqlite::memory:` or `:memory:`: a private in-memory SQLite database (one connection).
    /// * `sqlite:<path>`, `sqlite://<path>` or a plain path: a SQLite file, created if missing,
    ///   in WAL mode with foreign keys enforced. The file is opened now, so a bad path fails here
    ///   with [`SqlError::Unavailable`].
    ///
    /// Any other `scheme://` fails with [`SqlError::Unavailable`].
    pub async fn open_with(url_or_path: &str, config: SqlConfig) -> Result<Database> {
        let location = redact_url(url_or_path);
        let inner = if is_postgres(url_or_path) {
            Inner::Postgres(postgres::PgBackend::open(url_or_path, &config)?)
        } else {
            let target = sqlite_target(url_or_path)?;
            Inner::Sqlite(sqlite::SqliteBackend::open(target, &config).await?)
        };
        let db = Database {
            shared: Arc::new(Shared {
                inner,
                retry: config.retry,
                counters: Counters::default(),
                location,
            }),
        };
        tracing::debug!(backend = db.backend_name(), location = %db.shared.location, "opened database");
        Ok(db)
    }

    /// A database on an open PostgreSQL pool.
    pub(crate) fn from_postgres(
        backend: postgres::PgBackend,
        config: SqlConfig,
        location: String,
    ) -> Database {
        Database {
            shared: Arc::new(Shared {
                inner: Inner::Postgres(backend),
                retry: config.retry,
                counters: Counters::default(),
                location,
            }),
        }
    }

    /// Which backend this database uses.
    pub fn backend(&self) -> Backend {
        match self.shared.inner {
            Inner::Sqlite(_) => Backend::Sqlite,
            Inner::Postgres(_) => Backend::Postgres,
        }
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        self.backend().name()
    }

    /// The URL or path this database was opened with, with any password replaced by `***`;
    /// safe to log.
    pub fn location(&self) -> &str {
        &self.shared.location
    }

    /// Counters since open.
    pub fn stats(&self) -> SqlStats {
        SqlStats {
            retries: self.shared.counters.retries.load(Ordering::Relaxed),
        }
    }

    /// The retry policy in force.
    pub fn retry_policy(&self) -> RetryPolicy {
        self.shared.retry
    }

    async fn retrying<T, F, Fut>(&self, what: &str, op: F) -> Result<T>
    where
        F: FnMut(u32) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, Failure>>,
    {
        retry::run(&self.shared.retry, &self.shared.counters, what, op).await
    }

    /// Runs one statement and returns its rows (for a statement without a result, no columns
    /// and no rows).
    ///
    /// Meant for reads: a failure to connect is retried, and so is a lost connection when the
    /// statement is recognisably read-only (`SELECT`/`VALUES`/`TABLE`/`SHOW`/`WITH` without
    /// data-modifying keywords). A data-modifying statement run through `query` (e.g.
    /// `INSERT … RETURNING`) gets the same guarantees as [`execute`](Self::execute).
    pub async fn query(&self, sql: &str, params: &[Value]) -> Result<RowSet> {
        self.retrying("query", |_| async move {
            match &self.shared.inner {
                Inner::Sqlite(b) => b.query(sql, params).await,
                Inner::Postgres(b) => b.query(sql, params).await,
            }
        })
        .await
    }

    /// Runs one write in its own implicit transaction and returns the number of rows inserted,
    /// updated or deleted (0 for DDL).
    ///
    /// Retried only when it cannot have been applied; a connection lost after it was sent gives
    /// [`SqlError::OutcomeUnknown`]. Transaction control (`BEGIN`, `COMMIT`, …) is rejected with
    /// [`SqlError::InvalidStatement`]; use [`batch`](Self::batch) or [`begin`](Self::begin).
    pub async fn execute(&self, sql: &str, params: &[Value]) -> Result<u64> {
        self.retrying("execute", |_| async move {
            match &self.shared.inner {
                Inner::Sqlite(b) => b.execute(sql, params).await,
                Inner::Postgres(b) => b.execute(sql, params).await,
            }
        })
        .await
    }

    /// Runs the statements in order in one transaction (serializable on PostgreSQL, `BEGIN
    /// IMMEDIATE` on SQLite), all or nothing, and returns the rows affected by each.
    ///
    /// The whole batch is replayed after a connection failure before `COMMIT` was sent, a
    /// serialization failure, a deadlock or `SQLITE_BUSY`; once replays are exhausted that gives
    /// [`SqlError::Unavailable`] (nothing was applied). A connection lost during `COMMIT`
    /// gives [`SqlError::OutcomeUnknown`]. An empty batch returns an empty list without touching
    /// the database.
    pub async fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>> {
        if statements.is_empty() {
            return Ok(Vec::new());
        }
        self.retrying("batch", |_| async move {
            match &self.shared.inner {
                Inner::Sqlite(b) => b.batch(statements).await,
                Inner::Postgres(b) => b.batch(statements).await,
            }
        })
        .await
    }

    /// Opens an interactive transaction on its own connection (serializable on PostgreSQL,
    /// `BEGIN IMMEDIATE` on SQLite, which takes the write lock now).
    ///
    /// Getting the connection and `BEGIN` are retried; nothing after that is.
    pub async fn begin(&self) -> Result<Transaction> {
        let inner = self
            .retrying("begin", |_| async move {
                match &self.shared.inner {
                    Inner::Sqlite(b) => b.begin().await.map(TxInner::Sqlite),
                    Inner::Postgres(b) => b.begin().await.map(TxInner::Postgres),
                }
            })
            .await?;
        Ok(Transaction { inner })
    }

    /// Applies the migrations not yet recorded in `lethe_schema_migrations`, in ascending
    /// version order, each in its own transaction together with its record, and returns the
    /// versions applied by this call.
    ///
    /// Idempotent, and safe when several hosts start at once: each migration runs under a
    /// database-wide lock (`pg_advisory_xact_lock` on PostgreSQL, `BEGIN IMMEDIATE` on SQLite)
    /// and re-checks the table under it, so every migration is applied exactly once. Because of
    /// that re-check, transient failures (including a lost `COMMIT`) are retried.
    ///
    /// Fails with [`SqlError::InvalidStatement`] when two migrations share a version or when an
    /// applied version was recorded under a different name; a failing migration reports its
    /// version and name and leaves it (and everything after it) unapplied.
    pub async fn migrate(&self, migrations: &[Migration]) -> Result<Vec<i64>> {
        let mut ordered: Vec<&Migration> = migrations.iter().collect();
        ordered.sort_by_key(|m| m.version);
        if let Some(w) = ordered.windows(2).find(|w| w[0].version == w[1].version) {
            return Err(SqlError::InvalidStatement(format!(
                "two migrations have version {}",
                w[0].version
            )));
        }
        let mut applied = Vec::new();
        for migration in ordered {
            let now = self
                .retrying("migrate", |_| async move {
                    match &self.shared.inner {
                        Inner::Sqlite(b) => b.migrate_one(migration).await,
                        Inner::Postgres(b) => b.migrate_one(migration).await,
                    }
                })
                .await?;
            if now {
                tracing::info!(version = migration.version, name = %migration.name, "applied migration");
                applied.push(migration.version);
            }
        }
        Ok(applied)
    }
}

enum TxInner {
    Sqlite(sqlite::SqliteTx),
    Postgres(postgres::PgTx),
}

/// An interactive transaction that owns its connection. `Send`, not `Clone`.
///
/// Calls are never replayed. After any error, or after [`commit`](Self::commit) or
/// [`rollback`](Self::rollback), the transaction is finished: it has been rolled back (unless
/// committed) and further calls fail with [`SqlError::Other`]. Dropping an unfinished
/// transaction rolls it back.
pub struct Transaction {
    inner: TxInner,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl Transaction {
    /// Runs a statement inside the transaction and returns its rows. A serialization failure or
    /// deadlock gives [`SqlError::Conflict`]; a lost connection gives [`SqlError::Unavailable`]
    /// (the server rolled the transaction back).
    pub async fn query(&mut self, sql: &str, params: &[Value]) -> Result<RowSet> {
        match &mut self.inner {
            TxInner::Sqlite(t) => t.query(sql, params).await,
            TxInner::Postgres(t) => t.query(sql, params).await,
        }
    }

    /// Runs a write inside the transaction and returns the rows affected. Errors as for
    /// [`query`](Self::query).
    pub async fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        match &mut self.inner {
            TxInner::Sqlite(t) => t.execute(sql, params).await,
            TxInner::Postgres(t) => t.execute(sql, params).await,
        }
    }

    /// Commits. A serialization failure at commit gives [`SqlError::Conflict`] (nothing
    /// applied); a connection lost during the commit gives [`SqlError::OutcomeUnknown`].
    pub async fn commit(&mut self) -> Result<()> {
        match &mut self.inner {
            TxInner::Sqlite(t) => t.commit().await,
            TxInner::Postgres(t) => t.commit().await,
        }
    }

    /// Rolls back explicitly.
    pub async fn rollback(&mut self) -> Result<()> {
        match &mut self.inner {
            TxInner::Sqlite(t) => t.rollback().await,
            TxInner::Postgres(t) => t.rollback().await,
        }
    }

    /// Whether the transaction is finished (committed, rolled back, or failed).
    pub fn is_finished(&self) -> bool {
        match &self.inner {
            TxInner::Sqlite(t) => t.is_finished(),
            TxInner::Postgres(t) => t.is_finished(),
        }
    }
}

/// The file a SQLite location names (`sqlite:<path>`, `sqlite://<path>` or a plain path);
/// `None` for an in-memory database. Fails for a URL of another scheme.
pub fn sqlite_file(url: &str) -> Result<Option<PathBuf>> {
    Ok(match sqlite_target(url)? {
        sqlite::Target::Memory => None,
        sqlite::Target::File(path) => Some(path),
    })
}

/// Parses a SQLite location.
pub(crate) fn sqlite_target(url_or_path: &str) -> Result<sqlite::Target> {
    if matches!(
        url_or_path,
        "sqlite::memory:" | ":memory:" | "sqlite://:memory:"
    ) {
        return Ok(sqlite::Target::Memory);
    }
    let path = if let Some(rest) = url_or_path.strip_prefix("sqlite://") {
        rest
    } else if let Some(rest) = url_or_path.strip_prefix("sqlite:") {
        rest
    } else if url_or_path.contains("://") {
        return Err(SqlError::Unavailable(format!(
            "unsupported database URL {}: use postgres://…, sqlite:<path> or a file path",
            redact_url(url_or_path)
        )));
    } else {
        url_or_path
    };
    if path.is_empty() {
        return Err(SqlError::Unavailable("empty SQLite database path".into()));
    }
    Ok(sqlite::Target::File(PathBuf::from(path)))
}

/// Replaces the password of a URL's userinfo, and any `password=` query parameter, with `***`,
/// so that the result can be logged.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        // The userinfo ends at the last `@` before any query or fragment, so a password with an
        // (improperly unescaped) `/` is still found.
        let authority_end = out[rest_start..]
            .find(['?', '#'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                let start = rest_start + colon + 1;
                let end = rest_start + at;
                out.replace_range(start..end, "***");
            }
        }
    }
    if let Some(q) = out.find('?') {
        let (head, query) = out.split_at(q + 1);
        let redacted: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => pair.to_owned(),
            })
            .collect();
        out = format!("{head}{}", redacted.join("&"));
    }
    out
}

pub(crate) fn finished_error() -> SqlError {
    SqlError::Other("the transaction is already finished".into())
}

pub(crate) fn param_count_error(expected: usize, given: usize) -> SqlError {
    SqlError::InvalidValue(format!(
        "the statement has {expected} placeholder(s) but {given} parameter(s) were given"
    ))
}

pub(crate) fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

/// An applied migration must keep its name: a different one means two codebases disagree.
pub(crate) fn check_recorded_name(migration: &Migration, recorded: &str) -> Result<()> {
    if recorded == migration.name {
        Ok(())
    } else {
        Err(SqlError::InvalidStatement(format!(
            "migration {} was applied as {recorded:?} but is now named {:?}",
            migration.version, migration.name
        )))
    }
}

/// Prefixes a migration's own failure with its identity.
pub(crate) fn in_migration(migration: &Migration, failure: Failure) -> Failure {
    let prefix = format!("migration {} ({})", migration.version, migration.name);
    let error = match failure.error {
        SqlError::ConstraintViolation(m) => SqlError::ConstraintViolation(format!("{prefix}: {m}")),
        SqlError::Conflict(m) => SqlError::Conflict(format!("{prefix}: {m}")),
        SqlError::InvalidStatement(m) => SqlError::InvalidStatement(format!("{prefix}: {m}")),
        SqlError::InvalidValue(m) => SqlError::InvalidValue(format!("{prefix}: {m}")),
        SqlError::Unavailable(m) => SqlError::Unavailable(format!("{prefix}: {m}")),
        SqlError::OutcomeUnknown(m) => SqlError::OutcomeUnknown(format!("{prefix}: {m}")),
        SqlError::Denied(m) => SqlError::Denied(format!("{prefix}: {m}")),
        SqlError::Other(m) => SqlError::Other(format!("{prefix}: {m}")),
    };
    Failure {
        error,
        retry: failure.retry,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(
            redact_url("postgres://lethe:secret@127.0.0.1:5432/db"),
            "postgres://lethe:***@127.0.0.1:5432/db"
        );
        assert_eq!(
            redact_url("postgres://u@h/db?password=secret&sslmode=disable"),
            "postgres://u@h/db?password=***&sslmode=disable"
        );
        assert_eq!(redact_url("postgres://h/db"), "postgres://h/db");
        assert_eq!(redact_url("/tmp/x.db"), "/tmp/x.db");
        assert_eq!(redact_url("postgres://a:b:c@h"), "postgres://a:***@h");
        assert_eq!(redact_url("postgres://a:p/w@h/db"), "postgres://a:***@h/db");
        assert_eq!(redact_url("postgres://a@h/db"), "postgres://a@h/db");
    }

    #[test]
    fn parses_sqlite_locations() {
        assert!(matches!(
            sqlite_target("sqlite::memory:"),
            Ok(sqlite::Target::Memory)
        ));
        assert!(
            matches!(sqlite_target("sqlite:/tmp/a.db"), Ok(sqlite::Target::File(p)) if p.as_os_str() == "/tmp/a.db")
        );
        assert!(
            matches!(sqlite_target("sqlite:///tmp/a.db"), Ok(sqlite::Target::File(p)) if p.as_os_str() == "/tmp/a.db")
        );
        assert!(matches!(
            sqlite_target("data/a.db"),
            Ok(sqlite::Target::File(_))
        ));
        assert!(matches!(
            sqlite_target("mysql://x"),
            Err(SqlError::Unavailable(_))
        ));
        assert!(matches!(
            sqlite_target("sqlite:"),
            Err(SqlError::Unavailable(_))
        ));
    }
}
