//! The WebAssembly adapter: the host's `lethe:platform` imports behind [`crate::Host`].
//!
//! It uses `lethe_guest`'s bindings of the capability interfaces, so any component whose
//! `wit_bindgen::generate!` maps its imports onto `lethe_guest::host::bindings` (with `with:`) can
//! call the data-jobs logic, for example a shared job-status component answering
//! `deployment.delete~` and `data_job.delete~` GUIDs with [`crate::api::handle`].
//! Unlike `lethe_guest::host::Host`, it keeps list items as JSON text and parses only what a
//! decision needs, which matters for a LIST of 100 000 CronJobs.

use lethe_guest::host::bindings::lethe::platform::{config, kube, log, sql};

use crate::{
    Host, Identity, Kube, KubeError, KubeObject, Level, ObjRef, Page, Sql, SqlError, Statement,
    Value,
};

/// The host's capabilities behind [`crate::Host`], through `lethe_guest`'s shared bindings (a
/// component maps its own `generate!` imports onto them with `with:`). Stateless: a Kubernetes
/// client is opened per [`Host::kube`] call.
pub struct WasmHost;

fn to_value(v: &Value) -> sql::Value {
    match v {
        Value::Null => sql::Value::Null,
        Value::Bool(b) => sql::Value::Boolean(*b),
        Value::Int(i) => sql::Value::Integer(*i),
        Value::Text(t) => sql::Value::Text(t.clone()),
    }
}

fn from_value(v: sql::Value) -> Value {
    match v {
        sql::Value::Null | sql::Value::Blob(_) => Value::Null,
        sql::Value::Boolean(b) => Value::Bool(b),
        sql::Value::Integer(i) => Value::Int(i),
        sql::Value::Real(f) => Value::Text(f.to_string()),
        sql::Value::Text(t) => Value::Text(t),
    }
}

fn sql_error(e: sql::Error) -> SqlError {
    match e {
        sql::Error::ConstraintViolation(c) => SqlError::Constraint(c),
        other => SqlError::Failed(format!("{other:?}")),
    }
}

impl Sql for WasmHost {
    fn query(&self, statement: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        let params: Vec<sql::Value> = params.iter().map(to_value).collect();
        let rows = sql::query(statement, &params).map_err(sql_error)?;
        Ok(rows
            .rows
            .into_iter()
            .map(|r| r.into_iter().map(from_value).collect())
            .collect())
    }

    fn execute(&self, statement: &str, params: &[Value]) -> Result<u64, SqlError> {
        let params: Vec<sql::Value> = params.iter().map(to_value).collect();
        sql::execute(statement, &params).map_err(sql_error)
    }

    fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError> {
        let statements: Vec<sql::Statement> = statements
            .iter()
            .map(|(s, p)| sql::Statement {
                sql: (*s).to_string(),
                params: p.iter().map(to_value).collect(),
            })
            .collect();
        sql::batch(&statements).map_err(sql_error)
    }
}

struct WasmKube(kube::Client);

fn kube_error(e: kube::Error) -> KubeError {
    match e {
        kube::Error::NotFound(s) => KubeError::NotFound(s.message),
        kube::Error::Conflict(s) => KubeError::Conflict(s.message),
        kube::Error::Invalid(s) => KubeError::Invalid(s.message),
        kube::Error::Unauthorized(s) => KubeError::Unauthorized(s.message),
        kube::Error::Forbidden(s) => KubeError::Forbidden(s.message),
        kube::Error::Gone(s) => KubeError::Unavailable(format!("gone: {}", s.message)),
        kube::Error::Unavailable(m) => KubeError::Unavailable(m),
        kube::Error::Timeout(m) => KubeError::Unavailable(format!("timeout: {m}")),
    }
}

fn from_object(o: kube::Object) -> KubeObject {
    KubeObject {
        name: o.target.name,
        uid: o.metadata.uid,
        resource_version: o.metadata.resource_version,
        generation: o.metadata.generation,
        labels: o.metadata.labels,
        annotations: o.metadata.annotations,
        json: o.json,
    }
}

fn to_ref(r: ObjRef<'_>) -> kube::ObjectRef {
    kube::ObjectRef {
        api_version: r.api_version.to_string(),
        kind: r.kind.to_string(),
        namespace: r.namespace.map(str::to_string),
        name: r.name.to_string(),
    }
}

impl Kube for WasmKube {
    fn get(&self, target: ObjRef<'_>) -> Result<KubeObject, KubeError> {
        self.0
            .get(&to_ref(target))
            .map(from_object)
            .map_err(kube_error)
    }

    fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: &str,
        label_selector: &str,
        limit: u32,
        continue_token: Option<&str>,
    ) -> Result<Page, KubeError> {
        let options = kube::ListOptions {
            label_selector: Some(label_selector.to_string()),
            field_selector: None,
            limit: Some(limit),
            continue_token: continue_token.map(str::to_string),
        };
        let list = self
            .0
            .list(api_version, kind, Some(namespace), &options)
            .map_err(kube_error)?;
        Ok(Page {
            items: list.items.into_iter().map(from_object).collect(),
            continue_token: list.continue_token,
        })
    }

    fn create(&self, json: &str) -> Result<KubeObject, KubeError> {
        self.0.create(json).map(from_object).map_err(kube_error)
    }

    fn replace(&self, target: ObjRef<'_>, json: &str) -> Result<KubeObject, KubeError> {
        self.0
            .replace(&to_ref(target), json)
            .map(from_object)
            .map_err(kube_error)
    }

    fn delete(&self, target: ObjRef<'_>, precondition_uid: Option<&str>) -> Result<(), KubeError> {
        let options = kube::DeleteOptions {
            propagation_policy: Some(kube::PropagationPolicy::Background),
            precondition_uid: precondition_uid.map(str::to_string),
            precondition_resource_version: None,
        };
        self.0
            .delete(&to_ref(target), &options)
            .map(|_| ())
            .map_err(kube_error)
    }
}

impl Host for WasmHost {
    fn kube(&self, identity: Identity<'_>) -> Result<Box<dyn Kube + '_>, KubeError> {
        let identity = match identity {
            Identity::Caller(t) => kube::Identity::Caller(t.to_string()),
            Identity::Privileged => kube::Identity::Privileged,
        };
        kube::Client::open(&identity)
            .map(|c| Box::new(WasmKube(c)) as Box<dyn Kube>)
            .map_err(kube_error)
    }

    fn config(&self, key: &str) -> Option<String> {
        config::get(key).ok()
    }

    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }

    fn new_uuid(&self) -> String {
        let bytes = wasip2::random::random::get_random_bytes(16);
        let mut b = [0u8; 16];
        for (slot, v) in b.iter_mut().zip(bytes) {
            *slot = v;
        }
        crate::uuid_from_bytes(b)
    }

    fn log(&self, level: Level, message: &str) {
        let level = match level {
            Level::Debug => log::Level::Debug,
            Level::Info => log::Level::Info,
            Level::Warn => log::Level::Warn,
            Level::Error => log::Level::Error,
        };
        log::write(level, message);
    }

    fn progress(&self, done: u64, total: u64) {
        log::progress(done, total);
    }
}
