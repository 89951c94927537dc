//! The one in-memory host for the components' native tests (feature `fake`): a small Kubernetes
//! with the semantics the logic relies on, SQLite in memory, and a host that bundles them with a
//! clock that advances when the logic sleeps.
//!
//! [`FakeCluster`] keeps objects by (kind, namespace, name) and gives them a uid, a
//! resourceVersion, a generation and a creationTimestamp. It answers AlreadyExists, 404, a
//! resourceVersion-guarded replace, uid-preconditioned deletes, finalizers with a
//! deletionTimestamp (namespaces always wait for the namespace controller), label-selected and
//! paginated LISTs, merge and JSON patches, and the reviews (TokenReview, SelfSubjectReview,
//! SelfSubjectAccessReview). A permission table decides who may do what, and faults can be
//! injected: a failing verb, a lost answer (a create's, or a write that times out after it was
//! applied or before), a momentarily hidden object, a kind not served, reads that lag.

// Test support: a broken expectation of a test is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;

use serde_json::{Value as Json, json};

use crate::env::{Env, Level, format_rfc3339};
use crate::kube::{
    Change, ChangeBatch, ChangeType, Collection, DeleteOptions, Deletion, Identity, Kube,
    KubeError, KubeVia, ListOptions, Object, ObjectList, ObjectRef, Patch, Result, Since, narrowed,
    object_from_json,
};
use crate::sql::{Sql, SqlError, Statement, Value};
use lethe_kube_rules::patch;
use lethe_kube_rules::selector::LabelSelector;

type Key = (String, String, String); // (kind, namespace, name)

/// One write to one object, as a watch sees it: its state before and after (`None`: absent), and
/// when the cluster's clock said it was made.
struct Write {
    key: Key,
    before: Option<Json>,
    after: Option<Json>,
    at_ms: i64,
}

/// The objects, and every write made to them in order, so that `changes` delivers each write
/// as a watch would (one event per write, a selector's start or end of matching included).
struct Store {
    objects: RefCell<BTreeMap<Key, Json>>,
    writes: RefCell<Vec<Write>>,
    /// The cluster's clock, which stamps each write.
    now: Rc<Cell<i64>>,
}

/// A mutable borrow of the objects that logs, when dropped, what changed through it: each object
/// it touched, as it was before the first touch and as it is at the end.
struct Writing<'a> {
    objects: std::cell::RefMut<'a, BTreeMap<Key, Json>>,
    touched: Vec<(Key, Option<Json>)>,
    writes: &'a RefCell<Vec<Write>>,
    at_ms: i64,
}

impl Writing<'_> {
    fn touch(&mut self, key: &Key) {
        if !self.touched.iter().any(|(k, _)| k == key) {
            let before = self.objects.get(key).cloned();
            self.touched.push((key.clone(), before));
        }
    }

    fn get_mut(&mut self, key: &Key) -> Option<&mut Json> {
        self.touch(key);
        self.objects.get_mut(key)
    }

    fn insert(&mut self, key: Key, object: Json) {
        self.touch(&key);
        self.objects.insert(key, object);
    }

    fn remove(&mut self, key: &Key) {
        self.touch(key);
        self.objects.remove(key);
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        let mut writes = self.writes.borrow_mut();
        for (key, before) in self.touched.drain(..) {
            let after = self.objects.get(&key);
            if before.as_ref() != after {
                writes.push(Write {
                    after: after.cloned(),
                    key,
                    before,
                    at_ms: self.at_ms,
                });
            }
        }
    }
}

impl Store {
    fn borrow(&self) -> std::cell::Ref<'_, BTreeMap<Key, Json>> {
        self.objects.borrow()
    }

    fn borrow_mut(&self) -> Writing<'_> {
        Writing {
            objects: self.objects.borrow_mut(),
            touched: Vec::new(),
            writes: &self.writes,
            at_ms: self.now.get(),
        }
    }

    /// The object `key` as a reader `lag_ms` behind saw it (see [`Store::lagging`]).
    fn lagging_one(&self, key: &Key, lag_ms: i64) -> Option<Json> {
        let since = self.now.get() - lag_ms;
        let writes = self.writes.borrow();
        let late = writes.iter().rev().take_while(|w| w.at_ms > since);
        match late.filter(|w| w.key == *key).last() {
            Some(first_late) => first_late
                .before
                .as_ref()
                .or(first_late.after.as_ref())
                .cloned(),
            None => self.objects.borrow().get(key).cloned(),
        }
    }

    /// The objects of `kind` as a reader `lag_ms` behind saw them: writes made since then are
    /// not seen yet, except that an object created since is seen as it was created (a lagging
    /// read shows what changed late, and what is gone still there, but never hides what exists).
    fn lagging(&self, kind: &str, lag_ms: i64) -> BTreeMap<Key, Json> {
        let mut seen: BTreeMap<Key, Json> = self
            .objects
            .borrow()
            .iter()
            .filter(|((k, _, _), _)| k == kind)
            .map(|(key, o)| (key.clone(), o.clone()))
            .collect();
        let since = self.now.get() - lag_ms;
        let writes = self.writes.borrow();
        let late = writes.iter().rev().take_while(|w| w.at_ms > since);
        for write in late.filter(|w| w.key.0 == kind) {
            match write.before.as_ref().or(write.after.as_ref()) {
                Some(o) => seen.insert(write.key.clone(), o.clone()),
                None => seen.remove(&write.key),
            };
        }
        seen
    }
}

/// An admission check every create passes through (a kind's server-side validation).
pub type Admission = Box<dyn Fn(&Json) -> Result<(), KubeError>>;

/// Kubernetes objects in memory, with a permission table and injectable faults.
pub struct FakeCluster {
    objects: Store,
    version: Cell<u64>,
    /// The server's clock (milliseconds since the epoch), for the timestamps it writes.
    pub now: Rc<Cell<i64>>,
    /// `(token, verb, kind, namespace or "*")`: who may do what.
    grants: RefCell<Vec<(String, String, String, String)>>,
    /// Tokens the cluster does not authenticate.
    rejected: RefCell<Vec<String>>,
    /// `(verb, kind)` calls that fail with `Unavailable`, whoever makes them.
    faults: RefCell<Vec<(String, String)>>,
    /// `(kind, name)` of objects the next `get` answers 404 for, as if they appeared just after.
    hidden_once: RefCell<Vec<(String, String)>>,
    /// Kinds the server does not serve (an older Kubernetes).
    pub missing_kinds: RefCell<Vec<String>>,
    /// `(kind, applied)`: the next create of `kind` is answered `Unavailable`, after it was
    /// carried out when `applied` (a lost answer) or not at all.
    lost_answers: RefCell<Vec<(String, bool)>>,
    /// `(verb, kind, applied)`: the next `verb` (`replace`, `patch` or `delete`) of `kind` times
    /// out, after it was carried out when `applied` or not at all.
    timeouts: RefCell<Vec<(String, String, bool)>>,
    admission: RefCell<Option<Admission>>,
    /// Bookmarks are `fake<epoch>.<index into the writes>`; expiring the watches starts a new
    /// epoch.
    watch_epoch: Cell<u64>,
    /// How far behind the writes the reads made in [`FakeCluster::read_late`] are, in
    /// milliseconds.
    pub read_lag_ms: Cell<i64>,
    /// Whether gets and lists are answered [`FakeCluster::read_late`] now.
    reading_late: Cell<bool>,
    /// Whether a create into a namespace that does not exist is 404, as Kubernetes answers it
    /// (off by default: most tests do not bother making namespaces).
    pub namespaces_must_exist: Cell<bool>,
    /// The gets and lists answered so far, whoever made them, for tests that bound a handler's
    /// reads.
    pub reads: Cell<u64>,
    /// The objects those gets and lists returned, for tests that bound what a handler reads
    /// whatever the size of the cluster.
    pub objects_read: Cell<u64>,
}

