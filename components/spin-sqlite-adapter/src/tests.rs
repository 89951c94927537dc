//! The adapter against real SQLite: rusqlite driven exactly as Spin's in-process SQLite drives it
//! (`prepare_cached`, column names, `query_map` over positional parameters, every failure as
//! `io(error.to_string())`), so messages and behaviour are those a component meets on Spin.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use rusqlite::types::{Value as RValue, ValueRef};

use super::*;

/// A rusqlite connection behind the trait, as Spin's `spin-sqlite-inproc` runs it, recording
/// what it is sent and failing on demand.
struct SpinLike {
    conn: rusqlite::Connection,
    log: Rc<RefCell<Vec<String>>>,
    /// `(prefix, error)`: the next statement starting with `prefix` fails with `error`.
    faults: Rc<RefCell<Vec<(String, SpinError)>>>,
}

impl Connection for SpinLike {
    fn execute(&self, sql: &str, params: &[SpinValue]) -> Result<QueryResult, SpinError> {
        self.log.borrow_mut().push(sql.to_owned());
        let fault = {
            let mut faults = self.faults.borrow_mut();
            let hit = faults.iter().position(|(p, _)| sql.starts_with(p.as_str()));
            hit.map(|i| faults.remove(i).1)
        };
        if let Some(e) = fault {
            return Err(e);
        }
        let io = |e: rusqlite::Error| SpinError::Io(e.to_string());
        let mut stmt = self.conn.prepare_cached(sql).map_err(io)?;
        let columns = stmt.column_names().into_iter().map(str::to_owned).collect();
        let params = params.iter().map(|p| match p {
            SpinValue::Integer(i) => RValue::Integer(*i),
            SpinValue::Real(f) => RValue::Real(*f),
            SpinValue::Text(t) => RValue::Text(t.clone()),
            SpinValue::Blob(b) => RValue::Blob(b.clone()),
            SpinValue::Null => RValue::Null,
        });
        let rows = stmt
            .query_map(rusqlite::params_from_iter(params), |row| {
                let mut values = Vec::new();
                for i in 0..row.as_ref().column_count() {
                    values.push(match row.get_ref(i)? {
                        ValueRef::Null => SpinValue::Null,
                        ValueRef::Integer(i) => SpinValue::Integer(i),
                        ValueRef::Real(f) => SpinValue::Real(f),
                        ValueRef::Text(t) => SpinValue::Text(String::from_utf8_lossy(t).into()),
                        ValueRef::Blob(b) => SpinValue::Blob(b.to_vec()),
                    });
                }
                Ok(values)
            })
            .map_err(io)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(io)?;
        Ok(QueryResult { columns, rows })
    }
}

/// An adapter over an in-memory database, with its statement log, fault list and open count.
struct Fixture {
    adapter: Adapter<SpinLike>,
    log: Rc<RefCell<Vec<String>>>,
    faults: Rc<RefCell<Vec<(String, SpinError)>>>,
    opens: Rc<Cell<usize>>,
}

impl Fixture {
    fn memory() -> Fixture {
        Fixture::opening(|| Ok(rusqlite::Connection::open_in_memory().expect("in-memory db")))
    }

    fn opening(open: impl Fn() -> Result<rusqlite::Connection, SpinError> + 'static) -> Fixture {
        let log = Rc::new(RefCell::new(Vec::new()));
        let faults = Rc::new(RefCell::new(Vec::new()));
        let opens = Rc::new(Cell::new(0));
        let (l, f, o) = (log.clone(), faults.clone(), opens.clone());
        let adapter = Adapter::new(move || {
            o.set(o.get() + 1);
            Ok(SpinLike {
                conn: open()?,
                log: l.clone(),
                faults: f.clone(),
            })
        });
        Fixture {
            adapter,
            log,
            faults,
            opens,
        }
    }

    fn fail_next(&self, prefix: &str, error: SpinError) {
        self.faults.borrow_mut().push((prefix.into(), error));
    }

    fn sent(&self) -> Vec<String> {
        self.log.borrow().clone()
    }

    fn with_table(self) -> Fixture {
        self.adapter
            .execute(
                "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, \
                 n INTEGER CHECK (n >= 0))",
                &[],
            )
            .expect("create table");
        self
    }

