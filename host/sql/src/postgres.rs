//! The PostgreSQL backend: a `deadpool-postgres` pool of `tokio-postgres` connections.
//!
//! Each call is split into the phases that decide whether it may be replayed: getting a
//! connection and preparing the statement never apply anything (a failure there is retried);
//! once a write was sent, a lost connection means the outcome is unknown (never retried).

use std::time::Duration;

use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::config::SqlConfig;
use crate::dialect;
use crate::error::{Failure, Result, SqlError};
use crate::pgtls;
use crate::pgtypes::{ConversionError, PgOut, PgParam};
use crate::{Migration, RowSet, Statement, Value};

/// Key of the advisory lock that serialises migrations across hosts ("lethe_mg").
const MIGRATION_LOCK_KEY: i64 = 0x6c65_7468_655f_6d67;

/// Where a PostgreSQL error happened, which decides how it is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Getting a connection, `BEGIN`, preparing: nothing was executed.
    Prepare,
    /// A read-only statement was sent: replaying it is harmless.
    Read,
    /// A write was sent in autocommit mode: it may have committed.
    Write,
    /// A statement inside a replayable transaction (batch, migration): nothing commits before
    /// `COMMIT`, so a lost connection means nothing was applied.
    Batch,
    /// `COMMIT` of a batch was sent: it may have committed.
    BatchCommit,
    /// A statement inside an interactive transaction, which is never replayed.
    Tx,
    /// `COMMIT` of an interactive transaction was sent.
    TxCommit,
}

/// Which database a pool connects to, and as whom, when it is not the URL's own.
#[derive(Clone)]
pub(crate) struct Login {
    /// The database to connect to.
    pub database: String,
    /// The role to log in as and its password; `None`: the URL's user.
    pub role: Option<(String, String)>,
}

/// The PostgreSQL backend. Cheap to clone.
#[derive(Clone)]
pub(crate) struct PgBackend {
    pool: Pool,
}

impl std::fmt::Debug for PgBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgBackend")
            .field("status", &self.pool.status())
            .finish()
    }
}

impl PgBackend {
    /// Builds the pool from a `postgres://` URL. Connections are made lazily, so a database
    /// that is down at start is reported (and retried) on first use.
    pub fn open(url: &str, config: &SqlConfig) -> Result<Self> {
        Self::open_as(url, None, config)
    }

    /// [`open`](Self::open) on the server of `url`, with `login`'s database (and role, when it
    /// names one) in place of the URL's.
    pub fn open_as(url: &str, login: Option<&Login>, config: &SqlConfig) -> Result<Self> {
        let (url, tls) = pgtls::split_url(url)?;
        let mut pg: tokio_postgres::Config = url
            .parse()
            .map_err(|e| SqlError::Unavailable(format!("invalid PostgreSQL URL: {e}")))?;
        if let Some(login) = login {
            pg.dbname(&login.database);
            if let Some((user, password)) = &login.role {
                pg.user(user);
                pg.password(password.as_bytes());
            }
        }
        pg.ssl_mode(tls.ssl_mode());
        let connector = MakeRustlsConnect::new(pgtls::client_config(&tls)?);
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(config.postgres.connect_timeout);
        }
        if pg.get_application_name().is_none() {
            pg.application_name("lethe");
        }
        // Timestamps without a zone are exchanged as UTC.
        let options = match pg.get_options() {
            Some(o) if !o.is_empty() => format!("{o} -c TimeZone=UTC"),
            _ => "-c TimeZone=UTC".to_owned(),
        };
        pg.options(&options);
        let connect_timeout = pg
            .get_connect_timeout()
            .copied()
            .unwrap_or(config.postgres.connect_timeout);
        let manager = Manager::from_config(
            pg,
            connector,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(config.postgres.max_connections.max(1))
            .wait_timeout(Some(config.acquire_timeout()))
            .create_timeout(Some(connect_timeout + Duration::from_secs(1)))
            .runtime(Runtime::Tokio1)
            .build()
            .map_err(|e| SqlError::Other(format!("cannot build PostgreSQL pool: {e}")))?;
        Ok(PgBackend { pool })
    }