impl Default for FakeCluster {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeCluster {
    /// Where a new cluster's clock starts, in ms since the Unix epoch (2023-11-14).
    pub const START_MS: i64 = 1_700_000_000_000;

    /// An empty cluster whose clock reads [`FakeCluster::START_MS`]. Every token but `bad`
    /// authenticates; the token `admin` may do anything, any other what it is granted.
    pub fn new() -> Self {
        let now = Rc::new(Cell::new(Self::START_MS));
        let cluster = FakeCluster {
            objects: Store {
                objects: RefCell::default(),
                writes: RefCell::default(),
                now: now.clone(),
            },
            version: Cell::new(1),
            now,
            grants: RefCell::new(Vec::new()),
            rejected: RefCell::new(vec!["bad".into()]),
            faults: RefCell::new(Vec::new()),
            hidden_once: RefCell::new(Vec::new()),
            missing_kinds: RefCell::new(Vec::new()),
            lost_answers: RefCell::new(Vec::new()),
            timeouts: RefCell::new(Vec::new()),
            admission: RefCell::new(None),
            watch_epoch: Cell::new(1),
            read_lag_ms: Cell::new(0),
            reading_late: Cell::new(false),
            namespaces_must_exist: Cell::new(false),
            reads: Cell::new(0),
            objects_read: Cell::new(0),
        };
        cluster.grant("admin", "*", "*", "*");
        cluster
    }

    /// Lets `token` do `verb` on `kind` in `namespace` (`*` = any). A grant in one namespace
    /// stands for a RoleBinding there: the namespace controller deletes it with the rest of the
    /// namespace's content.
    pub fn grant(&self, token: &str, verb: &str, kind: &str, namespace: &str) {
        self.grants
            .borrow_mut()
            .push((token.into(), verb.into(), kind.into(), namespace.into()));
    }

    /// Makes every `verb` on `kind` (`*` = any) fail as an unreachable cluster does.
    pub fn fail(&self, verb: &str, kind: &str) {
        self.faults.borrow_mut().push((verb.into(), kind.into()));
    }

    /// Ends every injected fault: failing verbs, lost answers and timeouts still to come, reads
    /// still to miss an object, and a read lag.
    pub fn heal(&self) {
        self.faults.borrow_mut().clear();
        self.lost_answers.borrow_mut().clear();
        self.timeouts.borrow_mut().clear();
        self.hidden_once.borrow_mut().clear();
        self.read_lag_ms.set(0);
    }

    /// Makes the next create of `kind` answer `Unavailable`: after carrying it out (`applied`,
    /// an answer lost on the way back) or without.
    pub fn lose_next_create(&self, kind: &str, applied: bool) {
        self.lost_answers.borrow_mut().push((kind.into(), applied));
    }

    /// Makes the next `verb` (`replace`, `patch` or `delete`) of `kind` time out: after carrying
    /// it out (`applied`, an answer lost on the way back) or without. A client cannot tell which.
    pub fn time_out_next(&self, verb: &str, kind: &str, applied: bool) {
        self.timeouts
            .borrow_mut()
            .push((verb.into(), kind.into(), applied));
    }

    /// Whether this `verb` of `kind` times out (taking the fault), and if so whether it is
    /// carried out first.
    fn times_out(&self, verb: &str, kind: &str) -> Option<bool> {
        let mut timeouts = self.timeouts.borrow_mut();
        let i = timeouts
            .iter()
            .position(|(v, k, _)| v == verb && k == kind)?;
        Some(timeouts.remove(i).2)
    }

    /// Makes the next `get` of `kind` `name` answer 404, as if the object appeared just after.
    pub fn hide_once(&self, kind: &str, name: &str) {
        self.hidden_once
            .borrow_mut()
            .push((kind.into(), name.into()));
    }

