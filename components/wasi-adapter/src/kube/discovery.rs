//! Resolving (apiVersion, kind) to a resource (plural, scope) through API discovery.
//!
//! A discovery document lists a whole group version, so one request fills the cache for every kind
//! in it; a miss asks again, so kinds added later (new CRDs) are found.

use std::collections::HashMap;

use crate::kube::error::not_found;
use crate::kube::url::{encode, group_version_path};
use lethe_kube_model::KubeError as Error;

/// A resolved kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The apiVersion as asked for, e.g. `batch/v1`.
    pub api_version: String,
    /// The group; empty for the core group.
    pub group: String,
    /// The version.
    pub version: String,
    /// The kind, e.g. `CronJob`.
    pub kind: String,
    /// The resource name, e.g. `cronjobs`.
    pub plural: String,
    /// Whether objects of the kind live in namespaces.
    pub namespaced: bool,
}

impl Resolved {
    /// The collection path, e.g. `/apis/batch/v1/namespaces/ns/cronjobs`. A namespace is
    /// ignored for cluster-scoped kinds (as on the host), and left out for a namespaced kind
    /// listed across all namespaces.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let prefix = group_version_path(&self.group, &self.version);
        match namespace {
            Some(ns) if self.namespaced => {
                format!(
                    "{prefix}/namespaces/{}/{}",
                    encode(ns),
                    encode(&self.plural)
                )
            }
            _ => format!("{prefix}/{}", encode(&self.plural)),
        }
    }

    /// The path of one object, or of its subresource.
    pub fn object_path(
        &self,
        namespace: Option<&str>,
        name: &str,
        subresource: Option<&str>,
    ) -> String {
        let mut path = format!("{}/{}", self.collection_path(namespace), encode(name));
        if let Some(sub) = subresource {
            path.push('/');
            path.push_str(&encode(sub));
        }
        path
    }
}

/// The kinds a group version's discovery document serves (see
/// [`lethe_kube_model::served_kinds`]), resolved for this API version.
pub fn parse(
    api_version: &str,
    group: &str,
    version: &str,
    body: &[u8],
) -> Result<Vec<Resolved>, Error> {
    Ok(lethe_kube_model::served_kinds(api_version, body)?
        .into_iter()
        .map(|r| Resolved {
            api_version: api_version.to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            kind: r.kind,
            plural: r.plural,
            namespaced: r.namespaced,
        })
        .collect())
}

/// The error for a discovery document the server does not have.
pub fn version_not_served(api_version: &str) -> Error {
    not_found(format!(
        "apiVersion {api_version} is not served by the cluster"
    ))
}

/// The error for a kind missing from its group version's document.
pub fn kind_not_served(api_version: &str, kind: &str) -> Error {
    not_found(format!(
        "kind {kind} is not served in apiVersion {api_version}"
    ))
}

/// Resolved kinds by (apiVersion, kind), for the life of the component instance.
#[derive(Debug, Default)]
pub struct DiscoveryCache {
    entries: HashMap<(String, String), Resolved>,
}

impl DiscoveryCache {
    /// The cached resolution of `kind` in `api_version`.
    pub fn get(&self, api_version: &str, kind: &str) -> Option<Resolved> {
        self.entries
            .get(&(api_version.to_owned(), kind.to_owned()))
            .cloned()
    }

    /// Records every kind of one discovery document.
    pub fn fill(&mut self, resolved: &[Resolved]) {
        for r in resolved {
            self.entries
                .insert((r.api_version.clone(), r.kind.clone()), r.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const APPS: &str = r#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"apps/v1","resources":[
        {"name":"deployments","singularName":"deployment","namespaced":true,"kind":"Deployment","verbs":["get"]},
        {"name":"deployments/status","singularName":"","namespaced":true,"kind":"Deployment","verbs":["get"]},
        {"name":"deployments/scale","singularName":"","namespaced":true,"group":"autoscaling","version":"v1","kind":"Scale","verbs":["get"]}]}"#;

    #[test]
    fn discovery_skips_subresources() {
        let kinds = parse("apps/v1", "apps", "v1", APPS.as_bytes()).unwrap();
        assert_eq!(
            kinds,
            vec![Resolved {
                api_version: "apps/v1".into(),
                group: "apps".into(),
                version: "v1".into(),
                kind: "Deployment".into(),
                plural: "deployments".into(),
                namespaced: true,
            }]
        );
        let mut cache = DiscoveryCache::default();
        cache.fill(&kinds);
        assert_eq!(cache.get("apps/v1", "Deployment"), Some(kinds[0].clone()));
        assert_eq!(cache.get("apps/v1", "Scale"), None);
        assert_eq!(cache.get("v1", "Deployment"), None);
    }

    #[test]
    fn malformed_discovery_is_unavailable() {
        assert!(matches!(
            parse("v1", "", "v1", b"<html>"),
            Err(Error::Unavailable(_))
        ));
        assert_eq!(parse("v1", "", "v1", b"{}"), Ok(Vec::new()));
    }

    #[test]
    fn paths() {
        let ns = Resolved {
            api_version: "v1".into(),
            group: String::new(),
            version: "v1".into(),
            kind: "ConfigMap".into(),
            plural: "configmaps".into(),
            namespaced: true,
        };
        assert_eq!(ns.collection_path(None), "/api/v1/configmaps");
        assert_eq!(
            ns.collection_path(Some("kube-system")),
            "/api/v1/namespaces/kube-system/configmaps"
        );
        assert_eq!(
            ns.object_path(Some("a b"), "x:y", Some("status")),
            "/api/v1/namespaces/a%20b/configmaps/x%3Ay/status"
        );
        let cluster = Resolved {
            api_version: "rbac.authorization.k8s.io/v1".into(),
            group: "rbac.authorization.k8s.io".into(),
            version: "v1".into(),
            kind: "ClusterRole".into(),
            plural: "clusterroles".into(),
            namespaced: false,
        };
        assert_eq!(
            cluster.object_path(Some("ignored"), "system:admin", None),
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/system%3Aadmin"
        );
    }
}
