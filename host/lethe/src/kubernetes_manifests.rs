//! Applying an application's Kubernetes objects (CRDs, namespaces, roles) to the embedded cluster
//! at start: create each object, or, when it already exists and is lethe's (labelled
//! `app.kubernetes.io/managed-by: lethe`), apply it server-side as the field manager `lethe`, so a
//! restart with newer files updates them and a restart with the same files changes nothing; an
//! object of that name that is not lethe's stops the start, untouched (SECURITY.md H1).
//!
//! The apply carries the resourceVersion lethe judged, so an object that changed hands between
//! the read and the write is never taken over: the conflict sends the object round again.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use lethe_kube::{Cluster, KubeError, ObjectRef};
use lethe_retry::{Budget, Policy, Setback};

/// The label every object of lethe's manifests carries, and that a replace requires.
const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "lethe");

/// Applies every object in the file at `path`: JSON (one object, or a `v1` `List`) or, for a
/// `.yaml`/`.yml` file, YAML documents (each one object or a `List`), as `kubectl apply -f`
/// takes them. An API server that fails is waited for, [`DEFAULT_PATIENCE`] per object.
pub async fn apply_file(cluster: &Cluster, path: &Path) -> anyhow::Result<()> {
    apply_file_within(cluster, path, DEFAULT_PATIENCE).await
}

/// [`apply_file`], waiting at most `patience` per object for an API server that fails (503s,
/// timeouts) before giving up: `lethe sync --once` from a CronJob would rather fail fast.
pub async fn apply_file_within(
    cluster: &Cluster,
    path: &Path,
    patience: Duration,
) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let is_yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
    let values: Vec<serde_json::Value> = if is_yaml {
        let mut values = Vec::new();
        for document in serde_norway::Deserializer::from_str(&text) {
            let value: serde_json::Value = serde::Deserialize::deserialize(document)
                .with_context(|| format!("{} is not YAML of Kubernetes objects", path.display()))?;
            if !value.is_null() {
                values.push(value);
            }
        }
        values
    } else {
        vec![
            serde_json::from_str(&text)
                .with_context(|| format!("{} is not JSON", path.display()))?,
        ]
    };
    for object in values.into_iter().flat_map(objects) {
        apply(cluster, object, patience)
            .await
            .with_context(|| format!("applying {}", path.display()))?;
    }
    Ok(())
}

fn objects(value: serde_json::Value) -> Vec<serde_json::Value> {
    if value.get("kind").and_then(|k| k.as_str()) == Some("List")
        && let Some(serde_json::Value::Array(items)) = value.get("items")
    {
        return items.clone();
    }
    vec![value]
}

async fn apply(
    cluster: &Cluster,
    mut object: serde_json::Value,
    patience: Duration,
) -> anyhow::Result<()> {
    let field =
        |o: &serde_json::Value, p: &str| o.pointer(p).and_then(|v| v.as_str()).map(str::to_string);
    let (Some(api_version), Some(kind), Some(name)) = (
        field(&object, "/apiVersion"),
        field(&object, "/kind"),
        field(&object, "/metadata/name"),
    ) else {
        bail!("an object lacks apiVersion, kind or metadata.name");
    };
    let target = ObjectRef {
        api_version,
        kind,
        namespace: field(&object, "/metadata/namespace"),
        name,
    };
    let client = cluster.privileged();
    // Every object here is lethe's by name and label, so an attempt whose outcome is unknown (a
    // 503 to a create, a dropped connection) is safe to make again: the next one re-reads and
    // finds either nothing, or lethe's own object to replace. A failing API server at start is
    // waited for, within `patience`, instead of ending the start.
    let deadline = Instant::now() + patience;
    let mut budget = Budget::new(START_RETRY);
    loop {
        match apply_once(&client, &target, &mut object).await {
            Ok(Applied::Done) => return Ok(()),
            Ok(Applied::NotOurs) => bail!(
                "{} {} exists and is not lethe's (it lacks {}={}); lethe left it untouched",
                target.kind,
                target.name,
                MANAGED_BY.0,
                MANAGED_BY.1
            ),
            // Conflict: the object changed since it was read (or a create raced with an earlier
            // attempt that did land): judge it afresh.
            Err(
                e @ (KubeError::Unavailable(_) | KubeError::Timeout(_) | KubeError::Conflict(_)),
            ) => {
                let time_left = deadline.saturating_duration_since(Instant::now());
                let Some(delay) =
                    budget.next(Setback::Failed, None, Some(time_left), rand::random())
                else {
                    return Err(e)
                        .with_context(|| format!("applying {} {}", target.kind, target.name));
                };
                tracing::warn!(
                    "applying {} {}: {e}; trying again in {} ms",
                    target.kind,
                    target.name,
                    delay.as_millis()
                );
                tokio::time::sleep(delay).await;
            }
            Err(e) => {
                return Err(e).with_context(|| format!("applying {} {}", target.kind, target.name));
            }
        }
    }
}

