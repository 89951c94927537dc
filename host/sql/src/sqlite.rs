//! The SQLite backend: a small pool of connections in WAL mode, used from blocking threads.
//!
//! Every call takes a connection out of the pool and runs on `spawn_blocking`, so the async
//! runtime never waits on disk or on a lock. WAL lets readers run beside the one writer; writers
//! queue on SQLite's own lock (`busy_timeout`), and a `SQLITE_BUSY` that outlasts it is a
//! transient failure (nothing was applied) that the retry loop may replay.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::{Connection, ErrorCode, OpenFlags};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::SqlConfig;
use crate::dialect;
use crate::error::{Failure, Result, SqlError};
use crate::{Migration, RowSet, Statement, Value};

/// Where the database lives.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// A private in-memory database, alive as long as the backend.
    Memory,
    /// A database file (created when missing).
    File(PathBuf),
}

/// The pool shared by a backend and the connections it lent out.
#[derive(Debug)]
struct Pool {
    target: Target,
    busy_timeout: Duration,
    acquire_timeout: Duration,
    idle: Mutex<Vec<Connection>>,
    permits: Arc<Semaphore>,
}

/// A connection lent out by the pool; returns itself (rolled back if needed) on drop.
pub(crate) struct PooledConn {
    conn: Option<Connection>,
    pool: Arc<Pool>,
    _permit: OwnedSemaphorePermit,
}

impl PooledConn {
    fn conn(&mut self) -> std::result::Result<&mut Connection, Failure> {
        self.conn
            .as_mut()
            .ok_or_else(|| Failure::fatal(SqlError::Other("connection already released".into())))
    }
}

impl Drop for PooledConn {
    fn drop(&mut self) {
        let Some(conn) = self.conn.take() else {
            return;
        };
        // A connection still inside a transaction is rolled back before reuse; if that fails it
        // is closed, which rolls back too. (An in-memory database keeps its only connection.)
        let clean = conn.is_autocommit() || conn.execute_batch("ROLLBACK").is_ok();
        if !clean && matches!(self.pool.target, Target::File(_)) {
            return;
        }
        if let Ok(mut idle) = self.pool.idle.lock() {
            idle.push(conn);
        }
    }
}

/// The SQLite backend. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct SqliteBackend {
    pool: Arc<Pool>,
}

impl SqliteBackend {
    /// Opens (creating if needed) the database and checks that one connection works.
    pub async fn open(target: Target, config: &SqlConfig) -> Result<Self> {
        let max = match target {
            Target::Memory => 1,
            Target::File(_) => config.sqlite.max_connections.max(1),
        };
        let backend = SqliteBackend {
            pool: Arc::new(Pool {
                target,
                busy_timeout: config.sqlite.busy_timeout,
                acquire_timeout: config.acquire_timeout(),
                idle: Mutex::new(Vec::new()),
                permits: Arc::new(Semaphore::new(max)),
            }),
        };
        // Open the first connection now so that a bad path fails at start, not on first use.
        let conn = backend.acquire().await.map_err(|f| f.error)?;
        drop(conn);
        Ok(backend)
    }

    async fn acquire(&self) -> std::result::Result<PooledConn, Failure> {
        let permit = tokio::time::timeout(
            self.pool.acquire_timeout,
            self.pool.permits.clone().acquire_owned(),
        )
        .await
        .map_err(|_| {
            Failure::transient(SqlError::Unavailable(
                "timed out waiting for a free SQLite connection".into(),
            ))
        })?
        .map_err(|_| Failure::fatal(SqlError::Unavailable("SQLite pool is closed".into())))?;
        let idle = self.pool.idle.lock().ok().and_then(|mut idle| idle.pop());
        let conn = match idle {
            Some(conn) => conn,
            None => {
                let pool = self.pool.clone();
                tokio::task::spawn_blocking(move || {
                    open_connection(&pool.target, pool.busy_timeout)
                })
                .await
                .map_err(join_error)??
            }
        };
        Ok(PooledConn {
            conn: Some(conn),
            pool: self.pool.clone(),
            _permit: permit,
        })
    }

    /// Runs `f` on a pooled connection on a blocking thread.
    async fn with_conn<T, F>(&self, f: F) -> std::result::Result<T, Failure>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> std::result::Result<T, Failure> + Send + 'static,
    {
        let mut pooled = self.acquire().await?;
        tokio::task::spawn_blocking(move || {
            let conn = pooled.conn()?;
            f(conn)
        })
        .await
        .map_err(join_error)?
    }

    /// One attempt of [`Database::query`](crate::Database::query).
    pub async fn query(&self, sql: &str, params: &[Value]) -> std::result::Result<RowSet, Failure> {
        let sql = dialect::to_sqlite(sql).into_owned();
        let params = params.to_vec();
        self.with_conn(move |conn| run_query(conn, &sql, &params))
            .await
    }

