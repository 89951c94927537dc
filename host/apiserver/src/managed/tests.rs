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
    force: bool,
    schema: &KindSchema,
    now: &str,
) -> Result<(), crate::status::ApiError> {
    let writer = writer(manager);
    let a = Apply {
        body,
        writer: &writer,
        force,
        scope: Scope::All,
        schema,
        now,
    };
    apply(live, merged, &a)
}

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "namespace": "d", "uid": "u", "resourceVersion": "1",
            "creationTimestamp": "t"},
        "data": data})
}

#[test]
fn managers_come_from_the_user_agent_prefix() {
    assert_eq!(
        manager_from_user_agent("kubectl-create/v1.32.0 (linux/amd64) kubernetes/abc"),
        "kubectl-create"
    );
    assert_eq!(manager_from_user_agent(""), "");
    assert_eq!(manager_from_user_agent("a\tb\u{7}c/x"), "abc");
    assert_eq!(manager_from_user_agent(&"m".repeat(300)).len(), 128);
    // Whole characters only: 127 bytes and a 2-byte character do not fit.
    let ua = format!("{}é", "m".repeat(127));
    assert_eq!(manager_from_user_agent(&ua), "m".repeat(127));
}

#[test]
fn a_create_owns_every_field_with_maps_marked() {
    let mut obj = cm(json!({"a": "1"}));
    obj["metadata"]["labels"] = json!({"app": "y"});
    record_create(
        &mut obj,
        &writer("kubectl-create"),
        Scope::All,
        &KindSchema::atomic(),
        "T1",
    );
    assert_eq!(
        obj["metadata"]["managedFields"],
        json!([{"manager": "kubectl-create", "operation": "Update", "apiVersion": "v1",
            "time": "T1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {".": {}, "f:a": {}},
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}}])
    );
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"x": 1}, "status": {"phase": "Pending"}});
    record_create(
        &mut pod,
        &writer("m"),
        Scope::NoStatus,
        &KindSchema::atomic(),
        "T1",
    );
    assert_eq!(
        pod["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:spec": {".": {}, "f:x": {}}})
    );
}

#[test]
fn an_update_takes_the_fields_it_changes() {
    let mut old = cm(json!({"a": "1", "b": "2"}));
    record_create(
        &mut old,
        &writer("kubectl-create"),
        Scope::All,
        &KindSchema::atomic(),
        "T1",
    );
    let mut new = old.clone();
    new["data"] = json!({"a": "9", "c": "3"});
    record_update(
        &old,
        &mut new,
        &writer("kubectl-edit"),
        Scope::All,
        &KindSchema::atomic(),
        "T2",
    );
    let mf = &new["metadata"]["managedFields"];
    assert_eq!(mf.as_array().map(Vec::len), Some(2), "{mf}");
    assert_eq!(mf[0]["manager"], "kubectl-create");
    assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {}}));
    assert_eq!(mf[1]["manager"], "kubectl-edit");
    assert_eq!(mf[1]["time"], "T2");
    assert_eq!(mf[1]["fieldsV1"], json!({"f:data": {"f:a": {}, "f:c": {}}}));
    // No change, no new entry or time.
    let mut same = new.clone();
    record_update(
        &new,
        &mut same,
        &writer("other"),
        Scope::All,
        &KindSchema::atomic(),
        "T3",
    );
    assert_eq!(same, new);
    // Objects without entries are not tracked by updates.
    let old = cm(json!({"a": "1"}));
    let mut new = cm(json!({"a": "2"}));
    record_update(
        &old,
        &mut new,
        &writer("m"),
        Scope::All,
        &KindSchema::atomic(),
        "T2",
    );
    assert!(new["metadata"].get("managedFields").is_none());
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
        true,
        &KindSchema::atomic(),
        "T2",
    )
    .map_err(|e| e.message)
    .unwrap();
    // Dropping them all while the creator still owns N others.
    let live = merged.clone();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    apply_by(
        Some(&live),
        &mut merged,
        &body,
        "kubectl",
        false,
        &KindSchema::atomic(),
        "T3",
    )
    .map_err(|e| e.message)
    .unwrap();
    let left = merged["data"].as_object().unwrap();
    assert_eq!(left.len(), N);
    assert!(left.keys().all(|k| k.starts_with('b')));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn applies_conflict_with_update_managers_using_their_version() {
    let mut live = cm(json!({"a": "1"}));
    record_create(
        &mut live,
        &writer("kubectl-create"),
        Scope::All,
        &KindSchema::atomic(),
        "T1",
    );
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"},
        "data": {"a": "2"}});
    let mut merged = live.clone();
    merged["data"]["a"] = json!("2");
    let e = apply_by(
        Some(&live),
        &mut merged.clone(),
        &body,
        "kubectl",
        false,
        &KindSchema::atomic(),
        "T2",
    )
    .err()
    .map(|e| e.message);
    assert_eq!(
        e.as_deref(),
        Some("Apply failed with 1 conflict: conflict with \"kubectl-create\" using v1: .data.a")
    );
    apply_by(
        Some(&live),
        &mut merged,
        &body,
        "kubectl",
        true,
        &KindSchema::atomic(),
        "T2",
    )
    .map_err(|e| e.message)
    .unwrap();
    let mf = &merged["metadata"]["managedFields"];
    assert_eq!(mf[0]["manager"], "kubectl");
    assert_eq!(mf[0]["operation"], "Apply");
    assert_eq!(mf[0]["fieldsV1"], json!({"f:data": {"f:a": {}}}));
    assert_eq!(mf[1]["manager"], "kubectl-create");
    assert_eq!(mf[1]["fieldsV1"], json!({"f:data": {}}));
    // A status writer is named with its subresource.
    let status = Writer {
        manager: "ctl",
        api_version: "v1",
        subresource: Some("status"),
    };
    let e = status.entry("Update", "T", json!({}));
    assert_eq!(
        manager_label(&e),
        "\"ctl\" with subresource \"status\" using v1"
    );
    // An object without entries: its fields belong to before-first-apply.
    let live = cm(json!({"a": "1"}));
    let mut merged = cm(json!({"a": "2"}));
    let e = apply_by(
        Some(&live),
        &mut merged,
        &body,
        "kubectl",
        false,
        &KindSchema::atomic(),
        "T2",
    )
    .err()
    .map(|e| e.message);
    assert_eq!(
        e.as_deref(),
        Some(
            "Apply failed with 1 conflict: conflict with \"before-first-apply\" using v1: .data.a"
        )
    );
}

