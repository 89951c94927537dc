//! Per-object backoff and parking, written once for every reconciler: the one formula of how
//! long an object that keeps failing waits before it is tried again ([`delay_ms`]), and the one
//! table its failures are kept in ([`BackoffTable`]), keyed by reconciler and object.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use lethe_retry::Policy;

use crate::env::{Env, Level};
use crate::sql::{Sql, SqlError, Statement, Value};

/// The wait before the next attempt at an item that failed `attempts` times in a row (at least
/// 1): `base_ms` doubled per failure after the first, capped at `max_ms`, plus up to a quarter
/// more from `jitter` (0..=255, fresh per failure) so that items failing together do not retry
/// together.
///
/// ```
/// use lethe_guest::backoff::delay_ms;
///
/// assert_eq!(delay_ms(1, 1_000, 60_000, 0), 1_000);
/// assert_eq!(delay_ms(3, 1_000, 60_000, 0), 4_000);
/// assert_eq!(delay_ms(30, 1_000, 60_000, 0), 60_000, "capped");
/// assert!(delay_ms(3, 1_000, 60_000, 255) <= 5_000, "at most a quarter more");
/// ```
pub fn delay_ms(attempts: u32, base_ms: i64, max_ms: i64, jitter: u8) -> i64 {
    // The doubling and its cap are lethe's one backoff (`lethe_retry`). The jitter only adds: an
    // object that failed is never tried again sooner than the doubling says.
    let millis = |ms: i64| Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    let policy = Policy {
        base_delay: millis(base_ms),
        max_delay: millis(max_ms),
        ..Policy::none()
    };
    let delay = i64::try_from(policy.ceiling(attempts).as_millis()).unwrap_or(i64::MAX);
    delay + delay * i64::from(jitter) / 1024
}

/// The table every reconciler keeps its failures in. Components share one database, so each
/// component's migrations create it alike, `IF NOT EXISTS`:
///
/// ```sql
/// CREATE TABLE IF NOT EXISTS reconcile_backoff (
///     reconciler TEXT NOT NULL,      -- whose failures (`cf`, `data-jobs`)
///     object_key TEXT NOT NULL,      -- of what, in the reconciler's words
///     attempts INTEGER NOT NULL,     -- failures in a row
///     next_attempt_ms BIGINT NOT NULL,
///     parked_on TEXT,                -- parked until the desired state is no longer this
///     last_error TEXT NOT NULL,
///     CONSTRAINT reconcile_backoff_pk PRIMARY KEY (reconciler, object_key)
/// );
/// ```
pub const TABLE: &str = "reconcile_backoff";

/// One object's failures in a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failures {
    /// How many; 0 for an item a visit asked to see again (`controller::Action::Again`).
    pub attempts: u32,
    /// When it may be tried again (milliseconds since the epoch).
    pub next_attempt_ms: i64,
    /// Parked: not tried again by time at all, until its desired state is no longer this (a
    /// spec hash). A failure that retrying cannot mend, such as a spec the API server rejects.
    pub parked_on: Option<String>,
    /// What the last failure said.
    pub last_error: String,
}

impl Failures {
    /// The failures after one more at `now_ms`, following `previous`: the wait doubles from
    /// `base_ms` up to `max_ms` ([`delay_ms`], with `jitter`).
    pub fn after(
        previous: Option<&Failures>,
        now_ms: i64,
        (base_ms, max_ms): (i64, i64),
        jitter: u8,
        parked_on: Option<String>,
        last_error: String,
    ) -> Failures {
        let attempts = previous.map_or(0, |p| p.attempts).saturating_add(1);
        Failures {
            attempts,
            next_attempt_ms: now_ms.saturating_add(delay_ms(attempts, base_ms, max_ms, jitter)),
            parked_on,
            last_error,
        }
    }

    /// Whether it waits at `now_ms`: parked, or its wait not over.
    pub fn holds_back(&self, now_ms: i64) -> bool {
        self.parked_on.is_some() || self.next_attempt_ms > now_ms
    }

    /// A row of [`COLUMNS`]: the object's key and its failures.
    pub fn from_row(row: &[Value]) -> Option<(String, Failures)> {
        match row {
            [key, attempts, next, parked_on, last_error] => Some((
                key.text().to_string(),
                Failures {
                    attempts: attempts
                        .int()
                        .and_then(|a| u32::try_from(a).ok())
                        .unwrap_or(u32::MAX),
                    next_attempt_ms: next.int().unwrap_or(0),
                    parked_on: parked_on.opt_text().map(str::to_string),
                    last_error: last_error.text().to_string(),
                },
            )),
            _ => None,
        }
    }
}

/// One reconciler's rows of [`TABLE`].
#[derive(Clone, Copy)]
pub struct BackoffTable<'a> {
    sql: &'a dyn Sql,
    reconciler: &'a str,
}

