//! The object store: in-memory BTreeMap indexes, write-through SQLite persistence, one
//! resourceVersion counter, a ring of recent events for watch replay, and stale-read tracking.

use crate::resources::{CRD_KEY, ResourceDef, defs_from_crd};
use crate::status::ApiError;
use crate::util::string_list;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use rusqlite::{Connection, params};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, broadcast};

/// A stored object with its serialized form cached.
#[derive(Debug)]
pub struct Obj {
    /// The object as JSON, `metadata.resourceVersion` included.
    pub value: Value,
    /// `value` serialized, as it is persisted and served as JSON.
    pub bytes: Bytes,
    /// The resourceVersion of the write that stored this version (0 for the object a dry run
    /// returns, which was never stored).
    pub rv: u64,
}

impl Obj {
    /// Wraps `value`, stored at resourceVersion `rv`, serializing it once; `rv` is not written
    /// into `value` here.
    pub fn new(value: Value, rv: u64) -> Arc<Obj> {
        let bytes = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        Arc::new(Obj { value, bytes, rv })
    }

    /// The string `metadata.<field>`; empty when it is absent or not a string.
    pub fn meta_str(&self, field: &str) -> &str {
        crate::util::meta_str(&self.value, field)
    }

    /// `metadata.uid`; empty when unset.
    pub fn uid(&self) -> &str {
        self.meta_str("uid")
    }

    /// Whether the object has a `deletionTimestamp`: it is being deleted, once its finalizers
    /// are gone.
    pub fn deleting(&self) -> bool {
        self.value["metadata"]["deletionTimestamp"].is_string()
    }

    /// `metadata.finalizers`, in order; empty when there are none.
    pub fn finalizers(&self) -> Vec<String> {
        string_list(&self.value["metadata"]["finalizers"])
    }
}

/// What a write did to an object, as a watch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// An existing object was replaced, including when a deletionTimestamp was set.
    Modified,
    /// The object was removed from the store.
    Deleted,
}

impl EventType {
    /// The watch event's `type`: `ADDED`, `MODIFIED` or `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One write to the store, as kept in the ring for watch replay and sent to live watchers.
#[derive(Debug)]
pub struct Event {
    /// What the write did.
    pub etype: EventType,
    /// The storage key of the object's resource (see [`ResourceDef::key`]).
    pub key: Arc<str>,
    /// The object's namespace; empty for cluster-scoped objects.
    pub ns: String,
    /// The object after the write; for a deletion, its final state.
    pub obj: Arc<Obj>,
    /// The version before a modification or deletion (for selector transitions in filtered
    /// watches, and for lists at past versions).
    pub prev: Option<Arc<Obj>>,
    /// The resourceVersion the write was given.
    pub rv: u64,
}

/// What a mutation does to the object.
pub enum Change {
    /// Stores this value, creating or replacing the object at a new resourceVersion.
    Put(Value),
    /// Removes the object, reporting its current state in the DELETED event; a no-op when it
    /// does not exist.
    Remove,
    /// Remove, reporting this final state (e.g. without finalizers) in the DELETED event.
    RemoveWith(Value),
    /// Writes nothing: no new resourceVersion and no event.
    Keep,
}

/// (resource key, namespace, name)
pub type FullKey = (String, String, String);
type Entries = BTreeMap<(String, String), Arc<Obj>>;
/// Stale versions that replace live ones in a list (None hides the object).
type Overrides = BTreeMap<(String, String), Option<Arc<Obj>>>;

const RING_CAPACITY: usize = 20_000;

/// The stored state, under the store's lock. The collections the controllers walk are ordered,
/// so that a pass visits objects in the same order every time (a simulator depends on it).
#[derive(Default)]
pub struct Inner {
    /// The last resourceVersion given out.
    pub rv: u64,
    /// The objects, by storage key, then by namespace and name.
    pub objects: BTreeMap<String, Entries>,
    /// Where each uid lives.
    pub uids: HashMap<String, FullKey>,
    /// Objects that carry ownerReferences (for the garbage collector).
    pub owned: BTreeSet<FullKey>,
    /// Objects with a deletionTimestamp (for the controllers).
    pub deleting: BTreeSet<FullKey>,
    ring: VecDeque<Arc<Event>>,
    /// Events at or below this version are no longer in the ring.
    pub compacted_rv: u64,
    stale: HashMap<FullKey, (Option<Arc<Obj>>, Instant)>,
    /// Resource definitions from the CRDs.
    pub custom: Vec<Arc<ResourceDef>>,
}

impl Inner {
    /// The live object `name` of resource `key` in namespace `ns` (empty when cluster-scoped).
    pub fn get(&self, key: &str, ns: &str, name: &str) -> Option<&Arc<Obj>> {
        self.objects
            .get(key)?
            .get(&(ns.to_string(), name.to_string()))
    }

