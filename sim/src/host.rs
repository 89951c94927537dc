//! A lethe host as the simulator runs it. The schedule can interrupt its pass between any two
//! capability calls: before each `kube` or `sql` call it lets the other actors move (`between`),
//! and once its budget of calls is spent it crashes, unwinding out of the component's logic as a
//! killed process would stop it. What was committed stays; an unfinished SQL batch never
//! started, because the crash comes before the call.
//!
//! It also waits out the cluster's 429s as the lethe host's `kube` capability does, under the
//! same policy (`lethe_retry::Policy::default()`, the host's `RetryPolicy`): each one's
//! `Retry-After`, capped at 5 s, on the virtual clock, until the call's budget of throttling
//! answers is spent; then the call fails as unavailable.

use std::cell::Cell;
use std::time::Duration;

use lethe_guest::env::{Env, Level};
use lethe_guest::fake::{FakeCluster, FakeHost};
use lethe_guest::kube::{
    ChangeBatch, Collection, DeleteOptions, Deletion, Identity, Kube, KubeError, KubeVia,
    ListOptions, Object, ObjectList, ObjectRef, Patch, Result, Since,
};
use lethe_guest::sql::{Sql, SqlError, Statement, Value};
use lethe_retry::{Budget, Policy, Setback};
use rand::Rng;
use rand::rngs::StdRng;
use serde_json::Value as Json;

/// The cluster's next answers of 429 Too Many Requests, whoever asks, and the `Retry-After` they
/// carry.
#[derive(Default)]
pub struct Throttle {
    /// How many calls are still answered 429.
    pub remaining: Cell<u32>,
    /// The `Retry-After` of each, in milliseconds.
    pub retry_after_ms: Cell<i64>,
}

impl Throttle {
    /// A storm of 429s the seed picks: 1–14 answers (past ten, a call gives up), each asking for
    /// 0.1–8 s. Its trace line.
    pub fn storm(&self, rng: &mut StdRng) -> String {
        let (answers, retry_after) = (rng.random_range(1..=14), rng.random_range(100..=8_000));
        self.remaining.set(answers);
        self.retry_after_ms.set(retry_after);
        format!("fault: the next {answers} calls are answered 429, Retry-After {retry_after} ms")
    }
}

/// One of `options`, as the seed picks it; a choice of one draws nothing, so adding a world's
/// only kind does not shift the seed's later draws.
fn pick<'o>(rng: &mut StdRng, options: &[&'o str]) -> &'o str {
    match options {
        [only] => only,
        _ => options[rng.random_range(0..options.len())],
    }
}

/// The faults every world injects into its cluster, each returning its trace line. A world
/// chooses how often each comes and which calls it may hit.
pub mod faults {
    use super::*;

    /// The calls a fault may hit: one of `verbs` on one of `kinds` (`*`: any kind).
    pub struct Calls<'o> {
        /// The verbs, e.g. `patch`.
        pub verbs: &'o [&'o str],
        /// The kinds, e.g. `CronJob`.
        pub kinds: &'o [&'o str],
    }

    impl<'o> Calls<'o> {
        /// The verb, then the kind, as the seed picks them.
        fn pick(&self, rng: &mut StdRng) -> (&'o str, &'o str) {
            (pick(rng, self.verbs), pick(rng, self.kinds))
        }
    }

    /// Which faults a world injects into its cluster, and how often.
    pub struct Plan<'o> {
        /// The calls that may start failing.
        pub failing: Calls<'o>,
        /// The writes whose answer may be lost.
        pub timed_out: Calls<'o>,
        /// The kinds whose next create may lose its answer.
        pub lost_creates: &'o [&'o str],
        /// Where each fault's share of a roll in `0..100` ends: failing calls, healing, a storm of
        /// 429s, a timed-out write, a lost create and expired watches, in that order. Rolls past
        /// the last are the world's own fault.
        pub odds: [u32; 6],
    }

    impl Plan<'_> {
        /// Injects the fault `roll` falls on and says what it did; `None` when the roll is the
        /// world's own.
        pub fn inject(
            &self,
            kube: &FakeCluster,
            rng: &mut StdRng,
            throttle: &Throttle,
            roll: u32,
        ) -> Option<String> {
            let [failing, healing, storm, timed_out, lost, expired] = self.odds;
            Some(match roll {
                r if r < failing => fail_calls(kube, rng, &self.failing),
                r if r < healing => heal(kube),
                r if r < storm => throttle.storm(rng),
                r if r < timed_out => time_out_a_write(kube, rng, &self.timed_out),
                r if r < lost => lose_a_create(kube, rng, self.lost_creates),
                r if r < expired => expire_watches(kube),
                _ => return None,
            })
        }
    }

    /// Every later call with the verb and kind the seed picks from `calls` fails as an
    /// unreachable cluster does, until healed.
    pub fn fail_calls(kube: &FakeCluster, rng: &mut StdRng, calls: &Calls) -> String {
        let (verb, kind) = calls.pick(rng);
        kube.fail(verb, kind);
        format!("fault: {verb} {kind} fails")
    }

    /// Every failing call answers again.
    pub fn heal(kube: &FakeCluster) -> String {
        kube.heal();
        "fault: healed".into()
    }

    /// A write whose answer is lost: the next write `calls` picks (`replace`, `patch` or
    /// `delete`) times out after it was carried out or before.
    pub fn time_out_a_write(kube: &FakeCluster, rng: &mut StdRng, calls: &Calls) -> String {
        let (verb, kind) = calls.pick(rng);
        let applied = rng.random_ratio(1, 2);
        kube.time_out_next(verb, kind, applied);
        format!("fault: the next {verb} of a {kind} times out (applied: {applied})")
    }

    /// The next create of one of `kinds` loses its answer, carried out or not.
    pub fn lose_a_create(kube: &FakeCluster, rng: &mut StdRng, kinds: &[&str]) -> String {
        let kind = pick(rng, kinds);
        let applied = rng.random_ratio(1, 2);
        kube.lose_next_create(kind, applied);
        format!("fault: the next {kind} create's answer is lost (applied: {applied})")
    }

    /// Every bookmark given out so far expires: asking for changes since it is answered 410 Gone.
    pub fn expire_watches(kube: &FakeCluster) -> String {
        kube.expire_watches();
        "fault: watches expire".into()
    }
}

