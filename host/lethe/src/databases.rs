//! The application's databases, one per label (`sqlite_databases`): opening them, applying each
//! label's components' migrations to it, and splitting a database from before labels into them.
//!
//! Each label's database is derived from the application's location (`lethe_sql`'s `label`
//! module): a SQLite file each beside `lethe.db`, or a PostgreSQL database and login role each.
//! A component's `sql` calls reach its label's database alone.
//!
//! **Splitting an older database.** Before labels, every component shared the application's own
//! database (`lethe.db`, or the `--database-url` database itself). When that database holds
//! lethe's tables and has not been split yet, start-up first brings it up to date with every
//! component's migrations, as before; then each label's database, freshly migrated, takes the
//! rows of each of its tables from the table of the same name there, in one transaction per
//! label that also records the split in the label (a `lethe_split_from` row), so a crash leaves
//! each label either split or untouched and the next start finishes the rest. Once every label
//! is split, the older database records it (`lethe_split_into`), so a label added later starts
//! empty. The older database itself is left as it was; nothing is deleted from it.
//!
//! A table that several labels have (`reconcile_backoff`, which every reconciler once shared) is
//! copied to each; a reconciler reads only its own rows of it, so another's are inert there.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use lethe_sql::{Backend, Database, SqlConfig, Value};

use crate::manifest::Manifest;

/// Each label's database.
pub type Databases = BTreeMap<String, Database>;

/// What [`open`] did: the migration versions applied now, per component, and the labels split
/// from an older database now.
#[derive(Debug, Default)]
pub struct Opened {
    /// `(component, versions)` for each component with migrations.
    pub applied: Vec<(String, Vec<i64>)>,
    /// The labels that took their rows from the older single database in this call.
    pub split: Vec<String>,
}

/// The application's database location: `database_url`, else the manifest variable
/// `database_url`, else SQLite `lethe.db` in `data_dir`.
pub fn app_location(manifest: &Manifest, database_url: Option<&str>, data_dir: &Path) -> String {
    database_url
        .map(str::to_string)
        .or_else(|| {
            crate::caps::config::app_variable(manifest, "database_url").filter(|u| !u.is_empty())
        })
        .unwrap_or_else(|| format!("sqlite:{}", data_dir.join("lethe.db").display()))
}

/// Opens every label's database, applies each label's components' migrations to it, and splits
/// an older single database into the labels (see the module's notes).
pub async fn open(manifest: &Manifest, app_url: &str) -> anyhow::Result<(Databases, Opened)> {
    let redacted = lethe_sql::redact_url(app_url);
    let mut databases = Databases::new();
    let mut opened = Opened::default();
    for (label, components) in manifest.database_labels() {
        let db = Database::open_label(app_url, &label, SqlConfig::default())
            .await
            .with_context(|| format!("cannot open database `{label}` of {redacted}"))?;
        for id in components {
            let Some(dir) = manifest
                .components
                .get(&id)
                .and_then(|d| d.grants.migrations.as_ref())
            else {
                continue;
            };
            let migrations = crate::migrations::load(&id, dir)?;
            let now = db.migrate(&migrations).await.with_context(|| {
                format!("applying the migrations of component `{id}` to database `{label}`")
            })?;
            opened.applied.push((id, now));
        }
        databases.insert(label, db);
    }
    opened.split = split_older(manifest, app_url, &databases).await?;
    if !opened.split.is_empty() {
        tracing::info!(
            "split the database {redacted} into the labels {}; it is kept as it was and may be removed",
            opened.split.join(", ")
        );
    }
    Ok((databases, opened))
}

/// Table names of lethe's own bookkeeping, never copied.
fn is_lethes_own(table: &str) -> bool {
    table.starts_with("lethe_")
}

