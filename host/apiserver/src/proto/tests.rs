use super::decode::*;
use serde_json::json;

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = vec![];
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn field(num: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = varint(u64::from(num) << 3 | 2);
    out.extend(varint(payload.len() as u64));
    out.extend_from_slice(payload);
    out
}

fn int(num: u32, v: i64) -> Vec<u8> {
    let mut out = varint(u64::from(num) << 3);
    out.extend(varint(v as u64));
    out
}

fn entry(k: &str, v: &[u8]) -> Vec<u8> {
    [field(1, k.as_bytes()), field(2, v)].concat()
}

/// What client-go writes for a zero `metav1.Time`.
fn zero_time(num: u32) -> Vec<u8> {
    field(num, b"")
}

fn body(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
    [b"k8s\x00".to_vec(), field(1, &type_meta), field(2, raw)].concat()
}

fn int_or_string_int(num: u32, v: i64) -> Vec<u8> {
    field(num, &[int(1, 0), int(2, v), field(3, b"")].concat())
}

fn int_or_string_str(num: u32, v: &str) -> Vec<u8> {
    field(
        num,
        &[int(1, 1), int(2, 0), field(3, v.as_bytes())].concat(),
    )
}

#[test]
fn decodes_a_configmap() {
    let mut meta = field(1, b"cm1");
    meta.extend(field(11, &[field(1, b"app"), field(2, b"web")].concat()));
    let mut cm = field(1, &meta);
    cm.extend(field(2, &[field(1, b"k"), field(2, b"v")].concat()));
    let mut unknown = field(1, &[field(1, b"v1"), field(2, b"ConfigMap")].concat());
    unknown.extend(field(2, &cm));
    let mut body = b"k8s\x00".to_vec();
    body.extend(unknown);
    let v = decode(&body).unwrap();
    assert_eq!(
        v,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm1", "labels": {"app": "web"}}, "data": {"k": "v"}})
    );
}

/// A container as gogo-protobuf writes it: every non-pointer field, zero or not.
fn plain_container(name: &str, image: &str, command: &[&str]) -> Vec<u8> {
    let mut c = [field(1, name.as_bytes()), field(2, image.as_bytes())].concat();
    for arg in command {
        c.extend(field(3, arg.as_bytes()));
    }
    c.extend(
        [
            field(5, b""),
            field(8, b""),
            field(13, b""),
            field(14, b""),
            int(16, 0),
            int(17, 0),
            int(18, 0),
            field(20, b""),
        ]
        .concat(),
    );
    c
}

fn plain_pod_spec(containers: &[Vec<u8>], restart: &str) -> Vec<u8> {
    let mut s = vec![];
    for c in containers {
        s.extend(field(2, c));
    }
    s.extend(
        [
            field(3, restart.as_bytes()),
            field(6, b""),
            field(8, b""),
            field(9, b""),
            field(10, b""),
            int(11, 0),
            int(12, 0),
            int(13, 0),
            field(16, b""),
            field(17, b""),
            field(19, b""),
        ]
        .concat(),
    );
    s
}

#[test]
fn decodes_a_cronjob_as_kubectl_create_sends_it() {
    let container = plain_container("cj1", "busybox", &["echo", "hi"]);
    let template = [
        field(1, &zero_time(8)),
        field(2, &plain_pod_spec(&[container], "OnFailure")),
    ]
    .concat();
    let job_template = [
        field(1, &[field(1, b"cj1"), zero_time(8)].concat()),
        field(2, &field(6, &template)),
    ]
    .concat();
    let spec = [
        field(1, b"*/1 * * * *"),
        field(3, b""),
        field(5, &job_template),
    ]
    .concat();
    // The other spellings of the zero time: Go's year 1, and an explicit {0, 0}.
    let meta = [
        field(1, b"cj1"),
        field(3, b"t1"),
        int(7, 0),
        field(8, &int(1, -62_135_596_800)),
        field(9, &[int(1, 0), int(2, 0)].concat()),
    ]
    .concat();
    let status = field(4, &int(1, 1_700_000_000));
    let raw = [field(1, &meta), field(2, &spec), field(3, &status)].concat();
    let v = decode(&body("batch/v1", "CronJob", &raw)).unwrap();
    assert_eq!(
        v,
        json!({
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "cj1", "namespace": "t1"},
            "spec": {
                "schedule": "*/1 * * * *",
                "jobTemplate": {
                    "metadata": {"name": "cj1"},
                    "spec": {"template": {
                        "metadata": {},
                        "spec": {
                            "containers": [{"name": "cj1", "image": "busybox", "command": ["echo", "hi"], "resources": {}}],
                            "restartPolicy": "OnFailure"
                        }
                    }}
                }
            },
            "status": {"lastScheduleTime": "2023-11-14T22:13:20Z"}
        })
    );
}

