//! The rows of the kinds whose columns are derived, not read: pods, nodes and events.

use crate::table::cells::{age, has_condition, human_duration, joined_or, timestamp};
use crate::util::meta_str;
use serde_json::{Value, json};

/// A Node's cells after its name, as printNode writes them: its readiness (and whether it is
/// cordoned), its roles from the `node-role.kubernetes.io/` labels, its age (`age`), the
/// kubelet's version, and for `-o wide` its addresses and what it runs.
pub(super) fn node_cells(o: &Value, age: Value) -> Vec<Value> {
    let ready = o["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Ready");
    let mut status = vec![match ready {
        Some(c) if c["status"] == "True" => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if o["spec"]["unschedulable"] == true {
        status.push("SchedulingDisabled");
    }
    let mut roles: Vec<String> = o["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role.to_string()),
            _ if k == "kubernetes.io/role" => v.as_str().map(str::to_string),
            _ => None,
        })
        .collect();
    roles.sort();
    roles.dedup();
    let info = &o["status"]["nodeInfo"];
    let address = |kind: &str| {
        o["status"]["addresses"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|a| a["type"] == kind)
            .and_then(|a| a["address"].as_str())
            .unwrap_or("<none>")
            .to_string()
    };
    let or_unknown = |v: &Value| match v.as_str() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => "<unknown>".to_string(),
    };
    vec![
        json!(status.join(",")),
        json!(joined_or(&roles, "<none>")),
        age,
        json!(info["kubeletVersion"].as_str().unwrap_or_default()),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(or_unknown(&info["osImage"])),
        json!(or_unknown(&info["kernelVersion"])),
        json!(or_unknown(&info["containerRuntimeVersion"])),
    ]
}