#[test]
fn status_writes_record_their_subresource_and_only_status() {
    let mut old = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"x": 1}});
    record_create(
        &mut old,
        &writer("kubectl-run"),
        Scope::NoStatus,
        &KindSchema::atomic(),
        "T1",
    );
    let mut new = old.clone();
    new["status"] = json!({"phase": "Running"});
    new["spec"]["x"] = json!(2);
    let w = Writer {
        manager: "kubelet",
        api_version: "v1",
        subresource: Some("status"),
    };
    record_update(
        &old,
        &mut new,
        &w,
        Scope::StatusOnly,
        &KindSchema::atomic(),
        "T2",
    );
    let mf = &new["metadata"]["managedFields"];
    assert_eq!(mf[0]["manager"], "kubectl-run");
    assert_eq!(mf[0]["fieldsV1"], json!({"f:spec": {".": {}, "f:x": {}}}));
    assert_eq!(mf[1]["manager"], "kubelet");
    assert_eq!(mf[1]["subresource"], "status");
    assert_eq!(
        mf[1]["fieldsV1"],
        json!({"f:status": {".": {}, "f:phase": {}}})
    );
    // Entries a client cannot have written are refused as a whole.
    assert!(valid_entries(
        mf.as_array().map(Vec::as_slice).unwrap_or_default()
    ));
    assert!(!valid_entries(&[json!({})]));
}

/// Apply `body` by `manager` onto `live` as ops does: merge, then record.
fn apply_as(
    live: &Value,
    body: Value,
    manager: &str,
    schema: &KindSchema,
) -> Result<Value, String> {
    let mut merged = live.clone();
    merge(&mut merged, &body, schema);
    apply_by(Some(live), &mut merged, &body, manager, false, schema, "T").map_err(|e| e.message)?;
    Ok(merged)
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
    )
    .unwrap();
    // Another manager's items join the lists instead of conflicting.
    let live = apply_as(
        &live,
        job(json!([{"name": "b", "image": "n:1"}]), json!(["x/b"])),
        "b",
        &schema,
    )
    .unwrap();
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
    // Changing another manager's item field is a conflict named by the item's key.
    let e = apply_as(
        &live,
        job(json!([{"name": "a", "image": "i:2"}]), json!(["x/b"])),
        "b",
        &schema,
    )
    .unwrap_err();
    assert_eq!(
        e,
        "Apply failed with 1 conflict: conflict with \"a\": .spec.jobTemplate.spec.template.spec.containers[name=\"a\"].image"
    );
    // Items a manager stops applying go, when no one else owns them.
    let live = apply_as(&live, job(json!([]), json!(["x/b"])), "a", &schema).unwrap();
    let containers = &live["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"];
    assert_eq!(containers, &json!([{"name": "b", "image": "n:1"}]));
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
    assert_eq!(
        path_string(&path(&[
            "f:spec",
            "f:ports",
            "k:{\"port\":80,\"protocol\":\"TCP\"}",
            "f:rules",
            "v:\"r\""
        ])),
        ".spec.ports[port=80,protocol=\"TCP\"].rules[=\"r\"]"
    );
}