#[test]
fn decodes_a_job_with_a_full_pod_template() {
    let env = [
        field(7, &[field(1, b"PLAIN"), field(2, b"x")].concat()),
        field(
            7,
            &[
                field(1, b"FROM_CM"),
                field(2, b""),
                field(
                    3,
                    &field(
                        3,
                        &[field(1, &field(1, b"cm")), field(2, b"k"), int(3, 1)].concat(),
                    ),
                ),
            ]
            .concat(),
        ),
        field(
            7,
            &[
                field(1, b"POD"),
                field(
                    3,
                    &field(1, &[field(1, b"v1"), field(2, b"metadata.name")].concat()),
                ),
            ]
            .concat(),
        ),
        field(
            19,
            &[field(1, b"P_"), field(3, &field(1, &field(1, b"sec")))].concat(),
        ),
    ]
    .concat();
    let ports = field(
        6,
        &[
            field(1, b"http"),
            int(2, 0),
            int(3, 8080),
            field(4, b"TCP"),
            field(5, b""),
        ]
        .concat(),
    );
    let resources = field(
        8,
        &[
            field(1, &entry("cpu", &field(1, b"500m"))),
            field(1, &entry("memory", &field(1, b"128Mi"))),
            field(2, &entry("cpu", &field(1, b"250m"))),
        ]
        .concat(),
    );
    let mounts = field(
        9,
        &[
            field(1, b"cfg"),
            int(2, 1),
            field(3, b"/etc/cfg"),
            field(4, b""),
            field(6, b""),
        ]
        .concat(),
    );
    let liveness = field(
        10,
        &[
            field(
                1,
                &field(
                    2,
                    &[field(1, b"/healthz"), int_or_string_str(2, "http")].concat(),
                ),
            ),
            int(2, 5),
            int(3, 0),
            int(4, 0),
        ]
        .concat(),
    );
    let readiness = field(11, &field(1, &field(3, &int_or_string_int(1, 8080))));
    let security = field(
        15,
        &[int(4, 1000), int(5, 1), field(1, &field(2, b"ALL"))].concat(),
    );
    let container = [
        field(1, b"main"),
        field(2, b"busybox:1.36"),
        field(4, b"run"),
        field(5, b"/work"),
        ports,
        env,
        resources,
        mounts,
        liveness,
        readiness,
        field(14, b"IfNotPresent"),
        security,
        int(16, 0),
    ]
    .concat();
    let volumes = [
        field(
            1,
            &[
                field(1, b"cfg"),
                field(
                    2,
                    &field(
                        19,
                        &[field(1, &field(1, b"app-config")), int(3, 420)].concat(),
                    ),
                ),
            ]
            .concat(),
        ),
        field(
            1,
            &[
                field(1, b"scratch"),
                field(
                    2,
                    &field(2, &[field(1, b""), field(2, &field(1, b"1Gi"))].concat()),
                ),
            ]
            .concat(),
        ),
    ]
    .concat();
    let pod_security = field(
        14,
        &[
            int(2, 1000),
            int(3, 1),
            int(4, 10),
            // a packed run of supplementalGroups as well as an unpacked one
            field(4, &[varint(20), varint(30)].concat()),
            int(5, 2000),
        ]
        .concat(),
    );
    let pod_spec = [
        volumes,
        field(2, &container),
        field(3, b"Never"),
        int(4, 10),
        field(7, &entry("disk", b"ssd")),
        field(8, b"runner"),
        int(11, 0),
        pod_security,
        field(
            22,
            &[
                field(1, b"dedicated"),
                field(2, b"Equal"),
                field(3, b"batch"),
                field(4, b"NoExecute"),
                int(5, 60),
            ]
            .concat(),
        ),
        int(25, -5),
        int(30, 0),
    ]
    .concat();
    let spec = [
        int(1, 2),
        int(7, 0),
        field(6, &[field(1, &field(11, &entry("app", b"j")))].concat()),
        field(6, &[field(2, &pod_spec)].concat()),
        int(10, 0),
        int(8, 100),
    ]
    .concat();
    let owner = [
        field(1, b"CronJob"),
        field(3, b"cj1"),
        field(4, b"uid-1"),
        field(5, b"batch/v1"),
        int(6, 1),
        int(7, 1),
    ]
    .concat();
    let meta = [
        field(1, b"j1"),
        field(3, b"t1"),
        field(12, &entry("cronjob.kubernetes.io/instantiate", b"manual")),
        field(13, &owner),
    ]
    .concat();
    let raw = [field(1, &meta), field(2, &spec)].concat();
    let v = decode(&body("batch/v1", "Job", &raw)).unwrap();
    assert_eq!(
        v["metadata"],
        json!({
            "name": "j1",
            "namespace": "t1",
            "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "CronJob", "name": "cj1", "uid": "uid-1", "controller": true, "blockOwnerDeletion": true}]
        })
    );
    let spec = &v["spec"];
    assert_eq!(spec["parallelism"], json!(2));
    assert_eq!(spec["backoffLimit"], json!(0), "a pointer's zero is kept");
    assert_eq!(spec["suspend"], json!(false));
    assert_eq!(spec["ttlSecondsAfterFinished"], json!(100));
    assert_eq!(
        spec["template"]["metadata"],
        json!({"labels": {"app": "j"}}),
        "two occurrences of a message field both count"
    );
    let pod = &spec["template"]["spec"];
    assert_eq!(
        pod["volumes"],
        json!([
            {"name": "cfg", "configMap": {"name": "app-config", "defaultMode": 420}},
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}}
        ])
    );
    assert_eq!(pod["restartPolicy"], json!("Never"));
    assert_eq!(pod["terminationGracePeriodSeconds"], json!(10));
    assert_eq!(pod["nodeSelector"], json!({"disk": "ssd"}));
    assert_eq!(pod["serviceAccountName"], json!("runner"));
    assert_eq!(pod.get("hostNetwork"), None);
    assert_eq!(pod["enableServiceLinks"], json!(false));
    assert_eq!(pod["priority"], json!(-5));
    assert_eq!(
        pod["securityContext"],
        json!({"runAsUser": 1000, "runAsNonRoot": true, "supplementalGroups": [10, 20, 30], "fsGroup": 2000})
    );
    assert_eq!(
        pod["tolerations"],
        json!([{"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoExecute", "tolerationSeconds": 60}])
    );
    assert_eq!(
        pod["containers"][0],
        json!({
            "name": "main",
            "image": "busybox:1.36",
            "args": ["run"],
            "workingDir": "/work",
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "env": [
                {"name": "PLAIN", "value": "x"},
                {"name": "FROM_CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k", "optional": true}}},
                {"name": "POD", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}
            ],
            "envFrom": [{"prefix": "P_", "secretRef": {"name": "sec"}}],
            "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
            "volumeMounts": [{"name": "cfg", "readOnly": true, "mountPath": "/etc/cfg"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "initialDelaySeconds": 5},
            "readinessProbe": {"tcpSocket": {"port": 8080}},
            "imagePullPolicy": "IfNotPresent",
            "securityContext": {"runAsUser": 1000, "runAsNonRoot": true, "capabilities": {"drop": ["ALL"]}}
        })
    );
}

