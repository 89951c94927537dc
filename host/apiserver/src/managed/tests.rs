use super::apply::*;
use super::entries::*;
use super::fieldset::*;
use super::merge::*;
use super::schema::*;
use serde_json::{Map, Value, json};

#[test]
fn fields_v1_round_trips_leaves() {
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "labels": {"a": "1"}}, "data": {"k": "v", "e": {}}});
    let set = applied_set(&body, Scope::All, &KindSchema::atomic());
    let v1 = to_fields_v1(&set);
    assert_eq!(
        v1,
        json!({"f:data": {"f:e": {}, "f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
    );
    assert_eq!(from_fields_v1(&v1), set);
    assert_eq!(
        from_fields_v1(&json!({"f:data": {".": {}, "f:k": {}}})),
        [
            vec!["f:data".to_string()],
            vec!["f:data".to_string(), "f:k".to_string()]
        ]
        .into_iter()
        .collect()
    );
}

fn writer(manager: &str) -> Writer<'_> {
    Writer {
        manager,
        api_version: "v1",
        subresource: None,
    }
}

/// [`apply`] by `manager` over the whole object.
fn apply_by(
    live: Option<&Value>,
    merged: &mut Value,
    body: &Value,
    manager: &str,
    schema: &KindSchema,
    now: &str,
) {
    let writer = writer(manager);
    let a = Apply {
        body,
        writer: &writer,
        scope: Scope::All,
        schema,
        now,
    };
    apply(live, merged, &a);
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "d", "uid": "u", "resourceVersion": "1",
            "creationTimestamp": "t"},
        "data": data})
}

#[test]
fn large_forced_and_shrinking_applies_stay_linear() {
    const N: usize = 20_000;
    let keys = |p: &str| -> Map<String, Value> {
        (0..N).map(|i| (format!("{p}{i}"), json!("1"))).collect()
    };
    let mut data = keys("a");
    data.extend(keys("b"));
    let mut live = cm(Value::Object(data.clone()));
    // The creator owns every key (but not the map itself).
    let owned: Map<String, Value> = data.keys().map(|k| (format!("f:{k}"), json!({}))).collect();
    let fields = json!({"f:data": owned});
    set_entries(
        &mut live,
        vec![writer("creator").entry("Update", "T1", fields)],
    );
    let started = std::time::Instant::now();
    // Forcing takes N fields from another manager.
    let changed: Map<String, Value> = keys("a")
        .into_iter()
        .map(|(k, _)| (k, json!("2")))
        .collect();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
        "data": changed});
    let mut merged = live.clone();
    merged["data"].as_object_mut().unwrap().extend(changed);
    apply_by(
        Some(&live),
        &mut merged,
        &body,
        "kubectl",
        &KindSchema::atomic(),
        "T2",
    );
    // Dropping them all while the creator still owns N others.
    let live = merged.clone();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    apply_by(
        Some(&live),
        &mut merged,
        &body,
        "kubectl",
        &KindSchema::atomic(),
        "T3",
    );
    let left = merged["data"].as_object().unwrap();
    assert_eq!(left.len(), N);
    assert!(left.keys().all(|k| k.starts_with('b')));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// Apply `body` by `manager` onto `live` as ops does: merge, then record.
fn apply_as(live: &Value, body: Value, manager: &str, schema: &KindSchema) -> Value {
    let mut merged = live.clone();
    merge(&mut merged, &body, schema);
    apply_by(Some(live), &mut merged, &body, manager, schema, "T");
    merged
}

