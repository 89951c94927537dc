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

fn rule(verbs: &[&str], resources: &[&str]) -> Vec<u8> {
    let mut r: Vec<u8> = verbs.iter().flat_map(|v| field(1, v.as_bytes())).collect();
    r.extend(field(2, b""));
    r.extend(resources.iter().flat_map(|v| field(3, v.as_bytes())));
    field(2, &r)
}

#[test]
fn decodes_roles_with_repeated_rules() {
    let raw = [
        field(1, &field(1, b"reader")),
        rule(&["get", "list"], &["configmaps"]),
        rule(&["watch"], &["secrets", "events"]),
    ]
    .concat();
    let v = decode(&body("rbac.authorization.k8s.io/v1", "Role", &raw)).unwrap();
    assert_eq!(
        v,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reader"},
            "rules": [
                {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]},
                {"verbs": ["watch"], "apiGroups": [""], "resources": ["secrets", "events"]},
            ]
        })
    );
}

#[test]
fn rejects_malformed_bodies() {
    let wrong_wire_type = field(2, &int(1, 7));
    let err = decode(&body(
        "rbac.authorization.k8s.io/v1",
        "Role",
        &wrong_wire_type,
    ))
    .unwrap_err();
    assert!(
        err.contains("unexpected wire type for field verbs"),
        "{err}"
    );
    // A kind with a pod template, or one no documented flow sends as protobuf, is refused, not
    // decoded in part.
    for (version, kind) in [("batch/v1", "CronJob"), ("v1", "Service")] {
        let err = decode(&body(version, kind, &[])).unwrap_err();
        assert!(err.contains("send JSON"), "{err}");
    }

    // Every truncation and every single-byte corruption of a valid body decodes or fails;
    // none panics.
    let good = body(
        "rbac.authorization.k8s.io/v1",
        "Role",
        &[
            field(
                1,
                &[field(1, b"r"), field(11, &entry("app", b"web"))].concat(),
            ),
            rule(&["get"], &["pods"]),
        ]
        .concat(),
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
