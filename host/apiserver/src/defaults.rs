//! Defaulting and kind-specific validation of built-in kinds, as the real API server does them,
//! so that what clients read back and what they are refused match a real cluster: the workload
//! kinds (CronJob, Job), and the checks of ConfigMaps, Secrets, RBAC roles and Leases.

use crate::kinds::pod_spec::{default, pod_spec_defaults};
use crate::resources::ResourceDef;
use crate::status::{ApiError, Cause};
use crate::validation;
use serde_json::{Map, Value, json};

fn obj_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    v.get_mut(key).and_then(Value::as_object_mut)
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
    if def.key() == crate::kinds::pod::PODS_KEY {
        crate::kinds::pod::defaults(v);
        return;
    }
    if def.group == RBAC_GROUP && def.plural.ends_with("bindings") {
        subject_defaults(v);
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

/// A job template's pod spec; the Job's own check names the restart policies a Job allows.
fn pod_template_causes(tpl: &Value, path: &str, causes: &mut Vec<Cause>) {
    pod_spec_causes(&tpl["spec"], &format!("{path}.spec"), false, causes);
}

/// The most common of ValidatePodSpec's checks, in its order: volume names; containers (names,
/// images, ports, volume mounts, requests within limits) and init containers; the restart and
/// DNS policies (the restart policy only with `restart_policy`). `path` is where the spec sits
/// (`spec`, or a template's).
pub fn pod_spec_causes(spec: &Value, path: &str, restart_policy: bool, causes: &mut Vec<Cause>) {
    let mut volumes: Vec<&str> = Vec::new();
    for (i, v) in spec["volumes"].as_array().into_iter().flatten().enumerate() {
        let field = format!("{path}.volumes[{i}].name");
        match v["name"].as_str().unwrap_or_default() {
            "" => causes.push(req(&field)),
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
    match spec["containers"].as_array() {
        Some(cs) if !cs.is_empty() => {
            for (i, c) in cs.iter().enumerate() {
                container_causes(
                    c,
                    &format!("{path}.containers[{i}]"),
                    &volumes,
                    &mut names,
                    causes,
                );
            }
        }
        _ => causes.push(req(&format!("{path}.containers"))),
    }
    for (i, c) in spec["initContainers"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        container_causes(
            c,
            &format!("{path}.initContainers[{i}]"),
            &volumes,
            &mut names,
            causes,
        );
    }
    if restart_policy
        && let Some(policy) = spec["restartPolicy"].as_str()
        && !matches!(policy, "Always" | "OnFailure" | "Never")
    {
        causes.push(if policy.is_empty() {
            req(&format!("{path}.restartPolicy"))
        } else {
            not_supported(
                &format!("{path}.restartPolicy"),
                policy,
                &["Always", "OnFailure", "Never"],
            )
        });
    }
    if let Some(policy) = spec["dnsPolicy"].as_str()
        && !matches!(
            policy,
            "ClusterFirstWithHostNet" | "ClusterFirst" | "Default" | "None"
        )
    {
        causes.push(not_supported(
            &format!("{path}.dnsPolicy"),
            policy,
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
        "" => causes.push(req(&name_field)),
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
        causes.push(req(&format!("{path}.image")));
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
            None | Some(0) => causes.push(req(&format!("{at}.containerPort"))),
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
            causes.push(not_supported(
                &format!("{at}.protocol"),
                protocol,
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
            causes.push(req(&format!("{at}.name")));
        } else if !volumes.contains(&name) {
            causes.push(Cause {
                reason: "FieldValueNotFound",
                message: format!("Not found: {}", validation::go_quote(name)),
                field: format!("{at}.name"),
            });
        }
        if m["mountPath"].as_str().is_none_or(str::is_empty) {
            causes.push(req(&format!("{at}.mountPath")));
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
        if let (Some(r), Some(l)) = (
            crate::kinds::pod_spec::parse_quantity(request),
            crate::kinds::pod_spec::parse_quantity(limit),
        ) && r > l
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

/// The most common of ValidateDeploymentSpec's checks: replicas, a selector that is not empty
/// and matches the template's labels, the pod template, and a restart policy of `Always`.
fn deployment_spec_causes(spec: &Value, causes: &mut Vec<Cause>) {
    for key in ["replicas", "minReadySeconds", "revisionHistoryLimit"] {
        nonnegative(spec, key, "spec", causes);
    }
    let selector = &spec["selector"];
    let labels = &spec["template"]["metadata"]["labels"];
    if selector.is_null() {
        causes.push(req("spec.selector"));
    } else if selector_is_empty(selector) {
        causes.extend(validation::invalid_causes(
            "spec.selector",
            selector,
            vec!["empty selector is invalid for deployment".into()],
        ));
    } else if !crate::selector::label_selector_matches(selector, labels) {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: {}: `selector` does not match template `labels`",
                go_string_map(labels)
            ),
            field: "spec.template.metadata.labels".into(),
        });
    }
    pod_template_causes(&spec["template"], "spec.template", causes);
    match spec["template"]["spec"]["restartPolicy"].as_str() {
        None | Some("") | Some("Always") => {}
        Some(restart) => causes.push(not_supported(
            "spec.template.spec.restartPolicy",
            restart,
            &["Always"],
        )),
    }
}

/// ValidatePodDisruptionBudgetSpec's rule that only one of the two bounds may be set.
fn pdb_spec_causes(spec: &Value, causes: &mut Vec<Cause>) {
    if !spec["minAvailable"].is_null() && !spec["maxUnavailable"].is_null() {
        causes.extend(validation::invalid_causes(
            "spec",
            spec,
            vec!["minAvailable and maxUnavailable cannot be both set".into()],
        ));
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

/// `IsConfigMapKey`: the keys of ConfigMaps and Secrets are file names.
fn config_key_messages(key: &str) -> Vec<String> {
    let mut msgs = vec![];
    if key.len() > 253 {
        msgs.push("must be no more than 253 characters".into());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b))
    {
        msgs.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
                .into(),
        );
    }
    match key {
        "." => msgs.push("must not be '.'".into()),
        ".." => msgs.push("must not be '..'".into()),
        k if k.starts_with("..") => msgs.push("must not start with '..'".into()),
        _ => {}
    }
    msgs
}

/// The keys of `bag` (`data` or `binaryData`), each a valid file name; `other` is the bag a key
/// may not also be in.
fn key_causes(v: &Value, bag: &str, other: Option<&str>, causes: &mut Vec<Cause>) {
    let Some(keys) = v[bag].as_object() else {
        return;
    };
    for key in keys.keys() {
        let field = format!("{bag}[{key}]");
        let mut msgs = config_key_messages(key);
        if let Some(other) = other
            && v[other].get(key).is_some()
        {
            msgs.push(format!("duplicate of key present in {other}"));
        }
        causes.extend(validation::invalid_causes(&field, &json!(key), msgs));
    }
}

/// What `ValidateSecret` wants of each type's data.
fn secret_type_causes(v: &Value, causes: &mut Vec<Cause>) {
    let data = &v["data"];
    let has = |key: &str| data.get(key).is_some();
    let need = |key: &str| req(&format!("data[{key}]"));
    match v["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let account = &v["metadata"]["annotations"]["kubernetes.io/service-account.name"];
            if account.as_str().is_none_or(str::is_empty) {
                causes.push(req(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                ));
            }
        }
        kind @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
            let key = if kind == "kubernetes.io/dockercfg" {
                ".dockercfg"
            } else {
                ".dockerconfigjson"
            };
            if !has(key) {
                causes.push(need(key));
                return;
            }
            use base64::Engine;
            let bytes = data[key]
                .as_str()
                .and_then(|s| base64::engine::general_purpose::STANDARD.decode(s).ok())
                .unwrap_or_default();
            if let Some(why) = json_object_error(&bytes) {
                causes.extend(validation::invalid_causes(
                    &format!("data[{key}]"),
                    &json!("<secret contents redacted>"),
                    vec![why],
                ));
            }
        }
        // Either may be empty, but one must be there.
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            causes.push(need("username"));
            causes.push(need("password"));
        }
        "kubernetes.io/ssh-auth" if data["ssh-privatekey"].as_str().is_none_or(str::is_empty) => {
            causes.push(need("ssh-privatekey"));
        }
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    causes.push(need(key));
                }
            }
        }
        _ => {}
    }
}

