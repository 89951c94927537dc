//! Who may read the admin listener's internals (`/metrics`, `/lethe/status`, `/readyz?verbose`).
//!
//! As a Kubebuilder-scaffolded metrics endpoint does: the caller's bearer token is checked with a
//! `TokenReview`, then the user it names needs `get` on the non-resource URL, checked with a
//! `SubjectAccessReview`. Both questions go to the cluster lethe runs against, as lethe's own
//! identity (which needs `create` on both review kinds: `deploy/rbac.json`); on the embedded
//! cluster that cluster's own token file and RBAC answer. Both answers are cached for
//! [`REVIEW_TTL`](crate::identity::REVIEW_TTL), as kube-apiserver caches delegated authentication and
//! authorization, so a scrape every few seconds costs the cluster at most two reviews per TTL.
//!
//! Every doubt denies: no cluster yet, a review that fails or that lethe may not make, an answer
//! without a verdict. Browsers cannot send a bearer header, so a token may also come as the
//! password of HTTP Basic credentials (any user name), which a browser asks for on a 401.

use std::net::SocketAddr;
use std::sync::Arc;

use base64::Engine as _;
use http::HeaderMap;
use serde_json::json;

use crate::identity::{Cache, TokenReviews, User, bearer, reviewer};

/// Whether the admin listener asks who its callers are (`--admin-auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AdminAuth {
    /// Open on a loopback address, tokens on any other.
    Auto,
    /// Tokens on every address.
    Token,
    /// Open: allowed only on a loopback address, where only this machine can ask.
    None,
}

impl AdminAuth {
    /// Whether a listener on `addr` asks for tokens. `None` on an address other machines can
    /// reach is refused, since it would show the status page and metrics to all of them.
    pub fn requires_token(self, addr: SocketAddr) -> anyhow::Result<bool> {
        let loopback = addr.ip().is_loopback();
        match self {
            AdminAuth::Auto => Ok(!loopback),
            AdminAuth::Token => Ok(true),
            AdminAuth::None if loopback => Ok(false),
            AdminAuth::None => anyhow::bail!(
                "--admin-auth=none is allowed only on a loopback address, and the admin listener is on {addr}: \
                 anyone who can reach it could read the status page and the metrics \
                 (use --admin-auth=token, or listen on 127.0.0.1)"
            ),
        }
    }
}

/// The answer to one request for an admin page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Serve it.
    Allowed,
    /// No credentials, or a token the cluster does not know: 401.
    Unauthenticated,
    /// The token's user may not `get` the path: 403.
    Forbidden {
        /// The user the token authenticated as.
        user: String,
    },
    /// The cluster could not be asked, or lethe may not ask it: 503 (the log says why).
    Unavailable,
}

/// The admin listener's gate: open, or asking the cluster who each caller is and what they may
/// read.
pub struct AdminAccess {
    requires_token: bool,
    /// Who each token is (shared with the HTTP trigger, which gives each user a fair share).
    users: Arc<TokenReviews>,
    /// Whether a user may `get` a path.
    decisions: Cache<(User, String), bool>,
}

impl AdminAccess {
    /// A gate that asks for tokens when `requires_token`, reviewing them through `users`, and
    /// lets everyone in otherwise.
    pub fn new(requires_token: bool, users: Arc<TokenReviews>) -> AdminAccess {
        AdminAccess {
            requires_token,
            users,
            decisions: Cache::default(),
        }
    }

    /// Whether this gate asks for tokens.
    pub fn requires_token(&self) -> bool {
        self.requires_token
    }

    /// Whether the request with `headers` may `get` the non-resource URL `path`, reviewed by
    /// `cluster` (`None` while lethe starts, or when it has no cluster: then nobody may).
    pub async fn check(
        &self,
        cluster: Option<&lethe_kube::Cluster>,
        headers: &HeaderMap,
        path: &str,
    ) -> Verdict {
        if !self.requires_token {
            return Verdict::Allowed;
        }
        let Some(token) = credential(headers) else {
            return Verdict::Unauthenticated;
        };
        let Some(cluster) = cluster else {
            tracing::warn!(
                "admin listener: refused {path}: there is no cluster (yet) to review the caller's token with"
            );
            return Verdict::Unavailable;
        };
        let user = match self.users.user(cluster, &token).await {
            Ok(Some(user)) => user,
            Ok(None) => return Verdict::Unauthenticated,
            Err(why) => {
                tracing::warn!("admin listener: refused {path}: cannot review the token: {why}");
                return Verdict::Unavailable;
            }
        };
        let question = (user, path.to_string());
        let allowed = match self.decisions.get(&question) {
            Some(allowed) => allowed,
            None => match review_access(cluster, &question.0, path).await {
                Ok(allowed) => {
                    self.decisions.put(question.clone(), allowed);
                    allowed
                }
                Err(why) => {
                    tracing::warn!(
                        "admin listener: refused {path} to {:?}: cannot review its access: {why}",
                        question.0.name
                    );
                    return Verdict::Unavailable;
                }
            },
        };
        if allowed {
            Verdict::Allowed
        } else {
            Verdict::Forbidden {
                user: question.0.name,
            }
        }
    }
}

