//! Retry behaviour against deterministically injected failures.
//!
//! SQLite: a second connection holds the write lock (`SQLITE_BUSY`). PostgreSQL: a proxy that
//! refuses connections or cuts them right after a statement reached the server, and a function
//! that raises a serialization failure exactly once (its counter is a sequence, which survives
//! the rollback).

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::proxy::{FaultProxy, Trigger, upstream_of};
use lethe_sql::{Database, RetryPolicy, SqlConfig, SqlError, SqliteConfig, Statement, Value};

fn policy(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        max_throttled: 1,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
    }
}

fn config(max_attempts: u32) -> SqlConfig {
    SqlConfig {
        retry: policy(max_attempts),
        sqlite: SqliteConfig {
            busy_timeout: Duration::from_millis(50),
            ..SqliteConfig::default()
        },
        ..SqlConfig::default()
    }
}

async fn count(db: &Database, sql: &str) -> i64 {
    match db.query(sql, &[]).await.expect("count").rows[0][0] {
        Value::Integer(i) => i,
        ref other => panic!("not an integer: {other:?}"),
    }
}

/// Holds SQLite's write lock from another connection for `hold`.
fn hold_write_lock(path: &str, hold: Duration) -> std::thread::JoinHandle<()> {
    let path = path.trim_start_matches("sqlite:").to_owned();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(path).expect("open locker");
        conn.execute_batch("BEGIN IMMEDIATE").expect("take lock");
        ready_tx.send(()).expect("signal");
        std::thread::sleep(hold);
        conn.execute_batch("COMMIT").expect("release lock");
    });
    ready_rx.recv().expect("locker ready");
    handle
}

#[tokio::test]
async fn sqlite_batch_is_replayed_while_the_database_is_locked() {
    let t = common::sqlite("busy_batch", config(30)).await;
    t.db.execute("CREATE TABLE q (id BIGINT PRIMARY KEY)", &[])
        .await
        .unwrap();
    let locker = hold_write_lock(&t.url, Duration::from_millis(400));
    let out =
        t.db.batch(&[
            Statement::new("INSERT INTO q (id) VALUES ($1)", vec![Value::Integer(1)]),
            Statement::new("INSERT INTO q (id) VALUES ($1)", vec![Value::Integer(2)]),
        ])
        .await;
    locker.join().unwrap();
    assert_eq!(out, Ok(vec![1, 1]));
    assert!(
        t.db.stats().retries >= 1,
        "expected replays, got {:?}",
        t.db.stats()
    );
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM q").await, 2);
}

#[tokio::test]
async fn sqlite_lock_outlasting_retries_is_unavailable_and_applies_nothing() {
    let t = common::sqlite("busy_exhausted", config(2)).await;
    t.db.execute("CREATE TABLE q (id BIGINT PRIMARY KEY)", &[])
        .await
        .unwrap();
    let locker = hold_write_lock(&t.url, Duration::from_millis(1500));
    let out =
        t.db.execute("INSERT INTO q (id) VALUES ($1)", &[Value::Integer(1)])
            .await;
    assert!(matches!(out, Err(SqlError::Unavailable(_))), "{out:?}");
    assert_eq!(t.db.stats().retries, 1);
    // Interactive transactions are never replayed: a locked database at begin is retried (nothing
    // happened yet), but exhausting that is still Unavailable.
    let tx = t.db.begin().await;
    assert!(matches!(tx, Err(SqlError::Unavailable(_))), "{tx:?}");
    locker.join().unwrap();
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM q").await, 0);
}

/// The PostgreSQL URL and an independent direct handle, or `None` to skip.
async fn pg(name: &str) -> Option<(common::TestDb, String)> {
    let t = common::postgres(name, config(1)).await?;
    let url = t.url.clone();
    Some((t, url))
}