    /// Files `obj` under `fk`: the objects, and the uid, owner and deletion indexes.
    fn insert(&mut self, fk: FullKey, obj: Arc<Obj>) {
        if !obj.uid().is_empty() {
            self.uids.insert(obj.uid().to_string(), fk.clone());
        }
        let owned = obj.value["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
        for (set, on) in [
            (&mut self.owned, owned),
            (&mut self.deleting, obj.deleting()),
        ] {
            if on {
                set.insert(fk.clone());
            } else {
                set.remove(&fk);
            }
        }
        let (key, ns, name) = fk;
        self.objects.entry(key).or_default().insert((ns, name), obj);
    }

    /// Every object of resource `key`, across namespaces, by (namespace, name) in key order.
    pub fn entries(&self, key: &str) -> impl Iterator<Item = (&(String, String), &Arc<Obj>)> {
        self.objects.get(key).into_iter().flat_map(|m| m.iter())
    }

    /// The objects of one resource in one namespace.
    pub fn in_namespace<'a>(
        &'a self,
        key: &str,
        ns: &'a str,
    ) -> impl Iterator<Item = &'a Arc<Obj>> + 'a {
        self.objects.get(key).into_iter().flat_map(move |m| {
            m.range((ns.to_string(), String::new())..)
                .take_while(move |((n, _), _)| n == ns)
                .map(|(_, o)| o)
        })
    }

    fn recompute_custom(&mut self) {
        let defs = self
            .entries(CRD_KEY)
            .flat_map(|(_, o)| defs_from_crd(&o.value));
        self.custom = defs.collect();
    }
}

/// Which objects a [`Store::list`] reads, and as of when.
#[derive(Clone, Copy)]
pub struct ListRange<'a> {
    /// The resource's store key.
    pub key: &'a str,
    /// The namespace, or all of them.
    pub ns: Option<&'a str>,
    /// Start strictly after this (namespace, name): where a continue token left off.
    pub after: Option<&'a (String, String)>,
    /// The resourceVersion to list at; now when `None`.
    pub at: Option<u64>,
    /// Whether the read may come from the stale-read window (a cache that lags), as a list
    /// without a resourceVersion may on the real server.
    pub allow_stale: bool,
}

impl<'a> ListRange<'a> {
    /// Every object of `key` (in `ns`) as it is now, read from the store itself.
    pub fn now(key: &'a str, ns: Option<&'a str>) -> ListRange<'a> {
        ListRange {
            key,
            ns,
            after: None,
            at: None,
            allow_stale: false,
        }
    }
}

/// One page of a list.
pub struct ListPage {
    /// The resourceVersion the list reflects.
    pub rv: u64,
    /// The objects of the page that `keep` accepted, in key order.
    pub items: Vec<Arc<Obj>>,
    /// Whether more matching objects follow.
    pub more: bool,
    /// How many objects (matching or not) the range held from its start on.
    pub scanned: usize,
}

/// The objects of `key` (in `ns`) that changed after `at`, each as it was at `at` (None: it did
/// not exist then), from the event history.
fn undo_since(inner: &Inner, key: &str, ns: Option<&str>, at: u64) -> Overrides {
    let start = inner.ring.partition_point(|e| e.rv <= at);
    let mut before = Overrides::new();
    for e in inner.ring.range(start..) {
        if &*e.key != key || ns.is_some_and(|n| n != e.ns) {
            continue;
        }
        // The first change after `at` knows what the object was at `at`.
        before
            .entry((e.ns.clone(), e.obj.meta_str("name").to_string()))
            .or_insert_with(|| e.prev.clone());
    }
    before
}

