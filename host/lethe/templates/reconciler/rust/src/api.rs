//! The HTTP API, below `/__NAME__`. Every request needs `Authorization: Bearer <token>`, a
//! Kubernetes token (401 10002 without one, 401 1000 for one the cluster rejects).
//!
//! | method | path | answer |
//! |--------|------|--------|
//! | PUT    | `objects/<namespace>/<name>` | 201 (new) or 200: the desired object. The body is its content, e.g. `{"data": {...}}` or `{"spec": {...}}` |
//! | GET    | `objects/<namespace>/<name>` | 200 the desired object |
//! | GET    | `objects/<namespace>` | 200 `{"resources": [...]}` |
//! | DELETE | `objects/<namespace>/<name>` | 202, `Location: .../__NAME__/jobs/__JOB_TYPE__.delete~<namespace>~<name>`; the same job again on a repeated DELETE |
//! | GET    | `jobs/<guid>` | 200 the job |
//!
//! Who may do what is the cluster's decision: a PUT needs the caller's right to `create` (or, for
//! an object already desired, `update`) the `__KIND__` in that namespace, a DELETE to `delete`
//! it, a read to `get` or `list` it, each asked of the cluster's authorizer as the caller
//! (403 10003 when refused). A job is read as the caller, so one who may not read the object
//! learns nothing about it (404).
//!
//! A job's state: the object still exists, its deletion asked for less than
//! `deletion_timeout_seconds` ago (default 120): `PROCESSING`; longer: `FAILED` (10008), naming
//! what it waits for; the object is gone (an object of its name without its row's mark is not
//! it): `COMPLETE`. Only a DELETE through this API makes a job:
//! any other GUID is 404. The job stays readable for `job_retention_seconds` after it completes.

use lethe_guest::backoff::BackoffTable;
use lethe_guest::cf::{CfError, HttpError, JobState};
use lethe_guest::env::{Env, format_rfc3339};
use lethe_guest::feed::Feed;
use lethe_guest::kube::{Access, Identity, Kube, KubeError, is_dns_label, is_dns_subdomain, may};
use lethe_guest::sql::{Sql, SqlError, Statement};
use lethe_guest::{Capabilities, Request, Response};
use serde_json::{Map, Value as Json, json};

use crate::{
    DESIRED_COLUMNS, Desired, FEED, FEED_COUNTER, JOB_TYPE, KIND, RECONCILER, UID_LABEL,
    desired_rows, key, target,
};

/// How long a deletion may take before its job is `FAILED`, when the configuration says nothing.
pub const DEFAULT_DELETION_TIMEOUT_S: i64 = 120;

/// The fields of an object that are not its content: lethe sets the first three, the cluster
/// the last.
const NOT_CONTENT: [&str; 4] = ["apiVersion", "kind", "metadata", "status"];

/// Answers one request. Never panics; bad input is a 4xx with the CF error envelope.
pub fn handle(host: &dyn Capabilities, req: &Request) -> Response {
    let info = req.path_info();
    let segments: Vec<&str> = info.trim_matches('/').split('/').collect();
    let routed = matches!(
        segments.as_slice(),
        ["objects", _] | ["objects", _, _] | ["jobs", _]
    );
    if !routed {
        return HttpError::unknown_request().into_response();
    }
    let caller = match req.bearer_token() {
        Ok(Some(token)) => Identity::Caller(token),
        Ok(None) => return HttpError::not_authenticated().into_response(),
        Err(_) => return HttpError::invalid_token().into_response(),
    };
    let answer = match (req.method.as_str(), segments.as_slice()) {
        ("GET", ["objects", namespace]) => list(host, &caller, namespace),
        ("GET", ["objects", namespace, name]) => read(host, &caller, namespace, name),
        ("PUT", ["objects", namespace, name]) => put(host, &caller, namespace, name, &req.body),
        ("DELETE", ["objects", namespace, name]) => delete(host, &caller, req, namespace, name),
        ("GET", ["jobs", guid]) => job(host, host, host, guid, &caller).map(|job| {
            let href = format!("{}/__NAME__/jobs/{guid}", base_url(host, req));
            Response::json(200, &job.to_json(&href))
        }),
        _ => Err(HttpError::method_not_allowed()),
    };
    answer.unwrap_or_else(HttpError::into_response)
}

/// A database failure, as the caller should see it.
fn from_sql(e: SqlError) -> HttpError {
    match e {
        SqlError::Constraint(c) => HttpError::unprocessable(format!("refused by {c}")),
        SqlError::Failed(_) => HttpError::unavailable("The database is not available"),
    }
}