    /// Runs `reads` with this cluster's gets and lists answered as a reader [`read_lag_ms`]
    /// behind the writes sees them: a read path served from a cache that has not caught up, as
    /// the deletion seed's first poll met (the deletionTimestamp not visible yet). Those reads
    /// show what changed late and what is gone still there, but never hide an object that
    /// exists; writes and watches are the cluster's as ever.
    ///
    /// [`read_lag_ms`]: FakeCluster::read_lag_ms
    pub fn read_late<T>(&self, reads: impl FnOnce() -> T) -> T {
        /// Ends the scope even when `reads` unwinds (a simulated crash).
        struct Restore<'c>(&'c Cell<bool>, bool);
        impl Drop for Restore<'_> {
            fn drop(&mut self) {
                self.0.set(self.1);
            }
        }
        let _restore = Restore(&self.reading_late, self.reading_late.replace(true));
        reads()
    }

    /// How far behind the writes this read is: `None` when it sees them all.
    fn lag_of_this_read(&self) -> Option<i64> {
        let lag = self.read_lag_ms.get();
        (self.reading_late.get() && lag != 0).then_some(lag)
    }

    /// Runs `check` on every create, as a kind's server-side validation would.
    pub fn admit_with(&self, check: Admission) {
        *self.admission.borrow_mut() = Some(check);
    }

    fn check(
        &self,
        id: &Identity,
        verb: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<(), KubeError> {
        if self
            .faults
            .borrow()
            .iter()
            .any(|(v, k)| (v == "*" || v == verb) && (k == "*" || k == kind))
        {
            return Err(KubeError::Unavailable(format!("{verb} {kind}: injected")));
        }
        if self.missing_kinds.borrow().iter().any(|k| k == kind) {
            return Err(KubeError::NotFound(format!(
                "the server does not serve {kind}"
            )));
        }
        self.authenticate(id)?;
        let Identity::Caller(token) = id else {
            return Ok(());
        };
        let ns = namespace.unwrap_or("*");
        let ok = self.grants.borrow().iter().any(|(t, v, k, n)| {
            t == token
                && (v == "*" || v == verb)
                && (k == "*" || k == kind)
                && (n == "*" || n == ns)
        });
        if ok {
            Ok(())
        } else {
            Err(KubeError::Forbidden(format!(
                "{token} cannot {verb} {kind}"
            )))
        }
    }

    fn next_version(&self) -> String {
        let v = self.version.get() + 1;
        self.version.set(v);
        v.to_string()
    }

    /// Puts an object in place, as an administrator would: uid, creationTimestamp and generation
    /// filled in when absent, a new resourceVersion.
    pub fn put(&self, mut o: Json) -> Object {
        let key = key_of(&o);
        if o["metadata"]["uid"].is_null() {
            o["metadata"]["uid"] = json!(format!("uid-{}-{}", key.2, self.version.get()));
        }
        if o["metadata"]["creationTimestamp"].is_null() {
            o["metadata"]["creationTimestamp"] = json!(format_rfc3339(self.now.get()));
        }
        if o["metadata"]["generation"].is_null() {
            o["metadata"]["generation"] = json!(1);
        }
        o["metadata"]["resourceVersion"] = json!(self.next_version());
        self.objects.borrow_mut().insert(key, o.clone());
        object_from_json(o)
    }

    /// Whether the object exists.
    pub fn exists(&self, kind: &str, ns: &str, name: &str) -> bool {
        self.objects
            .borrow()
            .contains_key(&(kind.into(), ns.into(), name.into()))
    }

    /// The object, if it exists.
    pub fn object(&self, kind: &str, ns: &str, name: &str) -> Option<Object> {
        self.objects
            .borrow()
            .get(&(kind.into(), ns.into(), name.into()))
            .cloned()
            .map(object_from_json)
    }

    /// `read` of every object of `kind` as stored, by namespace and name (cheaper than
    /// [`FakeCluster::all`] for a glance at a few fields).
    pub fn glance<T>(&self, kind: &str, read: impl FnMut(&Json) -> T) -> Vec<T> {
        self.objects
            .borrow()
            .iter()
            .filter(|((k, _, _), _)| k == kind)
            .map(|(_, o)| o)
            .map(read)
            .collect()
    }

    /// Every object of `kind`, by namespace and name.
    pub fn all(&self, kind: &str) -> Vec<Object> {
        self.objects
            .borrow()
            .iter()
            .filter(|((k, _, _), _)| k == kind)
            .map(|(_, v)| object_from_json(v.clone()))
            .collect()
    }

    /// Changes an object as a person with kubectl would (a new resourceVersion and generation).
    pub fn edit(&self, kind: &str, ns: &str, name: &str, edit: impl FnOnce(&mut Json)) {
        let version = self.next_version();
        let mut objects = self.objects.borrow_mut();
        let Some(obj) = objects.get_mut(&(kind.into(), ns.into(), name.into())) else {
            panic!("no {kind} {ns}/{name} to edit");
        };
        edit(obj);
        obj["metadata"]["resourceVersion"] = json!(version);
        let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
        obj["metadata"]["generation"] = json!(generation + 1);
    }

    /// Changes an object's status as its controller would, through the status subresource: a new
    /// resourceVersion, the same generation.
    pub fn edit_status(&self, kind: &str, ns: &str, name: &str, edit: impl FnOnce(&mut Json)) {
        let version = self.next_version();
        let mut objects = self.objects.borrow_mut();
        let Some(obj) = objects.get_mut(&(kind.into(), ns.into(), name.into())) else {
            panic!("no {kind} {ns}/{name} to edit");
        };
        edit(&mut obj["status"]);
        obj["metadata"]["resourceVersion"] = json!(version);
    }

    /// Removes finalizers and lets the object go, as a foreign controller would.
    pub fn clear_finalizers(&self, kind: &str, ns: &str, name: &str) {
        let key = (kind.to_string(), ns.to_string(), name.to_string());
        let version = self.next_version();
        let mut objects = self.objects.borrow_mut();
        if let Some(o) = objects.get_mut(&key) {
            o["metadata"]["finalizers"] = json!([]);
            o["metadata"]["resourceVersion"] = json!(version);
            if !o["metadata"]["deletionTimestamp"].is_null() {
                objects.remove(&key);
            }
        }
    }

    /// Removes the finalizer `finalizer`, as the controller that put it there would; the object
    /// goes if it was being deleted and that was its last one.
    pub fn remove_finalizer(&self, kind: &str, ns: &str, name: &str, finalizer: &str) {
        let key = (kind.to_string(), ns.to_string(), name.to_string());
        let version = self.next_version();
        let mut objects = self.objects.borrow_mut();
        let Some(o) = objects.get_mut(&key) else {
            return;
        };
        let Some(list) = o["metadata"]["finalizers"].as_array_mut() else {
            return;
        };
        list.retain(|f| f != finalizer);
        let released = list.is_empty() && !o["metadata"]["deletionTimestamp"].is_null();
        o["metadata"]["resourceVersion"] = json!(version);
        if released {
            objects.remove(&key);
        }
    }

    /// Deletes namespaces being deleted once they are empty (the namespace controller's job).
    pub fn run_namespace_controller(&self) {
        let terminating: Vec<String> = self
            .objects
            .borrow()
            .iter()
            .filter(|((k, _, _), o)| {
                k == "Namespace" && !o["metadata"]["deletionTimestamp"].is_null()
            })
            .map(|((_, _, n), _)| n.clone())
            .collect();
        for ns in terminating {
            self.finish_namespace(&ns);
        }
    }

    /// The namespace controller's work on one namespace being deleted: deletes what is in it
    /// (the grants there too), and the namespace once it is empty.
    pub fn finish_namespace(&self, ns: &str) {
        let inside: Vec<Key> = self
            .objects
            .borrow()
            .keys()
            .filter(|(_, n, _)| n == ns)
            .cloned()
            .collect();
        for key in &inside {
            let _ = self.delete(
                &Identity::Privileged,
                &ObjectRef::new("", &key.0, Some(&key.1), &key.2),
                &DeleteOptions::default(),
            );
        }
        // Its RoleBindings go with the rest: whoever was granted rights only here loses them.
        self.grants.borrow_mut().retain(|(_, _, _, n)| n != ns);
        let key = ("Namespace".to_string(), String::new(), ns.to_string());
        let terminating = self
            .objects
            .borrow()
            .get(&key)
            .is_some_and(|o| !o["metadata"]["deletionTimestamp"].is_null());
        if terminating && self.objects.borrow().keys().all(|(_, n, _)| n != ns) {
            self.objects.borrow_mut().remove(&key);
        }
    }

    /// Whether this cluster ever held an object of `kind` named `name` with `uid` (now, or
    /// before any write since it started): what an Event naming it may name.
    pub fn ever_held(&self, kind: &str, name: &str, uid: &str) -> bool {
        let is = |o: &Json| {
            o["kind"] == kind && o["metadata"]["name"] == name && o["metadata"]["uid"] == uid
        };
        self.objects.objects.borrow().values().any(is)
            || self
                .objects
                .writes
                .borrow()
                .iter()
                .any(|w| w.before.as_ref().is_some_and(is) || w.after.as_ref().is_some_and(is))
    }

    /// Advances the clock every host on this cluster reads.
    pub fn advance(&self, ms: i64) {
        self.now.set(self.now.get() + ms);
    }

    /// Makes every bookmark given out so far `gone`, as a watch relisted after its version
    /// expired (or a host restart) does.
    pub fn expire_watches(&self) {
        self.watch_epoch.set(self.watch_epoch.get() + 1);
    }

    /// The bookmark after write `index`.
    fn bookmark(&self, index: usize) -> String {
        format!("fake{}.{index}", self.watch_epoch.get())
    }

    /// Answers the reviews, which are not stored; None for any other kind.
    fn review(&self, id: &Identity, object: &Json) -> Option<Result<Object, KubeError>> {
        let mut review = object.clone();
        match object["kind"].as_str()? {
            "SelfSubjectAccessReview" => {
                // A token the cluster rejects gets 401, as from the API server, not a "no".
                if let Err(e) = self.authenticate(id) {
                    return Some(Err(e));
                }
                // Answered from the grants, whose kinds are the resources' kinds (a kind's
                // resource is its plural: the kinds of the objects and grants, lower-cased, + s).
                let attributes = &object["spec"]["resourceAttributes"];
                let resource = attributes["resource"].as_str().unwrap_or_default();
                let known: Vec<String> = self
                    .objects
                    .borrow()
                    .keys()
                    .map(|(kind, _, _)| kind.clone())
                    .chain(
                        self.grants
                            .borrow()
                            .iter()
                            .map(|(_, _, kind, _)| kind.clone()),
                    )
                    .collect();
                let kind = known
                    .into_iter()
                    .find(|kind| format!("{}s", kind.to_lowercase()) == resource)
                    .unwrap_or_default();
                let allowed = self
                    .check(
                        id,
                        attributes["verb"].as_str().unwrap_or_default(),
                        &kind,
                        attributes["namespace"].as_str(),
                    )
                    .is_ok();
                review["status"] = json!({ "allowed": allowed });
            }
            "TokenReview" => {
                // The host's identity may review tokens; an authenticated token is its own user.
                if let Err(e) = self.check(id, "create", "TokenReview", None) {
                    return Some(Err(e));
                }
                if matches!(id, Identity::Caller(_)) {
                    return Some(Err(KubeError::Forbidden(
                        "only the host reviews tokens".into(),
                    )));
                }
                let token = object["spec"]["token"].as_str().unwrap_or_default();
                review["status"] = if self.knows(token) {
                    json!({"authenticated": true, "user": {"username": token}})
                } else {
                    json!({"authenticated": false})
                };
            }
            "SelfSubjectReview" => {
                // Every authenticated caller may ask who they are.
                let user = match id {
                    Identity::Caller(token) => {
                        if let Err(e) = self.authenticate(id) {
                            return Some(Err(e));
                        }
                        token.clone()
                    }
                    Identity::Privileged => "system:serviceaccount:lethe:host".into(),
                };
                review["status"] = json!({"userInfo": {"username": user}});
            }
            _ => return None,
        }
        Some(Ok(object_from_json(review)))
    }

    /// Makes the cluster refuse to authenticate `token`.
    pub fn reject(&self, token: &str) {
        self.rejected.borrow_mut().push(token.into());
    }

    /// The stored object `target` that `id` may `verb`, with its key; 404 when there is none.
    fn stored(
        &self,
        id: &Identity,
        verb: &str,
        target: &ObjectRef,
    ) -> Result<(Key, Json), KubeError> {
        self.check(id, verb, &target.kind, target.namespace.as_deref())?;
        let key = key_ref(target);
        let current = self
            .objects
            .borrow()
            .get(&key)
            .cloned()
            .ok_or_else(|| KubeError::NotFound(target.name.clone()))?;
        Ok((key, current))
    }

    fn knows(&self, token: &str) -> bool {
        !self.rejected.borrow().iter().any(|t| t == token)
    }
}