#[test]
fn an_item_another_manager_changed_keeps_its_key_and_long_lists_stay_linear() {
    let schema = KindSchema {
        key: "/pods",
        schema: None,
        custom: false,
    };
    let pod = |containers: Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": containers}})
    };
    let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}});
    let live = apply_as(
        &live,
        pod(json!([{"name": "a", "image": "i:1"}])),
        "a",
        &schema,
    )
    .unwrap();
    // Another writer changes the image: it owns that field of the item, not its name.
    let mut changed = live.clone();
    changed["spec"]["containers"][0]["image"] = json!("i:2");
    record_update(
        &live,
        &mut changed,
        &writer("kubectl-set"),
        Scope::All,
        &schema,
        "T",
    );
    let live = apply_as(&changed, pod(json!([])), "a", &schema).unwrap();
    assert_eq!(
        live["spec"]["containers"],
        json!([{"name": "a", "image": "i:2"}])
    );

    // Thousands of items applied, then all dropped, in well under a second each.
    const N: usize = 20_000;
    let many: Vec<Value> = (0..N)
        .map(|i| json!({"name": format!("c{i}"), "image": "x"}))
        .collect();
    let started = std::time::Instant::now();
    let live = apply_as(&live, pod(Value::Array(many)), "a", &schema).unwrap();
    assert_eq!(
        live["spec"]["containers"].as_array().map(Vec::len),
        Some(N + 1)
    );
    let live = apply_as(&live, pod(json!([])), "a", &schema).unwrap();
    assert_eq!(live["spec"]["containers"].as_array().map(Vec::len), Some(1));
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
    let merged = apply_as(&live, body, "kubectl", &KindSchema::atomic()).unwrap();
    assert_eq!(merged["data"], json!({"a": "1"}));
}

#[test]
fn a_create_does_not_own_the_structs_its_kinds_zero_value_has() {
    let cronjobs = KindSchema {
        key: "batch/cronjobs",
        schema: None,
        custom: false,
    };
    let mut cj = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
        "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": {
            "metadata": {"labels": {"app": "c"}},
            "spec": {"containers": [{"name": "main", "image": "x"}]}}}}}});
    record_create(
        &mut cj,
        &writer("kubectl-create"),
        Scope::NoStatus,
        &cronjobs,
        "T",
    );
    assert_eq!(
        cj["metadata"]["managedFields"][0]["fieldsV1"],
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
    let mut rb = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "r"},
        "subjects": [{"kind": "User", "name": "u"}]});
    record_create(
        &mut rb,
        &writer("kubectl-create"),
        Scope::All,
        &bindings,
        "T",
    );
    assert_eq!(
        rb["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:roleRef": {"f:kind": {}, "f:name": {}}, "f:subjects": {}})
    );
}

#[test]
fn more_than_ten_update_managers_merge_the_oldest_into_ancient_changes() {
    let mut entries: Vec<Value> = (0..11)
        .map(|n| {
            writer(&format!("m{n}")).entry(
                "Update",
                &format!("2026-01-01T00:00:{n:02}Z"),
                json!({"f:data": {format!("f:k{n}"): {}}}),
            )
        })
        .collect();
    entries.push(writer("applier").entry("Apply", "2026-01-01T00:00:00Z", json!({})));
    cap_update_entries(&mut entries);
    assert_eq!(entries.len(), 11);
    let ancient: Vec<&Value> = entries
        .iter()
        .filter(|e| e["manager"] == "ancient-changes")
        .collect();
    assert_eq!(ancient.len(), 1);
    assert_eq!(
        ancient[0]["fieldsV1"],
        json!({"f:data": {"f:k0": {}, "f:k1": {}}})
    );
    assert_eq!(ancient[0]["time"], "2026-01-01T00:00:01Z");
    assert!(
        entries
            .iter()
            .all(|e| e["manager"] != "m0" && e["manager"] != "m1")
    );
    // Ten or fewer are left alone.
    let before = entries.clone();
    cap_update_entries(&mut entries);
    assert_eq!(entries, before);
}
