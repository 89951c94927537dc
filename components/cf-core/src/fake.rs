//! An in-memory stand-in for the host: a small Kubernetes with finalizer semantics and a
//! permission table, and a clock that advances when the logic sleeps.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};

use serde_json::{Value as Json, json};

use lethe_guest::env::{Env, Level, format_rfc3339};
use lethe_guest::kube::{
    DeleteOptions, DeleteOutcome, Identity, Kube, KubeError, ListOptions, Object, ObjectList,
    ObjectRef, PatchKind, object_from_json,
};

type Key = (String, String, String); // (kind, namespace, name)

/// Who may do what: `(token, verb, kind, namespace or "*")`.
pub struct Fake {
    objects: RefCell<BTreeMap<Key, Json>>,
    version: Cell<u64>,
    pub now: Cell<i64>,
    pub config: RefCell<HashMap<String, String>>,
    grants: RefCell<Vec<(String, String, String, String)>>,
    pub calls: Cell<u32>,
    /// `(verb, kind)` calls that fail with `Unavailable`, whoever makes them.
    faults: RefCell<Vec<(String, String)>>,
    /// `(kind, name)` of objects the next `get` answers 404 for, as if they appeared just after.
    hidden_once: RefCell<Vec<(String, String)>>,
    /// Kinds the server does not serve (an older Kubernetes).
    pub missing_kinds: RefCell<Vec<String>>,
    /// `(kind, applied)`: the next create of `kind` is answered `Unavailable`, after it was
    /// carried out when `applied` (a lost answer) or not at all.
    lost_answers: RefCell<Vec<(String, bool)>>,
}

impl Fake {
    pub fn new() -> Self {
        let fake = Fake {
            objects: RefCell::new(BTreeMap::new()),
            version: Cell::new(1),
            now: Cell::new(1_700_000_000_000),
            config: RefCell::new(HashMap::new()),
            grants: RefCell::new(Vec::new()),
            calls: Cell::new(0),
            faults: RefCell::new(Vec::new()),
            hidden_once: RefCell::new(Vec::new()),
            missing_kinds: RefCell::new(Vec::new()),
            lost_answers: RefCell::new(Vec::new()),
        };
        fake.grant("admin", "*", "*", "*");
        fake
    }

    /// Lets `token` do `verb` on `kind` in `namespace` (`*` = any).
    pub fn grant(&self, token: &str, verb: &str, kind: &str, namespace: &str) {
        self.grants
            .borrow_mut()
            .push((token.into(), verb.into(), kind.into(), namespace.into()));
    }

    /// Makes every `verb` on `kind` (`*` = any) fail as an unreachable cluster does.
    pub fn fail(&self, verb: &str, kind: &str) {
        self.faults.borrow_mut().push((verb.into(), kind.into()));
    }

    /// Makes the next create of `kind` answer `Unavailable`: after carrying it out (`applied`,
    /// an answer lost on the way back) or without.
    pub fn lose_next_create(&self, kind: &str, applied: bool) {
        self.lost_answers.borrow_mut().push((kind.into(), applied));
    }