/// The cluster's objects: an in-memory index, written through to SQLite when on disk, with one
/// resourceVersion counter and the event history watches replay from.
pub struct Store {
    inner: RwLock<Inner>,
    db: Option<Mutex<Connection>>,
    tx: broadcast::Sender<Arc<Event>>,
    /// Woken after every write (for the controllers).
    pub notify: Notify,
    /// Stale-read window in ms (0 = off).
    pub stale_ms: AtomicU64,
    /// Bumped to end every open watch (see [`Store::drop_watches`]).
    watch_drops: tokio::sync::watch::Sender<u64>,
}

fn set_rv(value: &mut Value, rv: u64) {
    if let Some(m) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

impl Store {
    /// Opens the store: in memory, or backed by the SQLite file at `path`.
    pub fn open(path: Option<&Path>) -> anyhow::Result<Store> {
        let (tx, _) = broadcast::channel(16_384);
        let mut inner = Inner::default();
        let db = match path {
            None => None,
            Some(p) => {
                let conn = Connection::open(p)?;
                conn.execute_batch(
                    "PRAGMA journal_mode=WAL;
                     PRAGMA synchronous=NORMAL;
                     CREATE TABLE IF NOT EXISTS objects (
                        res TEXT NOT NULL, ns TEXT NOT NULL, name TEXT NOT NULL, json TEXT NOT NULL,
                        PRIMARY KEY (res, ns, name));
                     CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);",
                )?;
                {
                    let mut stmt = conn.prepare("SELECT res, ns, name, json FROM objects")?;
                    let rows =
                        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
                    for row in rows {
                        let (res, ns, name, json): (String, String, String, String) = row?;
                        let value: Value = serde_json::from_str(&json)?;
                        let rv = value["metadata"]["resourceVersion"]
                            .as_str()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(0);
                        inner.rv = inner.rv.max(rv);
                        inner.insert((res, ns, name), Obj::new(value, rv));
                    }
                }
                let saved: Option<String> = conn
                    .query_row("SELECT v FROM meta WHERE k = 'rv'", [], |r| r.get(0))
                    .ok();
                if let Some(s) = saved.and_then(|s| s.parse::<u64>().ok()) {
                    inner.rv = inner.rv.max(s);
                }
                inner.compacted_rv = inner.rv;
                Some(Mutex::new(conn))
            }
        };
        inner.recompute_custom();
        Ok(Store {
            inner: RwLock::new(inner),
            db,
            tx,
            notify: Notify::new(),
            stale_ms: AtomicU64::new(0),
            watch_drops: tokio::sync::watch::Sender::new(0),
        })
    }

    /// The last resourceVersion given out, i.e. the version the store is at now.
    pub fn current_rv(&self) -> u64 {
        self.inner.read().rv
    }

    /// Runs `f` on a consistent view of the whole store, under its read lock: keep `f` short, as
    /// writes wait for it.
    pub fn read<T>(&self, f: impl FnOnce(&Inner) -> T) -> T {
        f(&self.inner.read())
    }

    /// The resources the stored CustomResourceDefinitions define, as of now.
    pub fn custom_defs(&self) -> Vec<Arc<ResourceDef>> {
        self.inner.read().custom.clone()
    }

    fn stale_window(&self) -> Option<Duration> {
        match self.stale_ms.load(Ordering::Relaxed) {
            0 => None,
            ms => Some(Duration::from_millis(ms)),
        }
    }

    /// Reads one object; with `allow_stale`, the stale-read fault may return the previous version.
    pub fn get(&self, key: &str, ns: &str, name: &str, allow_stale: bool) -> Option<Arc<Obj>> {
        let inner = self.inner.read();
        if allow_stale
            && let Some(w) = self.stale_window()
            && let Some((prev, at)) =
                inner
                    .stale
                    .get(&(key.to_string(), ns.to_string(), name.to_string()))
            && at.elapsed() < w
        {
            return prev.clone();
        }
        inner.get(key, ns, name).cloned()
    }

    /// Lists the objects `range` names, in key order, up to `max` of them that `keep` accepts:
    /// as they are now, or as they were at `range.at` (the changes since undone from the event
    /// history, as etcd serves a list at a past revision). Err(the oldest version still served)
    /// when `range.at` is older.
    pub fn list(
        &self,
        range: ListRange<'_>,
        mut keep: impl FnMut(&Obj) -> bool,
        max: usize,
    ) -> Result<ListPage, u64> {
        let ListRange {
            key,
            ns,
            after,
            at,
            allow_stale,
        } = range;
        let inner = self.inner.read();
        if let Some(at) = at
            && at < inner.compacted_rv
        {
            return Err(inner.compacted_rv);
        }
        let rv = at.unwrap_or(inner.rv);
        let empty = Entries::new();
        let map = inner.objects.get(key).unwrap_or(&empty);
        let overrides: Option<Overrides> = match (at, self.stale_window()) {
            (Some(at), _) => Some(undo_since(&inner, key, ns, at)),
            (None, Some(w)) if allow_stale => Some(
                inner
                    .stale
                    .iter()
                    .filter(|((k, n, _), (_, at))| {
                        k == key && ns.is_none_or(|x| x == n) && at.elapsed() < w
                    })
                    .map(|((_, n, name), (prev, _))| ((n.clone(), name.clone()), prev.clone()))
                    .collect(),
            ),
            _ => None,
        };
        let lower = match (after, ns) {
            (Some(a), _) => Bound::Excluded(a.clone()),
            (None, Some(n)) => Bound::Included((n.to_string(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        let live = map
            .range((lower.clone(), Bound::Unbounded))
            .take_while(|((n, _), _)| ns.is_none_or(|x| x == n));
        // Collect the candidates under the lock; filter them (selectors can be slow) after.
        let candidates: Vec<Arc<Obj>> = match overrides {
            Some(ov) if !ov.is_empty() => {
                // Merge the other versions into the live view.
                let mut view: BTreeMap<_, _> = live.map(|(k, v)| (k.clone(), v.clone())).collect();
                for (k, prev) in ov {
                    if matches!(&lower, Bound::Excluded(a) if &k <= a) {
                        continue;
                    }
                    match prev {
                        Some(p) => view.insert(k, p),
                        None => view.remove(&k),
                    };
                }
                view.into_values().collect()
            }
            _ => live.map(|(_, o)| o.clone()).collect(),
        };
        drop(inner);
        let scanned = candidates.len();
        let mut items = vec![];
        let mut more = false;
        for o in candidates {
            if keep(&o) {
                if items.len() >= max {
                    more = true;
                    break;
                }
                items.push(o);
            }
        }
        Ok(ListPage {
            rv,
            items,
            more,
            scanned,
        })
    }

    /// Waits up to `timeout` for the store to reach resourceVersion `rv`; the version it
    /// reached.
    pub async fn wait_for_rv(&self, rv: u64, timeout: Duration) -> u64 {
        let mut events = self.tx.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let current = self.current_rv();
            if current >= rv {
                return current;
            }
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Err(_) | Ok(Err(broadcast::error::RecvError::Closed)) => return self.current_rv(),
                Ok(_) => {}
            }
        }
    }

    /// Atomically reads, decides and writes one object. `f` sees the current object and the
    /// whole store (read-only) and returns the change plus a value passed back to the caller.
    /// Returns the object as stored (for `Put`), or the final state (for `Remove`).
    pub fn mutate<T>(
        &self,
        key: &str,
        ns: &str,
        name: &str,
        f: impl FnOnce(Option<&Arc<Obj>>, &Inner) -> Result<(Change, T), ApiError>,
    ) -> Result<(Option<Arc<Obj>>, T), ApiError> {
        let mut inner = self.inner.write();
        let cur = inner.get(key, ns, name).cloned();
        let (change, extra) = f(cur.as_ref(), &inner)?;
        let fk: FullKey = (key.to_string(), ns.to_string(), name.to_string());
        let rv = inner.rv + 1;
        let (event_type, obj) = match change {
            Change::Keep => return Ok((cur, extra)),
            Change::Put(mut value) => {
                set_rv(&mut value, rv);
                let obj = Obj::new(value, rv);
                self.persist(key, ns, name, Some(&obj), rv)?;
                let et = if cur.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                if let Some(c) = &cur
                    && c.uid() != obj.uid()
                {
                    inner.uids.remove(c.uid());
                }
                inner.insert(fk.clone(), obj.clone());
                (et, obj)
            }
            change @ (Change::Remove | Change::RemoveWith(_)) => {
                let Some(c) = &cur else {
                    return Ok((None, extra));
                };
                let mut value = match change {
                    Change::RemoveWith(v) => v,
                    _ => c.value.clone(),
                };
                set_rv(&mut value, rv);
                let obj = Obj::new(value, rv);
                self.persist(key, ns, name, None, rv)?;
                inner.uids.remove(c.uid());
                inner.owned.remove(&fk);
                inner.deleting.remove(&fk);
                if let Some(m) = inner.objects.get_mut(key) {
                    m.remove(&(ns.to_string(), name.to_string()));
                }
                (EventType::Deleted, obj)
            }
        };
        inner.rv = rv;
        if let Some(w) = self.stale_window() {
            if inner.stale.len() > 4096 {
                inner.stale.retain(|_, (_, at)| at.elapsed() < w);
            }
            inner.stale.insert(fk, (cur.clone(), Instant::now()));
        }
        if key == CRD_KEY {
            inner.recompute_custom();
        }
        let ev = Arc::new(Event {
            etype: event_type,
            key: Arc::from(key),
            ns: ns.to_string(),
            obj: obj.clone(),
            // `None` exactly when the event is `Added`.
            prev: cur,
            rv,
        });
        inner.ring.push_back(ev.clone());
        while inner.ring.len() > RING_CAPACITY {
            if let Some(old) = inner.ring.pop_front() {
                inner.compacted_rv = old.rv;
            }
        }
        let _ = self.tx.send(ev);
        drop(inner);
        self.notify.notify_one();
        Ok((Some(obj), extra))
    }

    fn persist(
        &self,
        key: &str,
        ns: &str,
        name: &str,
        obj: Option<&Arc<Obj>>,
        rv: u64,
    ) -> Result<(), ApiError> {
        let Some(db) = &self.db else {
            return Ok(());
        };
        let conn = db.lock();
        let res = (|| -> rusqlite::Result<()> {
            let tx = conn.unchecked_transaction()?;
            match obj {
                Some(o) => {
                    let json = std::str::from_utf8(&o.bytes).unwrap_or("{}");
                    conn.prepare_cached(
                        "INSERT OR REPLACE INTO objects (res, ns, name, json) VALUES (?1, ?2, ?3, ?4)",
                    )?
                    .execute(params![key, ns, name, json])?;
                }
                None => {
                    conn.prepare_cached(
                        "DELETE FROM objects WHERE res = ?1 AND ns = ?2 AND name = ?3",
                    )?
                    .execute(params![key, ns, name])?;
                }
            }
            conn.prepare_cached("INSERT OR REPLACE INTO meta (k, v) VALUES ('rv', ?1)")?
                .execute(params![rv.to_string()])?;
            tx.commit()
        })();
        res.map_err(|e| ApiError::internal(format!("storage: {e}")))
    }

    /// Events after `rv` for replay plus a live subscription, or Err(oldest available rv) when
    /// `rv` has been compacted away.
    #[allow(clippy::type_complexity)]
    pub fn subscribe_from(
        &self,
        rv: u64,
    ) -> Result<(Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>), u64> {
        let inner = self.inner.read();
        if rv < inner.compacted_rv {
            // The oldest version a watch may still start from, as the watch cache reports it.
            return Err(inner.compacted_rv);
        }
        let start = inner.ring.partition_point(|e| e.rv <= rv);
        let events = inner.ring.range(start..).cloned().collect();
        Ok((events, self.tx.subscribe()))
    }

    /// The current objects (for a watch from "now") plus a live subscription.
    #[allow(clippy::type_complexity)]
    pub fn subscribe_now(
        &self,
        key: &str,
        ns: Option<&str>,
    ) -> (u64, Vec<Arc<Obj>>, broadcast::Receiver<Arc<Event>>) {
        let inner = self.inner.read();
        let objs: Vec<Arc<Obj>> = match ns {
            Some(n) => inner.in_namespace(key, n).cloned().collect(),
            None => inner.entries(key).map(|(_, o)| o.clone()).collect(),
        };
        (inner.rv, objs, self.tx.subscribe())
    }

    /// Ends every open watch stream, as an API server restart or a proxy's idle timeout does;
    /// clients resume from the last version they saw.
    pub fn drop_watches(&self) {
        self.watch_drops.send_modify(|n| *n += 1);
    }

    /// What a watch stream waits on to end when [`Store::drop_watches`] is called.
    pub fn watch_drops(&self) -> tokio::sync::watch::Receiver<u64> {
        self.watch_drops.subscribe()
    }

    /// Drops the event history (like an etcd compaction).
    pub fn compact(&self) -> u64 {
        let mut inner = self.inner.write();
        inner.ring.clear();
        inner.compacted_rv = inner.rv;
        inner.rv
    }
}
