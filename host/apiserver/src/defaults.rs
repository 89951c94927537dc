//! Defaulting and validation of the built-in workload kinds (CronJob, Job), as the real API
//! server does, so that what clients read back matches a real cluster.

use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause};
use crate::validation;
use serde_json::{Map, Value, json};

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    v.get_mut(key).and_then(Value::as_object_mut)
}

fn default(m: &mut Map<String, Value>, key: &str, val: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), val);
    }
}

fn pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') {
        return "IfNotPresent";
    }
    match last.split_once(':') {
        Some((_, "latest")) | None => "Always",
        Some(_) => "IfNotPresent",
    }
}

fn container_defaults(c: &mut Value) {
    let image = c["image"].as_str().unwrap_or_default().to_string();
    if let Some(m) = c.as_object_mut() {
        default(m, "terminationMessagePath", json!("/dev/termination-log"));
        default(m, "terminationMessagePolicy", json!("File"));
        default(m, "imagePullPolicy", json!(pull_policy(&image)));
        default(m, "resources", json!({}));
    }
}

pub fn pod_spec_defaults(spec: &mut Value) {
    if let Some(m) = spec.as_object_mut() {
        default(m, "restartPolicy", json!("Always"));
        default(m, "terminationGracePeriodSeconds", json!(30));
        default(m, "dnsPolicy", json!("ClusterFirst"));
        default(m, "securityContext", json!({}));
        default(m, "schedulerName", json!("default-scheduler"));
    }
    for list in ["containers", "initContainers"] {
        if let Some(cs) = spec.get_mut(list).and_then(Value::as_array_mut) {
            cs.iter_mut().for_each(container_defaults);
        }
    }
}

fn template_defaults(job_spec: &mut Value) {
    if let Some(t) = job_spec.get_mut("template")
        && t.is_object()
        && let Some(spec) = t.get_mut("spec")
        && spec.is_object()
    {
        pod_spec_defaults(spec);
    }
}

/// Applies the defaults of `def`'s kind. `uid` is the object's uid (Jobs use it in selectors).
pub fn apply(def: &ResourceDef, v: &mut Value) {
    if def.key() == crate::pod::PODS_KEY {
        crate::pod::defaults(v);
        return;
    }
    if def.group != "batch" {
        return;
    }
    let name = v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let uid = v["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    match def.plural.as_str() {
        "cronjobs" => {
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
        "jobs" => {
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
                    let meta = t.entry("metadata").or_insert_with(|| json!({}));
                    if !meta.is_object() {
                        *meta = json!({});
                    }
                    let labels = meta
                        .as_object_mut()
                        .map(|m| m.entry("labels").or_insert_with(|| json!({})));
                    if let Some(l) = labels.and_then(Value::as_object_mut) {
                        l.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
                        l.insert("batch.kubernetes.io/job-name".into(), json!(name));
                        l.insert("controller-uid".into(), json!(uid));
                        l.insert("job-name".into(), json!(name));
                    }
                }
            }
            let mut js = Value::Object(spec.clone());
            template_defaults(&mut js);
            if let (Value::Object(m), Some(spec)) = (js, obj_mut(v, "spec")) {
                *spec = m;
            }
        }
        _ => {}
    }
}

fn req(field: &str) -> Cause {
    required(field, "")
}

/// `field.Required`, whose detail follows "Required value" after a colon when there is one.
fn required(field: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        message: if detail.is_empty() {
            "Required value".into()
        } else {
            format!("Required value: {detail}")
        },
        field: field.into(),
    }
}

/// `field.NotSupported` of a string value: the supported values quoted, in the server's order.
fn not_supported(field: &str, value: &str, supported: &[&str]) -> Cause {
    let supported: Vec<String> = supported.iter().map(|s| validation::go_quote(s)).collect();
    Cause {
        reason: "FieldValueNotSupported",
        message: format!(
            "Unsupported value: {}: supported values: {}",
            validation::go_quote(value),
            supported.join(", ")
        ),
        field: field.into(),
    }
}