    /// One attempt of [`Database::execute`](crate::Database::execute).
    pub async fn execute(&self, sql: &str, params: &[Value]) -> std::result::Result<u64, Failure> {
        let sql = dialect::to_sqlite(sql).into_owned();
        let params = params.to_vec();
        self.with_conn(move |conn| run_execute(conn, &sql, &params))
            .await
    }

    /// One attempt of [`Database::batch`](crate::Database::batch): all statements in one
    /// `BEGIN IMMEDIATE` transaction. Any failure rolls back, so a `SQLITE_BUSY` is replayable.
    pub async fn batch(&self, statements: &[Statement]) -> std::result::Result<Vec<u64>, Failure> {
        let statements: Vec<(String, Vec<Value>)> = statements
            .iter()
            .map(|s| (dialect::to_sqlite(&s.sql).into_owned(), s.params.clone()))
            .collect();
        self.with_conn(move |conn| {
            conn.execute_batch("BEGIN IMMEDIATE")
                .map_err(|e| map_error(e, Phase::Run))?;
            let result = (|| {
                let mut counts = Vec::with_capacity(statements.len());
                for (sql, params) in &statements {
                    counts.push(run_execute(conn, sql, params)?);
                }
                conn.execute_batch("COMMIT")
                    .map_err(|e| map_error(e, Phase::Run))?;
                Ok(counts)
            })();
            if result.is_err() && !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            result
        })
        .await
    }

    /// One attempt at applying `migration` under the write lock. Returns whether it was applied
    /// now (`false`: it had been applied before). Replaying is always safe: the version table is
    /// re-read under the lock.
    pub async fn migrate_one(&self, migration: &Migration) -> std::result::Result<bool, Failure> {
        let migration = migration.clone();
        self.with_conn(move |conn| {
            conn.execute_batch("BEGIN IMMEDIATE")
                .map_err(|e| map_error(e, Phase::Run))?;
            let result = (|| {
                conn.execute_batch(crate::MIGRATIONS_TABLE_DDL)
                    .map_err(|e| map_error(e, Phase::Run))?;
                let existing: Option<String> = {
                    let mut stmt = conn
                        .prepare_cached("SELECT name FROM lethe_schema_migrations WHERE version = ?1")
                        .map_err(|e| map_error(e, Phase::Prepare))?;
                    let mut rows = stmt
                        .query([migration.version])
                        .map_err(|e| map_error(e, Phase::Run))?;
                    match rows.next().map_err(|e| map_error(e, Phase::Run))? {
                        Some(row) => Some(row.get(0).map_err(|e| map_error(e, Phase::Run))?),
                        None => None,
                    }
                };
                if let Some(name) = existing {
                    crate::check_recorded_name(&migration, &name)?;
                    conn.execute_batch("ROLLBACK")
                        .map_err(|e| map_error(e, Phase::Run))?;
                    return Ok(false);
                }
                conn.execute_batch(&migration.sql)
                    .map_err(|e| map_error(e, Phase::Prepare))
                    .map_err(|f| crate::in_migration(&migration, f))?;
                conn.execute(
                    "INSERT INTO lethe_schema_migrations (version, name, applied_at) VALUES (?1, ?2, ?3)",
                    rusqlite::params![migration.version, migration.name, crate::now_rfc3339()],
                )
                .map_err(|e| map_error(e, Phase::Run))?;
                conn.execute_batch("COMMIT")
                    .map_err(|e| map_error(e, Phase::Run))?;
                Ok(true)
            })();
            if result.is_err() && !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            result
        })
        .await
    }

    /// One attempt at opening an interactive transaction (`BEGIN IMMEDIATE`).
    pub async fn begin(&self) -> std::result::Result<SqliteTx, Failure> {
        let mut pooled = self.acquire().await?;
        let pooled = tokio::task::spawn_blocking(move || {
            pooled
                .conn()?
                .execute_batch("BEGIN IMMEDIATE")
                .map_err(|e| map_error(e, Phase::Run))?;
            Ok::<_, Failure>(pooled)
        })
        .await
        .map_err(join_error)??;
        Ok(SqliteTx { conn: Some(pooled) })
    }
}

/// An interactive SQLite transaction that owns its connection.
///
/// Dropping it without `commit` returns the connection to the pool after a `ROLLBACK`.
pub(crate) struct SqliteTx {
    conn: Option<PooledConn>,
}

