//! The driver on the fake host, through a toy reconciler: desired ConfigMaps, by name, each with
//! one value, made in namespace `ns` with the toy's label and finalizer.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use serde_json::json;

use super::*;
use crate::backoff::BackoffTable;
use crate::env::Env as _;
use crate::events::Recorder;
use crate::follow::Source;
use crate::kube::{DeleteOptions, Deletion, Identity, Kube as _, Patch};

const PRIVILEGED: &Identity = &Identity::Privileged;
use crate::fake::{FakeCluster, FakeHost, FakeSql};
use crate::follow::{Heard, Watched};
use crate::kept::KeptTable;
use crate::kube::{Collection, ObjectRef};

const FINALIZER: &str = "lethe.dev/toy";
const MARK: &str = "lethe.dev/toy";

static KEPT: KeptTable = KeptTable {
    select: "SELECT value FROM kept WHERE name = $1",
    upsert: "INSERT INTO kept (name, value) VALUES ($1, $2) \
             ON CONFLICT (name) DO UPDATE SET value = excluded.value",
    delete: "DELETE FROM kept WHERE name = $1",
};

/// A database with the kept values and the backoff table.
fn database(name: &str) -> FakeSql {
    let dir = std::env::temp_dir().join(format!("lethe-controller-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::write(
        dir.join("0001.sql"),
        "CREATE TABLE kept (name TEXT PRIMARY KEY, value TEXT NOT NULL);
         CREATE TABLE reconcile_backoff (reconciler TEXT NOT NULL, object_key TEXT NOT NULL,
             attempts INTEGER NOT NULL, next_attempt_ms BIGINT NOT NULL, parked_on TEXT,
             last_error TEXT NOT NULL, PRIMARY KEY (reconciler, object_key));",
    )
    .expect("migration");
    let sql = FakeSql::migrated(&dir);
    let _ = std::fs::remove_dir_all(dir);
    sql
}

/// An in-memory feed of keys whose desired value changed; `down` makes it unable to tell.
#[derive(Default)]
struct Pokes {
    keys: RefCell<Vec<String>>,
    down: Cell<bool>,
}

impl Source for &Pokes {
    type Change = String;
    type Error = String;

    fn key(&self) -> String {
        "pokes".into()
    }

    fn head(&self) -> Result<String, String> {
        match self.down.get() {
            true => Err("down".into()),
            false => Ok(self.keys.borrow().len().to_string()),
        }
    }

    fn since(&self, bookmark: &str, _max: u32) -> Result<Heard<String>, String> {
        if self.down.get() {
            return Err("down".into());
        }
        let from: usize = bookmark.parse().map_err(|_| "not a bookmark".to_string())?;
        let keys = self.keys.borrow();
        Ok(Heard {
            changes: keys.get(from..).unwrap_or_default().to_vec(),
            bookmark: keys.len().to_string(),
            more: false,
        })
    }
}

/// What one visit of a key does instead of the toy's rules, once.
enum Script {
    Fail(KubeError),
    Again(i64),
    Park,
    /// Another host takes the Lease, then the visit tries to write.
    LoseLease,
    /// The visit takes this long.
    Spend(i64),
}

struct Toy<'a> {
    host: &'a FakeHost<'a>,
    desired: RefCell<BTreeMap<String, String>>,
    pokes: Pokes,
    visits: RefCell<Vec<String>>,
    script: RefCell<BTreeMap<String, Script>>,
    failing_cleanup: Cell<bool>,
    reads_all: Cell<u32>,
}

struct Item {
    key: String,
    desired: Option<String>,
    live: Option<Object>,
}

fn target(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        namespace: Some("ns".into()),
        name: name.into(),
    }
}

impl<'a> Toy<'a> {
    fn new(host: &'a FakeHost<'a>) -> Self {
        Toy {
            host,
            desired: RefCell::default(),
            pokes: Pokes::default(),
            visits: RefCell::default(),
            script: RefCell::default(),
            failing_cleanup: Cell::new(false),
            reads_all: Cell::new(0),
        }
    }

    /// Desires `name` with `value` (`None`: no longer), and says so on the feed.
    fn want(&self, name: &str, value: Option<&str>) {
        match value {
            Some(v) => self.desired.borrow_mut().insert(name.into(), v.into()),
            None => self.desired.borrow_mut().remove(name),
        };
        self.pokes.keys.borrow_mut().push(name.into());
    }

