//! CronJobs: their spec's validation (schedule, time zone, policies, history limits).

use crate::kinds::causes::{nonnegative, obj_mut};
use crate::kinds::pod_spec::{default, pod_template_causes, template_defaults};
use crate::kinds::strategy::Strategy;
use crate::status::Cause;
use crate::util::meta_str;
use crate::validation;
use serde_json::{Value, json};

/// `validateTimeZone`: an IANA name, looked up as Go's `time.LoadLocation` does, case and all.
fn time_zone_causes(tz: &Value, causes: &mut Vec<Cause>) {
    let Some(name) = tz.as_str() else {
        return;
    };
    let field = "spec.timeZone";
    let mut invalid = |why: String| causes.push(validation::invalid(field, tz, &why));
    if name.is_empty() {
        return invalid("timeZone must be nil or non-empty string".into());
    }
    // IANA's naming rules, with the digits and `+` of legacy names tolerated.
    let valid_part = |part: &str| {
        !part.is_empty()
            && part.len() <= 14
            && part != "."
            && part != ".."
            && !part.starts_with('-')
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
    };
    if !name.split('/').all(valid_part) {
        return invalid(format!("unknown time zone {name}"));
    }
    if name.eq_ignore_ascii_case("Local") {
        invalid(
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
                .into(),
        );
    }
    if !known_time_zone(name) {
        invalid(format!("unknown time zone {name}"));
    }
}

/// Whether `time.LoadLocation(name)` succeeds on the server: `UTC` and `Local` always do, any
/// other name only if the time-zone database has it under exactly that spelling.
fn known_time_zone(name: &str) -> bool {
    name == "UTC"
        || name == "Local"
        || jiff::tz::db()
            .get(name)
            .is_ok_and(|tz| tz.iana_name() == Some(name))
}

/// `validateJobSpec`, on a CronJob's job template. `path` is where the job spec sits
/// (`spec.jobTemplate.spec`).
fn job_spec_causes(spec: &Value, path: &str, causes: &mut Vec<Cause>) {
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

/// `validateCronJobSpec`, in the server's order.
pub(crate) fn cron_job_spec_causes(spec: &Value, causes: &mut Vec<Cause>) {
    match spec["schedule"].as_str() {
        None | Some("") => causes.push(validation::required("spec.schedule", "")),
        Some(s) => {
            let errors = lethe_kube_rules::cron::cronjob_schedule_errors(s);
            causes.extend(validation::invalid_causes(
                "spec.schedule",
                &json!(s),
                errors,
            ));
        }
    }
    nonnegative(spec, "startingDeadlineSeconds", "spec", causes);
    time_zone_causes(&spec["timeZone"], causes);
    match spec["concurrencyPolicy"].as_str() {
        Some("Allow") | Some("Forbid") | Some("Replace") => {}
        None | Some("") => causes.push(validation::required("spec.concurrencyPolicy", "")),
        Some(policy) => causes.push(validation::not_supported(
            "spec.concurrencyPolicy",
            &json!(policy),
            &["Allow", "Forbid", "Replace"],
        )),
    }
    let job = &spec["jobTemplate"]["spec"];
    job_spec_causes(job, "spec.jobTemplate.spec", causes);
    if job["manualSelector"].as_bool() == Some(true) {
        causes.push(validation::not_supported(
            "spec.jobTemplate.spec.manualSelector",
            &json!(true),
            &["nil", "false"],
        ));
    }
    nonnegative(spec, "successfulJobsHistoryLimit", "spec", causes);
    nonnegative(spec, "failedJobsHistoryLimit", "spec", causes);
}

/// CronJobs: the batch/v1 defaults, the spec's rules and the name's length.
pub(crate) struct CronJobStrategy;

impl Strategy for CronJobStrategy {
    fn defaults(&self, v: &mut Value) {
        let Some(spec) = obj_mut(v, "spec") else {
            return;
        };
        default(spec, "concurrencyPolicy", json!("Allow"));
        default(spec, "suspend", json!(false));
        default(spec, "successfulJobsHistoryLimit", json!(3));
        default(spec, "failedJobsHistoryLimit", json!(1));
        if let Some(jt) = spec.get_mut("jobTemplate")
            && let Some(js) = jt.get_mut("spec")
            && js.is_object()
        {
            template_defaults(js);
        }
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        cron_job_spec_causes(&obj["spec"], causes);
        // Checked last, as the server does: the controller names each Job after its CronJob plus
        // an 11-character suffix, and a Job's name has at most 63.
        let name = meta_str(obj, "name");
        if name.len() > 52 {
            let why = "must be no more than 52 characters";
            causes.push(validation::invalid("metadata.name", json!(name), why));
        }
    }
}
