//! Jobs: the validation of a job spec (shared with CronJobs' job templates) and what an update
//! of a Job may change.

use crate::kinds::causes::{nonnegative, obj_mut};
use crate::kinds::pod_spec::{default, pod_template_causes, template_defaults};
use crate::kinds::strategy::{DefaultPropagation, Strategy};
use crate::status::Cause;
use crate::util::{ensure_obj, meta_str, set_in, strip_nulls};
use crate::validation;
use serde_json::{Value, json};

/// What a Job's update may not change, as ValidateJobSpecUpdate checks it, in its order: the
/// completions (but in tandem with the parallelism of an Indexed Job), the selector, the pod
/// template (whose scheduling directives, labels and annotations a suspended Job that never
/// started may change), the completion mode and the other policies.
pub(crate) fn job_update_causes(old: &Value, new: &Value) -> Vec<Cause> {
    let (old_spec, spec) = (&old["spec"], &new["spec"]);
    let invalid = |field: &str, value: &Value, why: &str| {
        validation::invalid(format!("spec.{field}"), value, why)
    };
    let immutable = |field: &str, value: &Value| invalid(field, value, "field is immutable");
    let mut causes = vec![];
    if spec["completions"] != old_spec["completions"] {
        if spec["completionMode"] != "Indexed" {
            causes.push(immutable("completions", &spec["completions"]));
        } else if spec["completions"] != spec["parallelism"] {
            causes.push(invalid(
                "completions",
                &spec["completions"],
                "can only be modified in tandem with spec.parallelism",
            ));
        }
    }
    if spec["selector"] != old_spec["selector"] {
        causes.push(immutable("selector", &spec["selector"]));
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
        causes.push(immutable("template", &spec["template"]));
    }
    for field in [
        "completionMode",
        "podFailurePolicy",
        "backoffLimitPerIndex",
        "managedBy",
        "successPolicy",
    ] {
        if spec[field] != old_spec[field] {
            causes.push(immutable(field, &spec[field]));
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
            format!("{path}.backoffLimitPerIndex"),
            "when maxFailedIndexes is specified",
        ));
    }
    match spec["completionMode"].as_str() {
        None | Some("NonIndexed") => {
            for key in ["backoffLimitPerIndex", "maxFailedIndexes"] {
                if set(key) {
                    let why = "requires indexed completion mode";
                    causes.push(validation::invalid(
                        format!("{path}.{key}"),
                        &spec[key],
                        why,
                    ));
                }
            }
        }
        Some("Indexed") => {
            if !set("completions") {
                causes.push(validation::required(
                    format!("{path}.completions"),
                    "when completion mode is Indexed",
                ));
            }
        }
        Some(mode) => causes.push(validation::not_supported(
            format!("{path}.completionMode"),
            &json!(mode),
            &["NonIndexed", "Indexed"],
        )),
    }
    let template = format!("{path}.template");
    pod_template_causes(&spec["template"], &template, causes);
    // The pod defaults fill in `Always`, so a template that says nothing is told what it must say.
    match spec["template"]["spec"]["restartPolicy"].as_str() {
        None | Some("") | Some("Always") => causes.push(validation::required(
            format!("{template}.spec.restartPolicy"),
            "valid values: \"OnFailure\", \"Never\"",
        )),
        Some("OnFailure") | Some("Never") => {}
        Some(restart) => causes.push(validation::not_supported(
            format!("{template}.spec.restartPolicy"),
            &json!(restart),
            &["OnFailure", "Never"],
        )),
    }
}

/// Jobs: the batch/v1 defaults (with the selector and labels of the Job's own uid), the spec's
/// rules, what an update may change, and the orphaning default of a delete.
pub(crate) struct JobStrategy;

impl Strategy for JobStrategy {
    fn defaults(&self, v: &mut Value) {
        let name = meta_str(v, "name").to_string();
        let uid = meta_str(v, "uid").to_string();
        let manual = v["spec"]["manualSelector"].as_bool() == Some(true);
        let Some(spec) = obj_mut(v, "spec") else {
            return;
        };
        default(spec, "parallelism", json!(1));
        default(spec, "completions", json!(1));
        default(spec, "backoffLimit", json!(6));
        default(spec, "completionMode", json!("NonIndexed"));
        default(spec, "suspend", json!(false));
        default(spec, "podReplacementPolicy", json!("TerminatingOrFailed"));
        if !manual && !uid.is_empty() {
            default(
                spec,
                "selector",
                json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}),
            );
            if let Some(t) = spec.get_mut("template").and_then(Value::as_object_mut) {
                let meta = ensure_obj(t.entry("metadata").or_insert(Value::Null));
                let labels = meta.entry("labels").or_insert_with(|| json!({}));
                if let Some(l) = labels.as_object_mut() {
                    l.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
                    l.insert("batch.kubernetes.io/job-name".into(), json!(name));
                    l.insert("controller-uid".into(), json!(uid));
                    l.insert("job-name".into(), json!(name));
                }
            }
        }
        template_defaults(&mut v["spec"]);
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        job_spec_causes(&obj["spec"], "spec", causes);
    }

    fn validate_update(&self, old: &Value, new: &Value) -> Vec<Cause> {
        job_update_causes(old, new)
    }

    /// batch/v1 Jobs orphan their pods unless told otherwise, for compatibility.
    fn default_propagation(&self) -> Option<DefaultPropagation> {
        Some(DefaultPropagation {
            policy: "Orphan",
            warning: "child pods are preserved by default when jobs are deleted; set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning",
        })
    }
}
