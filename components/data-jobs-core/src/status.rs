//! Deletion jobs: `GET /v3/jobs/{guid}` for `deployment.delete~<job uid>` and
//! `data_job.delete~<job uid>`.
//!
//! The API records each deletion request (`data_job_deletion`: guid, operation, job uid,
//! requested_at) in the same transaction that removes the desired rows, so the first poll after
//! the 202 always finds it. The state is then derived from what is still there, never from
//! permission data:
//!
//! | actual row or labelled CronJob left | age ≤ timeout | state      |
//! |-------------------------------------|---------------|------------|
//! | no                                  | any           | COMPLETE   |
//! | yes                                 | yes           | PROCESSING |
//! | yes                                 | no            | FAILED (10008 CF-UnprocessableEntity) |
//!
//! A FAILED job turns COMPLETE once the reconciler has removed both. A `deployment.delete` whose
//! deployment was set again afterwards is COMPLETE with a warning (the deletion was superseded).
//!
//! A shared job-status component calls [`job_status`] directly, with its own host and the
//! caller's identity; [`is_data_job_guid`] tells it which GUIDs to delegate.

use lethe_guest::cf::CfError;
use lethe_guest::kube::Collection;
use serde_json::{Value as Json, json};

use crate::model::{JOB_UID_LABEL, valid_uuid};
use crate::{Host, Identity, KubeError, ListOptions, Settings, SqlError, Value, time};

/// The operations this module answers for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `deployment.delete`: a data job's deployment was deleted.
    DeploymentDelete,
    /// `data_job.delete`: a whole data job was deleted.
    DataJobDelete,
}

impl Operation {
    /// `deployment.delete` or `data_job.delete`.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::DeploymentDelete => "deployment.delete",
            Operation::DataJobDelete => "data_job.delete",
        }
    }

    /// The job GUID for the data job with `job_uid`.
    pub fn guid(self, job_uid: &str) -> String {
        format!("{}~{job_uid}", self.as_str())
    }
}

/// Parses `deployment.delete~<uuid>` or `data_job.delete~<uuid>`, anchored at both ends; the uuid
/// must be lower-case canonical. Anything else is `None` (and answered 404 10010).
pub fn parse_guid(guid: &str) -> Option<(Operation, &str)> {
    let (op, uid) = guid.split_once('~')?;
    let op = match op {
        "deployment.delete" => Operation::DeploymentDelete,
        "data_job.delete" => Operation::DataJobDelete,
        _ => return None,
    };
    valid_uuid(uid).then_some((op, uid))
}

/// Whether `guid` names a data-jobs operation (its prefix), so a shared job-status component
/// knows to delegate it to [`job_status`] even when it is malformed.
pub fn is_data_job_guid(guid: &str) -> bool {
    guid.starts_with("deployment.delete~") || guid.starts_with("data_job.delete~")
}

pub use lethe_guest::cf::{HttpError, JobState};

/// A deletion job, with the fields of the WIT `job` record.
#[derive(Debug, Clone, PartialEq)]
pub struct JobView {
    /// The GUID as asked.
    pub guid: String,
    /// `deployment.delete` or `data_job.delete`.
    pub operation: String,
    /// The derived state.
    pub state: JobState,
    /// Why a FAILED job failed.
    pub errors: Vec<CfError>,
    /// Why a COMPLETE job did less than asked (a deployment set again after its deletion).
    pub warnings: Vec<String>,
    /// RFC 3339: when the deletion was requested.
    pub created_at: String,
    /// RFC 3339: when it completed, else when it was requested.
    pub updated_at: String,
}

impl JobView {
    /// The Cloud Controller JSON, with `links.self` under `base_url`.
    pub fn to_json(&self, base_url: &str) -> Json {
        json!({
            "guid": self.guid,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "operation": self.operation,
            "state": self.state.as_str(),
            "errors": self.errors,
            "warnings": self.warnings.iter().map(|w| json!({"detail": w})).collect::<Vec<_>>(),
            "links": { "self": { "href": format!("{base_url}/v3/jobs/{}", self.guid) } },
        })
    }
}

/// The answer to a token the cluster rejected (401 1000) or an identity it refused (403 10003);
/// `None` for other failures.
pub fn auth_error(e: &KubeError) -> Option<HttpError> {
    match e {
        KubeError::Unauthorized(_) => Some(HttpError::invalid_token()),
        KubeError::Forbidden(_) => Some(HttpError::not_authorized()),
        _ => None,
    }
}

