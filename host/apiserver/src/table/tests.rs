use super::cells::*;
use super::event::*;
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
            json!("done")
        ]
    );
    let new_api = json!({"metadata": {"name": "e2"}, "type": "Warning",
        "involvedObject": {"kind": "Node"}, "reportingComponent": "ctl",
        "eventTime": ago(10), "series": {"count": 4, "lastObservedTime": ago(3)}});
    let c = event_cells(&new_api);
    assert_eq!(c[0], json!("3s"));
    assert_eq!(c[3], json!("node"));
    let first_only = json!({"involvedObject": {}, "eventTime": ago(10)});
    assert_eq!(event_cells(&first_only)[0], json!("10s"));
    let bare = json!({"metadata": {"name": "e3"}, "involvedObject": {}});
    assert_eq!(event_cells(&bare)[0], json!("<unknown>"));
}
