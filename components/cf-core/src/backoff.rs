//! The reconciler's per-object backoff, kept in SQL (`cf_reconcile_backoff`) so that it survives
//! restarts and every host shares it: rows are read once per pass, failures and successes are
//! written through. A write that fails is logged and the pass goes on: at worst an object is
//! retried sooner than its backoff asked.

use std::cell::RefCell;
use std::collections::BTreeMap;

use lethe_guest::env::{Env, Level};
use lethe_guest::sql::{Sql, SqlError, Value};

use crate::reconcile::{Backoff, backoff_delay_ms};

/// [`Backoff`] over the `cf_reconcile_backoff` table.
pub struct SqlBackoff<'a> {
    /// Object key → (failures in a row, when it may be tried again).
    rows: RefCell<BTreeMap<String, (u32, i64)>>,
    sql: &'a dyn Sql,
    env: &'a dyn Env,
}

impl<'a> SqlBackoff<'a> {
    /// Reads the table once.
    pub fn load(sql: &'a dyn Sql, env: &'a dyn Env) -> Result<Self, SqlError> {
        let rows = sql.query(
            "SELECT object_key, attempts, next_attempt_ms FROM cf_reconcile_backoff",
            &[],
        )?;
        let rows = rows
            .into_iter()
            .filter_map(|row| match row.as_slice() {
                [Value::Text(key), Value::Int(attempts), Value::Int(next)] => Some((
                    key.clone(),
                    (u32::try_from(*attempts).unwrap_or(u32::MAX), *next),
                )),
                _ => None,
            })
            .collect();
        Ok(SqlBackoff {
            rows: RefCell::new(rows),
            sql,
            env,
        })
    }
}

impl Backoff for SqlBackoff<'_> {
    fn due(&self, key: &str, now_ms: i64) -> bool {
        self.rows
            .borrow()
            .get(key)
            .is_none_or(|(_, next)| now_ms >= *next)
    }

    fn failed(&self, key: &str, now_ms: i64, reason: &str) {
        let attempts = self
            .rows
            .borrow()
            .get(key)
            .map_or(0, |(a, _)| *a)
            .saturating_add(1);
        let jitter = self.env.random_bytes(1).first().copied().unwrap_or(0);
        let next = now_ms + backoff_delay_ms(attempts, jitter);
        self.rows
            .borrow_mut()
            .insert(key.to_string(), (attempts, next));
        let written = self.sql.execute(
            "INSERT INTO cf_reconcile_backoff (object_key, attempts, next_attempt_ms, last_error) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (object_key) DO UPDATE SET \
             attempts = excluded.attempts, next_attempt_ms = excluded.next_attempt_ms, \
             last_error = excluded.last_error",
            &[
                Value::Text(key.into()),
                Value::Int(attempts.into()),
                Value::Int(next),
                Value::Text(reason.into()),
            ],
        );
        if let Err(e) = written {
            self.env
                .log(Level::Warn, &format!("cannot record backoff of {key}: {e}"));
        }
    }

    fn succeeded(&self, key: &str) {
        if self.rows.borrow_mut().remove(key).is_none() {
            return;
        }
        if let Err(e) = self.sql.execute(
            "DELETE FROM cf_reconcile_backoff WHERE object_key = $1",
            &[Value::Text(key.into())],
        ) {
            self.env
                .log(Level::Warn, &format!("cannot clear backoff of {key}: {e}"));
        }
    }

    fn due_now(&self, now_ms: i64) -> Vec<String> {
        self.rows
            .borrow()
            .iter()
            .filter(|(_, (_, next))| now_ms >= *next)
            .map(|(key, _)| key.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use lethe_guest::fake::{FakeCluster, FakeHost, FakeSql};

    use super::*;

    const MIGRATIONS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../cf-reconciler/migrations");

    #[test]
    fn failures_back_off_across_loads_and_a_success_forgets_them() {
        let (sql, kube) = (FakeSql::migrated(MIGRATIONS), FakeCluster::new());
        let host = FakeHost::new(&sql, &kube, "h");
        let now = 5_000;
        let backoff = SqlBackoff::load(&host, &host).expect("load");
        backoff.failed("org/a", now, "boom");
        backoff.failed("org/a", now, "boom again");
        assert!(
            !backoff.due("org/a", now + 1_000),
            "two failures wait ≥ 2 s"
        );
        assert!(backoff.due("org/b", now));

        // Another host (or the next pass) reads what this one wrote.
        let reloaded = SqlBackoff::load(&host, &host).expect("reload");
        assert!(!reloaded.due("org/a", now + 1_000));
        assert!(
            reloaded.due("org/a", now + 2_600),
            "2 s plus at most 25% jitter"
        );
        assert_eq!(reloaded.due_now(now + 2_600), vec!["org/a".to_string()]);
        assert!(reloaded.due_now(now).is_empty());

        reloaded.succeeded("org/a");
        let after = SqlBackoff::load(&host, &host).expect("after success");
        assert!(after.due("org/a", now));
        assert!(after.due_now(now + 10_000).is_empty());
    }
}