/// Asks the cluster whether `caller` may `verb` the kind in `namespace`: `Ok` if so, else the
/// error to answer (403 when refused; 401 for a token it rejects; 503 when it cannot say).
fn authorize(
    kube: &dyn Kube,
    caller: &Identity,
    verb: &str,
    namespace: &str,
) -> Result<(), HttpError> {
    let access = Access {
        verb,
        group: crate::GROUP,
        resource: crate::RESOURCE,
        namespace: Some(namespace),
    };
    match may(kube, caller, &access) {
        Ok(true) => Ok(()),
        Ok(false) => Err(HttpError::not_authorized()),
        Err(KubeError::Unauthorized(_)) => Err(HttpError::invalid_token()),
        Err(e) => Err(HttpError::unavailable(format!(
            "the cluster could not say: {e}"
        ))),
    }
}

/// The desired row of `namespace`/`name`, if any.
fn row(sql: &dyn Sql, namespace: &str, name: &str) -> Result<Option<Desired>, HttpError> {
    let keys = [key(namespace, name)];
    Ok(desired_rows(sql, Some(&keys)).map_err(from_sql)?.pop())
}

fn rendered(d: &Desired) -> Json {
    json!({
        "namespace": d.namespace,
        "name": d.name,
        "uid": d.uid,
        "content": d.content,
        "state": if d.deleting_since.is_some() { "deleting" } else { "wanted" },
    })
}

fn not_found() -> HttpError {
    HttpError::not_found(format!("{KIND} not found"))
}

fn list(
    host: &dyn Capabilities,
    caller: &Identity,
    namespace: &str,
) -> Result<Response, HttpError> {
    if !is_dns_label(namespace) {
        return Err(HttpError::not_found("Namespace not found"));
    }
    authorize(host, caller, "list", namespace)?;
    let rows = host
        .query(
            &format!(
                "SELECT {DESIRED_COLUMNS} FROM __SNAKE___desired WHERE namespace = $1 ORDER BY name"
            ),
            &[namespace.into()],
        )
        .map_err(from_sql)?;
    let resources: Vec<Json> = rows
        .iter()
        .filter_map(|r| Desired::from_row(r))
        .map(|d| rendered(&d))
        .collect();
    Ok(Response::json(200, &json!({ "resources": resources })))
}

fn read(
    host: &dyn Capabilities,
    caller: &Identity,
    namespace: &str,
    name: &str,
) -> Result<Response, HttpError> {
    if !is_dns_label(namespace) || !is_dns_subdomain(name) {
        return Err(not_found());
    }
    authorize(host, caller, "get", namespace)?;
    let desired = row(host, namespace, name)?.ok_or_else(not_found)?;
    Ok(Response::json(200, &rendered(&desired)))
}

/// The content a PUT body states: a JSON object without the fields lethe or the cluster sets.
fn content(body: &[u8]) -> Result<Map<String, Json>, HttpError> {
    let parsed: Json = serde_json::from_slice(body)
        .map_err(|e| HttpError::parse_error(format!("The body is not JSON: {e}")))?;
    let Json::Object(content) = parsed else {
        return Err(HttpError::unprocessable(format!(
            "The body must be a JSON object: the {KIND}'s fields, e.g. {{\"spec\": {{...}}}}"
        )));
    };
    if let Some(field) = NOT_CONTENT.iter().find(|f| content.contains_key(**f)) {
        return Err(HttpError::unprocessable(format!(
            "The body must not set `{field}`: __NAME__ sets it"
        )));
    }
    if content.is_empty() {
        return Err(HttpError::unprocessable(format!(
            "The body sets no field of the {KIND}"
        )));
    }
    Ok(content)
}

/// The statements every write of desired state ends with: the change is recorded for the
/// reconciler, and the object's failures are forgotten (its desired state is new).
fn recorded(sql: &dyn Sql, key: &str) -> [Statement; 3] {
    let [bump, stamp] = Feed::record(&FEED, FEED_COUNTER, key);
    [
        bump,
        stamp,
        BackoffTable::new(sql, RECONCILER).forget_statement(key),
    ]
}

