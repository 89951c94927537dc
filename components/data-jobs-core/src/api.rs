//! The HTTP API, with VDK control-service's paths and bodies:
//!
//! | method | path                                                   | answer |
//! |--------|--------------------------------------------------------|--------|
//! | POST   | `/data-jobs/for-team/{team}/jobs`                      | 201 job |
//! | GET    | `/data-jobs/for-team/{team}/jobs`                      | 200 `[job]` |
//! | GET    | `/data-jobs/for-team/{team}/jobs/{job}`                | 200 job |
//! | DELETE | `/data-jobs/for-team/{team}/jobs/{job}`                | 202, `Location: /v3/jobs/data_job.delete~<uid>` |
//! | POST   | `.../jobs/{job}/deployments`                           | 202 deployment (desired is set; PATCH semantics) |
//! | GET    | `.../jobs/{job}/deployments[/production]`              | 200 `[deployment]` / deployment |
//! | DELETE | `.../jobs/{job}/deployments/production`                | 202, `Location: /v3/jobs/deployment.delete~<uid>` |
//! | GET    | `/data-jobs/sync/reports?limit=N`                      | 200 the last N pass reports |
//! | GET    | `/v3/jobs/{guid}` (data-jobs GUIDs only)               | 200 job state |
//!
//! Authentication: every request needs `Authorization: Bearer <token>` (401 10002 without, 401
//! 1000 for a malformed one). The token is a Kubernetes token: it is checked by reading the
//! data-jobs namespace *as the caller*, so the cluster's authentication and RBAC decide (401 1000
//! when the cluster rejects it, 403 10003 when it may not read the namespace). The API never
//! uses the privileged identity; only the reconciler does.
//!
//! A deployment reads back desired and actual state side by side (`desired`, `actual`, `sync`),
//! so the window before the next pass is visible.

use serde_json::{Value as Json, json};

use crate::feed;
use crate::items::RECONCILER;
use crate::model::{self, Resources, Spec};
use crate::status::{self, HttpError, Operation};
use crate::{
    Host, Identity, KubeError, ObjectRef, Request, Response, Settings, SqlError, Statement, Value,
    cf,
};
use lethe_guest::backoff::BackoffTable;

/// Answers one request. Never panics; bad input is a 4xx with the CF error envelope.
pub fn handle(host: &dyn Host, req: &Request) -> Response {
    handle_with(host, &Settings::load(host), req)
}

