//! The logic of lethe's `sql` capability over Spin's SQLite (`spin:sqlite/sqlite@3.0.0`, the
//! database of the label the component's `sqlite_database` variable names, else `default`),
//! which the `spin-adapter` component exports.
//!
//! Composed into a handler (by Spin's component `dependencies`, or with `wac`), that adapter serves
//! the handler's `lethe:platform/sql` import, so the handler runs on Spin with the same SQL semantics as on the lethe host's SQLite backend
//! (`host/sql`): the portable dialect (`$N` placeholders, shared through `lethe-sql-model`),
//! booleans stored as 0/1, the same error cases for the same SQLite failures, all-or-nothing
//! batches under `BEGIN IMMEDIATE`, and interactive transactions that roll back when dropped.
//!
//! Everything is plain Rust over the [`Connection`] trait, so it is unit-tested natively against
//! real SQLite; the adapter's wit-bindgen layer (`components/wasi-adapter/src/spin.rs`) adapts
//! Spin's connection to the trait and the WIT exports to [`Adapter`].
//!
//! Where Spin cannot be made to behave like the host, the adapter says so here:
//!
//! * **One connection per instance.** The host gives each interactive transaction its own pooled
//!   connection; here SQLite has the instance's single connection. While a [`Transaction`] is
//!   open, `query` and `execute` called outside it run *inside* it (they see its writes and are
//!   committed or rolled back with it), `batch` fails with `unavailable`, and a second
//!   [`Adapter::begin`] fails with `unavailable` — the case the host ends with too, after its
//!   lock and pool timeouts, when one instance holds a transaction and begins another.
//! * **No retries.** The host replays busy autocommit statements and batches with backoff; the
//!   adapter relies on the busy timeout of Spin's connection (rusqlite's default, 5 s) and then
//!   returns `unavailable`, which is what the host returns once its replays are exhausted.
//! * **Errors are classified by message.** Spin passes SQLite failures on as `io(message)`
//!   without the result code, so the case is chosen from SQLite's (and rusqlite's) message text;
//!   see [`SqlError`]. A trigger's `RAISE(ABORT, '…')` carries only its own text and comes back
//!   as `other` (the host, which sees the result code, says `constraint-violation`).

#![warn(missing_docs)]

mod classify;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;
use std::rc::Rc;

/// The Spin database the adapter opens when the component names none: the one every Spin
/// application may grant by name (`sqlite_databases = ["default"]`).
pub const DEFAULT_DATABASE: &str = "default";

/// The component variable naming the database label the adapter opens (Spin gives a composed
/// dependency the component's variables, not its grants). lethe's `sql` interface addresses one
/// database per component; `lethe up` checks that this variable and the component's
/// `sqlite_databases` name the same label.
pub const DATABASE_VARIABLE: &str = "sqlite_database";

/// Statements run once on every newly opened connection, so that SQLite enforces what the host
/// enforces: the host opens its connections with foreign keys on, and SQLite's default is off.
pub const CONNECTION_SETUP: &[&str] = &["PRAGMA foreign_keys = ON"];

// The values, rows and statements are the host's own (`lethe-sql-model`).
pub use lethe_sql_model::{RowSet, Statement, Value};

