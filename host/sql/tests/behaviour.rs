//! Behaviour of the SQL capability, run against SQLite and (when reachable) PostgreSQL.

// A test crate: a failed expectation is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use lethe_sql::{Backend, Database, Migration, SqlError, Statement, Value};

fn ints(rows: &lethe_sql::RowSet) -> Vec<i64> {
    rows.rows
        .iter()
        .map(|r| match &r[0] {
            Value::Integer(i) => *i,
            other => panic!("expected integer, got {other:?}"),
        })
        .collect()
}

async fn count(db: &Database, table: &str) -> i64 {
    let rows = db
        .query(&format!("SELECT COUNT(*) FROM {table}"), &[])
        .await
        .expect("count");
    ints(&rows)[0]
}

#[tokio::test]
async fn values_round_trip() {
    for t in common::backends("values_round_trip").await {
        let db = &t.db;
        db.execute(
            "CREATE TABLE vals (id BIGINT PRIMARY KEY, r DOUBLE PRECISION, s TEXT, b BYTEA, f BOOLEAN, n BIGINT)",
            &[],
        )
        .await
        .unwrap_or_else(|e| panic!("{}: {e}", t.label));
        let blob = vec![0u8, 1, 2, 255, 0];
        let n = db
            .execute(
                "INSERT INTO vals (id, r, s, b, f, n) VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    Value::Integer(i64::MAX),
                    Value::Real(-1.5),
                    Value::Text("héllo 'quoted' $1 ✓".into()),
                    Value::Blob(blob.clone()),
                    Value::Boolean(true),
                    Value::Null,
                ],
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.label));
        assert_eq!(n, 1, "{}", t.label);
        let rows = db
            .query(
                "SELECT id, r, s, b, f, n FROM vals WHERE id = $1",
                &[Value::Integer(i64::MAX)],
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.label));
        assert_eq!(rows.columns, ["id", "r", "s", "b", "f", "n"], "{}", t.label);
        assert_eq!(rows.rows.len(), 1);
        let row = &rows.rows[0];
        assert_eq!(row[0], Value::Integer(i64::MAX));
        assert_eq!(row[1], Value::Real(-1.5));
        assert_eq!(row[2], Value::Text("héllo 'quoted' $1 ✓".into()));
        assert_eq!(row[3], Value::Blob(blob));
        // SQLite has no boolean type: it stores 0/1.
        let expected_flag = match db.backend() {
            Backend::Sqlite => Value::Integer(1),
            Backend::Postgres => Value::Boolean(true),
        };
        assert_eq!(row[4], expected_flag, "{}", t.label);
        assert_eq!(row[5], Value::Null);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn placeholders_inside_literals_are_left_alone() {
    for t in common::backends("placeholders_literals").await {
        let rows =
            t.db.query(
                "SELECT '$1' AS lit, $1 AS p /* $2 */ -- $3\n",
                &[Value::Text("x".into())],
            )
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.label));
        assert_eq!(rows.columns, ["lit", "p"]);
        assert_eq!(
            rows.rows,
            vec![vec![Value::Text("$1".into()), Value::Text("x".into())]],
            "{}",
            t.label
        );
        t.cleanup().await;
    }
}

#[tokio::test]
async fn execute_reports_affected_rows() {
    for t in common::backends("affected_rows").await {
        let db = &t.db;
        assert_eq!(
            db.execute("CREATE TABLE a (id BIGINT PRIMARY KEY, v TEXT)", &[])
                .await,
            Ok(0)
        );
        for i in 0..3 {
            db.execute(
                "INSERT INTO a (id, v) VALUES ($1, $2)",
                &[Value::Integer(i), "x".into()],
            )
            .await
            .unwrap();
        }
        assert_eq!(
            db.execute(
                "UPDATE a SET v = $1 WHERE id >= $2",
                &["y".into(), Value::Integer(1)]
            )
            .await,
            Ok(2),
            "{}",
            t.label
        );
        assert_eq!(
            db.execute("DELETE FROM a WHERE id = $1", &[Value::Integer(99)])
                .await,
            Ok(0)
        );
        // DDL after DML must not report the previous statement's count.
        assert_eq!(
            db.execute("CREATE INDEX a_v ON a (v)", &[]).await,
            Ok(0),
            "{}",
            t.label
        );
        // A RETURNING write through query gives its rows.
        let rows = db
            .query(
                "INSERT INTO a (id, v) VALUES ($1, $2) RETURNING id",
                &[Value::Integer(7), "z".into()],
            )
            .await
            .unwrap();
        assert_eq!(ints(&rows), [7]);
        // And through execute it is counted.
        assert_eq!(
            db.execute(
                "INSERT INTO a (id, v) VALUES ($1, $2) RETURNING id",
                &[Value::Integer(8), "z".into()]
            )
            .await,
            Ok(1),
            "{}",
            t.label
        );
        t.cleanup().await;
    }
}