impl SqliteTx {
    /// Runs `f` inside the transaction; after an error the transaction is rolled back and
    /// finished.
    async fn call<T, F>(&mut self, finish: bool, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> std::result::Result<T, Failure> + Send + 'static,
    {
        let mut pooled = self.conn.take().ok_or_else(crate::finished_error)?;
        let (pooled, result) = tokio::task::spawn_blocking(move || {
            let result = pooled.conn().and_then(|conn| {
                let out = f(conn);
                if out.is_err() && !conn.is_autocommit() {
                    let _ = conn.execute_batch("ROLLBACK");
                }
                out
            });
            (pooled, result)
        })
        .await
        .map_err(|e| join_error(e).error)?;
        if result.is_ok() && !finish {
            self.conn = Some(pooled);
        }
        result.map_err(|f| in_transaction(f.error))
    }

    /// Runs a read inside the transaction.
    pub async fn query(&mut self, sql: &str, params: &[Value]) -> Result<RowSet> {
        let sql = dialect::to_sqlite(sql).into_owned();
        let params = params.to_vec();
        self.call(false, move |conn| run_query(conn, &sql, &params))
            .await
    }

    /// Runs a write inside the transaction.
    pub async fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        let sql = dialect::to_sqlite(sql).into_owned();
        let params = params.to_vec();
        self.call(false, move |conn| run_execute(conn, &sql, &params))
            .await
    }

    /// Commits and finishes the transaction.
    pub async fn commit(&mut self) -> Result<()> {
        self.call(true, |conn| {
            conn.execute_batch("COMMIT")
                .map_err(|e| map_error(e, Phase::Run))
        })
        .await
    }

    /// Rolls back and finishes the transaction.
    pub async fn rollback(&mut self) -> Result<()> {
        self.call(true, |conn| {
            conn.execute_batch("ROLLBACK")
                .map_err(|e| map_error(e, Phase::Run))
        })
        .await
    }

    /// Whether commit, rollback or an error already finished the transaction.
    pub fn is_finished(&self) -> bool {
        self.conn.is_none()
    }
}

/// Inside an interactive transaction a lock timeout means "redo the transaction".
fn in_transaction(error: SqlError) -> SqlError {
    match error {
        SqlError::Unavailable(m) if m.starts_with("database is locked") => SqlError::Conflict(m),
        other => other,
    }
}

/// Opens and configures one connection.
fn open_connection(
    target: &Target,
    busy_timeout: Duration,
) -> std::result::Result<Connection, Failure> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = match target {
        Target::Memory => Connection::open_in_memory(),
        Target::File(path) => Connection::open_with_flags(path, flags),
    }
    .map_err(|e| {
        Failure::fatal(SqlError::Unavailable(format!(
            "cannot open SQLite database: {e}"
        )))
    })?;
    let setup = |conn: &Connection| -> rusqlite::Result<()> {
        conn.busy_timeout(busy_timeout)?;
        if matches!(target, Target::File(_)) {
            let _mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
            conn.execute_batch("PRAGMA synchronous=NORMAL")?;
        }
        conn.execute_batch("PRAGMA foreign_keys=ON")?;
        conn.set_prepared_statement_cache_capacity(64);
        confine_to_own_file(conn)
    };
    setup(&conn).map_err(|e| match map_error(e, Phase::Run) {
        f if f.retry => f,
        f => Failure::fatal(SqlError::Unavailable(format!(
            "cannot configure SQLite connection: {}",
            f.error
        ))),
    })?;
    Ok(conn)
}

/// Keeps every statement of the connection to its own database file: a database is one label's
/// (`crate::label`), so `ATTACH` (which would open any other file, another label's among them)
/// is refused twice over, by the authorizer and by an attached-database limit of 0 (which also
/// stops `VACUUM INTO` and `VACUUM`, which attach a file of their own).
fn confine_to_own_file(conn: &Connection) -> rusqlite::Result<()> {
    use rusqlite::hooks::{AuthAction, AuthContext, Authorization};
    conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_ATTACHED, 0)?;
    conn.authorizer(Some(|context: AuthContext<'_>| match context.action {
        AuthAction::Attach { .. } | AuthAction::Detach { .. } => Authorization::Deny,
        _ => Authorization::Allow,
    }));
    Ok(())
}

/// Where an error happened, which decides how it is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Compiling the statement.
    Prepare,
    /// Running it.
    Run,
}

/// Binds a [`Value`] as a SQLite parameter.
struct Param<'a>(&'a Value);

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Boolean(b) => ToSqlOutput::Borrowed(ValueRef::Integer(i64::from(*b))),
            Value::Integer(i) => ToSqlOutput::Borrowed(ValueRef::Integer(*i)),
            Value::Real(f) => ToSqlOutput::Borrowed(ValueRef::Real(*f)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Value::Blob(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
        })
    }
}

/// Prepares `sql` (already in `?N` form) and binds `params`, checking their number.
fn prepare<'c>(
    conn: &'c Connection,
    sql: &str,
    params: &[Value],
) -> std::result::Result<rusqlite::CachedStatement<'c>, Failure> {
    let mut stmt = conn
        .prepare_cached(sql)
        .map_err(|e| map_error(e, Phase::Prepare))?;
    let expected = stmt.parameter_count();
    if expected != params.len() {
        return Err(Failure::fatal(crate::param_count_error(
            expected,
            params.len(),
        )));
    }
    for (i, value) in params.iter().enumerate() {
        stmt.raw_bind_parameter(i + 1, Param(value))
            .map_err(|e| map_error(e, Phase::Prepare))?;
    }
    Ok(stmt)
}

