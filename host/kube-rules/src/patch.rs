//! JSON merge patch (RFC 7386) and JSON patch (RFC 6902) as the API server applies them, with
//! evanphx/json-patch's words for an operation that does not apply: the embedded cluster patches
//! with them, and so does the guest SDK's fake cluster, so a component's patch means the same,
//! and fails the same, in its tests.

use serde_json::{Map, Value};

/// RFC 7386 merge patch.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    match patch {
        Value::Object(p) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(t) = target {
                for (k, v) in p {
                    if v.is_null() {
                        t.remove(k);
                    } else {
                        merge_patch(t.entry(k.clone()).or_insert(Value::Null), v);
                    }
                }
            }
        }
        other => *target = other.clone(),
    }
}

fn unescape(tok: &str) -> String {
    tok.replace("~1", "/").replace("~0", "~")
}

fn parse_pointer(p: &str) -> Result<Vec<String>, String> {
    if p.is_empty() {
        return Ok(vec![]);
    }
    let rest = p
        .strip_prefix('/')
        .ok_or_else(|| format!("invalid JSON pointer {p:?}"))?;
    Ok(rest.split('/').map(unescape).collect())
}

fn get_ptr<'a>(v: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut cur = v;
    for seg in path {
        cur = match cur {
            Value::Object(m) => m.get(seg)?,
            Value::Array(a) => a.get(seg.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn parent_mut<'a>(v: &'a mut Value, path: &[String]) -> Result<&'a mut Value, String> {
    let mut cur = v;
    for seg in path {
        cur = match cur {
            Value::Object(m) => m
                .get_mut(seg)
                .ok_or_else(|| format!("missing path segment {seg:?}"))?,
            Value::Array(a) => {
                let i: usize = seg.parse().map_err(|_| format!("invalid index {seg:?}"))?;
                a.get_mut(i)
                    .ok_or_else(|| format!("index {i} out of range"))?
            }
            _ => return Err(format!("cannot descend into {seg:?}")),
        };
    }
    Ok(cur)
}

fn add(doc: &mut Value, path: &[String], value: Value) -> Result<(), String> {
    let Some((last, parent)) = path.split_last() else {
        *doc = value;
        return Ok(());
    };
    match parent_mut(doc, parent)? {
        Value::Object(m) => {
            m.insert(last.clone(), value);
            Ok(())
        }
        Value::Array(a) => {
            if last == "-" {
                a.push(value);
                return Ok(());
            }
            let i: usize = last
                .parse()
                .map_err(|_| format!("invalid index {last:?}"))?;
            if i > a.len() {
                return Err(format!("index {i} out of range"));
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err("add target is not a container".into()),
    }
}

fn remove(doc: &mut Value, path: &[String]) -> Result<Value, String> {
    let Some((last, parent)) = path.split_last() else {
        return Err("cannot remove the root".into());
    };
    match parent_mut(doc, parent)? {
        Value::Object(m) => m
            .remove(last)
            .ok_or_else(|| format!("unable to remove nonexistent key: {last}")),
        Value::Array(a) => {
            let i: usize = last
                .parse()
                .map_err(|_| format!("invalid index {last:?}"))?;
            if i >= a.len() {
                return Err(format!("index {i} out of range"));
            }
            Ok(a.remove(i))
        }
        _ => Err("remove target is not a container".into()),
    }
}

/// RFC 6902 JSON patch.
pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops
        .as_array()
        .ok_or_else(|| "a JSON patch must be an array of operations".to_string())?;
    for op in ops {
        let name = op["op"].as_str().ok_or("operation without \"op\"")?;
        let pointer = op["path"].as_str().ok_or("operation without \"path\"")?;
        let path = parse_pointer(pointer)?;
        // The words of evanphx/json-patch, the server's, for a target that is not there.
        let parent_missing = path.split_last().is_some_and(|(_, parent)| {
            !get_ptr(doc, parent).is_some_and(|p| p.is_object() || p.is_array())
        });
        match name {
            "add" => {
                if parent_missing {
                    return Err(format!(
                        "add operation does not apply: doc is missing path: \"{pointer}\": missing value"
                    ));
                }
                add(
                    doc,
                    &path,
                    op.get("value").cloned().ok_or("add without value")?,
                )?
            }
            "remove" => {
                if parent_missing {
                    return Err(format!(
                        "remove operation does not apply: doc is missing path: \"{pointer}\": missing value"
                    ));
                }
                if get_ptr(doc, &path).is_none() {
                    let key = path.last().map(String::as_str).unwrap_or_default();
                    return Err(format!(
                        "error in remove for path: '{pointer}': Unable to remove nonexistent key: {key}: missing value"
                    ));
                }
                remove(doc, &path)?;
            }
            "replace" => {
                let value = op.get("value").cloned().ok_or("replace without value")?;
                if path.is_empty() {
                    *doc = value;
                } else {
                    if parent_missing {
                        return Err(format!(
                            "replace operation does not apply: doc is missing path: {pointer}: missing value"
                        ));
                    }
                    if get_ptr(doc, &path).is_none() {
                        return Err(format!(
                            "replace operation does not apply: doc is missing key: {pointer}: missing value"
                        ));
                    }
                    let (last, parent) = path.split_last().ok_or("empty path")?;
                    match parent_mut(doc, parent)? {
                        Value::Object(m) => {
                            m.insert(last.clone(), value);
                        }
                        Value::Array(a) => {
                            let i: usize = last.parse().map_err(|_| "invalid index")?;
                            *a.get_mut(i).ok_or("index out of range")? = value;
                        }
                        _ => return Err("replace target is not a container".into()),
                    }
                }
            }
            "move" => {
                let from = parse_pointer(op["from"].as_str().ok_or("move without from")?)?;
                let v = remove(doc, &from)?;
                add(doc, &path, v)?;
            }
            "copy" => {
                let from = parse_pointer(op["from"].as_str().ok_or("copy without from")?)?;
                let v = get_ptr(doc, &from).cloned().ok_or("copy source missing")?;
                add(doc, &path, v)?;
            }
            "test" => {
                let want = op.get("value").ok_or("test without value")?;
                // As evanphx/json-patch (the server's) does: a null value tests that the member
                // is absent or null, as long as its parent exists.
                let parent_exists = path
                    .split_last()
                    .is_none_or(|(_, parent)| get_ptr(doc, parent).is_some());
                let ok = match get_ptr(doc, &path) {
                    None | Some(Value::Null) => want.is_null() && parent_exists,
                    Some(got) => got == want,
                };
                if !ok {
                    return Err(format!("testing value {pointer} failed: test failed"));
                }
            }
            other => return Err(format!("Unexpected kind: {other}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patch_removes_nulls() {
        let mut d = json!({"a": 1, "b": {"c": 2, "d": 3}});
        merge_patch(&mut d, &json!({"a": null, "b": {"c": 5}}));
        assert_eq!(d, json!({"b": {"c": 5, "d": 3}}));
    }

    #[test]
    fn json_patch_test_of_null_passes_for_a_missing_member() {
        let mut doc = json!({"metadata": {"name": "a"}});
        json_patch(
            &mut doc,
            &json!([{"op": "test", "path": "/metadata/finalizers", "value": null},
                    {"op": "add", "path": "/metadata/finalizers", "value": ["f"]}]),
        )
        .unwrap();
        assert_eq!(doc["metadata"]["finalizers"], json!(["f"]));
        assert!(
            json_patch(
                &mut doc,
                &json!([{"op": "test", "path": "/metadata/finalizers", "value": null}])
            )
            .is_err()
        );
        assert!(
            json_patch(
                &mut doc,
                &json!([{"op": "test", "path": "/spec/missing", "value": null}])
            )
            .is_err()
        );
    }

    #[test]
    fn json_patch_ops() {
        let mut d = json!({"metadata": {"finalizers": ["a", "b"]}});
        json_patch(
            &mut d,
            &json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "a"},
                     {"op": "remove", "path": "/metadata/finalizers/0"},
                     {"op": "add", "path": "/metadata/labels", "value": {"x": "y"}},
                     {"op": "add", "path": "/metadata/finalizers/-", "value": "c"},
                     {"op": "replace", "path": "/metadata/labels/x", "value": "z"}]),
        )
        .unwrap();
        assert_eq!(
            d,
            json!({"metadata": {"finalizers": ["b", "c"], "labels": {"x": "z"}}})
        );
        assert!(
            json_patch(
                &mut d,
                &json!([{"op": "test", "path": "/metadata/labels/x", "value": "q"}])
            )
            .is_err()
        );
        assert!(json_patch(&mut d, &json!([{"op": "remove", "path": "/nope"}])).is_err());
    }
}