/// Why a `lethe:platform/sql` call failed: the WIT `error` variant, case for case.
///
/// The cases follow the host's SQLite backend, from SQLite's message (Spin reports no result
/// codes): constraint failures (`UNIQUE`, `NOT NULL`, `CHECK`, `FOREIGN KEY`, a STRICT column's
/// type) are [`ConstraintViolation`](Self::ConstraintViolation) with SQLite's message; a locked
/// or busy database is [`Unavailable`](Self::Unavailable) (inside a [`Transaction`],
/// [`Conflict`](Self::Conflict)); syntax errors and missing tables or columns are
/// [`InvalidStatement`](Self::InvalidStatement); a datatype mismatch or a wrong number of
/// parameters is [`InvalidValue`](Self::InvalidValue); anything else is
/// [`Other`](Self::Other).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SqlError {
    /// A constraint rejected the write; the payload is SQLite's message.
    ConstraintViolation(String),
    /// The database was locked inside an interactive transaction, which the component must redo.
    Conflict(String),
    /// The statement is not valid SQL, names a missing table or column, or is transaction control.
    InvalidStatement(String),
    /// A value does not fit its column, or the parameters do not match the placeholders.
    InvalidValue(String),
    /// The database could not be used (locked, unreachable, unusable connection); nothing was
    /// applied.
    Unavailable(String),
    /// The statement ran but its result was lost; read back to find out what was applied.
    OutcomeUnknown(String),
    /// Spin does not grant this component the database.
    Denied(String),
    /// Any other failure, with its message.
    Other(String),
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlError::ConstraintViolation(m) => write!(f, "constraint violation: {m}"),
            SqlError::Conflict(m) => write!(f, "conflict: {m}"),
            SqlError::InvalidStatement(m) => write!(f, "invalid statement: {m}"),
            SqlError::InvalidValue(m) => write!(f, "invalid value: {m}"),
            SqlError::Unavailable(m) => write!(f, "unavailable: {m}"),
            SqlError::OutcomeUnknown(m) => write!(f, "outcome unknown: {m}"),
            SqlError::Denied(m) => write!(f, "denied: {m}"),
            SqlError::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for SqlError {}

/// One value of `spin:sqlite`, which has no boolean.
#[derive(Debug, Clone, PartialEq)]
pub enum SpinValue {
    /// A 64-bit signed integer.
    Integer(i64),
    /// A double-precision float.
    Real(f64),
    /// UTF-8 text.
    Text(String),
    /// Raw bytes.
    Blob(Vec<u8>),
    /// SQL NULL.
    Null,
}

/// Why a `spin:sqlite` call failed, as Spin reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpinError {
    /// Spin knows no database of that name.
    NoSuchDatabase,
    /// The component's manifest does not grant the database.
    AccessDenied,
    /// The connection is no longer usable.
    InvalidConnection,
    /// The database is out of space.
    DatabaseFull,
    /// Any other failure, with SQLite's message.
    Io(String),
}

/// What a `spin:sqlite` statement returned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct QueryResult {
    /// Column names, in select-list order.
    pub columns: Vec<String>,
    /// Each row's values, in column order.
    pub rows: Vec<Vec<SpinValue>>,
}

/// An open SQLite connection that runs one statement at a time: Spin's `connection` resource
/// on wasm32, real SQLite in the tests. The adapter's logic sees nothing else of Spin.
pub trait Connection {
    /// Runs one statement with `?N` parameters and returns any rows it produced.
    fn execute(&self, sql: &str, params: &[SpinValue]) -> Result<QueryResult, SpinError>;
}

/// How a counted statement failed: before or after it was applied.
enum CountFailure {
    /// The statement (or the read that precedes it) failed; SQLite applied nothing.
    Statement(SqlError),
    /// The statement succeeded but its row count could not be read.
    Count(SqlError),
}

impl CountFailure {
    fn into_error(self) -> SqlError {
        match self {
            CountFailure::Statement(e) | CountFailure::Count(e) => e,
        }
    }
}

type Opener<C> = Box<dyn Fn() -> Result<C, SpinError>>;

/// The state of one instance, shared by the [`Adapter`] and its open [`Transaction`]s.
struct Shared<C> {
    open: Opener<C>,
    /// The connection once opened. `Cell` rather than `RefCell`: it is only ever swapped whole,
    /// so no borrow can fail.
    conn: Cell<Option<Rc<C>>>,
    /// The id of the transaction holding SQLite's transaction, if any.
    open_tx: Cell<Option<u64>>,
    next_tx: Cell<u64>,
    /// `total_changes()` after the last statement whose count we read, when nothing that could
    /// change it has run since. `changes()` keeps the count of the last INSERT/UPDATE/DELETE, so
    /// a DDL statement would report a stale number; an unchanged total says it changed nothing
    /// (the host uses the same test). Caching it saves a round trip per `execute`; it is exact
    /// because the total counts only this connection's statements, and the connection is ours.
    total_changes: Cell<Option<i64>>,
}

