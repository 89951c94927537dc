//! Deployments: their spec's validation.

use crate::kinds::causes::nonnegative;
use crate::kinds::pod_spec::pod_template_causes;
use crate::kinds::strategy::Strategy;
use crate::status::Cause;
use crate::validation;
use serde_json::{Value, json};

/// The most common of ValidateDeploymentSpec's checks: replicas, a selector that is not empty
/// and matches the template's labels, the pod template, and a restart policy of `Always`.
pub(crate) fn deployment_spec_causes(spec: &Value, causes: &mut Vec<Cause>) {
    for key in ["replicas", "minReadySeconds", "revisionHistoryLimit"] {
        nonnegative(spec, key, "spec", causes);
    }
    let selector = &spec["selector"];
    let labels = &spec["template"]["metadata"]["labels"];
    if selector.is_null() {
        causes.push(validation::required("spec.selector", ""));
    } else if selector_is_empty(selector) {
        let why = "empty selector is invalid for deployment";
        causes.push(validation::invalid("spec.selector", selector, why));
    } else if !crate::selector::label_selector_matches(selector, labels) {
        causes.push(validation::invalid(
            "spec.template.metadata.labels",
            go_string_map(labels),
            "`selector` does not match template `labels`",
        ));
    }
    pod_template_causes(&spec["template"], "spec.template", causes);
    match spec["template"]["spec"]["restartPolicy"].as_str() {
        None | Some("") | Some("Always") => {}
        Some(restart) => causes.push(validation::not_supported(
            "spec.template.spec.restartPolicy",
            &json!(restart),
            &["Always"],
        )),
    }
}

fn selector_is_empty(selector: &Value) -> bool {
    let none = |key: &str| match &selector[key] {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    };
    none("matchLabels") && none("matchExpressions")
}

/// A string map as Go's `%v` prints a `map[string]string`: `map[a:b c:d]`, keys sorted.
fn go_string_map(map: &Value) -> String {
    let mut pairs: Vec<String> = map
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}:{}", v.as_str().unwrap_or_default()))
        .collect();
    pairs.sort();
    format!("map[{}]", pairs.join(" "))
}

/// Deployments: the spec's rules.
pub(crate) struct DeploymentStrategy;

impl Strategy for DeploymentStrategy {
    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        deployment_spec_causes(&obj["spec"], causes);
    }
}
