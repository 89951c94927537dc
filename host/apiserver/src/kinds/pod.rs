//! Pods: the defaults the real server's decoding applies to a Pod (beyond the pod-spec ones
//! shared with templates), and the status its strategy sets on create when nothing schedules
//! or runs the Pod (`phase: Pending`, the QoS class, the scheduling-gated condition).

use crate::kinds::pod_spec::{default, parse_quantity, pod_spec_causes};
use crate::kinds::strategy::{Ctx, Strategy};
use crate::status::{ApiError, Cause};
use crate::util::strip_nulls;
use serde_json::{Map, Value, json};

fn quantity(v: &Value) -> Option<i128> {
    match v {
        Value::String(s) => parse_quantity(s),
        Value::Number(n) => parse_quantity(&n.to_string()),
        _ => None,
    }
}

/// `qos.ComputePodQOS`: Guaranteed when every container limits cpu and memory and the
/// requests equal the limits, BestEffort when nothing asks for cpu or memory, else Burstable.
pub fn qos_class(spec: &Value) -> &'static str {
    let mut requests: std::collections::BTreeMap<&str, i128> = Default::default();
    let mut limits: std::collections::BTreeMap<&str, i128> = Default::default();
    let mut guaranteed = true;
    let containers = ["containers", "initContainers"]
        .into_iter()
        .flat_map(|k| spec[k].as_array().cloned().unwrap_or_default());
    for c in containers {
        for res in ["cpu", "memory"] {
            if let Some(q) = quantity(&c["resources"]["requests"][res]).filter(|q| *q > 0) {
                let sum = requests.entry(res).or_default();
                *sum = sum.saturating_add(q);
            }
        }
        let mut found = 0;
        for res in ["cpu", "memory"] {
            if let Some(q) = quantity(&c["resources"]["limits"][res]).filter(|q| *q > 0) {
                found += 1;
                let sum = limits.entry(res).or_default();
                *sum = sum.saturating_add(q);
            }
        }
        if found < 2 {
            guaranteed = false;
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return "BestEffort";
    }
    if guaranteed
        && requests.iter().all(|(k, r)| limits.get(k) == Some(r))
        && requests.len() == limits.len()
    {
        return "Guaranteed";
    }
    "Burstable"
}

/// The defaults a Pod gets on decoding: the pod-spec ones and those a pod template does not
/// get (`SetDefaults_Pod`).
pub fn defaults(v: &mut Value) {
    if let Some(spec) = v.get_mut("spec").filter(|s| s.is_object()) {
        crate::kinds::pod_spec::pod_spec_defaults(spec);
    }
    let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    default(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            // Limits without requests: the requests default to the limits.
            let Some(res) = c.get_mut("resources").and_then(Value::as_object_mut) else {
                continue;
            };
            let Some(limits) = res.get("limits").and_then(Value::as_object).cloned() else {
                continue;
            };
            if limits.is_empty() {
                continue;
            }
            let req = crate::util::ensure_obj(res.entry("requests").or_insert(Value::Null));
            for (k, q) in limits {
                req.entry(k).or_insert(q);
            }
        }
    }
}

/// Where the service-account admission mounts a Pod's API credentials.
const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
const TOKEN_VOLUME_PREFIX: &str = "kube-api-access-";

/// The service account a Pod runs as (`default` when it names none).
pub fn service_account(v: &Value) -> String {
    let spec = &v["spec"];
    ["serviceAccountName", "serviceAccount"]
        .iter()
        .filter_map(|f| spec[*f].as_str())
        .find(|s| !s.is_empty())
        .unwrap_or("default")
        .to_string()
}

