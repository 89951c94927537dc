//! Values, rows and statements: the data model of the WIT `sql` interface.

use serde::{Deserialize, Serialize};

/// One SQL value, as a parameter or as a column of a result row.
///
/// Mirrors `lethe:platform/sql.value`. Reading back differs by backend only where the storage
/// differs: SQLite has no boolean type, so a stored `Boolean(true)` reads back as `Integer(1)`
/// there; PostgreSQL `numeric` reads back as exact decimal `Text`; timestamps read back as
/// RFC 3339 text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "value", rename_all = "snake_case")]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A boolean (PostgreSQL `boolean`; SQLite stores it as 0/1).
    Boolean(bool),
    /// A 64-bit signed integer.
    Integer(i64),
    /// A double-precision float.
    Real(f64),
    /// UTF-8 text; also the exchange format of timestamps (RFC 3339), JSON, UUIDs and numerics.
    Text(String),
    /// Raw bytes (PostgreSQL `bytea`, SQLite `blob`).
    Blob(Vec<u8>),
}

impl Value {
    /// A short name of the variant, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Boolean(_) => "boolean",
            Value::Integer(_) => "integer",
            Value::Real(_) => "real",
            Value::Text(_) => "text",
            Value::Blob(_) => "blob",
        }
    }
}

impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Boolean(v)
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Integer(v)
    }
}

impl From<i32> for Value {
    fn from(v: i32) -> Self {
        Value::Integer(v.into())
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}

impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_owned())
    }
}

impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}

impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}

/// The rows a query returned, in order, with the column names of the result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RowSet {
    /// Column names, in select-list order.
    pub columns: Vec<String>,
    /// Each row has exactly one value per column.
    pub rows: Vec<Vec<Value>>,
}

impl RowSet {
    /// The index of the column named `name`, if any.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }
}

/// One parameterised statement, for [`Database::batch`](crate::Database::batch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Statement {
    /// SQL text with `$1`…`$n` placeholders.
    pub sql: String,
    /// The values bound to `$1`…`$n`, in order.
    pub params: Vec<Value>,
}

impl Statement {
    /// A statement from SQL text and its parameters.
    pub fn new(sql: impl Into<String>, params: Vec<Value>) -> Self {
        Statement {
            sql: sql.into(),
            params,
        }
    }
}
