//! Applying an application's Kubernetes objects (CRDs, namespaces, roles) to the embedded cluster
//! at start: create each object, or replace it when it already exists, so a restart with newer
//! files updates them.

use std::path::Path;

use anyhow::{Context as _, bail};
use lethe_kube::{Cluster, KubeError, ObjectRef};

/// Applies every object in the JSON file at `path` (one object, or a `v1` `List`).
pub async fn apply_file(cluster: &Cluster, path: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
    for object in objects(value) {
        apply(cluster, object)
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

async fn apply(cluster: &Cluster, mut object: serde_json::Value) -> anyhow::Result<()> {
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
    match client.create(&object.to_string()).await {
        Ok(_) => {
            tracing::debug!("created {} {}", target.kind, target.name);
            Ok(())
        }
        Err(KubeError::Conflict(_)) => {
            let current = client.get(&target).await?;
            object["metadata"]["resourceVersion"] = current.metadata.resource_version.into();
            client.replace(&target, &object.to_string()).await?;
            tracing::debug!("replaced {} {}", target.kind, target.name);
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("creating {} {}", target.kind, target.name)),
    }
}
