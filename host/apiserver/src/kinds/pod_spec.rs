//! The pod template of CronJobs' job templates and of Deployments: its defaults and validation,
//! and the resource quantities its requests and limits are written in. Pods themselves are not
//! served.

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

/// A `resource.Quantity` in units of 10^-9, enough to compare and add requests and limits.
pub fn parse_quantity(s: &str) -> Option<i128> {
    let s = s.trim();
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '+' | '-')))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_end);
    let (neg, num) = match num.as_bytes().first() {
        Some(b'-') => (true, &num[1..]),
        Some(b'+') => (false, &num[1..]),
        _ => (false, num),
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty())
        || !int.bytes().all(|c| c.is_ascii_digit())
        || !frac.bytes().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    // Mantissa scaled by 10^9 (fractions finer than that are rounded up, as Quantity does).
    // Quantities too large for an i128 saturate (they only need to compare and add).
    let mut nanos: i128 = 0;
    for c in int.bytes() {
        nanos = nanos
            .saturating_mul(10)
            .saturating_add(i128::from(c - b'0'));
    }
    nanos = nanos.saturating_mul(1_000_000_000);
    let mut scale: i128 = 100_000_000;
    let mut rest = false;
    for c in frac.bytes() {
        if scale == 0 {
            rest |= c != b'0';
            continue;
        }
        nanos = nanos.saturating_add(i128::from(c - b'0') * scale);
        scale /= 10;
    }
    if rest {
        nanos = nanos.saturating_add(1);
    }
    let pow10 = |n: i128, e: i64| -> i128 {
        let Ok(abs) = u32::try_from(e.unsigned_abs()) else {
            return if e >= 0 {
                n.signum() * i128::MAX
            } else {
                n.signum()
            };
        };
        match (e >= 0, 10i128.checked_pow(abs)) {
            (true, Some(m)) => n.saturating_mul(m),
            (true, None) => n.signum() * i128::MAX,
            // Rounded up, as Quantity rounds to nanos.
            (false, Some(d)) => n / d + i128::from(n % d != 0),
            (false, None) => n.signum(),
        }
    };
    let v = match suffix {
        "" => nanos,
        "n" => pow10(nanos, -9),
        "u" => pow10(nanos, -6),
        "m" => pow10(nanos, -3),
        "k" => pow10(nanos, 3),
        "M" => pow10(nanos, 6),
        "G" => pow10(nanos, 9),
        "T" => pow10(nanos, 12),
        "P" => pow10(nanos, 15),
        "E" => pow10(nanos, 18),
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let shift = 10 * (1 + "KMGTPE".find(&suffix[..1])? as u32);
            nanos.saturating_mul(1i128 << shift)
        }
        e if e.starts_with(['e', 'E']) => pow10(nanos, e[1..].parse().ok()?),
        _ => return None,
    };
    Some(if neg { -v } else { v })
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
/// order: volume names; containers (names, images, ports, volume mounts, requests within limits)
/// and init containers; the DNS policy. The restart policy is the owning kind's to check: a
/// Deployment allows only `Always`, a job template only `OnFailure` and `Never`.
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
    if let Some(policy) = spec["dnsPolicy"].as_str()
        && !matches!(
            policy,
            "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None"
        )
    {
        causes.push(validation::not_supported(
            format!("{path}.dnsPolicy"),
            &json!(policy),
            &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
        ));
    }
}

/// One container's checks (validateContainerCommon): its name (unique among `names`, the names
/// of the pod's containers so far), image, ports, volume mounts (of `volumes`) and resources.
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
    let mut port_names: Vec<&str> = Vec::new();
    for (i, port) in c["ports"].as_array().into_iter().flatten().enumerate() {
        let at = format!("{path}.ports[{i}]");
        if let Some(name) = port["name"].as_str().filter(|n| !n.is_empty()) {
            causes.extend(validation::invalid_causes(
                &format!("{at}.name"),
                &json!(name),
                validation::port_name(name),
            ));
            if port_names.contains(&name) {
                causes.push(validation::duplicate(
                    format!("{at}.name"),
                    validation::go_quote(name),
                ));
            }
            port_names.push(name);
        }
        match port["containerPort"].as_i64() {
            None | Some(0) => causes.push(validation::required(format!("{at}.containerPort"), "")),
            Some(n) => causes.extend(validation::invalid_causes(
                &format!("{at}.containerPort"),
                &json!(n),
                validation::port_num(n),
            )),
        }
        if let Some(n) = port["hostPort"].as_i64().filter(|n| *n != 0) {
            causes.extend(validation::invalid_causes(
                &format!("{at}.hostPort"),
                &json!(n),
                validation::port_num(n),
            ));
        }
        if let Some(protocol) = port["protocol"].as_str()
            && !matches!(protocol, "SCTP" | "TCP" | "UDP")
        {
            causes.push(validation::not_supported(
                format!("{at}.protocol"),
                &json!(protocol),
                &["SCTP", "TCP", "UDP"],
            ));
        }
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
    let resources = &c["resources"];
    for (resource, request) in resources["requests"].as_object().into_iter().flatten() {
        let (Some(request), Some(limit)) = (
            request.as_str(),
            resources["limits"][resource.as_str()].as_str(),
        ) else {
            continue;
        };
        if let (Some(r), Some(l)) = (parse_quantity(request), parse_quantity(limit))
            && r > l
        {
            causes.extend(validation::invalid_causes(
                &format!("{path}.resources.requests"),
                &json!(request),
                vec![format!(
                    "must be less than or equal to {resource} limit of {limit}"
                )],
            ));
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

    #[test]
    fn quantities_compare_across_units() {
        assert_eq!(parse_quantity("100m"), parse_quantity("0.1"));
        assert_eq!(parse_quantity("1Gi"), parse_quantity("1073741824"));
        assert_eq!(parse_quantity("1k"), parse_quantity("1e3"));
        assert_eq!(parse_quantity("1.5"), Some(1_500_000_000));
        assert_eq!(parse_quantity("abc"), None);
        assert_eq!(parse_quantity("1Xi"), None);
    }
}