    /// Makes the next `get` of `kind` `name` answer 404, as if the object appeared just after.
    pub fn hide_once(&self, kind: &str, name: &str) {
        self.hidden_once
            .borrow_mut()
            .push((kind.into(), name.into()));
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
        let Identity::Caller(token) = id else {
            return Ok(());
        };
        if token == "bad" {
            return Err(KubeError::Unauthorized("Unauthorized".into()));
        }
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

    fn bump(&self, o: &mut Json) {
        let v = self.version.get() + 1;
        self.version.set(v);
        o["metadata"]["resourceVersion"] = json!(v.to_string());
    }

    /// Puts an object in place, as an administrator would.
    pub fn put(&self, mut o: Json) -> Object {
        let key = key_of(&o);
        if o["metadata"]["uid"].is_null() {
            o["metadata"]["uid"] = json!(format!("uid-{}-{}", key.2, self.version.get()));
        }
        if o["metadata"]["creationTimestamp"].is_null() {
            o["metadata"]["creationTimestamp"] = json!(format_rfc3339(self.now.get()));
        }
        self.bump(&mut o);
        self.objects.borrow_mut().insert(key, o.clone());
        object_from_json(o)
    }

    pub fn exists(&self, kind: &str, ns: &str, name: &str) -> bool {
        self.objects
            .borrow()
            .contains_key(&(kind.into(), ns.into(), name.into()))
    }

    pub fn object(&self, kind: &str, ns: &str, name: &str) -> Option<Object> {
        self.objects
            .borrow()
            .get(&(kind.into(), ns.into(), name.into()))
            .cloned()
            .map(object_from_json)
    }

    /// Removes finalizers and lets the object go, as a foreign controller would.
    pub fn clear_finalizers(&self, kind: &str, ns: &str, name: &str) {
        let key = (kind.to_string(), ns.to_string(), name.to_string());
        let mut objects = self.objects.borrow_mut();
        if let Some(o) = objects.get_mut(&key) {
            o["metadata"]["finalizers"] = json!([]);
            if !o["metadata"]["deletionTimestamp"].is_null() {
                objects.remove(&key);
            }
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
            let inside: Vec<Key> = self
                .objects
                .borrow()
                .keys()
                .filter(|(_, n, _)| *n == ns)
                .cloned()
                .collect();
            for key in &inside {
                let _ = self.delete(
                    &Identity::Privileged,
                    &ObjectRef::new("", &key.0, Some(&key.1), &key.2),
                    &DeleteOptions::default(),
                );
            }
            if self.objects.borrow().keys().all(|(_, n, _)| *n != ns) {
                self.objects
                    .borrow_mut()
                    .remove(&("Namespace".to_string(), String::new(), ns));
            }
        }
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

impl Kube for Fake {
    fn authenticate(&self, id: &Identity) -> Result<(), KubeError> {
        match id {
            Identity::Caller(token) if token == "bad" => {
                Err(KubeError::Unauthorized("Unauthorized".into()))
            }
            _ => Ok(()),
        }
    }

    fn get(&self, id: &Identity, target: &ObjectRef) -> Result<Object, KubeError> {
        self.calls.set(self.calls.get() + 1);
        self.check(id, "get", &target.kind, target.namespace.as_deref())?;
        let hidden = (target.kind.clone(), target.name.clone());
        let mut hidden_once = self.hidden_once.borrow_mut();
        if let Some(i) = hidden_once.iter().position(|h| *h == hidden) {
            hidden_once.remove(i);
            return Err(KubeError::NotFound(target.name.clone()));
        }
        drop(hidden_once);
        self.objects
            .borrow()
            .get(&key_ref(target))
            .cloned()
            .map(object_from_json)
            .ok_or_else(|| KubeError::NotFound(target.name.clone()))
    }

    fn list(
        &self,
        id: &Identity,
        _v: &str,
        kind: &str,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        self.calls.set(self.calls.get() + 1);
        self.check(id, "list", kind, namespace)?;
        let name = options
            .field_selector
            .as_deref()
            .and_then(|f| f.strip_prefix("metadata.name="));
        let items = self
            .objects
            .borrow()
            .iter()
            .filter(|((k, n, nm), _)| {
                k == kind && namespace.is_none_or(|ns| ns == n) && name.is_none_or(|x| x == nm)
            })
            .map(|(_, o)| object_from_json(o.clone()))
            .collect();
        Ok(ObjectList {
            items,
            continue_token: None,
        })
    }

    fn create(&self, id: &Identity, object: &Json) -> Result<Object, KubeError> {
        if object["kind"] == "SelfSubjectAccessReview" {
            // Answered from the grants, whose kinds are the resources' kinds.
            let attributes = &object["spec"]["resourceAttributes"];
            let resource = attributes["resource"].as_str().unwrap_or_default();
            let kind = self
                .objects
                .borrow()
                .keys()
                .map(|(kind, _, _)| kind.clone())
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
            let mut review = object.clone();
            review["status"] = json!({ "allowed": allowed });
            return Ok(object_from_json(review));
        }
        if let Some(kind) = object["kind"].as_str()
            && self.missing_kinds.borrow().iter().any(|k| k == kind)
        {
            return Err(KubeError::NotFound(format!(
                "the server does not serve {kind}"
            )));
        }
        if object["kind"] == "TokenReview" {
            // The host's identity may review tokens; a token here is its user.
            self.check(id, "create", "TokenReview", None)?;
            if matches!(id, Identity::Caller(_)) {
                return Err(KubeError::Forbidden("only the host reviews tokens".into()));
            }
            let token = object["spec"]["token"].as_str().unwrap_or_default();
            let mut review = object.clone();
            review["status"] = if token == "bad" {
                json!({"authenticated": false})
            } else {
                json!({"authenticated": true, "user": {"username": token}})
            };
            return Ok(object_from_json(review));
        }
        if object["kind"] == "SelfSubjectReview" {
            // Every authenticated caller may ask who they are; a token here is its user.
            let user = match id {
                Identity::Caller(token) if token == "bad" => {
                    return Err(KubeError::Unauthorized("Unauthorized".into()));
                }
                Identity::Caller(token) => token.clone(),
                Identity::Privileged => "system:serviceaccount:lethe:host".into(),
            };
            let mut review = object.clone();
            review["status"] = json!({"userInfo": {"username": user}});
            return Ok(object_from_json(review));
        }
        let key = key_of(object);
        self.check(
            id,
            "create",
            &key.0,
            Some(&key.1).filter(|n| !n.is_empty()).map(String::as_str),
        )?;
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
        Ok(self.put(object.clone()))
    }

    fn replace(
        &self,
        id: &Identity,
        target: &ObjectRef,
        object: &Json,
    ) -> Result<Object, KubeError> {
        self.check(id, "update", &target.kind, target.namespace.as_deref())?;
        let key = key_ref(target);
        let mut objects = self.objects.borrow_mut();
        let current = objects
            .get(&key)
            .cloned()
            .ok_or_else(|| KubeError::NotFound(target.name.clone()))?;
        let mut next = object.clone();
        if let Some(rv) = next["metadata"]["resourceVersion"].as_str()
            && Some(rv) != current["metadata"]["resourceVersion"].as_str()
        {
            return Err(KubeError::Conflict("the object has been modified".into()));
        }
        next["metadata"]["uid"] = current["metadata"]["uid"].clone();
        next["metadata"]["deletionTimestamp"] = current["metadata"]["deletionTimestamp"].clone();
        let v = self.version.get() + 1;
        self.version.set(v);
        next["metadata"]["resourceVersion"] = json!(v.to_string());
        objects.insert(key, next.clone());
        Ok(object_from_json(next))
    }

    fn patch(
        &self,
        id: &Identity,
        target: &ObjectRef,
        kind: PatchKind,
        patch: &Json,
    ) -> Result<Object, KubeError> {
        self.check(id, "patch", &target.kind, target.namespace.as_deref())?;
        let key = key_ref(target);
        let mut objects = self.objects.borrow_mut();
        let current = objects
            .get(&key)
            .cloned()
            .ok_or_else(|| KubeError::NotFound(target.name.clone()))?;
        let mut next = current.clone();
        match kind {
            PatchKind::Merge => merge(&mut next, patch),
            PatchKind::Json => {
                for op in patch.as_array().into_iter().flatten() {
                    let path = op["path"].as_str().unwrap_or_default();
                    match op["op"].as_str() {
                        Some("test") => {
                            if next.pointer(path) != Some(&op["value"]) {
                                return Err(KubeError::Invalid(format!("test failed at {path}")));
                            }
                        }
                        Some("add") => json_add(&mut next, path, op["value"].clone()),
                        Some("remove") => json_remove(&mut next, path),
                        _ => return Err(KubeError::Invalid("unsupported op".into())),
                    }
                }
            }
        }
        let v = self.version.get() + 1;
        self.version.set(v);
        next["metadata"]["resourceVersion"] = json!(v.to_string());
        let gone = !next["metadata"]["deletionTimestamp"].is_null()
            && next["metadata"]["finalizers"]
                .as_array()
                .is_none_or(Vec::is_empty);
        if gone {
            objects.remove(&key);
        } else {
            objects.insert(key, next.clone());
        }
        Ok(object_from_json(next))
    }

    fn delete(
        &self,
        id: &Identity,
        target: &ObjectRef,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        self.check(id, "delete", &target.kind, target.namespace.as_deref())?;
        let key = key_ref(target);
        let mut objects = self.objects.borrow_mut();
        let current = objects
            .get_mut(&key)
            .ok_or_else(|| KubeError::NotFound(target.name.clone()))?;
        if let Some(uid) = &options.precondition_uid
            && current["metadata"]["uid"].as_str() != Some(uid)
        {
            return Err(KubeError::Conflict("uid precondition failed".into()));
        }
        let has_finalizers = current["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| !f.is_empty());
        if has_finalizers || key.0 == "Namespace" {
            if current["metadata"]["deletionTimestamp"].is_null() {
                current["metadata"]["deletionTimestamp"] = json!(format_rfc3339(self.now.get()));
            }
            Ok(DeleteOutcome::Pending(Box::new(object_from_json(
                current.clone(),
            ))))
        } else {
            objects.remove(&key);
            Ok(DeleteOutcome::Deleted)
        }
    }
}

fn merge(target: &mut Json, patch: &Json) {
    match (target, patch) {
        (Json::Object(t), Json::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Json::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

fn split(path: &str) -> (String, String) {
    let (parent, last) = path.rsplit_once('/').unwrap_or(("", path));
    (parent.to_string(), last.to_string())
}

fn json_add(doc: &mut Json, path: &str, value: Json) {
    let (parent, last) = split(path);
    match doc.pointer_mut(&parent) {
        Some(Json::Array(a)) if last == "-" => a.push(value),
        Some(Json::Array(a)) => {
            if let Ok(i) = last.parse::<usize>() {
                a.insert(i.min(a.len()), value);
            }
        }
        Some(Json::Object(o)) => {
            o.insert(last, value);
        }
        _ => {}
    }
}

fn json_remove(doc: &mut Json, path: &str) {
    let (parent, last) = split(path);
    match doc.pointer_mut(&parent) {
        Some(Json::Array(a)) => {
            if let Ok(i) = last.parse::<usize>()
                && i < a.len()
            {
                a.remove(i);
            }
        }
        Some(Json::Object(o)) => {
            o.remove(&last);
        }
        _ => {}
    }
}

impl Env for Fake {
    fn now_ms(&self) -> i64 {
        self.now.get()
    }
    fn sleep_ms(&self, ms: u64) {
        self.now
            .set(self.now.get() + i64::try_from(ms).unwrap_or(0));
    }
    fn config(&self, key: &str) -> Option<String> {
        self.config.borrow().get(key).cloned()
    }
    fn log(&self, _level: Level, _message: &str) {}
    fn random_bytes(&self, n: usize) -> Vec<u8> {
        let seed = self.version.get();
        self.version.set(seed + 1);
        (0..n)
            .map(|i| (seed as u8).wrapping_mul(31).wrapping_add(i as u8))
            .collect()
    }
}