    fn visited(&self) -> Vec<String> {
        std::mem::take(&mut *self.visits.borrow_mut())
    }

    fn config(&self) -> Config<'a> {
        Config {
            name: "toy",
            controller: "lethe.dev/toy".into(),
            lease: LeaseConfig {
                namespace: "lethe-system".into(),
                name: "toy".into(),
                holder: "h".into(),
                duration_ms: 15_000,
                renew_ms: 5_000,
            },
            kept: Kept::new(self.host, &KEPT, "h"),
            resync_ms: 600_000,
            budget_ms: Some(10_000),
            backoff: (1_000, 60_000),
            max_changed: None,
        }
    }

    fn pass(&self) -> PassReport {
        run(self.host, self.config(), self, false).expect("a pass")
    }

    fn item(&self, key: &str, live: Option<Object>) -> Item {
        Item {
            key: key.into(),
            desired: self.desired.borrow().get(key).cloned(),
            live,
        }
    }
}

impl Reconciler for Toy<'_> {
    type Item = Item;

    fn key(&self, item: &Item) -> String {
        item.key.clone()
    }

    fn fingerprint(&self, item: &Item) -> String {
        item.desired.clone().unwrap_or_default()
    }

    fn owns(&self, object: &Object) -> bool {
        object.label(MARK) == Some("yes")
    }

    fn sources(&self) -> Vec<Box<dyn Follow + '_>> {
        let made = Collection {
            label_selector: Some(MARK.into()),
            ..Collection::new("v1", "ConfigMap", Some("ns"))
        };
        vec![
            Box::new(keyed(&self.pokes, |key| vec![key])),
            Box::new(keyed(Watched::new(self.host, made), |change| {
                vec![change.object.target.name]
            })),
        ]
    }

    fn read_all(&self, visit: &mut dyn FnMut(Item) -> ControlFlow<()>) -> Result<(), String> {
        self.reads_all.set(self.reads_all.get() + 1);
        let mut keys: Vec<String> = self.desired.borrow().keys().cloned().collect();
        for live in self.host.all("ConfigMap") {
            keys.push(live.target.name.clone());
        }
        keys.sort();
        keys.dedup();
        let named: Vec<Named> = keys.into_iter().map(Named::key).collect();
        let _ = self.read(&named)?.into_iter().try_for_each(visit);
        Ok(())
    }

    fn read(&self, named: &[Named]) -> Result<Vec<Item>, String> {
        Named::keys(named)
            .iter()
            .map(|key| match self.host.get(PRIVILEGED, &target(key)) {
                Ok(live) => Ok(self.item(key, Some(live))),
                Err(KubeError::NotFound(_)) => Ok(self.item(key, None)),
                Err(e) => Err(e.to_string()),
            })
            .collect()
    }

    fn reconcile(&self, ctx: &mut Context<'_>, item: &Item) -> Result<Action, Error> {
        self.visits.borrow_mut().push(item.key.clone());
        match self.script.borrow_mut().remove(&item.key) {
            Some(Script::Fail(e)) => return Err(e.into()),
            Some(Script::Again(ms)) => return Ok(Action::Again(ms)),
            Some(Script::Park) => return Ok(Action::Park("cannot be made".into())),
            Some(Script::LoseLease) => {
                self.host.edit("Lease", "lethe-system", "toy", |lease| {
                    lease["spec"]["holderIdentity"] = json!("another");
                });
                self.host.advance(5_000);
            }
            Some(Script::Spend(ms)) => self.host.advance(ms),
            None => {}
        }
        let (desired, live) = (&item.desired, &item.live);
        match (desired, live) {
            (None, None) => Ok(Action::Done),
            (Some(value), None) => {
                ctx.create(json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": item.key, "namespace": "ns", "labels": {MARK: "yes"}},
                    "data": {"value": value},
                }))?;
                Ok(Action::Done)
            }
            (Some(value), Some(live)) => ctx.finalized(
                live,
                FINALIZER,
                |ctx, live| {
                    if live.str_at("/data/value") != Some(value.as_str()) {
                        ctx.patch(live, Patch::Merge(json!({"data": {"value": value}})))?;
                    }
                    Ok(Action::Done)
                },
                |_, _| Ok(Action::Done),
            ),
            (None, Some(live)) => {
                let live = match live.metadata.deletion_timestamp {
                    Some(_) => live.clone(),
                    None => match ctx.delete(live)? {
                        Deletion::Done => return Ok(Action::Done),
                        Deletion::Pending(pending) => *pending,
                    },
                };
                ctx.finalized(
                    &live,
                    FINALIZER,
                    |_, _| Ok(Action::Done),
                    |_, _| match self.failing_cleanup.get() {
                        true => Err(KubeError::Unavailable("cleanup failed".into()).into()),
                        false => Ok(Action::Done),
                    },
                )
            }
        }
    }
}