    /// Gets a pooled connection; every failure here happened before any statement was sent.
    async fn acquire(&self) -> std::result::Result<Object, Failure> {
        match self.pool.get().await {
            Ok(client) => Ok(client),
            Err(PoolError::Backend(e)) => {
                let permanent = e.code().is_some_and(|c| {
                    let code = c.code();
                    // invalid_authorization_specification, invalid_password, unknown database
                    code.starts_with("28") || code == "3D000"
                }) || is_tls_failure(&e);
                let error = SqlError::Unavailable(format!(
                    "cannot connect to PostgreSQL: {}",
                    describe(&e)
                ));
                Err(if permanent {
                    Failure::fatal(error)
                } else {
                    Failure::transient(error)
                })
            }
            Err(PoolError::Timeout(t)) => Err(Failure::transient(SqlError::Unavailable(format!(
                "timed out getting a PostgreSQL connection ({t:?})"
            )))),
            Err(e) => Err(Failure::fatal(SqlError::Unavailable(format!(
                "PostgreSQL pool unavailable: {e}"
            )))),
        }
    }

    /// One attempt of [`Database::query`](crate::Database::query).
    pub async fn query(&self, sql: &str, params: &[Value]) -> std::result::Result<RowSet, Failure> {
        dialect::reject_transaction_control(sql)?;
        let phase = if dialect::is_read_only(sql) {
            Phase::Read
        } else {
            Phase::Write
        };
        let client = self.acquire().await?;
        run_query(&client, sql, params, phase).await
    }

    /// One attempt of [`Database::execute`](crate::Database::execute).
    pub async fn execute(&self, sql: &str, params: &[Value]) -> std::result::Result<u64, Failure> {
        dialect::reject_transaction_control(sql)?;
        let client = self.acquire().await?;
        run_execute(&client, sql, params, Phase::Write).await
    }

    /// One attempt of [`Database::batch`](crate::Database::batch), in one serializable
    /// transaction.
    pub async fn batch(&self, statements: &[Statement]) -> std::result::Result<Vec<u64>, Failure> {
        for s in statements {
            dialect::reject_transaction_control(&s.sql)?;
        }
        let client = self.acquire().await?;
        client
            .batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            .await
            .map_err(|e| classify(e, Phase::Prepare))?;
        let mut counts = Vec::with_capacity(statements.len());
        for s in statements {
            match run_execute(&client, &s.sql, &s.params, Phase::Batch).await {
                Ok(n) => counts.push(n),
                Err(f) => {
                    abandon(client).await;
                    return Err(f);
                }
            }
        }
        client
            .batch_execute("COMMIT")
            .await
            .map_err(|e| classify(e, Phase::BatchCommit))?;
        Ok(counts)
    }

    /// One attempt at applying `migration` under the advisory lock. Returns whether it was
    /// applied now. Every failure before the migration's own SQL fails is replayable, including a
    /// lost `COMMIT`: the version table is re-read under the lock.
    pub async fn migrate_one(&self, migration: &Migration) -> std::result::Result<bool, Failure> {
        let client = self.acquire().await?;
        let replayable = |e| {
            let f = classify(e, Phase::Batch);
            if matches!(f.error, SqlError::OutcomeUnknown(_)) {
                Failure::transient(f.error)
            } else {
                f
            }
        };
        let result: std::result::Result<bool, Failure> = async {
            client
                .batch_execute(&format!(
                    "BEGIN; SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY}); {}",
                    crate::MIGRATIONS_TABLE_DDL
                ))
                .await
                .map_err(replayable)?;
            let rows = client
                .query(
                    "SELECT name FROM lethe_schema_migrations WHERE version = $1",
                    &[&migration.version],
                )
                .await
                .map_err(replayable)?;
            if let Some(row) = rows.first() {
                let name: String = row.try_get(0).map_err(replayable)?;
                crate::check_recorded_name(migration, &name)?;
                client.batch_execute("ROLLBACK").await.map_err(replayable)?;
                return Ok(false);
            }
            client
                .batch_execute(&migration.sql)
                .await
                .map_err(|e| crate::in_migration(migration, classify(e, Phase::Batch)))?;
            client
                .execute(
                    "INSERT INTO lethe_schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                    &[&migration.version, &migration.name, &crate::now_rfc3339()],
                )
                .await
                .map_err(replayable)?;
            client.batch_execute("COMMIT").await.map_err(replayable)?;
            Ok(true)
        }
        .await;
        if result.is_err() {
            abandon(client).await;
        }
        result
    }