fn key_of(o: &Json) -> Key {
    let s = |p: &str| {
        o.pointer(p)
            .and_then(Json::as_str)
            .unwrap_or_default()
            .to_string()
    };
    (s("/kind"), s("/metadata/namespace"), s("/metadata/name"))
}

fn key_ref(r: &ObjectRef) -> Key {
    (
        r.kind.clone(),
        r.namespace.clone().unwrap_or_default(),
        r.name.clone(),
    )
}

/// `selector` read as the API server reads a `labelSelector`; a malformed one is refused in its
/// words, as the server's 400 is.
fn label_selector(selector: Option<&str>) -> Result<LabelSelector> {
    LabelSelector::parse(selector.unwrap_or_default()).map_err(KubeError::Invalid)
}

/// `target` in `objects`, or 404.
fn get_in(objects: &BTreeMap<Key, Json>, target: &ObjectRef) -> Result<Object, KubeError> {
    objects
        .get(&key_ref(target))
        .cloned()
        .map(object_from_json)
        .ok_or_else(|| KubeError::NotFound(target.name.clone()))
}

/// The objects of `of` in `objects` that `page` selects (label and `metadata.name` field
/// selectors); pages continue after the last key returned.
fn list_in(
    objects: &BTreeMap<Key, Json>,
    of: &Collection,
    page: &ListOptions,
) -> Result<ObjectList> {
    let (kind, namespace) = (&of.kind, of.namespace.as_deref());
    let options = narrowed(of, page);
    let name = options
        .field_selector
        .as_deref()
        .and_then(|f| f.strip_prefix("metadata.name="));
    let labels = label_selector(options.label_selector.as_deref())?;
    let after = options.continue_token.as_deref();
    let matching: Vec<(String, &Json)> = objects
        .iter()
        .filter(|((k, n, nm), o)| {
            k == kind
                && namespace.is_none_or(|ns| ns == n)
                && name.is_none_or(|x| x == nm)
                && labels.matches(o)
        })
        .map(|((_, n, nm), o)| (format!("{n}/{nm}"), o))
        .filter(|(at, _)| after.is_none_or(|c| at.as_str() > c))
        .collect();
    let limit = options
        .limit
        .and_then(|l| usize::try_from(l).ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let continue_token = (matching.len() > limit).then(|| matching[limit - 1].0.clone());
    Ok(ObjectList {
        items: matching
            .into_iter()
            .take(limit)
            .map(|(_, o)| object_from_json(o.clone()))
            .collect(),
        continue_token,
    })
}

/// Applies `patch` to `doc` as the API server does; a JSON patch that fails is `Invalid`.
fn apply(doc: &mut Json, patch: &Patch) -> Result<()> {
    match patch {
        Patch::Merge(patch) => patch::merge_patch(doc, patch),
        Patch::Json(patch) => patch::json_patch(doc, patch).map_err(KubeError::Invalid)?,
    }
    Ok(())
}

impl Kube for FakeCluster {
    fn authenticate(&self, id: &Identity) -> Result<()> {
        match id {
            Identity::Caller(token) if !self.knows(token) => {
                Err(KubeError::Unauthorized("Unauthorized".into()))
            }
            _ => Ok(()),
        }
    }

    fn get(&self, id: &Identity, target: &ObjectRef) -> Result<Object> {
        self.reads.set(self.reads.get() + 1);
        self.check(id, "get", &target.kind, target.namespace.as_deref())?;
        if let Some(lag) = self.lag_of_this_read() {
            return self
                .objects
                .lagging_one(&key_ref(target), lag)
                .map(object_from_json)
                .ok_or_else(|| KubeError::NotFound(target.name.clone()));
        }
        let hidden = (target.kind.clone(), target.name.clone());
        let mut hidden_once = self.hidden_once.borrow_mut();
        if let Some(i) = hidden_once.iter().position(|h| *h == hidden) {
            hidden_once.remove(i);
            return Err(KubeError::NotFound(target.name.clone()));
        }
        drop(hidden_once);
        let found = get_in(&self.objects.borrow(), target)?;
        self.objects_read.set(self.objects_read.get() + 1);
        Ok(found)
    }

    /// Label and `metadata.name` field selectors; pages continue after the last key returned.
    fn list(&self, id: &Identity, of: &Collection, page: &ListOptions) -> Result<ObjectList> {
        self.reads.set(self.reads.get() + 1);
        self.check(id, "list", &of.kind, of.namespace.as_deref())?;
        let listed = match self.lag_of_this_read() {
            Some(lag) => list_in(&self.objects.lagging(&of.kind, lag), of, page),
            None => list_in(&self.objects.borrow(), of, page),
        }?;
        let count = u64::try_from(listed.items.len()).unwrap_or(u64::MAX);
        self.objects_read.set(self.objects_read.get() + count);
        Ok(listed)
    }

    fn create(&self, id: &Identity, object: &Json) -> Result<Object> {
        // A kind the server does not serve is refused before anything answers it, reviews too
        // (a cluster older than SelfSubjectReview has no such endpoint).
        if let Some(kind) = object["kind"].as_str()
            && self.missing_kinds.borrow().iter().any(|k| k == kind)
        {
            return Err(KubeError::NotFound(format!(
                "the server does not serve {kind}"
            )));
        }
        if let Some(answer) = self.review(id, object) {
            return answer;
        }
        let key = key_of(object);
        self.check(
            id,
            "create",
            &key.0,
            Some(&key.1).filter(|n| !n.is_empty()).map(String::as_str),
        )?;
        if let Some(admit) = self.admission.borrow().as_ref() {
            admit(object)?;
        }
        let lost = self
            .lost_answers
            .borrow()
            .iter()
            .position(|(k, _)| *k == key.0);
        if let Some(i) = lost {
            let (_, applied) = self.lost_answers.borrow_mut().remove(i);
            if applied && !self.objects.borrow().contains_key(&key) {
                self.put(object.clone());
            }
            return Err(KubeError::Unavailable("the answer was lost".into()));
        }
        if self.objects.borrow().contains_key(&key) {
            return Err(KubeError::Conflict(format!("{} already exists", key.2)));
        }
        let namespace = self
            .objects
            .borrow()
            .get(&("Namespace".to_string(), String::new(), key.1.clone()))
            .map(|ns| !ns["metadata"]["deletionTimestamp"].is_null());
        if namespace.is_none() && !key.1.is_empty() && self.namespaces_must_exist.get() {
            return Err(KubeError::NotFound(format!(
                "namespaces \"{}\" not found",
                key.1
            )));
        }
        if namespace == Some(true) {
            return Err(KubeError::Forbidden(format!(
                "unable to create new content in namespace {} because it is being terminated",
                key.1
            )));
        }
        let mut o = object.clone();
        for server_owned in [
            "uid",
            "generation",
            "creationTimestamp",
            "deletionTimestamp",
        ] {
            if let Some(m) = o["metadata"].as_object_mut() {
                m.remove(server_owned);
            }
        }
        Ok(self.put(o))
    }

    /// A resourceVersion in the body must match; uid and deletionTimestamp stay the stored ones,
    /// and the generation moves when the spec changes.
    fn replace(&self, id: &Identity, target: &ObjectRef, object: &Json) -> Result<Object> {
        if let Some(applied) = self.times_out("replace", &target.kind) {
            if applied {
                let _ = self.replace(id, target, object);
            }
            return Err(KubeError::Timeout("the answer was lost".into()));
        }
        let (key, current) = self.stored(id, "update", target)?;
        let mut next = object.clone();
        if let Some(rv) = next["metadata"]["resourceVersion"].as_str()
            && Some(rv) != current["metadata"]["resourceVersion"].as_str()
        {
            return Err(KubeError::Conflict("the object has been modified".into()));
        }
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(1)
            + i64::from(current["spec"] != next["spec"]);
        for kept in ["uid", "deletionTimestamp", "creationTimestamp"] {
            next["metadata"][kept] = current["metadata"][kept].clone();
        }
        next["metadata"]["generation"] = json!(generation);
        next["metadata"]["resourceVersion"] = json!(self.next_version());
        self.objects.borrow_mut().insert(key, next.clone());
        Ok(object_from_json(next))
    }

    /// A merge patch or a JSON patch, applied as the API server applies them. An object being deleted
    /// goes once its last finalizer does.
    fn patch(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object> {
        if let Some(applied) = self.times_out("patch", &target.kind) {
            if applied {
                let _ = self.patch(id, target, patch);
            }
            return Err(KubeError::Timeout("the answer was lost".into()));
        }
        let (key, current) = self.stored(id, "patch", target)?;
        let mut next = current.clone();
        apply(&mut next, patch)?;
        // A patch that sets the resourceVersion makes it a precondition, as the API server does.
        if next["metadata"]["resourceVersion"] != current["metadata"]["resourceVersion"] {
            return Err(KubeError::Conflict("the object has been modified".into()));
        }
        next["metadata"]["resourceVersion"] = json!(self.next_version());
        let gone = !next["metadata"]["deletionTimestamp"].is_null()
            && next["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty);
        let mut objects = self.objects.borrow_mut();
        if gone {
            objects.remove(&key);
        } else {
            objects.insert(key, next.clone());
        }
        Ok(object_from_json(next))
    }

    /// Applies `patch` as [`FakeCluster::patch`] does, and keeps only what it did to `status`,
    /// as the API server's status subresource does.
    fn patch_status(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object> {
        let (key, current) = self.stored(id, "patch", target)?;
        let mut patched = current.clone();
        apply(&mut patched, patch)?;
        let mut next = current;
        next["status"] = patched["status"].take();
        next["metadata"]["resourceVersion"] = json!(self.next_version());
        self.objects.borrow_mut().insert(key, next.clone());
        Ok(object_from_json(next))
    }

    /// The writes after bookmark `since` to objects of the collection, one change per write,
    /// oldest first, as a watch delivers them.
    fn changes(&self, id: &Identity, of: &Collection, since: Since<'_>) -> Result<ChangeBatch> {
        let namespace = of.namespace.as_deref();
        self.check(id, "changes", &of.kind, namespace)?;
        self.check(id, "list", &of.kind, namespace)?;
        self.check(id, "watch", &of.kind, namespace)?;
        let selector = label_selector(of.label_selector.as_deref())?;
        let writes = self.objects.writes.borrow();
        let Some(bookmark) = since.bookmark else {
            return Ok(ChangeBatch {
                bookmark: self.bookmark(writes.len()),
                ..ChangeBatch::default()
            });
        };
        let prefix = format!("fake{}.", self.watch_epoch.get());
        let from = bookmark
            .strip_prefix(&prefix)
            .and_then(|i| i.parse::<usize>().ok())
            .filter(|i| *i <= writes.len())
            .ok_or_else(|| KubeError::Gone(format!("bookmark {bookmark} expired")))?;
        let followed = |(k, n, _): &Key, o: &Json| {
            *k == of.kind && namespace.is_none_or(|ns| ns == n) && selector.matches(o)
        };
        let take = usize::try_from(since.max.max(1)).unwrap_or(usize::MAX);
        let mut changes = Vec::new();
        let mut next = writes.len();
        for (index, write) in writes.iter().enumerate().skip(from) {
            let before = write.before.as_ref().filter(|o| followed(&write.key, o));
            let after = write.after.as_ref().filter(|o| followed(&write.key, o));
            let change = match (before, after) {
                (None, Some(o)) => (ChangeType::Added, o),
                (Some(_), Some(o)) => (ChangeType::Modified, o),
                (Some(o), None) => (ChangeType::Deleted, o),
                (None, None) => continue,
            };
            if changes.len() == take {
                next = index;
                break;
            }
            changes.push(Change {
                change_type: change.0,
                object: object_from_json(change.1.clone()),
            });
        }
        Ok(ChangeBatch {
            changes,
            bookmark: self.bookmark(next),
            more: next < writes.len(),
        })
    }

    /// Objects with finalizers, and namespaces, are marked; others go at once.
    fn delete(&self, id: &Identity, target: &ObjectRef, how: &DeleteOptions) -> Result<Deletion> {
        if let Some(applied) = self.times_out("delete", &target.kind) {
            if applied {
                let _ = self.delete(id, target, how);
            }
            return Err(KubeError::Timeout("the answer was lost".into()));
        }
        self.check(id, "delete", &target.kind, target.namespace.as_deref())?;
        let key = key_ref(target);
        let mut objects = self.objects.borrow_mut();
        let current = objects
            .get_mut(&key)
            .ok_or_else(|| KubeError::NotFound(target.name.clone()))?;
        if let Some(uid) = &how.precondition_uid
            && current["metadata"]["uid"].as_str() != Some(uid)
        {
            return Err(KubeError::Conflict("uid precondition failed".into()));
        }
        let has_finalizers = current["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers || key.0 == "Namespace" {
            // Marking it is a write: a new resourceVersion, as Kubernetes gives it.
            if current["metadata"]["deletionTimestamp"].is_null() {
                current["metadata"]["deletionTimestamp"] = json!(format_rfc3339(self.now.get()));
                current["metadata"]["resourceVersion"] = json!(self.next_version());
            }
            Ok(Deletion::Pending(Box::new(object_from_json(
                current.clone(),
            ))))
        } else {
            objects.remove(&key);
            Ok(Deletion::Done)
        }
    }
}

/// SQLite in memory behind [`Sql`], with `$1`-style parameters as the hosts take them.
pub struct FakeSql(rusqlite::Connection);

impl FakeSql {
    /// A database with every `.sql` file of `dir` applied, in name order.
    pub fn migrated(dir: impl AsRef<Path>) -> FakeSql {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .expect("migrations")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        let sql = FakeSql::from_script("");
        for f in files {
            sql.0
                .execute_batch(&std::fs::read_to_string(f).expect("read"))
                .expect("migrate");
        }
        sql
    }

    /// A database with the statements of `script` applied: a test's own tables.
    pub fn from_script(script: &str) -> FakeSql {
        let conn = rusqlite::Connection::open_in_memory().expect("sqlite in memory");
        conn.set_prepared_statement_cache_capacity(128);
        // SQLite as bundled gathers STAT4 samples, and so re-plans a cached statement whenever a
        // bound value might change its plan; tables of a few rows gain nothing from that.
        conn.set_db_config(
            rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
            true,
        )
        .expect("query planner stability");
        conn.execute_batch(script).expect("script");
        FakeSql(conn)
    }

    fn run(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        let sql = sql.replace('$', "?");
        let mut stmt = self.0.prepare_cached(&sql).map_err(map_err)?;
        let params: Vec<rusqlite::types::Value> = params
            .iter()
            .map(|v| match v {
                Value::Null => rusqlite::types::Value::Null,
                Value::Bool(b) => rusqlite::types::Value::Integer(i64::from(*b)),
                Value::Int(i) => rusqlite::types::Value::Integer(*i),
                Value::Text(t) => rusqlite::types::Value::Text(t.clone()),
            })
            .collect();
        let columns = stmt.column_count();
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(map_err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(map_err)? {
            let mut values = Vec::new();
            for i in 0..columns {
                values.push(match row.get_ref(i).map_err(map_err)? {
                    rusqlite::types::ValueRef::Integer(n) => Value::Int(n),
                    rusqlite::types::ValueRef::Text(t) => {
                        Value::Text(String::from_utf8_lossy(t).into_owned())
                    }
                    rusqlite::types::ValueRef::Real(f) => Value::Text(f.to_string()),
                    _ => Value::Null,
                });
            }
            out.push(values);
        }
        Ok(out)
    }
}

fn map_err(e: rusqlite::Error) -> SqlError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::ConstraintViolation) => SqlError::Constraint(e.to_string()),
        _ => SqlError::Failed(e.to_string()),
    }
}

impl Sql for FakeSql {
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        self.run(sql, params)
    }

    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        self.run(sql, params)?;
        Ok(self.0.changes())
    }

    fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError> {
        self.0.execute_batch("BEGIN").map_err(map_err)?;
        let mut counts = Vec::new();
        for (sql, params) in statements {
            match self.execute(sql, params) {
                Ok(n) => counts.push(n),
                Err(e) => {
                    let _ = self.0.execute_batch("ROLLBACK");
                    return Err(e);
                }
            }
        }
        self.0.execute_batch("COMMIT").map_err(map_err)?;
        Ok(counts)
    }
}

