//! Authentication: bearer tokens (the admin's, ServiceAccount tokens, the test users'), as
//! kube-apiserver's bearer-token authenticator reads them. Impersonation is refused.

use crate::auth::UserInfo;
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

/// Authenticates the caller; a request asking for impersonation is refused.
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
    // Impersonation is not served: nothing lethe does impersonates. A request that asks for it
    // is refused rather than served as its caller, who would then act under the wrong name.
    if headers
        .keys()
        .any(|name| name.as_str().starts_with("impersonate-"))
    {
        let why = "impersonation is not served by this cluster";
        return Err(ApiError::new(403, "Forbidden", why));
    }
    Ok(user)
}
