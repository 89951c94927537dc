//! Following changes, written once for every reconciler: a pass costs what changed since the last
//! one, not the number of objects, in the manner of a watch-driven controller.
//!
//! A reconciler declares what it watches as [`Source`]s: Kubernetes collections ([`Watched`],
//! through the `kube` capability's `changes`) and change feeds of its own in SQL. Each pass
//! begins with [`Pass::begin`], which decides between
//!
//! - a **pass on the changes**: [`Pass::changes`] drains each source from its bookmark, at most
//!   [`MAX_BATCHES`] batches of [`BATCH`] (what is left waits for the next pass), and the
//!   reconciler visits what they name;
//! - a **full pass**, the same as a relist: at the start (no bookmark yet), every resync interval,
//!   when a source cannot tell its changes (a bookmark the host no longer knows, its watch
//!   relisted on a 410, or it restarted), when the kept state cannot be read, after a pass that
//!   left work for later, when the reconciler judges the changes dearer than a full pass
//!   ([`Pass::go_full`]), and on demand. [`Pass::mark`] takes each source's bookmark *before*
//!   the reconciler lists, so a change made while it lists comes again after it: nothing is
//!   missed, some objects are visited twice, and a visit must be idempotent.
//!
//! [`Pass::finish`] keeps the bookmarks and the time of the last full pass ([`Kept`], under the
//! host's `lethe_instance_id`) only after the reconciler acted, so a pass that crashes midway
//! leaves the next one to act on the same changes again. An idle pass writes nothing.

use std::fmt;

use crate::env::{Env, Level};
use crate::kept::Kept;
use crate::kube::{Change, Collection, Identity, Kube, KubeError, Since};
use crate::sql::SqlError;

/// Changes asked for per call.
pub const BATCH: u32 = 1_000;

/// Batches read per source in one pass; what is left waits for the next pass.
pub const MAX_BATCHES: usize = 20;

/// The kept value naming when the last full pass started.
const FULL_PASS_AT: &str = "full_pass_ms";

/// Changes read from a [`Source`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Heard<C> {
    /// The changes, oldest first.
    pub changes: Vec<C>,
    /// Where the next read starts.
    pub bookmark: String,
    /// More changes wait beyond these.
    pub more: bool,
}

/// Somewhere a reconciler hears of changes.
pub trait Source {
    /// One change, as the reconciler reads it.
    type Change;
    /// Why the changes could not be told.
    type Error: fmt::Display;
    /// Its name among the reconciler's kept values: unique per reconciler, stable across
    /// versions (a new name costs one full pass).
    fn key(&self) -> String;
    /// Where it stands now: a reader starting here hears of every later change.
    fn head(&self) -> Result<String, Self::Error>;
    /// At most `max` changes after `bookmark`.
    fn since(&self, bookmark: &str, max: u32) -> Result<Heard<Self::Change>, Self::Error>;
}

/// A Kubernetes collection, followed as lethe's own identity through `kube.changes`.
pub struct Watched<'a> {
    kube: &'a dyn Kube,
    /// What is followed.
    pub collection: Collection,
}

impl<'a> Watched<'a> {
    /// Follows `collection` through `kube`.
    pub fn new(kube: &'a dyn Kube, collection: Collection) -> Self {
        Watched { kube, collection }
    }
}

impl Source for Watched<'_> {
    type Change = Change;
    type Error = KubeError;

    fn key(&self) -> String {
        let c = &self.collection;
        format!(
            "bookmark:{}/{}/{}/{}",
            c.api_version,
            c.kind,
            c.namespace.as_deref().unwrap_or("*"),
            c.label_selector.as_deref().unwrap_or_default()
        )
    }

    fn head(&self) -> Result<String, KubeError> {
        self.kube
            .changes(&Identity::Privileged, &self.collection, Since::START)
            .map(|batch| batch.bookmark)
    }

    fn since(&self, bookmark: &str, max: u32) -> Result<Heard<Change>, KubeError> {
        let batch = self.kube.changes(
            &Identity::Privileged,
            &self.collection,
            Since {
                bookmark: Some(bookmark),
                max,
            },
        )?;
        Ok(Heard {
            changes: batch.changes,
            bookmark: batch.bookmark,
            more: batch.more,
        })
    }
}

/// Why a pass is full.
#[derive(Debug, Clone, PartialEq)]
pub enum WhyFull {
    /// The caller asked for one.
    Asked,
    /// No full pass yet, the last one is older than the resync interval, or a source has no
    /// bookmark yet.
    Due,
    /// A source could not tell its changes.
    Unheard {
        /// The source's [`Source::key`].
        source: String,
        /// What it said.
        error: String,
    },
    /// The kept state could not be read.
    Kept(SqlError),
    /// The reconciler judged the changes dearer than a full pass; its words.
    Dearer(String),
}