fn service_port(name: &str, port: i64, target: Vec<u8>, node_port: i64) -> Vec<u8> {
    field(
        1,
        &[
            field(1, name.as_bytes()),
            field(2, b"TCP"),
            int(3, port),
            target,
            int(5, node_port),
        ]
        .concat(),
    )
}

#[test]
fn decodes_services_with_int_and_string_target_ports() {
    let spec = [
        service_port("80-8080", 80, int_or_string_int(4, 8080), 0),
        field(2, &entry("app", b"s1")),
        field(3, b""),
        field(4, b"ClusterIP"),
        field(7, b""),
        field(10, b""),
        field(11, b""),
        int(12, 0),
        int(13, 0),
    ]
    .concat();
    let raw = [
        field(
            1,
            &[field(1, b"s1"), field(11, &entry("app", b"s1"))].concat(),
        ),
        field(2, &spec),
        field(3, &field(1, b"")),
    ]
    .concat();
    let v = decode(&body("v1", "Service", &raw)).unwrap();
    assert_eq!(
        v,
        json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s1", "labels": {"app": "s1"}},
            "spec": {
                "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
                "selector": {"app": "s1"},
                "type": "ClusterIP"
            },
            "status": {"loadBalancer": {}}
        })
    );
    let spec = [
        service_port("web", 80, int_or_string_str(4, "http"), 30080),
        field(4, b"NodePort"),
        field(19, b"IPv4"),
    ]
    .concat();
    let v = decode(&body("v1", "Service", &field(2, &spec))).unwrap();
    assert_eq!(
        v["spec"],
        json!({
            "ports": [{"name": "web", "protocol": "TCP", "port": 80, "targetPort": "http", "nodePort": 30080}],
            "type": "NodePort",
            "ipFamilies": ["IPv4"]
        })
    );
}

