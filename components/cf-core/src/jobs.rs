//! Jobs: a job's state is derived from the live resource, never stored. What a job of each verb
//! derives it from is its type's [`JobRule`] (configuration): deletions, below; creates and
//! updates that a controller carries out ([`JobRule::State`]); jobs done when asked
//! ([`JobRule::Complete`]); and Korifi's `space.delete_unapped_routes` ([`JobRule::NoUnmapped`]).
//!
//! The contract of a deletion's job, case by case (the resource is read privileged, from its own
//! record):
//!
//! | resource                                   | state                                    |
//! |--------------------------------------------|------------------------------------------|
//! | gone                                       | `COMPLETE`                               |
//! | deletionTimestamp younger than the timeout | `PROCESSING`                             |
//! | deletionTimestamp older than the timeout   | `FAILED` (10008 `CF-UnprocessableEntity`)|
//! | being deleted, blocked by a foreign object | `FAILED` at once, the error naming it    |
//! | exists, not being deleted (re-read until `job_reread_ms` has passed), caller can't see | `COMPLETE` (nothing of theirs is left) |
//! | exists, not being deleted (re-read until `job_reread_ms` has passed), caller can see    | 404 |
//!
//! Guarantees: the first poll after a `202` never says 404 because of a stale read (the DELETE
//! handler waits until the deletionTimestamp is visible, and this re-reads too); and completion
//! is decided from the resource record itself, so role bindings deleted by the cascade can never
//! make a job `COMPLETE` early: a record that shows no deletion is re-read for everyone before
//! the caller's visibility is asked, so a read lagging less than `job_reread_ms` behind the
//! deletion cannot either. (Against a kube-apiserver, lethe's GETs carry no resourceVersion and
//! are served from etcd, never lagging.) The re-read is one GET at the end of the window, so a
//! poll of a resource that is not being deleted costs the cluster two GETs of it and the
//! visibility check, not a GET every few milliseconds.

use serde_json::{Value as Json, json};

use lethe_guest::cf::CfError;
use lethe_guest::env::{Env, format_rfc3339, parse_rfc3339_ms};
use lethe_guest::kube::{Collection, Identity, Kube, KubeError, ListOptions};

use crate::FINALIZER;
use crate::access;
use crate::config::{self, JobRule, ResourceType, Settings};
use crate::context::RequestContext;
use crate::errors::HttpError;
use crate::ownership;

/// A parsed job GUID `<type>.<verb>~<resource guid>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobGuid {
    /// e.g. `org`.
    pub resource_type: String,
    /// e.g. `delete`.
    pub verb: String,
    /// The resource's guid.
    pub guid: String,
}

impl JobGuid {
    /// `<type>.<verb>`.
    pub fn operation(&self) -> String {
        format!("{}.{}", self.resource_type, self.verb)
    }

    /// The GUID as text.
    pub fn render(&self) -> String {
        format!("{}.{}~{}", self.resource_type, self.verb, self.guid)
    }
}

/// Parses a job GUID with an anchored pattern: the whole string must be
/// `[a-z][a-z_]*` `.` `[a-z][a-z_]*` `~` `<DNS-1123 label>`; anything else is `None`.
pub fn parse_job_guid(s: &str) -> Option<JobGuid> {
    let (operation, guid) = s.split_once('~')?;
    let (resource_type, verb) = operation.split_once('.')?;
    if !config::valid_type_name(resource_type)
        || !config::valid_verb(verb)
        || !access::valid_guid(guid)
    {
        return None;
    }
    Some(JobGuid {
        resource_type: resource_type.into(),
        verb: verb.into(),
        guid: guid.into(),
    })
}

pub use lethe_guest::cf::JobState;

/// A job as `GET /v3/jobs/{guid}` renders it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The GUID.
    pub guid: JobGuid,
    /// The derived state.
    pub state: JobState,
    /// Errors of a failed job.
    pub errors: Vec<CfError>,
    /// What the job waits on, as Cloud Controller's `warnings` (`{"detail": …}` each): others'
    /// finalizers once lethe's cleanup is done.
    pub warnings: Vec<String>,
    /// The resource while it exists, as Cloud Controller links it: `(name, path)`, e.g.
    /// `("organization", "/v3/organizations/<guid>")`.
    pub resource: Option<(String, String)>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