/// Why `bytes` is not a JSON object, in the words of Go's decoder for the commonest cases.
fn json_object_error(bytes: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(_)) => None,
        Ok(other) => Some(format!(
            "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
            validation::json_type(&other)
        )),
        Err(e) if e.is_eof() => Some("unexpected end of JSON input".into()),
        Err(_) => {
            let first = bytes
                .iter()
                .find(|b| !b.is_ascii_whitespace())
                .map_or(' ', |b| *b as char);
            Some(format!(
                "invalid character {} looking for beginning of value",
                go_char(first)
            ))
        }
    }
}

/// A byte as Go's `quoteChar` prints it in JSON errors.
fn go_char(c: char) -> String {
    match c {
        '\'' => "'\\''".into(),
        '"' => "'\"'".into(),
        c if c.is_ascii_graphic() || c == ' ' => format!("'{c}'"),
        c => format!("{:?}", c.to_string()),
    }
}

/// `ValidatePolicyRule` for each rule of a Role or ClusterRole.
fn policy_rule_causes(v: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    let Some(rules) = v["rules"].as_array() else {
        return;
    };
    let listed = |r: &Value, key: &str| r[key].as_array().is_some_and(|a| !a.is_empty());
    for (i, rule) in rules.iter().enumerate() {
        let path = format!("rules[{i}]");
        if !listed(rule, "verbs") {
            causes.push(required(
                &format!("{path}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        if listed(rule, "nonResourceURLs") {
            let urls = crate::util::string_list(&rule["nonResourceURLs"]);
            let shown: Vec<String> = urls.iter().map(|u| validation::go_quote(u)).collect();
            let value = format!("[]string{{{}}}", shown.join(", "));
            let mut invalid = |why: &str| {
                causes.push(Cause {
                    reason: "FieldValueInvalid",
                    message: format!("Invalid value: {value}: {why}"),
                    field: format!("{path}.nonResourceURLs"),
                })
            };
            if namespaced {
                invalid("namespaced rules cannot apply to non-resource URLs");
            }
            if listed(rule, "apiGroups")
                || listed(rule, "resources")
                || listed(rule, "resourceNames")
            {
                invalid("rules cannot apply to both regular resources and non-resource URLs");
            }
            continue;
        }
        if !listed(rule, "apiGroups") {
            causes.push(required(
                &format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if !listed(rule, "resources") {
            causes.push(required(
                &format!("{path}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
    }
}

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// `ValidateRoleBinding` / `ValidateClusterRoleBinding`: what a binding refers to and to whom.
fn binding_causes(v: &Value, namespaced: bool, causes: &mut Vec<Cause>) {
    let role_ref = &v["roleRef"];
    let text = |x: &Value| x.as_str().unwrap_or_default().to_string();
    if text(&role_ref["apiGroup"]) != RBAC_GROUP {
        causes.push(not_supported(
            "roleRef.apiGroup",
            &text(&role_ref["apiGroup"]),
            &[RBAC_GROUP],
        ));
    }
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    let kind = text(&role_ref["kind"]);
    if !kinds.contains(&kind.as_str()) {
        causes.push(not_supported("roleRef.kind", &kind, kinds));
    }
    if text(&role_ref["name"]).is_empty() {
        causes.push(req("roleRef.name"));
    }
    for (i, subject) in v["subjects"].as_array().into_iter().flatten().enumerate() {
        let path = format!("subjects[{i}]");
        if text(&subject["name"]).is_empty() {
            causes.push(req(&format!("{path}.name")));
        }
        let group = text(&subject["apiGroup"]);
        match subject["kind"].as_str().unwrap_or_default() {
            "ServiceAccount" => {
                if !group.is_empty() {
                    causes.push(not_supported(&format!("{path}.apiGroup"), &group, &[""]));
                }
                if !namespaced && text(&subject["namespace"]).is_empty() {
                    causes.push(req(&format!("{path}.namespace")));
                }
            }
            "User" | "Group" if group != RBAC_GROUP => {
                causes.push(not_supported(
                    &format!("{path}.apiGroup"),
                    &group,
                    &[RBAC_GROUP],
                ));
            }
            "User" | "Group" => {}
            other => causes.push(not_supported(
                &format!("{path}.kind"),
                other,
                &["ServiceAccount", "User", "Group"],
            )),
        }
    }
}

/// `SetDefaults_Subject`: users and groups are RBAC's own subjects.
fn subject_defaults(v: &mut Value) {
    let Some(subjects) = v.get_mut("subjects").and_then(Value::as_array_mut) else {
        return;
    };
    for subject in subjects {
        let named = matches!(subject["kind"].as_str(), Some("User" | "Group"));
        if let Some(m) = subject.as_object_mut()
            && named
            && m.get("apiGroup")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            m.insert("apiGroup".into(), json!(RBAC_GROUP));
        }
    }
}

/// `ValidateLeaseSpec`.
fn lease_causes(spec: &Value, causes: &mut Vec<Cause>) {
    if let Some(n) = spec["leaseDurationSeconds"].as_i64()
        && n <= 0
    {
        causes.extend(validation::invalid_causes(
            "spec.leaseDurationSeconds",
            &json!(n),
            vec!["must be greater than 0".into()],
        ));
    }
    nonnegative(spec, "leaseTransitions", "spec", causes);
    if spec["preferredHolder"]
        .as_str()
        .is_some_and(|h| !h.is_empty())
        && spec["strategy"].as_str().is_none_or(str::is_empty)
    {
        causes.push(Cause {
            reason: "FieldValueForbidden",
            message: "Forbidden: may only be specified if `strategy` is defined".into(),
            field: "spec.preferredHolder".into(),
        });
    }
}

/// Validates the kind-specific fields; 422 Invalid on errors.
pub fn validate(def: &ResourceDef, v: &Value) -> Result<(), ApiError> {
    let name = v["metadata"]["name"].as_str().unwrap_or_default();
    let mut causes = vec![];
    match (def.group.as_str(), def.plural.as_str()) {
        ("", "configmaps") => {
            key_causes(v, "data", Some("binaryData"), &mut causes);
            key_causes(v, "binaryData", None, &mut causes);
        }
        ("", "secrets") => {
            key_causes(v, "data", None, &mut causes);
            secret_type_causes(v, &mut causes);
        }
        ("rbac.authorization.k8s.io", "roles") => policy_rule_causes(v, true, &mut causes),
        ("rbac.authorization.k8s.io", "clusterroles") => policy_rule_causes(v, false, &mut causes),
        ("rbac.authorization.k8s.io", "rolebindings") => binding_causes(v, true, &mut causes),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            binding_causes(v, false, &mut causes)
        }
        ("coordination.k8s.io", "leases") => lease_causes(&v["spec"], &mut causes),
        ("batch", "cronjobs") => {
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
        ("batch", "jobs") => job_spec_causes(&v["spec"], "spec", &mut causes),
        ("", "pods") => pod_spec_causes(&v["spec"], "spec", true, &mut causes),
        ("apps", "deployments") => deployment_spec_causes(&v["spec"], &mut causes),
        ("policy", "poddisruptionbudgets") => pdb_spec_causes(&v["spec"], &mut causes),
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

    /// The causes the real server gives for a Deployment or PodDisruptionBudget `spec`.
    fn apps_causes(group: &str, plural: &str, spec: Value) -> Vec<(String, String)> {
        let def = crate::resources::builtins()
            .iter()
            .find(|d| d.group == group && d.plural == plural)
            .cloned()
            .expect("built in");
        let v = json!({"metadata": {"name": "x", "uid": "u"}, "spec": spec});
        validation_causes(&def, &v)
    }

    #[test]
    fn deployments_need_a_selector_that_matches_their_template() {
        let template = json!({"metadata": {"labels": {"app": "a", "tier": "web"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let ok = apps_causes(
            "apps",
            "deployments",
            json!({
            "selector": {"matchLabels": {"app": "a"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web"]}]},
            "template": template}),
        );
        assert_eq!(ok, vec![]);
        let missing = apps_causes("apps", "deployments", json!({"template": template}));
        assert_eq!(
            missing,
            vec![("spec.selector".into(), "Required value".into())]
        );
        let empty = apps_causes(
            "apps",
            "deployments",
            json!({"selector": {}, "template": template}),
        );
        assert!(
            empty[0]
                .1
                .ends_with("empty selector is invalid for deployment"),
            "{empty:?}"
        );
        let other = apps_causes(
            "apps",
            "deployments",
            json!({
            "selector": {"matchLabels": {"app": "b"}}, "template": template}),
        );
        assert_eq!(
            other,
            vec![(
                "spec.template.metadata.labels".into(),
                "Invalid value: map[app:a tier:web]: `selector` does not match template `labels`"
                    .into()
            )]
        );
        let mut never = template.clone();
        never["spec"]["restartPolicy"] = json!("Never");
        let never = apps_causes(
            "apps",
            "deployments",
            json!({
            "selector": {"matchLabels": {"app": "a"}}, "template": never}),
        );
        assert_eq!(never[0].0, "spec.template.spec.restartPolicy", "{never:?}");
    }

    #[test]
    fn a_disruption_budget_takes_one_bound_only() {
        let selector = json!({"matchLabels": {"app": "a"}});
        assert_eq!(
            apps_causes(
                "policy",
                "poddisruptionbudgets",
                json!({"minAvailable": 1, "selector": selector})
            ),
            vec![]
        );
        let both = apps_causes(
            "policy",
            "poddisruptionbudgets",
            json!({"minAvailable": 1, "maxUnavailable": 1, "selector": selector}),
        );
        assert!(
            both[0]
                .1
                .ends_with("minAvailable and maxUnavailable cannot be both set"),
            "{both:?}"
        );
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
        validation_causes(&def, &v)
    }

    /// The causes (field and message) of validating `v` as a `def`.
    fn validation_causes(def: &ResourceDef, v: &Value) -> Vec<(String, String)> {
        match validate(def, v) {
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

    /// The causes the real server gives for object `v` of the built-in kind `plural`.
    fn object_causes(group: &str, plural: &str, v: Value) -> Vec<(String, String)> {
        let def = crate::resources::builtins()
            .iter()
            .find(|d| d.group == group && d.plural == plural)
            .cloned()
            .expect("built in");
        validation_causes(&def, &v)
    }

    #[test]
    fn config_keys_are_file_names_and_secrets_have_what_their_type_needs() {
        let cm = json!({"metadata": {"name": "c"}, "data": {"a b": "x", "ok": "y"},
            "binaryData": {"ok": "eA=="}});
        let causes = object_causes("", "configmaps", cm);
        assert_eq!(causes.len(), 2, "{causes:?}");
        assert_eq!(causes[0].0, "data[a b]");
        assert!(causes[0].1.starts_with(
            "Invalid value: \"a b\": a valid config key must consist of alphanumeric characters"
        ));
        assert_eq!(
            causes[1],
            (
                "data[ok]".to_string(),
                "Invalid value: \"ok\": duplicate of key present in binaryData".to_string()
            )
        );
        let tls = json!({"metadata": {"name": "t"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}});
        assert_eq!(
            object_causes("", "secrets", tls),
            vec![("data[tls.key]".to_string(), "Required value".to_string())]
        );
        let docker = json!({"metadata": {"name": "d"}, "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": "bm90IGpzb24="}});
        assert_eq!(
            object_causes("", "secrets", docker),
            vec![(
                "data[.dockerconfigjson]".to_string(),
                "Invalid value: \"<secret contents redacted>\": invalid character 'n' looking for beginning of value".to_string()
            )]
        );
        let token =
            json!({"metadata": {"name": "s"}, "type": "kubernetes.io/service-account-token"});
        assert_eq!(
            object_causes("", "secrets", token),
            vec![(
                "metadata.annotations[kubernetes.io/service-account.name]".to_string(),
                "Required value".to_string()
            )]
        );
        let opaque = json!({"metadata": {"name": "o"}, "type": "Opaque", "data": {"k": "eA=="}});
        assert_eq!(object_causes("", "secrets", opaque), vec![]);
    }

    #[test]
    fn role_rules_and_leases_are_checked() {
        let role = json!({"metadata": {"name": "r"}, "rules": [
            {"apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
        ]});
        assert_eq!(
            object_causes("rbac.authorization.k8s.io", "roles", role),
            vec![
                ("rules[0].verbs".to_string(), "Required value: verbs must contain at least one value".to_string()),
                (
                    "rules[1].nonResourceURLs".to_string(),
                    "Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs".to_string()
                ),
            ]
        );
        let cluster_role = json!({"metadata": {"name": "r"}, "rules": [
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}]});
        assert_eq!(
            object_causes("rbac.authorization.k8s.io", "clusterroles", cluster_role),
            vec![]
        );
        let lease = json!({"metadata": {"name": "l"}, "spec": {"leaseDurationSeconds": 0}});
        assert_eq!(
            object_causes("coordination.k8s.io", "leases", lease),
            vec![(
                "spec.leaseDurationSeconds".to_string(),
                "Invalid value: 0: must be greater than 0".to_string()
            )]
        );
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
