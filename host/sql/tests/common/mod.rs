//! Shared test support: one database per backend under test, and a fault-injecting proxy.
#![allow(dead_code)]

pub mod proxy;

use lethe_sql::{Database, SqlConfig};

/// A database under test, with what is needed to clean it up.
pub struct TestDb {
    /// The database.
    pub db: Database,
    /// `"sqlite"` or `"postgres"`, for assertion messages.
    pub label: &'static str,
    /// The URL or path it was opened with (open it again to get a second, independent pool).
    pub url: String,
    /// The PostgreSQL schema owned by this test, dropped by `cleanup`.
    schema: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    /// Opens a second, independent handle on the same database (as a second host would).
    pub async fn reopen(&self, config: SqlConfig) -> Database {
        Database::open_with(&self.url, config)
            .await
            .expect("reopen test database")
    }

    /// Drops the PostgreSQL schema of this test.
    pub async fn cleanup(self) {
        if let Some((base, schema)) = &self.schema {
            let admin = Database::open(base).await.expect("open admin db");
            admin
                .execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"), &[])
                .await
                .expect("drop test schema");
        }
    }
}

fn unique(name: &str) -> String {
    format!("{}_{:08x}", name, rand::random::<u32>())
}

/// A fresh SQLite file database in a temporary directory.
pub async fn sqlite(name: &str, config: SqlConfig) -> TestDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(format!("{name}.db"));
    let url = format!("sqlite:{}", path.display());
    let db = Database::open_with(&url, config)
        .await
        .expect("open sqlite");
    TestDb {
        db,
        label: "sqlite",
        url,
        schema: None,
        _dir: Some(dir),
    }
}

/// Appends libpq `options` that put the connection in `schema`.
pub fn with_schema(base: &str, schema: &str) -> String {
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}options=-csearch_path%3D{schema}")
}

/// A fresh schema on the test PostgreSQL server, or `None` when it is not available (skip).
pub async fn postgres(name: &str, config: SqlConfig) -> Option<TestDb> {
    let base = lethe_sql::testing::postgres_url_or_skip(name).await?;
    let schema = unique(&format!("t_{name}"));
    let admin = Database::open(&base).await.expect("open admin db");
    admin
        .execute(&format!("CREATE SCHEMA {schema}"), &[])
        .await
        .expect("create test schema");
    let url = with_schema(&base, &schema);
    let db = Database::open_with(&url, config)
        .await
        .expect("open postgres");
    Some(TestDb {
        db,
        label: "postgres",
        url,
        schema: Some((base, schema)),
        _dir: None,
    })
}

/// SQLite always, plus PostgreSQL when reachable.
pub async fn backends(name: &str) -> Vec<TestDb> {
    backends_with(name, SqlConfig::default()).await
}

/// [`backends`] with a custom configuration.
pub async fn backends_with(name: &str, config: SqlConfig) -> Vec<TestDb> {
    let mut out = vec![sqlite(name, config.clone()).await];
    if let Some(pg) = postgres(name, config).await {
        out.push(pg);
    }
    out
}