fn value_of(v: ValueRef<'_>) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Integer(i),
        ValueRef::Real(f) => Value::Real(f),
        ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    }
}

/// Runs a statement and collects its rows.
fn run_query(
    conn: &Connection,
    sql: &str,
    params: &[Value],
) -> std::result::Result<RowSet, Failure> {
    dialect::reject_transaction_control(sql)?;
    let mut stmt = prepare(conn, sql, params)?;
    // Column names and count are read after stepping: a cached statement is re-prepared by its
    // first step when the schema changed, and only then describes the current table.
    let mut out = Vec::new();
    let mut rows = stmt.raw_query();
    while let Some(row) = rows.next().map_err(|e| map_error(e, Phase::Run))? {
        let width = row.as_ref().column_count();
        let mut values = Vec::with_capacity(width);
        for i in 0..width {
            values.push(value_of(
                row.get_ref(i).map_err(|e| map_error(e, Phase::Run))?,
            ));
        }
        out.push(values);
    }
    drop(rows);
    let columns: Vec<String> = stmt.column_names().into_iter().map(str::to_owned).collect();
    Ok(RowSet { columns, rows: out })
}

/// Runs a statement to completion and returns the rows it inserted, updated or deleted.
fn run_execute(
    conn: &Connection,
    sql: &str,
    params: &[Value],
) -> std::result::Result<u64, Failure> {
    dialect::reject_transaction_control(sql)?;
    let mut stmt = prepare(conn, sql, params)?;
    let before = conn.total_changes();
    let mut rows = stmt.raw_query();
    while rows.next().map_err(|e| map_error(e, Phase::Run))?.is_some() {}
    drop(rows);
    // `changes()` keeps the count of the last DML statement, so a DDL statement would report a
    // stale number; `total_changes()` tells whether this statement changed anything at all.
    Ok(if conn.total_changes() == before {
        0
    } else {
        conn.changes()
    })
}

/// Classifies a rusqlite error. Nothing SQLite reports can leave a statement half-applied
/// outside an explicit transaction, so a lock timeout is always safe to replay.
fn map_error(e: rusqlite::Error, phase: Phase) -> Failure {
    use rusqlite::Error as E;
    match e {
        E::SqliteFailure(err, msg) => {
            classify_code(err.code, msg.unwrap_or_else(|| err.to_string()), phase)
        }
        E::SqlInputError { error, msg, .. } => classify_code(error.code, msg, Phase::Prepare),
        E::MultipleStatement => Failure::fatal(SqlError::InvalidStatement(
            "more than one statement in one call; use batch for several statements".into(),
        )),
        E::InvalidParameterCount(given, expected) => {
            Failure::fatal(crate::param_count_error(expected, given))
        }
        E::ToSqlConversionFailure(e) => Failure::fatal(SqlError::InvalidValue(e.to_string())),
        E::NulError(e) => Failure::fatal(SqlError::InvalidStatement(format!(
            "SQL text contains a NUL byte: {e}"
        ))),
        E::InvalidParameterName(name) => Failure::fatal(SqlError::InvalidStatement(format!(
            "unsupported placeholder {name}; use $1..$n"
        ))),
        other => Failure::fatal(SqlError::Other(other.to_string())),
    }
}

fn classify_code(code: ErrorCode, msg: String, phase: Phase) -> Failure {
    match code {
        ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
            Failure::transient(SqlError::Unavailable(format!("database is locked: {msg}")))
        }
        ErrorCode::ConstraintViolation => Failure::fatal(SqlError::ConstraintViolation(msg)),
        ErrorCode::AuthorizationForStatementDenied => Failure::fatal(SqlError::Denied(msg)),
        ErrorCode::TypeMismatch | ErrorCode::TooBig | ErrorCode::ParameterOutOfRange => {
            Failure::fatal(SqlError::InvalidValue(msg))
        }
        ErrorCode::CannotOpen | ErrorCode::NotADatabase | ErrorCode::PermissionDenied => {
            Failure::fatal(SqlError::Unavailable(msg))
        }
        ErrorCode::Unknown | ErrorCode::ApiMisuse if phase == Phase::Prepare => {
            Failure::fatal(SqlError::InvalidStatement(msg))
        }
        _ => Failure::fatal(SqlError::Other(msg)),
    }
}

fn join_error(e: tokio::task::JoinError) -> Failure {
    Failure::fatal(SqlError::Other(format!("SQLite worker failed: {e}")))
}