#[tokio::test]
async fn errors_are_classified() {
    for t in common::backends("errors_classified").await {
        let db = &t.db;
        db.execute(
            "CREATE TABLE parent (id BIGINT PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
            &[],
        )
        .await
        .unwrap();
        db.execute(
            "CREATE TABLE child (id BIGINT PRIMARY KEY, parent_id BIGINT NOT NULL REFERENCES parent(id), qty BIGINT CONSTRAINT qty_positive CHECK (qty > 0))",
            &[],
        )
        .await
        .unwrap();
        db.execute(
            "INSERT INTO parent (id, name) VALUES ($1, $2)",
            &[Value::Integer(1), "p".into()],
        )
        .await
        .unwrap();

        let dup = db
            .execute(
                "INSERT INTO parent (id, name) VALUES ($1, $2)",
                &[Value::Integer(2), "p".into()],
            )
            .await;
        assert!(
            matches!(dup, Err(SqlError::ConstraintViolation(_))),
            "{}: {dup:?}",
            t.label
        );
        if t.label == "postgres" {
            assert_eq!(
                dup,
                Err(SqlError::ConstraintViolation("parent_name_key".into()))
            );
        }
        let null = db
            .execute(
                "INSERT INTO parent (id, name) VALUES ($1, $2)",
                &[Value::Integer(3), Value::Null],
            )
            .await;
        assert!(
            matches!(null, Err(SqlError::ConstraintViolation(_))),
            "{}: {null:?}",
            t.label
        );
        let fk = db
            .execute(
                "INSERT INTO child (id, parent_id, qty) VALUES ($1, $2, $3)",
                &[Value::Integer(1), Value::Integer(42), Value::Integer(1)],
            )
            .await;
        assert!(
            matches!(fk, Err(SqlError::ConstraintViolation(_))),
            "{}: {fk:?}",
            t.label
        );
        let check = db
            .execute(
                "INSERT INTO child (id, parent_id, qty) VALUES ($1, $2, $3)",
                &[Value::Integer(1), Value::Integer(1), Value::Integer(0)],
            )
            .await;
        match &check {
            Err(SqlError::ConstraintViolation(m)) => {
                assert!(m.contains("qty_positive"), "{}: {m}", t.label)
            }
            other => panic!("{}: {other:?}", t.label),
        }

        let syntax = db.query("SELEC 1", &[]).await;
        assert!(
            matches!(syntax, Err(SqlError::InvalidStatement(_))),
            "{}: {syntax:?}",
            t.label
        );
        let missing = db.query("SELECT * FROM no_such_table", &[]).await;
        assert!(
            matches!(missing, Err(SqlError::InvalidStatement(_))),
            "{}: {missing:?}",
            t.label
        );
        let column = db.query("SELECT no_such_column FROM parent", &[]).await;
        assert!(
            matches!(column, Err(SqlError::InvalidStatement(_))),
            "{}: {column:?}",
            t.label
        );
        let two = db
            .execute("DELETE FROM child; DELETE FROM parent", &[])
            .await;
        assert!(
            matches!(two, Err(SqlError::InvalidStatement(_))),
            "{}: {two:?}",
            t.label
        );
        let begin = db.execute("BEGIN", &[]).await;
        assert!(
            matches!(begin, Err(SqlError::InvalidStatement(_))),
            "{}: {begin:?}",
            t.label
        );

        let too_few = db
            .query(
                "SELECT * FROM parent WHERE id = $1 AND name = $2",
                &[Value::Integer(1)],
            )
            .await;
        assert!(
            matches!(too_few, Err(SqlError::InvalidValue(_))),
            "{}: {too_few:?}",
            t.label
        );
        let too_many = db
            .query(
                "SELECT * FROM parent WHERE id = $1",
                &[Value::Integer(1), Value::Integer(2)],
            )
            .await;
        assert!(
            matches!(too_many, Err(SqlError::InvalidValue(_))),
            "{}: {too_many:?}",
            t.label
        );

        // Nothing above was applied.
        assert_eq!(count(db, "parent").await, 1);
        assert_eq!(count(db, "child").await, 0);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn batch_is_all_or_nothing() {
    for t in common::backends("batch_atomic").await {
        let db = &t.db;
        db.execute("CREATE TABLE b (id BIGINT PRIMARY KEY)", &[])
            .await
            .unwrap();
        let ok = db
            .batch(&[
                Statement::new("INSERT INTO b (id) VALUES ($1)", vec![Value::Integer(1)]),
                Statement::new("INSERT INTO b (id) VALUES ($1)", vec![Value::Integer(2)]),
                Statement::new(
                    "UPDATE b SET id = id + 10 WHERE id >= $1",
                    vec![Value::Integer(0)],
                ),
            ])
            .await;
        assert_eq!(ok, Ok(vec![1, 1, 2]), "{}", t.label);
        let failed = db
            .batch(&[
                Statement::new("INSERT INTO b (id) VALUES ($1)", vec![Value::Integer(3)]),
                Statement::new("INSERT INTO b (id) VALUES ($1)", vec![Value::Integer(11)]),
            ])
            .await;
        assert!(
            matches!(failed, Err(SqlError::ConstraintViolation(_))),
            "{}: {failed:?}",
            t.label
        );
        let rows = db.query("SELECT id FROM b ORDER BY id", &[]).await.unwrap();
        assert_eq!(ints(&rows), [11, 12], "{}", t.label);
        assert_eq!(db.batch(&[]).await, Ok(vec![]));
        t.cleanup().await;
    }
}

#[tokio::test]
async fn transactions_commit_roll_back_and_finish() {
    for t in common::backends("transactions").await {
        let db = &t.db;
        db.execute("CREATE TABLE tx (id BIGINT PRIMARY KEY)", &[])
            .await
            .unwrap();

        let mut tx = db.begin().await.unwrap();
        assert_eq!(
            tx.execute("INSERT INTO tx (id) VALUES ($1)", &[Value::Integer(1)])
                .await,
            Ok(1)
        );
        let inside = tx.query("SELECT COUNT(*) FROM tx", &[]).await.unwrap();
        assert_eq!(ints(&inside), [1]);
        tx.commit().await.unwrap();
        assert!(tx.is_finished());
        assert!(matches!(
            tx.query("SELECT 1", &[]).await,
            Err(SqlError::Other(_))
        ));
        assert_eq!(count(db, "tx").await, 1);

        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO tx (id) VALUES ($1)", &[Value::Integer(2)])
            .await
            .unwrap();
        tx.rollback().await.unwrap();
        assert!(matches!(tx.commit().await, Err(SqlError::Other(_))));
        assert_eq!(count(db, "tx").await, 1, "{}", t.label);

        // Dropping an unfinished transaction rolls it back.
        {
            let mut tx = db.begin().await.unwrap();
            tx.execute("INSERT INTO tx (id) VALUES ($1)", &[Value::Integer(3)])
                .await
                .unwrap();
        }
        // An error finishes the transaction and rolls back its earlier work.
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO tx (id) VALUES ($1)", &[Value::Integer(4)])
            .await
            .unwrap();
        let dup = tx
            .execute("INSERT INTO tx (id) VALUES ($1)", &[Value::Integer(1)])
            .await;
        assert!(
            matches!(dup, Err(SqlError::ConstraintViolation(_))),
            "{}: {dup:?}",
            t.label
        );
        assert!(tx.is_finished());
        assert!(matches!(tx.commit().await, Err(SqlError::Other(_))));
        drop(tx);

        // Transaction control inside a transaction is an error, and finishes it too.
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO tx (id) VALUES ($1)", &[Value::Integer(6)])
            .await
            .unwrap();
        let nested = tx.execute("COMMIT", &[]).await;
        assert!(
            matches!(nested, Err(SqlError::InvalidStatement(_))),
            "{}: {nested:?}",
            t.label
        );
        assert!(tx.is_finished(), "{}", t.label);
        drop(tx);

        // Give the background rollback of the dropped transaction a moment on PostgreSQL.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let rows = db
            .query("SELECT id FROM tx ORDER BY id", &[])
            .await
            .unwrap();
        assert_eq!(ints(&rows), [1], "{}", t.label);
        // The pool is still healthy: a new transaction works.
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO tx (id) VALUES ($1)", &[Value::Integer(5)])
            .await
            .unwrap();
        tx.commit().await.unwrap();
        assert_eq!(count(db, "tx").await, 2);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn in_memory_sqlite_keeps_its_data_across_calls_and_transactions() {
    let db = Database::open("sqlite::memory:").await.unwrap();
    db.execute("CREATE TABLE m (id BIGINT)", &[]).await.unwrap();
    {
        let mut tx = db.begin().await.unwrap();
        tx.execute("INSERT INTO m VALUES ($1)", &[Value::Integer(1)])
            .await
            .unwrap();
        // dropped: rolled back, connection kept
    }
    db.execute("INSERT INTO m VALUES ($1)", &[Value::Integer(2)])
        .await
        .unwrap();
    let rows = db.query("SELECT id FROM m", &[]).await.unwrap();
    assert_eq!(ints(&rows), [2]);
    assert_eq!(db.backend_name(), "sqlite");
}

fn migrations() -> Vec<Migration> {
    vec![
        Migration::new(
            1,
            "create jobs",
            "CREATE TABLE jobs (id BIGINT PRIMARY KEY, name TEXT NOT NULL);",
        ),
        Migration::new(
            2,
            "add state",
            "ALTER TABLE jobs ADD COLUMN state TEXT; CREATE INDEX jobs_state ON jobs (state);",
        ),
    ]
}

#[tokio::test]
async fn migrations_apply_once_in_order() {
    for t in common::backends("migrations").await {
        let db = &t.db;
        // Given out of order: applied in version order.
        let mut given = migrations();
        given.reverse();
        assert_eq!(db.migrate(&given).await, Ok(vec![1, 2]), "{}", t.label);
        assert_eq!(db.migrate(&given).await, Ok(vec![]), "{}", t.label);
        db.execute(
            "INSERT INTO jobs (id, name, state) VALUES ($1, $2, $3)",
            &[Value::Integer(1), "a".into(), "x".into()],
        )
        .await
        .unwrap();
        let recorded = db
            .query(
                "SELECT version, name FROM lethe_schema_migrations ORDER BY version",
                &[],
            )
            .await
            .unwrap();
        assert_eq!(
            recorded.rows,
            vec![
                vec![Value::Integer(1), Value::Text("create jobs".into())],
                vec![Value::Integer(2), Value::Text("add state".into())],
            ]
        );

        // A renamed applied migration is refused.
        let mut renamed = migrations();
        renamed[0].name = "something else".into();
        assert!(matches!(
            db.migrate(&renamed).await,
            Err(SqlError::InvalidStatement(_))
        ));
        // Duplicate versions are refused.
        let dup = vec![migrations()[0].clone(), migrations()[0].clone()];
        assert!(matches!(
            db.migrate(&dup).await,
            Err(SqlError::InvalidStatement(_))
        ));

        // A failing migration is not recorded, and leaves no partial schema.
        let mut more = migrations();
        more.push(Migration::new(
            3,
            "broken",
            "CREATE TABLE half (id BIGINT); CREATE TABLE oops (",
        ));
        let err = db.migrate(&more).await;
        match &err {
            Err(SqlError::InvalidStatement(m)) => {
                assert!(m.contains("migration 3 (broken)"), "{m}")
            }
            other => panic!("{}: {other:?}", t.label),
        }
        assert!(
            matches!(
                db.query("SELECT * FROM half", &[]).await,
                Err(SqlError::InvalidStatement(_))
            ),
            "{}",
            t.label
        );
        assert_eq!(count(db, "lethe_schema_migrations").await, 2);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn concurrent_hosts_migrate_exactly_once() {
    for t in common::backends("migrations_concurrent").await {
        let mut list = migrations();
        // A migration that would fail if applied twice (duplicate key).
        list.push(Migration::new(
            3,
            "seed",
            "INSERT INTO jobs (id, name) VALUES (1, 'seed');",
        ));
        let mut handles = Vec::new();
        for _ in 0..4 {
            let db = t.reopen(lethe_sql::SqlConfig::default()).await;
            let list = list.clone();
            handles.push(tokio::spawn(async move { db.migrate(&list).await }));
        }
        let mut applied = Vec::new();
        for h in handles {
            applied.extend(
                h.await
                    .unwrap()
                    .unwrap_or_else(|e| panic!("{}: {e}", t.label)),
            );
        }
        applied.sort();
        assert_eq!(applied, [1, 2, 3], "{}", t.label);
        assert_eq!(count(&t.db, "jobs").await, 1);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn many_tasks_write_and_read_concurrently() {
    for t in common::backends("concurrency").await {
        t.db.execute(
            "CREATE TABLE c (id BIGINT PRIMARY KEY, task BIGINT NOT NULL)",
            &[],
        )
        .await
        .unwrap();
        let mut handles = Vec::new();
        for task in 0..16i64 {
            let db = t.db.clone();
            handles.push(tokio::spawn(async move {
                for i in 0..10i64 {
                    db.execute(
                        "INSERT INTO c (id, task) VALUES ($1, $2)",
                        &[Value::Integer(task * 100 + i), Value::Integer(task)],
                    )
                    .await?;
                    db.query(
                        "SELECT COUNT(*) FROM c WHERE task = $1",
                        &[Value::Integer(task)],
                    )
                    .await?;
                }
                let mut tx = db.begin().await?;
                tx.execute(
                    "UPDATE c SET task = task WHERE task = $1",
                    &[Value::Integer(task)],
                )
                .await?;
                tx.commit().await?;
                Ok::<_, SqlError>(())
            }));
        }
        for h in handles {
            match h.await.unwrap() {
                Ok(()) => {}
                // Serializable transactions may conflict under contention; that is the contract.
                Err(SqlError::Conflict(_)) if t.label == "postgres" => {}
                Err(e) => panic!("{}: {e}", t.label),
            }
        }
        assert_eq!(count(&t.db, "c").await, 160, "{}", t.label);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn postgres_types_are_bound_and_read_portably() {
    let Some(t) = common::postgres("pg_types", lethe_sql::SqlConfig::default()).await else {
        return;
    };
    let db = &t.db;
    db.execute(
        "CREATE TABLE typed (
            id SMALLINT PRIMARY KEY, i4 INTEGER, f4 REAL, num NUMERIC(12,3), vc VARCHAR(10), ch CHAR(3),
            ts TIMESTAMPTZ, tsn TIMESTAMP, d DATE, j JSON, jb JSONB, u UUID, flag BOOLEAN, iv INTERVAL)",
        &[],
    )
    .await
    .unwrap();
    let n = db
        .execute(
            "INSERT INTO typed (id, i4, f4, num, vc, ch, ts, tsn, d, j, jb, u, flag)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            &[
                Value::Integer(1),
                Value::Integer(-42),
                Value::Real(0.5),
                Value::Text("12345.678".into()),
                "short".into(),
                "ab".into(),
                "2024-05-06T07:08:09.123456+02:00".into(),
                "2024-05-06T07:08:09Z".into(),
                "2024-05-06".into(),
                r#"{"a": [1, 2]}"#.into(),
                r#"{"b": true}"#.into(),
                "5f0c6b8e-2f43-4bb1-9a52-0d4a1f2e3c4d".into(),
                Value::Integer(1),
            ],
        )
        .await;
    assert_eq!(n, Ok(1));
    let rows = db
        .query(
            "SELECT id, i4, f4, num, vc, ch, ts, tsn, d, j, jb, u, flag FROM typed",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(
        rows.rows[0],
        vec![
            Value::Integer(1),
            Value::Integer(-42),
            Value::Real(0.5),
            Value::Text("12345.678".into()),
            Value::Text("short".into()),
            Value::Text("ab ".into()),
            Value::Text("2024-05-06T05:08:09.123456Z".into()),
            Value::Text("2024-05-06T07:08:09Z".into()),
            Value::Text("2024-05-06".into()),
            Value::Text(r#"{"a": [1, 2]}"#.into()),
            Value::Text(r#"{"b": true}"#.into()),
            Value::Text("5f0c6b8e-2f43-4bb1-9a52-0d4a1f2e3c4d".into()),
            Value::Boolean(true),
        ]
    );
    // Numbers into numeric, text into integer (parsed by the server).
    db.execute(
        "UPDATE typed SET num = $1, i4 = $2 WHERE id = $3",
        &[
            Value::Integer(7),
            Value::Text("9".into()),
            Value::Integer(1),
        ],
    )
    .await
    .unwrap();
    let rows = db
        .query("SELECT num, i4, SUM(i4) OVER () FROM typed", &[])
        .await
        .unwrap();
    assert_eq!(
        rows.rows[0][..2],
        [Value::Text("7.000".into()), Value::Integer(9)]
    );

    // Conversions that cannot work are InvalidValue, with nothing applied.
    for (sql, param) in [
        ("UPDATE typed SET id = $1", Value::Integer(70_000)),
        ("UPDATE typed SET ts = $1", Value::Text("not a time".into())),
        ("UPDATE typed SET u = $1", Value::Text("nope".into())),
        ("UPDATE typed SET jb = $1", Value::Text("{".into())),
        ("UPDATE typed SET ts = $1", Value::Integer(5)),
        ("UPDATE typed SET vc = $1", Value::Blob(vec![1])),
        (
            "UPDATE typed SET vc = $1",
            Value::Text("far too long for ten".into()),
        ),
        ("UPDATE typed SET i4 = $1", Value::Real(1.5)),
    ] {
        let r = db.execute(sql, std::slice::from_ref(&param)).await;
        assert!(
            matches!(r, Err(SqlError::InvalidValue(_))),
            "{sql} with {param:?}: {r:?}"
        );
    }
    // A column type without a lethe value asks for a cast.
    db.execute("UPDATE typed SET iv = '1 day'", &[])
        .await
        .unwrap();
    match db.query("SELECT iv FROM typed", &[]).await {
        Err(SqlError::InvalidValue(m)) => {
            assert!(m.contains("interval") && m.contains("::text"), "{m}")
        }
        other => panic!("{other:?}"),
    }
    let rows = db.query("SELECT iv::text FROM typed", &[]).await.unwrap();
    assert_eq!(rows.rows[0][0], Value::Text("1 day".into()));
    t.cleanup().await;
}

#[tokio::test]
async fn cached_statements_survive_schema_changes() {
    for t in common::backends("schema_change").await {
        let db = &t.db;
        db.execute("CREATE TABLE sc (a BIGINT)", &[]).await.unwrap();
        db.execute("INSERT INTO sc (a) VALUES (1)", &[])
            .await
            .unwrap();
        for _ in 0..3 {
            assert_eq!(
                db.query("SELECT * FROM sc", &[]).await.unwrap().columns,
                ["a"]
            );
        }
        db.execute("ALTER TABLE sc ADD COLUMN b TEXT", &[])
            .await
            .unwrap();
        let rows = db
            .query("SELECT * FROM sc", &[])
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", t.label));
        assert_eq!(rows.columns, ["a", "b"], "{}", t.label);
        assert_eq!(rows.rows, vec![vec![Value::Integer(1), Value::Null]]);
        t.cleanup().await;
    }
}

async fn uses_tls(db: &Database) -> bool {
    let rows = db
        .query(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .expect("pg_stat_ssl");
    rows.rows[0][0] == Value::Boolean(true)
}

#[tokio::test]
async fn postgres_tls_follows_sslmode() {
    let Some(t) = common::postgres("pg_tls", lethe_sql::SqlConfig::default()).await else {
        return;
    };
    let server_ssl =
        t.db.query("SHOW ssl", &[]).await.unwrap().rows[0][0] == Value::Text("on".into());
    let with = |mode: &str| format!("{}&sslmode={mode}", t.url);
    let disabled = Database::open(&with("disable")).await.unwrap();
    assert!(!uses_tls(&disabled).await);
    // `prefer` (the default) encrypts when the server offers TLS, without authenticating it.
    assert_eq!(uses_tls(&t.db).await, server_ssl);
    let config = lethe_sql::SqlConfig {
        retry: lethe_sql::RetryPolicy {
            max_attempts: 3,
            ..lethe_sql::DEFAULT_RETRY
        },
        ..Default::default()
    };
    let required = Database::open_with(&with("require"), config.clone())
        .await
        .unwrap();
    if server_ssl {
        assert!(uses_tls(&required).await);
        // The test server's certificate is not trusted by the system roots (nor valid for
        // 127.0.0.1): verification fails at once, without retries.
        let verified = Database::open_with(&with("verify-full"), config)
            .await
            .unwrap();
        match verified.query("SELECT 1", &[]).await {
            Err(SqlError::Unavailable(m)) => {
                assert!(m.contains("TLS") || m.contains("certificate"), "{m}")
            }
            other => panic!("verify-full against an untrusted certificate: {other:?}"),
        }
        assert_eq!(verified.stats().retries, 0);
    } else {
        assert!(matches!(
            required.query("SELECT 1", &[]).await,
            Err(SqlError::Unavailable(_))
        ));
        assert_eq!(required.stats().retries, 0);
    }
    t.cleanup().await;
}

#[tokio::test]
async fn invalid_postgres_urls_fail_without_leaking_the_password() {
    for url in [
        "postgres://u:secret@127.0.0.1:5432/db?sslmode=bogus",
        "postgres://u:secret@127.0.0.1:notaport/db",
    ] {
        match Database::open(url).await {
            Err(SqlError::Unavailable(m)) => assert!(!m.contains("secret"), "{m}"),
            other => panic!("{url}: {other:?}"),
        }
    }
}