/// [`handle`] with `settings` read elsewhere (a component hosting this logic beside other
/// logic, under its own variable names).
pub fn handle_with(host: &dyn Host, settings: &Settings, req: &Request) -> Response {
    let path = req.path.trim_end_matches('/');
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let routed = matches!(segments.as_slice(), ["data-jobs", ..] | ["v3", "jobs", _]);
    if !routed {
        return cf::not_found("Unknown route");
    }
    let token = match req.bearer_token() {
        Ok(Some(t)) => t,
        Ok(None) => return cf::not_authenticated(),
        Err(_) => return cf::invalid_auth_token(),
    };
    if let Err(e) = authenticate(host, settings, &token) {
        return e.response();
    }
    let ctx = Ctx {
        host,
        settings,
        base: req.base_url(Some(&settings.base_url)).unwrap_or_default(),
        token: &token,
    };
    let result = match (req.method.as_str(), segments.as_slice()) {
        ("GET", ["v3", "jobs", guid]) => ctx.job(guid),
        ("GET", ["data-jobs", "sync", "reports"]) => ctx.reports(req),
        ("POST", ["data-jobs", "for-team", team, "jobs"]) => ctx.create_job(team, req),
        ("GET", ["data-jobs", "for-team", team, "jobs"]) => ctx.list_jobs(team),
        ("GET", ["data-jobs", "for-team", team, "jobs", job]) => ctx.get_job(team, job),
        ("PUT", ["data-jobs", "for-team", team, "jobs", job]) => {
            ctx.update_job(team, job, &req.body)
        }
        ("DELETE", ["data-jobs", "for-team", team, "jobs", job]) => ctx.delete_job(team, job),
        ("POST", ["data-jobs", "for-team", team, "jobs", job, "deployments"]) => {
            ctx.set_deployment(team, job, &req.body)
        }
        ("GET", ["data-jobs", "for-team", team, "jobs", job, "deployments"]) => {
            ctx.list_deployments(team, job)
        }
        (
            "GET",
            [
                "data-jobs",
                "for-team",
                team,
                "jobs",
                job,
                "deployments",
                id,
            ],
        ) => ctx.get_deployment(team, job, id),
        (
            "PATCH",
            [
                "data-jobs",
                "for-team",
                team,
                "jobs",
                job,
                "deployments",
                id,
            ],
        ) => ctx.patch_deployment(team, job, id, &req.body),
        (
            "DELETE",
            [
                "data-jobs",
                "for-team",
                team,
                "jobs",
                job,
                "deployments",
                id,
            ],
        ) => ctx.delete_deployment(team, job, id),
        // The CF jobs path answers as Cloud Controller's router does: an unknown request.
        (_, ["v3", "jobs", _]) => Ok(cf::error(404, 10000, "CF-NotFound", "Unknown request")),
        (
            _,
            ["data-jobs", "sync", "reports"]
            | ["data-jobs", "for-team", _, "jobs"]
            | ["data-jobs", "for-team", _, "jobs", _]
            | ["data-jobs", "for-team", _, "jobs", _, "deployments"]
            | ["data-jobs", "for-team", _, "jobs", _, "deployments", _],
        ) => Ok(cf::error(
            405,
            10000,
            "CF-MethodNotAllowed",
            format!("{} is not allowed on {path}", req.method),
        )),
        _ => Ok(cf::not_found("Unknown route")),
    };
    result.unwrap_or_else(|e| {
        host.log(crate::Level::Error, &format!("{} {path}: {e}", req.method));
        match e {
            SqlError::Constraint(c) => cf::unprocessable(format!("rejected by constraint {c}")),
            SqlError::Failed(_) => cf::error(
                503,
                10015,
                "CF-ServiceUnavailable",
                "The database is not available; try again",
            ),
        }
    })
}

/// The caller may use the API only if the cluster lets them read the data-jobs namespace; any
/// failure is an error answer, never a pass (SECURITY.md A6).
fn authenticate(host: &dyn Host, settings: &Settings, token: &str) -> Result<(), HttpError> {
    let namespace = ObjectRef::new("v1", "Namespace", None, &settings.namespace);
    match host.get(&Identity::Caller(token.to_string()), &namespace) {
        Ok(_) | Err(KubeError::NotFound(_)) => Ok(()),
        Err(e) => Err(auth_error(&e)),
    }
}

/// The deletion job `guid` as `GET /v3/jobs/{guid}` answers it for the caller with bearer
/// `token`: the caller is authenticated as every request of this API is, then the state is
/// derived ([`status::job_status`]). For a shared job-status component's typed export.
pub fn deletion_job(
    host: &dyn Host,
    settings: &Settings,
    token: &str,
    guid: &str,
) -> Result<status::JobView, HttpError> {
    authenticate(host, settings, token)?;
    status::job_status(host, &Identity::Caller(token.to_string()), settings, guid)
}

fn auth_error(e: &KubeError) -> HttpError {
    status::auth_error(e).unwrap_or_else(|| {
        HttpError::unavailable("The cluster that authenticates callers is not available")
    })
}

struct Ctx<'a> {
    host: &'a dyn Host,
    settings: &'a Settings,
    base: String,
    /// The caller's bearer token.
    token: &'a str,
}

/// A data job row.
struct Job {
    uid: String,
    team: String,
    name: String,
    description: String,
    config: Json,
}

impl Job {
    fn to_json(&self) -> Json {
        json!({
            "job_name": self.name,
            "team": self.team,
            "description": self.description,
            "config": self.config,
            "uid": self.uid,
        })
    }

    fn schedule(&self) -> Option<&str> {
        self.config["schedule"]["schedule_cron"]
            .as_str()
            .filter(|s| !s.is_empty())
    }
}

fn malformed_query() -> Response {
    cf::error(
        400,
        10005,
        "CF-BadQueryParameter",
        "the query string has a malformed percent-encoding",
    )
}

fn job_not_found() -> Response {
    cf::not_found("Data job not found")
}