fn sql_unavailable(e: SqlError) -> HttpError {
    HttpError::unavailable(format!("the database could not be read: {e}"))
}

/// Derives the state of deletion job `guid`, at the host's time.
///
/// - The CronJobs labelled with the job's uid in the settings' namespace are LISTed as `caller`
///   (one call, `limit=1`), so the caller's identity is checked by the cluster.
/// - The settings' `deletion_timeout_ms` is the age after which an unfinished deletion is FAILED.
///
/// Errors: malformed or unknown GUIDs → 404 10010; the caller's token rejected → 401 1000 /
/// 403 10003; database or cluster unreachable → 503 10015.
pub fn job_status(
    host: &dyn Host,
    caller: &Identity,
    settings: &Settings,
    guid: &str,
) -> Result<JobView, HttpError> {
    let (sql, namespace) = (host, settings.namespace.as_str());
    let (timeout_ms, now_ms) = (settings.deletion_timeout_ms, host.now_ms());
    let Some((operation, uid)) = parse_guid(guid) else {
        return Err(HttpError::job_not_found());
    };
    let rows = sql
        .query(
            "SELECT requested_at, completed_at FROM data_job_deletion WHERE guid = $1",
            &[Value::from(guid)],
        )
        .map_err(sql_unavailable)?;
    let Some(row) = rows.first() else {
        return Err(HttpError::job_not_found());
    };
    let requested_at = row.first().and_then(Value::int).unwrap_or(now_ms);
    let completed_at = row.get(1).and_then(Value::int);

    // A deployment set again after its deletion was requested supersedes the deletion: its
    // CronJob is updated in place, never removed, so waiting for it to go would only end FAILED.
    if operation == Operation::DeploymentDelete {
        let redeployed = sql
            .query(
                "SELECT updated_at FROM desired_data_job_deployment WHERE job_uid = $1",
                &[Value::from(uid)],
            )
            .map_err(sql_unavailable)?
            .first()
            .and_then(|r| r.first().and_then(Value::int))
            .filter(|updated| *updated >= requested_at);
        if let Some(updated) = redeployed {
            return Ok(JobView {
                guid: guid.to_string(),
                operation: operation.as_str().to_string(),
                state: JobState::Complete,
                errors: Vec::new(),
                warnings: vec![
                    "The deployment was set again after this deletion was requested; it was not removed.".into(),
                ],
                created_at: time::rfc3339(requested_at),
                updated_at: time::rfc3339(updated),
            });
        }
    }

    let actual_left = !sql
        .query(
            "SELECT 1 FROM actual_data_job_deployment WHERE job_uid = $1",
            &[Value::from(uid)],
        )
        .map_err(sql_unavailable)?
        .is_empty();
    let cronjob_left = actual_left || {
        let selector = format!("{JOB_UID_LABEL}={uid}");
        let options = ListOptions {
            label_selector: Some(selector),
            limit: Some(1),
            ..Default::default()
        };
        match host.list(
            caller,
            &Collection::new("batch/v1", "CronJob", Some(namespace)),
            &options,
        ) {
            Ok(page) => !page.items.is_empty(),
            // No namespace yet: nothing was ever deployed there.
            Err(KubeError::NotFound(_)) => false,
            Err(e) => {
                return Err(auth_error(&e).unwrap_or_else(|| {
                    HttpError::unavailable(format!("the cluster could not be read: {e}"))
                }));
            }
        }
    };
    let remaining = actual_left || cronjob_left;
    let state = match (remaining, now_ms - requested_at > timeout_ms) {
        (false, _) => JobState::Complete,
        (true, false) => JobState::Processing,
        (true, true) => JobState::Failed,
    };
    let errors = if state == JobState::Failed {
        vec![CfError {
            code: 10008,
            title: "CF-UnprocessableEntity".into(),
            detail: format!(
                "{} did not finish within {} seconds: the data job's CronJob or deployment record still exists",
                operation.as_str(),
                timeout_ms / 1000
            ),
        }]
    } else {
        Vec::new()
    };
    let updated = match state {
        JobState::Complete => completed_at.unwrap_or(requested_at),
        _ => requested_at,
    };
    Ok(JobView {
        guid: guid.to_string(),
        operation: operation.as_str().to_string(),
        state,
        errors,
        warnings: Vec::new(),
        created_at: time::rfc3339(requested_at),
        updated_at: time::rfc3339(updated),
    })
}