    /// One attempt at opening an interactive serializable transaction.
    pub async fn begin(&self) -> std::result::Result<PgTx, Failure> {
        let client = self.acquire().await?;
        client
            .batch_execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            .await
            .map_err(|e| classify(e, Phase::Prepare))?;
        Ok(PgTx {
            client: Some(client),
        })
    }
}

/// An interactive PostgreSQL transaction that owns its pooled connection.
///
/// Dropping it without `commit` rolls back in a background task before the connection goes
/// back to the pool (or closes the connection, which rolls back too, outside a runtime).
pub(crate) struct PgTx {
    client: Option<Object>,
}

impl PgTx {
    fn client(&self) -> Result<&Object> {
        self.client.as_ref().ok_or_else(crate::finished_error)
    }

    /// Finishes the transaction after a failed call.
    async fn fail<T>(&mut self, failure: Failure) -> Result<T> {
        if let Some(client) = self.client.take() {
            abandon(client).await;
        }
        Err(failure.error)
    }

    /// Runs a read inside the transaction.
    pub async fn query(&mut self, sql: &str, params: &[Value]) -> Result<RowSet> {
        self.client()?;
        if let Err(e) = dialect::reject_transaction_control(sql) {
            return self.fail(Failure::fatal(e)).await;
        }
        let result = run_query(self.client()?, sql, params, Phase::Tx).await;
        match result {
            Ok(rows) => Ok(rows),
            Err(f) => self.fail(f).await,
        }
    }

    /// Runs a write inside the transaction.
    pub async fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        self.client()?;
        if let Err(e) = dialect::reject_transaction_control(sql) {
            return self.fail(Failure::fatal(e)).await;
        }
        let result = run_execute(self.client()?, sql, params, Phase::Tx).await;
        match result {
            Ok(n) => Ok(n),
            Err(f) => self.fail(f).await,
        }
    }

    /// Commits and finishes the transaction.
    pub async fn commit(&mut self) -> Result<()> {
        let client = self.client.take().ok_or_else(crate::finished_error)?;
        match client.batch_execute("COMMIT").await {
            Ok(()) => Ok(()),
            Err(e) => {
                let failure = classify(e, Phase::TxCommit);
                abandon(client).await;
                Err(failure.error)
            }
        }
    }

    /// Rolls back and finishes the transaction.
    pub async fn rollback(&mut self) -> Result<()> {
        let client = self.client.take().ok_or_else(crate::finished_error)?;
        match client.batch_execute("ROLLBACK").await {
            Ok(()) => Ok(()),
            Err(e) => {
                // The server rolls back a transaction whose connection is gone.
                let failure = classify(e, Phase::Tx);
                let _ = Object::take(client);
                Err(failure.error)
            }
        }
    }

    /// Whether commit, rollback or an error already finished the transaction.
    pub fn is_finished(&self) -> bool {
        self.client.is_none()
    }
}

impl Drop for PgTx {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => {
                    handle.spawn(abandon(client));
                }
                Err(_) => {
                    // No runtime to roll back on: close the connection instead.
                    let _ = Object::take(client);
                }
            }
        }
    }
}

