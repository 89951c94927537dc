//! Typed SQL errors, one variant per case of the WIT `sql.error` variant.

/// Why a SQL call failed.
///
/// The variants mirror `lethe:platform/sql.error` one to one, so the host maps them without
/// loss. Callers match on the variant, never on the message text; the message is for humans
/// and never contains a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SqlError {
    /// A constraint rejected the write (unique, foreign key, check, not null). The payload is
    /// the constraint's name when the database reports one, else the database's message.
    #[error("constraint violation: {0}")]
    ConstraintViolation(String),
    /// The transaction was aborted by a serialization failure or deadlock; redo the whole
    /// transaction. Returned only by [`Transaction`](crate::Transaction) calls, which are never
    /// replayed (replayable work that keeps conflicting ends as [`SqlError::Unavailable`]).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The statement is not valid SQL for this database, or names a missing table or column.
    #[error("invalid statement: {0}")]
    InvalidStatement(String),
    /// A parameter could not be converted to the column's type, a result column has a type that
    /// cannot be represented as a [`Value`](crate::Value), or the number of parameters does not
    /// match the placeholders.
    #[error("invalid value: {0}")]
    InvalidValue(String),
    /// The database could not be reached, even after retries. Nothing was applied.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The connection was lost after the statement was sent: it may or may not have been
    /// applied. Never retried; read back to find out.
    #[error("outcome unknown: {0}")]
    OutcomeUnknown(String),
    /// The statement reaches beyond what this database's user may: `ATTACH` on SQLite, a table,
    /// role or setting the label's role was not granted on PostgreSQL. The host also reports a
    /// component that was not granted SQL at all through it.
    #[error("denied: {0}")]
    Denied(String),
    /// Any other database error, with its message.
    #[error("{0}")]
    Other(String),
}

/// Convenience alias for results of this crate.
pub type Result<T, E = SqlError> = std::result::Result<T, E>;

/// The outcome of one attempt, as the retry loop sees it.
///
/// Backends classify each failure at the point where they know whether the work may have been
/// applied: `retry == true` promises that replaying the same work cannot apply it twice.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The error to report if this attempt is the last one.
    pub error: SqlError,
    /// Whether replaying the same work is safe and might succeed.
    pub retry: bool,
}

impl Failure {
    /// A failure that must be reported as is.
    pub fn fatal(error: SqlError) -> Self {
        Failure {
            error,
            retry: false,
        }
    }

    /// A failure after which nothing was applied and a replay may succeed.
    pub fn transient(error: SqlError) -> Self {
        Failure { error, retry: true }
    }
}

impl From<SqlError> for Failure {
    fn from(error: SqlError) -> Self {
        Failure::fatal(error)
    }
}