/// `ValidateNonnegativeField` of an optional integer field of `spec`.
fn nonnegative(spec: &Value, key: &str, path: &str, causes: &mut Vec<Cause>) {
    if let Some(n) = spec[key].as_i64()
        && n < 0
    {
        causes.extend(validation::invalid_causes(
            &format!("{path}.{key}"),
            &json!(n),
            vec!["must be greater than or equal to 0".into()],
        ));
    }
}

fn pod_template_causes(tpl: &Value, path: &str, causes: &mut Vec<Cause>) {
    let spec = &tpl["spec"];
    match spec["containers"].as_array() {
        Some(cs) if !cs.is_empty() => {
            for (i, c) in cs.iter().enumerate() {
                if c["name"].as_str().is_none_or(str::is_empty) {
                    causes.push(req(&format!("{path}.spec.containers[{i}].name")));
                }
                if c["image"].as_str().is_none_or(str::is_empty) {
                    causes.push(req(&format!("{path}.spec.containers[{i}].image")));
                }
            }
        }
        _ => causes.push(req(&format!("{path}.spec.containers"))),
    }
}

/// `validateJobSpec`: the checks a Job and a CronJob's job template share. `path` is where the
/// job spec sits (`spec`, or `spec.jobTemplate.spec`).
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
        causes.push(required(
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
                causes.push(required(
                    &format!("{path}.completions"),
                    "when completion mode is Indexed",
                ));
            }
        }
        Some(mode) => causes.push(not_supported(
            &format!("{path}.completionMode"),
            mode,
            &["NonIndexed", "Indexed"],
        )),
    }
    let template = format!("{path}.template");
    pod_template_causes(&spec["template"], &template, causes);
    // The pod defaults fill in `Always`, so a template that says nothing is told what it must say.
    match spec["template"]["spec"]["restartPolicy"].as_str() {
        None | Some("") | Some("Always") => causes.push(required(
            &format!("{template}.spec.restartPolicy"),
            "valid values: \"OnFailure\", \"Never\"",
        )),
        Some("OnFailure") | Some("Never") => {}
        Some(restart) => causes.push(not_supported(
            &format!("{template}.spec.restartPolicy"),
            restart,
            &["OnFailure", "Never"],
        )),
    }
}

