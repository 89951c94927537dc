//! The host's own identity on the embedded cluster: the ServiceAccount that `deploy/` binds to
//! lethe's least-privileged RBAC (SECURITY.md H1 and "lethe's own rights").
//!
//! On a real cluster the host runs in a pod whose projected token is that ServiceAccount's. The
//! embedded cluster has no pods that run, so at start the host asks the cluster's token
//! controller for a long-lived token of the account, the way a `kubernetes.io/service-account-token`
//! Secret is filled on a real cluster, and then acts with it instead of with the administrator
//! credentials that applied the manifests. A rule missing from `deploy/` then fails a test.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use lethe_kube::{Cluster, KubeError, ObjectRef};
use lethe_retry::{Budget, Policy, Setback};

/// How long the token controller may take to fill the Secret, a failing API server included.
const TOKEN_WAIT: Duration = Duration::from_secs(120);

/// The backoff while it waits: bounded by [`TOKEN_WAIT`] alone.
const TOKEN_RETRY: Policy =
    Policy::until_deadline(Duration::from_millis(50), Duration::from_secs(1));

/// The Secret holding the token of `namespace`/`name`.
fn secret_name(name: &str) -> String {
    format!("{name}-token")
}

/// A token of the ServiceAccount `namespace`/`name`, through a token Secret that `admin` creates
/// (or finds, after a restart) and the token controller fills. The token is never logged.
pub async fn token(admin: &Cluster, namespace: &str, name: &str) -> anyhow::Result<String> {
    let client = admin.privileged();
    let secret = ObjectRef {
        api_version: "v1".into(),
        kind: "Secret".into(),
        namespace: Some(namespace.into()),
        name: secret_name(name),
    };
    let body = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/service-account-token",
        "metadata": {
            "name": secret.name,
            "namespace": namespace,
            "annotations": {"kubernetes.io/service-account.name": name},
            "labels": {"app.kubernetes.io/managed-by": "lethe"},
        },
    });
    // The Secret is lethe's by name and label, so a create whose outcome is unknown is simply
    // made again after a fresh read; a failing API server, like a token not filled yet, is waited
    // for with backoff until the deadline.
    let deadline = Instant::now() + TOKEN_WAIT;
    let mut budget = Budget::new(TOKEN_RETRY);
    let transient = |e: &KubeError| matches!(e, KubeError::Unavailable(_) | KubeError::Timeout(_));
    loop {
        // The failure this round met, if any; none when the token is not filled yet.
        let failure = match client.get(&secret).await {
            Err(KubeError::NotFound(_)) => match client.create(&body.to_string()).await {
                Ok(_) | Err(KubeError::Conflict(_)) => None,
                Err(e) if transient(&e) => Some(e),
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("creating the token Secret of ServiceAccount {namespace}/{name}")
                    });
                }
            },
            Err(e) if transient(&e) => {
                tracing::warn!(
                    "reading the token Secret {namespace}/{}: {e}; trying again",
                    secret.name
                );
                Some(e)
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("reading the token Secret {namespace}/{}", secret.name)
                });
            }
            Ok(current) => {
                if let Some(token) = filled_token(&current.json, namespace, name, &secret.name)? {
                    return Ok(token);
                }
                None
            }
        };
        let time_left = deadline.saturating_duration_since(Instant::now());
        let Some(delay) = budget.next(Setback::Failed, None, Some(time_left), rand::random())
        else {
            if let Some(e) = failure {
                return Err(e).with_context(|| {
                    format!("reading the token Secret {namespace}/{}", secret.name)
                });
            }
            bail!(
                "the token Secret {namespace}/{} was not filled within {} s: does ServiceAccount {namespace}/{name} exist?",
                secret.name,
                TOKEN_WAIT.as_secs()
            );
        };
        tokio::time::sleep(delay).await;
    }
}

/// The token in the Secret `json`, once the token controller has filled it. A Secret of that name
/// that is not this account's token (another account's, or anything else) is never used: the host
/// would act as someone else.
fn filled_token(
    json: &str,
    namespace: &str,
    name: &str,
    secret_name: &str,
) -> anyhow::Result<Option<String>> {
    let value: serde_json::Value =
        serde_json::from_str(json).context("the token Secret is not JSON")?;
    if value["type"] != "kubernetes.io/service-account-token"
        || value["metadata"]["annotations"]["kubernetes.io/service-account.name"] != name
    {
        bail!(
            "Secret {namespace}/{secret_name} exists and is not the token of ServiceAccount {namespace}/{name}; lethe left it untouched"
        );
    }
    let Some(encoded) = value["data"]["token"].as_str().filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .context("the token Secret holds no base64 token")?;
    String::from_utf8(bytes)
        .map(Some)
        .context("the token Secret holds no text token")
}