/// What a call that met more 429s than a host waits out gets: unavailable.
struct Throttled;

impl Throttled {
    fn answer<T>() -> Result<T> {
        Err(KubeError::Unavailable(format!(
            "429 Too Many Requests, {} times",
            Policy::default().max_throttled
        )))
    }
}

impl Kube for Throttled {
    fn authenticate(&self, _: &Identity) -> Result<()> {
        Self::answer()
    }
    fn get(&self, _: &Identity, _: &ObjectRef) -> Result<Object> {
        Self::answer()
    }
    fn list(&self, _: &Identity, _: &Collection, _: &ListOptions) -> Result<ObjectList> {
        Self::answer()
    }
    fn create(&self, _: &Identity, _: &Json) -> Result<Object> {
        Self::answer()
    }
    fn patch(&self, _: &Identity, _: &ObjectRef, _: &Patch) -> Result<Object> {
        Self::answer()
    }
    fn patch_status(&self, _: &Identity, _: &ObjectRef, _: &Patch) -> Result<Object> {
        Self::answer()
    }
    fn replace(&self, _: &Identity, _: &ObjectRef, _: &Json) -> Result<Object> {
        Self::answer()
    }
    fn delete(&self, _: &Identity, _: &ObjectRef, _: &DeleteOptions) -> Result<Deletion> {
        Self::answer()
    }
    fn changes(&self, _: &Identity, _: &Collection, _: Since<'_>) -> Result<ChangeBatch> {
        Self::answer()
    }
}

/// The payload a crash unwinds with (no panic message: it is not a failure of the simulator).
pub struct Crash;

/// `inner`, running `between` before each `kube` or `sql` call and crashing before its
/// `budget + 1`-th one (never, without a budget), and waiting out the `throttle`'s 429s.
pub struct Scheduled<'h, 'a> {
    inner: &'h FakeHost<'a>,
    budget: Cell<Option<u32>>,
    between: &'h dyn Fn(),
    throttle: &'h Throttle,
    /// The cluster as the host's calls reach it, each write written down when asked.
    recorded: Recorded<'h>,
}

/// A write call that reached the cluster: the kind and name of its target, whatever the
/// cluster answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteCall {
    /// The target's kind.
    pub kind: String,
    /// The target's name.
    pub name: String,
}

/// The cluster, forwarding every call and, when a log is given, writing down each write call
/// (create, patch, replace, delete), answered or refused. A host that has lost its Lease may not
/// *attempt* a write, even one the cluster refuses: the refusal is luck, not a guard.
struct Recorded<'h> {
    cluster: &'h dyn Kube,
    log: Option<&'h std::cell::RefCell<Vec<WriteCall>>>,
}