impl<C: Connection> Shared<C> {
    /// The instance's connection, opened (and set up) on first use. A failed open is not
    /// remembered, so the next call tries again.
    fn connection(&self) -> Result<Rc<C>, SqlError> {
        if let Some(conn) = self.conn.take() {
            self.conn.set(Some(conn.clone()));
            return Ok(conn);
        }
        let conn = Rc::new((self.open)().map_err(classify::open_error)?);
        for setup in CONNECTION_SETUP {
            if let Err(e) = conn.execute(setup, &[]) {
                let e = classify::spin_error(e, setup, 0);
                return Err(SqlError::Unavailable(format!(
                    "cannot configure the SQLite connection ({setup}): {e}"
                )));
            }
        }
        self.total_changes.set(None);
        self.conn.set(Some(conn.clone()));
        Ok(conn)
    }

    /// Runs one statement (already in `?N` form) and classifies its failure.
    fn send(&self, sql: &str, params: &[SpinValue]) -> Result<QueryResult, SqlError> {
        let conn = self.connection()?;
        conn.execute(sql, params).map_err(|e| {
            if e == SpinError::InvalidConnection {
                // Spin gave up on the connection, and SQLite's transaction went with it: start
                // afresh on the next call instead of failing forever.
                self.conn.set(None);
                self.open_tx.set(None);
                self.total_changes.set(None);
            }
            classify::spin_error(e, sql, params.len())
        })
    }

    /// Rolls back whatever transaction the connection is in, ignoring the outcome: it runs only
    /// after another failure, which is the error worth reporting, and SQLite may already have
    /// rolled back by itself ("cannot rollback - no transaction is active"). Never opens a
    /// connection: a lost one has nothing to roll back.
    fn rollback_quietly(&self) {
        if let Some(conn) = self.conn.take() {
            self.conn.set(Some(conn.clone()));
            let _ = conn.execute("ROLLBACK", &[]);
        }
    }

    /// Reads integers from the single row of an answer to one of our own `SELECT`s.
    fn integers<const N: usize>(&self, sql: &str) -> Result<[i64; N], SqlError> {
        let answer = self.send(sql, &[])?;
        let mut out = [0; N];
        let row = answer.rows.first();
        for (i, slot) in out.iter_mut().enumerate() {
            match row.and_then(|r| r.get(i)) {
                Some(SpinValue::Integer(v)) => *slot = *v,
                other => {
                    return Err(SqlError::Other(format!(
                        "unexpected answer to `{sql}`: {other:?}"
                    )));
                }
            }
        }
        Ok(out)
    }

    /// Runs a write and returns the number of rows it inserted, updated or deleted (0 for DDL),
    /// with `changes()` read on the same connection right after it.
    fn counted(&self, sql: &str, params: &[SpinValue]) -> Result<u64, CountFailure> {
        let before = match self.total_changes.get() {
            Some(total) => total,
            None => {
                let [total] = self
                    .integers("SELECT total_changes()")
                    .map_err(CountFailure::Statement)?;
                total
            }
        };
        self.total_changes.set(None);
        self.send(sql, params).map_err(CountFailure::Statement)?;
        let [changes, total] = self
            .integers("SELECT changes(), total_changes()")
            .map_err(CountFailure::Count)?;
        self.total_changes.set(Some(total));
        Ok(if total == before {
            0
        } else {
            u64::try_from(changes).unwrap_or(0)
        })
    }

    /// Runs a statement and returns its rows.
    fn rows(&self, sql: &str, params: &[SpinValue]) -> Result<RowSet, SqlError> {
        let result = self.send(sql, params);
        if !lethe_sql_model::is_read_only(sql) {
            // `INSERT … RETURNING` through `query` changes the total behind the cache's back.
            self.total_changes.set(None);
        }
        result.map(row_set)
    }

    fn check_no_transaction(&self, what: &str) -> Result<(), SqlError> {
        if self.open_tx.get().is_some() {
            return Err(SqlError::Unavailable(format!(
                "a transaction is open in this instance, which has one SQLite connection: \
                 commit or roll it back before {what}"
            )));
        }
        Ok(())
    }
}