impl fmt::Display for WhyFull {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WhyFull::Asked => f.write_str("it was asked for"),
            WhyFull::Due => f.write_str("one is due"),
            WhyFull::Unheard { source, error } => {
                write!(f, "the changes of {source} cannot be told: {error}")
            }
            WhyFull::Kept(e) => write!(f, "the kept state cannot be read: {e}"),
            WhyFull::Dearer(why) => f.write_str(why),
        }
    }
}

/// How the pass that is finishing left things.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It did all it was to do.
    Done,
    /// It stopped with work left (its budget, a lost Lease): the next pass is full and finds it.
    Deferred,
    /// It did all it could but has more to do soon: the next full pass comes after this many
    /// milliseconds, however long the resync interval.
    AgainIn(i64),
}

/// One pass of a reconciler that follows changes (see the module documentation).
pub struct Pass<'a> {
    env: &'a dyn Env,
    kept: Kept<'a>,
    reconciler: &'a str,
    resync_ms: i64,
    started_ms: i64,
    full: Option<WhyFull>,
    /// Bookmarks to keep once the pass acted, by source key.
    bookmarks: Vec<(String, String)>,
    /// The bookmarks a pass on the changes started from.
    started_from: Vec<(String, String)>,
    /// A full pass could not mark some source: the next one is full too.
    unmarked: bool,
}

impl<'a> Pass<'a> {
    /// Begins a pass of `reconciler` (its name, for the log), whose values are `kept` and whose
    /// full passes come every `resync_ms` at least: full when `full` asks for one or one is due.
    pub fn begin(
        env: &'a dyn Env,
        kept: Kept<'a>,
        reconciler: &'a str,
        resync_ms: i64,
        full: bool,
    ) -> Self {
        let started_ms = env.now_ms();
        let why = if full {
            Some(WhyFull::Asked)
        } else {
            match kept.number(FULL_PASS_AT) {
                Err(e) => Some(WhyFull::Kept(e)),
                Ok(last) if last.is_none_or(|at| started_ms.saturating_sub(at) >= resync_ms) => {
                    Some(WhyFull::Due)
                }
                Ok(_) => None,
            }
        };
        let mut pass = Pass {
            env,
            kept,
            reconciler,
            resync_ms,
            started_ms,
            full: None,
            bookmarks: Vec::new(),
            started_from: Vec::new(),
            unmarked: false,
        };
        if let Some(why) = why {
            pass.go_full(why);
        }
        pass
    }

    /// Whether this pass is full.
    pub fn is_full(&self) -> bool {
        self.full.is_some()
    }

    /// Why this pass is full, if it is.
    pub fn why_full(&self) -> Option<&WhyFull> {
        self.full.as_ref()
    }

    /// When the pass began.
    pub fn started_ms(&self) -> i64 {
        self.started_ms
    }

    /// Makes this pass full (see [`WhyFull`]): the bookmarks read so far are dropped, and the
    /// reconciler marks its sources again before it lists.
    pub fn go_full(&mut self, why: WhyFull) {
        let level = match &why {
            WhyFull::Asked | WhyFull::Due => None,
            WhyFull::Unheard { .. } | WhyFull::Dearer(_) => Some(Level::Info),
            WhyFull::Kept(_) => Some(Level::Warn),
        };
        if let Some(level) = level {
            self.env.log(
                level,
                &format!("{}: a full pass, since {why}", self.reconciler),
            );
        }
        self.bookmarks.clear();
        self.started_from.clear();
        self.full = Some(why);
    }

    /// Takes where `source` stands now, before a full pass reads what it names. A source that
    /// cannot say leaves the next pass full too.
    pub fn mark<S: Source>(&mut self, source: &S) -> Result<(), S::Error> {
        match source.head() {
            Ok(bookmark) => {
                self.keep(source.key(), bookmark);
                Ok(())
            }
            Err(e) => {
                self.unmarked = true;
                Err(e)
            }
        }
    }

    /// The changes of `source` since its kept bookmark, in a pass on the changes. `Err` says why
    /// the pass must be full instead; give it to [`Pass::go_full`].
    pub fn changes<S: Source>(&mut self, source: &S) -> Result<Vec<S::Change>, WhyFull> {
        let key = source.key();
        let mut bookmark = match self.kept.value(&key) {
            Ok(Some(bookmark)) => bookmark,
            Ok(None) => return Err(WhyFull::Due),
            Err(e) => return Err(WhyFull::Kept(e)),
        };
        self.started_from.push((key.clone(), bookmark.clone()));
        let mut changes = Vec::new();
        for _ in 0..MAX_BATCHES {
            let heard = source
                .since(&bookmark, BATCH)
                .map_err(|e| WhyFull::Unheard {
                    source: key.clone(),
                    error: e.to_string(),
                })?;
            changes.extend(heard.changes);
            bookmark = heard.bookmark;
            if !heard.more {
                break;
            }
        }
        self.keep(key, bookmark);
        Ok(changes)
    }

