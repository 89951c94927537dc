//! Defaulting and validation of the built-in workload kinds (CronJob, Job), as the real API
//! server does, so that what clients read back matches a real cluster.

use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause};
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
    Cause {
        reason: "FieldValueRequired",
        message: "Required value".into(),
        field: field.into(),
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
    match spec["restartPolicy"].as_str() {
        Some("OnFailure") | Some("Never") => {}
        other => causes.push(Cause {
            reason: "FieldValueNotSupported",
            message: format!(
                "Unsupported value: {}: supported values: \"OnFailure\", \"Never\"",
                json!(other.unwrap_or_default())
            ),
            field: format!("{path}.spec.restartPolicy"),
        }),
    }
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
            if name.len() > 52 {
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!(
                        "Invalid value: {}: must be no more than 52 characters",
                        json!(name)
                    ),
                    field: "metadata.name".into(),
                });
            }
            match v["spec"]["schedule"].as_str() {
                None | Some("") => causes.push(req("spec.schedule")),
                Some(s) => {
                    let mut invalid = |why: String| {
                        causes.push(Cause {
                            reason: "FieldValueInvalid",
                            message: format!("Invalid value: {}: {why}", json!(s)),
                            field: "spec.schedule".into(),
                        })
                    };
                    if let Some(why) = crate::cron::schedule_error(s) {
                        invalid(why);
                    }
                    if s.contains("TZ") {
                        invalid(
                            "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"
                                .into(),
                        );
                    }
                }
            }
            pod_template_causes(
                &v["spec"]["jobTemplate"]["spec"]["template"],
                "spec.jobTemplate.spec.template",
                &mut causes,
            );
        }
        "jobs" => pod_template_causes(&v["spec"]["template"], "spec.template", &mut causes),
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
}
