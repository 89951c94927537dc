//! A database per label: what one label's database lets a statement reach of another's, on
//! SQLite and (when reachable) PostgreSQL. Nothing, whatever the SQL says.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use lethe_sql::{Database, SqlConfig, SqlError, Value};

/// Writes a secret into label `b` and returns both labels' databases.
async fn two_labels(app_url: &str) -> (Database, Database) {
    let a = Database::open_label(app_url, "a", SqlConfig::default())
        .await
        .expect("open label a");
    let b = Database::open_label(app_url, "b", SqlConfig::default())
        .await
        .expect("open label b");
    b.execute("CREATE TABLE secret (v TEXT NOT NULL)", &[])
        .await
        .expect("create in b");
    b.execute(
        "INSERT INTO secret (v) VALUES ($1)",
        &[Value::Text("b's".into())],
    )
    .await
    .expect("write in b");
    a.execute("CREATE TABLE mine (v TEXT NOT NULL)", &[])
        .await
        .expect("create in a");
    (a, b)
}

fn texts(rows: &lethe_sql::RowSet) -> Vec<String> {
    rows.rows
        .iter()
        .map(|r| match &r[0] {
            Value::Text(t) => t.clone(),
            other => panic!("expected text, got {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn a_sqlite_label_reaches_no_other_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let app_url = format!("sqlite:{}", dir.path().join("lethe.db").display());
    let (a, b) = two_labels(&app_url).await;
    assert!(dir.path().join("lethe-a.db").exists());
    assert!(dir.path().join("lethe-b.db").exists());
    assert!(
        !dir.path().join("lethe.db").exists(),
        "the application's own file is not made for labels"
    );

    let other = dir.path().join("lethe-b.db");
    for attempt in [
        format!("ATTACH DATABASE '{}' AS b", other.display()),
        format!("ATTACH DATABASE 'file:{}?mode=ro' AS b", other.display()),
        "ATTACH DATABASE ':memory:' AS scratch".to_owned(),
        format!("VACUUM INTO '{}'", dir.path().join("copy.db").display()),
    ] {
        match a.execute(&attempt, &[]).await {
            Err(SqlError::Denied(_) | SqlError::InvalidStatement(_)) => {}
            other => panic!("{attempt}: {other:?}"),
        }
    }
    assert!(!dir.path().join("copy.db").exists());
    assert!(matches!(
        a.execute("ATTACH DATABASE 'x.db' AS x", &[]).await,
        Err(SqlError::Denied(_))
    ));
    let names = a
        .query("SELECT name FROM sqlite_master WHERE type = 'table'", &[])
        .await
        .expect("read a's catalog");
    assert_eq!(texts(&names), ["mine"]);
    assert!(matches!(
        a.query("SELECT v FROM secret", &[]).await,
        Err(SqlError::InvalidStatement(_))
    ));
    let kept = b.query("SELECT v FROM secret", &[]).await.expect("read b");
    assert_eq!(texts(&kept), ["b's"]);
}

#[tokio::test]
async fn a_postgres_label_reaches_nothing_of_another() {
    let Some(server) = lethe_sql::testing::postgres_url_or_skip("labels").await else {
        return;
    };
    let (app_db, app_url) = lethe_sql::testing::fresh_database(&server, "lbl").await;
    let admin = Database::open(&server).await.expect("open the server");
    let (a, b) = two_labels(&app_url).await;
    let (role_a, role_b) = (format!("{app_db}_a"), format!("{app_db}_b"));

    let who = a.query("SELECT current_user", &[]).await.expect("whoami");
    assert_eq!(texts(&who), [role_a.as_str()]);
    for attempt in [
        format!("SELECT v FROM {role_b}.public.secret"),
        "SELECT v FROM secret".to_owned(),
        format!("SET ROLE {role_b}"),
        "SET ROLE lethe".to_owned(),
        "SET SESSION AUTHORIZATION lethe".to_owned(),
        "SELECT * FROM lethe_label_roles".to_owned(),
        "CREATE EXTENSION dblink".to_owned(),
    ] {
        match a.query(&attempt, &[]).await {
            Err(SqlError::Denied(_) | SqlError::InvalidStatement(_) | SqlError::Other(_)) => {}
            other => panic!("{attempt}: {other:?}"),
        }
    }
    assert!(matches!(
        a.execute(&format!("SET ROLE {role_b}"), &[]).await,
        Err(SqlError::Denied(_))
    ));
    a.execute("RESET ROLE", &[]).await.expect("RESET ROLE");
    let who = a.query("SELECT current_user", &[]).await.expect("whoami");
    assert_eq!(texts(&who), [role_a.as_str()], "RESET ROLE stays a's");
    let seen = a
        .query(
            "SELECT relname::text FROM pg_catalog.pg_class WHERE relname IN ('secret', 'mine')",
            &[],
        )
        .await
        .expect("read the catalog");
    assert_eq!(texts(&seen), ["mine"], "the catalog is a's database's");

    // Opening again (a second host, a restart) finds the same role and password.
    let again = Database::open_label(&app_url, "b", SqlConfig::default())
        .await
        .expect("reopen label b");
    let kept = again
        .query("SELECT v FROM secret", &[])
        .await
        .expect("read b");
    assert_eq!(texts(&kept), ["b's"]);
    let owner = Database::open_label_as_owner(&app_url, "b", SqlConfig::default())
        .await
        .expect("b as the application's user");
    let read = owner
        .query("SELECT v FROM secret", &[])
        .await
        .expect("the application's user reads every label");
    assert_eq!(texts(&read), ["b's"]);

    drop((a, b, again, owner));
    for statement in [
        format!("DROP DATABASE {role_a} WITH (FORCE)"),
        format!("DROP DATABASE {role_b} WITH (FORCE)"),
        format!("DROP DATABASE {app_db} WITH (FORCE)"),
        format!("DROP ROLE {role_a}"),
        format!("DROP ROLE {role_b}"),
    ] {
        admin.execute(&statement, &[]).await.expect("clean up");
    }
}