/// The columns a [`Failures`] is read from, after its object's key.
pub const COLUMNS: &str = "object_key, attempts, next_attempt_ms, parked_on, last_error";

impl<'a> BackoffTable<'a> {
    /// The failures `reconciler` keeps in `sql`.
    pub fn new(sql: &'a dyn Sql, reconciler: &'a str) -> Self {
        BackoffTable { sql, reconciler }
    }

    fn select(
        &self,
        condition: &str,
        params: &[Value],
    ) -> Result<Vec<(String, Failures)>, SqlError> {
        let mut all = vec![Value::from(self.reconciler)];
        all.extend_from_slice(params);
        let rows = self.sql.query(
            &format!(
                "SELECT {COLUMNS} FROM {TABLE} WHERE reconciler = $1{condition} ORDER BY object_key"
            ),
            &all,
        )?;
        Ok(rows.iter().filter_map(|r| Failures::from_row(r)).collect())
    }

    /// Every object's failures.
    pub fn all(&self) -> Result<BTreeMap<String, Failures>, SqlError> {
        Ok(self.select("", &[])?.into_iter().collect())
    }

    /// The failures of `key`, if it has any.
    pub fn of(&self, key: &str) -> Result<Option<Failures>, SqlError> {
        Ok(self
            .select(" AND object_key = $2", &[key.into()])?
            .into_iter()
            .next()
            .map(|(_, f)| f))
    }

    /// The objects whose wait is over at `now_ms`, parked ones aside: a pass that visits only
    /// what changed visits these too.
    pub fn due(&self, now_ms: i64) -> Result<Vec<String>, SqlError> {
        Ok(self
            .select(
                " AND next_attempt_ms <= $2 AND parked_on IS NULL",
                &[now_ms.into()],
            )?
            .into_iter()
            .map(|(key, _)| key)
            .collect())
    }

    /// The objects held back at `now_ms` ([`Failures::holds_back`]).
    pub fn held_back(&self, now_ms: i64) -> Result<Vec<(String, Failures)>, SqlError> {
        self.select(
            " AND (parked_on IS NOT NULL OR next_attempt_ms > $2)",
            &[now_ms.into()],
        )
    }

    /// Keeps `failures` as those of `key`.
    pub fn record(&self, key: &str, failures: &Failures) -> Result<(), SqlError> {
        self.sql
            .execute(
                &format!(
                    "INSERT INTO {TABLE} (reconciler, {COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6) \
                     ON CONFLICT (reconciler, object_key) DO UPDATE SET \
                     attempts = excluded.attempts, next_attempt_ms = excluded.next_attempt_ms, \
                     parked_on = excluded.parked_on, last_error = excluded.last_error"
                ),
                &[
                    self.reconciler.into(),
                    key.into(),
                    i64::from(failures.attempts).into(),
                    failures.next_attempt_ms.into(),
                    failures
                        .parked_on
                        .as_deref()
                        .map_or(Value::Null, Value::from),
                    failures.last_error.as_str().into(),
                ],
            )
            .map(|_| ())
    }

    /// The statement that forgets `key`'s failures, for a transaction of the caller's (a new
    /// desired state gets a fresh start).
    pub fn forget_statement(&self, key: &str) -> Statement {
        (
            "DELETE FROM reconcile_backoff WHERE reconciler = $1 AND object_key = $2",
            vec![self.reconciler.into(), key.into()],
        )
    }

    /// Forgets `key`'s failures, after a success.
    pub fn forget(&self, key: &str) -> Result<(), SqlError> {
        let (statement, params) = self.forget_statement(key);
        self.sql.execute(statement, &params).map(|_| ())
    }
}

/// The per-object backoff a reconciler's pass consults: whether an object may be worked on now,
/// and what a failure or a success does to it.
pub trait Backoff {
    /// Whether `key` may be worked on at `now_ms`.
    fn due(&self, key: &str, now_ms: i64) -> bool;
    /// Records a failure of `key` at `now_ms`: the next attempt waits longer ([`delay_ms`]).
    fn failed(&self, key: &str, now_ms: i64, reason: &str);
    /// Forgets `key`'s failures after a success.
    fn succeeded(&self, key: &str);
    /// The keys that failed before and whose wait is over at `now_ms`: a pass that visits only
    /// what changed visits these too.
    fn due_now(&self, now_ms: i64) -> Vec<String>;
}

/// One reconciler's rows of [`TABLE`], read once (at the start of a pass) and written through,
/// so every host shares them and they survive restarts. A write that fails is logged and the
/// pass goes on: at worst an object is tried again sooner than its backoff asked.
pub struct Loaded<'a> {
    table: BackoffTable<'a>,
    env: &'a dyn Env,
    /// The first wait and its ceiling.
    delays: (i64, i64),
    rows: RefCell<BTreeMap<String, Failures>>,
}