/// Rolls back whatever transaction `client` is in and returns it to the pool, or discards it if
/// it is closed or the rollback fails.
async fn abandon(client: Object) {
    if client.is_closed() || client.batch_execute("ROLLBACK").await.is_err() {
        let _ = Object::take(client);
    }
}

/// Prepares `sql`, checks the parameter count and binds `params`.
async fn prepare(
    client: &Object,
    sql: &str,
    params: &[Value],
) -> std::result::Result<tokio_postgres::Statement, Failure> {
    let stmt = client
        .prepare_cached(sql)
        .await
        .map_err(|e| classify(e, Phase::Prepare))?;
    if stmt.params().len() != params.len() {
        return Err(Failure::fatal(crate::param_count_error(
            stmt.params().len(),
            params.len(),
        )));
    }
    Ok(stmt)
}

/// A statement that finds its connection closed right before sending has sent nothing.
fn closed_before_send(client: &Object) -> std::result::Result<(), Failure> {
    if client.is_closed() {
        Err(Failure::transient(SqlError::Unavailable(
            "PostgreSQL connection closed before the statement was sent".into(),
        )))
    } else {
        Ok(())
    }
}

/// The statement prepared, on a connection that is still open, so that a failure so far proves
/// the statement was not sent.
async fn ready(
    client: &Object,
    sql: &str,
    params: &[Value],
    phase: Phase,
) -> std::result::Result<tokio_postgres::Statement, Failure> {
    let stmt = prepare(client, sql, params)
        .await
        .map_err(|f| tx_phase(f, phase))?;
    closed_before_send(client).map_err(|f| tx_phase(f, phase))?;
    Ok(stmt)
}

async fn run_query(
    client: &Object,
    sql: &str,
    params: &[Value],
    phase: Phase,
) -> std::result::Result<RowSet, Failure> {
    let stmt = ready(client, sql, params, phase).await?;
    let args: Vec<PgParam<'_>> = params.iter().map(PgParam).collect();
    let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
    let rows = client
        .query(&stmt, &refs)
        .await
        .map_err(|e| classify_stale(client, sql, e, phase))?;
    let columns: Vec<String> = stmt.columns().iter().map(|c| c.name().to_owned()).collect();
    let rows = rows
        .iter()
        .map(|row| row_values(row, columns.len()))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RowSet { columns, rows })
}

async fn run_execute(
    client: &Object,
    sql: &str,
    params: &[Value],
    phase: Phase,
) -> std::result::Result<u64, Failure> {
    let stmt = ready(client, sql, params, phase).await?;
    let args: Vec<PgParam<'_>> = params.iter().map(PgParam).collect();
    let refs: Vec<&(dyn ToSql + Sync)> = args.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
    client
        .execute(&stmt, &refs)
        .await
        .map_err(|e| classify_stale(client, sql, e, phase))
}

/// Like [`classify`], but a prepared statement whose result type changed under it (a migration
/// altered a table behind the statement cache) is evicted from the cache and, outside an
/// interactive transaction, replayed: the server refused it before executing anything.
fn classify_stale(client: &Object, sql: &str, e: tokio_postgres::Error, phase: Phase) -> Failure {
    let stale = e.as_db_error().is_some_and(|db| {
        *db.code() == SqlState::FEATURE_NOT_SUPPORTED
            && db
                .message()
                .contains("cached plan must not change result type")
    });
    if !stale {
        return classify(e, phase);
    }
    client.statement_cache.remove(sql, &[]);
    let error =
        SqlError::InvalidStatement(format!("{}; the statement was re-prepared", describe(&e)));
    if phase == Phase::Tx {
        Failure::fatal(error)
    } else {
        Failure::transient(error)
    }
}

/// Inside an interactive transaction nothing is replayable, even a failure while preparing.
fn tx_phase(f: Failure, phase: Phase) -> Failure {
    if phase == Phase::Tx {
        Failure::fatal(f.error)
    } else {
        f
    }
}

