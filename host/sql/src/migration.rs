//! Schema migrations, which only the host applies.

use serde::{Deserialize, Serialize};

/// One schema migration: a script applied once, in version order, and recorded in the
/// `lethe_schema_migrations` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    /// Unique, ordering key. Applied migrations are never re-run.
    pub version: i64,
    /// A human-readable name; must stay the same once applied.
    pub name: String,
    /// The script: one or more `;`-separated statements without parameters, written in the
    /// portable dialect.
    pub sql: String,
}

impl Migration {
    /// A migration from its parts.
    pub fn new(version: i64, name: impl Into<String>, sql: impl Into<String>) -> Self {
        Migration {
            version,
            name: name.into(),
            sql: sql.into(),
        }
    }
}
