//! From Spin's errors to `lethe:platform/sql` errors.
//!
//! Spin reports every SQLite failure as `io(message)`, the `Display` of rusqlite's error, with
//! no result code. The host's SQLite backend classifies by result code; this module reaches the
//! same cases from the messages SQLite (and rusqlite) write for those codes, and reproduces the
//! host's own messages where the host writes its own (locked database, parameter count, several
//! statements, NUL in the SQL text).

use crate::{SpinError, SqlError};

/// An error from `connection.open`.
pub(crate) fn open_error(e: SpinError) -> SqlError {
    match e {
        SpinError::NoSuchDatabase => SqlError::Denied(format!(
            "Spin has no SQLite database with the label the component's `{}` variable names, \
             else \"{}\" (no-such-database): check the runtime configuration",
            crate::DATABASE_VARIABLE,
            crate::DEFAULT_DATABASE
        )),
        SpinError::AccessDenied => SqlError::Denied(format!(
            "this component may not use Spin's SQLite database with the label its `{}` variable \
             names, else \"{}\" (access-denied): add it to the component's `sqlite_databases` \
             in spin.toml",
            crate::DATABASE_VARIABLE,
            crate::DEFAULT_DATABASE
        )),
        // An open never carries a statement, so there is nothing to strip from the message.
        other => spin_error(other, "", 0),
    }
}

/// An error from `connection.execute` of `sql` (as sent, in `?N` form) with `given` parameters.
pub(crate) fn spin_error(e: SpinError, sql: &str, given: usize) -> SqlError {
    match e {
        SpinError::NoSuchDatabase | SpinError::AccessDenied => open_error(e),
        SpinError::InvalidConnection => SqlError::Unavailable(
            "Spin reports the SQLite connection is no longer usable (invalid-connection); \
             the next call opens a new one"
                .into(),
        ),
        SpinError::DatabaseFull => {
            SqlError::Other("the SQLite database is full (Spin's database-full)".into())
        }
        SpinError::Io(message) => classify(&message, sql, given),
    }
}

/// Inside an interactive transaction a lock timeout means "redo the transaction", as on the host.
pub(crate) fn in_transaction(error: SqlError) -> SqlError {
    match error {
        SqlError::Unavailable(m) if m.starts_with("database is locked") => SqlError::Conflict(m),
        other => other,
    }
}

/// Messages of SQLite's `SQLITE_ERROR` while compiling a statement, which the host reports as
/// `invalid-statement` (lower case, matched anywhere in the message).
const INVALID_STATEMENT: &[&str] = &[
    "syntax error",
    "incomplete input",
    "unrecognized token",
    "no such table",
    "no such column",
    "no such function",
    "no such index",
    "no such view",
    "no such trigger",
    "no such module",
    "no such collation sequence",
    "has no column named",
    "ambiguous column name",
    "already exists",
    "duplicate column name",
    "wrong number of arguments to function",
    "misuse of aggregate",
    "misuse of window function",
    "values were supplied",
    "values for ",
    "no tables specified",
    "too many columns",
    "term out of range",
    "unknown database",
];

/// Messages of SQLite's `SQLITE_MISMATCH`, `SQLITE_TOOBIG` and `SQLITE_RANGE`: `invalid-value`.
const INVALID_VALUE: &[&str] = &[
    "datatype mismatch",
    "string or blob too big",
    "column index out of range",
];

/// Messages of `SQLITE_CANTOPEN`, `SQLITE_NOTADB` and `SQLITE_PERM`: `unavailable`.
const UNAVAILABLE: &[&str] = &[
    "unable to open database file",
    "file is not a database",
    "access permission denied",
];

/// Classifies one SQLite message. `sql` is the text Spin was given, used to strip the
/// " in <sql> at offset <n>" rusqlite appends to compile errors.
pub(crate) fn classify(message: &str, sql: &str, given: usize) -> SqlError {
    let (message, compile_error) = strip_input_suffix(message, sql);
    let lower = message.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));

    // `SQLITE_CONSTRAINT`: "UNIQUE constraint failed: t.a", "NOT NULL …", "CHECK …",
    // "FOREIGN KEY constraint failed", and a STRICT table's "cannot store TEXT value in INTEGER
    // column t.a" (SQLITE_CONSTRAINT_DATATYPE).
    if lower.contains("constraint failed")
        || (lower.starts_with("cannot store ") && lower.contains(" column "))
    {
        return SqlError::ConstraintViolation(message.to_owned());
    }
    // `SQLITE_BUSY` ("database is locked") and `SQLITE_LOCKED` ("database table is locked",
    // "database schema is locked"), in the host's words.
    if lower.contains("is locked") || lower.contains("database is busy") {
        return SqlError::Unavailable(format!("database is locked: {message}"));
    }
    // rusqlite's own check of the parameters against the placeholders:
    // "Wrong number of parameters passed to query. Got 1, needed 2".
    if lower.starts_with("wrong number of parameters") {
        return match lower
            .rsplit_once("needed ")
            .and_then(|(_, n)| n.trim().parse::<usize>().ok())
        {
            Some(expected) => SqlError::InvalidValue(format!(
                "the statement has {expected} placeholder(s) but {given} parameter(s) were given"
            )),
            None => SqlError::InvalidValue(message.to_owned()),
        };
    }
    if has(INVALID_VALUE) {
        return SqlError::InvalidValue(message.to_owned());
    }
    // rusqlite refuses SQL text with a second statement after the first.
    if lower.starts_with("multiple statements provided") {
        return SqlError::InvalidStatement(
            "more than one statement in one call; use batch for several statements".into(),
        );
    }
    // rusqlite refuses SQL text containing NUL: "nul byte found in provided data at position: 3".
    if lower.starts_with("nul byte found") {
        return SqlError::InvalidStatement(format!("SQL text contains a NUL byte: {message}"));
    }
    if has(UNAVAILABLE) {
        return SqlError::Unavailable(message.to_owned());
    }
    if compile_error || has(INVALID_STATEMENT) {
        return SqlError::InvalidStatement(message.to_owned());
    }
    SqlError::Other(message.to_owned())
}

/// rusqlite reports an `SQLITE_ERROR` that SQLite located in the statement's text as
/// "<message> in <sql> at offset <n>". The host reports the bare message; the suffix also proves
/// the error came from compiling the statement, which the host classifies as `invalid-statement`.
fn strip_input_suffix<'m>(message: &'m str, sql: &str) -> (&'m str, bool) {
    if sql.is_empty() {
        return (message, false);
    }
    let Some((head, offset)) = message.rsplit_once(" at offset ") else {
        return (message, false);
    };
    if offset.is_empty() || !offset.bytes().all(|b| b.is_ascii_digit()) {
        return (message, false);
    }
    match head.strip_suffix(sql).and_then(|h| h.strip_suffix(" in ")) {
        Some(bare) => (bare, true),
        None => (message, false),
    }
}
