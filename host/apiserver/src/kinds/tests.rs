use super::*;
use serde_json::json;

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
    strategy(&def).defaults(&mut v);
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
    let docker =
        json!({"metadata": {"name": "d"}, "type": "kubernetes.io/dockerconfigjson", "data": {}});
    assert_eq!(
        object_causes("", "secrets", docker),
        vec![(
            "data[.dockerconfigjson]".to_string(),
            "Required value".to_string()
        )]
    );
    let token = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/service-account-token"});
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
    strategy(&def).defaults(&mut v);
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

/// A CronJob whose job template's spec is `job` (with a valid pod template added).
fn cron_job_running(mut job: Value) -> Value {
    job["template"] =
        json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}});
    json!({"schedule": "*/5 * * * *", "jobTemplate": {"spec": job}})
}

#[test]
fn job_template_counts_must_not_be_negative() {
    let spec = cron_job_running(json!({
        "parallelism": -1, "backoffLimit": -1, "activeDeadlineSeconds": -5,
    }));
    let fields: Vec<String> = causes("cronjobs", spec)
        .into_iter()
        .map(|(f, _)| f)
        .collect();
    assert_eq!(
        fields,
        [
            "spec.jobTemplate.spec.parallelism",
            "spec.jobTemplate.spec.activeDeadlineSeconds",
            "spec.jobTemplate.spec.backoffLimit"
        ]
    );
}

#[test]
fn per_index_limits_need_an_indexed_job_template() {
    let spec = cron_job_running(json!({"maxFailedIndexes": 1, "completionMode": "NonIndexed"}));
    assert_eq!(
        causes("cronjobs", spec),
        vec![
            (
                "spec.jobTemplate.spec.backoffLimitPerIndex".into(),
                "Required value: when maxFailedIndexes is specified".into()
            ),
            (
                "spec.jobTemplate.spec.maxFailedIndexes".into(),
                "Invalid value: 1: requires indexed completion mode".into()
            ),
        ]
    );
    let spec = cron_job_running(json!({"completionMode": "Sometimes"}));
    assert_eq!(
        causes("cronjobs", spec),
        one(
            "spec.jobTemplate.spec.completionMode",
            "Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\""
        )
    );
}
