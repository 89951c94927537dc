//! Authentication: bearer tokens (the admin's, ServiceAccount tokens, the test users'), as
//! kube-apiserver's bearer-token authenticator reads them; then impersonation
//! (`Impersonate-User`, `-Group`, `-Uid`, `-Extra-*`), as kube-apiserver's impersonation filter
//! serves it: each name asked for is authorized for the requester with the `impersonate` verb,
//! and the request then runs as the user impersonated.

use crate::auth::{Attributes, UserInfo};
use crate::front::shared::Shared;
use crate::status::ApiError;
use http::{HeaderMap, header};
use std::sync::Arc;

/// The bearer credential of a request, read as kube-apiserver's bearer-token authenticator
/// reads it: `None` when there is none (no `Authorization` header, another scheme, or an empty
/// token), which makes the request anonymous; `Some(Err(()))` for a token that cannot be one (not
/// text), which fails authentication like any unknown token.
fn bearer_credential(headers: &HeaderMap) -> Option<Result<&str, ()>> {
    let raw = headers.get(header::AUTHORIZATION)?.as_bytes();
    let raw = raw.trim_ascii();
    let split = raw.iter().position(|b| *b == b' ')?;
    let (scheme, rest) = raw.split_at(split);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest[1..].split(|b| *b == b' ').next().unwrap_or_default();
    if token.is_empty() {
        return None;
    }
    Some(std::str::from_utf8(token).map_err(|_| ()))
}

/// The bearer token of a request, if it has a usable one.
pub(crate) fn bearer(headers: &HeaderMap) -> Option<&str> {
    bearer_credential(headers)?.ok()
}

/// Authenticates the caller, and then, when the request asks for it, the user it impersonates:
/// the user the request acts as, and the caller's name when that is someone they impersonate.
pub(crate) fn authenticate(
    shared: &Shared,
    headers: &HeaderMap,
) -> Result<(Arc<UserInfo>, Option<String>), ApiError> {
    let user = match bearer_credential(headers) {
        Some(Ok(token)) => shared
            .user_for_token(token)
            .ok_or_else(ApiError::unauthorized)?,
        Some(Err(())) => return Err(ApiError::unauthorized()),
        // A real server's default (`--anonymous-auth=true`): a request without credentials is
        // system:anonymous's, which RBAC then refuses everything but health and version. A
        // token that does not authenticate stays a 401.
        None => Arc::new(UserInfo {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        }),
    };
    let requester = user.name.clone();
    let acting = impersonate(shared, headers, user)?;
    let impersonator = headers
        .contains_key("impersonate-user")
        .then_some(requester);
    Ok((acting, impersonator))
}

/// The user a request impersonates, each part authorized for `requester` as kube-apiserver's
/// impersonation filter authorizes it; `requester` itself when the request asks for none.
///
/// - `Impersonate-User`: `impersonate` on `serviceaccounts` `<name>` in `<namespace>` for a
///   ServiceAccount's user name (`system:serviceaccount:<namespace>:<name>`), else on `users`;
/// - each `Impersonate-Group`: on `groups`; `Impersonate-Uid`: on `uids`; each
///   `Impersonate-Extra-<key>` value: on `userextras/<key>` (both in `authentication.k8s.io`).
///
/// A ServiceAccount impersonated without groups gets its own (`system:serviceaccounts` and
/// `system:serviceaccounts:<namespace>`), and every impersonated user but `system:anonymous` is
/// in `system:authenticated`. Groups, a uid or extras without a user are a 400; a name the
/// requester may not impersonate is a 403 that names it, and the request goes no further.
fn impersonate(
    shared: &Shared,
    headers: &HeaderMap,
    requester: Arc<UserInfo>,
) -> Result<Arc<UserInfo>, ApiError> {
    let values = |name: &str| -> Result<Vec<String>, ApiError> {
        headers
            .get_all(name)
            .iter()
            .map(|v| {
                v.to_str()
                    .map(str::to_string)
                    .map_err(|_| ApiError::bad_request(format!("the {name} header is not text")))
            })
            .collect()
    };
    let users = values("impersonate-user")?;
    let groups = values("impersonate-group")?;
    let uids = values("impersonate-uid")?;
    let mut extras: Vec<(String, String)> = Vec::new();
    for name in headers.keys() {
        if let Some(key) = name.as_str().strip_prefix("impersonate-extra-") {
            for value in values(name.as_str())? {
                extras.push((key.to_string(), value));
            }
        }
    }
    let Some(user) = users.first() else {
        if groups.is_empty() && uids.is_empty() && extras.is_empty() {
            return Ok(requester);
        }
        return Err(ApiError::bad_request(
            "requested impersonation of groups, a uid or extras without impersonating a user",
        ));
    };
    if users.len() > 1 || uids.len() > 1 {
        return Err(ApiError::bad_request(
            "only one user and one uid may be impersonated",
        ));
    }
    let service_account = user
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    let mut asked = vec![match service_account {
        Some((namespace, name)) => impersonation("", "serviceaccounts", "", name, namespace),
        None => impersonation("", "users", "", user, ""),
    }];
    asked.extend(
        groups
            .iter()
            .map(|g| impersonation("", "groups", "", g, "")),
    );
    asked.extend(
        uids.iter()
            .map(|u| impersonation("authentication.k8s.io", "uids", "", u, "")),
    );
    asked.extend(
        extras.iter().map(|(key, value)| {
            impersonation("authentication.k8s.io", "userextras", key, value, "")
        }),
    );
    for attributes in &asked {
        if !crate::auth::authorize(&shared.store, &requester, attributes) {
            return Err(ApiError::forbidden(
                &attributes.group,
                &attributes.resource,
                &attributes.name,
                &attributes.forbidden_reason(&requester.name),
            ));
        }
    }
    let mut impersonated_groups = groups;
    if impersonated_groups.is_empty()
        && let Some((namespace, _)) = service_account
    {
        impersonated_groups = vec![
            "system:serviceaccounts".to_string(),
            format!("system:serviceaccounts:{namespace}"),
        ];
    }
    let everyone = if user == "system:anonymous" {
        "system:unauthenticated"
    } else {
        "system:authenticated"
    };
    if !impersonated_groups.iter().any(|g| g == everyone) {
        impersonated_groups.push(everyone.to_string());
    }
    Ok(Arc::new(UserInfo {
        name: user.clone(),
        uid: uids.into_iter().next().unwrap_or_default(),
        groups: impersonated_groups,
    }))
}

/// What impersonating `name` (a `resource` of `group`, in `namespace` for ServiceAccounts) asks
/// of RBAC.
fn impersonation(
    group: &str,
    resource: &str,
    subresource: &str,
    name: &str,
    namespace: &str,
) -> Attributes {
    Attributes {
        verb: "impersonate".into(),
        resource_request: true,
        group: group.into(),
        resource: resource.into(),
        subresource: subresource.into(),
        name: name.into(),
        namespace: namespace.into(),
        path: String::new(),
    }
}