/// What a real cluster's admission adds to a new Pod: its service account and, unless the Pod
/// or the account (`account`, when it exists) turns automounting off, the projected volume of
/// its API credentials mounted in every container; priority; and the default toleration
/// seconds for not-ready and unreachable nodes.
pub fn admit(v: &mut Value, account: Option<&Value>) {
    let sa = service_account(v);
    let automount = v["spec"]["automountServiceAccountToken"]
        .as_bool()
        .or_else(|| account.and_then(|a| a["automountServiceAccountToken"].as_bool()))
        .unwrap_or(true);
    let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    spec.insert("serviceAccountName".into(), json!(sa));
    spec.insert("serviceAccount".into(), json!(sa));
    if automount {
        mount_api_access(spec);
    }
    if spec
        .get("priorityClassName")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        default(spec, "priority", json!(0));
        default(spec, "preemptionPolicy", json!("PreemptLowerPriority"));
    }
    let tolerations = spec.entry("tolerations").or_insert_with(|| json!([]));
    if !tolerations.is_array() {
        *tolerations = json!([]);
    }
    if let Some(ts) = tolerations.as_array_mut() {
        for key in [
            "node.kubernetes.io/not-ready",
            "node.kubernetes.io/unreachable",
        ] {
            let tolerated = ts.iter().any(|t| {
                let effect = t["effect"].as_str().unwrap_or_default();
                let k = t["key"].as_str().unwrap_or_default();
                (effect.is_empty() || effect == "NoExecute")
                    && (k == key || (k.is_empty() && t["operator"] == "Exists"))
            });
            if !tolerated {
                ts.push(json!({
                    "key": key,
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }));
            }
        }
    }
}

/// The service-account admission's token volume (`kube-api-access-xxxxx`: a bound token, the
/// cluster CA and the namespace), mounted read-only in every init and app container that has
/// nothing mounted at the credentials path yet.
fn mount_api_access(spec: &mut Map<String, Value>) {
    let existing = spec
        .get("volumes")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .filter_map(|v| v["name"].as_str())
                .find(|n| n.starts_with(TOKEN_VOLUME_PREFIX))
        })
        .map(str::to_string);
    let name = existing
        .clone()
        .unwrap_or_else(|| format!("{TOKEN_VOLUME_PREFIX}{}", crate::util::random_suffix()));
    let mut mounted = false;
    for list in ["initContainers", "containers"] {
        for c in spec
            .get_mut(list)
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let Some(c) = c.as_object_mut() else {
                continue;
            };
            let mounts = c.entry("volumeMounts").or_insert_with(|| json!([]));
            let Some(mounts) = mounts.as_array_mut() else {
                continue;
            };
            if mounts.iter().any(|m| m["mountPath"] == TOKEN_MOUNT_PATH) {
                continue;
            }
            mounts.push(json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH}));
            mounted = true;
        }
    }
    if !mounted || existing.is_some() {
        return;
    }
    let volumes = spec.entry("volumes").or_insert_with(|| json!([]));
    if let Some(volumes) = volumes.as_array_mut() {
        volumes.push(json!({
            "name": name,
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ],
            },
        }));
    }
}

/// The status a new Pod is stored with (`podStrategy.PrepareForCreate`). `sent_qos` is a
/// `status.qosClass` the client sent, which the real strategy keeps.
pub fn create_status(v: &mut Value, sent_qos: Option<&str>) {
    let qos = sent_qos
        .filter(|q| !q.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| qos_class(&v["spec"]).to_string());
    let mut status = json!({"phase": "Pending", "qosClass": qos});
    if v["spec"]["schedulingGates"]
        .as_array()
        .is_some_and(|g| !g.is_empty())
    {
        status["conditions"] = json!([{
            "type": "PodScheduled",
            "status": "False",
            "lastProbeTime": null,
            "lastTransitionTime": null,
            "reason": "SchedulingGated",
            "message": "Scheduling is blocked due to non-empty scheduling gates",
        }]);
    }
    v["status"] = status;
}