/// Refuses transaction control with the dialect's own message, as the host does.
fn reject_transaction_control(sql: &str) -> Result<(), SqlError> {
    lethe_sql_model::reject_transaction_control(sql)
        .map_err(|m| SqlError::InvalidStatement(m.into()))
}

/// The dialect check and rewrite every component statement goes through.
fn prepare<'s>(sql: &'s str, params: &[Value]) -> Result<(Cow<'s, str>, Vec<SpinValue>), SqlError> {
    reject_transaction_control(sql)?;
    Ok((
        lethe_sql_model::to_sqlite(sql),
        params.iter().map(to_spin).collect(),
    ))
}

fn to_spin(value: &Value) -> SpinValue {
    match value {
        Value::Null => SpinValue::Null,
        Value::Boolean(b) => SpinValue::Integer(i64::from(*b)),
        Value::Integer(i) => SpinValue::Integer(*i),
        Value::Real(f) => SpinValue::Real(*f),
        Value::Text(t) => SpinValue::Text(t.clone()),
        Value::Blob(b) => SpinValue::Blob(b.clone()),
    }
}

fn from_spin(value: SpinValue) -> Value {
    match value {
        SpinValue::Null => Value::Null,
        SpinValue::Integer(i) => Value::Integer(i),
        SpinValue::Real(f) => Value::Real(f),
        SpinValue::Text(t) => Value::Text(t),
        SpinValue::Blob(b) => Value::Blob(b),
    }
}

fn row_set(result: QueryResult) -> RowSet {
    RowSet {
        columns: result.columns,
        rows: result
            .rows
            .into_iter()
            .map(|row| row.into_iter().map(from_spin).collect())
            .collect(),
    }
}

/// `lethe:platform/sql` for one instance, over a lazily opened [`Connection`].
pub struct Adapter<C: Connection> {
    shared: Rc<Shared<C>>,
}

impl<C: Connection> Adapter<C> {
    /// An adapter that calls `open` on its first SQL call, not before: a handler that never
    /// touches SQL never opens the database, and a failed open is retried by the next call.
    pub fn new(open: impl Fn() -> Result<C, SpinError> + 'static) -> Self {
        Adapter {
            shared: Rc::new(Shared {
                open: Box::new(open),
                conn: Cell::new(None),
                open_tx: Cell::new(None),
                next_tx: Cell::new(1),
                total_changes: Cell::new(None),
            }),
        }
    }

    /// Runs one statement and returns its rows (no columns and no rows for a statement without
    /// a result). Transaction control is refused.
    pub fn query(&self, sql: &str, params: &[Value]) -> Result<RowSet, SqlError> {
        let (sql, params) = prepare(sql, params)?;
        self.shared.rows(&sql, &params)
    }

    /// Runs one write in its own implicit transaction and returns the number of rows inserted,
    /// updated or deleted (0 for DDL). Transaction control is refused.
    ///
    /// Should the statement succeed but its row count not be readable, the write stands, so the
    /// error is `outcome-unknown`, which tells the component to read back rather than assume
    /// nothing happened.
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        let (sql, params) = prepare(sql, params)?;
        self.shared.counted(&sql, &params).map_err(|f| match f {
            CountFailure::Statement(e) => e,
            CountFailure::Count(e) => SqlError::OutcomeUnknown(format!(
                "the statement ran, but the number of rows it changed could not be read: {e}"
            )),
        })
    }

    /// Runs the statements in order in one `BEGIN IMMEDIATE` transaction, all or nothing, and
    /// returns the rows changed by each.
    ///
    /// Every statement is checked for transaction control before anything is sent, so a refused
    /// batch never takes the write lock. Any failure rolls back and returns that statement's
    /// error as the host would (a locked database is `unavailable`, never `conflict`: nothing was
    /// applied, so the whole batch may simply be sent again). An empty batch touches nothing.
    pub fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError> {
        if statements.is_empty() {
            return Ok(Vec::new());
        }
        let prepared = statements
            .iter()
            .map(|s| prepare(&s.sql, &s.params))
            .collect::<Result<Vec<_>, _>>()?;
        let shared = &self.shared;
        shared.check_no_transaction("running a batch")?;
        shared.send("BEGIN IMMEDIATE", &[])?;
        let mut counts = Vec::with_capacity(prepared.len());
        for (sql, params) in &prepared {
            match shared.counted(sql, params) {
                Ok(n) => counts.push(n),
                Err(f) => {
                    shared.rollback_quietly();
                    return Err(f.into_error());
                }
            }
        }
        if let Err(e) = shared.send("COMMIT", &[]) {
            // A COMMIT that fails (busy) leaves SQLite's transaction open; end it so that the
            // connection is usable and nothing of the batch survives.
            shared.rollback_quietly();
            return Err(e);
        }
        Ok(counts)
    }

    /// Opens an interactive transaction with `BEGIN IMMEDIATE`, which takes the write lock now,
    /// as on the host.
    ///
    /// SQLite has one connection per instance, so only one transaction can be open at a time:
    /// a second `begin` fails with `unavailable` (see the crate documentation), and `query` and
    /// `execute` called on the adapter while it is open run inside it.
    pub fn begin(&self) -> Result<Transaction<C>, SqlError> {
        let shared = &self.shared;
        shared.check_no_transaction("beginning another")?;
        shared.send("BEGIN IMMEDIATE", &[])?;
        let id = shared.next_tx.get();
        shared.next_tx.set(id.wrapping_add(1));
        shared.open_tx.set(Some(id));
        Ok(Transaction {
            shared: shared.clone(),
            id,
        })
    }
}

