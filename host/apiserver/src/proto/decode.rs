//! The wire decoder: protobuf fields read against a schema and turned into JSON.

use crate::proto::kinds::schema_for;
use crate::proto::shape::{Schema, T};
use base64::Engine;
use serde_json::{Map, Value, json};

pub(super) struct Reader<'a> {
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

pub(super) enum Raw<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Other,
}

pub(super) fn fields(b: &[u8]) -> Result<Vec<(u32, Raw<'_>)>, String> {
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

pub(super) fn string(b: &[u8]) -> Result<String, String> {
    String::from_utf8(b.to_vec()).map_err(|_| "invalid UTF-8 in string".to_string())
}

pub(super) fn time(b: &[u8], micro: bool) -> Result<Value, String> {
    let mut secs = 0i64;
    let mut nanos = 0i64;
    for (n, raw) in fields(b)? {
        match (n, raw) {
            (1, Raw::Varint(v)) => secs = v as i64,
            (2, Raw::Varint(v)) => nanos = v as i64,
            _ => {}
        }
    }
    // Go's zero time is `null` in JSON. client-go writes it as an empty message, and
    // metav1.Time's decoder also reads {0, 0} as the zero time, not the Unix epoch; a literal
    // 0001-01-01T00:00:00Z is the zero time too.
    const GO_ZERO_TIME: i64 = -62_135_596_800;
    if (secs == 0 || secs == GO_ZERO_TIME) && nanos == 0 {
        return Ok(Value::Null);
    }
    let t = chrono::DateTime::from_timestamp(secs, nanos as u32).ok_or("invalid time")?;
    Ok(json!(if micro {
        t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    } else {
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    }))
}

pub(super) fn map_entry(b: &[u8], t: T) -> Result<(String, Value), String> {
    let mut k = String::new();
    let mut v = None;
    for (n, raw) in fields(b)? {
        match (n, raw) {
            (1, Raw::Bytes(x)) => k = string(x)?,
            (2, Raw::Bytes(x)) => {
                v = Some(match t {
                    T::MapBytes => json!(base64::engine::general_purpose::STANDARD.encode(x)),
                    _ => json!(string(x)?),
                })
            }
            _ => {}
        }
    }
    // A map entry may leave out a default value; Go then stores the zero value.
    Ok((k, v.unwrap_or_else(|| json!(""))))
}

pub(super) fn push(m: &mut Map<String, Value>, name: String, item: Value) {
    if let Value::Array(a) = m.entry(name).or_insert_with(|| json!([])) {
        a.push(item);
    }
}

pub(super) fn message(b: &[u8], schema: Schema) -> Result<Map<String, Value>, String> {
    let mut m = Map::new();
    // A singular message field may occur more than once; protobuf merges the occurrences,
    // which is what decoding their concatenation does.
    let mut nested: Vec<(u32, String, Schema, Vec<u8>)> = vec![];
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
            // Go's omitempty leaves a zero out, whatever an earlier occurrence said.
            (T::IntOmitEmpty, Raw::Varint(0)) => {
                m.remove(&name);
            }
            (T::Int | T::IntOmitEmpty, Raw::Varint(v)) => {
                m.insert(name, json!(v as i64));
            }
            (T::Bool, Raw::Varint(v)) => {
                m.insert(name, json!(v != 0));
            }
            (T::Time | T::MicroTime, Raw::Bytes(x)) => {
                let t = time(x, matches!(t, T::MicroTime))?;
                if !t.is_null() {
                    m.insert(name, t);
                }
            }
            (T::Msg(s), Raw::Bytes(x)) => match nested.iter_mut().find(|(n, ..)| *n == num) {
                Some((.., bytes)) => bytes.extend_from_slice(x),
                None => nested.push((num, name, s, x.to_vec())),
            },
            (T::MapStr | T::MapBytes, Raw::Bytes(x)) => {
                let (k, v) = map_entry(x, *t)?;
                if let Value::Object(obj) = m.entry(name).or_insert_with(|| json!({})) {
                    obj.insert(k, v);
                }
            }
            (T::RepStr, Raw::Bytes(x)) => push(&mut m, name, json!(string(x)?)),
            (T::RepMsg(s), Raw::Bytes(x)) => push(&mut m, name, Value::Object(message(x, s)?)),
            _ => return Err(format!("unexpected wire type for field {name}")),
        }
    }
    for (_, name, s, bytes) in nested {
        m.insert(name, Value::Object(message(&bytes, s)?));
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
                    match (tn, tf) {
                        (1, Raw::Bytes(x)) => api_version = string(x)?,
                        (2, Raw::Bytes(x)) => kind = string(x)?,
                        _ => {}
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