impl Job {
    /// Cloud Controller's job JSON, with `links.self`, and the resource's link while it exists,
    /// under `base_url`.
    pub fn to_json(&self, base_url: &str) -> serde_json::Value {
        let guid = self.guid.render();
        let mut links = json!({ "self": { "href": format!("{base_url}/v3/jobs/{guid}") } });
        if let Some((name, path)) = &self.resource {
            links[name] = json!({ "href": format!("{base_url}{path}") });
        }
        json!({
            "guid": guid,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "operation": self.guid.operation(),
            "state": self.state.as_str(),
            "errors": self.errors,
            "warnings": self.warnings.iter().map(|w| json!({ "detail": w })).collect::<Vec<_>>(),
            "links": links,
        })
    }
}

/// The state of a deletion whose deletionTimestamp is `since_ms`, at `now_ms`.
pub fn deletion_state(
    type_name: &str,
    guid: &str,
    since_ms: i64,
    now_ms: i64,
    timeout_ms: i64,
) -> (JobState, Vec<CfError>) {
    if now_ms.saturating_sub(since_ms) < timeout_ms {
        (JobState::Processing, Vec::new())
    } else {
        (
            JobState::Failed,
            vec![unprocessable(format!(
                "{type_name} deletion timed out, check the remaining \"{guid}\" resource"
            ))],
        )
    }
}

/// The error of a failed deletion job: 10008 `CF-UnprocessableEntity` with `detail`.
fn unprocessable(detail: String) -> CfError {
    CfError {
        code: 10008,
        title: "CF-UnprocessableEntity".into(),
        detail,
    }
}

/// The job of a deletion under way: the resource carries the deletionTimestamp `timestamp`, and
/// `blocked_by` names what is in its way, if anything. The reconciler never touches an object
/// that is not lethe's, so a blocked deletion cannot finish: it is `FAILED` at once, naming the
/// object; otherwise it is `PROCESSING` until the timeout.
pub fn deleting_job(
    guid: &JobGuid,
    timestamp: &str,
    blocked_by: Option<&str>,
    settings: &Settings,
    t: &ResourceType,
    now: i64,
) -> Job {
    // A deletionTimestamp the server wrote is always RFC 3339; if one were not, treat the
    // deletion as just started rather than failing it.
    let since = parse_rfc3339_ms(timestamp).unwrap_or(now);
    let (state, errors) = match blocked_by {
        Some(in_the_way) => (
            JobState::Failed,
            vec![unprocessable(format!(
                "{} deletion cannot finish: {in_the_way}",
                guid.resource_type
            ))],
        ),
        None => deletion_state(
            &guid.resource_type,
            &guid.guid,
            since,
            now,
            settings.timeout_ms(t),
        ),
    };
    Job {
        guid: guid.clone(),
        state,
        errors,
        warnings: Vec::new(),
        resource: None,
        created_at: format_rfc3339(since),
        updated_at: format_rfc3339(now),
    }
}

fn complete(guid: &JobGuid, now: i64) -> Job {
    let at = format_rfc3339(now);
    Job {
        guid: guid.clone(),
        state: JobState::Complete,
        errors: Vec::new(),
        warnings: Vec::new(),
        resource: None,
        created_at: at.clone(),
        updated_at: at,
    }
}

/// Derives the job with GUID `job_guid` for `caller` (see the module docs for the contract, and
/// SECURITY.md "What a job poll reveals" and A5).
pub fn job_status(
    kube: &dyn Kube,
    env: &dyn Env,
    settings: &Settings,
    job_guid: &str,
    caller: &Identity,
) -> Result<Job, HttpError> {
    // A bad token is 401 whatever the GUID, as in Cloud Controller.
    access::authenticate(kube, caller)?;
    let guid = parse_job_guid(job_guid).ok_or_else(HttpError::job_not_found)?;
    let (t, rule) = settings
        .resource_type(&guid.resource_type)
        .and_then(|t| Some((t, t.jobs.get(&guid.verb)?)))
        .ok_or_else(HttpError::job_not_found)?;
    match rule {
        JobRule::Delete => deletion_job(kube, env, settings, t, guid, caller),
        JobRule::State {
            polling,
            failed_reasons,
        } => state_job(kube, env, t, guid, caller, *polling, failed_reasons),
        JobRule::Complete => {
            let mut job = complete(&guid, env.now_ms());
            job.resource = Some(t.link(&guid.guid));
            Ok(job)
        }
        JobRule::NoUnmapped {
            api_version,
            kind,
            destinations,
        } => unmapped_job(
            kube,
            env,
            t,
            guid,
            caller,
            &Collection::new(api_version, kind, None),
            destinations,
        ),
    }
}