#[test]
fn managers_own_the_items_of_associative_lists_apart() {
    let schema = KindSchema {
        key: "batch/cronjobs",
        schema: None,
        custom: false,
    };
    let job = |containers: Value, finalizers: Value| {
        json!({"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "j", "finalizers": finalizers},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": containers}}}}}})
    };
    let live = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "j"}});
    let live = apply_as(
        &live,
        job(json!([{"name": "a", "image": "i:1"}]), json!(["x/a"])),
        "a",
        &schema,
    );
    // Another manager's items join the lists instead of conflicting.
    let live = apply_as(
        &live,
        job(json!([{"name": "b", "image": "n:1"}]), json!(["x/b"])),
        "b",
        &schema,
    );
    let containers = &live["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers,
        &json!([{"name": "a", "image": "i:1"}, {"name": "b", "image": "n:1"}])
    );
    assert_eq!(live["metadata"]["finalizers"], json!(["x/a", "x/b"]));
    let b_fields = &live["metadata"]["managedFields"][1]["fieldsV1"];
    assert_eq!(
        b_fields["f:spec"]["f:jobTemplate"]["f:spec"]["f:template"]["f:spec"]["f:containers"],
        json!({"k:{\"name\":\"b\"}": {".": {}, "f:image": {}, "f:name": {}}})
    );
    assert_eq!(
        b_fields["f:metadata"]["f:finalizers"],
        json!({"v:\"x/b\"": {}})
    );
    // Changing another manager's item field takes it, as a forced apply does: no conflict.
    let live = apply_as(
        &live,
        job(json!([{"name": "a", "image": "i:2"}]), json!(["x/b"])),
        "b",
        &schema,
    );
    let a_fields = &live["metadata"]["managedFields"][0]["fieldsV1"];
    assert_eq!(
        a_fields["f:spec"]["f:jobTemplate"]["f:spec"]["f:template"]["f:spec"]["f:containers"],
        json!({"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}})
    );
    // Items a manager stops applying go when no one else owns them (`b`'s own container went
    // with that apply); `a`'s container stays while `b` owns fields of it.
    let live = apply_as(&live, job(json!([]), json!(["x/b"])), "a", &schema);
    let containers = &live["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers, &json!([{"name": "a", "image": "i:2"}]));
    assert_eq!(live["metadata"]["finalizers"], json!(["x/b"]));
}

#[test]
fn a_crds_schema_says_which_lists_are_associative() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "ports": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["port", "protocol"],
            "items": {"type": "object", "properties": {"rules": {"type": "array",
                "x-kubernetes-list-type": "set", "items": {"type": "string"}}}}},
        "plain": {"type": "array", "items": {"type": "string"}}}}}});
    let schema = KindSchema {
        key: "x/things",
        schema: Some(&schema),
        custom: true,
    };
    let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        schema.kind(&path(&["f:spec", "f:ports"])),
        ListKind::Map(vec!["port".into(), "protocol".into()])
    );
    assert_eq!(
        schema.kind(&path(&["f:spec", "f:ports", "k:{\"port\":80}", "f:rules"])),
        ListKind::Set
    );
    assert_eq!(schema.kind(&path(&["f:spec", "f:plain"])), ListKind::Atomic);
    // A missing protocol is TCP, as the schemas default it.
    assert_eq!(
        key_element(&json!({"port": 80}), &["port".into(), "protocol".into()]).as_deref(),
        Some("k:{\"port\":80,\"protocol\":\"TCP\"}")
    );
}

#[test]
fn an_item_another_manager_applied_stays_and_long_lists_stay_linear() {
    let schema = KindSchema {
        key: "apps/deployments",
        schema: None,
        custom: false,
    };
    let pod = |containers: Value| {
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p"},
            "spec": {"template": {"spec": {"containers": containers}}}})
    };
    let live = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p"}});
    let live = apply_as(
        &live,
        pod(json!([{"name": "a", "image": "i:1"}])),
        "a",
        &schema,
    );
    // Another applier changes the image: the item stays, whole, when `a` drops it.
    let changed = apply_as(
        &live,
        pod(json!([{"name": "a", "image": "i:2"}])),
        "set",
        &schema,
    );
    let live = apply_as(&changed, pod(json!([])), "a", &schema);
    let containers = |live: &Value| live["spec"]["template"]["spec"]["containers"].clone();
    assert_eq!(containers(&live), json!([{"name": "a", "image": "i:2"}]));

    // Thousands of items applied, then all dropped, in well under a second each.
    const N: usize = 20_000;
    let many: Vec<Value> = (0..N)
        .map(|i| json!({"name": format!("c{i}"), "image": "x"}))
        .collect();
    let started = std::time::Instant::now();
    let live = apply_as(&live, pod(Value::Array(many)), "a", &schema);
    assert_eq!(containers(&live).as_array().map(Vec::len), Some(N + 1));
    let live = apply_as(&live, pod(json!([])), "a", &schema);
    assert_eq!(containers(&live).as_array().map(Vec::len), Some(1));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_map_owned_as_a_member_stays_while_its_fields_are_applied() {
    // As after kubectl's client-side-apply upgrade: the applier's entry owns `.spec` itself.
    let mut live = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
        "data": {"a": "1", "b": "2"}});
    set_entries(
        &mut live,
        vec![writer("kubectl").entry(
            "Apply",
            "T1",
            json!({"f:data": {".": {}, "f:a": {}, "f:b": {}}}),
        )],
    );
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
        "data": {"a": "1"}});
    let merged = apply_as(&live, body, "kubectl", &KindSchema::atomic());
    assert_eq!(merged["data"], json!({"a": "1"}));
}

#[test]
fn a_first_apply_does_not_give_away_the_structs_its_kinds_zero_value_has() {
    let cronjobs = KindSchema {
        key: "batch/cronjobs",
        schema: None,
        custom: false,
    };
    let cj = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {
            "metadata": {"labels": {"app": "c"}},
            "spec": {"containers": [{"name": "main", "image": "x"}]}}}}}});
    // What `before-first-apply` is given when an object is first applied to.
    assert_eq!(
        created_fields(&cj, Scope::NoStatus, &cronjobs),
        json!({"f:spec": {"f:schedule": {}, "f:jobTemplate": {"f:spec": {"f:template": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {
                "k:{\"name\":\"main\"}": {".": {}, "f:image": {}, "f:name": {}}}}}}}}})
    );
    let bindings = KindSchema {
        key: "rbac.authorization.k8s.io/rolebindings",
        schema: None,
        custom: false,
    };
    let rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "r"},
        "subjects": [{"kind": "User", "name": "u"}]});
    assert_eq!(
        created_fields(&rb, Scope::All, &bindings),
        json!({"f:roleRef": {"f:kind": {}, "f:name": {}}, "f:subjects": {}})
    );
}
