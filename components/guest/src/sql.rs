//! Plain-Rust mirror of `lethe:platform/sql`: the values, errors and calls component logic uses,
//! so that it runs natively in unit tests (with a fake) and as wasm (with the host).

/// One SQL value as component logic exchanges it.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A boolean (SQLite reads it back as an integer; [`Value::as_bool`] accepts both).
    Bool(bool),
    /// A 64-bit integer.
    Int(i64),
    /// Text.
    Text(String),
}

impl Value {
    /// The text, or `""` for anything else.
    pub fn text(&self) -> &str {
        match self {
            Value::Text(t) => t,
            _ => "",
        }
    }

    /// The text, or `None` for NULL and non-text values.
    pub fn opt_text(&self) -> Option<&str> {
        match self {
            Value::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The integer, or `None`.
    pub fn int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// A boolean stored as `boolean` (PostgreSQL) or `0/1` (SQLite).
    pub fn as_bool(&self) -> bool {
        match self {
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            _ => false,
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Text(s.to_string())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Text(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// Why a SQL call failed.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlError {
    /// A named constraint rejected the write (the payload names it when the database does).
    Constraint(String),
    /// Anything else: unreachable database, outcome unknown, invalid statement.
    Failed(String),
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SqlError::Constraint(c) => write!(f, "constraint {c} rejected the write"),
            SqlError::Failed(m) => write!(f, "database error: {m}"),
        }
    }
}

/// One statement of a [`Sql::batch`].
pub type Statement = (&'static str, Vec<Value>);

/// The portable SQL the host supplies (`$1..$n` placeholders, SQLite and PostgreSQL).
pub trait Sql {
    /// Runs a read.
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError>;
    /// Runs one write; returns the rows affected.
    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, SqlError>;
    /// Runs the statements in one transaction, all or nothing.
    fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError>;
}
