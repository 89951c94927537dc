//! The host's capabilities (`lethe:platform` imports) behind the [`Kube`], [`Sql`] and [`Env`]
//! traits.
//! Component crates map their own `wit_bindgen::generate!` imports onto [`bindings`] with `with`;
//! the reconciler worlds, which import the same four interfaces, do it through
//! [`reconciler_bindings!`](crate::reconciler_bindings).

use std::cell::RefCell;
use std::collections::HashMap;

use serde_json::Value as Json;

use crate::env::{Env, Level};
use crate::kube::{
    Change, ChangeBatch, ChangeType, Collection, DeleteOptions, Deletion, Identity, Kube,
    KubeError, ListOptions, OWN_RIGHT_MISSING, Object, ObjectList, ObjectRef, Patch, Propagation,
    Result, Since, narrowed,
};
use crate::sql::{Sql, SqlError, Statement, Value};

/// Guest bindings of the capability interfaces, generated from `wit/` (whose doc comments they
/// carry; the package and namespace modules wit-bindgen adds have none).
#[allow(missing_docs)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "lethe:platform/host-capabilities",
        generate_all,
    });
}

/// Generates a reconciler world's bindings (`wit_bindgen::generate!` over the workspace's `wit/`,
/// from a component crate in `components/`), with the four capability imports every reconciler
/// world has (`kube`, `sql`, `log`, `config`) mapped onto [`bindings`], so that [`Host`] serves
/// them, and the `spin:cron` types generated.
#[macro_export]
macro_rules! reconciler_bindings {
    ($world:literal) => {
        wit_bindgen::generate!({
            path: "../../wit",
            world: $world,
            with: {
                "lethe:platform/kube@0.1.0": lethe_guest::host::bindings::lethe::platform::kube,
                "lethe:platform/sql@0.1.0": lethe_guest::host::bindings::lethe::platform::sql,
                "lethe:platform/log@0.1.0": lethe_guest::host::bindings::lethe::platform::log,
                "lethe:platform/config@0.1.0": lethe_guest::host::bindings::lethe::platform::config,
                "spin:cron/cron-types@3.0.0": generate,
            },
        });
    };
}

use bindings::lethe::platform::{config, kube as wit, log, sql};

/// The host, as seen from a component. Kubernetes clients are opened lazily, once per identity.
#[derive(Default)]
pub struct Host {
    clients: RefCell<HashMap<Identity, std::rc::Rc<wit::Client>>>,
}

impl Host {
    /// The error `e` of a call made as `id`. A privileged call the cluster refused is lethe's own
    /// missing right, never the caller's doing: logged with the API server's words (which name
    /// the identity, the resource and the namespace), and told as
    /// [`KubeError::Unavailable`]([`OWN_RIGHT_MISSING`]), which names none of them.
    fn error_as(&self, id: &Identity, e: wit::Error) -> KubeError {
        match (id, e) {
            (Identity::Privileged, wit::Error::Forbidden(status)) => {
                self.log(
                    Level::Error,
                    &format!(
                        "lethe's own identity was refused a call this needs; grant it: {}",
                        status.message
                    ),
                );
                KubeError::Unavailable(OWN_RIGHT_MISSING.into())
            }
            (_, e) => from_error(e),
        }
    }

    /// A patch of `target`, or of its `subresource`.
    fn patch_at(
        &self,
        id: &Identity,
        target: &ObjectRef,
        patch: &Patch,
        subresource: Option<&str>,
    ) -> Result<Object> {
        let (kind, body) = match patch {
            Patch::Merge(body) => (wit::PatchKind::Merge, body),
            Patch::Json(body) => (wit::PatchKind::Json, body),
        };
        let patched = self
            .client(id)?
            .patch(&to_ref(target), kind, &body.to_string(), subresource)
            .map_err(|e| self.error_as(id, e))?;
        from_object(patched)
    }

    fn client(&self, id: &Identity) -> Result<std::rc::Rc<wit::Client>, KubeError> {
        if let Some(c) = self.clients.borrow().get(id) {
            return Ok(c.clone());
        }
        let identity = match id {
            Identity::Caller(token) => wit::Identity::Caller(token.clone()),
            Identity::Privileged => wit::Identity::Privileged,
        };
        let client =
            std::rc::Rc::new(wit::Client::open(&identity).map_err(|e| self.error_as(id, e))?);
        self.clients.borrow_mut().insert(id.clone(), client.clone());
        Ok(client)
    }
}

fn to_ref(r: &ObjectRef) -> wit::ObjectRef {
    wit::ObjectRef {
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
    }
}

/// The host's object: its metadata as the host parsed it, its JSON left unparsed until read.
fn from_object(o: wit::Object) -> Result<Object, KubeError> {
    Ok(Object {
        target: ObjectRef {
            api_version: o.target.api_version,
            kind: o.target.kind,
            namespace: o.target.namespace,
            name: o.target.name,
        },
        metadata: lethe_kube_model::convert_metadata!(o.metadata => crate::kube::Metadata),
        text: std::cell::OnceCell::from(o.json),
        parsed: std::cell::OnceCell::new(),
    })
}

fn from_error(e: wit::Error) -> KubeError {
    match e {
        wit::Error::NotFound(s) => KubeError::NotFound(s.message),
        wit::Error::Conflict(s) => KubeError::Conflict(s.message),
        wit::Error::Forbidden(s) => KubeError::Forbidden(s.message),
        wit::Error::Unauthorized(s) => KubeError::Unauthorized(s.message),
        wit::Error::Invalid(s) => KubeError::Invalid(s.message),
        wit::Error::Gone(s) => KubeError::Gone(s.message),
        wit::Error::Unavailable(m) => KubeError::Unavailable(m),
        wit::Error::Timeout(m) => KubeError::Timeout(m),
    }
}

