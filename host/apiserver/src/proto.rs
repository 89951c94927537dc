//! Decoding of the Kubernetes protobuf encoding (`application/vnd.kubernetes.protobuf`) for the
//! kinds that kubectl's typed clients send (`kubectl create namespace|configmap|secret|role…`,
//! `kubectl auth can-i`). Bodies are turned into the equivalent JSON.

use base64::Engine;
use serde_json::{Map, Value, json};

#[derive(Clone, Copy)]
enum T {
    Str,
    Int,
    Bool,
    Time,
    MicroTime,
    Msg(&'static [(u32, &'static str, T)]),
    MapStr,
    MapBytes,
    RepStr,
    RepMsg(&'static [(u32, &'static str, T)]),
}

type Schema = &'static [(u32, &'static str, T)];

const OWNER_REF: Schema = &[
    (5, "apiVersion", T::Str),
    (1, "kind", T::Str),
    (3, "name", T::Str),
    (4, "uid", T::Str),
    (6, "controller", T::Bool),
    (7, "blockOwnerDeletion", T::Bool),
];
const OBJECT_META: Schema = &[
    (1, "name", T::Str),
    (2, "generateName", T::Str),
    (3, "namespace", T::Str),
    (5, "uid", T::Str),
    (6, "resourceVersion", T::Str),
    (7, "generation", T::Int),
    (8, "creationTimestamp", T::Time),
    (9, "deletionTimestamp", T::Time),
    (10, "deletionGracePeriodSeconds", T::Int),
    (11, "labels", T::MapStr),
    (12, "annotations", T::MapStr),
    (13, "ownerReferences", T::RepMsg(OWNER_REF)),
    (14, "finalizers", T::RepStr),
];
const NAMESPACE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(&[(1, "finalizers", T::RepStr)])),
    (3, "status", T::Msg(&[(1, "phase", T::Str)])),
];
const CONFIGMAP: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "data", T::MapStr),
    (3, "binaryData", T::MapBytes),
    (4, "immutable", T::Bool),
];
const SECRET: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "data", T::MapBytes),
    (3, "type", T::Str),
    (4, "stringData", T::MapStr),
    (5, "immutable", T::Bool),
];
const SERVICEACCOUNT: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (4, "automountServiceAccountToken", T::Bool),
];
const RESOURCE_ATTRS: Schema = &[
    (1, "namespace", T::Str),
    (2, "verb", T::Str),
    (3, "group", T::Str),
    (4, "version", T::Str),
    (5, "resource", T::Str),
    (6, "subresource", T::Str),
    (7, "name", T::Str),
];
const NON_RESOURCE_ATTRS: Schema = &[(1, "path", T::Str), (2, "verb", T::Str)];
const SSAR: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (
        2,
        "spec",
        T::Msg(&[
            (1, "resourceAttributes", T::Msg(RESOURCE_ATTRS)),
            (2, "nonResourceAttributes", T::Msg(NON_RESOURCE_ATTRS)),
        ]),
    ),
];
const SAR: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (
        2,
        "spec",
        T::Msg(&[
            (1, "resourceAttributes", T::Msg(RESOURCE_ATTRS)),
            (2, "nonResourceAttributes", T::Msg(NON_RESOURCE_ATTRS)),
            (3, "user", T::Str),
            (4, "groups", T::RepStr),
            (6, "uid", T::Str),
        ]),
    ),
];
const POLICY_RULE: Schema = &[
    (1, "verbs", T::RepStr),
    (2, "apiGroups", T::RepStr),
    (3, "resources", T::RepStr),
    (4, "resourceNames", T::RepStr),
    (5, "nonResourceURLs", T::RepStr),
];
const ROLE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "rules", T::RepMsg(POLICY_RULE)),
];
const SUBJECT: Schema = &[
    (1, "kind", T::Str),
    (2, "apiGroup", T::Str),
    (3, "name", T::Str),
    (4, "namespace", T::Str),
];
const ROLE_REF: Schema = &[
    (1, "apiGroup", T::Str),
    (2, "kind", T::Str),
    (3, "name", T::Str),
];
const BINDING: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "subjects", T::RepMsg(SUBJECT)),
    (3, "roleRef", T::Msg(ROLE_REF)),
];
const LEASE: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (
        2,
        "spec",
        T::Msg(&[
            (1, "holderIdentity", T::Str),
            (2, "leaseDurationSeconds", T::Int),
            (3, "acquireTime", T::MicroTime),
            (4, "renewTime", T::MicroTime),
            (5, "leaseTransitions", T::Int),
            (6, "strategy", T::Str),
            (7, "preferredHolder", T::Str),
        ]),
    ),
];
const SELF_SUBJECT_REVIEW: Schema = &[(1, "metadata", T::Msg(OBJECT_META))];
const SELF_SUBJECT_RULES_REVIEW: Schema = &[
    (1, "metadata", T::Msg(OBJECT_META)),
    (2, "spec", T::Msg(&[(1, "namespace", T::Str)])),
];
const DELETE_OPTIONS: Schema = &[
    (1, "gracePeriodSeconds", T::Int),
    (
        2,
        "preconditions",
        T::Msg(&[(1, "uid", T::Str), (2, "resourceVersion", T::Str)]),
    ),
    (3, "orphanDependents", T::Bool),
    (4, "propagationPolicy", T::Str),
    (5, "dryRun", T::RepStr),
];

