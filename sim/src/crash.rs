//! A lethe host whose pass the schedule can interrupt between any two capability calls: before
//! each `kube` or `sql` call it lets the other actors move (`between`), and once its budget of
//! calls is spent it crashes, unwinding out of the component's logic as a killed process would
//! stop it. What was committed stays; an unfinished SQL batch never started, because the crash
//! comes before the call.

use std::cell::Cell;

use lethe_guest::env::{Env, Level};
use lethe_guest::fake::FakeHost;
use lethe_guest::kube::{Kube, KubeVia};
use lethe_guest::sql::{Sql, SqlError, Statement, Value};

/// The payload a crash unwinds with (no panic message: it is not a failure of the simulator).
pub struct Crash;

/// `inner`, running `between` before each `kube` or `sql` call and crashing before its
/// `budget + 1`-th one (never, without a budget).
pub struct Scheduled<'h, 'a> {
    inner: &'h FakeHost<'a>,
    budget: Cell<Option<u32>>,
    between: &'h dyn Fn(),
}

impl<'h, 'a> Scheduled<'h, 'a> {
    /// A host that lets `between` run before every call and crashes after `budget` calls.
    pub fn new(inner: &'h FakeHost<'a>, budget: Option<u32>, between: &'h dyn Fn()) -> Self {
        Scheduled {
            inner,
            budget: Cell::new(budget),
            between,
        }
    }

    fn spend(&self) {
        (self.between)();
        match self.budget.get() {
            Some(0) => std::panic::resume_unwind(Box::new(Crash)),
            Some(left) => self.budget.set(Some(left - 1)),
            None => {}
        }
    }
}

impl KubeVia for Scheduled<'_, '_> {
    fn via(&self) -> &dyn Kube {
        self.spend();
        self.inner.kube
    }
}

impl Sql for Scheduled<'_, '_> {
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        self.spend();
        self.inner.query(sql, params)
    }

    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        self.spend();
        self.inner.execute(sql, params)
    }

    fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError> {
        self.spend();
        self.inner.batch(statements)
    }
}

impl Env for Scheduled<'_, '_> {
    fn now_ms(&self) -> i64 {
        self.inner.now_ms()
    }

    fn sleep_ms(&self, ms: u64) {
        self.inner.sleep_ms(ms);
    }

    fn config(&self, key: &str) -> Option<String> {
        self.inner.config(key)
    }

    fn log(&self, level: Level, message: &str) {
        self.inner.log(level, message);
    }

    fn random_bytes(&self, n: usize) -> Vec<u8> {
        self.inner.random_bytes(n)
    }

    fn new_uuid(&self) -> String {
        self.inner.new_uuid()
    }
}