fn parse_body(body: &[u8]) -> Result<serde_json::Map<String, Json>, Response> {
    match serde_json::from_slice::<Json>(body) {
        Ok(Json::Object(m)) => Ok(m),
        Ok(_) => Err(cf::message_parse_error(
            "The request body must be a JSON object",
        )),
        Err(e) => Err(cf::message_parse_error(format!(
            "The request body is not valid JSON: {e}"
        ))),
    }
}

fn optional_string<'j>(
    m: &'j serde_json::Map<String, Json>,
    key: &str,
) -> Result<Option<&'j str>, Response> {
    match m.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s)),
        Some(_) => Err(cf::unprocessable(format!("{key} must be a string"))),
    }
}

/// The largest job `config` stored, as JSON text.
const MAX_CONFIG_BYTES: usize = 64 * 1024;

/// The fields of a job body that create and update share: the team (which must be the path's
/// when given), the description, and the config. The config is kept whole, so VDK's other
/// settings (contacts, notifications, …) read back as they were sent; its schedule is checked
/// and always present (empty when the job has none).
fn job_fields(m: &serde_json::Map<String, Json>, team: &str) -> Result<(String, Json), Response> {
    if optional_string(m, "team")?.is_some_and(|t| t != team) {
        return Err(cf::unprocessable(
            "team in the body does not match the path",
        ));
    }
    let description = optional_string(m, "description")?.unwrap_or_default();
    if description.len() > 4000 {
        return Err(cf::unprocessable(
            "description is longer than 4000 characters",
        ));
    }
    // PostgreSQL cannot store NUL in text (SQLite can): refused alike on both.
    if description.contains('\0') {
        return Err(cf::unprocessable(
            "description must not contain NUL characters",
        ));
    }
    let mut config = match m.get("config") {
        None | Some(Json::Null) => serde_json::Map::new(),
        Some(Json::Object(c)) => c.clone(),
        Some(_) => return Err(cf::unprocessable("config must be an object")),
    };
    let schedule = match config.get("schedule") {
        None | Some(Json::Null) => None,
        Some(Json::Object(s)) => match s.get("schedule_cron") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s.clone()),
            Some(_) => {
                return Err(cf::unprocessable(
                    "config.schedule.schedule_cron must be a string",
                ));
            }
        },
        Some(_) => return Err(cf::unprocessable("config.schedule must be an object")),
    };
    if let Some(s) = &schedule
        && let Some(why) = model::schedule_error(s)
    {
        return Err(cf::unprocessable(format!(
            "config.schedule.schedule_cron `{s}` is not a valid cron schedule: {why}"
        )));
    }
    let mut schedule_object = match config.remove("schedule") {
        Some(Json::Object(o)) => o,
        _ => serde_json::Map::new(),
    };
    schedule_object.insert(
        "schedule_cron".into(),
        Json::String(schedule.unwrap_or_default()),
    );
    config.insert("schedule".into(), Json::Object(schedule_object));
    let config = Json::Object(config);
    if config.to_string().len() > MAX_CONFIG_BYTES {
        return Err(cf::unprocessable(format!(
            "config is longer than {MAX_CONFIG_BYTES} bytes as JSON"
        )));
    }
    Ok((description.to_string(), config))
}

type Answer = Result<Response, SqlError>;