/// How long the start waits by default for a failing API server while it applies an object of
/// the manifests.
pub const DEFAULT_PATIENCE: Duration = Duration::from_secs(120);

/// The backoff while it waits: bounded by the patience alone.
const START_RETRY: Policy =
    Policy::until_deadline(Duration::from_millis(100), Duration::from_secs(5));

/// What one attempt to apply an object found.
enum Applied {
    /// Created, or replaced because it was lethe's.
    Done,
    /// An object of that name exists that is not lethe's.
    NotOurs,
}

/// Creates `object`, or applies it over the object of that name when that one is lethe's.
async fn apply_once(
    client: &lethe_kube::KubeClient,
    target: &ObjectRef,
    object: &mut serde_json::Value,
) -> Result<Applied, KubeError> {
    let current = match client.get(target).await {
        Ok(current) => current,
        Err(KubeError::NotFound(_)) => {
            // A create whose outcome is unknown comes back here through the retry, and then
            // finds lethe's own object.
            client.create(&object.to_string()).await?;
            tracing::debug!("created {} {}", target.kind, target.name);
            return Ok(Applied::Done);
        }
        Err(e) => return Err(e),
    };
    // Only what lethe applied before (it carries lethe's label, as every object in its files
    // does) is applied over; anything else of that name is reported, not overwritten.
    let ours = current
        .metadata
        .labels
        .iter()
        .any(|(k, v)| k == MANAGED_BY.0 && v == MANAGED_BY.1);
    if !ours {
        return Ok(Applied::NotOurs);
    }
    object["metadata"]["resourceVersion"] = current.metadata.resource_version.into();
    client
        .apply(target, &object.to_string(), FIELD_MANAGER)
        .await?;
    tracing::debug!("applied {} {}", target.kind, target.name);
    Ok(Applied::Done)
}

/// The field manager of lethe's server-side applies.
const FIELD_MANAGER: &str = "lethe";

#[cfg(test)]
mod tests {
    use super::*;

    /// A restart replaces what lethe applied before, but an object of the same name that is not
    /// lethe's stops the start and stays as it was.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn only_lethes_own_objects_are_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let server = lethe_apiserver::start(lethe_apiserver::ApiServerConfig {
            data_dir: Some(dir.path().join("cluster")),
            listen: "127.0.0.1:0".parse().expect("addr"),
            tls: false,
            plain_listen: None,
            faults: Default::default(),
        })
        .await
        .expect("embedded cluster");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, server.kubeconfig_yaml()).expect("kubeconfig");
        let cluster = Cluster::from_kubeconfig(&kubeconfig, Default::default())
            .await
            .expect("cluster");
        let config_map = |name: &str, labels: serde_json::Value, value: &str| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default", "labels": labels},
                "data": {"k": value}})
        };
        let mark = serde_json::json!({MANAGED_BY.0: MANAGED_BY.1});
        let file = dir.path().join("objects.json");
        let apply = |objects: Vec<serde_json::Value>| {
            std::fs::write(
                &file,
                serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects})
                    .to_string(),
            )
            .expect("write");
            apply_file(&cluster, &file)
        };
        let value = |name: &str| {
            let target = ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("default".into()),
                name: name.into(),
            };
            let client = cluster.privileged();
            async move {
                let o = client.get(&target).await.expect("get");
                let v: serde_json::Value = serde_json::from_str(&o.json).expect("json");
                v["data"]["k"].clone()
            }
        };
        apply(vec![config_map("ours", mark.clone(), "1")])
            .await
            .expect("created");
        apply(vec![config_map("ours", mark.clone(), "2")])
            .await
            .expect("applied over");
        assert_eq!(value("ours").await, "2");
        // The same files again change nothing: the apply is a no-op, as on a real server.
        let version = || {
            let target = ObjectRef {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("default".into()),
                name: "ours".into(),
            };
            let client = cluster.privileged();
            async move {
                client
                    .get(&target)
                    .await
                    .expect("get")
                    .metadata
                    .resource_version
            }
        };
        let before = version().await;
        apply(vec![config_map("ours", mark.clone(), "2")])
            .await
            .expect("applied again");
        assert_eq!(
            version().await,
            before,
            "a repeated apply wrote a new version"
        );
        cluster
            .privileged()
            .create(&config_map("theirs", serde_json::json!({}), "theirs").to_string())
            .await
            .expect("a foreign object");
        let e = apply(vec![config_map("theirs", mark, "lethe")])
            .await
            .expect_err("a foreign object in the way");
        assert!(
            format!("{e:#}").contains("ConfigMap theirs exists and is not lethe's"),
            "{e:#}"
        );
        assert_eq!(value("theirs").await, "theirs");
        server.shutdown().await;
    }
}
