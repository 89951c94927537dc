//! The WebAssembly edges: imports adapted to `data_jobs_core`'s traits, and the three exports.

use data_jobs_core::{
    Host, Identity, Kube, KubeError, KubeObject, Level, ObjRef, Page, Sql, SqlError, Statement,
    Value,
};

wit_bindgen::generate!({
    path: "../../wit",
    world: "lethe:platform/data-jobs",
    generate_all,
});

use exports::lethe::platform::reconciler;
use lethe::platform::{config, kube, log, sql};

struct WasmHost;

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
        data_jobs_core::uuid_from_bytes(b)
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
}

struct DataJobs;

impl wasip2::exports::http::incoming_handler::Guest for DataJobs {
    fn handle(
        request: wasip2::http::types::IncomingRequest,
        out: wasip2::http::types::ResponseOutparam,
    ) {
        lethe_guest::wasi_http::serve(request, out, |req| {
            data_jobs_core::api::handle(&WasmHost, &req)
        });
    }
}

fn to_report(r: data_jobs_core::sync::Report) -> reconciler::Report {
    reconciler::Report {
        examined: r.examined,
        created: r.created,
        updated: r.updated,
        deleted: r.deleted,
        failed: r
            .failed
            .into_iter()
            .map(|f| reconciler::ItemFailure {
                item: f.item,
                reason: f.reason,
                parked: f.parked,
            })
            .collect(),
        duration_ms: r.duration_ms,
    }
}

impl reconciler::Guest for DataJobs {
    fn reconcile() -> Result<reconciler::Report, String> {
        match data_jobs_core::sync::tick(&WasmHost)? {
            data_jobs_core::sync::Tick::Ran(report) => Ok(to_report(report)),
            data_jobs_core::sync::Tick::NotLeader { holder } => Err(format!(
                "not the leader: the lease is held by {holder}; no pass was run"
            )),
        }
    }
}

impl Guest for DataJobs {
    fn handle_cron_event(
        _metadata: spin::cron::cron_types::Metadata,
    ) -> Result<(), spin::cron::cron_types::Error> {
        match data_jobs_core::sync::tick(&WasmHost) {
            Ok(data_jobs_core::sync::Tick::Ran(_)) => Ok(()),
            Ok(data_jobs_core::sync::Tick::NotLeader { holder }) => {
                WasmHost.log(
                    Level::Debug,
                    &format!("not the leader (lease held by {holder}); skipping this tick"),
                );
                Ok(())
            }
            Err(e) => Err(spin::cron::cron_types::Error::Other(e)),
        }
    }
}

wasip2::http::proxy::export!(DataJobs);
export!(DataJobs);
