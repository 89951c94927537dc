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
        let location = format!(
            "{} (database {})",
            crate::redact_url(app_url),
            login.database
        );
        let backend = PgBackend::open_as(app_url, Some(&login), &config)?;
        Ok(Database::from_postgres(backend, config, location))
    }
}

/// Whether `url` names a PostgreSQL server (`postgres://` or `postgresql://`); anything else is a
/// SQLite location.
pub fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The SQLite location of `label` beside the application's file: `dir/lethe.db` gives
/// `sqlite:dir/lethe-<label>.db`; in memory, a private in-memory database.
pub fn sqlite_label_location(app_url: &str, label: &str) -> Result<String> {
    let Some(path) = crate::sqlite_file(app_url)? else {
        return Ok("sqlite::memory:".to_owned());
    };
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

/// Key of the advisory lock under which hosts set up labels ("lethe_lb"): PostgreSQL refuses
/// concurrent changes of one role or database (`tuple concurrently updated`).
const PROVISION_LOCK_KEY: i64 = 0x6c65_7468_655f_6c62;

/// Opens a transaction on `db` that holds the set-up lock until it ends.
async fn locked(db: &Database) -> Result<crate::Transaction> {
    let mut tx = db.begin().await?;
    tx.query(
        "SELECT COUNT(*) FROM (SELECT pg_advisory_xact_lock($1)) AS locked",
        &[Value::Integer(PROVISION_LOCK_KEY)],
    )
    .await?;
    Ok(tx)
}

/// Makes sure role `name` exists, may log in with the password kept for it (`fresh` when none
/// is kept yet), and is granted to the URL's user; returns the password.
async fn role(app: &Database, name: &str, fresh: &str) -> Result<String> {
    let ident = quoted(name);
    let mut tx = locked(app).await?;
    tx.execute(
        "CREATE TABLE IF NOT EXISTS lethe_label_roles (\
         role TEXT PRIMARY KEY, password TEXT NOT NULL)",
        &[],
    )
    .await?;
    tx.execute(
        "INSERT INTO lethe_label_roles (role, password) VALUES ($1, $2) ON CONFLICT (role) DO NOTHING",
        &[Value::Text(name.to_owned()), Value::Text(fresh.to_owned())],
    )
    .await?;
    let kept = tx
        .query(
            "SELECT password FROM lethe_label_roles WHERE role = $1",
            &[Value::Text(name.to_owned())],
        )
        .await?;
    let password = match kept.rows.first().and_then(|row| row.first()) {
        Some(Value::Text(p)) if p.chars().all(|c| c.is_ascii_alphanumeric()) => p.clone(),
        _ => {
            return Err(SqlError::Other(format!(
                "lethe_label_roles holds no usable password for {name}"
            )));
        }
    };
    let role_exists = !tx
        .query(
            "SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1",
            &[Value::Text(name.to_owned())],
        )
        .await?
        .rows
        .is_empty();
    if !role_exists {
        tx.execute(
            &format!("CREATE ROLE {ident} NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION"),
            &[],
        )
        .await?;
    }
    tx.execute(
        &format!("ALTER ROLE {ident} WITH LOGIN PASSWORD '{password}'"),
        &[],
    )
    .await?;
    tx.execute(&format!("GRANT {ident} TO CURRENT_USER"), &[])
        .await?;
    tx.commit().await?;

    Ok(password)
}

/// Runs `statements` in one transaction under the set-up lock.
async fn in_lock(db: &Database, statements: Vec<String>) -> Result<()> {
    let mut tx = locked(db).await?;
    for statement in &statements {
        tx.execute(statement, &[]).await?;
    }
    tx.commit().await
}

/// Runs `step` again while it fails with a serialization conflict: a transaction's snapshot is
/// taken before it waits for the set-up lock, so the host that waited retries once the other
/// is done.
async fn until_serialized<T, F, Fut>(mut step: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut attempts = 0;
    loop {
        match step().await {
            Err(SqlError::Conflict(_)) if attempts < 10 => {
                attempts += 1;
                tokio::time::sleep(std::time::Duration::from_millis(20 * attempts)).await;
            }
            other => return other,
        }
    }
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
    let fresh: String = rand::rng()
        .sample_iter(&Alphanumeric)
        .take(32)
        .map(char::from)
        .collect();
    let password = until_serialized(|| role(app, &name, &fresh)).await?;

    // CREATE DATABASE cannot run in a transaction: another host may make it in between, and
    // its error is then followed by a second look.
    let database_exists = || async {
        let found = app
            .query(
                "SELECT 1 FROM pg_catalog.pg_database WHERE datname = $1",
                &[Value::Text(name.clone())],
            )
            .await?;
        Result::Ok(!found.rows.is_empty())
    };
    if !database_exists().await? {
        let made = app.execute(&format!("CREATE DATABASE {ident}"), &[]).await;
        if made.is_err() && !database_exists().await? {
            made?;
        }
    }
    until_serialized(|| {
        in_lock(
            app,
            vec![
                format!("REVOKE ALL ON DATABASE {ident} FROM PUBLIC"),
                format!("GRANT CONNECT, TEMPORARY ON DATABASE {ident} TO {ident}"),
            ],
        )
    })
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
    until_serialized(|| {
        in_lock(
            &owner,
            vec![format!("GRANT USAGE, CREATE ON SCHEMA public TO {ident}")],
        )
    })
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
        let long =
            postgres_name(&format!("postgres://u@h/{}", "d".repeat(60)), "cf").expect("a name");
        assert!(long.len() <= 63, "{long}");
        assert_ne!(
            long,
            postgres_name(&format!("postgres://u@h/{}", "d".repeat(61)), "cf").expect("a name")
        );
    }
}