impl Kube for Host {
    fn authenticate(&self, id: &Identity) -> Result<()> {
        self.client(id)?
            .authenticate()
            .map_err(|e| self.error_as(id, e))
    }

    fn get(&self, id: &Identity, target: &ObjectRef) -> Result<Object> {
        from_object(
            self.client(id)?
                .get(&to_ref(target))
                .map_err(|e| self.error_as(id, e))?,
        )
    }

    fn list(&self, id: &Identity, of: &Collection, page: &ListOptions) -> Result<ObjectList> {
        let options =
            lethe_kube_model::convert_list_options!(narrowed(of, page) => wit::ListOptions);
        let page = self
            .client(id)?
            .list(&of.api_version, &of.kind, of.namespace.as_deref(), &options)
            .map_err(|e| self.error_as(id, e))?;
        Ok(ObjectList {
            items: page
                .items
                .into_iter()
                .map(from_object)
                .collect::<Result<_>>()?,
            continue_token: page.continue_token,
        })
    }

    fn create(&self, id: &Identity, object: &Json) -> Result<Object> {
        from_object(
            self.client(id)?
                .create(&object.to_string())
                .map_err(|e| self.error_as(id, e))?,
        )
    }

    fn patch(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object> {
        self.patch_at(id, target, patch, None)
    }

    fn patch_status(&self, id: &Identity, target: &ObjectRef, patch: &Patch) -> Result<Object> {
        self.patch_at(id, target, patch, Some("status"))
    }

    fn replace(&self, id: &Identity, target: &ObjectRef, object: &Json) -> Result<Object> {
        let replaced = self
            .client(id)?
            .replace(&to_ref(target), &object.to_string())
            .map_err(|e| self.error_as(id, e))?;
        from_object(replaced)
    }

    fn delete(&self, id: &Identity, target: &ObjectRef, how: &DeleteOptions) -> Result<Deletion> {
        let options = wit::DeleteOptions {
            propagation_policy: how.propagation.map(|p| match p {
                Propagation::Background => wit::PropagationPolicy::Background,
                Propagation::Foreground => wit::PropagationPolicy::Foreground,
                Propagation::Orphan => wit::PropagationPolicy::Orphan,
            }),
            precondition_uid: how.precondition_uid.clone(),
            precondition_resource_version: None,
        };
        match self
            .client(id)?
            .delete(&to_ref(target), &options)
            .map_err(|e| self.error_as(id, e))?
        {
            wit::DeleteOutcome::Deleted => Ok(Deletion::Done),
            wit::DeleteOutcome::Pending(o) => Ok(Deletion::Pending(Box::new(from_object(o)?))),
        }
    }

    fn changes(&self, id: &Identity, of: &Collection, since: Since<'_>) -> Result<ChangeBatch> {
        let collection = lethe_kube_model::convert_collection!(of.clone() => wit::Collection);
        let batch = self
            .client(id)?
            .changes(&collection, since.bookmark, since.max)
            .map_err(|e| self.error_as(id, e))?;
        Ok(ChangeBatch {
            changes: batch
                .changes
                .into_iter()
                .map(|c| {
                    Ok(Change {
                        change_type: match c.type_ {
                            wit::ChangeType::Added => ChangeType::Added,
                            wit::ChangeType::Modified => ChangeType::Modified,
                            wit::ChangeType::Deleted => ChangeType::Deleted,
                        },
                        object: from_object(c.object)?,
                    })
                })
                .collect::<Result<_>>()?,
            bookmark: batch.bookmark,
            more: batch.more,
        })
    }
}

impl Env for Host {
    fn now_ms(&self) -> i64 {
        let now = wasip2::clocks::wall_clock::now();
        i64::try_from(now.seconds).unwrap_or(i64::MAX / 1000) * 1000
            + i64::from(now.nanoseconds / 1_000_000)
    }

    fn sleep_ms(&self, ms: u64) {
        wasip2::clocks::monotonic_clock::subscribe_duration(ms.saturating_mul(1_000_000)).block();
    }

    fn config(&self, key: &str) -> Option<String> {
        config::get(key).ok()
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

    fn random_bytes(&self, n: usize) -> Vec<u8> {
        wasip2::random::random::get_random_bytes(n as u64)
    }

    fn progress(&self, done: u64, total: u64) {
        log::progress(done, total);
    }
}

fn to_sql(v: &Value) -> sql::Value {
    match v {
        Value::Null => sql::Value::Null,
        Value::Bool(b) => sql::Value::Boolean(*b),
        Value::Int(i) => sql::Value::Integer(*i),
        Value::Text(t) => sql::Value::Text(t.clone()),
    }
}

fn from_sql(v: sql::Value) -> Value {
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

impl Sql for Host {
    fn query(&self, statement: &str, params: &[Value]) -> Result<Vec<Vec<Value>>, SqlError> {
        let params: Vec<sql::Value> = params.iter().map(to_sql).collect();
        let rows = sql::query(statement, &params).map_err(sql_error)?;
        Ok(rows
            .rows
            .into_iter()
            .map(|r| r.into_iter().map(from_sql).collect())
            .collect())
    }

    fn execute(&self, statement: &str, params: &[Value]) -> Result<u64, SqlError> {
        let params: Vec<sql::Value> = params.iter().map(to_sql).collect();
        sql::execute(statement, &params).map_err(sql_error)
    }

    fn batch(&self, statements: &[Statement]) -> Result<Vec<u64>, SqlError> {
        let statements: Vec<sql::Statement> = statements
            .iter()
            .map(|(s, p)| sql::Statement {
                sql: (*s).to_string(),
                params: p.iter().map(to_sql).collect(),
            })
            .collect();
        sql::batch(&statements).map_err(sql_error)
    }
}
