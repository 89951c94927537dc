//! Resources defined by CustomResourceDefinitions: their definitions, preferred version and
//! deprecation warnings, and Kubernetes' version order.

use crate::resources::def::{NameRule, ResourceDef, Shape};
use serde_json::{Value, json};
use std::sync::Arc;

/// Definitions derived from one CRD object (one per served version).
pub fn defs_from_crd(crd: &Value) -> Vec<Arc<ResourceDef>> {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or_default();
    let kind = names["kind"].as_str().unwrap_or_default();
    if group.is_empty() || plural.is_empty() || kind.is_empty() {
        return vec![];
    }
    let singular = names["singular"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let namespaced = spec["scope"].as_str() != Some("Cluster");
    let short = crate::util::string_list(&names["shortNames"]);
    let categories = crate::util::string_list(&names["categories"]);
    let mut out = vec![];
    if let Some(versions) = spec["versions"].as_array() {
        for v in versions {
            if v["served"].as_bool() == Some(false) {
                continue;
            }
            let Some(vname) = v["name"].as_str() else {
                continue;
            };
            let status = v["subresources"]["status"].is_object()
                || spec["subresources"]["status"].is_object();
            out.push(Arc::new(ResourceDef {
                group: group.into(),
                version: vname.into(),
                plural: plural.into(),
                singular: singular.clone(),
                kind: kind.into(),
                namespaced,
                short_names: short.clone(),
                categories: categories.clone(),
                status_subresource: status,
                has_generation: true,
                name_rule: NameRule::Subdomain,
                virtual_create_only: false,
                custom: true,
                create_on_update: false,
                schema: v["schema"]["openAPIV3Schema"]
                    .is_object()
                    .then(|| Arc::new(v["schema"]["openAPIV3Schema"].clone())),
                storage_key: format!("{group}/{plural}"),
                shape: Shape::Stored,
            }));
        }
    }
    out
}

/// The preferred (storage, else first served) version of a CRD.
pub fn crd_preferred_version(crd: &Value) -> Option<String> {
    let versions = crd["spec"]["versions"].as_array()?;
    versions
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true) && v["served"].as_bool() != Some(false))
        .or_else(|| {
            versions
                .iter()
                .find(|v| v["served"].as_bool() != Some(false))
        })
        .and_then(|v| v["name"].as_str().map(str::to_string))
}

/// The warning every request to a deprecated version of a CRD gets: its own
/// `deprecationWarning`, or "group/version Kind is deprecated", pointing at the highest served
/// version that is not deprecated and ranks above it, as the real server words it.
pub fn crd_deprecation_warning(crd: &Value, version: &str) -> Option<String> {
    let spec = &crd["spec"];
    let versions = spec["versions"].as_array()?;
    let this = versions.iter().find(|v| v["name"] == version)?;
    if this["deprecated"] != json!(true) {
        return None;
    }
    if let Some(custom) = this["deprecationWarning"].as_str() {
        return Some(custom.to_string());
    }
    let group = spec["group"].as_str().unwrap_or_default();
    let kind = spec["names"]["kind"].as_str().unwrap_or_default();
    let mut warning = format!("{group}/{version} {kind} is deprecated");
    let better = versions
        .iter()
        .filter(|v| v["served"] == json!(true) && v["deprecated"] != json!(true))
        .filter_map(|v| v["name"].as_str())
        .filter(|v| compare_kube_versions(version, v).is_lt())
        .max_by(|a, b| compare_kube_versions(a, b));
    if let Some(better) = better {
        warning.push_str(&format!("; use {group}/{better} {kind}"));
    }
    Some(warning)
}

/// `version.CompareKubeAwareVersionStrings`: versions of the form `v1`, `v2beta3`, `v1alpha1`
/// rank by stability, then major, then minor number, above every other name; other names rank
/// in reverse alphabetical order (so sorting by descending rank lists them alphabetically).
pub fn compare_kube_versions(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    /// (stability: alpha 0, beta 1, GA 2; major; minor)
    fn parse(v: &str) -> Option<(u8, u64, u64)> {
        let rest = v.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (major, tail) = rest.split_at(digits);
        if major.is_empty() {
            return None;
        }
        let major = major.parse().ok()?;
        if tail.is_empty() {
            return Some((2, major, 0));
        }
        let (stability, minor) = if let Some(m) = tail.strip_prefix("beta") {
            (1, m)
        } else if let Some(m) = tail.strip_prefix("alpha") {
            (0, m)
        } else {
            return None;
        };
        if minor.is_empty() || !minor.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((stability, major, minor.parse().ok()?))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (None, None) => b.cmp(a),
    }
}

#[cfg(test)]
mod version_order_tests {
    use super::{compare_kube_versions, crd_deprecation_warning};
    use serde_json::json;

    #[test]
    fn deprecated_versions_point_at_the_best_version_that_is_not() {
        let crd = json!({"spec": {"group": "x.dev", "names": {"kind": "Gadget"}, "versions": [
            {"name": "v1alpha1", "served": true, "deprecated": true},
            {"name": "v1beta1", "served": true, "deprecated": true,
             "deprecationWarning": "v1beta1 goes away in May"},
            {"name": "v1", "served": true},
            {"name": "v2", "served": false},
        ]}});
        assert_eq!(
            crd_deprecation_warning(&crd, "v1alpha1").as_deref(),
            Some("x.dev/v1alpha1 Gadget is deprecated; use x.dev/v1 Gadget")
        );
        assert_eq!(
            crd_deprecation_warning(&crd, "v1beta1").as_deref(),
            Some("v1beta1 goes away in May")
        );
        assert_eq!(crd_deprecation_warning(&crd, "v1"), None);
    }

    #[test]
    fn versions_sort_by_stability_then_number_then_name() {
        let mut versions = vec![
            "v1alpha1",
            "foo",
            "v2beta1",
            "v1",
            "v10",
            "v11alpha2",
            "v12alpha1",
            "v2",
            "bar",
            "v1beta2",
            "v3beta1",
        ];
        versions.sort_by(|a, b| compare_kube_versions(b, a));
        assert_eq!(
            versions,
            [
                "v10",
                "v2",
                "v1",
                "v3beta1",
                "v2beta1",
                "v1beta2",
                "v12alpha1",
                "v11alpha2",
                "v1alpha1",
                "bar",
                "foo"
            ]
        );
    }
}