/// ValidatePodUpdate: a Pod's spec may change only in its containers' images, its active
/// deadline, added tolerations, removed scheduling gates and a negative grace period set to 1.
pub(crate) fn pod_update_causes(old: &Value, new: &Value) -> Vec<Cause> {
    let mut allowed = old["spec"].clone();
    let spec = &new["spec"];
    for list in ["containers", "initContainers"] {
        if let (Some(was), Some(now)) = (allowed[list].as_array_mut(), spec[list].as_array())
            && was.len() == now.len()
        {
            for (w, n) in was.iter_mut().zip(now) {
                w["image"] = n["image"].clone();
            }
        }
    }
    allowed["activeDeadlineSeconds"] = spec["activeDeadlineSeconds"].clone();
    let list = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let (old_tolerations, new_tolerations) =
        (list(&allowed["tolerations"]), list(&spec["tolerations"]));
    if old_tolerations.iter().all(|t| new_tolerations.contains(t)) {
        allowed["tolerations"] = spec["tolerations"].clone();
    }
    let (old_gates, new_gates) = (
        list(&allowed["schedulingGates"]),
        list(&spec["schedulingGates"]),
    );
    if new_gates.iter().all(|g| old_gates.contains(g)) {
        allowed["schedulingGates"] = spec["schedulingGates"].clone();
    }
    if allowed["terminationGracePeriodSeconds"]
        .as_i64()
        .is_some_and(|g| g < 0)
        && spec["terminationGracePeriodSeconds"] == 1
    {
        allowed["terminationGracePeriodSeconds"] = json!(1);
    }
    let mut now = spec.clone();
    strip_nulls(&mut allowed);
    strip_nulls(&mut now);
    if allowed == now {
        return vec![];
    }
    vec![crate::validation::forbidden(
        "spec",
        "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
    )]
}

/// Pods: defaults, ServiceAccount admission, the status nothing else sets, and what an update
/// may change.
pub(crate) struct PodStrategy;

impl Strategy for PodStrategy {
    fn defaults(&self, obj: &mut Value) {
        defaults(obj);
    }

    fn admit(&self, ctx: &Ctx, obj: &mut Value, sent_status: &Value) -> Result<(), ApiError> {
        // The ServiceAccount admission plugin refuses a Pod whose account does not exist.
        let account_name = service_account(obj);
        let Some(account) = ctx.inner.get("/serviceaccounts", ctx.ns, &account_name) else {
            return Err(ApiError::forbidden(
                "",
                "pods",
                ctx.name,
                &format!(
                    "error looking up service account {}/{account_name}: serviceaccount \"{account_name}\" not found",
                    ctx.ns
                ),
            ));
        };
        admit(obj, Some(&account.value));
        create_status(obj, sent_status["qosClass"].as_str());
        Ok(())
    }

    fn validate(&self, obj: &Value, causes: &mut Vec<Cause>) {
        pod_spec_causes(&obj["spec"], "spec", true, causes);
    }