fn put(
    host: &dyn Capabilities,
    caller: &Identity,
    namespace: &str,
    name: &str,
    body: &[u8],
) -> Result<Response, HttpError> {
    if !is_dns_label(namespace) {
        return Err(HttpError::unprocessable(
            "A namespace is a DNS-1123 label: at most 63 lower-case letters, digits and '-'",
        ));
    }
    if !is_dns_subdomain(name) {
        return Err(HttpError::unprocessable(
            "A name is a DNS-1123 subdomain: at most 253 lower-case letters, digits, '-' and '.'",
        ));
    }
    let content = content(body)?;
    let existing = row(host, namespace, name)?;
    let replacing = existing
        .as_ref()
        .is_some_and(|d| d.deleting_since.is_none());
    authorize(
        host,
        caller,
        if replacing { "update" } else { "create" },
        namespace,
    )?;
    if existing
        .as_ref()
        .is_some_and(|d| d.deleting_since.is_some())
    {
        // A new object of this name may be asked for once the old one is gone (its job is
        // COMPLETE), never while it is still being deleted.
        match host.get(caller, &target(namespace, name)) {
            Err(KubeError::NotFound(_)) => {}
            Ok(_) => {
                return Err(HttpError::unprocessable(format!(
                    "{KIND} {namespace}/{name} is being deleted: PUT it again once its job is COMPLETE"
                )));
            }
            Err(e) => return Err(HttpError::from_kube(e, "Namespace not found")),
        }
    }
    let desired = Desired {
        namespace: namespace.into(),
        name: name.into(),
        uid: match &existing {
            Some(d) if replacing => d.uid.clone(),
            _ => host.new_uuid(),
        },
        content,
        deleting_since: None,
    };
    let content_text = Json::Object(desired.content.clone()).to_string();
    // Each write is guarded by the row it was decided on, so a PUT never undoes a DELETE (or
    // another PUT) that landed meanwhile: that is a conflict, told to the caller.
    let write: Statement = match &existing {
        None => (
            "INSERT INTO __SNAKE___desired (namespace, name, uid, content, deleting_since) \
             VALUES ($1, $2, $3, $4, NULL) ON CONFLICT (namespace, name) DO NOTHING",
            vec![
                namespace.into(),
                name.into(),
                desired.uid.clone().into(),
                content_text.into(),
            ],
        ),
        Some(old) => (
            if replacing {
                "UPDATE __SNAKE___desired SET uid = $3, content = $4 \
                 WHERE namespace = $1 AND name = $2 AND uid = $5 AND deleting_since IS NULL"
            } else {
                "UPDATE __SNAKE___desired SET uid = $3, content = $4, deleting_since = NULL \
                 WHERE namespace = $1 AND name = $2 AND uid = $5 AND deleting_since IS NOT NULL"
            },
            vec![
                namespace.into(),
                name.into(),
                desired.uid.clone().into(),
                content_text.into(),
                old.uid.clone().into(),
            ],
        ),
    };
    let mut statements = vec![write];
    statements.extend(recorded(host, &desired.key()));
    let written = host.batch(&statements).map_err(from_sql)?;
    if written.first() != Some(&1) {
        return Err(changed_meanwhile(namespace, name));
    }
    Ok(Response::json(
        if replacing { 200 } else { 201 },
        &rendered(&desired),
    ))
}

/// A write whose row changed between its read and its write.
fn changed_meanwhile(namespace: &str, name: &str) -> HttpError {
    HttpError::unprocessable(format!(
        "{KIND} {namespace}/{name} was changed by another request meanwhile: read it and try again"
    ))
}

fn delete(
    host: &dyn Capabilities,
    caller: &Identity,
    req: &Request,
    namespace: &str,
    name: &str,
) -> Result<Response, HttpError> {
    if !is_dns_label(namespace) || !is_dns_subdomain(name) {
        return Err(not_found());
    }
    authorize(host, caller, "delete", namespace)?;
    let desired = row(host, namespace, name)?.ok_or_else(not_found)?;
    if desired.deleting_since.is_none() {
        // Guarded by the uid read, so a PUT that replaced the row meanwhile is not deleted.
        let mut statements: Vec<Statement> = vec![(
            "UPDATE __SNAKE___desired SET deleting_since = $1 \
             WHERE namespace = $2 AND name = $3 AND uid = $4 AND deleting_since IS NULL",
            vec![
                host.now_ms().into(),
                namespace.into(),
                name.into(),
                desired.uid.clone().into(),
            ],
        )];
        statements.extend(recorded(host, &desired.key()));
        let written = host.batch(&statements).map_err(from_sql)?;
        // Not marked: another DELETE did it first (the same job), or a PUT replaced the row.
        if written.first() != Some(&1)
            && row(host, namespace, name)?.is_none_or(|d| d.deleting_since.is_none())
        {
            return Err(changed_meanwhile(namespace, name));
        }
    }
    let guid = format!("{JOB_TYPE}.delete~{namespace}~{name}");
    let location = format!("{}/__NAME__/jobs/{guid}", base_url(host, req));
    Ok(Response::empty(202).with_header("location", location))
}