/// Runs `body` with the write helpers of a pass of `toy`'s, the Lease taken.
fn in_a_pass(host: &FakeHost<'_>, toy: &Toy<'_>, body: impl FnOnce(&mut Context<'_>)) {
    let config = toy.config();
    let lease = match Lease::acquire(host, &config.lease, host.now_ms()) {
        Ok(Leadership::Held(lease)) => lease,
        other => panic!("the Lease: {other:?}"),
    };
    let owns = |object: &Object| toy.owns(object);
    let mut ctx = Context {
        kube: host,
        env: host,
        sql: host,
        lease: &lease,
        owns: &owns,
        events: Recorder::new(host, host, "lethe.dev/toy"),
        report: PassReport::default(),
        lost: false,
    };
    body(&mut ctx);
}

/// A cluster where the Lease's namespace and `ns` exist.
fn cluster() -> FakeCluster {
    FakeCluster::new()
}

#[test]
fn a_full_pass_makes_what_is_desired_and_later_passes_visit_only_what_changed() {
    let (sql, kube) = (database("changes"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let toy = Toy::new(&host);
    toy.want("a", Some("1"));
    toy.want("b", Some("2"));

    let first = toy.pass();
    assert_eq!((first.examined, first.created), (2, 2), "{first:?}");
    assert_eq!(toy.reads_all.get(), 1, "the first pass is full");
    // The creates' own changes bring the next visit, which adds the finalizer.
    let second = toy.pass();
    assert_eq!((second.examined, second.updated), (2, 2), "{second:?}");
    let made = kube.object("ConfigMap", "ns", "a").expect("made");
    assert_eq!(made.metadata.finalizers, vec![FINALIZER.to_string()]);
    toy.pass();
    toy.visited();
    let idle = toy.pass();
    assert_eq!(idle.examined, 0, "nothing changed: {idle:?}");

    toy.want("a", Some("one"));
    let changed = toy.pass();
    assert_eq!(toy.visited(), vec!["a"]);
    assert_eq!(changed.updated, 1);
    assert_eq!(
        kube.object("ConfigMap", "ns", "a")
            .expect("a")
            .str_at("/data/value"),
        Some("one")
    );
    assert_eq!(toy.reads_all.get(), 1, "no full pass since");

    toy.want("b", None);
    let deleted = toy.pass();
    assert_eq!(deleted.deleted, 1, "{deleted:?}");
    assert!(
        !kube.exists("ConfigMap", "ns", "b"),
        "its finalizer removed, it is gone"
    );
}

#[test]
fn only_the_lease_holder_runs_passes() {
    let (sql, kube) = (database("lease"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let other = FakeHost::new(&sql, &kube, "other");
    let toy = Toy::new(&host);
    toy.want("a", Some("1"));
    toy.pass();
    let mut config = toy.config();
    config.lease.holder = "other".into();
    let elsewhere = run(&other, config, &toy, false).expect("no pass");
    assert_eq!(elsewhere.leader_elsewhere.as_deref(), Some("h"));
    assert_eq!(elsewhere.examined, 0);
}

#[test]
fn a_lease_lost_mid_pass_stops_it_before_the_next_write_and_the_next_pass_is_full() {
    let (sql, kube) = (database("lost"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let toy = Toy::new(&host);
    toy.want("a", Some("1"));
    toy.want("b", Some("2"));
    toy.script
        .borrow_mut()
        .insert("a".into(), Script::LoseLease);

    let report = toy.pass();
    assert_eq!(toy.visited(), vec!["a"], "b is not visited");
    assert_eq!(report.examined, 1);
    assert_eq!(report.created, 0, "the write after the loss is not made");
    assert!(
        report.failed.is_empty(),
        "a lost Lease is no item's failure"
    );
    assert!(!kube.exists("ConfigMap", "ns", "a"));
    let kept = Kept::new(&host, &KEPT, "h");
    let next = Pass::begin(&host, kept, "toy", 600_000, false);
    assert_eq!(
        next.why_full(),
        Some(&WhyFull::Due),
        "a pass cut short leaves a full one"
    );
}

#[test]
fn a_source_that_cannot_tell_its_changes_makes_the_pass_full() {
    let (sql, kube) = (database("source"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let toy = Toy::new(&host);
    toy.want("a", Some("1"));
    toy.pass();
    toy.pass();
    assert_eq!(toy.reads_all.get(), 1);

    toy.pokes.down.set(true);
    toy.want("b", Some("2"));
    let report = toy.pass();
    assert_eq!(toy.reads_all.get(), 2, "a full pass instead");
    assert_eq!(report.created, 1, "b was made all the same: {report:?}");
    toy.pokes.down.set(false);
    toy.pass();
    assert_eq!(
        toy.reads_all.get(),
        3,
        "it could not be marked, so the next is full too"
    );
    toy.pass();
    assert_eq!(toy.reads_all.get(), 3, "then the changes again");
}

#[test]
fn a_spent_budget_stops_the_pass_and_the_next_one_is_full() {
    let (sql, kube) = (database("budget"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let toy = Toy::new(&host);
    for name in ["a", "b", "c"] {
        toy.want(name, Some("1"));
    }
    toy.script
        .borrow_mut()
        .insert("a".into(), Script::Spend(10_000));
    let report = toy.pass();
    assert_eq!(toy.visited(), vec!["a"], "b and c wait");
    assert_eq!(report.created, 1);
    let next = toy.pass();
    assert_eq!(toy.reads_all.get(), 2, "the next pass is full");
    assert_eq!(next.created, 2, "and makes what was left: {next:?}");
}

#[test]
fn a_failure_backs_off_and_a_parked_item_waits_for_its_desired_state() {
    let (sql, kube) = (database("backoff"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let toy = Toy::new(&host);
    toy.want("a", Some("1"));
    toy.want("p", Some("1"));
    toy.script.borrow_mut().insert(
        "a".into(),
        Script::Fail(KubeError::Unavailable("down".into())),
    );
    toy.script.borrow_mut().insert("p".into(), Script::Park);
    let report = toy.pass();
    let failed: Vec<_> = report
        .failed
        .iter()
        .map(|f| (f.item.as_str(), f.parked))
        .collect();
    assert_eq!(failed, vec![("a", false), ("p", true)]);

    toy.visited();
    toy.pass();
    assert!(toy.visited().is_empty(), "a backs off, p is parked");
    host.advance(1_300);
    let retried = toy.pass();
    assert_eq!(
        toy.visited(),
        vec!["a"],
        "a's backoff is over; p stays parked"
    );
    assert_eq!(retried.created, 1);
    assert!(
        BackoffTable::new(&host, "toy")
            .of("a")
            .expect("read")
            .is_none(),
        "forgotten"
    );

    host.advance(600_000);
    toy.pass();
    assert!(
        !toy.visited().contains(&"p".to_string()),
        "a full pass leaves p parked"
    );
    toy.pass();
    toy.visited();
    toy.want("p", Some("2"));
    let unparked = toy.pass();
    assert_eq!(toy.visited(), vec!["p"], "its desired state changed");
    assert_eq!(unparked.created, 1);

    // The error policy: a write the API server rejects as invalid parks the item.
    toy.want("i", Some("1"));
    toy.script
        .borrow_mut()
        .insert("i".into(), Script::Fail(KubeError::Invalid("bad".into())));
    let invalid = toy.pass();
    assert_eq!(invalid.failed.len(), 1);
    assert!(invalid.failed[0].parked);
}

#[test]
fn again_brings_an_item_back_when_nothing_changed() {
    let (sql, kube) = (database("again"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let toy = Toy::new(&host);
    toy.want("a", Some("1"));
    toy.script
        .borrow_mut()
        .insert("a".into(), Script::Again(3_000));
    let report = toy.pass();
    assert!(report.failed.is_empty(), "a requeue is no failure");
    toy.visited();
    toy.pass();
    assert!(toy.visited().is_empty(), "not yet");
    host.advance(3_000);
    let again = toy.pass();
    assert_eq!(toy.visited(), vec!["a"]);
    assert_eq!(again.created, 1);
}

#[test]
fn a_failing_cleanup_keeps_the_finalizer_until_it_succeeds() {
    let (sql, kube) = (database("cleanup"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let toy = Toy::new(&host);
    toy.want("a", Some("1"));
    toy.pass();
    toy.pass();
    toy.failing_cleanup.set(true);
    toy.want("a", None);
    let failing = toy.pass();
    assert_eq!(failing.failed.len(), 1, "{failing:?}");
    let held = kube
        .object("ConfigMap", "ns", "a")
        .expect("held by its finalizer");
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(held.metadata.finalizers, vec![FINALIZER.to_string()]);

    toy.failing_cleanup.set(false);
    host.advance(1_300);
    toy.pass();
    assert!(
        !kube.exists("ConfigMap", "ns", "a"),
        "cleaned up, then let go"
    );
}

#[test]
fn writes_are_refused_on_objects_not_ours_and_guarded_by_what_was_read() {
    let (sql, kube) = (database("guards"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let toy = Toy::new(&host);
    let theirs = kube.put(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "theirs", "namespace": "ns"}, "data": {"value": "x"}
    }));
    in_a_pass(&host, &toy, |ctx| {
        let refused = ctx.patch(&theirs, Patch::Merge(json!({"data": {"value": "mine"}})));
        assert!(matches!(refused, Err(Error::NotOurs(_))), "{refused:?}");
        assert!(matches!(ctx.delete(&theirs), Err(Error::NotOurs(_))));
        let unmarked = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "new", "namespace": "ns"}});
        assert!(matches!(ctx.create(unmarked), Err(Error::NotOurs(_))));
        assert_eq!(
            kube.object("ConfigMap", "ns", "theirs")
                .expect("theirs")
                .str_at("/data/value"),
            Some("x")
        );

        let ours = ctx
            .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "ours", "namespace": "ns", "labels": {MARK: "yes"}}}))
            .expect("made");
        kube.edit("ConfigMap", "ns", "ours", |o| {
            o["data"] = json!({"value": "edited"})
        });
        for stale in [
            ctx.patch(&ours, Patch::Merge(json!({"data": {"value": "mine"}}))),
            ctx.patch(
                &ours,
                Patch::Json(json!([{"op": "add", "path": "/data", "value": {}}])),
            ),
        ] {
            assert!(
                matches!(stale, Err(Error::Kube(KubeError::Conflict(_)))),
                "{stale:?}"
            );
        }
        // Another object of the same name now: the delete's uid precondition spares it.
        kube.clear_finalizers("ConfigMap", "ns", "ours");
        let _ = kube.delete(PRIVILEGED, &target("ours"), &DeleteOptions::default());
        kube.put(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ours", "namespace": "ns", "labels": {MARK: "yes"}}}));
        let spared = ctx.delete(&ours);
        assert!(
            matches!(spared, Err(Error::Kube(KubeError::Conflict(_)))),
            "{spared:?}"
        );
        assert!(kube.exists("ConfigMap", "ns", "ours"));
        assert_eq!(ctx.report.created, 1);
        assert_eq!(
            (ctx.report.updated, ctx.report.deleted),
            (0, 0),
            "failed writes count nothing"
        );
    });
}

#[test]
fn a_finalizer_list_changed_since_the_read_is_a_conflict_not_a_parking() {
    let (sql, kube) = (database("reordered"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let toy = Toy::new(&host);
    toy.want("a", Some("1"));
    toy.pass();
    toy.pass();
    toy.want("a", None);
    // Between the pass's read and its release, another controller puts its finalizer first.
    toy.script.borrow_mut().insert("a".into(), Script::Spend(0));
    kube.edit("ConfigMap", "ns", "a", |o| {
        o["metadata"]["finalizers"] = json!(["example.com/first", FINALIZER]);
        o["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
    });
    let stale = kube.object("ConfigMap", "ns", "a").expect("a");
    kube.edit("ConfigMap", "ns", "a", |o| {
        o["metadata"]["finalizers"] = json!(["example.com/second", "example.com/first", FINALIZER]);
    });
    in_a_pass(&host, &toy, |ctx| {
        let done = |_: &mut Context<'_>, _: &Object| Ok(Action::Done);
        let released = ctx.finalized(&stale, FINALIZER, done, done);
        assert!(
            matches!(released, Err(Error::Kube(KubeError::Conflict(_)))),
            "backs off and reads it again: {released:?}"
        );
        let kept = kube.object("ConfigMap", "ns", "a").expect("still held");
        assert!(
            kept.metadata.finalizers.iter().any(|f| f == FINALIZER),
            "nothing removed on a stale index"
        );
    });
}

#[test]
fn the_configuration_has_defaults_and_a_malformed_value_is_named() {
    let (sql, kube) = (database("config"), cluster());
    let host = FakeHost::new(&sql, &kube, "h");
    let config = Config::from_env(&host, "toy", &KEPT).expect("defaults");
    assert_eq!(config.backoff, (1_000, 300_000));
    assert_eq!((config.resync_ms, config.budget_ms), (600_000, None));
    assert_eq!(config.lease.namespace, "lethe-system");
    assert_eq!(config.controller, "lethe.dev/toy");
    host.set_config("pass_budget_ms", "2500");
    host.set_config("backoff_max_ms", "10");
    let set = Config::from_env(&host, "toy", &KEPT).expect("set");
    assert_eq!(
        (set.budget_ms, set.backoff),
        (Some(2_500), (1_000, 1_000)),
        "the ceiling is at least the base"
    );
    for (key, bad) in [
        ("backoff_base_ms", "soon"),
        ("pass_budget_ms", "0"),
        ("full_resync_seconds", "-1"),
    ] {
        host.set_config(key, bad);
        let refused = Config::from_env(&host, "toy", &KEPT).map(|_| ());
        assert!(
            refused.as_ref().is_err_and(|e| e.contains(key)),
            "{key}={bad}: {refused:?}"
        );
        host.set_config(key, "");
    }
}

/// What a change carried is used as it was carried, and only what none told of is read: a
/// watched object's latest state, or its being gone.
#[test]
fn a_pair_takes_its_object_from_the_change_that_carried_it_and_reads_the_rest() {
    let cluster = cluster();
    let sql = database("pairs");
    let host = FakeHost::new(&sql, &cluster, "host-1");
    let put = |name: &str, value: &str| {
        host.create(
            PRIVILEGED,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns"}, "data": {"v": value}}),
        )
        .expect("create")
    };
    let carried = put("carried", "as carried");
    put("gone", "still there");
    put("read", "in the cluster");
    // The cluster moved on since the change that carried it: the pair keeps what was carried
    // (a write on it would then be refused by its resourceVersion).
    host.patch(
        PRIVILEGED,
        &target("carried"),
        &Patch::Merge(json!({"data": {"v": "newer"}})),
    )
    .expect("patch");
    let named = [
        Named {
            key: "ns/carried".into(),
            seen: Seen::Live(Box::new(carried)),
        },
        Named {
            key: "ns/gone".into(),
            seen: Seen::Gone,
        },
        Named::key("ns/read"),
    ];
    let collection = Collection::new("v1", "ConfigMap", Some("ns"));
    let pairs = Pair::at(
        &host,
        &collection,
        &named,
        vec!["ns/read".to_string()],
        |d| d.clone(),
    );
    let value = |at: usize| {
        let live = pairs[at].live.clone().expect("no read failed");
        live.map(|o| {
            o.json()["data"]["v"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
    };
    assert_eq!(value(0).as_deref(), Some("as carried"), "not read again");
    assert_eq!(value(1), None, "gone, as the change said");
    assert_eq!(
        value(2).as_deref(),
        Some("in the cluster"),
        "told nothing of: read"
    );
    assert_eq!(pairs[2].desired.as_deref(), Some("ns/read"));
    assert_eq!(pairs[0].desired, None);
}