/// A host: a cluster, a database if it has one, its own clock, configuration and instance.
/// It dereferences to its cluster, so a test arranges the world through the host it runs.
pub struct FakeHost<'a> {
    /// The cluster.
    pub kube: &'a FakeCluster,
    /// The database; without one every SQL call fails.
    pub sql: Option<&'a FakeSql>,
    /// Milliseconds since the epoch; sleeping advances it.
    pub now: Rc<Cell<i64>>,
    /// Component variables.
    pub config: RefCell<BTreeMap<String, String>>,
    /// The last `(done, total)` progress report.
    pub progress: Cell<(u64, u64)>,
    /// Every line logged, in order.
    pub logged: RefCell<Vec<(Level, String)>>,
    uuids: Cell<u64>,
}

impl<'a> FakeHost<'a> {
    /// A host named `instance` with a database, its own clock at 1 000 000 ms and a backoff
    /// base of a second.
    pub fn new(sql: &'a FakeSql, kube: &'a FakeCluster, instance: &str) -> FakeHost<'a> {
        let host = FakeHost {
            kube,
            sql: Some(sql),
            now: Rc::new(Cell::new(1_000_000)),
            config: RefCell::new(BTreeMap::new()),
            progress: Cell::new((0, 0)),
            logged: RefCell::new(Vec::new()),
            uuids: Cell::new(seed(instance)),
        };
        host.set_config("lethe_instance_id", instance);
        host.set_config("backoff_base_ms", "1000");
        host
    }

    /// A host without a database that shares the cluster's clock.
    pub fn on(kube: &'a FakeCluster) -> FakeHost<'a> {
        FakeHost {
            kube,
            sql: None,
            now: kube.now.clone(),
            config: RefCell::new(BTreeMap::new()),
            progress: Cell::new((0, 0)),
            logged: RefCell::new(Vec::new()),
            uuids: Cell::new(seed("")),
        }
    }

    /// Sets a component variable.
    pub fn set_config(&self, key: &str, value: &str) {
        self.config.borrow_mut().insert(key.into(), value.into());
    }

    /// Advances the clock.
    pub fn advance(&self, ms: i64) {
        self.now.set(self.now.get() + ms);
    }

    fn database(&self) -> Result<&FakeSql, SqlError> {
        self.sql
            .ok_or_else(|| SqlError::Failed("this host has no database".into()))
    }
}