/// One job, as `GET jobs/<guid>` renders it.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The GUID it was asked for.
    pub guid: String,
    /// The derived state.
    pub state: JobState,
    /// Why a `FAILED` job failed.
    pub errors: Vec<CfError>,
    /// RFC 3339: when the deletion was asked for.
    pub created_at: String,
    /// RFC 3339: when the state was derived.
    pub updated_at: String,
}

impl Job {
    /// The JSON body, in Cloud Controller's shape.
    pub fn to_json(&self, self_href: &str) -> Json {
        json!({
            "guid": self.guid,
            "operation": format!("{JOB_TYPE}.delete"),
            "state": self.state.as_str(),
            "errors": self.errors.iter().map(|e| json!({
                "code": e.code, "title": e.title, "detail": e.detail,
            })).collect::<Vec<_>>(),
            "warnings": [],
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "links": { "self": { "href": self_href } },
        })
    }
}

/// The job `guid`, as `caller` may see it: derived from the desired row (a DELETE made it) and
/// from the live object, read as the caller.
pub fn job(
    kube: &dyn Kube,
    sql: &dyn Sql,
    env: &dyn Env,
    guid: &str,
    caller: &Identity,
) -> Result<Job, HttpError> {
    let rest = guid
        .strip_prefix(JOB_TYPE)
        .and_then(|r| r.strip_prefix(".delete~"))
        .ok_or_else(HttpError::job_not_found)?;
    let Some((namespace, name)) = rest.split_once('~') else {
        return Err(HttpError::job_not_found());
    };
    if !is_dns_label(namespace) || !is_dns_subdomain(name) {
        return Err(HttpError::job_not_found());
    }
    let now = env.now_ms();
    // Read the cluster first: a row the reconciler forgets after this read is still a COMPLETE
    // job, while one read first could be forgotten before a read that finds the object gone.
    let live = match kube.get(caller, &target(namespace, name)) {
        Ok(live) => Some(live),
        Err(KubeError::NotFound(_)) => None,
        Err(KubeError::Unauthorized(_)) => return Err(HttpError::invalid_token()),
        Err(KubeError::Unavailable(m) | KubeError::Timeout(m)) => {
            return Err(HttpError::unavailable(m));
        }
        // Forbidden, or a name the API server refuses: nothing to tell.
        Err(_) => return Err(HttpError::job_not_found()),
    };
    let row = row(sql, namespace, name)?.ok_or_else(HttpError::job_not_found)?;
    let since = row.deleting_since.ok_or_else(HttpError::job_not_found)?;
    // An object of that name without this row's mark is not the one being deleted (someone
    // else's, made once the name was free): this row's object is gone.
    let live = live.filter(|l| l.label(UID_LABEL) == Some(row.uid.as_str()));
    let job = |state, errors| Job {
        guid: guid.to_string(),
        state,
        errors,
        created_at: format_rfc3339(since),
        updated_at: format_rfc3339(now),
    };
    let Some(live) = live else {
        return Ok(job(JobState::Complete, Vec::new()));
    };
    let timeout_ms =
        lethe_guest::env::seconds_ms(env, "deletion_timeout_seconds", DEFAULT_DELETION_TIMEOUT_S)
            .unwrap_or(DEFAULT_DELETION_TIMEOUT_S * 1000);
    if now - since < timeout_ms {
        return Ok(job(JobState::Processing, Vec::new()));
    }
    let waiting = if live.metadata.finalizers.is_empty() {
        "the reconciler".to_string()
    } else {
        live.metadata.finalizers.join(", ")
    };
    let why = BackoffTable::new(sql, RECONCILER)
        .of(&key(namespace, name))
        .ok()
        .flatten()
        .map(|f| format!(" (last error: {})", f.last_error))
        .unwrap_or_default();
    Ok(job(
        JobState::Failed,
        vec![CfError {
            code: 10008,
            title: "CF-UnprocessableEntity".into(),
            detail: format!(
                "{KIND} {namespace}/{name} is still there {} s after its deletion was asked for, waiting for: {waiting}{why}",
                timeout_ms / 1000
            ),
        }],
    ))
}

/// `scheme://authority` of links: the `external_url` variable when set, else the request's.
fn base_url(env: &dyn Env, req: &Request) -> String {
    req.base_url(env.config("external_url").as_deref())
        .unwrap_or_else(|| "http://localhost".to_string())
}