    fn count(&self) -> i64 {
        match self.adapter.query("SELECT count(*) FROM t", &[]) {
            Ok(r) => match r.rows.as_slice() {
                [row] => match row.as_slice() {
                    [Value::Integer(n)] => *n,
                    other => panic!("count: {other:?}"),
                },
                other => panic!("count: {other:?}"),
            },
            Err(e) => panic!("count: {e}"),
        }
    }
}

fn text(s: &str) -> Value {
    Value::Text(s.into())
}

fn insert(a: &Adapter<SpinLike>, name: &str) -> Result<u64, SqlError> {
    a.execute("INSERT INTO t (name) VALUES ($1)", &[text(name)])
}

/// A database file of its own, removed when dropped.
struct TempDb(PathBuf);

impl TempDb {
    fn new(name: &str) -> TempDb {
        let path = std::env::temp_dir().join(format!(
            "spin-sqlite-adapter-{}-{name}.db",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&path);
        TempDb(path)
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        for suffix in ["", "-journal", "-wal", "-shm"] {
            let mut p = self.0.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

#[test]
fn placeholders_are_rewritten_and_bound_by_number() {
    let f = Fixture::memory();
    let r = f
        .adapter
        .query(
            "SELECT $2 AS second, $1 AS first, '$1' AS literal, $2 || 'x' AS again",
            &[Value::Integer(1), text("two")],
        )
        .expect("query");
    assert_eq!(r.columns, ["second", "first", "literal", "again"]);
    assert_eq!(
        r.rows,
        [vec![
            text("two"),
            Value::Integer(1),
            text("$1"),
            text("twox")
        ]]
    );
    assert!(f.sent().iter().any(|s| s.contains("?2 AS second")));
}

#[test]
fn values_round_trip() {
    let f = Fixture::memory();
    f.adapter
        .execute("CREATE TABLE v (k INTEGER PRIMARY KEY, x)", &[])
        .expect("create");
    let values = [
        Value::Null,
        Value::Integer(i64::MIN),
        Value::Integer(i64::MAX),
        Value::Real(-1.5e300),
        Value::Real(0.25),
        text(""),
        text("héllo ✓ 'quoted' $1"),
        Value::Blob(Vec::new()),
        Value::Blob(vec![0, 1, 255, 0]),
    ];
    for (k, v) in values.iter().enumerate() {
        let n = f
            .adapter
            .execute(
                "INSERT INTO v (k, x) VALUES ($1, $2)",
                &[Value::Integer(k as i64), v.clone()],
            )
            .expect("insert");
        assert_eq!(n, 1);
    }
    let r = f
        .adapter
        .query("SELECT x FROM v ORDER BY k", &[])
        .expect("select");
    assert_eq!(r.columns, ["x"]);
    let back: Vec<Value> = r.rows.into_iter().flatten().collect();
    assert_eq!(back, values);
}

#[test]
fn booleans_are_stored_as_integers() {
    let f = Fixture::memory();
    let r = f
        .adapter
        .query(
            "SELECT $1, $2, typeof($1), $1 = 1",
            &[Value::Boolean(true), Value::Boolean(false)],
        )
        .expect("query");
    assert_eq!(
        r.rows,
        [vec![
            Value::Integer(1),
            Value::Integer(0),
            text("integer"),
            Value::Integer(1)
        ]]
    );
}

#[test]
fn a_statement_without_result_has_no_columns_and_no_rows() {
    let f = Fixture::memory().with_table();
    let r = f
        .adapter
        .query("INSERT INTO t (name) VALUES ($1)", &[text("a")])
        .expect("insert via query");
    assert_eq!(r, RowSet::default());
    let r = f
        .adapter
        .query("SELECT * FROM t WHERE id < 0", &[])
        .expect("empty select");
    assert_eq!(r.columns, ["id", "name", "n"]);
    assert!(r.rows.is_empty());
}

#[test]
fn execute_counts_changed_rows_and_zero_for_ddl() {
    let f = Fixture::memory().with_table();
    assert_eq!(
        f.adapter
            .execute(
                "INSERT INTO t (name, n) VALUES ('a', 1), ('b', 2), ('c', 3)",
                &[]
            )
            .expect("insert"),
        3
    );
    assert_eq!(
        f.adapter
            .execute("UPDATE t SET n = n + 1 WHERE n >= $1", &[Value::Integer(2)])
            .expect("update"),
        2
    );
    assert_eq!(
        f.adapter
            .execute("UPDATE t SET n = 0 WHERE name = 'nobody'", &[])
            .expect("update none"),
        0
    );
    // DDL right after DML: `changes()` alone would still say 2.
    f.adapter
        .execute("UPDATE t SET n = 9 WHERE n >= 3", &[])
        .expect("update");
    assert_eq!(
        f.adapter
            .execute("CREATE INDEX t_n ON t (n)", &[])
            .expect("ddl"),
        0
    );
    // A write through `query` moves the total; the next DDL is still 0, the next DML exact.
    f.adapter
        .query("INSERT INTO t (name) VALUES ('d') RETURNING id", &[])
        .expect("insert returning");
    assert_eq!(
        f.adapter
            .execute("DROP INDEX t_n", &[])
            .expect("drop index"),
        0
    );
    assert_eq!(
        f.adapter
            .execute("INSERT INTO t (name) VALUES ('e') RETURNING id", &[])
            .expect("execute returning"),
        1
    );
    assert_eq!(f.adapter.execute("DELETE FROM t", &[]).expect("delete"), 5);
}

#[test]
fn the_connection_is_opened_lazily_once_and_set_up() {
    let f = Fixture::memory().with_table();
    assert_eq!(f.opens.get(), 1);
    insert(&f.adapter, "a").expect("insert");
    f.adapter.query("SELECT 1", &[]).expect("select");
    assert_eq!(f.opens.get(), 1);
    assert_eq!(f.sent()[0], CONNECTION_SETUP[0]);

    let lazy = Fixture::memory();
    assert_eq!(lazy.opens.get(), 0);
    assert_eq!(lazy.adapter.batch(&[]), Ok(Vec::new()));
    assert_eq!(lazy.opens.get(), 0, "an empty batch touches nothing");
}

#[test]
fn open_failures_map_to_cases_and_are_retried() {
    for (spin, check) in [
        (
            SpinError::NoSuchDatabase,
            (|e: &SqlError| matches!(e, SqlError::Denied(_))) as fn(&SqlError) -> bool,
        ),
        (
            SpinError::AccessDenied,
            |e| matches!(e, SqlError::Denied(m) if m.contains("sqlite_databases")),
        ),
        (SpinError::InvalidConnection, |e| {
            matches!(e, SqlError::Unavailable(_))
        }),
        (
            SpinError::DatabaseFull,
            |e| matches!(e, SqlError::Other(m) if m.contains("full")),
        ),
        (SpinError::Io("unable to open database file".into()), |e| {
            matches!(e, SqlError::Unavailable(_))
        }),
    ] {
        let failing = Rc::new(Cell::new(true));
        let fail = failing.clone();
        let spin2 = spin.clone();
        let f = Fixture::opening(move || {
            if fail.get() {
                Err(spin2.clone())
            } else {
                Ok(rusqlite::Connection::open_in_memory().expect("db"))
            }
        });
        let e = f.adapter.query("SELECT 1", &[]).expect_err("open fails");
        assert!(check(&e), "{spin:?} -> {e:?}");
        failing.set(false);
        f.adapter.query("SELECT 1", &[]).expect("second open works");
        assert_eq!(f.opens.get(), 2);
    }
}

#[test]
fn a_failed_setup_is_unavailable() {
    let f = Fixture::memory();
    f.fail_next("PRAGMA", SpinError::Io("disk I/O error".into()));
    let e = f.adapter.query("SELECT 1", &[]).expect_err("setup fails");
    assert!(
        matches!(&e, SqlError::Unavailable(m) if m.contains("disk I/O error")),
        "{e:?}"
    );
    f.adapter.query("SELECT 1", &[]).expect("reopened");
}

#[test]
fn an_invalid_connection_is_unavailable_and_reopened() {
    let f = Fixture::memory();
    f.adapter.query("SELECT 1", &[]).expect("select");
    f.fail_next("SELECT 2", SpinError::InvalidConnection);
    let e = f.adapter.query("SELECT 2", &[]).expect_err("invalid");
    assert!(matches!(e, SqlError::Unavailable(_)), "{e:?}");
    f.adapter.query("SELECT 3", &[]).expect("select");
    assert_eq!(f.opens.get(), 2);
}

#[test]
fn database_full_is_other() {
    let f = Fixture::memory().with_table();
    f.fail_next("INSERT", SpinError::DatabaseFull);
    let e = insert(&f.adapter, "a").expect_err("full");
    assert!(matches!(e, SqlError::Other(_)), "{e:?}");
}

#[test]
fn constraint_violations() {
    let f = Fixture::memory().with_table();
    f.adapter
        .execute(
            "CREATE TABLE child (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES t (id))",
            &[],
        )
        .expect("create child");
    insert(&f.adapter, "a").expect("insert");
    let cases: [(&str, Vec<Value>, &str); 4] = [
        (
            "INSERT INTO t (name) VALUES ($1)",
            vec![text("a")],
            "UNIQUE constraint failed: t.name",
        ),
        (
            "INSERT INTO t (name) VALUES ($1)",
            vec![Value::Null],
            "NOT NULL constraint failed: t.name",
        ),
        (
            "INSERT INTO t (name, n) VALUES ($1, $2)",
            vec![text("b"), Value::Integer(-1)],
            "CHECK constraint failed",
        ),
        (
            // Enforced because the adapter turns foreign keys on, as the host does.
            "INSERT INTO child (parent) VALUES ($1)",
            vec![Value::Integer(42)],
            "FOREIGN KEY constraint failed",
        ),
    ];
    for (sql, params, message) in cases {
        match f.adapter.execute(sql, &params) {
            Err(SqlError::ConstraintViolation(m)) => assert!(m.starts_with(message), "{m}"),
            other => panic!("{sql}: {other:?}"),
        }
    }
    f.adapter
        .execute("CREATE TABLE s (x INTEGER) STRICT", &[])
        .expect("strict table");
    let e = f
        .adapter
        .execute("INSERT INTO s (x) VALUES ($1)", &[text("nope")])
        .expect_err("strict");
    assert!(matches!(e, SqlError::ConstraintViolation(_)), "{e:?}");
    assert_eq!(f.count(), 1);
}

#[test]
fn invalid_statements() {
    let f = Fixture::memory().with_table();
    for sql in [
        "SELEC 1",
        "SELECT * FROM missing",
        "SELECT missing FROM t",
        "INSERT INTO t (missing) VALUES (1)",
        "SELECT nosuchfunction(1)",
        "CREATE TABLE t (x)",
        "SELECT (",
    ] {
        match f.adapter.query(sql, &[]) {
            Err(SqlError::InvalidStatement(m)) => {
                assert!(!m.contains(" at offset "), "{sql}: {m}");
            }
            other => panic!("{sql}: {other:?}"),
        }
    }
    let e = f
        .adapter
        .execute("SELECT 1; SELECT 2", &[])
        .expect_err("two statements");
    assert_eq!(
        e,
        SqlError::InvalidStatement(
            "more than one statement in one call; use batch for several statements".into()
        )
    );
}

#[test]
fn wrong_parameter_counts_are_invalid_values() {
    let f = Fixture::memory().with_table();
    assert_eq!(
        f.adapter
            .query("SELECT $1, $2", &[Value::Integer(1)])
            .expect_err("too few"),
        SqlError::InvalidValue(
            "the statement has 2 placeholder(s) but 1 parameter(s) were given".into()
        )
    );
    assert_eq!(
        f.adapter
            .execute(
                "DELETE FROM t WHERE id = $1",
                &[Value::Integer(1), Value::Integer(2), Value::Integer(3)]
            )
            .expect_err("too many"),
        SqlError::InvalidValue(
            "the statement has 1 placeholder(s) but 3 parameter(s) were given".into()
        )
    );
}

#[test]
fn a_datatype_mismatch_is_an_invalid_value() {
    let f = Fixture::memory().with_table();
    let e = f
        .adapter
        .execute("INSERT INTO t (id, name) VALUES ($1, 'a')", &[text("x")])
        .expect_err("rowid must be an integer");
    assert_eq!(e, SqlError::InvalidValue("datatype mismatch".into()));
}

#[test]
fn transaction_control_is_refused_before_anything_is_sent() {
    let f = Fixture::memory().with_table();
    let refused = SqlError::InvalidStatement(lethe_sql_model::TRANSACTION_CONTROL.into());
    let sent = f.sent().len();
    assert_eq!(f.adapter.query("BEGIN", &[]), Err(refused.clone()));
    assert_eq!(
        f.adapter.execute("/* x */ commit", &[]),
        Err(refused.clone())
    );
    assert_eq!(f.adapter.execute("SAVEPOINT s", &[]), Err(refused.clone()));
    let batch = [
        Statement {
            sql: "INSERT INTO t (name) VALUES ('a')".into(),
            params: vec![],
        },
        Statement {
            sql: "ROLLBACK".into(),
            params: vec![],
        },
    ];
    assert_eq!(f.adapter.batch(&batch), Err(refused));
    assert_eq!(f.sent().len(), sent, "{:?}", &f.sent()[sent..]);
}

#[test]
fn batch_commits_and_returns_counts() {
    let f = Fixture::memory().with_table();
    let counts = f
        .adapter
        .batch(&[
            Statement {
                sql: "INSERT INTO t (name, n) VALUES ($1, $2), ($3, $2)".into(),
                params: vec![text("a"), Value::Integer(1), text("b")],
            },
            Statement {
                sql: "CREATE INDEX t_n ON t (n)".into(),
                params: vec![],
            },
            Statement {
                sql: "UPDATE t SET n = $1".into(),
                params: vec![Value::Boolean(true)],
            },
            Statement {
                sql: "DELETE FROM t WHERE name = $1".into(),
                params: vec![text("b")],
            },
        ])
        .expect("batch");
    assert_eq!(counts, [2, 0, 2, 1]);
    assert_eq!(f.count(), 1);
    let sent = f.sent();
    assert!(sent.iter().any(|s| s == "BEGIN IMMEDIATE"));
    assert!(sent.iter().any(|s| s == "COMMIT"));
}

#[test]
fn a_failing_batch_applies_nothing_and_returns_that_error() {
    let f = Fixture::memory().with_table();
    insert(&f.adapter, "taken").expect("insert");
    let e = f
        .adapter
        .batch(&[
            Statement {
                sql: "INSERT INTO t (name) VALUES ($1)".into(),
                params: vec![text("fresh")],
            },
            Statement {
                sql: "UPDATE t SET n = 5".into(),
                params: vec![],
            },
            Statement {
                sql: "INSERT INTO t (name) VALUES ($1)".into(),
                params: vec![text("taken")],
            },
            Statement {
                sql: "DELETE FROM t".into(),
                params: vec![],
            },
        ])
        .expect_err("unique");
    assert!(
        matches!(&e, SqlError::ConstraintViolation(m) if m.contains("t.name")),
        "{e:?}"
    );
    assert_eq!(f.count(), 1);
    let r = f
        .adapter
        .query("SELECT name, n FROM t", &[])
        .expect("select");
    assert_eq!(r.rows, [vec![text("taken"), Value::Null]]);
    assert!(f.sent().iter().any(|s| s == "ROLLBACK"));
    // The connection is out of the failed transaction: a new one can begin.
    f.adapter
        .batch(&[Statement {
            sql: "INSERT INTO t (name) VALUES ('later')".into(),
            params: vec![],
        }])
        .expect("next batch");
    assert_eq!(f.count(), 2);
}

#[test]
fn a_batch_whose_commit_fails_is_rolled_back() {
    let f = Fixture::memory().with_table();
    f.fail_next("COMMIT", SpinError::Io("database is locked".into()));
    let e = f
        .adapter
        .batch(&[Statement {
            sql: "INSERT INTO t (name) VALUES ('a')".into(),
            params: vec![],
        }])
        .expect_err("commit fails");
    assert_eq!(
        e,
        SqlError::Unavailable("database is locked: database is locked".into())
    );
    assert_eq!(f.count(), 0);
}

#[test]
fn a_transaction_commits() {
    let f = Fixture::memory().with_table();
    let tx = f.adapter.begin().expect("begin");
    assert_eq!(
        tx.execute(
            "INSERT INTO t (name) VALUES ($1), ($2)",
            &[text("a"), text("b")]
        ),
        Ok(2)
    );
    let r = tx
        .query("SELECT count(*) FROM t WHERE name = $1", &[text("a")])
        .expect("query in tx");
    assert_eq!(r.rows, [vec![Value::Integer(1)]]);
    tx.commit().expect("commit");
    assert!(tx.is_finished());
    drop(tx);
    assert_eq!(f.count(), 2);
    assert!(f.sent().iter().any(|s| s == "BEGIN IMMEDIATE"));
    assert!(!f.sent().iter().any(|s| s == "ROLLBACK"));
}

#[test]
fn a_transaction_rolls_back_explicitly_or_when_dropped() {
    let f = Fixture::memory().with_table();
    let tx = f.adapter.begin().expect("begin");
    insert_in(&tx, "a");
    tx.rollback().expect("rollback");
    assert_eq!(f.count(), 0);
    assert_eq!(
        tx.execute("DELETE FROM t", &[]),
        Err(SqlError::Other(
            "the transaction is already finished".into()
        ))
    );
    assert_eq!(
        tx.commit(),
        Err(SqlError::Other(
            "the transaction is already finished".into()
        ))
    );
    drop(tx);

    let tx = f.adapter.begin().expect("begin again");
    insert_in(&tx, "b");
    drop(tx);
    assert_eq!(f.count(), 0);
    // Dropped means finished: the instance can begin again and autocommit works.
    insert(&f.adapter, "c").expect("insert");
    assert_eq!(f.count(), 1);
}

fn insert_in(tx: &Transaction<SpinLike>, name: &str) {
    assert_eq!(
        tx.execute("INSERT INTO t (name) VALUES ($1)", &[text(name)]),
        Ok(1)
    );
}

#[test]
fn an_error_finishes_the_transaction_and_rolls_it_back() {
    let f = Fixture::memory().with_table();
    insert(&f.adapter, "taken").expect("insert");
    let tx = f.adapter.begin().expect("begin");
    insert_in(&tx, "a");
    let e = tx
        .execute("INSERT INTO t (name) VALUES ($1)", &[text("taken")])
        .expect_err("unique");
    assert!(matches!(e, SqlError::ConstraintViolation(_)), "{e:?}");
    assert!(tx.is_finished());
    assert_eq!(
        tx.query("SELECT 1", &[]),
        Err(SqlError::Other(
            "the transaction is already finished".into()
        ))
    );
    assert_eq!(f.count(), 1);

    // Transaction control inside a transaction is refused and, as on the host, ends it too.
    let tx = f.adapter.begin().expect("begin");
    insert_in(&tx, "b");
    assert_eq!(
        tx.execute("COMMIT", &[]),
        Err(SqlError::InvalidStatement(
            lethe_sql_model::TRANSACTION_CONTROL.into()
        ))
    );
    assert!(tx.is_finished());
    assert_eq!(f.count(), 1);
}

#[test]
fn a_locked_database_inside_a_transaction_is_a_conflict() {
    let f = Fixture::memory().with_table();
    let tx = f.adapter.begin().expect("begin");
    f.fail_next("UPDATE", SpinError::Io("database is locked".into()));
    let e = tx.execute("UPDATE t SET n = 1", &[]).expect_err("locked");
    assert_eq!(
        e,
        SqlError::Conflict("database is locked: database is locked".into())
    );
    assert!(tx.is_finished());

    let tx = f.adapter.begin().expect("begin");
    f.fail_next("COMMIT", SpinError::Io("database is locked".into()));
    assert!(matches!(tx.commit(), Err(SqlError::Conflict(_))));
    assert!(tx.is_finished());
    assert!(f.sent().ends_with(&["COMMIT".into(), "ROLLBACK".into()]));
}

#[test]
fn one_transaction_at_a_time_and_outside_statements_join_it() {
    let f = Fixture::memory().with_table();
    let tx = f.adapter.begin().expect("begin");
    let e = f.adapter.begin().err().expect("second begin");
    assert!(
        matches!(&e, SqlError::Unavailable(m) if m.contains("transaction is open")),
        "{e:?}"
    );
    let e = f
        .adapter
        .batch(&[Statement {
            sql: "DELETE FROM t".into(),
            params: vec![],
        }])
        .expect_err("batch while open");
    assert!(matches!(e, SqlError::Unavailable(_)), "{e:?}");

    // Outside the transaction, but on its connection: visible inside and rolled back with it.
    insert(&f.adapter, "outside").expect("insert outside");
    let r = tx.query("SELECT name FROM t", &[]).expect("query in tx");
    assert_eq!(r.rows, [vec![text("outside")]]);
    tx.rollback().expect("rollback");
    assert_eq!(f.count(), 0);

    let tx = f.adapter.begin().expect("begin after the first finished");
    tx.commit().expect("commit");
}

#[test]
fn a_locked_database_is_unavailable() {
    let db = TempDb::new("locked");
    let path = db.0.clone();
    let holder = Fixture::opening(move || {
        rusqlite::Connection::open(&path).map_err(|e| SpinError::Io(e.to_string()))
    })
    .with_table();
    let path = db.0.clone();
    let other = Fixture::opening(move || {
        let conn = rusqlite::Connection::open(&path).map_err(|e| SpinError::Io(e.to_string()))?;
        conn.busy_timeout(Duration::ZERO)
            .map_err(|e| SpinError::Io(e.to_string()))?;
        Ok(conn)
    });
    let tx = holder.adapter.begin().expect("begin");
    insert_in(&tx, "a");

    let locked = SqlError::Unavailable("database is locked: database is locked".into());
    assert_eq!(insert(&other.adapter, "b"), Err(locked.clone()));
    assert_eq!(other.adapter.begin().err(), Some(locked.clone()));
    assert_eq!(
        other.adapter.batch(&[Statement {
            sql: "INSERT INTO t (name) VALUES ('c')".into(),
            params: vec![],
        }]),
        Err(locked)
    );

    tx.commit().expect("commit");
    insert(&other.adapter, "b").expect("insert once unlocked");
    assert_eq!(other.count(), 2);
}

#[test]
fn messages_are_classified_like_the_host() {
    use classify::classify;
    let sql = "SELECT * FROM x";
    let cases = [
        (
            "UNIQUE constraint failed: t.a",
            SqlError::ConstraintViolation("UNIQUE constraint failed: t.a".into()),
        ),
        (
            "database table is locked",
            SqlError::Unavailable("database is locked: database table is locked".into()),
        ),
        (
            "no such table: x in SELECT * FROM x at offset 14",
            SqlError::InvalidStatement("no such table: x".into()),
        ),
        (
            "some new compile error in SELECT * FROM x at offset 3",
            SqlError::InvalidStatement("some new compile error".into()),
        ),
        (
            "string or blob too big",
            SqlError::InvalidValue("string or blob too big".into()),
        ),
        (
            "Wrong number of parameters passed to query. Got 3, needed 1",
            SqlError::InvalidValue(
                "the statement has 1 placeholder(s) but 2 parameter(s) were given".into(),
            ),
        ),
        (
            "file is not a database",
            SqlError::Unavailable("file is not a database".into()),
        ),
        (
            "attempt to write a readonly database",
            SqlError::Other("attempt to write a readonly database".into()),
        ),
        (
            "query result exceeds limit of 100 bytes",
            SqlError::Other("query result exceeds limit of 100 bytes".into()),
        ),
        (
            // The suffix of another statement is not stripped.
            "no such table: y in SELECT * FROM y at offset 14",
            SqlError::InvalidStatement("no such table: y in SELECT * FROM y at offset 14".into()),
        ),
        (
            "nul byte found in provided data at position: 3",
            SqlError::InvalidStatement(
                "SQL text contains a NUL byte: nul byte found in provided data at position: 3"
                    .into(),
            ),
        ),
        ("", SqlError::Other(String::new())),
    ];
    for (message, expected) in cases {
        assert_eq!(classify(message, sql, 2), expected, "{message}");
    }
    assert_eq!(
        classify::in_transaction(SqlError::Unavailable("database is locked: x".into())),
        SqlError::Conflict("database is locked: x".into())
    );
    assert_eq!(
        classify::in_transaction(SqlError::Unavailable("unable to open database file".into())),
        SqlError::Unavailable("unable to open database file".into())
    );
}
