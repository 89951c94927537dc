//! The Kubernetes REST semantics behind `lethe:platform/kube`, written once for both of its
//! implementations: the host's (`lethe-kube`, on the `kube` crate) and the `wasi-adapter`
//! component's (over `wasi:http`, for hosts without lethe's capabilities). A component must see the
//! same objects, metadata, errors and delete outcomes on either, so the parts that decide those
//! live here, with no I/O:
//!
//! * [`types`]: the data model of the WIT interface;
//! * [`error`]: [`KubeError`], one variant per WIT error case, and the status mapping;
//! * [`parse`]: API server answers into objects, lists, delete outcomes and `Status`es;
//! * [`check_segment`]: which names, namespaces and API path segments are refused before sending.

#![warn(missing_docs)]

pub mod error;
pub mod parse;
pub mod types;

pub use error::{KubeError, Result};
pub use types::{
    DeleteOptions, DeleteOutcome, Identity, ListOptions, Metadata, Object, ObjectList, ObjectRef,
    PatchKind, PropagationPolicy, Status,
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
}