fn row_values(row: &Row, width: usize) -> std::result::Result<Vec<Value>, Failure> {
    (0..width)
        .map(|i| {
            row.try_get::<_, PgOut>(i)
                .map(|v| v.0)
                .map_err(|e| classify(e, Phase::Read))
        })
        .collect()
}

/// The message of a tokio-postgres error including its cause, without connection parameters.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{}: {}", db.code().code(), db.message()),
        None => match std::error::Error::source(e) {
            Some(cause) => format!("{e}: {cause}"),
            None => e.to_string(),
        },
    }
}

/// Whether connecting failed in the TLS handshake (an untrusted certificate, a server without
/// TLS under `sslmode=require`): retrying cannot help.
fn is_tls_failure(e: &tokio_postgres::Error) -> bool {
    e.to_string() == "error performing TLS handshake"
        || describe(e).contains("server does not support TLS")
}

/// Whether the error means the connection is gone.
fn is_connection_loss(e: &tokio_postgres::Error) -> bool {
    e.is_closed()
        || std::error::Error::source(e)
            .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
        || e.to_string().starts_with("timeout")
}

/// Classifies a tokio-postgres error by what it means for the work at `phase`.
fn classify(e: tokio_postgres::Error, phase: Phase) -> Failure {
    if let Some(conv) =
        std::error::Error::source(&e).and_then(|s| s.downcast_ref::<ConversionError>())
    {
        return Failure::fatal(SqlError::InvalidValue(conv.0.clone()));
    }
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        let message = format!("{}: {}", code.code(), db.message());
        let class = &code.code()[..2.min(code.code().len())];
        if class == "23" {
            return Failure::fatal(SqlError::ConstraintViolation(
                db.constraint().map_or(message, str::to_owned),
            ));
        }
        if *code == SqlState::T_R_SERIALIZATION_FAILURE || *code == SqlState::T_R_DEADLOCK_DETECTED
        {
            // The server aborted the whole (implicit or explicit) transaction: nothing applied.
            return match phase {
                Phase::Tx | Phase::TxCommit => Failure::fatal(SqlError::Conflict(message)),
                _ => Failure::transient(SqlError::Conflict(message)),
            };
        }
        let connection_class = class == "08"
            || *code == SqlState::ADMIN_SHUTDOWN
            || *code == SqlState::CRASH_SHUTDOWN
            || *code == SqlState::CANNOT_CONNECT_NOW
            || *code == SqlState::TOO_MANY_CONNECTIONS;
        if connection_class {
            return lost(phase, message);
        }
        if *code == SqlState::INSUFFICIENT_PRIVILEGE {
            return Failure::fatal(SqlError::Denied(message));
        }
        return Failure::fatal(match class {
            "42" => SqlError::InvalidStatement(message),
            "0A" | "26" | "34" => SqlError::InvalidStatement(message),
            "22" => SqlError::InvalidValue(message),
            _ => SqlError::Other(message),
        });
    }
    let message = describe(&e);
    if message.starts_with("expected ") && message.contains("parameters") {
        return Failure::fatal(SqlError::InvalidValue(message));
    }
    if is_connection_loss(&e) {
        return lost(phase, message);
    }
    Failure::fatal(SqlError::Other(message))
}

/// The classification of a lost connection (or a server-side disconnect) at `phase`.
fn lost(phase: Phase, message: String) -> Failure {
    match phase {
        Phase::Prepare | Phase::Read | Phase::Batch => Failure::transient(SqlError::Unavailable(
            format!("connection lost before anything was applied: {message}"),
        )),
        Phase::Write | Phase::BatchCommit | Phase::TxCommit => {
            Failure::fatal(SqlError::OutcomeUnknown(format!(
                "connection lost after the statement was sent; it may have been applied: {message}"
            )))
        }
        Phase::Tx => Failure::fatal(SqlError::Unavailable(format!(
            "connection lost; the transaction was rolled back: {message}"
        ))),
    }
}