impl Ctx<'_> {
    fn find_job(&self, team: &str, name: &str) -> Result<Option<Job>, SqlError> {
        if !model::valid_team(team) || !model::valid_job_name(name) {
            return Ok(None);
        }
        let rows = self.host.query(
            "SELECT uid, team, name, description, config FROM data_job WHERE team = $1 AND name = $2",
            &[team.into(), name.into()],
        )?;
        Ok(rows.first().map(|r| job_from_row(r)))
    }

    fn job(&self, guid: &str) -> Answer {
        let caller = Identity::Caller(self.token.to_string());
        Ok(
            match status::job_status(self.host, &caller, self.settings, guid) {
                Ok(job) => Response::json(200, &job.to_json(&self.base)),
                Err(e) => e.response(),
            },
        )
    }

    fn reports(&self, req: &Request) -> Answer {
        let Ok(limits) = req.query_values("limit") else {
            return Ok(malformed_query());
        };
        let limit = match limits.first() {
            None => 10,
            Some(l) => match l.parse::<i64>() {
                Ok(n) if (1..=100).contains(&n) => n,
                _ => {
                    return Ok(cf::error(
                        400,
                        10005,
                        "CF-BadQueryParameter",
                        "limit must be 1-100",
                    ));
                }
            },
        };
        let rows = self.host.query(
            "SELECT report FROM data_job_sync_report ORDER BY started_at DESC LIMIT $1",
            &[limit.into()],
        )?;
        let reports: Vec<Json> = rows
            .iter()
            .filter_map(|r| serde_json::from_str(r.first()?.text()).ok())
            .collect();
        Ok(Response::json(200, &reports))
    }

    fn create_job(&self, team: &str, req: &Request) -> Answer {
        if !model::valid_team(team) {
            return Ok(cf::unprocessable(
                "team names are 1-45 characters of a-z, 0-9 and '-', starting and ending with a letter or digit",
            ));
        }
        let m = match parse_body(&req.body) {
            Ok(m) => m,
            Err(r) => return Ok(r),
        };
        let name = match optional_string(&m, "job_name") {
            Ok(Some(n)) => n,
            Ok(None) => return Ok(cf::unprocessable("job_name is required")),
            Err(r) => return Ok(r),
        };
        // VDK's create takes the name in the query too, and it must be the body's.
        match req.query_values("name") {
            Ok(names) if names.iter().all(|n| n == name) => {}
            Ok(_) => {
                return Ok(cf::unprocessable(
                    "job_name must be the same as the name in the request URL query parameter",
                ));
            }
            Err(_) => return Ok(malformed_query()),
        }
        if !model::valid_job_name(name) {
            return Ok(cf::unprocessable(
                "job_name must be 1-45 characters of a-z, 0-9 and '-', starting with a letter",
            ));
        }
        let (description, config) = match job_fields(&m, team) {
            Ok(fields) => fields,
            Err(r) => return Ok(r),
        };
        let uid = self.host.new_uuid();
        let inserted = self.host.execute(
            "INSERT INTO data_job (uid, team, name, description, config, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                uid.clone().into(),
                team.into(),
                name.into(),
                description.clone().into(),
                config.to_string().into(),
                self.host.now_ms().into(),
            ],
        );
        match inserted {
            Ok(_) => {}
            Err(SqlError::Constraint(_)) => {
                return Ok(cf::error(
                    409,
                    10016,
                    "CF-UniquenessError",
                    format!("Data job {team}/{name} already exists"),
                ));
            }
            Err(e) => return Err(e),
        }
        let job = Job {
            uid,
            team: team.into(),
            name: name.into(),
            description,
            config,
        };
        Ok(Response::json(201, &job.to_json()).with_header(
            "location",
            format!("{}/data-jobs/for-team/{team}/jobs/{name}", self.base),
        ))
    }

    fn list_jobs(&self, team: &str) -> Answer {
        if !model::valid_team(team) {
            return Ok(cf::not_found("Team not found"));
        }
        let rows = self.host.query(
            "SELECT uid, team, name, description, config FROM data_job WHERE team = $1 ORDER BY name",
            &[team.into()],
        )?;
        let jobs: Vec<Json> = rows.iter().map(|r| job_from_row(r).to_json()).collect();
        Ok(Response::json(200, &jobs))
    }

    /// VDK's job update: the description and config are replaced by the body's. The job's
    /// name (and team) in the body must be the path's. A deployment keeps its own schedule.
    fn update_job(&self, team: &str, name: &str, body: &[u8]) -> Answer {
        let Some(job) = self.find_job(team, name)? else {
            return Ok(job_not_found());
        };
        let m = match parse_body(body) {
            Ok(m) => m,
            Err(r) => return Ok(r),
        };
        match optional_string(&m, "job_name") {
            Ok(Some(n)) if n != name => {
                return Ok(cf::unprocessable(
                    "job_name in the body does not match the path",
                ));
            }
            Ok(_) => {}
            Err(r) => return Ok(r),
        }
        let (description, config) = match job_fields(&m, team) {
            Ok(fields) => fields,
            Err(r) => return Ok(r),
        };
        self.host.execute(
            "UPDATE data_job SET description = $2, config = $3 WHERE uid = $1",
            &[
                job.uid.clone().into(),
                description.clone().into(),
                config.to_string().into(),
            ],
        )?;
        let job = Job {
            description,
            config,
            ..job
        };
        Ok(Response::json(200, &job.to_json()))
    }

    fn get_job(&self, team: &str, name: &str) -> Answer {
        Ok(match self.find_job(team, name)? {
            Some(job) => Response::json(200, &job.to_json()),
            None => job_not_found(),
        })
    }

    /// Deletes the job and its desired deployment in one transaction and records the deletion
    /// request; the actual row stays, and the reconciler removes the CronJob and then it.
    fn delete_job(&self, team: &str, name: &str) -> Answer {
        let Some(job) = self.find_job(team, name)? else {
            return Ok(job_not_found());
        };
        let guid = Operation::DataJobDelete.guid(&job.uid);
        self.request_deletion(Operation::DataJobDelete, &guid, &job, team, name)
    }

    /// Deletes the job's desired deployment (and for [`Operation::DataJobDelete`] the job) in
    /// one transaction that records deletion job `guid` (again: a repeat restarts it) and the
    /// change, then answers `202` with the job's location.
    fn request_deletion(
        &self,
        operation: Operation,
        guid: &str,
        job: &Job,
        team: &str,
        name: &str,
    ) -> Answer {
        let of_job = |sql: &'static str| -> Statement { (sql, vec![job.uid.clone().into()]) };
        let mut batch = vec![of_job(
            "DELETE FROM desired_data_job_deployment WHERE job_uid = $1",
        )];
        if operation == Operation::DataJobDelete {
            batch.push(of_job("DELETE FROM data_job WHERE uid = $1"));
        }
        batch.push((
            "INSERT INTO data_job_deletion (guid, operation, job_uid, team, job_name, requested_at, completed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, NULL) \
             ON CONFLICT (guid) DO UPDATE SET requested_at = excluded.requested_at, completed_at = NULL",
            vec![
                guid.into(),
                operation.as_str().into(),
                job.uid.clone().into(),
                team.into(),
                name.into(),
                self.host.now_ms().into(),
            ],
        ));
        batch.extend(feed::record(&job.uid));
        self.host.batch(&batch)?;
        Ok(self.accepted(guid))
    }

    fn accepted(&self, guid: &str) -> Response {
        let location = format!("{}/v3/jobs/{guid}", self.base);
        Response::json(202, &json!({ "job_guid": guid, "location": location }))
            .with_header("location", location)
    }

    /// Sets the desired deployment: creates it (job_version required) or patches the fields
    /// given. Answers 202: the reconciler applies it on its next pass.
    fn set_deployment(&self, team: &str, name: &str, body: &[u8]) -> Answer {
        let Some(job) = self.find_job(team, name)? else {
            return Ok(job_not_found());
        };
        let current = self.desired(&job.uid)?;
        self.write_deployment(team, name, &job, current, body)
    }

    /// Writes the desired deployment of `job` from `body` over `current`, the desired one it
    /// has (the fields `body` leaves out keep their values).
    fn write_deployment(
        &self,
        team: &str,
        name: &str,
        job: &Job,
        current: Option<Deployment>,
        body: &[u8],
    ) -> Answer {
        let m = match parse_body(body) {
            Ok(m) => m,
            Err(r) => return Ok(r),
        };
        let job_version = match optional_string(&m, "job_version") {
            Ok(Some(v)) => v.to_string(),
            Ok(None) => match &current {
                Some(d) => d.job_version.clone(),
                None => {
                    return Ok(cf::unprocessable(
                        "job_version is required for a new deployment",
                    ));
                }
            },
            Err(r) => return Ok(r),
        };
        if job_version.is_empty()
            || job_version.len() > 128
            || !job_version
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
        {
            return Ok(cf::unprocessable(
                "job_version must be 1-128 characters of letters, digits, '.', '_' and '-'",
            ));
        }
        let image = match optional_string(&m, "image") {
            Ok(Some(i)) => i.to_string(),
            Ok(None) => match &current {
                Some(d) if m.get("job_version").is_none() => d.spec.image.clone(),
                _ => format!(
                    "{}/{team}/{name}:{job_version}",
                    self.settings.image_registry
                ),
            },
            Err(r) => return Ok(r),
        };
        if !model::valid_image(&image) {
            return Ok(cf::unprocessable(format!(
                "image `{image}` is not a valid image reference"
            )));
        }
        let enabled = match m.get("enabled") {
            None | Some(Json::Null) => current.as_ref().is_none_or(|d| d.spec.enabled),
            Some(Json::Bool(b)) => *b,
            Some(_) => return Ok(cf::unprocessable("enabled must be a boolean")),
        };
        let schedule = match m.get("schedule") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s.clone()),
            Some(Json::Object(o)) => match o.get("schedule_cron") {
                Some(Json::String(s)) => Some(s.clone()),
                _ => return Ok(cf::unprocessable("schedule.schedule_cron must be a string")),
            },
            Some(_) => {
                return Ok(cf::unprocessable(
                    "schedule must be a string or {\"schedule_cron\": ...}",
                ));
            }
        };
        let schedule = match schedule
            .or_else(|| current.as_ref().map(|d| d.spec.schedule.clone()))
            .or_else(|| job.schedule().map(str::to_string))
        {
            Some(s) => s,
            None => {
                return Ok(cf::unprocessable(
                    "a schedule is required: give one here or in the job's config.schedule.schedule_cron",
                ));
            }
        };
        if let Some(why) = model::schedule_error(&schedule) {
            return Ok(cf::unprocessable(format!(
                "schedule `{schedule}` is not a valid cron schedule: {why}"
            )));
        }
        // As in VDK, an update merges resources field by field into the current ones.
        let current_resources = current
            .as_ref()
            .map(|d| d.spec.resources.clone())
            .unwrap_or_default();
        let resources = match m.get("resources") {
            None | Some(Json::Null) => current_resources,
            Some(r) => match current_resources.updated_by_vdk(r) {
                Ok(r) => r,
                Err(msg) => return Ok(cf::unprocessable(msg)),
            },
        };
        let spec = Spec {
            image,
            schedule,
            enabled,
            resources,
        };
        if current.is_none()
            && let Some(in_the_way) = self.foreign_cronjob(team, name)
        {
            return Ok(cf::unprocessable(in_the_way));
        }
        let hash = spec.hash();
        let changed = current.as_ref().is_none_or(|d| d.hash != hash);
        let mut statements = vec![(
            "INSERT INTO desired_data_job_deployment \
             (job_uid, team, job_name, job_version, image, schedule, enabled, resources, spec_hash, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (job_uid) DO UPDATE SET job_version = excluded.job_version, image = excluded.image, \
             schedule = excluded.schedule, enabled = excluded.enabled, resources = excluded.resources, \
             spec_hash = excluded.spec_hash, updated_at = excluded.updated_at",
            vec![
                job.uid.clone().into(),
                team.into(),
                name.into(),
                job_version.clone().into(),
                spec.image.clone().into(),
                spec.schedule.clone().into(),
                spec.enabled.into(),
                spec.resources.to_vdk().to_string().into(),
                hash.clone().into(),
                self.host.now_ms().into(),
            ],
        )];
        if changed {
            // A new spec gets a fresh start: no backoff, no parking.
            statements.push(BackoffTable::new(self.host, RECONCILER).forget_statement(&job.uid));
        }
        statements.extend(feed::record(&job.uid));
        self.host.batch(&statements)?;
        let view = self.deployment_view(job)?;
        Ok(Response::json(202, &view.unwrap_or(Json::Null)))
    }

    /// Why the CronJob name a new deployment of `team`/`name` would take is not free: a CronJob
    /// of that name exists that carries none of lethe's marks. Refusing it here, with a 422, is
    /// better than a sync that can only report the clash (SECURITY.md P5). One marked for another
    /// job (a job deleted and re-created under the same name) is lethe's own, and the sync frees
    /// the name before it creates. Read as the caller; when the read fails the sync still refuses
    /// to touch the object, so this check is only an early answer and may pass.
    fn foreign_cronjob(&self, team: &str, name: &str) -> Option<String> {
        let cronjob = model::cronjob_name(team, name);
        let target = ObjectRef::new(
            "batch/v1",
            "CronJob",
            Some(&self.settings.namespace),
            &cronjob,
        );
        let existing = self
            .host
            .get(&Identity::Caller(self.token.to_string()), &target)
            .ok()?;
        let lethes = existing.label(model::JOB_UID_LABEL).is_some()
            || existing.label(model::MANAGED_BY_LABEL) == Some(model::MANAGED_BY);
        (!lethes).then(|| {
            format!(
                "CronJob {}/{cronjob}, which this deployment would be, exists and is not lethe's; \
                 rename the job or remove that CronJob",
                self.settings.namespace
            )
        })
    }

    fn desired(&self, uid: &str) -> Result<Option<Deployment>, SqlError> {
        let rows = self.host.query(
            "SELECT job_version, image, schedule, enabled, resources, spec_hash, updated_at \
             FROM desired_data_job_deployment WHERE job_uid = $1",
            &[uid.into()],
        )?;
        Ok(rows.first().map(|r| deployment_from_row(r, None)))
    }

    fn actual(&self, uid: &str) -> Result<Option<Deployment>, SqlError> {
        let rows = self.host.query(
            "SELECT job_version, image, schedule, enabled, resources, spec_hash, applied_at, cronjob_name, cronjob_uid, resource_version \
             FROM actual_data_job_deployment WHERE job_uid = $1 AND cronjob_uid <> ''",
            &[uid.into()],
        )?;
        Ok(rows.first().map(|r| {
            deployment_from_row(
                r,
                Some(json!({
                    "name": r.get(7).map(Value::text).unwrap_or_default(),
                    "uid": r.get(8).map(Value::text).unwrap_or_default(),
                    "resource_version": r.get(9).map(Value::text).unwrap_or_default(),
                    "namespace": self.settings.namespace,
                })),
            )
        }))
    }

    /// The deployment as the API shows it: VDK's fields from the desired state, and both states
    /// side by side. `None` when neither exists.
    fn deployment_view(&self, job: &Job) -> Result<Option<Json>, SqlError> {
        let desired = self.desired(&job.uid)?;
        let actual = self.actual(&job.uid)?;
        if desired.is_none() && actual.is_none() {
            return Ok(None);
        }
        let failures = BackoffTable::new(self.host, RECONCILER).of(&job.uid)?;
        let sync_error = failures.map(|f| {
            json!({
                "attempts": f.attempts,
                "next_attempt_at": crate::time::rfc3339(f.next_attempt_ms),
                "parked": f.parked_on.is_some(),
                "last_error": f.last_error,
            })
        });
        let state = match (&desired, &actual) {
            (Some(d), Some(a)) if d.hash == a.hash => "in_sync",
            (Some(_), _) => "pending",
            (None, _) => "deleting",
        };
        let top = desired.as_ref().or(actual.as_ref());
        let mut view = json!({
            "id": "production",
            "job_version": top.map(|d| d.job_version.clone()),
            "image": top.map(|d| d.spec.image.clone()),
            "enabled": top.map(|d| d.spec.enabled),
            "schedule": { "schedule_cron": top.map(|d| d.spec.schedule.clone()) },
            "resources": top.map(|d| d.spec.resources.to_vdk()),
            "mode": "release",
            "last_deployed_date": actual.as_ref().map(|a| crate::time::rfc3339(a.at)),
            "desired": desired.as_ref().map(Deployment::to_json),
            "actual": actual.as_ref().map(Deployment::to_json),
            "sync": { "state": state, "error": sync_error },
        });
        if desired.is_none() {
            // Deleted but not yet removed from Kubernetes: say so instead of hiding the window.
            view["deletion"] = json!({
                "job_guid": Operation::DeploymentDelete.guid(&job.uid),
            });
        }
        Ok(Some(view))
    }

    fn list_deployments(&self, team: &str, name: &str) -> Answer {
        let Some(job) = self.find_job(team, name)? else {
            return Ok(job_not_found());
        };
        let view = self.deployment_view(&job)?;
        Ok(Response::json(200, &view.into_iter().collect::<Vec<_>>()))
    }

    fn get_deployment(&self, team: &str, name: &str, id: &str) -> Answer {
        let Some(job) = self.find_job(team, name)? else {
            return Ok(job_not_found());
        };
        if id != "production" {
            return Ok(cf::not_found("Deployment not found"));
        }
        Ok(match self.deployment_view(&job)? {
            Some(v) => Response::json(200, &v),
            None => cf::not_found("Deployment not found"),
        })
    }

    /// VDK's PATCH of a deployment: the fields given change, the others stay. The deployment
    /// must exist.
    fn patch_deployment(&self, team: &str, name: &str, id: &str, body: &[u8]) -> Answer {
        let Some(job) = self.find_job(team, name)? else {
            return Ok(job_not_found());
        };
        let current = match self.desired(&job.uid)? {
            Some(d) if id == "production" => d,
            _ => return Ok(cf::not_found("Deployment not found")),
        };
        self.write_deployment(team, name, &job, Some(current), body)
    }

    fn delete_deployment(&self, team: &str, name: &str, id: &str) -> Answer {
        let Some(job) = self.find_job(team, name)? else {
            return Ok(job_not_found());
        };
        if id != "production" {
            return Ok(cf::not_found("Deployment not found"));
        }
        let guid = Operation::DeploymentDelete.guid(&job.uid);
        if self.desired(&job.uid)?.is_none() {
            // A repeated request while the CronJob is still being removed gets the same job, so
            // that a client retrying a lost answer does not see a failure.
            let removing = self.host.query(
                "SELECT 1 FROM actual_data_job_deployment WHERE job_uid = $1",
                &[job.uid.clone().into()],
            )?;
            if removing.is_empty() {
                return Ok(cf::not_found("Deployment not found"));
            }
            self.host.execute(
                "INSERT INTO data_job_deletion (guid, operation, job_uid, team, job_name, requested_at, completed_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, NULL) ON CONFLICT (guid) DO NOTHING",
                &[
                    guid.clone().into(),
                    Operation::DeploymentDelete.as_str().into(),
                    job.uid.clone().into(),
                    team.into(),
                    name.into(),
                    self.host.now_ms().into(),
                ],
            )?;
            return Ok(self.accepted(&guid));
        }
        self.request_deletion(Operation::DeploymentDelete, &guid, &job, team, name)
    }
}

