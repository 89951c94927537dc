//! Accepting a deletion: `DELETE /v3/organizations/{guid}`, `DELETE /v3/spaces/{guid}`, and the
//! same of every configured type with deletion jobs (`/v3/apps/{guid}` under Korifi's preset).
//!
//! The DELETE runs as the caller, so Kubernetes RBAC decides: a resource the caller cannot see
//! is 404 `CF-ResourceNotFound`; one they can see but not delete is 403 `CF-NotAuthorized`. On
//! success the handler waits (bounded) until the deletionTimestamp is visible to the job poller's
//! privileged read, so the client's first poll never sees a 404.

use lethe_guest::env::Env;
use lethe_guest::kube::{DeleteOptions, Identity, Kube, KubeError, Propagation};

use crate::access;
use crate::config::{ResourceType, Settings};
use crate::errors::HttpError;
use crate::jobs::JobGuid;
use crate::kind::{self, ResourceKind};

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
    Ok(JobGuid {
        resource_type: type_name.to_string(),
        verb: "delete".into(),
        guid: guid.to_string(),
    })
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
