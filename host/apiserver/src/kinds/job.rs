//! Jobs: what an update may change.

use crate::status::Cause;
use crate::util::{set_in, strip_nulls};
use crate::validation;
use serde_json::Value;

/// `ValidateConfigMapUpdate`, `ValidateSecretUpdate` and `ValidateRoleBindingUpdate`: a binding
/// keeps its role, a Secret keeps its type, and a
/// ConfigMap or Secret marked `immutable` keeps its contents and the mark. Contents are compared
/// as the server compares them, the stored side without empty maps (storage drops them) and the
/// new side as sent, so `data: {}` on an immutable object without data is a change.
/// What a Job's update may not change, as ValidateJobSpecUpdate checks it, in its order: the
/// completions (but in tandem with the parallelism of an Indexed Job), the selector, the pod
/// template (whose scheduling directives, labels and annotations a suspended Job that never
/// started may change), the completion mode and the other policies.
pub(crate) fn job_update_causes(old: &Value, new: &Value) -> Vec<Cause> {
    let (old_spec, spec) = (&old["spec"], &new["spec"]);
    let invalid = |field: &str, value: &Value, why: &str| {
        validation::invalid_causes(&format!("spec.{field}"), value, vec![why.to_string()])
    };
    let immutable = |field: &str, value: &Value| invalid(field, value, "field is immutable");
    let mut causes = vec![];
    if spec["completions"] != old_spec["completions"] {
        if spec["completionMode"] != "Indexed" {
            causes.extend(immutable("completions", &spec["completions"]));
        } else if spec["completions"] != spec["parallelism"] {
            causes.extend(invalid(
                "completions",
                &spec["completions"],
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    }
    if spec["selector"] != old_spec["selector"] {
        causes.extend(immutable("selector", &spec["selector"]));
    }
    let mut old_template = old_spec["template"].clone();
    let never_started = old["status"]["startTime"].is_null();
    if old_spec["suspend"] == true && never_started {
        let template = &spec["template"];
        for path in [
            &["metadata", "labels"][..],
            &["metadata", "annotations"],
            &["spec", "nodeSelector"],
            &["spec", "tolerations"],
            &["spec", "schedulingGates"],
            &["spec", "affinity"],
        ] {
            let wanted = path.iter().fold(template, |v, k| &v[*k]).clone();
            set_in(&mut old_template, path, wanted);
        }
    }
    strip_nulls(&mut old_template);
    let mut template = spec["template"].clone();
    strip_nulls(&mut template);
    if template != old_template {
        causes.extend(immutable("template", &spec["template"]));
    }
    for field in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ] {
        if spec[field] != old_spec[field] {
            causes.extend(immutable(field, &spec[field]));
        }
    }
    causes
}