/// A deletion's job (the module's table).
fn deletion_job(
    kube: &dyn Kube,
    env: &dyn Env,
    settings: &Settings,
    t: &ResourceType,
    guid: JobGuid,
    caller: &Identity,
) -> Result<Job, HttpError> {
    let reread_at = env
        .now_ms()
        .saturating_add(i64::try_from(settings.job_reread_ms).unwrap_or(i64::MAX));
    let mut reread = false;
    loop {
        let now = env.now_ms();
        let object = match access::locate(kube, t, &guid.guid) {
            Ok(Some(o)) => o,
            Ok(None) => return Ok(complete(&guid, now)),
            Err(e) => return Err(HttpError::from_kube(e, crate::errors::JOB_NOT_FOUND)),
        };
        if let Some(ts) = &object.metadata.deletion_timestamp {
            let blocked_by = ownership::blocked_by(&object);
            let mut job = deleting_job(&guid, ts, blocked_by, settings, t, now);
            let cleaned_up = !object.metadata.finalizers.iter().any(|f| f == FINALIZER);
            job.warnings = cleaned_up
                .then(|| crate::tell::held_by_others(&object))
                .flatten()
                .into_iter()
                .collect();
            job.resource = Some(t.link(&guid.guid));
            return Ok(job);
        }
        // Not being deleted, as this read shows it. A read that lags behind the deletion shows
        // the same, and the caller's role bindings may already be gone with the cascade, so
        // nothing is concluded from it until it has been read again at the end of the window,
        // whoever asks.
        if !reread {
            reread = true;
            let wait = reread_at.saturating_sub(env.now_ms());
            env.sleep_ms(u64::try_from(wait).unwrap_or(0));
            continue;
        }
        // No deletion under way: only now does what the caller may see matter.
        return match access::visible(kube, caller, t, &object) {
            Ok(false) => Ok(complete(&guid, now)),
            Ok(true) => Err(HttpError::job_not_found()),
            Err(e) => Err(HttpError::from_kube(e, crate::errors::JOB_NOT_FOUND)),
        };
    }
}

/// A create's or an update's job, from what the resource's controller reports (see
/// [`JobRule::State`]). Only a caller who may see the resource learns its state; to anyone else,
/// and once it is gone, the job does not exist (404), as Korifi answers.
fn state_job(
    kube: &dyn Kube,
    env: &dyn Env,
    t: &ResourceType,
    guid: JobGuid,
    caller: &Identity,
    polling: bool,
    failed_reasons: &[String],
) -> Result<Job, HttpError> {
    let now = env.now_ms();
    let object = access::locate(kube, t, &guid.guid)
        .map_err(|e| HttpError::from_kube(e, crate::errors::JOB_NOT_FOUND))?
        .ok_or_else(HttpError::job_not_found)?;
    match access::visible(kube, caller, t, &object) {
        Ok(true) => {}
        Ok(false) => return Err(HttpError::job_not_found()),
        Err(e) => return Err(HttpError::from_kube(e, crate::errors::JOB_NOT_FOUND)),
    }
    let status = object.json().get("status");
    let observed = status
        .and_then(|s| s.get("observedGeneration"))
        .and_then(Json::as_i64);
    let current = object.metadata.generation.is_some() && observed == object.metadata.generation;
    let ready = status
        .and_then(|s| s.get("conditions"))
        .and_then(Json::as_array)
        .and_then(|all| {
            all.iter()
                .find(|c| c.get("type").and_then(Json::as_str) == Some("Ready"))
        });
    fn text<'a>(condition: &'a Json, key: &str) -> &'a str {
        condition
            .get(key)
            .and_then(Json::as_str)
            .unwrap_or_default()
    }
    let (state, errors) = match ready {
        Some(c) if current && text(c, "status") == "True" => (JobState::Complete, Vec::new()),
        Some(c)
            if current
                && text(c, "status") == "False"
                && failed_reasons.iter().any(|r| r == text(c, "reason")) =>
        {
            let detail = match text(c, "message") {
                "" => text(c, "reason"),
                message => message,
            };
            (JobState::Failed, vec![unprocessable(detail.to_string())])
        }
        _ if polling => (JobState::Polling, Vec::new()),
        _ => (JobState::Processing, Vec::new()),
    };
    let resource = (state != JobState::Complete || object.metadata.deletion_timestamp.is_none())
        .then(|| t.link(&guid.guid));
    Ok(Job {
        state,
        errors,
        warnings: Vec::new(),
        resource,
        created_at: object
            .metadata
            .creation_timestamp
            .clone()
            .unwrap_or_else(|| format_rfc3339(now)),
        updated_at: format_rfc3339(now),
        guid,
    })
}