/// Splits the older single database at `app_url`, if there is one that is not split yet, into
/// `databases`; returns the labels split now.
async fn split_older(
    manifest: &Manifest,
    app_url: &str,
    databases: &Databases,
) -> anyhow::Result<Vec<String>> {
    let Some(older) = open_older(app_url).await? else {
        return Ok(Vec::new());
    };
    if has_table(&older, "lethe_split_into").await? {
        return Ok(Vec::new());
    }
    let mut pending = Vec::new();
    for label in databases.keys() {
        let owner = Database::open_label_as_owner(app_url, label, SqlConfig::default()).await?;
        if !already_split(&owner).await? {
            pending.push((label.clone(), owner));
        }
    }
    if !pending.is_empty() {
        // Up to date first, so each table has the shape its label's migrations gave it.
        for (id, decl) in &manifest.components {
            if let Some(dir) = &decl.grants.migrations {
                older
                    .migrate(&crate::migrations::load(id, dir)?)
                    .await
                    .with_context(|| {
                        format!("bringing the older database up to date with `{id}`'s migrations")
                    })?;
            }
        }
    }
    let mut split = Vec::new();
    for (label, owner) in pending {
        if copy_into(&older, &owner)
            .await
            .with_context(|| format!("splitting the older database into `{label}`"))?
        {
            split.push(label);
        }
    }
    create_table(
        &older,
        "CREATE TABLE IF NOT EXISTS lethe_split_into (label TEXT NOT NULL, split_at TEXT NOT NULL, CONSTRAINT lethe_split_into_pk PRIMARY KEY (label))",
    )
    .await?;
    for label in databases.keys() {
        older
            .execute(
                "INSERT INTO lethe_split_into (label, split_at) VALUES ($1, $2) ON CONFLICT (label) DO NOTHING",
                &[Value::Text(label.clone()), Value::Text(now())],
            )
            .await?;
    }
    Ok(split)
}

/// The application's own database when it holds lethe's tables from before labels.
async fn open_older(app_url: &str) -> anyhow::Result<Option<Database>> {
    if !lethe_sql::is_postgres(app_url) {
        // In memory, nothing is older than this process; a file, only if it is there.
        match lethe_sql::sqlite_file(app_url)? {
            Some(file) if file.exists() => {}
            _ => return Ok(None),
        }
    }
    let older = Database::open(app_url).await?;
    Ok(has_table(&older, "lethe_schema_migrations")
        .await?
        .then_some(older))
}

/// Whether `db` (in its current schema) has the table `name`.
async fn has_table(db: &Database, name: &str) -> anyhow::Result<bool> {
    let found = db
        .query(
            match db.backend() {
                Backend::Sqlite => "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = $1",
                Backend::Postgres => {
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1"
                }
            },
            &[Value::Text(name.to_owned())],
        )
        .await?;
    Ok(!found.rows.is_empty())
}

/// The tables of `db`, in the order they were made (so each comes after those it refers to).
async fn tables(db: &Database) -> anyhow::Result<Vec<String>> {
    let rows = db
        .query(
            match db.backend() {
                Backend::Sqlite => {
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
                }
                Backend::Postgres => {
                    "SELECT c.relname::text FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') ORDER BY c.oid"
                }
            },
            &[],
        )
        .await?;
    Ok(rows
        .rows
        .into_iter()
        .filter_map(|row| match row.into_iter().next() {
            Some(Value::Text(name)) => Some(name),
            _ => None,
        })
        .collect())
}

