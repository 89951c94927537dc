//! The pod template of CronJobs' job templates and of Deployments: its defaults and validation.
//! Pods themselves are not served.

use crate::status::Cause;
use crate::validation;
use serde_json::{Map, Value, json};

/// Sets `key` in `m` to `val` unless it holds a non-null value already.
pub fn default(m: &mut Map<String, Value>, key: &str, val: Value) {
    if m.get(key).is_none_or(Value::is_null) {
        m.insert(key.to_string(), val);
    }
}

/// The `imagePullPolicy` an image gets by default: `Always` for `:latest` or no tag.
pub fn pull_policy(image: &str) -> &'static str {
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

/// The defaults every pod spec gets (`SetDefaults_PodSpec` and the container defaults).
fn pod_spec_defaults(spec: &mut Value) {
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

/// Applies the pod-spec defaults to the pod template of a Job spec (or of a CronJob's
/// `jobTemplate.spec`); a spec without a template object is left alone.
pub(crate) fn template_defaults(job_spec: &mut Value) {
    if let Some(t) = job_spec.get_mut("template")
        && t.is_object()
        && let Some(spec) = t.get_mut("spec")
        && spec.is_object()
    {
        pod_spec_defaults(spec);
    }
}

/// The most common of ValidatePodSpec's checks on the pod template `tpl` at `path`, in their
/// order: volume names, then the containers and init containers (names, images, volume mounts).
/// Nothing runs the template here, so what only a kubelet acts on (ports, resources, probes, DNS)
/// is left to the real server. The restart policy is the owning kind's to check: a Deployment
/// allows only `Always`, a job template only `OnFailure` and `Never`.
pub(crate) fn pod_template_causes(tpl: &Value, path: &str, causes: &mut Vec<Cause>) {
    let spec = &tpl["spec"];
    let path = format!("{path}.spec");
    let mut volumes: Vec<&str> = Vec::new();
    for (i, v) in spec["volumes"].as_array().into_iter().flatten().enumerate() {
        let field = format!("{path}.volumes[{i}].name");
        match v["name"].as_str().unwrap_or_default() {
            "" => causes.push(validation::required(&field, "")),
            name if volumes.contains(&name) => causes.push(validation::duplicate(
                field.as_str(),
                validation::go_quote(name),
            )),
            name => {
                causes.extend(validation::invalid_causes(
                    &field,
                    &json!(name),
                    validation::dns1123_label(name),
                ));
                volumes.push(name);
            }
        }
    }
    let mut names: Vec<String> = Vec::new();
    if spec["containers"].as_array().is_none_or(Vec::is_empty) {
        causes.push(validation::required(format!("{path}.containers"), ""));
    }
    for list in ["containers", "initContainers"] {
        for (i, c) in spec[list].as_array().into_iter().flatten().enumerate() {
            let at = format!("{path}.{list}[{i}]");
            container_causes(c, &at, &volumes, &mut names, causes);
        }
    }
}

/// One container's checks (validateContainerCommon): its name (unique among `names`, the names
/// of the pod's containers so far), image and volume mounts (of `volumes`).
fn container_causes(
    c: &Value,
    path: &str,
    volumes: &[&str],
    names: &mut Vec<String>,
    causes: &mut Vec<Cause>,
) {
    let name_field = format!("{path}.name");
    match c["name"].as_str().unwrap_or_default() {
        "" => causes.push(validation::required(&name_field, "")),
        name => {
            causes.extend(validation::invalid_causes(
                &name_field,
                &json!(name),
                validation::dns1123_label(name),
            ));
            if names.iter().any(|n| n == name) {
                causes.push(validation::duplicate(
                    name_field.as_str(),
                    validation::go_quote(name),
                ));
            }
            names.push(name.to_string());
        }
    }
    if c["image"].as_str().is_none_or(str::is_empty) {
        causes.push(validation::required(format!("{path}.image"), ""));
    }
    for (i, m) in c["volumeMounts"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let at = format!("{path}.volumeMounts[{i}]");
        let name = m["name"].as_str().unwrap_or_default();
        if name.is_empty() {
            causes.push(validation::required(format!("{at}.name"), ""));
        } else if !volumes.contains(&name) {
            causes.push(validation::not_found(
                format!("{at}.name"),
                validation::go_quote(name),
            ));
        }
        if m["mountPath"].as_str().is_none_or(str::is_empty) {
            causes.push(validation::required(format!("{at}.mountPath"), ""));
        }
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
