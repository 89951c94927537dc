//! Jobs: the validation of a job spec (shared with CronJobs' job templates) and what an update
//! of a Job may change.

use crate::kinds::causes::nonnegative;
use crate::kinds::pod_spec::pod_template_causes;
use crate::status::Cause;
use crate::util::{set_in, strip_nulls};
use crate::validation;
use serde_json::{Value, json};

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

/// `validateJobSpec`: the checks a Job and a CronJob's job template share. `path` is where the
/// job spec sits (`spec`, or `spec.jobTemplate.spec`).
pub(crate) fn job_spec_causes(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
    for key in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        nonnegative(spec, key, path, causes);
    }
    let set = |key: &str| !spec[key].is_null();
    if set("maxFailedIndexes") && !set("backoffLimitPerIndex") {
        causes.push(validation::required(
            &format!("{path}.backoffLimitPerIndex"),
            "when maxFailedIndexes is specified",
        ));
    }
    match spec["completionMode"].as_str() {
        None | Some("NonIndexed") => {
            for key in ["backoffLimitPerIndex", "maxFailedIndexes"] {
                if set(key) {
                    causes.extend(validation::invalid_causes(
                        &format!("{path}.{key}"),
                        &spec[key],
                        vec!["requires indexed completion mode".into()],
                    ));
                }
            }
        }
        Some("Indexed") => {
            if !set("completions") {
                causes.push(validation::required(
                    &format!("{path}.completions"),
                    "when completion mode is Indexed",
                ));
            }
        }
        Some(mode) => causes.push(validation::not_supported(
            &format!("{path}.completionMode"),
            &json!(mode),
            &["NonIndexed", "Indexed"],
        )),
    }
    let template = format!("{path}.template");
    pod_template_causes(&spec["template"], &template, causes);
    // The pod defaults fill in `Always`, so a template that says nothing is told what it must say.
    match spec["template"]["spec"]["restartPolicy"].as_str() {
        None | Some("") | Some("Always") => causes.push(validation::required(
            &format!("{template}.spec.restartPolicy"),
            "valid values: \"OnFailure\", \"Never\"",
        )),
        Some("OnFailure") | Some("Never") => {}
        Some(restart) => causes.push(validation::not_supported(
            &format!("{template}.spec.restartPolicy"),
            &json!(restart),
            &["OnFailure", "Never"],
        )),
    }
}
