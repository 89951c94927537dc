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

/// Sets `key` to the list, or removes it when the list is empty, as the API server's omitempty
/// leaves an empty list out of what it stores.
pub fn set_list<T: Into<Value>>(map: &mut Map<String, Value>, key: &str, list: Vec<T>) {
    if list.is_empty() {
        map.remove(key);
    } else {
        map.insert(
            key.into(),
            Value::Array(list.into_iter().map(Into::into).collect()),
        );
    }
}

/// A string field of the object's `metadata` (`name`, `namespace`, `uid`); empty when unset.
pub fn meta_str<'a>(v: &'a Value, field: &str) -> &'a str {
    v["metadata"][field].as_str().unwrap_or_default()
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

/// Writes `content` to `path`, readable by its owner only (keys and tokens).
///
/// The file is written beside `path` under a temporary name, created with owner-only
/// permissions, and renamed into place: a reader (kubectl, a second lethe, a test waiting for the
/// kubeconfig) sees either no file or the whole of it, never a truncated one, and the secret is
/// never readable by others, not even for an instant.
pub fn write_private(path: &Path, content: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    let temporary = path.with_file_name(name);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let written = options.open(&temporary).and_then(|mut file| {
        file.write_all(content.as_bytes())?;
        file.sync_all()
    });
    if let Err(e) = written.and_then(|()| std::fs::rename(&temporary, path)) {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::write_private;

    #[test]
    fn a_private_file_replaces_the_old_one_whole_and_owner_only() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, "old and readable by all").expect("write");
        write_private(&path, "token: secret\n").expect("write_private");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "token: secret\n"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("kubeconfig")]);
    }
}
