//! An in-process host for native tests: SQLite in memory (the component's real migrations) and
//! a small Kubernetes object store with the behaviour the logic relies on (uid, resourceVersion,
//! generation, label-selected paginated LIST, AlreadyExists, resourceVersion-guarded replace,
//! uid-preconditioned delete).

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use serde_json::{Value as Json, json};

use lethe_guest::kube::{DeleteOptions, DeleteOutcome, ObjectList, PatchKind, object_from_json};

use crate::{
    Env, Identity, Kube, KubeError, Level, ListOptions, Object, ObjectRef, Sql, SqlError,
    Statement, Value,
};

/// SQLite in memory behind [`Sql`].
pub struct FakeSql(rusqlite::Connection);

impl FakeSql {
    /// A database with the data-jobs migrations applied.
    pub fn migrated() -> FakeSql {
        let conn = rusqlite::Connection::open_in_memory().expect("sqlite");
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../data-jobs/migrations");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .expect("migrations")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        for f in files {
            conn.execute_batch(&std::fs::read_to_string(f).expect("read"))
                .expect("migrate");
        }
        FakeSql(conn)
    }

    fn run(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        let sql = sql.replace('$', "?");
        let mut stmt = self.0.prepare(&sql).map_err(map_err)?;
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

/// Kubernetes objects in memory, keyed by (kind, namespace, name).
#[derive(Default)]
pub struct FakeKube {
    objects: RefCell<BTreeMap<(String, String, String), Json>>,
    version: Cell<u64>,
    /// Calls made.
    pub calls: Cell<u32>,
    /// When set, every write of a CronJob fails with `unavailable`.
    pub fail_writes: Cell<bool>,
    /// Bearer tokens accepted for the caller identity.
    pub tokens: RefCell<Vec<String>>,
}

fn key(kind: &str, ns: Option<&str>, name: &str) -> (String, String, String) {
    (kind.into(), ns.unwrap_or_default().into(), name.into())
}

fn to_object(v: &Json) -> Object {
    object_from_json(v.clone())
}

impl FakeKube {
    fn next_version(&self) -> String {
        self.version.set(self.version.get() + 1);
        self.version.get().to_string()
    }

    fn write_allowed(&self, kind: &str) -> Result<(), KubeError> {
        if self.fail_writes.get() && kind == "CronJob" {
            return Err(KubeError::Unavailable("injected".into()));
        }
        Ok(())
    }

    /// Every object of `kind`, by name.
    pub fn all(&self, kind: &str) -> Vec<Object> {
        self.objects
            .borrow()
            .iter()
            .filter(|((k, _, _), _)| k == kind)
            .map(|(_, v)| to_object(v))
            .collect()
    }

    /// Removes an object as the server does once its last finalizer is gone.
    pub fn finalize(&self, kind: &str, ns: &str, name: &str) {
        self.objects.borrow_mut().remove(&key(kind, Some(ns), name));
    }

    /// Changes an object's spec as a person with kubectl would.
    pub fn edit(&self, kind: &str, ns: &str, name: &str, edit: impl FnOnce(&mut Json)) {
        let version = self.next_version();
        let mut objects = self.objects.borrow_mut();
        let obj = objects
            .get_mut(&key(kind, Some(ns), name))
            .expect("object to edit");
        edit(obj);
        obj["metadata"]["resourceVersion"] = json!(version);
        let generation = obj["metadata"]["generation"].as_i64().unwrap_or(1);
        obj["metadata"]["generation"] = json!(generation + 1);
    }
}

impl FakeKube {
    /// The caller's token must be one of [`FakeKube::tokens`]; the host's identity always works.
    fn check(&self, id: &Identity) -> Result<(), KubeError> {
        match id {
            Identity::Caller(token) if !self.tokens.borrow().iter().any(|t| t == token) => {
                Err(KubeError::Unauthorized("unknown token".into()))
            }
            _ => Ok(()),
        }
    }
}

impl Kube for FakeKube {
    fn authenticate(&self, id: &Identity) -> Result<(), KubeError> {
        self.check(id)
    }

    fn get(&self, id: &Identity, target: &ObjectRef) -> Result<Object, KubeError> {
        self.calls.set(self.calls.get() + 1);
        self.check(id)?;
        self.objects
            .borrow()
            .get(&key(
                &target.kind,
                target.namespace.as_deref(),
                &target.name,
            ))
            .map(to_object)
            .ok_or_else(|| KubeError::NotFound(target.name.clone()))
    }

    fn list(
        &self,
        id: &Identity,
        _api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        self.calls.set(self.calls.get() + 1);
        self.check(id)?;
        let label_selector = options.label_selector.as_deref().unwrap_or_default();
        let continue_token = options.continue_token.as_deref();
        let namespace = namespace.unwrap_or_default();
        let (lk, lv) = label_selector
            .split_once('=')
            .unwrap_or((label_selector, ""));
        let objects = self.objects.borrow();
        let matching: Vec<&Json> = objects
            .iter()
            .filter(|((k, ns, name), v)| {
                k == kind
                    && ns == namespace
                    && continue_token.is_none_or(|c| name.as_str() > c)
                    && v["metadata"]["labels"][lk].as_str() == Some(lv)
            })
            .map(|(_, v)| v)
            .collect();
        let limit = options
            .limit
            .and_then(|l| usize::try_from(l).ok())
            .unwrap_or(usize::MAX);
        let items: Vec<Object> = matching.iter().take(limit).map(|v| to_object(v)).collect();
        let continue_token = (matching.len() > limit)
            .then(|| items.last().map(|o| o.target.name.clone()))
            .flatten();
        Ok(ObjectList {
            items,
            continue_token,
        })
    }

    fn create(&self, id: &Identity, body: &Json) -> Result<Object, KubeError> {
        self.calls.set(self.calls.get() + 1);
        self.check(id)?;
        let mut v = body.clone();
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        self.write_allowed(&kind)?;
        let ns = v["metadata"]["namespace"].as_str().map(str::to_string);
        let name = v["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if kind == "CronJob"
            && v["spec"]["schedule"]
                .as_str()
                .is_none_or(|s| !crate::model::valid_schedule(s))
        {
            return Err(KubeError::Invalid("spec.schedule: Invalid value".into()));
        }
        let k = key(&kind, ns.as_deref(), &name);
        if self.objects.borrow().contains_key(&k) {
            return Err(KubeError::Conflict(format!("{name} already exists")));
        }
        let version = self.next_version();
        v["metadata"]["uid"] = json!(format!("uid-{version}"));
        v["metadata"]["resourceVersion"] = json!(version);
        v["metadata"]["generation"] = json!(1);
        let obj = to_object(&v);
        self.objects.borrow_mut().insert(k, v);
        Ok(obj)
    }

    fn patch(
        &self,
        _id: &Identity,
        target: &ObjectRef,
        _kind: PatchKind,
        _patch: &Json,
    ) -> Result<Object, KubeError> {
        Err(KubeError::Invalid(format!(
            "the data-jobs logic never patches ({} {})",
            target.kind, target.name
        )))
    }

    fn replace(&self, id: &Identity, target: &ObjectRef, body: &Json) -> Result<Object, KubeError> {
        self.calls.set(self.calls.get() + 1);
        self.check(id)?;
        self.write_allowed(&target.kind)?;
        let mut v = body.clone();
        let k = key(&target.kind, target.namespace.as_deref(), &target.name);
        let objects = self.objects.borrow();
        let current = objects
            .get(&k)
            .ok_or_else(|| KubeError::NotFound(target.name.clone()))?;
        if let Some(rv) = v["metadata"]["resourceVersion"].as_str()
            && Some(rv) != current["metadata"]["resourceVersion"].as_str()
        {
            return Err(KubeError::Conflict("the object has been modified".into()));
        }
        let generation = current["metadata"]["generation"].as_i64().unwrap_or(1)
            + i64::from(current["spec"] != v["spec"]);
        v["metadata"]["uid"] = current["metadata"]["uid"].clone();
        v["metadata"]["generation"] = json!(generation);
        drop(objects);
        v["metadata"]["resourceVersion"] = json!(self.next_version());
        let obj = to_object(&v);
        self.objects.borrow_mut().insert(k, v);
        Ok(obj)
    }

    fn delete(
        &self,
        id: &Identity,
        target: &ObjectRef,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        self.calls.set(self.calls.get() + 1);
        self.check(id)?;
        self.write_allowed(&target.kind)?;
        let k = key(&target.kind, target.namespace.as_deref(), &target.name);
        let mut objects = self.objects.borrow_mut();
        let current = objects
            .get(&k)
            .ok_or_else(|| KubeError::NotFound(target.name.clone()))?;
        if let Some(uid) = &options.precondition_uid
            && Some(uid.as_str()) != current["metadata"]["uid"].as_str()
        {
            return Err(KubeError::Conflict("Precondition failed: UID".into()));
        }
        objects.remove(&k);
        Ok(DeleteOutcome::Deleted)
    }
}

/// A host: shared SQL and cluster, its own clock, configuration and instance id.
pub struct FakeHost<'a> {
    /// The database.
    pub sql: &'a FakeSql,
    /// The cluster.
    pub kube: &'a FakeKube,
    /// Milliseconds since the epoch.
    pub now: Cell<i64>,
    /// Component variables.
    pub config: BTreeMap<String, String>,
    /// The last `(done, total)` progress report.
    pub progress: Cell<(u64, u64)>,
    uuids: Cell<u64>,
}

impl<'a> FakeHost<'a> {
    /// A host named `instance` at time 1 000 000 ms.
    pub fn new(sql: &'a FakeSql, kube: &'a FakeKube, instance: &str) -> FakeHost<'a> {
        let mut config = BTreeMap::new();
        config.insert("lethe_instance_id".to_string(), instance.to_string());
        config.insert("backoff_base_ms".to_string(), "1000".to_string());
        FakeHost {
            sql,
            kube,
            now: Cell::new(1_000_000),
            config,
            progress: Cell::new((0, 0)),
            uuids: Cell::new(u64::from(instance.len() as u32) << 32),
        }
    }

    /// Advances the clock.
    pub fn advance(&self, ms: i64) {
        self.now.set(self.now.get() + ms);
    }
}