    /// The bookmark this pass will keep for `source`, once marked or read.
    pub fn bookmark<S: Source>(&self, source: &S) -> Option<&str> {
        let key = source.key();
        self.bookmarks
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, b)| b.as_str())
    }

    fn keep(&mut self, key: String, bookmark: String) {
        match self.bookmarks.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = bookmark,
            None => self.bookmarks.push((key, bookmark)),
        }
    }

    /// Keeps what the next pass starts from, now that this one acted. A failure is logged: the
    /// next pass then reads the same changes again, or is full.
    pub fn finish(self, outcome: Outcome) {
        let mut values = self.bookmarks.clone();
        let mut forgotten: Vec<&str> = Vec::new();
        match outcome {
            Outcome::Deferred => forgotten.push(FULL_PASS_AT),
            // The kept time that makes the next full pass due `after` from now.
            Outcome::AgainIn(after) => values.push((
                FULL_PASS_AT.to_string(),
                self.started_ms
                    .saturating_sub(self.resync_ms)
                    .saturating_add(after.min(self.resync_ms))
                    .to_string(),
            )),
            Outcome::Done if self.full.is_some() && self.unmarked => {
                forgotten.push(FULL_PASS_AT);
            }
            Outcome::Done if self.full.is_some() => {
                values.push((FULL_PASS_AT.to_string(), self.started_ms.to_string()));
            }
            Outcome::Done if self.bookmarks == self.started_from => return,
            Outcome::Done => {}
        }
        if let Err(e) = self.kept.write(&values, &forgotten) {
            self.env.log(
                Level::Warn,
                &format!(
                    "{}: cannot keep the bookmarks, so the next pass reads the same changes or is full: {e}",
                    self.reconciler
                ),
            );
        }
    }
}