#[tokio::test]
async fn postgres_refused_connections_are_retried() {
    let Some((t, url)) = pg("pg_refused").await else {
        return;
    };
    t.db.execute("CREATE TABLE r (id BIGINT PRIMARY KEY)", &[])
        .await
        .unwrap();
    let proxy = FaultProxy::start(upstream_of(&url)).await;
    proxy.refuse_next(2);
    let db = Database::open_with(&proxy.url_for(&url), config(5))
        .await
        .unwrap();
    assert_eq!(
        db.execute("INSERT INTO r (id) VALUES ($1)", &[Value::Integer(1)])
            .await,
        Ok(1)
    );
    assert_eq!(db.stats().retries, 2);
    assert_eq!(proxy.accepted(), 3);
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM r").await, 1);
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_unreachable_server_is_unavailable_after_retries() {
    // A port that nothing listens on: connection refused every time.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let db = Database::open_with(
        &format!("postgres://u:secret@127.0.0.1:{port}/db"),
        config(3),
    )
    .await
    .expect("open is lazy");
    let out = db
        .execute("INSERT INTO r (id) VALUES ($1)", &[Value::Integer(1)])
        .await;
    match &out {
        Err(SqlError::Unavailable(m)) => {
            assert!(m.contains("3 attempts"), "{m}");
            assert!(!m.contains("secret"), "{m}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(db.stats().retries, 2);
    assert!(!format!("{db:?}").contains("secret"));
    assert_eq!(
        db.location(),
        format!("postgres://u:***@127.0.0.1:{port}/db")
    );
}

#[tokio::test]
async fn postgres_read_is_replayed_after_the_connection_drops() {
    let Some((t, url)) = pg("pg_read_replay").await else {
        return;
    };
    t.db.execute("CREATE TABLE r (id BIGINT PRIMARY KEY)", &[])
        .await
        .unwrap();
    t.db.execute("INSERT INTO r (id) VALUES (1), (2)", &[])
        .await
        .unwrap();
    let proxy = FaultProxy::start(upstream_of(&url)).await;
    let db = Database::open_with(&proxy.url_for(&url), config(5))
        .await
        .unwrap();
    proxy.arm(Trigger::Execute);
    let rows = db.query("SELECT id FROM r ORDER BY id", &[]).await.unwrap();
    assert_eq!(
        rows.rows,
        vec![vec![Value::Integer(1)], vec![Value::Integer(2)]]
    );
    assert_eq!(proxy.cuts(), 1);
    assert_eq!(db.stats().retries, 1);
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_write_lost_after_sending_is_outcome_unknown_and_not_replayed() {
    let Some((t, url)) = pg("pg_write_unknown").await else {
        return;
    };
    t.db.execute("CREATE TABLE w (id BIGSERIAL PRIMARY KEY, v TEXT)", &[])
        .await
        .unwrap();
    let proxy = FaultProxy::start(upstream_of(&url)).await;
    let db = Database::open_with(&proxy.url_for(&url), config(5))
        .await
        .unwrap();
    // Warm the connection (and its prepared statement) so the next Execute is the write itself.
    db.query("SELECT 1", &[]).await.unwrap();
    let before = proxy.executes();
    proxy.arm(Trigger::Execute);
    let out = db
        .execute("INSERT INTO w (v) VALUES ($1)", &["once".into()])
        .await;
    assert!(matches!(out, Err(SqlError::OutcomeUnknown(_))), "{out:?}");
    assert_eq!(
        db.stats().retries,
        0,
        "a possibly-applied write must not be retried"
    );
    assert_eq!(
        proxy.executes() - before,
        1,
        "exactly one Execute reached the server"
    );
    // At most once: here the server did get it, so exactly once.
    let applied = count(&t.db, "SELECT COUNT(*) FROM w").await;
    assert!(applied <= 1, "applied {applied} times");
    assert_eq!(applied, 1);
    // The handle recovers: the dead connection is not reused.
    assert_eq!(
        db.execute("INSERT INTO w (v) VALUES ($1)", &["after".into()])
            .await,
        Ok(1)
    );
    t.cleanup().await;
}

/// Creates `fail_once()`, which raises a serialization failure the first time it is called.
async fn create_fail_once(db: &Database) {
    db.execute("CREATE SEQUENCE fail_once_calls", &[])
        .await
        .unwrap();
    db.execute(
        "CREATE FUNCTION fail_once() RETURNS BIGINT LANGUAGE plpgsql AS $$
         BEGIN
           IF nextval('fail_once_calls') = 1 THEN
             RAISE EXCEPTION 'injected serialization failure' USING ERRCODE = '40001';
           END IF;
           RETURN 1;
         END $$",
        &[],
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn postgres_batch_is_replayed_after_a_serialization_failure() {
    let Some((t, url)) = pg("pg_batch_replay").await else {
        return;
    };
    let db = Database::open_with(&url, config(5)).await.unwrap();
    create_fail_once(&db).await;
    db.execute("CREATE TABLE s (id BIGINT PRIMARY KEY)", &[])
        .await
        .unwrap();
    let out = db
        .batch(&[
            Statement::new("INSERT INTO s (id) VALUES ($1)", vec![Value::Integer(1)]),
            Statement::new("UPDATE s SET id = id + fail_once() - 1", vec![]),
            Statement::new("INSERT INTO s (id) VALUES ($1)", vec![Value::Integer(2)]),
        ])
        .await;
    assert_eq!(out, Ok(vec![1, 1, 1]));
    assert_eq!(db.stats().retries, 1);
    // The first attempt was rolled back entirely; the replay applied once.
    assert_eq!(count(&db, "SELECT COUNT(*) FROM s").await, 2);
    assert_eq!(
        count(&db, "SELECT last_value FROM fail_once_calls").await,
        2
    );
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_transaction_conflict_is_reported_not_replayed() {
    let Some((t, url)) = pg("pg_tx_conflict").await else {
        return;
    };
    let db = Database::open_with(&url, config(5)).await.unwrap();
    create_fail_once(&db).await;
    let mut tx = db.begin().await.unwrap();
    let out = tx.query("SELECT fail_once()", &[]).await;
    assert!(matches!(out, Err(SqlError::Conflict(_))), "{out:?}");
    assert!(tx.is_finished());
    assert_eq!(db.stats().retries, 0);
    assert_eq!(
        count(&db, "SELECT last_value FROM fail_once_calls").await,
        1
    );
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_batch_commit_lost_is_outcome_unknown() {
    let Some((t, url)) = pg("pg_commit_unknown").await else {
        return;
    };
    t.db.execute("CREATE TABLE c (id BIGINT PRIMARY KEY)", &[])
        .await
        .unwrap();
    let proxy = FaultProxy::start(upstream_of(&url)).await;
    let db = Database::open_with(&proxy.url_for(&url), config(5))
        .await
        .unwrap();
    proxy.arm(Trigger::QueryContaining("COMMIT".into()));
    let out = db
        .batch(&[Statement::new(
            "INSERT INTO c (id) VALUES ($1)",
            vec![Value::Integer(1)],
        )])
        .await;
    assert!(matches!(out, Err(SqlError::OutcomeUnknown(_))), "{out:?}");
    assert_eq!(db.stats().retries, 0);
    assert_eq!(proxy.cuts(), 1);
    let applied = count(&t.db, "SELECT COUNT(*) FROM c").await;
    assert!(applied <= 1, "applied {applied} times");
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_batch_connection_lost_before_commit_is_replayed() {
    let Some((t, url)) = pg("pg_batch_lost").await else {
        return;
    };
    t.db.execute("CREATE TABLE l (id BIGINT PRIMARY KEY)", &[])
        .await
        .unwrap();
    let proxy = FaultProxy::start(upstream_of(&url)).await;
    let db = Database::open_with(&proxy.url_for(&url), config(5))
        .await
        .unwrap();
    proxy.arm(Trigger::Execute);
    let out = db
        .batch(&[
            Statement::new("INSERT INTO l (id) VALUES ($1)", vec![Value::Integer(1)]),
            Statement::new("INSERT INTO l (id) VALUES ($1)", vec![Value::Integer(2)]),
        ])
        .await;
    assert_eq!(out, Ok(vec![1, 1]));
    assert_eq!(db.stats().retries, 1);
    assert_eq!(proxy.cuts(), 1);
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM l").await, 2);
    t.cleanup().await;
}

#[tokio::test]
async fn postgres_writing_query_lost_after_sending_is_not_replayed() {
    let Some((t, url)) = pg("pg_query_write").await else {
        return;
    };
    t.db.execute("CREATE TABLE qw (id BIGSERIAL PRIMARY KEY, v TEXT)", &[])
        .await
        .unwrap();
    let proxy = FaultProxy::start(upstream_of(&url)).await;
    let db = Database::open_with(&proxy.url_for(&url), config(5))
        .await
        .unwrap();
    proxy.arm(Trigger::Execute);
    // `query` is for reads; a data-modifying statement through it is treated like a write.
    let out = db
        .query("INSERT INTO qw (v) VALUES ($1) RETURNING id", &["x".into()])
        .await;
    assert!(matches!(out, Err(SqlError::OutcomeUnknown(_))), "{out:?}");
    assert_eq!(db.stats().retries, 0);
    assert_eq!(count(&t.db, "SELECT COUNT(*) FROM qw").await, 1);
    t.cleanup().await;
}

#[tokio::test]
async fn contended_batches_each_apply_exactly_once() {
    let config = SqlConfig {
        retry: RetryPolicy {
            max_attempts: 60,
            max_throttled: 1,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(50),
        },
        ..SqlConfig::default()
    };
    for t in common::backends_with("contended_batches", config).await {
        t.db.execute(
            "CREATE TABLE counter (id BIGINT PRIMARY KEY, n BIGINT NOT NULL)",
            &[],
        )
        .await
        .unwrap();
        t.db.execute("CREATE TABLE log (task BIGINT, i BIGINT)", &[])
            .await
            .unwrap();
        t.db.execute("INSERT INTO counter (id, n) VALUES (1, 0)", &[])
            .await
            .unwrap();
        let mut handles = Vec::new();
        for task in 0..8i64 {
            let db = t.db.clone();
            handles.push(tokio::spawn(async move {
                for i in 0..5i64 {
                    // Read-modify-write of one row: serializable transactions conflict, and the
                    // losers are replayed whole.
                    db.batch(&[
                        Statement::new("UPDATE counter SET n = (SELECT n FROM counter WHERE id = 1) + 1 WHERE id = 1", vec![]),
                        Statement::new("INSERT INTO log (task, i) VALUES ($1, $2)", vec![Value::Integer(task), Value::Integer(i)]),
                    ])
                    .await?;
                }
                Ok::<_, SqlError>(())
            }));
        }
        for h in handles {
            h.await
                .unwrap()
                .unwrap_or_else(|e| panic!("{}: {e}", t.label));
        }
        assert_eq!(
            count(&t.db, "SELECT n FROM counter WHERE id = 1").await,
            40,
            "{}",
            t.label
        );
        assert_eq!(
            count(&t.db, "SELECT COUNT(*) FROM log").await,
            40,
            "{}",
            t.label
        );
        t.cleanup().await;
    }
}
