//! Who the caller is and what they may see.

use serde_json::json;

use lethe_guest::Request;
use lethe_guest::kube::{Collection, Identity, Kube, KubeError, ListOptions, Object, ObjectRef};

use crate::config::{Find, NamespaceRule, ResourceType, Settings, Visibility};
use crate::errors::HttpError;
use crate::kind::ResourceKind;

/// The caller's identity from the `Authorization` header: 401 `CF-NotAuthenticated` without a
/// bearer token, 401 `CF-InvalidAuthToken` when the bearer token is malformed.
pub fn caller(req: &Request) -> Result<Identity, HttpError> {
    match req.bearer_token() {
        Ok(Some(token)) => Ok(Identity::Caller(token)),
        Ok(None) => Err(HttpError::not_authenticated()),
        Err(_) => Err(HttpError::invalid_token()),
    }
}

/// Whether `name` can be a resource guid: a DNS-1123 label (it names a namespace).
pub fn valid_guid(name: &str) -> bool {
    lethe_kube_rules::validation::dns1123_label(name).is_empty()
}

/// Reads the resource of type `t` with guid `guid` with the host's privileged identity: the
/// record itself, never a view filtered by the caller's role bindings (which a cascade may have
/// deleted already). `Ok(None)` when it does not exist. A privileged read (SECURITY.md R1). A
/// type found by a label ([`Find::Label`]) is the first object carrying the guid as that label's
/// value, where the type lives.
pub fn locate(kube: &dyn Kube, t: &ResourceType, guid: &str) -> Result<Option<Object>, KubeError> {
    if !valid_guid(guid) {
        return Ok(None);
    }
    if let Find::Label(label) = &t.find {
        let options = ListOptions {
            label_selector: Some(format!("{label}={guid}")),
            ..Default::default()
        };
        let found = kube.list_all(
            &Identity::Privileged,
            &t.collection(t.fixed_namespace()),
            &options,
        )?;
        return Ok(found.into_iter().next());
    }
    match &t.namespace {
        NamespaceRule::Fixed(ns) => {
            match kube.get(
                &Identity::Privileged,
                &ObjectRef::new(&t.api_version, &t.kind, Some(ns), guid),
            ) {
                Ok(o) => Ok(Some(o)),
                Err(KubeError::NotFound(_)) => Ok(None),
                Err(e) => Err(e),
            }
        }
        NamespaceRule::Any => {
            let options = ListOptions {
                field_selector: Some(format!("metadata.name={guid}")),
                ..Default::default()
            };
            let found = kube.list_all(&Identity::Privileged, &t.collection(None), &options)?;
            Ok(found.into_iter().next())
        }
    }
}

/// Whether the caller manages `namespace` (an org's or a space's): they may list RoleBindings
/// there, which the org and space manager roles (and admins) may and no other CF role may.
/// `Err` only for an unusable token or an unreachable cluster, which callers answer as an
/// error, never as "manages" (SECURITY.md A4).
pub fn manages(kube: &dyn Kube, caller: &Identity, namespace: &str) -> Result<bool, KubeError> {
    if namespace.is_empty() {
        // An empty namespace would widen the probe to every namespace: fail closed.
        return Ok(false);
    }
    can_list(
        kube,
        caller,
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        Some(namespace),
    )
}