/// Korifi's `space.delete_unapped_routes`: the `routes` of the space's namespace (named after
/// its guid), listed as the caller, are `COMPLETE` once none lacks `destinations` (a JSON
/// pointer; absent or an empty array is unmapped). A caller who may not list them learns
/// nothing: the job does not exist.
fn unmapped_job(
    kube: &dyn Kube,
    env: &dyn Env,
    t: &ResourceType,
    guid: JobGuid,
    caller: &Identity,
    routes: &Collection,
    destinations: &str,
) -> Result<Job, HttpError> {
    let now = env.now_ms();
    let in_space = Collection {
        namespace: Some(guid.guid.clone()),
        ..routes.clone()
    };
    let listed = match kube.list_all(caller, &in_space, &ListOptions::default()) {
        Ok(listed) => listed,
        Err(KubeError::Forbidden(_) | KubeError::NotFound(_)) => {
            return Err(HttpError::job_not_found());
        }
        Err(e) => return Err(HttpError::from_kube(e, crate::errors::JOB_NOT_FOUND)),
    };
    let unmapped = listed.iter().any(|route| {
        route
            .json()
            .pointer(destinations)
            .and_then(Json::as_array)
            .is_none_or(Vec::is_empty)
    });
    let at = format_rfc3339(now);
    Ok(Job {
        state: if unmapped {
            JobState::Processing
        } else {
            JobState::Complete
        },
        errors: Vec::new(),
        warnings: Vec::new(),
        resource: Some(t.link(&guid.guid)),
        created_at: at.clone(),
        updated_at: at,
        guid,
    })
}

/// Answers `GET /v3/jobs/{guid}` (the guid is the route's last path segment).
pub fn handle(kube: &dyn Kube, env: &dyn Env, req: &lethe_guest::Request) -> lethe_guest::Response {
    let ctx = match RequestContext::new(kube, env, req) {
        Ok(ctx) => ctx,
        Err(answer) => return answer,
    };
    if req.method != "GET" {
        return HttpError::unknown_request().into_response();
    }
    let guid = req.route_param("guid").unwrap_or_else(|| {
        req.path
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string()
    });
    let result =
        access::caller(req).and_then(|caller| job_status(kube, env, &ctx.settings, &guid, &caller));
    match result {
        Ok(job) => lethe_guest::Response::json(200, &job.to_json(&ctx.base)),
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_guids_are_parsed_with_an_anchored_pattern() {
        let g = parse_job_guid("org.delete~6f1c2a4e-1b2c-4d5e-8f90-123456789abc").expect("valid");
        assert_eq!(g.resource_type, "org");
        assert_eq!(g.verb, "delete");
        assert_eq!(g.operation(), "org.delete");
        for bad in [
            "",
            "org.delete",
            "org.delete~",
            "org~abc",
            "org.delete~abc~def",
            "xorg.delete~ABC",
            " org.delete~abc",
            "org.delete~abc ",
            "org.delete~../etc",
            "Org.delete~abc",
            "org.de1ete~abc",
        ] {
            assert_eq!(parse_job_guid(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_job_links_its_resource_and_words_its_warnings_as_cloud_controller() {
        let guid = parse_job_guid("space.delete~s1").expect("valid");
        let job = Job {
            guid,
            state: JobState::Processing,
            errors: Vec::new(),
            warnings: vec!["waiting".into()],
            resource: Some(("space".into(), "/v3/spaces/s1".into())),
            created_at: "t".into(),
            updated_at: "t".into(),
        };
        let rendered = job.to_json("https://api.example.com");
        assert_eq!(
            rendered["links"]["space"]["href"],
            "https://api.example.com/v3/spaces/s1"
        );
        assert_eq!(
            rendered["links"]["self"]["href"],
            "https://api.example.com/v3/jobs/space.delete~s1"
        );
        assert_eq!(rendered["warnings"], json!([{"detail": "waiting"}]));
        let org = crate::config::default_types("cf");
        assert_eq!(
            org[0].1.link("o1"),
            (
                "organization".to_string(),
                "/v3/organizations/o1".to_string()
            )
        );
    }

    #[test]
    fn deletion_is_processing_until_the_timeout_then_failed() {
        let (s, e) = deletion_state("org", "g", 0, 119_999, 120_000);
        assert_eq!(s, JobState::Processing);
        assert!(e.is_empty());
        let (s, e) = deletion_state("org", "g", 0, 120_000, 120_000);
        assert_eq!(s, JobState::Failed);
        assert_eq!(e[0].code, 10008);
        assert_eq!(e[0].title, "CF-UnprocessableEntity");
        assert_eq!(
            e[0].detail,
            "org deletion timed out, check the remaining \"g\" resource"
        );
    }
}