#[cfg(test)]
#[cfg(feature = "fake")]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;
    use crate::fake::{FakeCluster, FakeHost, FakeSql};
    use crate::kept::tests::{TABLE, database as sql};
    use crate::sql::{Sql, Statement, Value};

    /// A feed of numbered changes; `fail` makes it unable to tell them.
    struct Numbers {
        head: Cell<u32>,
        fail: Cell<bool>,
        reads: RefCell<Vec<String>>,
    }

    impl Numbers {
        fn new() -> Self {
            Numbers {
                head: Cell::new(0),
                fail: Cell::new(false),
                reads: RefCell::new(Vec::new()),
            }
        }
    }

    impl Source for Numbers {
        type Change = u32;
        type Error = String;

        fn key(&self) -> String {
            "numbers".into()
        }

        fn head(&self) -> Result<String, String> {
            if self.fail.get() {
                return Err("down".into());
            }
            Ok(self.head.get().to_string())
        }

        fn since(&self, bookmark: &str, max: u32) -> Result<Heard<u32>, String> {
            self.reads.borrow_mut().push(bookmark.to_string());
            if self.fail.get() {
                return Err("gone".into());
            }
            let from: u32 = bookmark.parse().map_err(|_| "not a bookmark".to_string())?;
            let to = (from + max).min(self.head.get());
            Ok(Heard {
                changes: (from + 1..=to).collect(),
                bookmark: to.to_string(),
                more: to < self.head.get(),
            })
        }
    }

    /// SQL that counts the writes made through it.
    struct Counted<'a> {
        sql: &'a FakeSql,
        writes: Cell<u32>,
    }

    impl Sql for Counted<'_> {
        fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
            self.sql.query(sql, params)
        }

        fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
            self.writes.set(self.writes.get() + 1);
            self.sql.execute(sql, params)
        }

        fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError> {
            self.writes.set(self.writes.get() + 1);
            self.sql.batch(statements)
        }
    }

    fn begin<'a>(host: &'a FakeHost<'a>, full: bool) -> Pass<'a> {
        Pass::begin(host, Kept::new(host, &TABLE, "h"), "test", 60_000, full)
    }

    #[test]
    fn a_full_pass_marks_first_and_the_next_reads_only_what_came_after() {
        let (sql, kube) = (sql("marks"), FakeCluster::new());
        let host = FakeHost::new(&sql, &kube, "h");
        let numbers = Numbers::new();
        numbers.head.set(5);

        let mut first = begin(&host, false);
        assert_eq!(first.why_full(), Some(&WhyFull::Due), "nothing kept yet");
        first.mark(&numbers).expect("mark");
        // A change made while the full pass lists comes again after it.
        numbers.head.set(7);
        first.finish(Outcome::Done);

        let mut second = begin(&host, false);
        assert!(!second.is_full());
        assert_eq!(second.changes(&numbers).expect("changes"), vec![6, 7]);
        second.finish(Outcome::Done);

        let counted = Counted {
            sql: &sql,
            writes: Cell::new(0),
        };
        let mut idle = Pass::begin(
            &host,
            Kept::new(&counted, &TABLE, "h"),
            "test",
            60_000,
            false,
        );
        assert!(idle.changes(&numbers).expect("changes").is_empty());
        idle.finish(Outcome::Done);
        assert_eq!(counted.writes.get(), 0, "an idle pass writes nothing");

        host.advance(60_000);
        assert_eq!(
            begin(&host, false).why_full(),
            Some(&WhyFull::Due),
            "resync"
        );
        assert_eq!(begin(&host, true).why_full(), Some(&WhyFull::Asked));
    }

    #[test]
    fn changes_drain_in_batches_up_to_the_cap_and_the_rest_waits() {
        let (sql, kube) = (sql("drain"), FakeCluster::new());
        let host = FakeHost::new(&sql, &kube, "h");
        let numbers = Numbers::new();
        let mut full = begin(&host, true);
        full.mark(&numbers).expect("mark");
        full.finish(Outcome::Done);

        let cap = BATCH * u32::try_from(MAX_BATCHES).expect("small");
        numbers.head.set(cap + 3);
        let mut pass = begin(&host, false);
        assert_eq!(pass.changes(&numbers).expect("changes").len(), cap as usize);
        assert_eq!(numbers.reads.borrow().len(), MAX_BATCHES);
        pass.finish(Outcome::Done);
        let mut next = begin(&host, false);
        assert_eq!(
            next.changes(&numbers).expect("changes"),
            vec![cap + 1, cap + 2, cap + 3]
        );
    }

    #[test]
    fn a_source_that_cannot_tell_makes_the_pass_full_and_an_unmarked_one_the_next_too() {
        let (sql, kube) = (sql("gone"), FakeCluster::new());
        let host = FakeHost::new(&sql, &kube, "h");
        let numbers = Numbers::new();
        let mut full = begin(&host, true);
        full.mark(&numbers).expect("mark");
        full.finish(Outcome::Done);

        numbers.fail.set(true);
        let mut pass = begin(&host, false);
        let why = pass.changes(&numbers).expect_err("gone");
        assert!(matches!(&why, WhyFull::Unheard { error, .. } if error == "gone"));
        pass.go_full(why);
        assert!(pass.is_full());
        assert!(pass.mark(&numbers).is_err(), "still down");
        pass.finish(Outcome::Done);
        assert_eq!(
            begin(&host, false).why_full(),
            Some(&WhyFull::Due),
            "a full pass that could not mark every source is not the last full pass"
        );
    }

    #[test]
    fn deferred_work_makes_the_next_pass_full_and_again_in_brings_it_early() {
        let (sql, kube) = (sql("outcome"), FakeCluster::new());
        let host = FakeHost::new(&sql, &kube, "h");
        let numbers = Numbers::new();
        let mut full = begin(&host, true);
        full.mark(&numbers).expect("mark");
        full.finish(Outcome::AgainIn(10_000));
        host.advance(9_000);
        assert!(!begin(&host, false).is_full(), "not yet");
        host.advance(1_000);
        assert_eq!(begin(&host, false).why_full(), Some(&WhyFull::Due));

        let mut full = begin(&host, true);
        full.mark(&numbers).expect("mark");
        full.finish(Outcome::Done);
        let mut cut_short = begin(&host, false);
        cut_short.changes(&numbers).expect("changes");
        cut_short.finish(Outcome::Deferred);
        assert_eq!(begin(&host, false).why_full(), Some(&WhyFull::Due));
    }

    #[test]
    fn a_watched_collection_follows_the_clusters_changes() {
        let (sql, kube) = (sql("watched"), FakeCluster::new());
        let host = FakeHost::new(&sql, &kube, "h");
        let watched = Watched::new(&host, Collection::new("v1", "ConfigMap", Some("ns")));
        assert_eq!(watched.key(), "bookmark:v1/ConfigMap/ns/");
        let mut full = begin(&host, true);
        full.mark(&watched).expect("mark");
        full.finish(Outcome::Done);
        kube.put(serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns"}
        }));
        let mut pass = begin(&host, false);
        let changes = pass.changes(&watched).expect("changes");
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].object.target.name, "a");
    }
}