fn schema_for(kind: &str) -> Option<Schema> {
    Some(match kind {
        "Namespace" => NAMESPACE,
        "ConfigMap" => CONFIGMAP,
        "Secret" => SECRET,
        "ServiceAccount" => SERVICEACCOUNT,
        "SelfSubjectAccessReview" => SSAR,
        "SubjectAccessReview" | "LocalSubjectAccessReview" => SAR,
        "Role" | "ClusterRole" => ROLE,
        "RoleBinding" | "ClusterRoleBinding" => BINDING,
        "Lease" => LEASE,
        "SelfSubjectReview" => SELF_SUBJECT_REVIEW,
        "SelfSubjectRulesReview" => SELF_SUBJECT_RULES_REVIEW,
        "DeleteOptions" => DELETE_OPTIONS,
        _ => return None,
    })
}

struct Reader<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self.b.get(self.i).ok_or("truncated varint")?;
            self.i += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint too long".into())
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.i.checked_add(n).ok_or("length overflow")?;
        let s = self.b.get(self.i..end).ok_or("truncated field")?;
        self.i = end;
        Ok(s)
    }

    fn done(&self) -> bool {
        self.i >= self.b.len()
    }
}

enum Raw<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

fn fields(b: &[u8]) -> Result<Vec<(u32, Raw<'_>)>, String> {
    let mut r = Reader { b, i: 0 };
    let mut out = vec![];
    while !r.done() {
        let key = r.varint()?;
        let num = (key >> 3) as u32;
        let raw = match key & 7 {
            0 => Raw::Varint(r.varint()?),
            1 => {
                r.take(8)?;
                Raw::Other
            }
            2 => {
                let n = r.varint()? as usize;
                Raw::Bytes(r.take(n)?)
            }
            5 => {
                r.take(4)?;
                Raw::Other
            }
            w => return Err(format!("unsupported wire type {w}")),
        };
        out.push((num, raw));
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8 in string".to_string())
}

fn time(b: &[u8], micro: bool) -> Result<Value, String> {
    let mut secs = 0i64;
    let mut nanos = 0i64;
    for (n, raw) in fields(b)? {
        if let Raw::Varint(v) = raw {
            match n {
                1 => secs = v as i64,
                2 => nanos = v as i64,
                _ => {}
            }
        }
    }
    // Go's zero time (0001-01-01T00:00:00Z) is `null` in JSON.
    const GO_ZERO_TIME: i64 = -62_135_596_800;
    if secs == GO_ZERO_TIME && nanos == 0 {
        return Ok(Value::Null);
    }
    let t = chrono::DateTime::from_timestamp(secs, nanos as u32).ok_or("invalid time")?;
    Ok(json!(if micro {
        t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    } else {
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    }))
}

fn map_entry(b: &[u8], bytes_value: bool) -> Result<(String, Value), String> {
    let mut k = String::new();
    let mut v = Value::String(String::new());
    for (n, raw) in fields(b)? {
        if let Raw::Bytes(x) = raw {
            match n {
                1 => k = string(x)?,
                2 => {
                    v = if bytes_value {
                        json!(base64::engine::general_purpose::STANDARD.encode(x))
                    } else {
                        json!(string(x)?)
                    }
                }
                _ => {}
            }
        }
    }
    Ok((k, v))
}

fn message(b: &[u8], schema: Schema) -> Result<Map<String, Value>, String> {
    let mut m = Map::new();
    for (num, raw) in fields(b)? {
        let Some((_, name, t)) = schema.iter().find(|(n, _, _)| *n == num) else {
            continue;
        };
        let name = name.to_string();
        match (t, raw) {
            (T::Str, Raw::Bytes(x)) => {
                if !x.is_empty() {
                    m.insert(name, json!(string(x)?));
                }
            }
            (T::Int, Raw::Varint(v)) => {
                m.insert(name, json!(v as i64));
            }
            (T::Bool, Raw::Varint(v)) => {
                m.insert(name, json!(v != 0));
            }
            (T::Time, Raw::Bytes(x)) => {
                let t = time(x, false)?;
                if !t.is_null() {
                    m.insert(name, t);
                }
            }
            (T::MicroTime, Raw::Bytes(x)) => {
                let t = time(x, true)?;
                if !t.is_null() {
                    m.insert(name, t);
                }
            }
            (T::Msg(s), Raw::Bytes(x)) => {
                m.insert(name, Value::Object(message(x, s)?));
            }
            (T::MapStr | T::MapBytes, Raw::Bytes(x)) => {
                let (k, v) = map_entry(x, matches!(t, T::MapBytes))?;
                if let Some(obj) = m
                    .entry(name)
                    .or_insert_with(|| Value::Object(Map::new()))
                    .as_object_mut()
                {
                    obj.insert(k, v);
                }
            }
            (T::RepStr, Raw::Bytes(x)) => {
                let s = string(x)?;
                if let Some(a) = m
                    .entry(name)
                    .or_insert_with(|| Value::Array(vec![]))
                    .as_array_mut()
                {
                    a.push(json!(s));
                }
            }
            (T::RepMsg(s), Raw::Bytes(x)) => {
                let item = Value::Object(message(x, s)?);
                if let Some(a) = m
                    .entry(name)
                    .or_insert_with(|| Value::Array(vec![]))
                    .as_array_mut()
                {
                    a.push(item);
                }
            }
            _ => return Err(format!("unexpected wire type for field {name}")),
        }
    }
    Ok(m)
}

/// Decodes a `k8s\0`-prefixed protobuf body into JSON.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(b"k8s\x00")
        .ok_or("missing the k8s protobuf envelope")?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Raw::Bytes(tm)) => {
                for (tn, tf) in fields(tm)? {
                    if let Raw::Bytes(x) = tf {
                        match tn {
                            1 => api_version = string(x)?,
                            2 => kind = string(x)?,
                            _ => {}
                        }
                    }
                }
            }
            (2, Raw::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    let schema = schema_for(&kind)
        .ok_or_else(|| format!("protobuf bodies of kind {kind:?} are not supported; send JSON"))?;
    let mut m = message(raw, schema)?;
    if !api_version.is_empty() {
        m.insert("apiVersion".into(), json!(api_version));
    }
    if !kind.is_empty() {
        m.insert("kind".into(), json!(kind));
    }
    Ok(Value::Object(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(num: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = vec![((num << 3) | 2) as u8, payload.len() as u8];
        out.extend_from_slice(payload);
        out
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
}
