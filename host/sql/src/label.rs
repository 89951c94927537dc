//! A database per label, as Spin's `sqlite_databases` labels give each component only the
//! databases its manifest lists.
//!
//! An application has one database location (the `--database-url`, else SQLite in the data
//! dir); each label's database is derived from it, and the separation is the database's own,
//! never a reading of the SQL text:
//!
//! * **SQLite:** a file per label beside the application's (`lethe.db` gives `lethe-cf.db`,
//!   `lethe-data-jobs.db`, …). Every connection refuses `ATTACH` (the attached-database limit is
//!   0 and the authorizer denies it), so a statement reaches no other file.
//! * **PostgreSQL:** a database and a login role per label, both named
//!   `<application database>_<label>` (`-` becomes `_`). The host, as the URL's user (which needs
//!   `CREATEDB` and `CREATEROLE`), creates them, revokes `CONNECT` from `PUBLIC`, makes the label's
//!   role a member of nothing, and grants it to itself (so it can split an older database and an
//!   operator can read every label). The label's pool logs in as that role, so `SET ROLE`,
//!   `RESET ROLE`, schema-qualified names and catalog queries reach only what the role may: its
//!   own database. PostgreSQL has no cross-database queries. Each role's password is random, made
//!   once and kept in the application database's `lethe_label_roles` table, which only the
//!   URL's user can read; every host of the application reads the same one.

use rand::Rng as _;
use rand::distr::Alphanumeric;

use crate::error::{Result, SqlError};
use crate::postgres::{Login, PgBackend};
use crate::{Database, SqlConfig, Value};

/// Longest label: a PostgreSQL name (63 bytes) must hold it after the application database's.
pub const MAX_LABEL_LEN: usize = 40;

/// Checks a database label: 1 to [`MAX_LABEL_LEN`] characters, lowercase ASCII letters, digits
/// and `-`, starting with a letter. Without `_`, the PostgreSQL names (where `-` becomes `_`) of
/// two labels never collide.
pub fn check_label(label: &str) -> std::result::Result<(), String> {
    let well_formed = label.len() <= MAX_LABEL_LEN
        && label.starts_with(|c: char| c.is_ascii_lowercase())
        && label
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if well_formed {
        Ok(())
    } else {
        Err(format!(
            "database label `{label}` must be 1 to {MAX_LABEL_LEN} lowercase letters, digits and `-`, starting with a letter"
        ))
    }
}

impl Database {
    /// Opens the database of `label` that belongs to the application database `app_url` (see
    /// the module's notes), creating it when missing.
    ///
    /// On PostgreSQL this connects as the URL's user to create the label's role and database
    /// (idempotent, and safe when several hosts start at once), then returns a pool that logs in
    /// as the label's role.
    pub async fn open_label(app_url: &str, label: &str, config: SqlConfig) -> Result<Database> {
        check_label(label).map_err(SqlError::InvalidValue)?;
        if !is_postgres(app_url) {
            return Database::open_with(&sqlite_label_location(app_url, label)?, config).await;
        }
        let app = Database::open_with(app_url, config.clone()).await?;
        let login = provision(&app, app_url, label, &config).await?;
        let location = format!(
            "{} (database and role {})",
            crate::redact_url(app_url),
            login.database
        );
        let backend = PgBackend::open_as(app_url, Some(&login), &config)?;
        Ok(Database::from_postgres(backend, config, location))
    }

