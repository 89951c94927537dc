//! Who a bearer token is: the cluster's `TokenReview`, asked as lethe's own identity and cached
//! for [`REVIEW_TTL`], as kube-apiserver caches the answers of its token authenticators. The
//! admin listener asks it before it lets a caller read its internals; the HTTP trigger asks it to
//! give each caller its own share of the host.
//!
//! Tokens are kept only as their SHA-256; never logged, never stored.

use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::HeaderMap;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// How long a review's answer is reused.
pub const REVIEW_TTL: Duration = Duration::from_secs(10);

/// How long one review may take, retries included: a request waits for it, so a cluster that
/// does not answer costs a caller this much at most (the review then fails, and is not kept).
pub const REVIEW_TIMEOUT: Duration = Duration::from_secs(3);

/// The client reviews are asked with: lethe's own identity, within [`REVIEW_TIMEOUT`].
pub fn reviewer(cluster: &lethe_kube::Cluster) -> lethe_kube::KubeClient {
    cluster
        .privileged()
        .with_deadline(Instant::now() + REVIEW_TIMEOUT)
}

/// How many answers a [`Cache`] holds; past it, expired answers go first, then all of them, so
/// that a flood of made-up tokens costs memory only up to this bound.
const CACHE_LIMIT: usize = 4096;

/// A user as a `TokenReview` names them, and as a `SubjectAccessReview` asks about them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct User {
    /// The user name, e.g. `system:serviceaccount:monitoring:prometheus`.
    pub name: String,
    /// The user's uid, when the authenticator gives one.
    pub uid: String,
    /// The user's groups.
    pub groups: Vec<String>,
    /// What else the authenticator says of them (a ServiceAccount token's pod, for example).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// Answers kept for [`REVIEW_TTL`], at most [`CACHE_LIMIT`] of them.
pub struct Cache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> Default for Cache<K, V> {
    fn default() -> Self {
        Cache {
            entries: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Eq + Hash, V: Clone> Cache<K, V> {
    /// The answer kept for `key`, while it is fresh.
    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, value) = entries.get(key)?;
        (at.elapsed() < REVIEW_TTL).then(|| value.clone())
    }

    /// Keeps `value` for `key` from now.
    pub fn put(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if entries.len() >= CACHE_LIMIT {
            entries.retain(|_, (at, _)| at.elapsed() < REVIEW_TTL);
            if entries.len() >= CACHE_LIMIT {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), value));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    #[cfg(test)]
    fn age(&self, key: &K, by: Duration) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = entries.get_mut(key)
            && let Some(earlier) = entry.0.checked_sub(by)
        {
            entry.0 = earlier;
        }
    }
}

/// The SHA-256 of a token: how a token is known without being kept.
pub fn token_key(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The bearer token of a request (`Authorization: Bearer <token>`, the scheme in any case), or
/// `None` without one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The users tokens authenticate as, by `TokenReview`, cached.
#[derive(Default)]
pub struct TokenReviews {
    /// `None` for a token the cluster did not accept.
    users: Cache<[u8; 32], Option<User>>,
}

impl TokenReviews {
    /// The answer kept for the token with SHA-256 `key`, while it is fresh: `Some(None)` for a
    /// token the cluster refused, `None` when there is no fresh answer.
    pub fn cached(&self, key: &[u8; 32]) -> Option<Option<User>> {
        self.users.get(key)
    }

    /// Who `token` is, asking `cluster` unless a fresh answer is kept: `None` when the cluster
    /// does not accept it. An error (the cluster unreachable, lethe may not ask) is not kept.
    pub async fn user(
        &self,
        cluster: &lethe_kube::Cluster,
        token: &str,
    ) -> Result<Option<User>, String> {
        let key = token_key(token);
        if let Some(user) = self.users.get(&key) {
            return Ok(user);
        }
        let user = review_token(cluster, token).await?;
        self.users.put(key, user.clone());
        Ok(user)
    }
}

/// The strings of a JSON array (none for anything else).
fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Who `token` is, by a `TokenReview`: `None` when the cluster does not accept it.
async fn review_token(cluster: &lethe_kube::Cluster, token: &str) -> Result<Option<User>, String> {
    let body = json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": token},
    });
    let answer = reviewer(cluster)
        .review(&body.to_string())
        .await
        .map_err(|e| e.to_string())?;
    let status = &answer["status"];
    if status["authenticated"].as_bool() != Some(true) {
        return Ok(None);
    }
    let user = &status["user"];
    let name = user["username"].as_str().unwrap_or_default().to_string();
    if name.is_empty() {
        return Err("the TokenReview accepted the token but named no user".into());
    }
    Ok(Some(User {
        name,
        uid: user["uid"].as_str().unwrap_or_default().to_string(),
        groups: strings(&user["groups"]),
        extra: user["extra"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), strings(v))).collect())
            .unwrap_or_default(),
    }))
}

/// Request headers carrying `Authorization: <authorization>`, for tests.
#[cfg(test)]
pub(crate) fn authorization(authorization: &str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        http::header::AUTHORIZATION,
        authorization.parse().expect("header value"),
    );
    h
}

#[cfg(test)]
mod tests {
    use super::authorization as headers;
    use super::*;

    #[test]
    fn a_bearer_token_is_read_whatever_the_scheme_case() {
        assert_eq!(bearer(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&headers("Bearer ")), None);
        assert_eq!(bearer(&headers("Basic abc")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    #[test]
    fn the_cache_forgets_after_its_ttl_and_stays_bounded() {
        let cache: Cache<u32, bool> = Cache::default();
        cache.put(1, true);
        assert_eq!(cache.get(&1), Some(true));
        assert_eq!(cache.get(&2), None);
        cache.age(&1, REVIEW_TTL);
        assert_eq!(cache.get(&1), None, "an expired answer is reused");
        for k in 0..(CACHE_LIMIT as u32 * 2) {
            cache.put(k, false);
        }
        assert!(cache.len() <= CACHE_LIMIT, "{} answers kept", cache.len());
    }
}