#[test]
fn decodes_a_pod() {
    let raw = [
        field(1, &field(1, b"p1")),
        field(
            2,
            &plain_pod_spec(&[plain_container("c", "nginx", &[])], "Always"),
        ),
        field(3, &[field(1, b"Pending"), zero_time(7)].concat()),
    ]
    .concat();
    let v = decode(&body("v1", "Pod", &raw)).unwrap();
    assert_eq!(
        v,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p1"},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {}}], "restartPolicy": "Always"},
            "status": {"phase": "Pending"}
        })
    );
}

#[test]
fn rejects_malformed_workload_bodies() {
    let bad_kind = field(2, &service_port("p", 80, field(4, &int(1, 7)), 0));
    let err = decode(&body("v1", "Service", &bad_kind)).unwrap_err();
    assert!(err.contains("IntOrString"), "{err}");
    let varint_port = field(2, &service_port("p", 80, int(4, 8080), 0));
    assert!(decode(&body("v1", "Service", &varint_port)).is_err());
    let bad_quantity = field(
        2,
        &field(
            6,
            &field(
                2,
                &field(2, &field(8, &field(1, &entry("cpu", &field(1, &[0xff]))))),
            ),
        ),
    );
    assert!(decode(&body("batch/v1", "Job", &bad_quantity)).is_err());

    // Every truncation and every single-byte corruption of a valid body decodes or fails;
    // none panics.
    let good = body(
        "batch/v1",
        "Job",
        &field(
            2,
            &field(
                6,
                &field(
                    2,
                    &plain_pod_spec(&[plain_container("c", "i", &["a"])], "Never"),
                ),
            ),
        ),
    );
    assert!(decode(&good).is_ok());
    for n in 0..good.len() {
        let _ = decode(&good[..n]);
        for flip in [0x00, 0x7f, 0x80, 0xff] {
            let mut b = good.clone();
            b[n] ^= flip;
            let _ = decode(&b);
        }
    }
}