    fn validate_update(&self, old: &Value, new: &Value) -> Vec<Cause> {
        pod_update_causes(old, new)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extreme_quantities_saturate_instead_of_overflowing() {
        // Tiny values round up to a nano, as Quantity does; huge ones saturate.
        assert_eq!(parse_quantity("1e-2147483648"), Some(1));
        assert_eq!(parse_quantity("1e-40"), Some(1));
        assert_eq!(parse_quantity("0e-40"), Some(0));
        assert_eq!(parse_quantity("1e2147483647"), Some(i128::MAX));
        assert_eq!(
            parse_quantity("170141183460469231731687303715.9"),
            Some(i128::MAX)
        );
        assert_eq!(parse_quantity(&"9".repeat(100)), Some(i128::MAX));
        assert_eq!(
            parse_quantity("170141183460469231731687303715.884105727n"),
            Some(170_141_183_460_469_231_731_687_303_716)
        );
        let huge = json!({"containers": [
            {"resources": {"requests": {"cpu": "1e29"}}},
            {"resources": {"requests": {"cpu": "1e29"}}}]});
        assert_eq!(qos_class(&huge), "Burstable");
    }

    #[test]
    fn qos_classes_like_the_real_server() {
        let best = json!({"containers": [{"name": "a", "resources": {}}]});
        assert_eq!(qos_class(&best), "BestEffort");
        let guaranteed = json!({"containers": [{"resources": {
            "limits": {"cpu": "100m", "memory": "64Mi"},
            "requests": {"cpu": "0.1", "memory": "64Mi"}}}]});
        assert_eq!(qos_class(&guaranteed), "Guaranteed");
        let burst = json!({"containers": [{"resources": {"requests": {"cpu": "100m"}}}]});
        assert_eq!(qos_class(&burst), "Burstable");
        let only_cpu_limit = json!({"containers": [{"resources": {
            "limits": {"cpu": "1"}, "requests": {"cpu": "1"}}}]});
        assert_eq!(qos_class(&only_cpu_limit), "Burstable");
        let zero = json!({"containers": [{"resources": {"requests": {"cpu": "0"}}}]});
        assert_eq!(qos_class(&zero), "BestEffort");
        let init_best_effort = json!({
            "containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                "requests": {"cpu": "1", "memory": "1Gi"}}}],
            "initContainers": [{"resources": {}}]});
        assert_eq!(qos_class(&init_best_effort), "Burstable");
    }

    #[test]
    fn new_pods_are_pending_with_defaults() {
        let mut p = json!({"spec": {"containers": [{"name": "a", "image": "x",
            "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}});
        defaults(&mut p);
        admit(&mut p, None);
        create_status(&mut p, None);
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"],
            json!({"cpu": "1", "memory": "1Gi"})
        );
        assert_eq!(
            p["status"],
            json!({"phase": "Pending", "qosClass": "Guaranteed"})
        );
        assert_eq!(p["spec"]["serviceAccountName"], "default");
        assert_eq!(p["spec"]["tolerations"].as_array().map(Vec::len), Some(2));
        let mut gated = json!({"spec": {"schedulingGates": [{"name": "g"}], "containers": []}});
        create_status(&mut gated, None);
        assert_eq!(
            gated["status"]["conditions"][0]["reason"],
            "SchedulingGated"
        );
    }

    #[test]
    fn the_api_credentials_are_mounted_unless_automounting_is_off() {
        let pod = |extra: Value| {
            let mut p = json!({"spec": {
            "initContainers": [{"name": "i", "image": "x"}],
            "containers": [
                {"name": "a", "image": "x"},
                {"name": "b", "image": "x", "volumeMounts": [{"name": "own",
                    "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]},
            ]}});
            if let (Some(spec), Some(extra)) = (p["spec"].as_object_mut(), extra.as_object()) {
                spec.extend(extra.clone());
            }
            p
        };
        let mut p = pod(json!({}));
        admit(&mut p, None);
        let volume = &p["spec"]["volumes"][0];
        let name = volume["name"].as_str().unwrap();
        assert!(
            name.starts_with("kube-api-access-") && name.len() == 21,
            "{name}"
        );
        assert_eq!(volume["projected"]["defaultMode"], 420);
        assert_eq!(
            volume["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"],
            3607
        );
        assert_eq!(
            volume["projected"]["sources"][1]["configMap"]["name"],
            "kube-root-ca.crt"
        );
        let mount = json!([{"name": name, "readOnly": true,
            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]);
        assert_eq!(p["spec"]["initContainers"][0]["volumeMounts"], mount);
        assert_eq!(p["spec"]["containers"][0]["volumeMounts"], mount);
        // A container with its own mount at the path keeps it alone.
        assert_eq!(
            p["spec"]["containers"][1]["volumeMounts"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );

        let off = json!({"automountServiceAccountToken": false});
        let mut p = pod(off.clone());
        admit(&mut p, None);
        assert!(p["spec"].get("volumes").is_none());
        let mut p = pod(json!({}));
        admit(&mut p, Some(&off));
        assert!(p["spec"].get("volumes").is_none());
        // The Pod's own setting wins over its account's.
        let mut p = pod(json!({"automountServiceAccountToken": true}));
        admit(&mut p, Some(&off));
        assert_eq!(p["spec"]["volumes"].as_array().map(Vec::len), Some(1));
    }
}