/// Whether the caller may list `kind` in `namespace` (all namespaces with `None`): the probe
/// behind visibility and manager checks, since a role shows in what it lets one list. `Err` only
/// for an unusable token (`Unauthorized`) or an unreachable cluster.
pub fn can_list(
    kube: &dyn Kube,
    caller: &Identity,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Result<bool, KubeError> {
    let options = ListOptions {
        limit: Some(1),
        ..Default::default()
    };
    match kube.list(
        caller,
        &Collection::new(api_version, kind, namespace),
        &options,
    ) {
        Ok(_) => Ok(true),
        Err(KubeError::Forbidden(_) | KubeError::NotFound(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The user name the cluster gives the caller's token: a SelfSubjectReview made as the caller
/// (Kubernetes 1.28 and later), else, where the server has none, a TokenReview of the token
/// made with the host's identity, as authentication delegation does (SECURITY.md R3). A token
/// the cluster does not accept is `Unauthorized`.
pub fn user_name(kube: &dyn Kube, caller: &Identity) -> Result<String, KubeError> {
    let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"});
    let (review, user) = match kube.create(caller, &review) {
        Ok(review) => (review, "/status/userInfo/username"),
        Err(KubeError::NotFound(m)) => {
            let Identity::Caller(token) = caller else {
                return Err(KubeError::NotFound(m));
            };
            let review = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                "spec": {"token": token}});
            let review = kube.create(&Identity::Privileged, &review)?;
            if review.json().pointer("/status/authenticated") != Some(&json!(true)) {
                return Err(KubeError::Unauthorized(
                    "the cluster does not accept the token".into(),
                ));
            }
            (review, "/status/user/username")
        }
        Err(e) => return Err(e),
    };
    Ok(review.str_at(user).unwrap_or_default().to_string())
}

/// The namespace and name of a service account's token user name
/// (`system:serviceaccount:<namespace>:<name>`).
pub fn service_account(user: &str) -> Option<(&str, &str)> {
    user.strip_prefix("system:serviceaccount:")?.split_once(':')
}

/// Whether the caller may see `object` (of type `t`). `Err` only for an unusable token
/// (`Unauthorized`) or an unreachable cluster, which callers answer as an error, never as
/// "visible" (SECURITY.md A2).
pub fn visible(
    kube: &dyn Kube,
    caller: &Identity,
    t: &ResourceType,
    object: &Object,
) -> Result<bool, KubeError> {
    match &t.visibility {
        Visibility::Get => match kube.get(caller, &object.target) {
            Ok(_) => Ok(true),
            Err(KubeError::Forbidden(_) | KubeError::NotFound(_)) => Ok(false),
            Err(e) => Err(e),
        },
        Visibility::ListAny(probes) => {
            for probe in probes {
                let namespace = if probe.own_namespace {
                    Some(object.target.name.as_str())
                } else {
                    object.target.namespace.as_deref()
                };
                if can_list(kube, caller, &probe.api_version, &probe.kind, namespace)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Visibility::ListInOwnNamespace { api_version, kind } => {
            can_list(kube, caller, api_version, kind, Some(&object.target.name))
        }
    }
}

/// Whether the caller may see every object of `t` (CF admins): they can list the kind where
/// it lives (every namespace, for a type not in a fixed one). A failed probe is an error, never
/// "admin" (SECURITY.md A3).
pub fn sees_everything(
    kube: &dyn Kube,
    caller: &Identity,
    t: &ResourceType,
) -> Result<bool, KubeError> {
    can_list(kube, caller, &t.api_version, &t.kind, t.fixed_namespace())
}

/// Lets `caller` ask for a reconcile pass on demand only if they see every organization (CF
/// admins). An authorization decision, so it fails closed: with no org type configured, with a
/// probe that fails, or for anyone else it is 403 `CF-NotAuthorized`; a token the cluster does
/// not accept is 401 `CF-InvalidAuthToken`.
pub fn authorize_pass(
    kube: &dyn Kube,
    caller: &Identity,
    settings: &Settings,
) -> Result<(), HttpError> {
    let Some(org_type) = settings.kind(ResourceKind::Org) else {
        return Err(HttpError::not_authorized());
    };
    match sees_everything(kube, caller, org_type) {
        Ok(true) => Ok(()),
        Err(KubeError::Unauthorized(_)) => Err(HttpError::invalid_token()),
        Ok(false) | Err(_) => Err(HttpError::not_authorized()),
    }
}

/// Fails with 401 `CF-InvalidAuthToken` unless the cluster accepts the caller's token.
pub fn authenticate(kube: &dyn Kube, caller: &Identity) -> Result<(), HttpError> {
    kube.authenticate(caller)
        .map_err(|e| HttpError::from_kube(e, "Unknown request"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_must_be_dns_labels() {
        assert!(valid_guid("6f1c2a4e-1b2c-4d5e-8f90-123456789abc"));
        assert!(!valid_guid(""));
        assert!(!valid_guid("UPPER"));
        assert!(!valid_guid("-lead"));
        assert!(!valid_guid("a/b"));
        assert!(!valid_guid(&"a".repeat(64)));
    }

    #[test]
    fn missing_or_malformed_authorization_is_401() {
        let req = Request::default();
        assert_eq!(caller(&req).expect_err("no token").errors[0].code, 10002);
        let req = Request {
            headers: vec![("authorization".into(), b"Basic x".to_vec())].into(),
            ..Default::default()
        };
        // Another scheme is no token at all, to Cloud Controller.
        assert_eq!(caller(&req).expect_err("not bearer").errors[0].code, 10002);
        let req = Request {
            headers: vec![("authorization".into(), b"Bearer".to_vec())].into(),
            ..Default::default()
        };
        assert_eq!(
            caller(&req).expect_err("no token after bearer").errors[0].code,
            1000
        );
    }
}