/// A stream seed from a name (FNV-1a).
fn seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl std::ops::Deref for FakeHost<'_> {
    type Target = FakeCluster;

    fn deref(&self) -> &FakeCluster {
        self.kube
    }
}

impl Sql for FakeHost<'_> {
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        self.database()?.query(sql, params)
    }
    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        self.database()?.execute(sql, params)
    }
    fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError> {
        self.database()?.batch(statements)
    }
}

impl KubeVia for FakeHost<'_> {
    fn via(&self) -> &dyn Kube {
        self.kube
    }
}

impl Env for FakeHost<'_> {
    fn now_ms(&self) -> i64 {
        self.now.get()
    }

    fn sleep_ms(&self, ms: u64) {
        self.advance(i64::try_from(ms).unwrap_or(i64::MAX));
    }

    fn config(&self, key: &str) -> Option<String> {
        self.config.borrow().get(key).cloned()
    }

    fn log(&self, level: Level, message: &str) {
        self.logged.borrow_mut().push((level, message.to_string()));
    }

    /// A splitmix64 stream seeded by the instance's name: random-looking, and the same in every
    /// run.
    fn random_bytes(&self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let mut z = self.uuids.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
            self.uuids.set(z);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            out.extend_from_slice(&(z ^ (z >> 31)).to_be_bytes());
        }
        out.truncate(n);
        out
    }

    fn progress(&self, done: u64, total: u64) {
        self.progress.set((done, total));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cm(ns: &str, name: &str, labels: Json) -> Json {
        json!({"kind": "ConfigMap", "metadata": {"namespace": ns, "name": name, "labels": labels}})
    }

    #[test]
    fn changes_come_from_a_bookmark_in_batches_until_the_watch_expires() {
        let cluster = FakeCluster::new();
        let followed = Collection {
            label_selector: Some("app=j".into()),
            ..Collection::new("v1", "ConfigMap", Some("a"))
        };
        let changes = |since: Option<&str>, max: u32| {
            cluster
                .changes(
                    &Identity::Privileged,
                    &followed,
                    Since {
                        bookmark: since,
                        max,
                    },
                )
                .expect("changes")
        };
        let start = changes(None, 10);
        assert!(start.changes.is_empty() && !start.more);
        cluster.put(cm("a", "x", json!({"app": "j"})));
        cluster.put(cm("a", "y", json!({"app": "j"})));
        cluster.put(cm("a", "other", json!({"app": "k"})));
        cluster.put(cm("b", "x", json!({"app": "j"})));
        let first = changes(Some(&start.bookmark), 1);
        let seen = |b: &ChangeBatch| -> Vec<(ChangeType, String)> {
            b.changes
                .iter()
                .map(|c| (c.change_type, c.object.target.name.clone()))
                .collect()
        };
        assert_eq!(seen(&first), [(ChangeType::Added, "x".to_string())]);
        assert!(first.more, "one more waits");
        let second = changes(Some(&first.bookmark), 10);
        assert_eq!(seen(&second), [(ChangeType::Added, "y".to_string())]);
        assert!(!second.more);
        cluster.edit("ConfigMap", "a", "x", |o| o["data"] = json!({"k": "v"}));
        cluster
            .delete(
                &Identity::Privileged,
                &ObjectRef::new("v1", "ConfigMap", Some("a"), "y"),
                &DeleteOptions::default(),
            )
            .expect("delete");
        let third = changes(Some(&second.bookmark), 10);
        assert_eq!(
            seen(&third),
            [
                (ChangeType::Modified, "x".to_string()),
                (ChangeType::Deleted, "y".to_string())
            ]
        );
        assert!(changes(Some(&third.bookmark), 10).changes.is_empty());
        cluster.expire_watches();
        assert!(matches!(
            cluster.changes(
                &Identity::Privileged,
                &followed,
                Since {
                    bookmark: Some(&third.bookmark),
                    max: 10
                }
            ),
            Err(KubeError::Gone(_))
        ));
    }

    #[test]
    fn lists_select_by_label_and_page_across_namespaces() {
        let cluster = FakeCluster::new();
        for (ns, name, labels) in [
            ("a", "x", json!({"app": "j"})),
            ("a", "y", json!({"app": "k"})),
            ("b", "x", json!({"app": "j", "tier": "1"})),
            ("b", "z", json!({"app": "j"})),
        ] {
            cluster.put(cm(ns, name, labels));
        }
        let list = |ns: Option<&str>, selector: &str, limit: Option<u32>, after: Option<String>| {
            let options = ListOptions {
                label_selector: Some(selector.into()),
                limit,
                continue_token: after,
                ..ListOptions::default()
            };
            let l = cluster
                .list(
                    &Identity::Privileged,
                    &Collection::new("v1", "ConfigMap", ns),
                    &options,
                )
                .expect("list");
            let names: Vec<String> = l
                .items
                .iter()
                .map(|o| {
                    format!(
                        "{}/{}",
                        o.target.namespace.clone().unwrap_or_default(),
                        o.target.name
                    )
                })
                .collect();
            (names, l.continue_token)
        };
        assert_eq!(list(None, "app=j", None, None).0, ["a/x", "b/x", "b/z"]);
        assert_eq!(list(Some("b"), "app=j,!tier", None, None).0, ["b/z"]);
        assert_eq!(list(None, "tier", None, None).0, ["b/x"]);
        let (first, token) = list(None, "app=j", Some(2), None);
        assert_eq!(first, ["a/x", "b/x"]);
        let (rest, end) = list(None, "app=j", Some(2), token);
        assert_eq!((rest, end), (vec!["b/z".to_string()], None));
    }

    #[test]
    fn selectors_are_read_as_the_api_server_reads_them() {
        let cluster = FakeCluster::new();
        cluster.put(cm("a", "x", json!({"app": "j", "tier": "1"})));
        cluster.put(cm("a", "y", json!({"app": "k"})));
        let mut of = Collection::new("v1", "ConfigMap", Some("a"));
        let names = |of: &Collection, selector: &str| {
            let options = ListOptions {
                label_selector: Some(selector.into()),
                ..ListOptions::default()
            };
            cluster.list(&Identity::Privileged, of, &options).map(|l| {
                l.items
                    .into_iter()
                    .map(|o| o.target.name)
                    .collect::<Vec<_>>()
            })
        };
        assert_eq!(names(&of, "app in (j, m)"), Ok(vec!["x".to_string()]));
        assert_eq!(names(&of, "app!=j"), Ok(vec!["y".to_string()]));
        assert_eq!(names(&of, "tier notin (1)"), Ok(vec!["y".to_string()]));
        assert!(matches!(names(&of, "app in j"), Err(KubeError::Invalid(_))));
        // A followed collection's own selector narrows every list of it.
        of.label_selector = Some("tier".into());
        assert_eq!(names(&of, "app"), Ok(vec!["x".to_string()]));
        assert!(matches!(
            cluster.changes(
                &Identity::Privileged,
                &Collection {
                    label_selector: Some("a b".into()),
                    ..of
                },
                Since::START
            ),
            Err(KubeError::Invalid(_))
        ));
    }

    #[test]
    fn rejected_tokens_are_not_authenticated_and_grants_decide_the_rest() {
        let cluster = FakeCluster::new();
        cluster.grant("reader", "get", "ConfigMap", "a");
        cluster.put(cm("a", "x", json!({})));
        let target = ObjectRef::new("v1", "ConfigMap", Some("a"), "x");
        let caller = |t: &str| Identity::Caller(t.into());
        assert!(cluster.get(&caller("reader"), &target).is_ok());
        assert!(matches!(
            cluster.delete(&caller("reader"), &target, &DeleteOptions::default()),
            Err(KubeError::Forbidden(_))
        ));
        assert!(matches!(
            cluster.get(&caller("stranger"), &target),
            Err(KubeError::Forbidden(_))
        ));
        cluster.reject("stranger");
        assert!(matches!(
            cluster.get(&caller("stranger"), &target),
            Err(KubeError::Unauthorized(_))
        ));
        cluster.fail("get", "ConfigMap");
        assert!(matches!(
            cluster.get(&caller("admin"), &target),
            Err(KubeError::Unavailable(_))
        ));
        cluster.heal();
        assert!(cluster.get(&caller("admin"), &target).is_ok());
    }

    #[test]
    fn replace_guards_the_version_and_moves_the_generation_with_the_spec() {
        let cluster = FakeCluster::new();
        let stored = cluster.put(json!({"kind": "CronJob", "metadata": {"namespace": "a", "name": "c"}, "spec": {"s": 1}}));
        let target = ObjectRef::new("batch/v1", "CronJob", Some("a"), "c");
        let mut body = stored.json().clone();
        body["spec"]["s"] = json!(2);
        let next = cluster
            .replace(&Identity::Privileged, &target, &body)
            .expect("replace");
        assert_eq!(next.json()["metadata"]["generation"], 2);
        assert_eq!(
            next.json()["metadata"]["uid"],
            stored.json()["metadata"]["uid"]
        );
        assert!(matches!(
            cluster.replace(&Identity::Privileged, &target, &body),
            Err(KubeError::Conflict(_))
        ));
    }

    #[test]
    fn a_lagging_reader_sees_changes_and_deletions_late_but_never_misses_an_object() {
        let cluster = FakeCluster::new();
        let target = ObjectRef::new("v1", "ConfigMap", Some("a"), "c");
        let id = Identity::Privileged;
        cluster.put(cm("a", "c", json!({"v": "1"})));
        cluster.now.set(cluster.now.get() + 10_000);
        cluster.edit("ConfigMap", "a", "c", |o| {
            o["metadata"]["labels"]["v"] = json!("2")
        });
        cluster.read_lag_ms.set(5_000);
        let now = cluster.get(&id, &target).expect("current");
        assert_eq!(
            now.json()["metadata"]["labels"]["v"],
            "2",
            "outside read_late, reads see every write"
        );
        cluster.read_late(|| {
            let seen = cluster.get(&id, &target).expect("seen");
            assert_eq!(
                seen.json()["metadata"]["labels"]["v"],
                "1",
                "the edit is not seen yet"
            );

            // A create is seen at once, as it was created.
            cluster.put(cm("a", "new", json!({"v": "1"})));
            let listed = cluster
                .list(
                    &id,
                    &Collection::new("v1", "ConfigMap", Some("a")),
                    &ListOptions::default(),
                )
                .expect("list");
            assert_eq!(listed.items.len(), 2);

            // A deletion is not seen until the lag has passed.
            cluster
                .delete(&id, &target, &DeleteOptions::default())
                .expect("delete");
            assert!(cluster.get(&id, &target).is_ok(), "still seen");
            cluster.now.set(cluster.now.get() + 5_001);
            assert!(matches!(
                cluster.get(&id, &target),
                Err(KubeError::NotFound(_))
            ));
            assert_eq!(
                cluster
                    .list(
                        &id,
                        &Collection::new("v1", "ConfigMap", Some("a")),
                        &ListOptions::default()
                    )
                    .expect("list")
                    .items
                    .len(),
                1
            );
        });
    }

    #[test]
    fn nothing_is_created_in_a_terminating_namespace() {
        let cluster = FakeCluster::new();
        cluster.put(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}));
        cluster
            .delete(
                &Identity::Privileged,
                &ObjectRef::new("v1", "Namespace", None, "a"),
                &DeleteOptions::default(),
            )
            .expect("marked");
        assert!(matches!(
            cluster.create(&Identity::Privileged, &cm("a", "c", json!({}))),
            Err(KubeError::Forbidden(_))
        ));
        cluster.run_namespace_controller();
        assert!(!cluster.exists("Namespace", "", "a"));
    }

    #[test]
    fn a_write_that_times_out_may_have_been_applied() {
        let cluster = FakeCluster::new();
        let target = ObjectRef::new("v1", "ConfigMap", Some("a"), "c");
        let id = Identity::Privileged;
        cluster.put(cm("a", "c", json!({})));
        let patch = Patch::Merge(json!({"metadata": {"labels": {"v": "1"}}}));
        cluster.time_out_next("patch", "ConfigMap", false);
        assert!(matches!(
            cluster.patch(&id, &target, &patch),
            Err(KubeError::Timeout(_))
        ));
        let stored = cluster.object("ConfigMap", "a", "c").expect("there");
        assert!(stored.label("v").is_none(), "not applied");
        cluster.time_out_next("patch", "ConfigMap", true);
        assert!(cluster.patch(&id, &target, &patch).is_err());
        let stored = cluster.object("ConfigMap", "a", "c").expect("there");
        assert_eq!(stored.label("v"), Some("1"), "applied, answer lost");
        cluster.time_out_next("delete", "ConfigMap", true);
        assert!(matches!(
            cluster.delete(&id, &target, &DeleteOptions::default()),
            Err(KubeError::Timeout(_))
        ));
        assert!(!cluster.exists("ConfigMap", "a", "c"));
    }
}
