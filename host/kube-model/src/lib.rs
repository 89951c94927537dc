//! The Kubernetes REST semantics behind `lethe:platform/kube`, written once for both of its
//! implementations: the host's (`lethe-kube`, on the `kube` crate) and the `wasi-adapter`
//! component's (over `wasi:http`, for hosts without lethe's capabilities). A component must see the
//! same objects, metadata, errors and delete outcomes on either, so the parts that decide those
//! live here, with no I/O:
//!
//! * [`types`]: the data model of the WIT interface;
//! * [`error`]: [`KubeError`], one variant per WIT error case, and the status mapping;
//! * [`parse`]: API server answers into objects, lists, watch events, delete outcomes and
//!   `Status`es;
//! * [`retry`]: which outcomes of an attempt are repeated, by how far the request got and
//!   whether the call is safe to repeat;
//! * [`check_segment`], [`target_namespace`], [`new_object`], [`create_namespace`]: which
//!   addresses are refused before sending;
//! * [`served_kinds`]: what a discovery document says a group version serves.
//!
//! What the API server itself decides (its admission rules: names, labels, selectors, patches,
//! CronJob schedules) is `lethe-kube-rules`, which this crate does not depend on.

#![warn(missing_docs)]

pub mod error;
pub mod parse;
pub mod retry;
pub mod types;

pub use error::{KubeError, Result};
pub use types::{
    Change, ChangeBatch, ChangeType, Collection, DeleteOptions, DeleteOutcome, Identity,
    ListOptions, Metadata, Object, ObjectList, ObjectRef, PatchKind, PropagationPolicy, Status,
};

/// Checks one segment of an API path (group, version, namespace, name, subresource) before it is
/// put into a URL: empty, `.`, `..`, and values with `/ ? # % \`, whitespace or control characters
/// would address another resource than the caller named, so they are refused as 400 BadRequest.
pub fn check_segment(what: &str, value: &str) -> Result<()> {
    let bad = value.is_empty()
        || value == "."
        || value == ".."
        || value.chars().any(|c| {
            c.is_whitespace() || c.is_control() || matches!(c, '/' | '?' | '#' | '%' | '\\')
        });
    if bad {
        Err(KubeError::bad_request(format!("invalid {what} {value:?}")))
    } else {
        Ok(())
    }
}

/// Checks `target`'s name and, for a `namespaced` kind, its namespace (which such a kind
/// requires); returns the namespace its path uses.
pub fn target_namespace(target: &ObjectRef, namespaced: bool) -> Result<Option<&str>> {
    check_segment("name", &target.name)?;
    if !namespaced {
        return Ok(None);
    }
    let ns = target.namespace.as_deref().ok_or_else(|| {
        KubeError::bad_request(format!(
            "{} {} is namespaced: a namespace is required",
            target.api_version, target.kind
        ))
    })?;
    check_segment("namespace", ns)?;
    Ok(Some(ns))
}

/// The object a create sends, read from its JSON text: the parsed body with the `apiVersion` and
/// `kind` that say where it goes (both required).
pub fn new_object(json: &str) -> Result<(serde_json::Value, String, String)> {
    let body: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| KubeError::bad_request(format!("the object is not valid JSON: {e}")))?;
    let field = |key: &str| {
        body.get(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    if api_version.is_empty() || kind.is_empty() {
        return Err(KubeError::bad_request(
            "the object needs apiVersion and kind",
        ));
    }
    Ok((body, api_version, kind))
}

/// The namespace the path of a create of `body` uses: for a `namespaced` kind its
/// `metadata.namespace` (required, and checked as a path segment); none for a cluster-scoped one.
pub fn create_namespace(body: &serde_json::Value, namespaced: bool) -> Result<Option<&str>> {
    if !namespaced {
        return Ok(None);
    }
    let ns = body
        .pointer("/metadata/namespace")
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| {
            let field = |key: &str| body.get(key).and_then(serde_json::Value::as_str);
            KubeError::bad_request(format!(
                "{} {} is namespaced: metadata.namespace is required",
                field("apiVersion").unwrap_or_default(),
                field("kind").unwrap_or_default()
            ))
        })?;
    check_segment("namespace", ns)?;
    Ok(Some(ns))
}

/// One kind a group version serves, from its discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedKind {
    /// The kind, e.g. `CronJob`.
    pub kind: String,
    /// The resource's plural name, e.g. `cronjobs`.
    pub plural: String,
    /// Whether objects of the kind live in namespaces.
    pub namespaced: bool,
}

/// The kinds an `APIResourceList` (`/api/v1`, `/apis/<group>/<version>`) serves. Subresources
/// (`pods/status`) are not kinds of their own and are skipped; a malformed document is
/// `unavailable`, since the server, not the caller, is at fault.
pub fn served_kinds(api_version: &str, body: &[u8]) -> Result<Vec<ServedKind>> {
    #[derive(serde::Deserialize)]
    struct ResourceList {
        #[serde(default)]
        resources: Vec<ResourceEntry>,
    }
    #[derive(serde::Deserialize)]
    struct ResourceEntry {
        name: String,
        kind: String,
        #[serde(default)]
        namespaced: bool,
    }
    let list: ResourceList = serde_json::from_slice(body).map_err(|e| {
        KubeError::Unavailable(format!(
            "malformed discovery document for {api_version}: {e}"
        ))
    })?;
    Ok(list
        .resources
        .into_iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| ServedKind {
            kind: r.kind,
            plural: r.name,
            namespaced: r.namespaced,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_that_would_change_the_path_are_refused() {
        for bad in [
            "", ".", "..", "a/b", "a?b", "a#b", "a%2fb", "a\\b", "a b", "a\nb",
        ] {
            let err = check_segment("name", bad).expect_err(bad);
            assert!(
                matches!(&err, KubeError::Invalid(s) if s.code == 400),
                "{bad}: {err}"
            );
        }
        for good in ["org-1", "cf.lethe.dev", "v1alpha1", "a.b-c_d"] {
            assert!(check_segment("name", good).is_ok(), "{good}");
        }
    }

    #[test]
    fn namespaced_targets_need_a_namespace_and_cluster_ones_ignore_it() {
        let cm = ObjectRef::namespaced("v1", "ConfigMap", "ns", "c");
        assert_eq!(target_namespace(&cm, true).ok(), Some(Some("ns")));
        assert_eq!(target_namespace(&cm, false).ok(), Some(None));
        let no_ns = ObjectRef::cluster("v1", "ConfigMap", "c");
        assert!(matches!(
            target_namespace(&no_ns, true),
            Err(KubeError::Invalid(_))
        ));
        let bad = ObjectRef::namespaced("v1", "ConfigMap", "a/b", "c");
        assert!(target_namespace(&bad, true).is_err());
    }

    #[test]
    fn discovery_documents_list_kinds_without_subresources() {
        let body = br#"{"resources":[{"name":"pods","kind":"Pod","namespaced":true},
            {"name":"pods/status","kind":"Pod","namespaced":true},
            {"name":"nodes","kind":"Node"}]}"#;
        let kinds = served_kinds("v1", body).expect("parses");
        assert_eq!(kinds.len(), 2);
        assert_eq!(
            (kinds[0].plural.as_str(), kinds[0].namespaced),
            ("pods", true)
        );
        assert_eq!(
            (kinds[1].kind.as_str(), kinds[1].namespaced),
            ("Node", false)
        );
        assert!(matches!(
            served_kinds("v1", b"<html>"),
            Err(KubeError::Unavailable(_))
        ));
    }
}