/// `validateTimeZone`: an IANA name, looked up as Go's `time.LoadLocation` does, case and all.
fn time_zone_causes(tz: &Value, causes: &mut Vec<Cause>) {
    let Some(name) = tz.as_str() else {
        return;
    };
    let field = "spec.timeZone";
    let mut invalid = |why: String| {
        causes.extend(validation::invalid_causes(field, tz, vec![why]));
    };
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

/// `validateCronJobSpec`, in the server's order.
fn cron_job_spec_causes(spec: &Value, causes: &mut Vec<Cause>) {
    match spec["schedule"].as_str() {
        None | Some("") => causes.push(req("spec.schedule")),
        Some(s) => {
            let mut invalid = |why: String| {
                causes.extend(validation::invalid_causes(
                    "spec.schedule",
                    &json!(s),
                    vec![why],
                ))
            };
            if let Some(why) = crate::cron::schedule_error(s) {
                invalid(why);
            }
            if s.contains("TZ") {
                invalid("cannot use TZ or CRON_TZ in schedule, use timeZone field instead".into());
            }
        }
    }
    nonnegative(spec, "startingDeadlineSeconds", "spec", causes);
    time_zone_causes(&spec["timeZone"], causes);
    match spec["concurrencyPolicy"].as_str() {
        Some("Allow") | Some("Forbid") | Some("Replace") => {}
        None | Some("") => causes.push(req("spec.concurrencyPolicy")),
        Some(policy) => causes.push(not_supported(
            "spec.concurrencyPolicy",
            policy,
            &["Allow", "Forbid", "Replace"],
        )),
    }
    let job = &spec["jobTemplate"]["spec"];
    job_spec_causes(job, "spec.jobTemplate.spec", causes);
    if job["manualSelector"].as_bool() == Some(true) {
        causes.push(Cause {
            reason: "FieldValueNotSupported",
            message: "Unsupported value: true: supported values: \"nil\", \"false\"".into(),
            field: "spec.jobTemplate.spec.manualSelector".into(),
        });
    }
    nonnegative(spec, "successfulJobsHistoryLimit", "spec", causes);
    nonnegative(spec, "failedJobsHistoryLimit", "spec", causes);
}

/// Validates the kind-specific fields; 422 Invalid on errors.
pub fn validate(def: &ResourceDef, v: &Value) -> Result<(), ApiError> {
    if def.group != "batch" {
        return Ok(());
    }
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let mut causes = vec![];
    match def.plural.as_str() {
        "cronjobs" => {
            cron_job_spec_causes(&v["spec"], &mut causes);
            // Checked last, as the server does: the controller names each Job after its CronJob
            // plus an 11-character suffix, and a Job's name has at most 63.
            if name.len() > 52 {
                causes.extend(validation::invalid_causes(
                    "metadata.name",
                    &json!(name),
                    vec!["must be no more than 52 characters".into()],
                ));
            }
        }
        "jobs" => job_spec_causes(&v["spec"], "spec", &mut causes),
        _ => {}
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&def.group, &def.kind, name, causes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_policies() {
        assert_eq!(pull_policy("busybox"), "Always");
        assert_eq!(pull_policy("busybox:latest"), "Always");
        assert_eq!(pull_policy("registry:5000/busybox:1"), "IfNotPresent");
        assert_eq!(pull_policy("registry:5000/busybox"), "Always");
    }

    fn def(plural: &str) -> std::sync::Arc<ResourceDef> {
        crate::resources::builtins()
            .iter()
            .find(|d| d.group == "batch" && d.plural == plural)
            .cloned()
            .expect("batch kinds are built in")
    }

    /// The causes (field and message) the real server gives for `spec` after defaulting.
    fn causes(plural: &str, spec: Value) -> Vec<(String, String)> {
        let def = def(plural);
        let mut v = json!({"metadata": {"name": "x", "uid": "u"}, "spec": spec});
        apply(&def, &mut v);
        match validate(&def, &v) {
            Ok(()) => vec![],
            Err(e) => e
                .details
                .map(|d| d.causes)
                .unwrap_or_default()
                .into_iter()
                .map(|c| (c.field, c.message))
                .collect(),
        }
    }

    fn cron_job(extra: Value) -> Value {
        let mut spec = json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}}}});
        if let (Some(s), Value::Object(extra)) = (spec.as_object_mut(), extra) {
            s.extend(extra);
        }
        spec
    }

    fn one(field: &str, message: &str) -> Vec<(String, String)> {
        vec![(field.to_string(), message.to_string())]
    }

    #[test]
    fn a_valid_cron_job_passes() {
        assert_eq!(causes("cronjobs", cron_job(json!({}))), vec![]);
        let zoned = cron_job(json!({"timeZone": "Europe/Berlin"}));
        assert_eq!(causes("cronjobs", zoned), vec![]);
        let utc = cron_job(json!({"timeZone": "UTC", "concurrencyPolicy": "Forbid"}));
        assert_eq!(causes("cronjobs", utc), vec![]);
        let link = cron_job(json!({"timeZone": "US/Pacific"}));
        assert_eq!(causes("cronjobs", link), vec![]);
    }

    #[test]
    fn time_zones_are_looked_up_as_go_looks_them_up() {
        let tz = |name: &str| causes("cronjobs", cron_job(json!({"timeZone": name})));
        assert_eq!(
            tz("Mars/Olympus"),
            one(
                "spec.timeZone",
                "Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"
            )
        );
        // The database is searched by exact name: Go's is case-sensitive.
        assert_eq!(
            tz("AMERICA/new_york"),
            one(
                "spec.timeZone",
                "Invalid value: \"AMERICA/new_york\": unknown time zone AMERICA/new_york"
            )
        );
        assert_eq!(
            tz(" Continent/Zone"),
            one(
                "spec.timeZone",
                "Invalid value: \" Continent/Zone\": unknown time zone  Continent/Zone"
            )
        );
        assert_eq!(
            tz(""),
            one(
                "spec.timeZone",
                "Invalid value: \"\": timeZone must be nil or non-empty string"
            )
        );
        let explicit =
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones";
        assert_eq!(
            tz("Local"),
            one(
                "spec.timeZone",
                &format!("Invalid value: \"Local\": {explicit}")
            )
        );
        // `time.LoadLocation("local")` fails too, so the lower-case spelling earns both.
        assert_eq!(
            tz("local"),
            vec![
                (
                    "spec.timeZone".into(),
                    format!("Invalid value: \"local\": {explicit}")
                ),
                (
                    "spec.timeZone".into(),
                    "Invalid value: \"local\": unknown time zone local".into()
                ),
            ]
        );
        assert_eq!(
            tz("Europe/../Berlin"),
            one(
                "spec.timeZone",
                "Invalid value: \"Europe/../Berlin\": unknown time zone Europe/../Berlin"
            )
        );
    }

    #[test]
    fn cron_job_fields_are_checked_in_the_servers_order() {
        let spec = cron_job(json!({
            "startingDeadlineSeconds": -1,
            "concurrencyPolicy": "Sometimes",
            "successfulJobsHistoryLimit": -2,
            "failedJobsHistoryLimit": -3,
        }));
        assert_eq!(
            causes("cronjobs", spec),
            vec![
                ("spec.startingDeadlineSeconds".into(), "Invalid value: -1: must be greater than or equal to 0".into()),
                ("spec.concurrencyPolicy".into(), "Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"".into()),
                ("spec.successfulJobsHistoryLimit".into(), "Invalid value: -2: must be greater than or equal to 0".into()),
                ("spec.failedJobsHistoryLimit".into(), "Invalid value: -3: must be greater than or equal to 0".into()),
            ]
        );
    }

    #[test]
    fn a_long_cron_job_name_is_reported_after_the_spec() {
        let def = def("cronjobs");
        let mut v = json!({"metadata": {"name": "n".repeat(53)}, "spec": cron_job(json!({"concurrencyPolicy": "x"}))});
        apply(&def, &mut v);
        let fields: Vec<String> = validate(&def, &v)
            .unwrap_err()
            .details
            .map(|d| d.causes)
            .unwrap_or_default()
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(fields, ["spec.concurrencyPolicy", "metadata.name"]);
    }

    #[test]
    fn a_job_template_must_say_how_pods_restart() {
        let mut spec = cron_job(json!({}));
        spec["jobTemplate"]["spec"]["template"]["spec"]
            .as_object_mut()
            .map(|m| m.remove("restartPolicy"));
        assert_eq!(
            causes("cronjobs", spec.clone()),
            one(
                "spec.jobTemplate.spec.template.spec.restartPolicy",
                "Required value: valid values: \"OnFailure\", \"Never\""
            )
        );
        spec["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = json!("Sometimes");
        assert_eq!(
            causes("cronjobs", spec),
            one(
                "spec.jobTemplate.spec.template.spec.restartPolicy",
                "Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\""
            )
        );
    }

    #[test]
    fn job_counts_must_not_be_negative() {
        let spec = json!({
            "parallelism": -1, "backoffLimit": -1, "activeDeadlineSeconds": -5,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}},
        });
        let fields: Vec<String> = causes("jobs", spec).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "spec.parallelism",
                "spec.activeDeadlineSeconds",
                "spec.backoffLimit"
            ]
        );
    }

    #[test]
    fn per_index_limits_need_an_indexed_job() {
        let spec = json!({
            "maxFailedIndexes": 1, "completionMode": "NonIndexed",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}},
        });
        assert_eq!(
            causes("jobs", spec),
            vec![
                (
                    "spec.backoffLimitPerIndex".into(),
                    "Required value: when maxFailedIndexes is specified".into()
                ),
                (
                    "spec.maxFailedIndexes".into(),
                    "Invalid value: 1: requires indexed completion mode".into()
                ),
            ]
        );
        let spec = json!({
            "completionMode": "Sometimes",
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}},
        });
        assert_eq!(
            causes("jobs", spec),
            one(
                "spec.completionMode",
                "Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\""
            )
        );
    }
}