impl Sql for FakeHost<'_> {
    fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        self.sql.query(sql, params)
    }
    fn execute(&self, sql: &str, params: &[Value]) -> Result<u64, SqlError> {
        self.sql.execute(sql, params)
    }
    fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError> {
        self.sql.batch(statements)
    }
}

impl Kube for FakeHost<'_> {
    fn authenticate(&self, id: &Identity) -> Result<(), KubeError> {
        self.kube.authenticate(id)
    }
    fn get(&self, id: &Identity, target: &ObjectRef) -> Result<Object, KubeError> {
        self.kube.get(id, target)
    }
    fn list(
        &self,
        id: &Identity,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<ObjectList, KubeError> {
        self.kube.list(id, api_version, kind, namespace, options)
    }
    fn create(&self, id: &Identity, object: &Json) -> Result<Object, KubeError> {
        self.kube.create(id, object)
    }
    fn patch(
        &self,
        id: &Identity,
        target: &ObjectRef,
        kind: PatchKind,
        patch: &Json,
    ) -> Result<Object, KubeError> {
        self.kube.patch(id, target, kind, patch)
    }
    fn replace(
        &self,
        id: &Identity,
        target: &ObjectRef,
        object: &Json,
    ) -> Result<Object, KubeError> {
        self.kube.replace(id, target, object)
    }
    fn delete(
        &self,
        id: &Identity,
        target: &ObjectRef,
        options: &DeleteOptions,
    ) -> Result<DeleteOutcome, KubeError> {
        self.kube.delete(id, target, options)
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
        self.config.get(key).cloned()
    }

    fn log(&self, _level: Level, _message: &str) {}

    /// Counted up from a per-instance start, so that uuids are reproducible.
    fn random_bytes(&self, n: usize) -> Vec<u8> {
        self.uuids.set(self.uuids.get() + 1);
        let bytes = u128::from(self.uuids.get()).to_be_bytes();
        bytes.iter().copied().cycle().take(n).collect()
    }

    fn progress(&self, done: u64, total: u64) {
        self.progress.set((done, total));
    }
}