    /// The database of `label` seen as the application database's user (on PostgreSQL, a member
    /// of every label's role), for splitting an older database and for operators' tools; on
    /// SQLite the same file as [`open_label`](Self::open_label). The label must exist already.
    pub async fn open_label_as_owner(
        app_url: &str,
        label: &str,
        config: SqlConfig,
    ) -> Result<Database> {
        check_label(label).map_err(SqlError::InvalidValue)?;
        if !is_postgres(app_url) {
            return Database::open_with(&sqlite_label_location(app_url, label)?, config).await;
        }
        let login = Login {
            database: postgres_name(app_url, label)?,
            role: None,
        };
        let location = format!("{} (database {})", crate::redact_url(app_url), login.database);
        let backend = PgBackend::open_as(app_url, Some(&login), &config)?;
        Ok(Database::from_postgres(backend, config, location))
    }
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The SQLite location of `label` beside the application's file: `dir/lethe.db` gives
/// `sqlite:dir/lethe-<label>.db`; in memory, a private in-memory database.
pub fn sqlite_label_location(app_url: &str, label: &str) -> Result<String> {
    match crate::sqlite_target(app_url)? {
        crate::sqlite::Target::Memory => Ok("sqlite::memory:".to_owned()),
        crate::sqlite::Target::File(path) => {
            let stem = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("lethe")
                .to_owned();
            let name = match path.extension().and_then(|e| e.to_str()) {
                Some(ext) => format!("{stem}-{label}.{ext}"),
                None => format!("{stem}-{label}"),
            };
            Ok(format!("sqlite:{}", path.with_file_name(name).display()))
        }
    }
}

/// The application database's name and user, as libpq would take them from the URL (the user's
/// name is the default database).
fn app_database_and_user(app_url: &str) -> Result<(String, String)> {
    let (url, _) = crate::pgtls::split_url(app_url)?;
    let pg: tokio_postgres::Config = url
        .parse()
        .map_err(|e| SqlError::Unavailable(format!("invalid PostgreSQL URL: {e}")))?;
    let user = pg
        .get_user()
        .map(str::to_owned)
        .or_else(|| std::env::var("USER").ok())
        .ok_or_else(|| SqlError::Unavailable("the PostgreSQL URL names no user".into()))?;
    let database = pg.get_dbname().map_or_else(|| user.clone(), str::to_owned);
    Ok((database, user))
}

/// The name of `label`'s database and role: `<application database>_<label>`, `-` as `_`,
/// shortened with a hash of the whole when longer than PostgreSQL's 63 bytes.
fn postgres_name(app_url: &str, label: &str) -> Result<String> {
    let (database, _) = app_database_and_user(app_url)?;
    let full = format!("{database}_{}", label.replace('-', "_"));
    if full.len() <= 63 {
        return Ok(full);
    }
    let mut hash: u32 = 0x811c_9dc5;
    for byte in full.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let mut cut = 54;
    while !full.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(format!("{}_{hash:08x}", &full[..cut]))
}

/// A PostgreSQL identifier, quoted.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Makes sure `label`'s role and database exist with only the rights the module's notes give,
/// and returns the login of its pool.
async fn provision(
    app: &Database,
    app_url: &str,
    label: &str,
    config: &SqlConfig,
) -> Result<Login> {
    let name = postgres_name(app_url, label)?;
    let ident = quoted(&name);
    app.execute(
        "CREATE TABLE IF NOT EXISTS lethe_label_roles (\
         role TEXT PRIMARY KEY, password TEXT NOT NULL)",
        &[],
    )
    .await?;
    let fresh: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(32)
        .map(char::from)
        .collect();
    app.execute(
        "INSERT INTO lethe_label_roles (role, password) VALUES ($1, $2) ON CONFLICT (role) DO NOTHING",
        &[Value::Text(name.clone()), Value::Text(fresh)],
    )
    .await?;
    let password = match app
        .query(
            "SELECT password FROM lethe_label_roles WHERE role = $1",
            &[Value::Text(name.clone())],
        )
        .await?
        .rows
        .first()
        .and_then(|row| row.first())
    {
        Some(Value::Text(p)) if p.chars().all(|c| c.is_ascii_alphanumeric()) => p.clone(),
        _ => {
            return Err(SqlError::Other(format!(
                "lethe_label_roles holds no usable password for {name}"
            )));
        }
    };
    let exists = |catalog: &'static str, column: &'static str| {
        let name = name.clone();
        async move {
            let rows = app
                .query(
                    &format!("SELECT 1 FROM {catalog} WHERE {column} = $1"),
                    &[Value::Text(name)],
                )
                .await?;
            Result::Ok(!rows.rows.is_empty())
        }
    };
    // Another host may create either between the check and the statement; its error is then
    // followed by a second check.
    if !exists("pg_roles", "rolname").await? {
        let made = app
            .execute(
                &format!("CREATE ROLE {ident} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION"),
                &[],
            )
            .await;
        if made.is_err() && !exists("pg_roles", "rolname").await? {
            made?;
        }
    }
    app.execute(
        &format!("ALTER ROLE {ident} WITH LOGIN PASSWORD '{password}'"),
        &[],
    )
    .await?;
    app.execute(&format!("GRANT {ident} TO CURRENT_USER"), &[])
        .await?;
    if !exists("pg_database", "datname").await? {
        let made = app
            .execute(&format!("CREATE DATABASE {ident}"), &[])
            .await;
        if made.is_err() && !exists("pg_database", "datname").await? {
            made?;
        }
    }
    app.execute(&format!("REVOKE ALL ON DATABASE {ident} FROM PUBLIC"), &[])
        .await?;
    app.execute(
        &format!("GRANT CONNECT, TEMPORARY ON DATABASE {ident} TO {ident}"),
        &[],
    )
    .await?;
    // Its tables go in the database's `public` schema, owned by the URL's user.
    let in_label = Login {
        database: name.clone(),
        role: None,
    };
    let owner = Database::from_postgres(
        PgBackend::open_as(app_url, Some(&in_label), config)?,
        config.clone(),
        name.clone(),
    );
    owner
        .execute(
            &format!("GRANT USAGE, CREATE ON SCHEMA public TO {ident}"),
            &[],
        )
        .await?;
    Ok(Login {
        database: name.clone(),
        role: Some((name, password)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_names_that_cannot_collide() {
        for good in ["cf", "data-jobs", "a1", &"x".repeat(MAX_LABEL_LEN)] {
            assert_eq!(check_label(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "Cf",
            "data_jobs",
            "1cf",
            "-cf",
            "cf/../x",
            "c f",
            "cf\"",
            &"x".repeat(MAX_LABEL_LEN + 1),
        ] {
            assert!(check_label(bad).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn sqlite_labels_live_beside_the_application_file() {
        assert_eq!(
            sqlite_label_location("sqlite:/d/lethe.db", "data-jobs").ok(),
            Some("sqlite:/d/lethe-data-jobs.db".to_owned())
        );
        assert_eq!(
            sqlite_label_location("/d/app", "cf").ok(),
            Some("sqlite:/d/app-cf".to_owned())
        );
        assert_eq!(
            sqlite_label_location("sqlite::memory:", "cf").ok(),
            Some("sqlite::memory:".to_owned())
        );
    }

    #[test]
    fn postgres_names_derive_from_the_application_database() {
        assert_eq!(
            postgres_name("postgres://u:p@h/app", "data-jobs").ok(),
            Some("app_data_jobs".to_owned())
        );
        assert_eq!(
            postgres_name("postgres://u:p@h", "cf").ok(),
            Some("u_cf".to_owned())
        );
        let long = postgres_name(&format!("postgres://u@h/{}", "d".repeat(60)), "cf")
            .expect("a name");
        assert!(long.len() <= 63, "{long}");
        assert_ne!(
            long,
            postgres_name(&format!("postgres://u@h/{}", "d".repeat(61)), "cf").expect("a name")
        );
    }
}
