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
fn rejects_malformed_workload_bodies() {
    let bad_kind = field(2, &service_port("p", 80, field(4, &int(1, 7)), 0));
    let err = decode(&body("v1", "Service", &bad_kind)).unwrap_err();
    assert!(err.contains("IntOrString"), "{err}");
    let varint_port = field(2, &service_port("p", 80, int(4, 8080), 0));
    assert!(decode(&body("v1", "Service", &varint_port)).is_err());
    // A kind with a pod template is refused, not decoded in part.
    let err = decode(&body("batch/v1", "CronJob", &[])).unwrap_err();
    assert!(err.contains("send JSON"), "{err}");

    // Every truncation and every single-byte corruption of a valid body decodes or fails;
    // none panics.
    let good = body(
        "v1",
        "Service",
        &field(
            2,
            &[
                service_port("http", 80, int_or_string_str(4, "web"), 30080),
                field(2, &entry("app", b"web")),
            ]
            .concat(),
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