/// The real printer's Pod row: NAME, READY, STATUS, RESTARTS, AGE, then the wide IP, NODE,
/// NOMINATED NODE and READINESS GATES.
pub fn pod_cells(o: &Value) -> Vec<String> {
    let spec = &o["spec"];
    let status = &o["status"];
    let arr = |v: &Value| v.as_array().cloned().unwrap_or_default();
    let init_specs = arr(&spec["initContainers"]);
    let restartable = |name: &Value| {
        init_specs
            .iter()
            .any(|c| &c["name"] == name && c["restartPolicy"] == "Always")
    };
    let total = arr(&spec["containers"]).len()
        + init_specs
            .iter()
            .filter(|c| c["restartPolicy"] == "Always")
            .count();
    let mut ready = 0;
    let phase = status["phase"].as_str().unwrap_or_default();
    let mut reason = status["reason"]
        .as_str()
        .filter(|r| !r.is_empty())
        .unwrap_or(phase)
        .to_string();
    if arr(&status["conditions"])
        .iter()
        .any(|c| c["type"] == "PodScheduled" && c["reason"] == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    // (count, latest finish of a last termination) over all and over restartable init containers.
    let mut restarts = 0i64;
    let mut last: Option<chrono::DateTime<chrono::Utc>> = None;
    let mut sidecar_restarts = 0i64;
    let mut sidecar_last: Option<chrono::DateTime<chrono::Utc>> = None;
    let init_statuses = arr(&status["initContainerStatuses"]);
    let n_init = init_specs.len();
    let mut initializing = false;
    for (i, c) in init_statuses.iter().enumerate() {
        let count = c["restartCount"].as_i64().unwrap_or(0);
        let finished = timestamp(&c["lastState"]["terminated"]["finishedAt"]);
        restarts = restarts.saturating_add(count);
        last = last.max(finished);
        let sidecar = restartable(&c["name"]);
        if sidecar {
            sidecar_restarts = sidecar_restarts.saturating_add(count);
            sidecar_last = sidecar_last.max(finished);
        }
        let term = &c["state"]["terminated"];
        let waiting = c["state"]["waiting"]["reason"].as_str().unwrap_or_default();
        if term.is_object() && term["exitCode"].as_i64().unwrap_or(0) == 0 {
            continue;
        }
        if sidecar && c["started"].as_bool() == Some(true) {
            if c["ready"].as_bool() == Some(true) {
                ready += 1;
            }
            continue;
        }
        reason = if term.is_object() {
            match term["reason"].as_str().filter(|r| !r.is_empty()) {
                Some(r) => format!("Init:{r}"),
                None => match term["signal"].as_i64().filter(|s| *s != 0) {
                    Some(sig) => format!("Init:Signal:{sig}"),
                    None => format!("Init:ExitCode:{}", term["exitCode"].as_i64().unwrap_or(0)),
                },
            }
        } else if !waiting.is_empty() && waiting != "PodInitializing" {
            format!("Init:{waiting}")
        } else {
            format!("Init:{i}/{n_init}")
        };
        initializing = true;
        break;
    }
    let initialized = arr(&status["conditions"])
        .iter()
        .find(|c| c["type"] == "Initialized")
        .is_some_and(|c| c["status"] == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last = sidecar_last;
        let mut has_running = false;
        for c in arr(&status["containerStatuses"]).iter().rev() {
            restarts = restarts.saturating_add(c["restartCount"].as_i64().unwrap_or(0));
            last = last.max(timestamp(&c["lastState"]["terminated"]["finishedAt"]));
            let state = &c["state"];
            let waiting = state["waiting"]["reason"].as_str().unwrap_or_default();
            let term = &state["terminated"];
            let term_reason = term["reason"].as_str().unwrap_or_default();
            if state["waiting"].is_object() && !waiting.is_empty() {
                reason = waiting.to_string();
            } else if term.is_object() && !term_reason.is_empty() {
                reason = term_reason.to_string();
            } else if term.is_object() {
                reason = match term["signal"].as_i64().filter(|s| *s != 0) {
                    Some(sig) => format!("Signal:{sig}"),
                    None => format!("ExitCode:{}", term["exitCode"].as_i64().unwrap_or(0)),
                };
            } else if c["ready"].as_bool() == Some(true) && state["running"].is_object() {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if has_condition(status, "Ready") {
                "Running".into()
            } else {
                "NotReady".into()
            };
        }
    }
    let deleting = o["metadata"]["deletionTimestamp"].is_string();
    if deleting && status["reason"] == "NodeLost" {
        reason = "Unknown".into();
    } else if deleting && !matches!(phase, "Succeeded" | "Failed") {
        reason = "Terminating".into();
    }
    let restarts_cell = match last {
        Some(t) if restarts != 0 => format!(
            "{restarts} ({} ago)",
            human_duration((chrono::Utc::now() - t).num_seconds())
        ),
        _ => restarts.to_string(),
    };
    let or_none = |v: &Value| {
        v.as_str()
            .filter(|s| !s.is_empty())
            .unwrap_or("<none>")
            .to_string()
    };
    let gates = arr(&spec["readinessGates"]);
    let gates_cell = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let conds = arr(&status["conditions"]);
        let true_ones = gates
            .iter()
            .filter(|g| {
                conds
                    .iter()
                    .find(|c| c["type"] == g["conditionType"])
                    .is_some_and(|c| c["status"] == "True")
            })
            .count();
        format!("{true_ones}/{}", gates.len())
    };
    vec![
        meta_str(o, "name").to_string(),
        format!("{ready}/{total}"),
        reason,
        restarts_cell,
        age(&o["metadata"]["creationTimestamp"]),
        or_none(&status["podIPs"][0]["ip"]),
        or_none(&spec["nodeName"]),
        or_none(&status["nominatedNodeName"]),
        gates_cell,
    ]
}

/// The conditions the real printer puts on the row of a finished Pod.
pub(super) fn pod_row_conditions(o: &Value) -> Option<Value> {
    match o["status"]["phase"].as_str() {
        Some("Succeeded") => Some(json!([{"type": "Completed", "status": "True",
            "reason": "Succeeded", "message": "The pod has completed successfully."}])),
        Some("Failed") => Some(json!([{"type": "Completed", "status": "True",
            "reason": "Failed", "message": "The pod failed."}])),
        _ => None,
    }
}

/// The real printer's Event row, wide: LAST SEEN, TYPE, REASON, OBJECT, SUBOBJECT, SOURCE,
/// MESSAGE, FIRST SEEN, COUNT, NAME.
pub fn event_cells(o: &Value) -> Vec<Value> {
    let first = if timestamp(&o["firstTimestamp"]).is_some() {
        age(&o["firstTimestamp"])
    } else {
        age(&o["eventTime"])
    };
    let mut last = if timestamp(&o["lastTimestamp"]).is_some() {
        age(&o["lastTimestamp"])
    } else {
        first.clone()
    };
    let mut count = o["count"].as_i64().unwrap_or(0);
    if o["series"].is_object() {
        last = age(&o["series"]["lastObservedTime"]);
        count = o["series"]["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let involved = &o["involvedObject"];
    let kind = s(&involved["kind"]).to_lowercase();
    let target = match involved["name"].as_str().filter(|n| !n.is_empty()) {
        Some(n) => format!("{kind}/{n}"),
        None => kind,
    };
    let first_non_empty = |a: &Value, b: &Value| {
        a.as_str()
            .filter(|x| !x.is_empty())
            .or_else(|| b.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let component = first_non_empty(&o["source"]["component"], &o["reportingComponent"]);
    let instance = first_non_empty(&o["source"]["host"], &o["reportingInstance"]);
    let source = match (component.is_empty(), instance.is_empty()) {
        (true, _) => "<unknown>".to_string(),
        (false, true) => component,
        (false, false) => format!("{component}, {instance}"),
    };
    vec![
        json!(last),
        json!(s(&o["type"])),
        json!(s(&o["reason"])),
        json!(target),
        json!(s(&involved["fieldPath"])),
        json!(source),
        json!(s(&o["message"]).trim()),
        json!(first),
        json!(count),
        json!(s(&o["metadata"]["name"])),
    ]
}
