//! Resolving (apiVersion, kind) to a resource (plural, scope) through API discovery, cached.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use kube::core::ApiResource;

use crate::check_segment;
use crate::error::{KubeError, Result};
use crate::transport::{self, Safety};
use crate::types::Status;

/// A resolved kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// Group, version, kind and plural.
    pub resource: ApiResource,
    /// Whether objects of the kind live in namespaces.
    pub namespaced: bool,
}

impl Resolved {
    /// The collection path, e.g. `/apis/batch/v1/namespaces/ns/cronjobs`. `namespace` is
    /// ignored for cluster-scoped kinds.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let r = &self.resource;
        let prefix = if r.group.is_empty() {
            format!("/api/{}", r.version)
        } else {
            format!("/apis/{}/{}", r.group, r.version)
        };
        match namespace {
            Some(ns) if self.namespaced => format!("{prefix}/namespaces/{ns}/{}", r.plural),
            _ => format!("{prefix}/{}", r.plural),
        }
    }

    /// An object of this kind, from the server's answer.
    pub fn object(&self, text: String) -> Result<crate::types::Object> {
        lethe_kube_model::parse::object(text, &self.resource.api_version, &self.resource.kind)
    }
}

/// The discovery cache. Entries are filled a whole group version at a time and refreshed on a
/// miss, so kinds created later (CRDs) are found.
#[derive(Debug, Default)]
pub(crate) struct DiscoveryCache {
    entries: RwLock<HashMap<(String, String), Resolved>>,
}

fn not_found(message: String) -> KubeError {
    KubeError::NotFound(Status {
        code: 404,
        reason: "NotFound".into(),
        message,
    })
}

impl DiscoveryCache {
    /// Resolves `kind` in `api_version`, asking the server (along `route`) on a cache miss: a read
    /// of `/api` or `/apis/<group>/<version>`, which every authenticated identity may make
    /// (SECURITY.md R2).
    pub async fn resolve(
        &self,
        route: &transport::Route<'_>,
        api_version: &str,
        kind: &str,
    ) -> Result<Resolved> {
        let key = (api_version.to_owned(), kind.to_owned());
        let cached = self
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
            .cloned();
        if let Some(hit) = cached {
            return Ok(hit);
        }
        if kind.is_empty() {
            return Err(KubeError::bad_request("empty kind"));
        }
        let (group, version) = match api_version.split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", api_version),
        };
        if !group.is_empty() {
            check_segment("API group", group)?;
        }
        check_segment("API version", version)?;
        let path = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let answer = transport::call(route, Safety::Repeatable, || {
            http::Request::get(path.as_str())
                .header(http::header::ACCEPT, "application/json")
                .body(Vec::new())
                .map_err(|e| KubeError::bad_request(e.to_string()))
        })
        .await
        .map_err(|e| match e {
            KubeError::NotFound(_) => not_found(format!(
                "apiVersion {api_version} is not served by the cluster"
            )),
            other => other,
        })?;
        let kinds = lethe_kube_model::served_kinds(api_version, &answer.body)?;
        let mut found = None;
        {
            let mut entries = self.entries.write().unwrap_or_else(PoisonError::into_inner);
            for r in kinds {
                let resolved = Resolved {
                    resource: ApiResource {
                        group: group.to_owned(),
                        version: version.to_owned(),
                        api_version: api_version.to_owned(),
                        kind: r.kind.clone(),
                        plural: r.plural,
                    },
                    namespaced: r.namespaced,
                };
                if r.kind == kind {
                    found = Some(resolved.clone());
                }
                entries.insert((api_version.to_owned(), r.kind), resolved);
            }
        }
        found.ok_or_else(|| {
            not_found(format!(
                "kind {kind} is not served in apiVersion {api_version}"
            ))
        })
    }
}
