//! Small helpers every layer of the embedded cluster uses: JSON shaping, timestamps, random
//! name suffixes and private files. This module depends on nothing else in the crate.

use serde_json::{Map, Value};
use std::path::Path;

/// The current time as Kubernetes writes `metav1.Time` (seconds, UTC).
pub fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// The strings of a JSON array (anything else, and non-strings in it, are skipped).
pub fn string_list(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Makes `v` an object (replacing anything else) and returns its map.
pub fn ensure_obj(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

/// Sets `path` inside `v`, turning non-objects on the way into objects.
pub fn set_in(v: &mut Value, path: &[&str], val: Value) {
    let mut cur = v;
    for seg in path {
        cur = ensure_obj(cur)
            .entry(seg.to_string())
            .or_insert(Value::Null);
    }
    *cur = val;
}

/// The object's `metadata`, made an object if it is not one.
pub fn meta_mut(v: &mut Value) -> &mut Map<String, Value> {
    ensure_obj(ensure_obj(v).entry("metadata").or_insert(Value::Null))
}

/// Random suffix as generateName uses.
pub fn random_suffix() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect()
}

/// Removes null members and the empty objects left by setting an absent field, so that two
/// templates compare by what they hold.
pub fn strip_nulls(v: &mut Value) {
    if let Value::Object(m) = v {
        for x in m.values_mut() {
            strip_nulls(x);
        }
        m.retain(|_, x| !(x.is_null() || x.as_object().is_some_and(Map::is_empty)));
    }
}

/// Writes `content` to `path`, readable by its owner only (keys and tokens).
pub fn write_private(path: &Path, content: &str) -> std::io::Result<()> {
    std::fs::write(path, content)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}