impl Recorded<'_> {
    fn write(&self, kind: &str, name: &str) {
        if let Some(log) = self.log {
            log.borrow_mut().push(WriteCall {
                kind: kind.to_string(),
                name: name.to_string(),
            });
        }
    }

    fn write_to(&self, target: &ObjectRef) {
        self.write(&target.kind, &target.name);
    }
}

impl Kube for Recorded<'_> {
    fn authenticate(&self, id: &Identity) -> Result<()> {
        self.cluster.authenticate(id)
    }
    fn get(&self, id: &Identity, target: &ObjectRef) -> Result<Object> {
        self.cluster.get(id, target)
    }
    fn list(&self, id: &Identity, of: &Collection, page: &ListOptions) -> Result<ObjectList> {
        self.cluster.list(id, of, page)
    }
    fn create(&self, id: &Identity, object: &Json) -> Result<Object> {
        let field = |pointer: &str| object.pointer(pointer).and_then(Json::as_str);
        let name = field("/metadata/name").or(field("/metadata/generateName"));
        self.write(field("/kind").unwrap_or_default(), name.unwrap_or_default());
        self.cluster.create(id, object)
    }
    fn patch(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object> {
        self.write_to(target);
        self.cluster.patch(id, target, patch)
    }
    fn patch_status(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object> {
        self.write_to(target);
        self.cluster.patch_status(id, target, patch)
    }
    fn replace(&self, id: &Identity, target: &ObjectRef, object: &Json) -> Result<Object> {
        self.write_to(target);
        self.cluster.replace(id, target, object)
    }
    fn delete(&self, id: &Identity, target: &ObjectRef, how: &DeleteOptions) -> Result<Deletion> {
        self.write_to(target);
        self.cluster.delete(id, target, how)
    }
    fn changes(&self, id: &Identity, of: &Collection, since: Since<'_>) -> Result<ChangeBatch> {
        self.cluster.changes(id, of, since)
    }
}

impl<'h, 'a> Scheduled<'h, 'a> {
    /// A host that lets `between` run before every call, crashes after `budget` calls and meets
    /// the cluster's `throttle`.
    pub fn new(
        inner: &'h FakeHost<'a>,
        budget: Option<u32>,
        between: &'h dyn Fn(),
        throttle: &'h Throttle,
    ) -> Self {
        Scheduled {
            inner,
            budget: Cell::new(budget),
            between,
            throttle,
            recorded: Recorded {
                cluster: inner.kube,
                log: None,
            },
        }
    }

    /// The same host, writing down in `log` each write call that reaches the cluster.
    pub fn recording_writes(mut self, log: &'h std::cell::RefCell<Vec<WriteCall>>) -> Self {
        self.recorded.log = Some(log);
        self
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
        let throttle = self.throttle;
        // The policy the lethe host's `kube` capability retries under by default.
        let mut budget = Budget::new(Policy::default());
        loop {
            let Some(left) = throttle.remaining.get().checked_sub(1) else {
                return &self.recorded;
            };
            throttle.remaining.set(left);
            let asked = u64::try_from(throttle.retry_after_ms.get()).unwrap_or(0);
            // The delay is the server's (capped), so the policy draws no jitter.
            match budget.next(
                Setback::Throttled,
                Some(Duration::from_millis(asked)),
                None,
                0,
            ) {
                Some(delay) => self
                    .inner
                    .advance(i64::try_from(delay.as_millis()).unwrap_or(i64::MAX)),
                None => return &Throttled,
            }
        }
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

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use serde_json::json;

    use super::*;

    #[test]
    fn every_write_call_is_written_down_whatever_the_cluster_answers_and_reads_are_not() {
        let cluster = FakeCluster::new();
        let host = FakeHost::on(&cluster);
        let throttle = Throttle::default();
        let log = RefCell::new(Vec::new());
        let scheduled = Scheduled::new(&host, None, &|| {}, &throttle).recording_writes(&log);
        let gone = ObjectRef::new("batch/v1", "CronJob", Some("ns"), "gone");
        assert!(scheduled.get(&Identity::Privileged, &gone).is_err());
        let refused = scheduled.delete(&Identity::Privileged, &gone, &DeleteOptions::default());
        assert!(
            matches!(refused, Err(KubeError::NotFound(_))),
            "{refused:?}"
        );
        let made = json!({
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "made", "namespace": "ns"},
        });
        scheduled
            .create(&Identity::Privileged, &made)
            .expect("created");
        let written: Vec<(String, String)> = log
            .into_inner()
            .into_iter()
            .map(|w| (w.kind, w.name))
            .collect();
        assert_eq!(
            written,
            [
                ("CronJob".to_string(), "gone".to_string()),
                ("CronJob".to_string(), "made".to_string()),
            ]
        );
    }
}
