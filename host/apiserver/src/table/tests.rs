use super::cells::*;
use super::pod::*;
use serde_json::json;

#[test]
fn durations_like_kubectl() {
    assert_eq!(human_duration(5), "5s");
    assert_eq!(human_duration(150), "2m30s");
    assert_eq!(human_duration(600), "10m");
    assert_eq!(human_duration(3 * 3600 + 120), "3h2m");
    assert_eq!(human_duration(50 * 3600), "2d2h");
}

#[test]
fn json_path_subset() {
    let v = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}, "spec": {"n": [1, 2]}});
    assert_eq!(
        json_path(&v, ".status.conditions[?(@.type==\"Ready\")].status"),
        Some(&json!("True"))
    );
    assert_eq!(json_path(&v, ".spec.n[1]"), Some(&json!(2)));
    assert_eq!(json_path(&v, ".spec.missing"), None);
}

#[test]
fn huge_restart_counts_do_not_overflow() {
    let max = json!({"restartCount": i64::MAX});
    let sidecar = json!({"name": "s", "restartCount": i64::MAX, "started": true});
    let pod = json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}],
            "initContainers": [{"name": "s", "restartPolicy": "Always"}]},
        "status": {"containerStatuses": [max, max],
            "initContainerStatuses": [sidecar, sidecar]}});
    assert_eq!(pod_cells(&pod)[3], i64::MAX.to_string());
}

#[test]
fn pod_cells_follow_the_real_printer() {
    let now = chrono::Utc::now();
    let ago = |s: i64| (now - chrono::Duration::seconds(s)).to_rfc3339();
    let pending = json!({"metadata": {"name": "p", "creationTimestamp": ago(5)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Pending", "qosClass": "BestEffort"}});
    assert_eq!(
        pod_cells(&pending),
        [
            "p", "0/2", "Pending", "0", "5s", "<none>", "<none>", "<none>", "<none>"
        ]
    );
    let running = json!({"metadata": {"name": "r", "creationTimestamp": ago(600)},
        "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n1",
            "readinessGates": [{"conditionType": "x"}]},
        "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}],
            "conditions": [{"type": "x", "status": "True"}],
            "containerStatuses": [
                {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
                 "lastState": {"terminated": {"finishedAt": ago(90)}}},
                {"name": "b", "ready": false, "restartCount": 1,
                 "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}});
    assert_eq!(
        pod_cells(&running),
        [
            "r",
            "1/2",
            "CrashLoopBackOff",
            "3 (90s ago)",
            "10m",
            "10.0.0.5",
            "n1",
            "<none>",
            "1/1"
        ]
    );
    let init = json!({"metadata": {"name": "i"},
        "spec": {"initContainers": [{"name": "i1"}, {"name": "side", "restartPolicy": "Always"}],
            "containers": [{"name": "a"}]},
        "status": {"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "restartCount": 4, "state": {"running": {}}}]}});
    let c = pod_cells(&init);
    assert_eq!(c[1..4], ["0/2", "Init:0/2", "4"]);
    let failed = json!({"metadata": {"name": "f", "deletionTimestamp": ago(1)},
        "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Running", "containerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 2}}}]}});
    assert_eq!(pod_cells(&failed)[2], "Terminating");
    let exited = json!({"metadata": {"name": "f"}, "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Failed", "containerStatuses": [
            {"name": "a", "state": {"terminated": {"exitCode": 2, "signal": 0}}}]}});
    assert_eq!(pod_cells(&exited)[2], "ExitCode:2");
    assert!(pod_row_conditions(&exited).is_some());
    let gated = json!({"metadata": {"name": "g"}, "spec": {"containers": [{"name": "a"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}});
    assert_eq!(pod_cells(&gated)[2], "SchedulingGated");
}

#[test]
fn event_cells_follow_the_real_printer() {
    let now = chrono::Utc::now();
    let ago = |s: i64| (now - chrono::Duration::seconds(s)).to_rfc3339();
    let e = json!({"metadata": {"name": "e1"}, "type": "Normal", "reason": "Pulled",
        "involvedObject": {"kind": "Pod", "name": "web", "fieldPath": "spec.containers{a}"},
        "source": {"component": "kubelet", "host": "n1"},
        "message": " done \n", "firstTimestamp": ago(300), "lastTimestamp": ago(30)});
    assert_eq!(
        event_cells(&e),
        vec![
            json!("30s"),
            json!("Normal"),
            json!("Pulled"),
            json!("pod/web"),
            json!("spec.containers{a}"),
            json!("kubelet, n1"),
            json!("done"),
            json!("5m"),
            json!(1),
            json!("e1")
        ]
    );
    let new_api = json!({"metadata": {"name": "e2"}, "type": "Warning",
        "involvedObject": {"kind": "Node"}, "reportingComponent": "ctl",
        "eventTime": ago(10), "series": {"count": 4, "lastObservedTime": ago(3)}});
    let c = event_cells(&new_api);
    assert_eq!(c[0], json!("3s"));
    assert_eq!(c[3], json!("node"));
    assert_eq!(c[5], json!("ctl"));
    assert_eq!(c[7], json!("10s"));
    assert_eq!(c[8], json!(4));
    let bare = json!({"metadata": {"name": "e3"}, "involvedObject": {}});
    let c = event_cells(&bare);
    assert_eq!(c[0], json!("<unknown>"));
    assert_eq!(c[5], json!("<unknown>"));
}