impl<'a> Loaded<'a> {
    /// Reads `reconciler`'s rows once; its waits double from `delays.0` up to `delays.1`.
    pub fn load(
        sql: &'a dyn Sql,
        env: &'a dyn Env,
        reconciler: &'a str,
        delays: (i64, i64),
    ) -> Result<Self, SqlError> {
        let table = BackoffTable::new(sql, reconciler);
        let rows = RefCell::new(table.all()?);
        Ok(Loaded {
            table,
            env,
            delays,
            rows,
        })
    }

    /// Whether `key` waits at `now_ms`: its backoff not over, or parked on the desired state it
    /// still has (`fingerprint`, asked only of a parked one).
    pub fn holds_back(&self, key: &str, now_ms: i64, fingerprint: impl FnOnce() -> String) -> bool {
        match self.rows.borrow().get(key) {
            None => false,
            Some(Failures {
                parked_on: Some(parked_on),
                ..
            }) => *parked_on == fingerprint(),
            Some(failures) => failures.next_attempt_ms > now_ms,
        }
    }

    /// Records one more failure of `key` at `now_ms`; parked until its desired state is no
    /// longer `parked_on`, when there is one.
    pub fn fail(&self, key: &str, now_ms: i64, reason: &str, parked_on: Option<String>) {
        let jitter = self.env.random_bytes(1).first().copied().unwrap_or(0);
        let previous = self.rows.borrow().get(key).cloned();
        let failures = Failures::after(
            previous.as_ref(),
            now_ms,
            self.delays,
            jitter,
            parked_on,
            reason.to_string(),
        );
        self.write(key, failures);
    }

    /// Brings `key` back at `at_ms` though nothing changes, its failures forgotten (a row of no
    /// attempts).
    pub fn again(&self, key: &str, at_ms: i64) {
        let again = Failures {
            attempts: 0,
            next_attempt_ms: at_ms,
            parked_on: None,
            last_error: String::new(),
        };
        self.write(key, again);
    }

    /// Forgets the rows of every key but those `keep` names: after a full pass that saw every
    /// object, those of the objects that are no more.
    pub fn forget_all_but(&self, keep: &BTreeSet<String>) {
        let gone: Vec<String> = (self.rows.borrow().keys())
            .filter(|k| !keep.contains(*k))
            .cloned()
            .collect();
        for key in gone {
            self.succeeded(&key);
        }
    }

    fn write(&self, key: &str, failures: Failures) {
        if let Err(e) = self.table.record(key, &failures) {
            let warning = format!(
                "{}: cannot record the backoff of {key}: {e}",
                self.table.reconciler
            );
            self.env.log(Level::Warn, &warning);
        }
        self.rows.borrow_mut().insert(key.to_string(), failures);
    }
}

