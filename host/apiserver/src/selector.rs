//! Field selectors, and which fields each kind lets a list select on; label selectors are
//! `lethe-kube-model`'s ([`LabelSelector`]).

pub use lethe_kube_rules::selector::LabelSelector;
use serde_json::{Value, json};

/// A parsed field selector: `path=value`, `path==value`, `path!=value`, comma separated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector {
    reqs: Vec<(Vec<String>, bool, String)>,
}

impl FieldSelector {
    /// Parses a `fieldSelector`: comma-separated `path=value`, `path==value` or `path!=value`
    /// terms; empty selects everything. Err carries the real server's message for a term without
    /// an operator or a path. Whether the fields may be selected on is checked separately.
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut reqs = vec![];
        if s.trim().is_empty() {
            return Ok(FieldSelector { reqs });
        }
        for part in s.split(',') {
            let p = part.trim();
            let (k, eq, v) = if let Some(i) = p.find("!=") {
                (&p[..i], false, &p[i + 2..])
            } else if let Some(i) = p.find("==") {
                (&p[..i], true, &p[i + 2..])
            } else if let Some(i) = p.find('=') {
                (&p[..i], true, &p[i + 1..])
            } else {
                return Err(format!("invalid selector: '{p}'; can't understand '{p}'"));
            };
            let k = k.trim();
            if k.is_empty() {
                return Err(format!("invalid field selector {p:?}"));
            }
            reqs.push((
                k.split('.').map(str::to_string).collect(),
                eq,
                v.trim().to_string(),
            ));
        }
        Ok(FieldSelector { reqs })
    }

    /// Whether the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The value `field` must equal, if the selector requires one (Go's `RequiresExactMatch`).
    pub fn exact_match(&self, field: &str) -> Option<&str> {
        self.reqs
            .iter()
            .find(|(path, eq, _)| *eq && path.join(".") == field)
            .map(|(_, _, value)| value.as_str())
    }

    /// The field paths the selector names (`metadata.name`, ...).
    pub fn fields(&self) -> impl Iterator<Item = String> + '_ {
        self.reqs.iter().map(|(path, _, _)| path.join("."))
    }

    /// Whether `obj` satisfies every term: the value at each path, as text (absent is empty),
    /// equals the wanted one, or differs from it for `!=`.
    pub fn matches(&self, obj: &Value) -> bool {
        self.reqs.iter().all(|(path, eq, want)| {
            let have = match path.iter().fold(obj, |v, seg| &v[seg.as_str()]) {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            (have == *want) == *eq
        })
    }
}

/// Whether the real server lets a list or watch of `group`/`plural` select on `field`: every
/// kind knows `metadata.name` and (but for Namespaces) `metadata.namespace`, a few
/// register more (the field-label conversion functions of their API group); anything else is
/// refused with "field label not supported".
pub fn field_label_supported(group: &str, plural: &str, field: &str) -> bool {
    let extra: &[&str] = match (group, plural) {
        ("", "namespaces") => return matches!(field, "metadata.name" | "status.phase"),
        ("", "secrets") => &["type"],
        ("", "services") => &["spec.clusterIP", "spec.type"],
        ("", "events") => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        _ => &[],
    };
    matches!(field, "metadata.name" | "metadata.namespace") || extra.contains(&field)
}

/// Why list and watch of a built-in kind refuse to select on `field`, in the words of the kind's
/// field-label conversion; a kind that registers none gets the scheme's default, which knows only
/// the two metadata fields.
pub fn field_label_error(group: &str, plural: &str, field: &str) -> String {
    match (group, plural) {
        ("", "namespaces" | "secrets" | "services" | "events") => {
            format!("field label not supported: {field}")
        }
        _ => format!(
            "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
            json!(field)
        ),
    }
}

/// The field labels a CRD version declares in `selectableFields` (each `jsonPath` without its
/// leading dot), which list and watch of its custom resources may select on.
pub fn crd_selectable_fields(crd: &Value, version: &str) -> Vec<String> {
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["name"].as_str() == Some(version))
        .flat_map(|v| v["selectableFields"].as_array().into_iter().flatten())
        .filter_map(|f| f["jsonPath"].as_str())
        .map(|p| p.trim().trim_start_matches('.').to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Whether a structured `LabelSelector` (`matchLabels` and `matchExpressions`, as in a
/// Deployment's `spec.selector` or a PodDisruptionBudget's) selects an object with `labels`.
/// An unknown operator selects nothing.
pub fn label_selector_matches(sel: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_ok = sel["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let exprs_ok = sel["matchExpressions"].as_array().is_none_or(|es| {
        es.iter().all(|e| {
            let key = e["key"].as_str().unwrap_or_default();
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str() {
                Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => !label(key).is_some_and(|v| values.contains(&v)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                _ => false,
            }
        })
    });
    labels_ok && exprs_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn crd_versions_declare_selectable_fields() {
        let crd = json!({"spec": {"versions": [
            {"name": "v1", "selectableFields": [{"jsonPath": ".spec.color"}, {"jsonPath": ".spec.size"}]},
            {"name": "v2"}]}});
        assert_eq!(
            crd_selectable_fields(&crd, "v1"),
            ["spec.color", "spec.size"]
        );
        assert!(crd_selectable_fields(&crd, "v2").is_empty());
        let o = json!({"spec": {"color": "red", "size": 3, "on": true}});
        assert!(FieldSelector::parse("spec.size=3").unwrap().matches(&o));
        assert!(FieldSelector::parse("spec.on=true").unwrap().matches(&o));
        assert!(FieldSelector::parse("spec.missing=").unwrap().matches(&o));
        assert!(
            FieldSelector::parse("spec.color!=blue")
                .unwrap()
                .matches(&o)
        );
    }

    #[test]
    fn field_selector_paths() {
        let o = json!({"metadata": {"name": "a", "namespace": "ns"}});
        let f = FieldSelector::parse("metadata.name=a,metadata.namespace!=x").unwrap();
        assert!(f.matches(&o));
        assert!(!FieldSelector::parse("metadata.name=b").unwrap().matches(&o));
        assert!(FieldSelector::parse("bogus").is_err());
    }

    #[test]
    fn field_labels_are_those_the_kind_registers() {
        assert!(field_label_supported("", "configmaps", "metadata.name"));
        assert!(field_label_supported(
            "",
            "configmaps",
            "metadata.namespace"
        ));
        assert!(!field_label_supported("", "configmaps", "data.x"));
        assert!(field_label_supported("", "secrets", "type"));
        assert!(!field_label_supported(
            "",
            "namespaces",
            "metadata.namespace"
        ));
        assert!(field_label_supported("", "namespaces", "status.phase"));
        assert!(field_label_supported("", "events", "involvedObject.name"));
        assert!(!field_label_supported(
            "batch",
            "cronjobs",
            "status.successful"
        ));
    }

    #[test]
    fn unsupported_field_labels_are_refused_in_each_kinds_words() {
        assert_eq!(
            field_label_error("", "configmaps", "data.x"),
            "\"data.x\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert_eq!(
            field_label_error("", "secrets", "data.x"),
            "field label not supported: data.x"
        );
    }
}
