//! Authentication: bearer tokens (the admin's, ServiceAccount tokens, the test users') and
//! impersonation, as kube-apiserver's authenticators read them.

use crate::auth::{Attributes, UserInfo, require};
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

fn header_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect()
}

/// Authenticates the caller and applies impersonation.
pub(crate) fn authenticate(
    shared: &Shared,
    headers: &HeaderMap,
) -> Result<Arc<UserInfo>, ApiError> {
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
    let imp_user = header_values(headers, "impersonate-user")
        .into_iter()
        .next();
    let imp_groups = header_values(headers, "impersonate-group");
    let imp_uid = header_values(headers, "impersonate-uid").into_iter().next();
    let mut imp_extras: Vec<(String, String)> = headers
        .iter()
        .filter_map(|(name, value)| {
            let key = name.as_str().strip_prefix("impersonate-extra-")?;
            let key = percent_encoding::percent_decode_str(key)
                .decode_utf8_lossy()
                .into_owned();
            Some((key, value.to_str().ok()?.to_string()))
        })
        .collect();
    imp_extras.sort();
    if imp_user.is_none() && imp_groups.is_empty() && imp_uid.is_none() && imp_extras.is_empty() {
        return Ok(user);
    }
    let Some(target) = imp_user else {
        // The requests as Go prints the object references it made of them.
        let mut requested: Vec<String> = imp_groups
            .iter()
            .map(|g| format!("{{Group  {g}    }}"))
            .collect();
        requested.extend(
            imp_extras
                .iter()
                .map(|(k, v)| format!("{{UserExtra  {v}  authentication.k8s.io/v1  {k}}}")),
        );
        if let Some(uid) = &imp_uid {
            requested.push(format!("{{UID  {uid}  authentication.k8s.io/v1  }}"));
        }
        return Err(ApiError::bad_request(format!(
            "requested [{}] without impersonating a user",
            requested.join(" ")
        )));
    };
    let service_account = target
        .strip_prefix("system:serviceaccount:")
        .and_then(|rest| rest.split_once(':'));
    let may = |group: &str, resource: &str, subresource: &str, namespace: &str, name: &str| {
        let attrs = Attributes {
            verb: "impersonate".into(),
            resource_request: true,
            group: group.into(),
            resource: resource.into(),
            subresource: subresource.into(),
            namespace: namespace.into(),
            name: name.into(),
            ..Default::default()
        };
        require(&shared.store, &user, &attrs)
    };
    match service_account {
        Some((ns, name)) => may("", "serviceaccounts", "", ns, name)?,
        None => may("", "users", "", "", &target)?,
    }
    for g in &imp_groups {
        may("", "groups", "", "", g)?;
    }
    // A uid and extra values are impersonated only with permission for them too.
    if let Some(uid) = &imp_uid {
        may("authentication.k8s.io", "uids", "", "", uid)?;
    }
    for (key, value) in &imp_extras {
        may("authentication.k8s.io", "userextras", key, "", value)?;
    }
    let mut groups = imp_groups;
    if groups.is_empty()
        && let Some((ns, _)) = service_account
    {
        groups.push("system:serviceaccounts".into());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    if target != "system:anonymous" && !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    Ok(Arc::new(UserInfo {
        name: target,
        uid: imp_uid.unwrap_or_default(),
        groups,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_authorization(value: &[u8]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::AUTHORIZATION,
            header::HeaderValue::from_bytes(value).expect("a header value"),
        );
        headers
    }

    #[test]
    fn bearer_credentials_are_read_as_the_real_authenticator_reads_them() {
        assert_eq!(bearer_credential(&HeaderMap::new()), None);
        assert_eq!(
            bearer_credential(&with_authorization(b"Bearer abc")),
            Some(Ok("abc"))
        );
        assert_eq!(
            bearer_credential(&with_authorization(b"bearer abc extra")),
            Some(Ok("abc"))
        );
        // Not a bearer credential at all: the request is anonymous.
        for anonymous in [&b"Basic dXNlcjpwdw=="[..], b"Bearer", b"Bearer  abc"] {
            assert_eq!(bearer_credential(&with_authorization(anonymous)), None);
        }
        // A token that is not text fails authentication; it never makes the caller anonymous.
        assert_eq!(
            bearer_credential(&with_authorization(b"Bearer t\xf6ken")),
            Some(Err(()))
        );
    }
}