fn job_from_row(r: &[Value]) -> Job {
    let col = |i: usize| r.get(i).map(Value::text).unwrap_or_default().to_string();
    Job {
        uid: col(0),
        team: col(1),
        name: col(2),
        description: col(3),
        config: serde_json::from_str(&col(4)).unwrap_or(Json::Null),
    }
}

/// A desired or actual deployment row.
struct Deployment {
    job_version: String,
    spec: Spec,
    hash: String,
    at: i64,
    cronjob: Option<Json>,
}

impl Deployment {
    fn to_json(&self) -> Json {
        let mut v = json!({
            "job_version": self.job_version,
            "image": self.spec.image,
            "schedule": { "schedule_cron": self.spec.schedule },
            "enabled": self.spec.enabled,
            "resources": self.spec.resources.to_vdk(),
            "spec_hash": self.hash,
        });
        match &self.cronjob {
            Some(c) => {
                v["applied_at"] = json!(crate::time::rfc3339(self.at));
                v["cronjob"] = c.clone();
            }
            None => v["updated_at"] = json!(crate::time::rfc3339(self.at)),
        }
        v
    }
}

fn deployment_from_row(r: &[Value], cronjob: Option<Json>) -> Deployment {
    let text = |i: usize| r.get(i).map(Value::text).unwrap_or_default().to_string();
    let resources = serde_json::from_str::<Json>(&text(4))
        .ok()
        .and_then(|v| Resources::from_vdk(&v).ok())
        .unwrap_or_default();
    Deployment {
        job_version: text(0),
        spec: Spec {
            image: text(1),
            schedule: text(2),
            enabled: r.get(3).is_some_and(Value::as_bool),
            resources,
        },
        hash: text(5),
        at: r.get(6).and_then(Value::int).unwrap_or(0),
        cronjob,
    }
}