/// The token a request carries: `Authorization: Bearer <token>`, or the password of
/// `Authorization: Basic` credentials. `None` without one (or with an empty one).
fn credential(headers: &HeaderMap) -> Option<String> {
    if let Some(token) = bearer(headers) {
        return Some(token.to_string());
    }
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let token = decoded.split_once(':')?.1;
    (!token.is_empty()).then(|| token.to_string())
}

/// Whether `user` may `get` the non-resource URL `path`, by a `SubjectAccessReview`.
async fn review_access(
    cluster: &lethe_kube::Cluster,
    user: &User,
    path: &str,
) -> Result<bool, String> {
    let body = json!({
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user.name,
            "uid": user.uid,
            "groups": user.groups,
            "extra": user.extra,
            "nonResourceAttributes": {"path": path, "verb": "get"},
        },
    });
    let answer = reviewer(cluster)
        .review(&body.to_string())
        .await
        .map_err(|e| e.to_string())?;
    match answer["status"]["allowed"].as_bool() {
        Some(allowed) => Ok(allowed),
        // Go omits a false `allowed`; a status without it is a denial.
        None if answer["status"].is_object() => Ok(false),
        None => Err("the SubjectAccessReview came back without a status".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::authorization as headers;

    #[test]
    fn a_token_comes_as_a_bearer_or_as_a_basic_password() {
        assert_eq!(credential(&headers("Bearer abc")).as_deref(), Some("abc"));
        assert_eq!(credential(&headers("bearer  abc ")).as_deref(), Some("abc"));
        let basic = base64::engine::general_purpose::STANDARD.encode("anyone:t0k:en");
        assert_eq!(
            credential(&headers(&format!("Basic {basic}"))).as_deref(),
            Some("t0k:en")
        );
        assert_eq!(credential(&HeaderMap::new()), None);
        assert_eq!(credential(&headers("Bearer ")), None);
        assert_eq!(credential(&headers("Basic !!!")), None);
        let no_password = base64::engine::general_purpose::STANDARD.encode("anyone:");
        assert_eq!(credential(&headers(&format!("Basic {no_password}"))), None);
        assert_eq!(credential(&headers("Digest abc")), None);
    }

    #[test]
    fn only_a_loopback_listener_may_be_open() {
        let loopback: SocketAddr = "127.0.0.1:9090".parse().expect("addr");
        let v6_loopback: SocketAddr = "[::1]:9090".parse().expect("addr");
        let anywhere: SocketAddr = "0.0.0.0:9090".parse().expect("addr");
        assert!(!AdminAuth::Auto.requires_token(loopback).expect("auto"));
        assert!(!AdminAuth::Auto.requires_token(v6_loopback).expect("auto"));
        assert!(AdminAuth::Auto.requires_token(anywhere).expect("auto"));
        assert!(AdminAuth::Token.requires_token(loopback).expect("token"));
        assert!(!AdminAuth::None.requires_token(loopback).expect("none"));
        let refused = AdminAuth::None
            .requires_token(anywhere)
            .expect_err("open on 0.0.0.0");
        assert!(refused.to_string().contains("loopback"), "{refused}");
    }

    #[tokio::test]
    async fn an_open_gate_lets_everyone_in_and_a_closed_one_without_a_cluster_nobody() {
        let open = AdminAccess::new(false, Arc::default());
        assert_eq!(
            open.check(None, &HeaderMap::new(), "/metrics").await,
            Verdict::Allowed
        );
        let closed = AdminAccess::new(true, Arc::default());
        assert_eq!(
            closed.check(None, &HeaderMap::new(), "/metrics").await,
            Verdict::Unauthenticated
        );
        assert_eq!(
            closed.check(None, &headers("Bearer t"), "/metrics").await,
            Verdict::Unavailable
        );
    }
}