async fn columns(db: &Database, table: &str) -> anyhow::Result<Vec<String>> {
    Ok(db
        .query(&format!("SELECT * FROM {} WHERE 1 = 0", quoted(table)), &[])
        .await?
        .columns)
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

async fn already_split(owner: &Database) -> anyhow::Result<bool> {
    Ok(has_table(owner, "lethe_split_from").await?
        && !owner
            .query("SELECT 1 FROM lethe_split_from", &[])
            .await?
            .rows
            .is_empty())
}

/// Most parameters in one `INSERT` of a copy (SQLite allows 32,766, PostgreSQL 65,535).
const PARAMS_PER_INSERT: usize = 900;

/// Copies into the label's database (as its owner), in one transaction, the rows of each of its
/// tables that `older` has a table of the same name for; `false` when another host did it first.
async fn copy_into(older: &Database, owner: &Database) -> anyhow::Result<bool> {
    let older_tables = tables(older).await?;
    let mut copies: Vec<Copy> = Vec::new();
    for table in tables(owner).await? {
        if is_lethes_own(&table) || !older_tables.contains(&table) {
            continue;
        }
        let wanted = columns(owner, &table).await?;
        let there = columns(older, &table).await?;
        let shared: Vec<String> = wanted.into_iter().filter(|c| there.contains(c)).collect();
        let list = shared
            .iter()
            .map(|c| quoted(c))
            .collect::<Vec<_>>()
            .join(", ");
        let rows = older
            .query(&format!("SELECT {list} FROM {}", quoted(&table)), &[])
            .await?
            .rows;
        copies.push((table, list, shared.len(), rows));
    }
    create_table(
        owner,
        "CREATE TABLE IF NOT EXISTS lethe_split_from (source TEXT NOT NULL, split_at TEXT NOT NULL, CONSTRAINT lethe_split_from_pk PRIMARY KEY (source))",
    )
    .await?;
    match copy_rows(older, owner, &copies).await {
        Ok(copied) => Ok(copied),
        // Another host split it at the same time, and its transaction won.
        Err(e) if already_split(owner).await.unwrap_or(false) => {
            tracing::debug!("another host split this label first ({e:#})");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// One table's copy: its name, its column list, how many columns, and the rows.
type Copy = (String, String, usize, Vec<Vec<Value>>);

/// The transaction of [`copy_into`]: `false` when the label was split already.
async fn copy_rows(older: &Database, owner: &Database, copies: &[Copy]) -> anyhow::Result<bool> {
    let mut tx = owner.begin().await?;
    if !tx
        .query("SELECT 1 FROM lethe_split_from", &[])
        .await?
        .rows
        .is_empty()
    {
        tx.rollback().await?;
        return Ok(false);
    }
    // What the label's migrations seeded gives way to what the older database holds.
    for (table, ..) in copies.iter().rev() {
        tx.execute(&format!("DELETE FROM {}", quoted(table)), &[])
            .await?;
    }
    for (table, list, width, rows) in copies {
        if *width == 0 {
            continue;
        }
        for chunk in rows.chunks((PARAMS_PER_INSERT / width).max(1)) {
            let mut placeholders = Vec::with_capacity(chunk.len());
            let mut params = Vec::with_capacity(chunk.len() * width);
            for row in chunk {
                let first = params.len();
                placeholders.push(format!(
                    "({})",
                    (1..=*width)
                        .map(|i| format!("${}", first + i))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                params.extend(row.iter().cloned());
            }
            tx.execute(
                &format!(
                    "INSERT INTO {} ({list}) VALUES {}",
                    quoted(table),
                    placeholders.join(", ")
                ),
                &params,
            )
            .await?;
        }
    }
    tx.execute(
        "INSERT INTO lethe_split_from (source, split_at) VALUES ($1, $2)",
        &[Value::Text(older.location().to_owned()), Value::Text(now())],
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Runs a `CREATE TABLE IF NOT EXISTS`: PostgreSQL fails one of two hosts that run it at the
/// same instant, and the second try finds the table.
async fn create_table(db: &Database, ddl: &str) -> anyhow::Result<()> {
    if db.execute(ddl, &[]).await.is_err() {
        db.execute(ddl, &[]).await?;
    }
    Ok(())
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One row in every table of the shipped components, written as the database was before
    /// labels: every component's migrations in the one database.
    const ROWS: &[&str] = &[
        "INSERT INTO smoke_note (name, body) VALUES ('n', 'kept')",
        "INSERT INTO smoke_tick (fired_at) VALUES (7)",
        "INSERT INTO data_job (uid, team, name, description, config, created_at) VALUES ('u1', 't', 'j', 'd', '{}', 1)",
        "INSERT INTO desired_data_job_deployment (job_uid, team, job_name, job_version, image, schedule, enabled, resources, spec_hash, updated_at) \
         VALUES ('u1', 't', 'j', 'v1', 'img', '* * * * *', TRUE, '{}', 'h', 2)",
        "INSERT INTO actual_data_job_deployment (job_uid, team, job_name, job_version, image, schedule, enabled, resources, spec_hash, cronjob_name, cronjob_uid, resource_version, applied_at, generation) \
         VALUES ('u1', 't', 'j', 'v1', 'img', '* * * * *', FALSE, '{}', 'h', 'cj', 'cu', '5', 3, 4)",
        "INSERT INTO data_job_deletion (guid, operation, job_uid, team, job_name, requested_at, completed_at) VALUES ('g', 'deployment.delete', 'u1', 't', 'j', 3, NULL)",
        "UPDATE data_job_revision SET value = 41 WHERE name = 'desired'",
        "INSERT INTO data_job_change (job_uid, revision) VALUES ('u1', 41)",
        "INSERT INTO data_job_sync_follow (name, value) VALUES ('bookmark', 'b1')",
        "INSERT INTO reconcile_backoff (reconciler, object_key, attempts, next_attempt_ms, parked_on, last_error) VALUES ('data-jobs', 'u1', 2, 9, NULL, 'e')",
        "INSERT INTO reconcile_backoff (reconciler, object_key, attempts, next_attempt_ms, parked_on, last_error) VALUES ('cf', 'org/x', 1, 9, NULL, 'e')",
        "INSERT INTO cf_reconcile_state (name, value) VALUES ('bookmark', 'c1')",
        "INSERT INTO cf_reconcile_deletions (object_key, since, blocked_by, next_visit_ms) VALUES ('org/x', 's', NULL, 5)",
    ];

    fn shipped() -> Manifest {
        crate::manifest::load(&Path::new(crate::REPO_ROOT).join("spin.toml")).expect("spin.toml")
    }

    async fn older_single_database(manifest: &Manifest, app_url: &str) {
        let db = Database::open(app_url)
            .await
            .expect("open the older database");
        for (id, decl) in &manifest.components {
            if let Some(dir) = &decl.grants.migrations {
                let migrations = crate::migrations::load(id, dir).expect("migrations");
                db.migrate(&migrations).await.expect("migrate");
            }
        }
        for row in ROWS {
            db.execute(row, &[])
                .await
                .unwrap_or_else(|e| panic!("{row}: {e}"));
        }
    }

    async fn one(db: &Database, sql: &str) -> Vec<Vec<Value>> {
        db.query(sql, &[])
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .rows
    }

    /// Every row of the older database is in its label's database, once; each label has only
    /// its own components' tables; a second start (or two hosts at once) copies nothing again,
    /// so what was written after the split stays.
    async fn splits_into_labels(app_url: &str) {
        let manifest = shipped();
        older_single_database(&manifest, app_url).await;
        let (first, second) = tokio::join!(open(&manifest, app_url), open(&manifest, app_url));
        let (dbs, first) = first.expect("first host");
        let (_, second) = second.expect("second host at the same time");
        let mut split = [first.split, second.split].concat();
        split.sort();
        assert_eq!(split, ["cf", "data-jobs", "smoke"], "each label split once");

        let (smoke, jobs, cf) = (&dbs["smoke"], &dbs["data-jobs"], &dbs["cf"]);
        assert_eq!(
            one(smoke, "SELECT body FROM smoke_note").await,
            [[Value::Text("kept".into())]]
        );
        assert_eq!(
            one(smoke, "SELECT fired_at FROM smoke_tick").await,
            [[Value::Integer(7)]]
        );
        for table in [
            "data_job",
            "desired_data_job_deployment",
            "actual_data_job_deployment",
            "data_job_deletion",
            "data_job_change",
            "data_job_sync_follow",
        ] {
            let count = one(jobs, &format!("SELECT COUNT(*) FROM {table}")).await;
            assert_eq!(count, [[Value::Integer(1)]], "{table}");
        }
        assert_eq!(
            one(jobs, "SELECT value FROM data_job_revision").await,
            [[Value::Integer(41)]],
            "the migration's seed gave way to the older value"
        );
        assert_eq!(
            one(jobs, "SELECT generation FROM actual_data_job_deployment").await,
            [[Value::Integer(4)]]
        );
        assert_eq!(
            one(cf, "SELECT value FROM cf_reconcile_state").await,
            [[Value::Text("c1".into())]]
        );
        assert_eq!(
            one(cf, "SELECT COUNT(*) FROM cf_reconcile_deletions").await,
            [[Value::Integer(1)]]
        );
        let backoff = "SELECT reconciler FROM reconcile_backoff ORDER BY reconciler";
        assert_eq!(
            one(cf, backoff).await.len(),
            2,
            "the shared table goes to each"
        );
        for (db, absent) in [
            (smoke, "data_job"),
            (smoke, "cf_reconcile_state"),
            (cf, "data_job"),
            (cf, "smoke_note"),
            (jobs, "cf_reconcile_state"),
            (jobs, "smoke_note"),
        ] {
            assert!(!has_table(db, absent).await.expect("catalog"), "{absent}");
        }

        jobs.execute("UPDATE data_job_revision SET value = 42", &[])
            .await
            .expect("a write after the split");
        let (dbs, again) = open(&manifest, app_url).await.expect("restart");
        assert!(again.split.is_empty(), "{:?}", again.split);
        assert_eq!(
            one(&dbs["data-jobs"], "SELECT value FROM data_job_revision").await,
            [[Value::Integer(42)]],
            "a restart copies nothing over what the label wrote since"
        );

        // A label that appears after the split starts empty.
        let renamed = std::fs::read_to_string(Path::new(crate::REPO_ROOT).join("spin.toml"))
            .expect("spin.toml")
            .replace(
                "sqlite_databases = [\"cf\"]",
                "sqlite_databases = [\"cf-two\"]",
            )
            .replace("sqlite_database = \"cf\"", "sqlite_database = \"cf-two\"");
        let later = crate::manifest::parse(&renamed, Path::new(crate::REPO_ROOT)).expect("parse");
        let (dbs, opened) = open(&later, app_url).await.expect("a new label");
        assert!(opened.split.is_empty());
        assert!(
            one(&dbs["cf-two"], "SELECT * FROM cf_reconcile_state")
                .await
                .is_empty()
        );
    }

    #[tokio::test]
    async fn an_older_sqlite_database_is_split_into_labels_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        splits_into_labels(&format!("sqlite:{}", dir.path().join("lethe.db").display())).await;
        assert!(
            dir.path().join("lethe.db").exists(),
            "the older file is kept"
        );
    }

    #[tokio::test]
    async fn an_older_postgres_database_is_split_into_labels_once() {
        let Some(server) = lethe_sql::testing::postgres_url_or_skip("split").await else {
            return;
        };
        let (name, url) = lethe_sql::testing::fresh_database(&server, "split").await;
        let admin = Database::open(&server).await.expect("server");
        splits_into_labels(&url).await;
        for label in ["cf", "cf_two", "data_jobs", "smoke"] {
            let db = format!("{name}_{label}");
            for statement in [
                format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
                format!("DROP ROLE IF EXISTS {db}"),
            ] {
                admin.execute(&statement, &[]).await.expect("clean up");
            }
        }
        admin
            .execute(&format!("DROP DATABASE {name} WITH (FORCE)"), &[])
            .await
            .expect("clean up");
    }
}