impl Backoff for Loaded<'_> {
    fn due(&self, key: &str, now_ms: i64) -> bool {
        (self.rows.borrow().get(key)).is_none_or(|f| !f.holds_back(now_ms))
    }

    fn failed(&self, key: &str, now_ms: i64, reason: &str) {
        self.fail(key, now_ms, reason, None);
    }

    fn succeeded(&self, key: &str) {
        if self.rows.borrow_mut().remove(key).is_none() {
            return;
        }
        if let Err(e) = self.table.forget(key) {
            let warning = format!(
                "{}: cannot clear the backoff of {key}: {e}",
                self.table.reconciler
            );
            self.env.log(Level::Warn, &warning);
        }
    }

    fn due_now(&self, now_ms: i64) -> Vec<String> {
        (self.rows.borrow().iter())
            .filter(|(_, f)| !f.holds_back(now_ms))
            .map(|(key, _)| key.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_is_capped_and_jitters_by_at_most_a_quarter() {
        assert_eq!(delay_ms(1, 1000, 300_000, 0), 1000);
        assert_eq!(delay_ms(2, 1000, 300_000, 0), 2000);
        assert_eq!(delay_ms(5, 1000, 300_000, 0), 16_000);
        assert_eq!(delay_ms(40, 1000, 300_000, 0), 300_000);
        assert_eq!(delay_ms(0, 2000, 300_000, 0), 2000);
        assert!(delay_ms(3, 1000, 300_000, 255) <= 4000 * 5 / 4);
        assert!(delay_ms(3, 1000, 300_000, 255) > 4000);
        assert_eq!(
            delay_ms(3, 1000, 300_000, 128),
            4500,
            "jitter adds its share of a quarter"
        );
    }

    #[test]
    fn an_item_waits_until_its_next_attempt_and_no_longer() {
        let failures = Failures::after(None, 10_000, (1000, 300_000), 0, None, "boom".into());
        assert_eq!(failures.next_attempt_ms, 11_000);
        assert!(failures.holds_back(10_999));
        assert!(
            !failures.holds_back(11_000),
            "due at its time, as `due` reads it"
        );
        assert!(!failures.holds_back(20_000));
        let parked = Failures {
            parked_on: Some("hash".into()),
            ..failures
        };
        assert!(parked.holds_back(20_000), "parked waits whatever the time");
    }

    #[cfg(feature = "fake")]
    #[test]
    fn loaded_failures_back_off_across_loads_park_come_again_and_a_success_forgets_them() {
        let (sql, kube) = (database("loaded"), crate::fake::FakeCluster::new());
        let host = crate::fake::FakeHost::new(&sql, &kube, "h");
        let now = 5_000;
        let load = || Loaded::load(&host, &host, "cf", (1_000, 300_000)).expect("load");
        let backoff = load();
        backoff.failed("org/a", now, "boom");
        backoff.failed("org/a", now, "boom again");
        assert!(
            !backoff.due("org/a", now + 1_000),
            "two failures wait ≥ 2 s"
        );
        assert!(backoff.due("org/b", now));

        // Another host (or the next pass) reads what this one wrote.
        let reloaded = load();
        assert!(!reloaded.due("org/a", now + 1_000));
        assert!(
            reloaded.due("org/a", now + 2_600),
            "2 s plus at most 25% jitter"
        );
        assert_eq!(reloaded.due_now(now + 2_600), vec!["org/a".to_string()]);
        assert!(reloaded.due_now(now).is_empty());

        reloaded.fail("org/p", now, "rejected", Some("h1".into()));
        assert!(
            reloaded.holds_back("org/p", i64::MAX, || "h1".into()),
            "parked on h1"
        );
        assert!(
            !reloaded.holds_back("org/p", now, || "h2".into()),
            "its desired state moved on"
        );
        reloaded.again("org/r", now + 3_000);
        assert!(reloaded.holds_back("org/r", now + 2_999, String::new));
        assert_eq!(load().due_now(now + 3_000), ["org/a", "org/r"]);

        reloaded.succeeded("org/a");
        reloaded.forget_all_but(&BTreeSet::from(["org/p".to_string()]));
        let after = load();
        assert!(after.due("org/a", now));
        assert_eq!(
            after.table.all().expect("all").keys().collect::<Vec<_>>(),
            ["org/p"]
        );
    }

    /// A database with [`TABLE`] as the documented schema makes it, migrated in a directory of
    /// its own (`name`).
    #[cfg(feature = "fake")]
    fn database(name: &str) -> crate::fake::FakeSql {
        let dir = std::env::temp_dir().join(format!("lethe-backoff-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let ddl = include_str!("backoff.rs")
            .split("/// ```sql\n")
            .nth(1)
            .and_then(|rest| rest.split("/// ```\n").next())
            .expect("the documented schema")
            .lines()
            .map(|l| {
                l.trim_start_matches("///")
                    .split("--")
                    .next()
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::write(dir.join("0001.sql"), ddl).expect("migration");
        let sql = crate::fake::FakeSql::migrated(&dir);
        let _ = std::fs::remove_dir_all(dir);
        sql
    }

    #[cfg(feature = "fake")]
    #[test]
    fn each_reconciler_keeps_its_own_failures_which_wait_park_and_are_forgotten() {
        let sql = database("table");
        let (cf, jobs) = (
            BackoffTable::new(&sql, "cf"),
            BackoffTable::new(&sql, "jobs"),
        );
        let now = 10_000;
        let first = Failures::after(None, now, (1000, 300_000), 0, None, "boom".into());
        assert_eq!((first.attempts, first.next_attempt_ms), (1, 11_000));
        cf.record("org/a", &first).expect("record");
        let second = Failures::after(Some(&first), now, (1000, 300_000), 0, None, "again".into());
        assert_eq!((second.attempts, second.next_attempt_ms), (2, 12_000));
        cf.record("org/a", &second).expect("record");
        let parked = Failures::after(
            None,
            now,
            (1000, 300_000),
            0,
            Some("h1".into()),
            "422".into(),
        );
        cf.record("org/b", &parked).expect("record");

        assert_eq!(cf.of("org/a").expect("of"), Some(second.clone()));
        assert_eq!(jobs.of("org/a").expect("of"), None, "another reconciler's");
        assert!(cf.due(now).expect("due").is_empty());
        assert_eq!(
            cf.due(12_000).expect("due"),
            ["org/a"],
            "a parked one never comes due"
        );
        assert_eq!(cf.held_back(12_000).expect("held").len(), 1);
        assert_eq!(cf.held_back(now).expect("held").len(), 2);
        assert!(parked.holds_back(i64::MAX));

        cf.forget("org/a").expect("forget");
        assert_eq!(cf.all().expect("all").keys().collect::<Vec<_>>(), ["org/b"]);
    }
}