/// An interactive transaction: the WIT `transaction` resource.
///
/// As on the host, calls are never replayed, and after any error, `commit` or `rollback` the
/// transaction is finished: rolled back unless committed, with further calls failing with
/// `other`. A locked database inside it is `conflict`. Dropping it unfinished rolls it back.
pub struct Transaction<C: Connection> {
    shared: Rc<Shared<C>>,
    id: u64,
}

impl<C: Connection> Transaction<C> {
    /// Whether commit, rollback or an error already finished the transaction.
    pub fn is_finished(&self) -> bool {
        self.shared.open_tx.get() != Some(self.id)
    }

    fn check_open(&self) -> Result<(), SqlError> {
        if self.is_finished() {
            return Err(SqlError::Other(
                "the transaction is already finished".into(),
            ));
        }
        Ok(())
    }

    /// Ends the transaction after `error`, as the host does: rolled back and finished, with a
    /// lock timeout reported as `conflict` because only redoing the transaction can help.
    fn fail(&self, error: SqlError) -> SqlError {
        self.shared.rollback_quietly();
        self.shared.open_tx.set(None);
        classify::in_transaction(error)
    }

    /// Runs a statement inside the transaction and returns its rows.
    pub fn query(&self, sql: &str, params: &[Value]) -> Result<RowSet, SqlError> {
        self.check_open()?;
        prepare(sql, params)
            .and_then(|(sql, params)| self.shared.rows(&sql, &params))
            .map_err(|e| self.fail(e))
    }

    /// Runs a write inside the transaction and returns the number of rows it changed.
    pub fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        self.check_open()?;
        prepare(sql, params)
            .and_then(|(sql, params)| {
                self.shared
                    .counted(&sql, &params)
                    .map_err(CountFailure::into_error)
            })
            .map_err(|e| self.fail(e))
    }

    /// Commits and finishes the transaction. On failure it is rolled back.
    pub fn commit(&self) -> Result<(), SqlError> {
        self.check_open()?;
        match self.shared.send("COMMIT", &[]) {
            Ok(_) => {
                self.shared.open_tx.set(None);
                Ok(())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// Rolls back and finishes the transaction.
    pub fn rollback(&self) -> Result<(), SqlError> {
        self.check_open()?;
        self.shared.open_tx.set(None);
        self.shared
            .send("ROLLBACK", &[])
            .map(|_| ())
            .map_err(classify::in_transaction)
    }
}

impl<C: Connection> Drop for Transaction<C> {
    /// A transaction dropped unfinished must not leave the instance's connection inside it,
    /// where the next statement would silently join it.
    fn drop(&mut self) {
        if !self.is_finished() {
            self.shared.rollback_quietly();
            self.shared.open_tx.set(None);
        }
    }
}
