//! Accepting a deletion: `DELETE /v3/organizations/{guid}`, `DELETE /v3/spaces/{guid}`, and the
//! same of every configured type with deletion jobs (`/v3/apps/{guid}` under Korifi's preset).
//!
//! The DELETE runs as the caller, so Kubernetes RBAC decides: a resource the caller cannot see
//! is 404 `CF-ResourceNotFound`; one they can see but not delete is 403 `CF-NotAuthorized`. On
//! success the handler waits (bounded) until the deletionTimestamp is visible to the job poller's
//! privileged read, so the client's first poll never sees a 404. A type may say that some of its
//! DELETEs are finished at once ([`AtOnce`](crate::config::AtOnce): a user-provided service
//! instance under Korifi's preset), answered `204` without a job, as Cloud Controller does.

use lethe_guest::env::Env;
use lethe_guest::kube::{DeleteOptions, Identity, Kube, KubeError, Object, ObjectRef, Propagation};
use serde_json::Value as Json;

use crate::access;
use crate::config::{ResourceType, Settings};
use crate::errors::HttpError;
use crate::jobs::JobGuid;
use crate::kind::{self, ResourceKind};

/// A deletion accepted: the job that tracks it, and whether the DELETE is finished as it is
/// (`at_once`: Cloud Controller's `204` without a job, by the type's
/// [`AtOnce`](crate::config::AtOnce)); the job answers either way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accepted {
    /// The job GUID (`<type>.delete~<guid>`).
    pub job: JobGuid,
    /// Whether there is nothing to wait for.
    pub at_once: bool,
}

/// Deletes the resource of type `type_name` with `guid` as `caller`, and returns the job GUID
/// that tracks it.
pub fn delete(
    kube: &dyn Kube,
    env: &dyn Env,
    settings: &Settings,
    type_name: &str,
    guid: &str,
    caller: &Identity,
) -> Result<JobGuid, HttpError> {
    accept(kube, env, settings, type_name, guid, caller).map(|accepted| accepted.job)
}

/// [`delete`], saying also whether the DELETE is finished at once.
pub fn accept(
    kube: &dyn Kube,
    env: &dyn Env,
    settings: &Settings,
    type_name: &str,
    guid: &str,
    caller: &Identity,
) -> Result<Accepted, HttpError> {
    let t = settings
        .resource_type(type_name)
        .ok_or_else(|| HttpError::not_found(format!("{type_name} not found")))?;
    let not_found = format!("{} not found", t.display);
    access::authenticate(kube, caller)?;
    let object = access::locate(kube, t, guid)
        .map_err(|e| HttpError::from_kube(e, &not_found))?
        .ok_or_else(|| HttpError::not_found(&not_found))?;
    if !access::visible(kube, caller, t, &object)
        .map_err(|e| HttpError::from_kube(e, &not_found))?
    {
        return Err(HttpError::not_found(&not_found));
    }
    // A space of a suspended organization is only deleted by admins. An authorization
    // decision: a lookup that fails is an error, never a pass (SECURITY.md A1).
    if ResourceKind::from_name(type_name) == Some(ResourceKind::Space)
        && let Some(org_type) = settings.kind(ResourceKind::Org)
        && let Some(org_guid) = kind::org_of(&object)
        && let Some(org) = access::locate(kube, org_type, org_guid)
            .map_err(|e| HttpError::from_kube(e, &not_found))?
        && kind::suspended(&org)
        && !access::sees_everything(kube, caller, org_type)
            .map_err(|e| HttpError::from_kube(e, &not_found))?
    {
        return Err(HttpError::org_suspended());
    }
    let at_once = done_at_once(kube, caller, t, &object);
    let options = DeleteOptions {
        propagation: Some(Propagation::Background),
        precondition_uid: Some(object.metadata.uid.clone()),
    };
    match kube.delete(caller, &object.target, &options) {
        Ok(_) => {}
        // Deleted by someone else in between: the job will say COMPLETE.
        Err(KubeError::NotFound(_)) => {}
        // The uid precondition failed: a new resource took the name; that one is not ours.
        Err(KubeError::Conflict(_)) => return Err(HttpError::not_found(&not_found)),
        Err(e) => return Err(HttpError::from_kube(e, &not_found)),
    }
    confirm_visible(kube, env, settings, t, guid);
    Ok(Accepted {
        job: JobGuid {
            resource_type: type_name.to_string(),
            verb: "delete".into(),
            guid: guid.to_string(),
        },
        at_once,
    })
}

/// Whether deleting `object` finishes its DELETE, by its type's rule: the deciding field read
/// from the object, or from the object it names, read as the caller. Anything unreadable makes
/// it a job, which is right either way.
fn done_at_once(kube: &dyn Kube, caller: &Identity, t: &ResourceType, object: &Object) -> bool {
    let Some(rule) = &t.at_once else {
        return false;
    };
    let named;
    let decider = match &rule.via {
        None => object.json(),
        Some(via) => {
            let Some(name) = object
                .json()
                .pointer(&via.name_pointer)
                .and_then(Json::as_str)
            else {
                return false;
            };
            let target = ObjectRef::new(
                &via.api_version,
                &via.kind,
                object.target.namespace.as_deref(),
                name,
            );
            named = match kube.get(caller, &target) {
                Ok(o) => o,
                Err(_) => return false,
            };
            named.json()
        }
    };
    decider.pointer(&rule.pointer).and_then(Json::as_str) == Some(rule.value.as_str())
}

/// Re-reads until the deletion is visible to a privileged read (deletionTimestamp set, or the
/// object gone), for at most `delete_confirm_ms`.
fn confirm_visible(
    kube: &dyn Kube,
    env: &dyn Env,
    settings: &Settings,
    t: &ResourceType,
    guid: &str,
) {
    let deadline = env.now_ms() + i64::try_from(settings.delete_confirm_ms).unwrap_or(i64::MAX);
    loop {
        match access::locate(kube, t, guid) {
            Ok(None) => return,
            Ok(Some(o)) if o.metadata.deletion_timestamp.is_some() => return,
            Ok(Some(_)) | Err(_) => {}
        }
        if env.now_ms() >= deadline {
            env.log(
                lethe_guest::env::Level::Warn,
                &format!(
                    "deletion of {guid} not yet visible after {} ms",
                    settings.delete_confirm_ms
                ),
            );
            return;
        }
        env.sleep_ms(25);
    }
}
