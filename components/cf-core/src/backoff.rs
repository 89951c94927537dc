//! The reconciler's per-object backoff, in the SDK's one table ([`BackoffTable`], as reconciler
//! [`RECONCILER`]) so that it survives restarts and every host shares it: rows are read once per
//! pass, failures and successes are written through. A write that fails is logged and the pass
//! goes on: at worst an object is retried sooner than its backoff asked.

use std::cell::RefCell;
use std::collections::BTreeMap;

use lethe_guest::backoff::{BackoffTable, Failures};
use lethe_guest::env::{Env, Level};
use lethe_guest::sql::{Sql, SqlError};

use crate::reconcile::{BACKOFF_BASE_MS, BACKOFF_MAX_MS, Backoff};

/// The cf reconciler's name in the backoff table.
pub const RECONCILER: &str = "cf";

/// [`Backoff`] over the cf reconciler's rows of the backoff table.
pub struct SqlBackoff<'a> {
    /// Object key → its failures.
    rows: RefCell<BTreeMap<String, Failures>>,
    table: BackoffTable<'a>,
    env: &'a dyn Env,
}

impl<'a> SqlBackoff<'a> {
    /// Reads the table once.
    pub fn load(sql: &'a dyn Sql, env: &'a dyn Env) -> Result<Self, SqlError> {
        let table = BackoffTable::new(sql, RECONCILER);
        Ok(SqlBackoff {
            rows: RefCell::new(table.all()?),
            table,
            env,
        })
    }
}

impl Backoff for SqlBackoff<'_> {
    fn due(&self, key: &str, now_ms: i64) -> bool {
        self.rows
            .borrow()
            .get(key)
            .is_none_or(|f| !f.holds_back(now_ms))
    }

    fn failed(&self, key: &str, now_ms: i64, reason: &str) {
        let jitter = self.env.random_bytes(1).first().copied().unwrap_or(0);
        let failures = Failures::after(
            self.rows.borrow().get(key),
            now_ms,
            (BACKOFF_BASE_MS, BACKOFF_MAX_MS),
            jitter,
            None,
            reason.to_string(),
        );
        if let Err(e) = self.table.record(key, &failures) {
            self.env
                .log(Level::Warn, &format!("cannot record backoff of {key}: {e}"));
        }
        self.rows.borrow_mut().insert(key.to_string(), failures);
    }

    fn succeeded(&self, key: &str) {
        if self.rows.borrow_mut().remove(key).is_none() {
            return;
        }
        if let Err(e) = self.table.forget(key) {
            self.env
                .log(Level::Warn, &format!("cannot clear backoff of {key}: {e}"));
        }
    }

    fn due_now(&self, now_ms: i64) -> Vec<String> {
        self.rows
            .borrow()
            .iter()
            .filter(|(_, f)| !f.holds_back(now_ms))
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
